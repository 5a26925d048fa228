import { errorMessage, MnemeError } from "../model/errors.js";
import type { ReadmodelCommits } from "./readmodel-commits.js";
import type { EventType } from "../model/tokens.js";
import type { Event } from "../model/types.js";
import type { EventRepository } from "../store/event-repository.js";
import type { ReadmodelStoreBackend } from "../store/readmodel-store-backend.js";
import type { BoundTransaction } from "../store/bound-transaction.js";
import { leasedBackend, type LeasedReadmodelStoreBackend } from "../store/leased-readmodel-backend.js";
import type { SystemEventKind } from "../model/system-event-kind.js";
import type {
  DomainEventHandler,
  EventHandler,
  EventHandlerState,
  IntegrationInfo,
  RebuildPhase,
  RestorationState,
  RestoreReport,
} from "../model/event-handler.js";
import type { Telemetry } from "../observability/telemetry.js";
import { HandlerMetrics } from "./handler-metrics.js";
import { type LaneRead, sharedPageSize } from "./partition-reader.js";
import { partitionOf } from "./partition-routing.js";
import type { SharedCheckpointWatch } from "./shared-checkpoint-watch.js";

/**
 * What the facade gives a handler when it is registered: where events come
 * from, where checkpoints go, where system events are published.
 * @internal
 */
export interface HandlerHost {
  readonly eventRepository: EventRepository;
  /** The facade's default readmodel backend (checkpoints of plain handlers). */
  readonly readmodelStoreBackend: ReadmodelStoreBackend;
  publish(kind: SystemEventKind, data: Record<string, unknown>, tenantUuid?: string): void;
  /** The highest position the facade has seen (for lag). */
  knownHead(): number;
  noteHead(position: number): void;
  /** The registered event type of a path "Domain.Name" (a ProjectionReadmodel resolves its aggregate's events with it). */
  eventType?(path: string): EventType | undefined;
  /** The facade's OpenTelemetry reporting, when it has any (spans of batches and restorations, handler metrics). */
  telemetry?(): Telemetry | undefined;
  /** The facade's instance id: recorded as the holder of the locks it takes, listed as `holder`. */
  readonly instanceId?: string;
  /** Told after each batch that committed with its checkpoint (live queries run again on it). */
  readonly commits?: ReadmodelCommits;
}

/** Tuning of delivery and restoration. */
export interface DeliveryOptions {
  /** Events per replay page and backend transaction. Default 1000. */
  restoreBatchSize: number;
  /** Live events buffered during a restoration before the buffer is dropped and the store is read instead. Default 10,000. */
  catchBufferLimit: number;
  /** Publish RestoreProgress every this many events. Default 50,000. */
  progressEvery: number;
  /** In standby (another instance holds the handler's lock), try to take it over this often. Default 1000 ms. */
  lockRetryMs: number;
  /**
   * After a batch failed with UNAVAILABLE (the database could not be reached), wait this long
   * before reading the checkpoint and the store again; doubled after each failed try. Default 50 ms.
   */
  retryInitialMs: number;
  /** The longest wait between such tries. Default 5000 ms. */
  retryMaxMs: number;
  /**
   * `waitToFinish` on an instance where the handler is in standby waits this long for the
   * checkpoint of the instance holding its lock to pass the command's events; past it,
   * `handlerErrors` says how far that checkpoint got. Default 5000 ms.
   */
  standbyWaitMs: number;
  /** Meanwhile the shared checkpoint is read again after 2 ms, then at doubling intervals up to this. Default 50 ms. */
  standbyPollMs: number;
}

export const DEFAULT_DELIVERY: DeliveryOptions = Object.freeze({
  restoreBatchSize: 1000,
  catchBufferLimit: 10_000,
  progressEvery: 50_000,
  lockRetryMs: 1000,
  retryInitialMs: 50,
  retryMaxMs: 5000,
  standbyWaitMs: 5000,
  standbyPollMs: 50,
});

/** A handler function failed on `event`. */
export class HandlerFailure extends Error {
  constructor(
    readonly event: Event,
    readonly error: unknown,
  ) {
    super(`handler failed on ${event.domain}.${event.name} at position ${event.position}: ${errorMessage(error)}`, { cause: error });
  }
}

