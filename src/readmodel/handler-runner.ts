import { AsyncLocalStorage } from "node:async_hooks";
import { errorMessage, isMnemeError, MnemeError } from "../model/errors.js";
import type { EventType } from "../model/tokens.js";
import type { Event } from "../model/types.js";
import type { EventRepository } from "../store/event-repository.js";
import type { ReadmodelStoreBackend } from "../store/readmodel-store-backend.js";
import { isLockLostError, lockLostError } from "../store/lock-fencing.js";
import type { SystemEventKind } from "../model/system-event-kind.js";
import type {
  DomainEventHandler,
  EventHandler,
  EventHandlerInfo,
  EventHandlerMetrics,
  EventHandlerState,
  HandlerContext,
  RestorationState,
  RestoreReport,
} from "../model/event-handler.js";
import type { Telemetry } from "../observability/telemetry.js";
import { HandlerMetrics } from "./handler-metrics.js";
import { SharedCheckpointWatch, type CheckpointWaitResult } from "./shared-checkpoint-watch.js";
import {
  clearNextGeneration,
  inNextGeneration,
  nextGenerationCheckpoint,
  supportsGenerations,
  switchGenerations,
  type CollectionReplacing,
} from "./readmodel-generations.js";

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
}

/** Lockable backends without fencing tokens that were warned about already (once per backend). */
const warnedUnfenced = new WeakSet<object>();

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

import type { RebuildPhase } from "../model/event-handler.js";
export type { RebuildPhase, RestorationProgress } from "../model/event-handler.js";

/** A handler's record in the Runtime's listing (its info, with `restoration` during a restore from zero). */
export type EventHandlerListing = EventHandlerInfo;

/** The runner's record of a rebuild (a restore from zero into the next generation). */
interface Rebuild {
  phase: RebuildPhase;
  readonly servedPosition: number;
  readonly servedTimestamp: number;
  targetHead: number;
  readonly startedAt: number;
  replayed: number;
}

interface Waiter {
  from: number;
  to: number;
  resolve: (e: Error | undefined) => void;
}

type QueueItem = readonly Event[] | null; // null: read from the store

/** Handler -> its runner. Owned by src/readmodel; src/app and src/runtime reach a runner only through `runnerOf`. */
const runners = new WeakMap<object, HandlerRunner>();

/**
 * @internal The runner of a BaseEventHandler (or BaseReadmodel). Not exported by the package:
 * the facade and the Runtime use it; a subclass has no way to it.
 */
export function runnerOf(handler: object): HandlerRunner {
  const r = runners.get(handler);
  if (r === undefined) throw new MnemeError("INVALID_EVENT_HANDLER", "not an event handler made by BaseEventHandler or BaseReadmodel");
  return r;
}

/**
 * Runs one event handler: live delivery in position order, exactly once, a
 * persisted checkpoint, restoration with the hand-off of live events,
 * start/stop, the single-processor lock and standby, retries after
 * UNAVAILABLE, failure isolation and metrics. Its state is its own: the
 * handler shows it through read-only getters.
 * @internal
 */
export class HandlerRunner {
  readonly #h: EventHandler;
  readonly #hooks: RunnerHooks;
  #restorer: RestorerConfig | undefined;
  readonly #onAttach: ((host: HandlerHost) => void)[] = [];
  #host: HandlerHost | undefined;
  #delivery: DeliveryOptions = DEFAULT_DELIVERY;
  readonly #metrics = new HandlerMetrics();

  #lastPosition = 0;
  #lastEventTimestamp = 0;
  #caught: Event[] = [];
  #restorationState: RestorationState = "idle";

  #resolved = new Map<string, DomainEventHandler[]>();
  #state: EventHandlerState = "stopped";
  #queue: QueueItem[] = [];
  #pumping: Promise<void> | undefined;
  #waiters: Waiter[] = [];
  #failedAt = 0;
  #failure: Error | undefined;
  #persistedPosition = 0;
  // restoration hand-off
  #catching = false;
  #catchOverflow = false;
  #catchPull = false;
  #restore: { controller: AbortController; done: Promise<RestoreReport> } | undefined;
  /** A restore from zero building the next generation; undefined otherwise (and once it switched). */
  #rebuild: Rebuild | undefined;
  // single-processor lock (backends with tryLock)
  #lockHeld = false;
  /** The fencing token of the lock this instance holds (undefined: no lock, or a backend without tokens). */
  #token: number | undefined;
  /** In standby: the holder of the lock and the shared checkpoint, as last read (listed instead of this instance's own). */
  #standbyView: { holder: string | undefined; position: number } | undefined;
  #standbyTimer: ReturnType<typeof setTimeout> | undefined;
  #offLockLost: (() => void) | undefined;
  // retry after UNAVAILABLE (the database could not be reached)
  #retryTimer: ReturnType<typeof setTimeout> | undefined;
  #retryDelay = 0;
  #retryError: MnemeError | undefined;
  /** Set when a batch failed with UNAVAILABLE: the pump reads the checkpoint again before it goes on. */
  #resync = false;
  /** A standby retry took the lock and is catching up (standby -> stopped -> running). */
  #takingOver = false;
  readonly #standbyWaiters = new Set<() => void>();
  /** Reads the holder's checkpoint for waitToFinish while in standby (made on first use). */
  #holderWatch: SharedCheckpointWatch | undefined;
  /**
   * The async context the runner was made in. Delivery starts in it, not in
   * the context of whoever appended: a command dispatched from inside another
   * handler's batch would otherwise start this handler's delivery inside that
   * batch's transaction (the backends keep their open transaction in
   * AsyncLocalStorage) or inside a rebuild's next generation.
   */
  readonly #detached: <R>(fn: () => R) => R = AsyncLocalStorage.snapshot();

  /** Makes the runner of `handler` (one per handler, found again with `runnerOf`). */
  constructor(handler: EventHandler, hooks: RunnerHooks) {
    if (runners.has(handler)) throw new MnemeError("INVALID_EVENT_HANDLER", "this event handler has a runner already");
    this.#h = handler;
    this.#hooks = hooks;
    runners.set(handler, this);
  }

  // ---------------------------------------------------------------- configuration

  /** Makes the handler a state restorer (BaseReadmodel). */
  configureRestorer(config: RestorerConfig): void {
    this.#restorer = config;
  }

  /** Runs `fn` when the handler is registered with a facade, after the host is set. */
  onAttach(fn: (host: HandlerHost) => void): void {
    this.#onAttach.push(fn);
  }