/**
 * The handler's own hooks, as closures made inside its class (so they stay
 * protected there): the runner calls them, nothing else does.
 * @internal
 */
export interface RunnerHooks {
  /** Inside the batch's transaction, before its events are handled. */
  beforeBatch(events: readonly Event[]): Promise<void>;
  /** Inside the batch's transaction, after its events were handled. */
  afterBatch(): Promise<void>;
  /** The batch was rolled back. */
  discardBatch(): void;
  /** Clears the handler's own state before a restoration from zero (inside the reset's transaction). */
  resetState(): Promise<void>;
  /** The handler is about to go live (start, restore): its parts start (an outbox's worker). */
  starting(): void;
  /** The handler is being stopped: its parts stop first. */
  stopping(): Promise<void>;
  /** What its broker part (a publisher's, a consumer's) says for the Runtime's listing, if it has one. */
  describe(): IntegrationInfo | undefined;
}

/**
 * A handler whose batches can run in a transaction handed to it (a backend's
 * BoundTransaction) instead of one told by async context: its own hooks do
 * every write of the batch through the transaction they are given, and its
 * handler functions write nothing (ProjectionReadmodel configures its runner
 * so). Used for a live or catch-up batch of a handler that runs as one, on a
 * backend that declares bound transactions; a rebuild's batch and a
 * partition's go the usual way.
 * @internal
 */
export interface BoundBatchHooks {
  /** Whether the next batch may run so (nothing was added since that writes through the handler's collections). */
  eligible(): boolean;
  /** Inside the batch's transaction, before its events are handled (instead of RunnerHooks.beforeBatch). */
  beforeBatch(events: readonly Event[], tx: BoundTransaction): Promise<void>;
  /** Inside the batch's transaction, after its events were handled (instead of RunnerHooks.afterBatch). */
  afterBatch(tx: BoundTransaction): Promise<void>;
}

/**
 * What makes a runner's handler a state restorer (BaseReadmodel configures its runner so).
 * @internal
 */
export interface RestorerConfig {
  /** Where the readmodel's documents and checkpoint live. */
  backend(): ReadmodelStoreBackend;
  /** Per-readmodel delivery overrides, applied when the handler is registered. */
  options(): { readonly restoreBatchSize?: number | undefined; readonly catchBufferLimit?: number | undefined };
  /** The handler's own (possibly overridden) restoreState: how it goes live and takes over. */
  restoreState(opts: { fromZero?: boolean }): { done: Promise<RestoreReport> };
}

/** The runner's record of a rebuild (a restore from zero into the next generation). */
export interface Rebuild {
  phase: RebuildPhase;
  readonly servedPosition: number;
  readonly servedTimestamp: number;
  targetHead: number;
  readonly startedAt: number;
  replayed: number;
}

/**
 * What makes a runner one lane of a partitioned handler (see
 * PartitionedRunner): the events of its partition only, its own checkpoint
 * and lock under `key`, standby retries driven by the partition balancer,
 * and its batches serialised with those of the other lanes of this process.
 * @internal
 */
export interface PartitionLane {
  readonly index: number;
  readonly count: number;
  /** The checkpoint and lock key of this partition. */
  readonly key: string;
  /** Runs a batch's transaction after those of the other lanes here (they share the handler's hooks). */
  gate<R>(fn: () => Promise<R>): Promise<R>;
  /** Reads the store as `readAll` does, through the one reader the lanes of this process share (see PartitionReader). */
  pages(read: LaneRead): AsyncIterable<Event[]>;
  /**
   * Set on lane 0 while it restores the whole handler from zero: it applies
   * every partition's events, each batch fenced by every lane's lock too, and
   * the switch moves every partition's checkpoint. Cleared at the switch.
   */
  whole: WholeRebuild | undefined;
}

/** A restore from zero of every partition, run by lane 0 (see PartitionLane.whole). */
export interface WholeRebuild {
  /** The other lanes' keys and fencing tokens (their locks are held here meanwhile). */
  fences(): readonly (readonly [key: string, token: number | undefined])[];
  /** Every partition's checkpoint key: the switch sets them all. */
  readonly keys: readonly string[];
  /** Written at the switch too: the record of the partition count. */
  readonly countKey: string;
}

const NO_HANDLERS: DomainEventHandler[] = [];

interface Waiter {
  from: number;
  to: number;
  resolve: (e: Error | undefined) => void;
}

/** An item of the live queue: committed events, or null for "read the store". */
export type QueueItem = readonly Event[] | null;

/**
 * The live queue: first in, first out, each take O(1). An array's `shift`
 * moves every element once the array is large (in V8, from about 16,000
 * items: 30 µs a take at 20,000), and a pump behind a burst of commands takes
 * from a long queue: it would spend more time taking than applying.
 * @internal
 */
export class LiveQueue {
  #items: (QueueItem | undefined)[] = [];
  #head = 0;

  get length(): number {
    return this.#items.length - this.#head;
  }

  push(item: QueueItem): void {
    this.#items.push(item);
  }

  /** The next item without taking it; undefined when empty. */
  peek(): QueueItem | undefined {
    return this.#items[this.#head];
  }