  /** Called by the facade on registration. */
  attach(host: HandlerHost, delivery: DeliveryOptions = DEFAULT_DELIVERY): void {
    const own = this.#restorer?.options();
    this.#host = host;
    this.#delivery =
      own === undefined
        ? delivery
        : {
            ...delivery,
            restoreBatchSize: own.restoreBatchSize ?? delivery.restoreBatchSize,
            catchBufferLimit: own.catchBufferLimit ?? delivery.catchBufferLimit,
          };
    this.#resolved = new Map();
    for (const fn of this.#onAttach) fn(host);
  }

  /** The handler's map of handler functions changed: forget the resolved lookups. */
  invalidate(): void {
    this.#resolved = new Map();
  }

  // ---------------------------------------------------------------- read-only state

  get state(): EventHandlerState {
    return this.#state;
  }

  get lastPosition(): number {
    return this.#lastPosition;
  }

  get lastEventTimestamp(): number {
    return this.#lastEventTimestamp;
  }

  get restorationState(): RestorationState {
    return this.#restorationState;
  }

  /** The live events caught by the current (or last) restoration, as a copy. */
  get catchedEvents(): readonly Event[] {
    return Object.freeze(this.#caught.slice());
  }

  /** Whether a restoration is running. */
  get restoring(): boolean {
    return this.#restore !== undefined;
  }

  /** Whether the handler can rebuild its state (a BaseReadmodel). */
  get isStateRestorer(): boolean {
    return this.#restorer !== undefined;
  }

  /** Metrics of event processing. */
  getMetrics(): EventHandlerMetrics {
    return this.#metrics.snapshot(this.#lastPosition, this.#lastEventTimestamp, this.#host?.knownHead() ?? this.#lastPosition);
  }

  /** The record the Runtime lists. */
  info(): EventHandlerListing {
    const h = this.#h;
    const info: EventHandlerListing = {
      eventHandlerName: h.name,
      domain: h.domain,
      name: h.name,
      state: this.#state,
      restorationState: this.#restorationState,
      domainEvents: h
        .getDomainEvents()
        .map((t) => t.path)
        .concat(this.#handlesAllEvents() ? ["*"] : []),
      lastPosition: this.#lastPosition,
      lastEventTimestamp: this.#lastEventTimestamp,
      hasMetrics: this.isStateRestorer,
      isStateRestorer: this.isStateRestorer,
    };
    const holder = this.#holder();
    if (holder !== undefined) info.holder = holder;
    const view = this.#state === "standby" ? this.#standbyView : undefined;
    if (view !== undefined) info.lastPosition = view.position;
    if (this.#metrics.lastError !== undefined && this.#state === "failed") {
      info.lastError = this.#metrics.lastError;
      if (this.#metrics.lastErrorTenantUuid !== undefined) info.lastErrorTenantUuid = this.#metrics.lastErrorTenantUuid;
    }
    const r = this.#rebuild;
    if (r !== undefined) {
      const seconds = (performance.now() - r.startedAt) / 1000;
      info.restoration = {
        phase: r.phase,
        position: this.#lastPosition,
        targetHead: Math.max(r.targetHead, this.#lastPosition),
        servedPosition: r.servedPosition,
        eventsReplayed: r.replayed,
        eventsPerSecond: seconds > 0 ? r.replayed / seconds : 0,
      };
    }
    return info;
  }

  /** The instance processing the handler, as far as this one knows: itself, or in standby the lock's recorded holder. */
  #holder(): string | undefined {
    if (this.#state === "standby") return this.#standbyView?.holder;
    const own = this.#host?.instanceId;
    if (this.#host === undefined || this.#backend().tryLock === undefined) return this.#state === "stopped" ? undefined : own;
    return this.#lockHeld ? own : undefined;
  }

  /** Handlers for a stored event, cached per path. */
  handlersFor(event: Event): DomainEventHandler[] {
    const path = `${event.domain}.${event.name}`;
    let fns = this.#resolved.get(path);
    if (fns === undefined) {
      fns = this.#h.getDomainEventHandlers(path);
      this.#resolved.set(path, fns);
    }
    return fns;
  }

  #handlesAllEvents(): boolean {
    return this.#h.getDomainEventHandlers("*").length > 0;
  }

  /** Paths this handler needs read from the store, or undefined for every event. */
  #eventPathFilter(): string[] | undefined {
    return this.#handlesAllEvents() ? undefined : this.#h.getDomainEvents().map((t) => t.path);
  }

  /** Where this handler's checkpoint (and, for readmodels, documents) live. */
  #backend(): ReadmodelStoreBackend {
    if (this.#restorer !== undefined) return this.#restorer.backend();
    return this.#requireHost().readmodelStoreBackend;
  }

  #requireHost(): HandlerHost {
    if (this.#host === undefined) throw new MnemeError("NOT_STARTED", `event handler ${this.#h.name} is not registered with a facade`);
    return this.#host;
  }

  // ---------------------------------------------------------------- live delivery

  /** Live delivery: committed events (in commit order), or null for "read the store". */
  notify(events: readonly Event[] | null): void {
    if (this.#catching) {
      if (events === null) {
        this.#catchPull = true;
      } else {
        this.#metrics.eventsCaught += events.length;
        if (!this.#catchOverflow && this.#caught.length + events.length <= this.#delivery.catchBufferLimit) {
          for (const e of events) this.#caught.push(e);
        } else {
          this.#catchOverflow = true;
        }
      }
      return;
    }
    if (this.#state !== "running") return;
    this.#queue.push(events);
    // While a retry after UNAVAILABLE waits out its backoff, its timer starts the pump.
    if (this.#retryTimer === undefined) this.#startPump();
  }

  /**
   * Resolves when the handler has processed up to `to` (undefined), failed on an
   * event in [from, to] (that error), stepped back to standby before reaching `to`
   * (its `standbyError()`), or is stopped (undefined).
   */
  waitFor(from: number, to: number): Promise<Error | undefined> {
    const settled = this.#settle(from, to);
    if (settled !== null) return Promise.resolve(settled);
    return new Promise((resolve) => this.#waiters.push({ from, to, resolve }));
  }

  #settle(from: number, to: number): Error | undefined | null {
    // During a rebuild queries read the served generation: an event is there only after the switch.
    if ((this.#rebuild?.servedPosition ?? this.#lastPosition) >= to) return undefined;
    if (this.#state === "failed") return this.#failedAt >= from && this.#failedAt <= to ? this.#failure : undefined;
    if (this.#state === "standby" && !this.#catching) return this.standbyError();
    if (this.#state === "stopped" && !this.#catching) return undefined;
    // Waiting out a backoff after UNAVAILABLE: report it rather than wait for the database to come back.
    if (this.#retryTimer !== undefined && this.#retryError !== undefined) return this.#retryError;
    return null;
  }

  /**
   * What `waitToFinish` reports for this handler while it is in standby: the
   * events were not applied here (another instance holds its processing lock).
   */
  standbyError(): MnemeError {
    const name = this.#h.name;
    return new MnemeError(
      "INVALID_STATE",
      `event handler ${name} is in standby (another instance holds its processing lock): it has not applied these events here (at position ${this.#lastPosition})`,
      { details: [{ message: "standby", eventHandlerName: name, state: "standby", lastPosition: this.#lastPosition }] },
    );
  }

  #wake(): void {
    if (this.#waiters.length === 0) return;
    const keep: Waiter[] = [];
    for (const w of this.#waiters) {
      const s = this.#settle(w.from, w.to);
      if (s === null) keep.push(w);
      else w.resolve(s);
    }
    this.#waiters = keep;
  }

  /**
   * Starts the pump unless one runs. `#pumping` is set here only, before the
   * pump can settle (a `then` callback never runs synchronously), and cleared
   * only when that same pump settles: a pump that ends without awaiting (every
   * queued event applied already) can never be left behind looking like a
   * running one, which would keep later events queued with no pump to apply
   * them and make `idle()` spin.
   */
  #startPump(): void {
    if (this.#pumping !== undefined) return;
    const pump: Promise<void> = this.#detached(() => this.#pump()).then(
      () => this.#pumpSettled(pump),
      (err: unknown) => {
        // #pump reports its own errors; one escaping it (from that report) still fails the handler, never the process.
        try {
          if (this.#state !== "failed") this.#fail(err);
        } finally {
          this.#pumpSettled(pump);
        }
      },
    );
    this.#pumping = pump;
  }

  #pumpSettled(pump: Promise<void>): void {
    if (this.#pumping === pump) this.#pumping = undefined;
    this.#wake();
    // work queued while the last await settled
    if (this.#queue.length > 0 && this.#state === "running" && !this.#catching && this.#retryTimer === undefined) this.#startPump();
  }

  /** Applies what is queued, in position order. Only `#startPump` runs it. */
  async #pump(): Promise<void> {
    try {
      while (this.#queue.length > 0 && this.#state === "running") {
        if (this.#resync) await this.#readCheckpointAgain();
        const item = this.#queue.shift()!;
        if (item === null) {
          while (this.#queue[0] === null) this.#queue.shift(); // coalesce reads
          await this.#pull();
          continue;
        }
        let i = 0;
        while (i < item.length && item[i]!.position <= this.#lastPosition) i++;
        if (i === item.length) continue;
        if (item[i]!.position !== this.#lastPosition + 1) {
          // A gap: something committed before these is not applied yet. The store decides.
          await this.#pull();
          continue;
        }
        let j = i + 1;
        while (j < item.length && item[j]!.position === item[j - 1]!.position + 1) j++;
        await this.#apply(i === 0 && j === item.length ? item : item.slice(i, j), false);
        if (j < item.length) await this.#pull();
        this.#wake();
      }
      if (this.#retryError !== undefined && this.#state === "running" && !this.#resync) this.#recovered();
    } catch (err) {
      // A batch refused because the processing lock was lost is not the handler's failure: it waits in standby
      // (or, a batch of an earlier hold of the lock, is simply dropped: the current hold reads the checkpoint).
      // One that failed because the database was unreachable is retried from the checkpoint after a backoff.
      if (this.#state !== "standby" && !isLockLostError(err) && this.#retryLater(err) === undefined) this.#fail(err);
    }
  }

  /**
   * After UNAVAILABLE: the failed batch may have committed (a COMMIT cut off) or not, so
   * the persisted checkpoint, not lastPosition, says where to go on. Runs inside the pump.
   */
  async #readCheckpointAgain(): Promise<void> {
    const checkpoint = await this.#backend().getCheckpoint(this.#h.name);
    this.#resync = false;
    this.#lastPosition = checkpoint;
    this.#persistedPosition = checkpoint;
  }

  /**
   * When `err` is UNAVAILABLE (the database could not be reached), schedules a retry
   * (the pump reads the checkpoint and the store again) after a backoff doubling from
   * `retryInitialMs` to `retryMaxMs`, and returns that error; else returns undefined.
   * The handler stays running meanwhile; waitToFinish reports the error.
   */
  #retryLater(err: unknown): MnemeError | undefined {
    const cause = err instanceof HandlerFailure ? err.error : err;
    if (!isMnemeError(cause, "UNAVAILABLE") || this.#state !== "running") return undefined;
    this.#metrics.lastError = errorMessage(cause);
    this.#retryError = cause;
    this.#resync = true;
    this.#queue = [];
    const { retryInitialMs, retryMaxMs } = this.#delivery;
    this.#retryDelay = this.#retryDelay === 0 ? retryInitialMs : Math.min(retryMaxMs, this.#retryDelay * 2);
    this.#clearRetry();
    const timer = setTimeout(() => {
      if (this.#retryTimer !== timer) return;
      this.#retryTimer = undefined;
      if (this.#state !== "running" || this.#catching) return;
      this.#queue.push(null);
      this.#startPump();
    }, this.#retryDelay);
    (timer as { unref?: () => void }).unref?.();
    this.#retryTimer = timer;
    this.#wake();
    return cause;
  }

  /** A retry after UNAVAILABLE went through: the backoff starts over; a restore that failed so is whole again. */
  #recovered(): void {
    this.#retryError = undefined;
    this.#retryDelay = 0;
    if (this.isStateRestorer && this.#restorationState === "failed") this.#restorationState = "restored";
  }

  #clearRetry(): void {
    if (this.#retryTimer !== undefined) clearTimeout(this.#retryTimer);
    this.#retryTimer = undefined;
  }

  /** Reads everything after lastPosition from the store and applies it. */
  async #pull(): Promise<void> {
    const host = this.#requireHost();
    const filter = this.#eventPathFilter();
    const head = filter === undefined ? 0 : await host.eventRepository.headPosition();
    for await (const batch of host.eventRepository.readAll({
      afterPosition: this.#lastPosition,
      batchSize: this.#delivery.restoreBatchSize,
      ...(filter === undefined ? {} : { eventPaths: filter }),
    })) {
      if (this.#state !== "running") return;
      const fresh =
        batch[0] !== undefined && batch[0].position <= this.#lastPosition ? batch.filter((e) => e.position > this.#lastPosition) : batch;
      if (fresh.length > 0) await this.#apply(fresh, false);
      this.#wake();
    }
    if (filter !== undefined && head > this.#lastPosition) {
      // every event this handler reads up to `head` has been applied
      const at = await this.#timestampAt(head);
      if (head > this.#lastPosition) {
        this.#lastPosition = head;
        this.#lastEventTimestamp = at;
      }
    }
    host.noteHead(this.#lastPosition);
  }

  /**
   * Applies events (ascending, all after lastPosition) in one backend
   * transaction with the checkpoint. On failure, the batch is rolled back and
   * replayed one event per transaction, so the prefix before the failing
   * event commits and the failing event's writes do not.
   */
  async #apply(events: readonly Event[], restoring: boolean): Promise<void> {
    const last = events[events.length - 1];
    if (last === undefined) return;
    let relevant = false;
    for (const e of events) {
      if (this.handlersFor(e).length > 0) {
        relevant = true;
        break;
      }
    }
    if (!relevant) {
      this.#lastPosition = last.position;
      this.#lastEventTimestamp = last.createdAt;
      return;
    }
    const backend = this.#backend();
    const name = this.#h.name;
    const hooks = this.#hooks;
    const metrics = this.#metrics;
    const ctx: HandlerContext = { eventHandlerName: name, restoring };
    const rebuild = this.#rebuild;
    const checkpoint = rebuild === undefined ? name : nextGenerationCheckpoint(name);
    // The hold this batch belongs to: a batch still running when the lock was lost and taken back must not commit.
    const token = this.#token;
    const t0 = performance.now();
    let handled = 0;
    const traced = this.#host?.telemetry?.()?.handle(name, events, restoring);
    const batch = async (): Promise<void> => {
      await this.#fencedTransaction(backend, token, async () => {
        await hooks.beforeBatch(events);
        for (const e of events) {
          const fns = this.handlersFor(e);
          if (fns.length === 0) continue;
          const s = restoring ? 0 : performance.now();
          for (const h of fns) {
            const r = h.fn(ctx, e, e.payload);
            if (r !== undefined && typeof r.then === "function") await r;
          }
          handled++;
          if (!restoring) metrics.sample((performance.now() - s) * 1000);
        }
        await hooks.afterBatch();
        await backend.setCheckpoint(checkpoint, last.position);
        // Without fencing tokens a lockable backend may fence a commit by the checkpoint of the locked handler (SQLite's
        // lease check): writing the served one unchanged keeps an instance that lost the lock out of the new generation.
        if (rebuild !== undefined && backend.tryLock !== undefined && token === undefined)
          await backend.setCheckpoint(name, rebuild.servedPosition);
      });
    };
    try {
      const run = () => (rebuild === undefined ? batch() : inNextGeneration(name, batch));
      await (traced === undefined ? run() : traced.within(run));
    } catch (err) {
      traced?.failed(err);
      hooks.discardBatch();
      if (err instanceof HandlerFailure || isLockLostError(err)) throw err;
      // A lost connection is no event's fault, and a COMMIT it cut off may have committed the
      // whole batch: no replay one by one here; the pump reads the checkpoint again (#retryLater).
      if (isMnemeError(err, "UNAVAILABLE")) throw new HandlerFailure(events[0]!, err);
      if (events.length > 1) {
        for (const e of events) await this.#apply([e], restoring);
        return;
      }
      throw new HandlerFailure(events[0]!, err);
    }
    if (restoring) metrics.sampleBatch(handled, (performance.now() - t0) * 1000);
    metrics.eventsProcessed += handled;
    traced?.committed(handled);
    this.#lastPosition = last.position;
    this.#lastEventTimestamp = last.createdAt;
    this.#persistedPosition = last.position;
  }

  /**
   * Runs fn in one backend transaction that commits only while `token` is
   * still the handler's fencing token (checked in the same transaction). When the check refuses it and `token` is the current hold,
   * this instance lost the lock without being told: it steps back to standby.
   */
  async #fencedTransaction<R>(backend: ReadmodelStoreBackend, token: number | undefined, fn: () => Promise<R>): Promise<R> {
    if (token === undefined || backend.checkFencingToken === undefined) return backend.transaction(fn);
    const name = this.#h.name;
    try {
      return await backend.transaction(async () => {
        // Registered first: a backend may fold the check into the transaction's checkpoint write.
        await backend.checkFencingToken!(name, token);
        return fn();
      });
    } catch (err) {
      if (isLockLostError(err)) this.#fencedOff(backend, token);
      throw err;
    }
  }

  /** A write of the hold `token` was refused: when that is the current hold, the lock is gone (told or not). */
  #fencedOff(backend: ReadmodelStoreBackend, token: number | undefined): void {
    if (!this.#lockHeld || this.#token !== token) return;
    if (this.#state === "stopped") {
      // stop() persisting the checkpoint: it releases the lock next and stays stopped.
      this.#lockHeld = false;
      this.#token = undefined;
      return;
    }
    this.#lockLost();
    // The backend may still count the lock as its own (nobody told it): give it back, so the standby retry takes a new token.
    backend.unlock?.(this.#h.name).catch(() => undefined);
  }

  /**
   * Runs fn (writes of the handler made outside its batches, e.g. an outbox
   * worker's) in one backend transaction, fenced like a batch: it commits only
   * while this instance still holds the handler's lock. INVALID_STATE (lock
   * lost) when it does not hold it.
   * @internal
   */
  async fencedWrite<R>(fn: () => Promise<R>): Promise<R> {
    const backend = this.#backend();
    if (backend.tryLock !== undefined && !this.#lockHeld) throw lockLostError(this.#h.name, "this instance does not hold it");
    return this.#fencedTransaction(backend, this.#token, fn);
  }

  #fail(err: unknown): void {
    const failure = err instanceof HandlerFailure ? err : undefined;
    const cause = failure?.error ?? err;
    const name = this.#h.name;
    this.#metrics.eventsFailed++;
    if (failure === undefined) this.#metrics.lastError = errorMessage(cause);
    else this.#metrics.failedOn(errorMessage(cause), failure.event.tenantUuid);
    this.#failedAt = failure?.event.position ?? this.#lastPosition + 1;
    this.#failure = isMnemeError(cause)
      ? cause
      : new MnemeError(
          "HANDLER_FAILED",
          `event handler ${name} failed${failure ? ` on ${failure.event.domain}.${failure.event.name} at position ${failure.event.position}` : ""}: ${errorMessage(cause)}`,
          { cause },
        );
    this.#queue = [];
    this.#setState("failed");
    this.#host?.publish(
      "HandlerFailed",
      {
        eventHandlerName: name,
        error: this.#metrics.lastError,
        position: this.#failedAt,
        ...(failure ? { eventPath: `${failure.event.domain}.${failure.event.name}`, eventUuid: failure.event.eventUuid } : {}),
      },
      failure?.event.tenantUuid || undefined,
    );
  }

  #setState(state: EventHandlerState): void {
    if (this.#state === state) return;
    const from = this.#state;
    this.#state = state;
    if (state !== "running") this.#clearRetry();
    this.#host?.publish("EventHandlerStateChanged", {
      eventHandlerName: this.#h.name,
      from,
      to: state,
      restorationState: this.#restorationState,
    });
    this.#wake();
  }

  // ---------------------------------------------------------------- control

  /**
   * Resumes from the persisted checkpoint and goes live: catches up with the
   * store, then resolves. INVALID_STATE when running or restoring.
   */
  async start(): Promise<void> {
    const name = this.#h.name;
    if (this.#restore !== undefined) throw new MnemeError("INVALID_STATE", `event handler ${name} is restoring; wait for it or stop it`);
    if (this.#state === "running") throw new MnemeError("INVALID_STATE", `event handler ${name} is running already`);
    if (this.#state === "standby")
      throw new MnemeError("INVALID_STATE", `event handler ${name} is in standby: another instance processes it`);
    if (!(await this.#takeLock())) {
      this.#enterStandby();
      return;
    }
    // A batch that a stop() let finish may still be committing: the checkpoint is read after it.
    await this.idle();
    const backend = this.#backend();
    const checkpoint = await backend.getCheckpoint(name);
    const at = await this.#timestampAt(checkpoint);
    this.#lastPosition = checkpoint;
    this.#lastEventTimestamp = at;
    this.#persistedPosition = checkpoint;
    this.#failure = undefined;
    this.#setState("running");
    this.notify(null);
    await this.idle();
    // Caught up from the checkpoint: a restorer whose last restore failed or was cancelled is whole again.
    if (
      (this.#state as EventHandlerState) === "running" &&
      this.isStateRestorer &&
      (this.#restorationState === "failed" || this.#restorationState === "cancelled")
    ) {
      this.#restorationState = "restored";
    }
  }

  /** Resolves when live delivery has nothing queued. */
  async idle(): Promise<void> {
    while (this.#pumping !== undefined) await this.#pumping;
  }

  /**
   * Stops live delivery (a running restoration is cancelled) and persists the
   * checkpoint. INVALID_STATE when already stopped.
   */
  async stop(): Promise<void> {
    if (this.#restore !== undefined) {
      const r = this.#restore;
      r.controller.abort();
      await r.done.catch(() => undefined);
      await this.#releaseLock();
      return;
    }
    if (this.#state === "stopped") throw new MnemeError("INVALID_STATE", `event handler ${this.#h.name} is stopped already`);
    this.#clearStandby();
    this.#setState("stopped");
    this.#wakeStandbyWaiters();
    this.#queue = [];
    await this.idle();
    await this.#persistCheckpoint();
    await this.#releaseLock();
  }

  /**
   * Goes live as the facade starts it: restorers restore from their
   * checkpoint, plain handlers catch up. With a lockable backend, an instance
   * that cannot take the handler's lock waits in standby and takes over later.
   */
  async goLive(): Promise<void> {
    if (!(await this.#takeLock())) {
      this.#enterStandby();
      return;
    }
    await this.#resume();
  }

  /** Restores through the handler's own (possibly overridden) restoreState, as the Runtime's `restore` does. */
  restoreThroughHandler(opts: { fromZero?: boolean }): { done: Promise<RestoreReport> } {
    if (this.#restorer === undefined) {
      throw new MnemeError(
        "INVALID_ACTION",
        `event handler ${this.#h.name} is not a state restorer: it can be started and stopped, not restored`,
      );
    }
    return this.#restorer.restoreState(opts);
  }

  /** Restorers restore from the checkpoint through their (possibly overridden) restoreState; others catch up. */
  async #resume(): Promise<void> {
    if (this.#restorer !== undefined) await this.#restorer.restoreState({}).done;
    else await this.start();
  }

  /** True when this instance may process the handler (no lock needed, or the lock is held). */
  async #takeLock(): Promise<boolean> {
    const backend = this.#backend();
    if (backend.tryLock === undefined || this.#lockHeld) return true;
    const name = this.#h.name;
    this.#lockHeld = await backend.tryLock(name, this.#host?.instanceId);
    this.#token = this.#lockHeld ? backend.fencingToken?.(name) : undefined;
    if (this.#lockHeld && this.#token === undefined && !warnedUnfenced.has(backend)) {
      warnedUnfenced.add(backend);
      warn(
        `the readmodel backend of ${name} has tryLock but no fencing tokens (fencingToken, checkFencingToken): an instance that loses its lock unnoticed may still commit a batch`,
        "MNEME_UNFENCED_LOCK",
      );
    }
    if (this.#lockHeld) this.#standbyView = undefined;
    if (this.#lockHeld && backend.onLockLost !== undefined && this.#offLockLost === undefined) {
      this.#offLockLost = backend.onLockLost((names) => {
        if (names.includes(name)) this.#lockLost();
      });
    }
    return this.#lockHeld;
  }

  /** Another instance may process the handler now: stop applying and wait in standby to take it back. */
  #lockLost(): void {
    if (!this.#lockHeld) return;
    this.#lockHeld = false;
    this.#token = undefined;
    this.#queue = [];
    this.#restore?.controller.abort();
    this.#metrics.lastError = `lost the processing lock of ${this.#h.name}`;
    this.#enterStandby();
  }

  async #releaseLock(): Promise<void> {
    this.#offLockLost?.();
    this.#offLockLost = undefined;
    if (!this.#lockHeld) return;
    this.#lockHeld = false;
    this.#token = undefined;
    await this.#backend().unlock?.(this.#h.name);
  }

  #enterStandby(): void {
    this.#setState("standby");
    this.#clearStandby();
    void this.#detached(() => this.#readStandbyView());
    const retry = () => {
      this.#standbyTimer = undefined;
      if (this.#state !== "standby") return;
      this.#takeLock().then(
        async (got) => {
          if (this.#state !== "standby") {
            // An unlock that fails (its connection died: the lock went with it) must not become an unhandled rejection.
            if (got) await this.#releaseLock().catch(() => undefined);
            this.#wakeStandbyWaiters();
            return;
          }
          if (!got) {
            await this.#readStandbyView();
            this.#scheduleStandby(retry);
            return;
          }
          // The lock is ours: standby -> stopped -> (restore from the checkpoint) -> running, each published.
          this.#takingOver = true;
          this.#setState("stopped");
          try {
            await this.#resume();
          } catch (err) {
            // The failure is recorded in state and metrics. A transient one (the database went away while
            // catching up) must not leave the handler stopped while it holds the lock: give it back, stand by.
            if ((this.#state as EventHandlerState) === "stopped" && isMnemeError(err, "UNAVAILABLE")) {
              this.#metrics.lastError = errorMessage(err);
              await this.#releaseLock().catch(() => undefined);
              this.#takingOver = false;
              this.#enterStandby();
              return;
            }
          } finally {
            this.#takingOver = false;
          }
          // Lost again while catching up: still in standby, waiters keep waiting.
          if (this.#state !== "standby") this.#wakeStandbyWaiters();
        },
        () => this.#scheduleStandby(retry),
      );
    };
    this.#scheduleStandby(retry);
  }

  /** In standby: reads who holds the lock and the shared checkpoint, for the listing (best effort: kept as it was on an error). */
  async #readStandbyView(): Promise<void> {
    const backend = this.#backend();
    const name = this.#h.name;
    try {
      const [holder, position] = await Promise.all([backend.lockHolder?.(name), backend.getCheckpoint(name)]);
      if (this.#state === "standby") this.#standbyView = { holder, position };
    } catch {
      // The database is unreachable: the next retry reads again.
    }
  }

  #scheduleStandby(fn: () => void): void {
    // Detached: a loss found by a batch's fence is handled inside that batch's async context (its transaction,
    // a rebuild's next generation); the take-over this timer starts must not run in it.
    const t = this.#detached(() => setTimeout(fn, this.#delivery.lockRetryMs));
    (t as { unref?: () => void }).unref?.();
    this.#standbyTimer = t;
  }

  #clearStandby(): void {
    if (this.#standbyTimer !== undefined) clearTimeout(this.#standbyTimer);
    this.#standbyTimer = undefined;
  }

  /**
   * Resolves true once the handler is out of standby (it took the lock
   * over and caught up, failed, or was stopped), false when `timeoutMs` passed first.
   * Resolves true at once when it is not in standby.
   */
  untilOutOfStandby(timeoutMs: number): Promise<boolean> {
    if (this.#state !== "standby" && !this.#takingOver) return Promise.resolve(true);
    return new Promise((resolve) => {
      const done = (out: boolean): void => {
        clearTimeout(timer);
        this.#standbyWaiters.delete(wake);
        resolve(out);
      };
      const wake = (): void => done(true);
      const timer = setTimeout(() => done(false), Math.max(0, timeoutMs));
      this.#standbyWaiters.add(wake);
    });
  }

  #wakeStandbyWaiters(): void {
    for (const w of [...this.#standbyWaiters]) w();
    this.#holderWatch?.recheck();
  }

  // ---------------------------------------------------------------- read your writes in standby

  /**
   * `waitToFinish` for a handler in standby here: resolves undefined once the
   * checkpoint that the instance holding the handler's lock writes (read
   * through the handler's backend, where the documents are shared too) is at
   * or past `to`, so a query made here next sees the command's events; the
   * error that says how far it got when `standbyWaitMs` passes first. When
   * this instance takes the handler over meanwhile, its own delivery answers.
   */
  async waitForHolder(from: number, to: number): Promise<Error | undefined> {
    this.#holderWatch ??= new SharedCheckpointWatch(
      () => this.#backend().getCheckpoint(this.#h.name),
      () => this.#state !== "standby" && !this.#takingOver,
      this.#delivery.standbyPollMs,
    );
    const t0 = performance.now();
    const r = await this.#holderWatch.until(to, this.#delivery.standbyWaitMs);
    if (r.outcome === "reached") return undefined;
    if (r.outcome === "left") return this.waitFor(from, to);
    return this.#holderTimeout(to, r, performance.now() - t0);
  }

  #holderTimeout(position: number, r: CheckpointWaitResult, waitedMs: number): MnemeError {
    const name = this.#h.name;
    const ms = Math.round(waitedMs);
    const failedRead = r.readError === undefined ? "" : `; the last read of it failed: ${errorMessage(r.readError)}`;
    return new MnemeError(
      "INVALID_STATE",
      `event handler ${name} runs on another instance (in standby here) and did not apply these events within ${ms} ms: its checkpoint is at position ${r.checkpoint}, short of position ${position}${failedRead}; queries may not show them yet`,
      {
        details: [{ message: "standby", eventHandlerName: name, state: "standby", checkpoint: r.checkpoint, position, waitedMs: ms }],
        ...(r.readError === undefined ? {} : { cause: r.readError }),
      },
    );
  }

  async #persistCheckpoint(): Promise<void> {
    if (this.#host === undefined || this.#lastPosition === this.#persistedPosition) return;
    const backend = this.#backend();
    // Without its processing lock this instance must not write the checkpoint: the holder
    // owns it and may be further on (the write would move it back, and a crash of the
    // holder would then apply events twice).
    if (backend.tryLock !== undefined && !this.#lockHeld) return;
    const position = this.#lastPosition;
    try {
      await this.#fencedTransaction(backend, this.#token, () => backend.setCheckpoint(this.#h.name, position));
    } catch (err) {
      // Fenced off: the lock is another instance's now, and so is the checkpoint.
      if (isLockLostError(err)) return;
      throw err;
    }
    this.#persistedPosition = position;
  }

  /** The createdAt (ns) of the event at `position`; 0 for position 0 or when no event is stored there. */
  async #timestampAt(position: number): Promise<number> {
    if (position <= 0) return 0;
    const host = this.#requireHost();
    for await (const batch of host.eventRepository.readAll({ afterPosition: position - 1, untilPosition: position, batchSize: 1 })) {
      const e = batch[0];
      return e !== undefined && e.position === position ? e.createdAt : 0;
    }
    return 0;
  }

  // ---------------------------------------------------------------- restoration

  /**
   * Rebuilds state from the event store: from zero (after `resetState`) or
   * from the checkpoint. Live events that arrive meanwhile are caught and
   * applied after the replay, each exactly once.
   */
  startRestore(opts: { fromZero?: boolean; signal?: AbortSignal } = {}): { done: Promise<RestoreReport>; cancel(): void } {
    if (this.#restore !== undefined) {
      const done = Promise.reject(new MnemeError("INVALID_STATE", `event handler ${this.#h.name} is restoring already`));
      done.catch(() => undefined);
      return { done, cancel: () => undefined };
    }
    const controller = new AbortController();
    if (opts.signal !== undefined) {
      if (opts.signal.aborted) controller.abort();
      else opts.signal.addEventListener("abort", () => controller.abort(), { once: true });
    }
    const run = () => this.#runRestore(opts.fromZero === true, controller.signal);
    const telemetry = this.#host?.telemetry?.();
    const done = (telemetry === undefined ? run() : telemetry.restore(this.#h.name, opts.fromZero === true, run)).finally(() => {
      this.#restore = undefined;
    });
    this.#restore = { controller, done };
    done.catch(() => undefined);
    return { done, cancel: () => controller.abort() };
  }

  async #runRestore(fromZero: boolean, signal: AbortSignal): Promise<RestoreReport> {
    const host = this.#requireHost();
    const backend = this.#backend();
    const name = this.#h.name;
    if (this.#state === "standby") {
      throw new MnemeError("INVALID_STATE", `event handler ${name} is processed by another instance (standby): it cannot be restored here`);
    }
    // From here on live events are caught, not applied (set before any await, so none slips through).
    this.#catching = true;
    this.#catchOverflow = false;
    this.#catchPull = false;
    this.#caught = [];
    const caughtBefore = this.#metrics.eventsCaught;
    // tryLock may fail (UNAVAILABLE): live events must not stay caught then.
    if (
      !(await this.#takeLock().catch((e: unknown) => {
        this.#stopCatching();
        throw e;
      }))
    ) {
      this.#stopCatching();
      throw new MnemeError("INVALID_STATE", `event handler ${name} is processed by another instance: it cannot be restored here`);
    }
    this.#queue = [];
    await this.idle();
    const t0 = performance.now();
    this.#restorationState = "restoring";
    this.#setState("running");
    let replayed = 0;
    try {
      if (fromZero && supportsGenerations(backend)) {
        // Blue-green: the next generation is built beside the served one, which queries keep reading.
        const served = await backend.getCheckpoint(name);
        const servedTimestamp = await this.#timestampAt(served);
        const targetHead = await host.eventRepository.headPosition();
        // Emptied first (a generation left by a crash or a failed rebuild included), in one transaction with its checkpoint.
        await inNextGeneration(name, () =>
          this.#fencedTransaction(backend, this.#token, async () => {
            await this.#hooks.resetState();
            await backend.setCheckpoint(nextGenerationCheckpoint(name), 0);
          }),
        );
        this.#rebuild = {
          phase: "rebuilding",
          servedPosition: served,
          servedTimestamp,
          targetHead,
          startedAt: performance.now(),
          replayed: 0,
        };
        this.#lastPosition = 0;
        this.#lastEventTimestamp = 0;
      } else if (fromZero) {
        // A backend that cannot switch generations restores in place. One backend transaction: a crash
        // or an error never leaves the collections cleared at the old checkpoint.
        await this.#fencedTransaction(backend, this.#token, async () => {
          await this.#hooks.resetState();
          await backend.setCheckpoint(name, 0);
        });
        this.#lastPosition = 0;
        this.#lastEventTimestamp = 0;
      } else {
        await this.#discardLeftoverGeneration(backend);
        const checkpoint = await backend.getCheckpoint(name);
        const at = await this.#timestampAt(checkpoint);
        this.#lastPosition = checkpoint;
        this.#lastEventTimestamp = at;
      }
      this.#persistedPosition = this.#lastPosition;
      const afterPosition = this.#lastPosition;
      host.publish("RestoreStarted", { eventHandlerName: name, fromZero, afterPosition });
      replayed += await this.#replayFromStore(signal, replayed);
      if (this.#rebuild !== undefined) this.#rebuild.phase = "catching-up";
      // Hand-off: apply what was caught, in position order, each once; repeat until nothing new.
      let cursor = 0;
      for (;;) {
        if (signal.aborted) break;
        if (this.#catchOverflow || this.#catchPull) {
          this.#catchOverflow = false;
          this.#catchPull = false;
          this.#caught = [];
          cursor = 0;
          replayed += await this.#replayFromStore(signal, replayed);
          continue;
        }
        if (cursor >= this.#caught.length) {
          if (this.#rebuild === undefined) break; // nothing new: go live (no await between check and switch)
          // The new generation is complete: serve it. What is caught during the switch is applied to it next.
          await this.#switchGeneration(backend as ReadmodelStoreBackend & CollectionReplacing);
          continue;
        }
        const pending = this.#caught.slice(cursor).sort((a, b) => a.position - b.position);
        cursor = this.#caught.length;
        const fresh = pending.filter((e) => e.position > this.#lastPosition);
        if (fresh.length === 0) continue;
        if (fresh[0]!.position !== this.#lastPosition + 1 || !contiguous(fresh)) {
          this.#catchPull = true; // a gap: the store is the truth
          continue;
        }
        await this.#apply(fresh, true);
      }
      if (signal.aborted)
        throw new MnemeError("RESTORE_CANCELLED", `restoration of ${name} was cancelled at position ${this.#lastPosition}`);
      this.#catching = false;
      this.#restorationState = "restored";
      const durationMs = performance.now() - t0;
      const report: RestoreReport = {
        eventsReplayed: replayed,
        eventsCaught: this.#metrics.eventsCaught - caughtBefore,
        durationMs,
        eventsPerSecond: durationMs > 0 ? (replayed / durationMs) * 1000 : replayed,
        afterPosition,
        toPosition: this.#lastPosition,
      };
      this.#metrics.lastRestore = report;
      host.noteHead(this.#lastPosition);
      host.publish("RestoreCompleted", { eventHandlerName: name, ...report });
      this.#wake();
      // anything that was pushed after the switch is queued normally from now on
      return report;
    } catch (err) {
      // Still catching: no live event reaches the served generation before it is back in charge.
      // The position the restoration reached (a rebuild's, before the served generation takes over again).
      const reached = this.#lastPosition;
      await this.#abandonRebuild(backend);
      this.#stopCatching();
      this.#caught = this.#caught.slice();
      if ((this.#state as EventHandlerState) === "standby") {
        // The lock was lost mid-restore: the standby retry takes the handler back (and restores it) later.
        this.#restorationState = "cancelled";
        host.publish("RestoreFailed", { eventHandlerName: name, cancelled: true, lockLost: true, position: reached });
        throw new MnemeError(
          "RESTORE_CANCELLED",
          `restoration of ${name} stopped at position ${reached}: another instance took its processing lock`,
        );
      }
      if (isMnemeError(err, "RESTORE_CANCELLED") || signal.aborted) {
        this.#restorationState = "cancelled";
        await this.#persistCheckpoint().catch(() => undefined);
        this.#setState("stopped");
        host.publish("RestoreFailed", { eventHandlerName: name, cancelled: true, position: reached });
        throw isMnemeError(err, "RESTORE_CANCELLED")
          ? err
          : new MnemeError("RESTORE_CANCELLED", `restoration of ${name} was cancelled at position ${reached}`);
      }
      this.#restorationState = "failed";
      // UNAVAILABLE (the database could not be reached): the handler stays running and catches up
      // from the checkpoint after a backoff (restored again then); any other error fails it.
      const unavailable = this.#retryLater(err);
      if (unavailable === undefined) this.#fail(err);
      host.publish(
        "RestoreFailed",
        {
          eventHandlerName: name,
          cancelled: false,
          error: this.#metrics.lastError ?? errorMessage(err),
          position: reached,
          // The error text may carry the failing event's payload: its tenant's stream only (and all-tenant ones).
        },
        this.#metrics.lastErrorTenantUuid || undefined,
      );
      throw unavailable ?? this.#failure ?? err;
    }
  }

  /**
   * A restoration ends without going live: live events are no longer caught,
   * and a waiter kept only because they were is answered now. One that began
   * during a restoration that then lost the lock (standby reached while still
   * catching, so #settle kept it) would otherwise wait until this instance
   * took the lock back, or for ever.
   */
  #stopCatching(): void {
    this.#catching = false;
    this.#wake();
  }

  /**
   * The switch of a rebuild: one backend transaction replaces the served
   * collections with the new generation's and moves the served checkpoint to
   * where the new generation is.
   */
  async #switchGeneration(backend: ReadmodelStoreBackend & CollectionReplacing): Promise<void> {
    const rebuild = this.#rebuild;
    if (rebuild === undefined) return;
    const name = this.#h.name;
    rebuild.phase = "switching";
    const position = this.#lastPosition;
    await this.#fencedTransaction(backend, this.#token, async () => {
      await switchGenerations(backend, name);
      await backend.setCheckpoint(nextGenerationCheckpoint(name), 0);
      await backend.setCheckpoint(name, position);
    });
    this.#rebuild = undefined;
    this.#persistedPosition = position;
    this.#wake();
  }

  /**
   * A rebuild stopped before its switch (cancelled, failed, lock lost): the
   * served generation stays in charge, at its checkpoint, and the partial one
   * is discarded (best effort: what is left is discarded at the next start or rebuild).
   */
  async #abandonRebuild(backend: ReadmodelStoreBackend): Promise<void> {
    const rebuild = this.#rebuild;
    if (rebuild === undefined) return;
    this.#rebuild = undefined;
    this.#lastPosition = rebuild.servedPosition;
    this.#lastEventTimestamp = rebuild.servedTimestamp;
    this.#persistedPosition = rebuild.servedPosition;
    // Without the lock the next generation may be another instance's rebuild by now.
    if (backend.tryLock !== undefined && !this.#lockHeld) return;
    await this.#discardNextGeneration(backend).catch(() => undefined);
  }

  /** At a start: a next generation left by a crash (its checkpoint is past 0) is discarded, not resumed. */
  async #discardLeftoverGeneration(backend: ReadmodelStoreBackend): Promise<void> {
    if (!supportsGenerations(backend)) return;
    if ((await backend.getCheckpoint(nextGenerationCheckpoint(this.#h.name))) === 0) return;
    await this.#discardNextGeneration(backend);
  }

  async #discardNextGeneration(backend: ReadmodelStoreBackend): Promise<void> {
    const name = this.#h.name;
    await this.#fencedTransaction(backend, this.#token, async () => {
      await clearNextGeneration(backend, name);
      await backend.setCheckpoint(nextGenerationCheckpoint(name), 0);
    });
  }

  async #replayFromStore(signal: AbortSignal, before: number): Promise<number> {
    const host = this.#requireHost();
    const filter = this.#eventPathFilter();
    const head = filter === undefined ? 0 : await host.eventRepository.headPosition();
    let n = 0;
    let nextProgress = before + this.#delivery.progressEvery;
    for await (const batch of host.eventRepository.readAll({
      afterPosition: this.#lastPosition,
      batchSize: this.#delivery.restoreBatchSize,
      signal,
      ...(filter === undefined ? {} : { eventPaths: filter }),
    })) {
      if (signal.aborted) break;
      const fresh =
        batch[0] !== undefined && batch[0].position <= this.#lastPosition ? batch.filter((e) => e.position > this.#lastPosition) : batch;
      if (fresh.length === 0) continue;
      await this.#apply(fresh, true);
      n += fresh.length;
      if (this.#rebuild !== undefined) {
        this.#rebuild.replayed = before + n;
        this.#rebuild.targetHead = Math.max(this.#rebuild.targetHead, host.knownHead());
      }
      if (before + n >= nextProgress) {
        nextProgress += this.#delivery.progressEvery;
        host.publish("RestoreProgress", {
          eventHandlerName: this.#h.name,
          eventsReplayed: before + n,
          position: this.#lastPosition,
          head: host.knownHead(),
        });
      }
    }
    if (filter !== undefined && head > this.#lastPosition && !signal.aborted) {
      // every event this handler reads up to `head` has been applied
      const at = await this.#timestampAt(head);
      if (head > this.#lastPosition) {
        this.#lastPosition = head;
        this.#lastEventTimestamp = at;
      }
    }
    return n;
  }
}

/** A process warning with a code (where the platform has them), as the other start-up warnings. */
function warn(message: string, code: string): void {
  const p = (globalThis as { process?: { emitWarning?: (m: string, o: { code: string }) => void } }).process;
  if (typeof p?.emitWarning === "function") p.emitWarning(message, { code });
}

function contiguous(events: readonly Event[]): boolean {
  for (let i = 1; i < events.length; i++) if (events[i]!.position !== events[i - 1]!.position + 1) return false;
  return true;
}