  /** Takes the next item; undefined when empty. */
  take(): QueueItem | undefined {
    if (this.#head === this.#items.length) return undefined;
    const item = this.#items[this.#head];
    this.#items[this.#head++] = undefined;
    if (this.#head === this.#items.length) this.clear();
    // Taken slots are dropped now and then, so a queue that never empties stays as long as what it holds.
    else if (this.#head >= 1024 && this.#head * 2 >= this.#items.length) {
      this.#items = this.#items.slice(this.#head);
      this.#head = 0;
    }
    return item;
  }

  clear(): void {
    this.#items = [];
    this.#head = 0;
  }
}

/**
 * Every piece of a runner's state, in one object that the runner makes and
 * holds: its parts (delivery, restoration, locks and standby, listing) read
 * and write it; nothing outside the runner reaches it. Besides the fields, it
 * holds what every part needs: the host, the backend, the state changes with
 * their system event, and the waiters of `waitFor`.
 * @internal
 */
export class RunnerState {
  readonly handler: EventHandler;
  readonly hooks: RunnerHooks;
  restorer: RestorerConfig | undefined;
  /** Set by a handler whose batches can run in a bound transaction (see BoundBatchHooks). */
  bound: BoundBatchHooks | undefined;
  host: HandlerHost | undefined;
  delivery: DeliveryOptions = DEFAULT_DELIVERY;
  readonly metrics = new HandlerMetrics();
  /** Set when this runner is one lane of a partitioned handler. */
  partition: PartitionLane | undefined;

  lastPosition = 0;
  lastEventTimestamp = 0;
  persistedPosition = 0;
  state: EventHandlerState = "stopped";
  restorationState: RestorationState = "idle";
  resolved = new Map<string, DomainEventHandler[]>();

  // live delivery
  readonly queue = new LiveQueue();
  pumping: Promise<void> | undefined;
  waiters: Waiter[] = [];
  failedAt = 0;
  failure: Error | undefined;

  // restoration hand-off
  caught: Event[] = [];
  catching = false;
  catchOverflow = false;
  catchPull = false;
  /** The restoration running; `catchUp`: the runner's own from the checkpoint (a start or a takeover), not one asked for. */
  restore: { controller: AbortController; done: Promise<RestoreReport>; catchUp: boolean } | undefined;
  /** Set while events were passed (none of them this handler's) and the checkpoint lags: writes it once idle. */
  passTimer: ReturnType<typeof setTimeout> | undefined;
  /** The pass timer fired: the pump writes the checkpoint once its queue is empty. */
  persistDue = false;
  /** True while the runner starts its own catch-up (see HandlerRunner's resume): the restore it starts is marked so. */
  resuming = false;
  /** A restore from zero building the next generation; undefined otherwise (and once it switched). */
  rebuild: Rebuild | undefined;

  // single-processor lock (backends with tryLock)
  lockHeld = false;
  /** The fencing token of the lock this instance holds (undefined: no lock, or a backend without tokens). */
  token: number | undefined;
  /** In standby: the holder of the lock and the shared checkpoint, as last read (listed instead of this instance's own). */
  standbyView: { holder: string | undefined; position: number } | undefined;
  standbyTimer: ReturnType<typeof setTimeout> | undefined;
  offLockLost: (() => void) | undefined;
  /** A standby retry took the lock and is catching up (standby -> stopped -> running). */
  takingOver = false;
  readonly standbyWaiters = new Set<() => void>();
  /** Reads the holder's checkpoint for waitToFinish while in standby (made on first use). */
  holderWatch: SharedCheckpointWatch | undefined;

  // retry after UNAVAILABLE (the database could not be reached)
  retryTimer: ReturnType<typeof setTimeout> | undefined;
  retryDelay = 0;
  retryError: MnemeError | undefined;
  /** Set when a batch failed with UNAVAILABLE: the pump reads the checkpoint again before it goes on. */
  resync = false;

  /**
   * The async context the runner was made in. Delivery starts in it, not in
   * the context of whoever appended: a command dispatched from inside another
   * handler's batch would otherwise start this handler's delivery inside that
   * batch's transaction (the backends keep their open transaction in
   * AsyncLocalStorage) or inside a rebuild's next generation.
   */
  readonly detached: <R>(fn: () => R) => R;

  constructor(handler: EventHandler, hooks: RunnerHooks, detached: <R>(fn: () => R) => R) {
    this.handler = handler;
    this.hooks = hooks;
    this.detached = detached;
  }

  get name(): string {
    return this.handler.name;
  }

  /** The key of this runner's checkpoint and lock: the handler's name, or its partition's key. */
  get key(): string {
    return this.partition?.key ?? this.handler.name;
  }

  /** Whether the handler can rebuild its state (a BaseReadmodel). */
  get isStateRestorer(): boolean {
    return this.restorer !== undefined;
  }

  /** Where this handler's checkpoint (and, for readmodels, documents) live, with every lease method (see leasedBackend). */
  backend(): LeasedReadmodelStoreBackend {
    return leasedBackend(this.restorer !== undefined ? this.restorer.backend() : this.requireHost().readmodelStoreBackend);
  }

  requireHost(): HandlerHost {
    if (this.host === undefined) throw new MnemeError("NOT_STARTED", `event handler ${this.name} is not registered with a facade`);
    return this.host;
  }

  /** Handlers for a stored event, cached per path. */
  handlersFor(event: Event): DomainEventHandler[] {
    const p = this.partition;
    const path = `${event.domain}.${event.name}`;
    if (p !== undefined && p.whole === undefined && partitionOf(event.aggregateUuid, p.count) !== p.index) {
      // Another partition's event: only the handlers that run in every partition (a subject's erasure) take it.
      const key = `\0${path}`;
      let every = this.resolved.get(key);
      if (every === undefined) {
        every = this.handler.getDomainEventHandlers(path).filter((h) => h.everyPartition === true);
        this.resolved.set(key, every.length === 0 ? NO_HANDLERS : every);
      }
      return every;
    }
    let fns = this.resolved.get(path);
    if (fns === undefined) {
      fns = this.handler.getDomainEventHandlers(path);
      this.resolved.set(path, fns);
    }
    return fns;
  }

  handlesAllEvents(): boolean {
    return this.handler.getDomainEventHandlers("*").length > 0;
  }

  /** Paths this handler needs read from the store, or undefined for every event. */
  eventPathFilter(): string[] | undefined {
    return this.handlesAllEvents() ? undefined : this.handler.getDomainEvents().map((t) => t.path);
  }

  /**
   * The events this handler reads after `afterPosition`, in pages of
   * `restoreBatchSize`; a lane's through the reader its partitions share, in
   * pages that hold about `restoreBatchSize` events of each partition (so
   * that its transactions are as large as an unpartitioned handler's).
   */
  readAfter(afterPosition: number, signal?: AbortSignal): AsyncIterable<Event[]> {
    const filter = this.eventPathFilter();
    const p = this.partition;
    const size = this.delivery.restoreBatchSize;
    const read: LaneRead = {
      afterPosition,
      batchSize: p === undefined || p.whole !== undefined ? size : sharedPageSize(size, p.count),
      ...(signal === undefined ? {} : { signal }),
      ...(filter === undefined ? {} : { eventPaths: filter }),
    };
    return this.partition?.pages(read) ?? this.requireHost().eventRepository.readAll(read);
  }

  /** The createdAt (ns) of the event at `position`; 0 for position 0 or when no event is stored there. */
  async timestampAt(position: number): Promise<number> {
    if (position <= 0) return 0;
    const host = this.requireHost();
    for await (const batch of host.eventRepository.readAll({ afterPosition: position - 1, untilPosition: position, batchSize: 1 })) {
      const e = batch[0];
      return e !== undefined && e.position === position ? e.createdAt : 0;
    }
    return 0;
  }

  setState(state: EventHandlerState): void {
    if (this.state === state) return;
    const from = this.state;
    this.state = state;
    if (state !== "running") this.clearRetry();
    this.host?.publish("EventHandlerStateChanged", {
      eventHandlerName: this.name,
      from,
      to: state,
      restorationState: this.restorationState,
    });
    this.wake();
  }

  clearRetry(): void {
    if (this.retryTimer !== undefined) clearTimeout(this.retryTimer);
    this.retryTimer = undefined;
  }

  // ---------------------------------------------------------------- waiters

  /**
   * Resolves when the handler has processed up to `to` (undefined), failed on an
   * event in [from, to] (that error), stepped back to standby before reaching `to`
   * (its `standbyError()`), or is stopped (undefined).
   */
  waitFor(from: number, to: number): Promise<Error | undefined> {
    const settled = this.#settle(from, to);
    if (settled !== null) return Promise.resolve(settled);
    return new Promise((resolve) => this.waiters.push({ from, to, resolve }));
  }

  #settle(from: number, to: number): Error | undefined | null {
    // During a rebuild queries read the served generation: an event is there only after the switch.
    if ((this.rebuild?.servedPosition ?? this.lastPosition) >= to) return undefined;
    if (this.state === "failed") return this.failedAt >= from && this.failedAt <= to ? this.failure : undefined;
    if (this.state === "standby" && !this.catching) return this.standbyError();
    if (this.state === "stopped" && !this.catching) return undefined;
    // Waiting out a backoff after UNAVAILABLE: report it rather than wait for the database to come back.
    if (this.retryTimer !== undefined && this.retryError !== undefined) return this.retryError;
    return null;
  }

  /**
   * What `waitToFinish` reports for this handler while it is in standby: the
   * events were not applied here (another instance holds its processing lock).
   */
  standbyError(): MnemeError {
    const name = this.name;
    return new MnemeError(
      "INVALID_STATE",
      `event handler ${name} is in standby (another instance holds its processing lock): it has not applied these events here (at position ${this.lastPosition})`,
      { details: [{ message: "standby", eventHandlerName: name, state: "standby", lastPosition: this.lastPosition }] },
    );
  }

  wake(): void {
    if (this.waiters.length === 0) return;
    const keep: Waiter[] = [];
    for (const w of this.waiters) {
      const s = this.#settle(w.from, w.to);
      if (s === null) keep.push(w);
      else w.resolve(s);
    }
    this.waiters = keep;
  }

  /**
   * A restoration ends without going live: live events are no longer caught,
   * and a waiter kept only because they were is answered now. One that began
   * during a restoration that then lost the lock (standby reached while still
   * catching, so #settle kept it) would otherwise wait until this instance
   * took the lock back, or for ever.
   */
  stopCatching(): void {
    this.catching = false;
    this.wake();
  }
}

/** A process warning with a code (where the platform has them), as the other start-up warnings. */
export function warn(message: string, code: string): void {
  const p = (globalThis as { process?: { emitWarning?: (m: string, o: { code: string }) => void } }).process;
  if (typeof p?.emitWarning === "function") p.emitWarning(message, { code });
}
