import { errorMessage, isMnemeError, MnemeError } from "../model/errors.js";
import { AllEvents, type AllEventsType, type EventType } from "../model/tokens.js";
import type { Event } from "../model/types.js";
import type { EventRepository } from "../store/event-repository.js";
import type { ReadmodelStoreBackend } from "../store/readmodel-store-backend.js";
import type { SystemEventKind } from "../model/system-event-kind.js";
import type {
  DomainEventHandler, EventHandler, EventHandlerInfo, EventHandlerMetrics, EventHandlerState,
  HandlerContext, RestorationState, RestoreReport, StateRestorer,
} from "../model/event-handler.js";
import { HandlerMetrics } from "./handler-metrics.js";

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
}

export const DEFAULT_DELIVERY: DeliveryOptions = Object.freeze({
  restoreBatchSize: 1000, catchBufferLimit: 10_000, progressEvery: 50_000, lockRetryMs: 1000, retryInitialMs: 50, retryMaxMs: 5000,
});

/** A handler function failed on `event`. */
export class HandlerFailure extends Error {
  constructor(readonly event: Event, readonly error: unknown) {
    super(`handler failed on ${event.domain}.${event.name} at position ${event.position}: ${errorMessage(error)}`, { cause: error });
  }
}

interface Waiter {
  from: number;
  to: number;
  resolve: (e: Error | undefined) => void;
}

type QueueItem = readonly Event[] | null; // null: read from the store

/**
 * Base of every event handler: live delivery in position order, exactly once,
 * a persisted checkpoint, start/stop, failure isolation and metrics.
 * BaseReadmodel adds restoration on top.
 */
export class BaseEventHandler implements EventHandler {
  /** Set by the author in the constructor. */
  domain = "";
  /** Set by the author in the constructor; unique per facade (the eventHandlerName). */
  name = "";
  catchedEvents: Event[] = [];
  restorationState: RestorationState = "idle";
  lastEventTimestamp = 0;
  lastPosition = 0;

  protected host: HandlerHost | undefined;
  protected delivery: DeliveryOptions = DEFAULT_DELIVERY;
  protected readonly metrics = new HandlerMetrics();

  readonly #handlers = new Map<string, DomainEventHandler[]>();
  readonly #catchAll: DomainEventHandler[] = [];
  readonly #eventTypes = new Map<string, EventType>();
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
  // single-processor lock (backends with tryLock)
  #lockHeld = false;
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

  get state(): EventHandlerState {
    return this.#state;
  }

  /**
   * Registers a handler function for one event type, or for every event with `AllEvents`.
   * @example
   * this.addDomainEventHandler(TodoCreated, async (ctx, event, todo) => { ... });
   */
  addDomainEventHandler<P>(
    type: EventType<P> | AllEventsType,
    fn: (ctx: HandlerContext, event: Event<P>, domainEvt: P) => Promise<void> | void,
  ): void {
    if (typeof fn !== "function") throw new MnemeError("INVALID_EVENT_HANDLER", `${this.name || "handler"}: a domain event handler must be a function`);
    if (type === AllEvents || (type as { kind?: string }).kind === "allEvents") {
      this.#catchAll.push({ eventPath: "*", domain: "*", eventName: "*", fn: fn as DomainEventHandler["fn"] });
    } else {
      const t = type as EventType<P>;
      if (t.kind !== "event") throw new MnemeError("INVALID_EVENT_HANDLER", `${this.name || "handler"}: addDomainEventHandler takes an event type or AllEvents`);
      const list = this.#handlers.get(t.path) ?? [];
      list.push({ eventPath: t.path, domain: t.domain, eventName: t.name, fn: fn as DomainEventHandler["fn"] });
      this.#handlers.set(t.path, list);
      this.#eventTypes.set(t.path, t as EventType);
    }
    this.#resolved = new Map();
  }

  /** The handlers for an event (type or path "Domain.Name"): specific ones first, then catch-all ones. */
  getDomainEventHandlers(typeOrPath: EventType | AllEventsType | string): DomainEventHandler[] {
    const path = typeof typeOrPath === "string" ? typeOrPath : typeOrPath.path;
    if (path === "*") return [...this.#catchAll];
    return [...(this.#handlers.get(path) ?? []), ...this.#catchAll];
  }

  /** The unique event types this handler handles (AllEvents excluded). */
  getDomainEvents(): EventType[] {
    return [...this.#eventTypes.values()];
  }

  /** True when a catch-all handler is registered. */
  protected handlesAllEvents(): boolean {
    return this.#catchAll.length > 0;
  }

  /** Paths this handler needs read from the store, or undefined for every event. */
  protected eventPathFilter(): string[] | undefined {
    return this.handlesAllEvents() ? undefined : this.getDomainEvents().map((t) => t.path);
  }

  /** Handlers for a stored event, cached per path. */
  protected handlersFor(event: Event): DomainEventHandler[] {
    const path = `${event.domain}.${event.name}`;
    let fns = this.#resolved.get(path);
    if (fns === undefined) {
      fns = this.getDomainEventHandlers(path);
      this.#resolved.set(path, fns);
    }
    return fns;
  }

  /** Where this handler's checkpoint (and, for readmodels, documents) live. */
  protected checkpointBackend(): ReadmodelStoreBackend {
    if (this.host === undefined) throw new MnemeError("NOT_STARTED", `event handler ${this.name} is not registered with a facade`);
    return this.host.readmodelStoreBackend;
  }

  /** @internal Called by the facade on registration. */
  attachHost(host: HandlerHost, delivery: DeliveryOptions = DEFAULT_DELIVERY): void {
    this.host = host;
    this.delivery = delivery;
    this.#resolved = new Map();
  }

  /** Metrics of event processing. */
  getMetrics(): EventHandlerMetrics {
    return this.metrics.snapshot(this.lastPosition, this.lastEventTimestamp, this.host?.knownHead() ?? this.lastPosition);
  }

  /** The record the Runtime lists. */
  info(): EventHandlerInfo {
    const info: EventHandlerInfo = {
      eventHandlerName: this.name,
      domain: this.domain,
      name: this.name,
      state: this.#state,
      restorationState: this.restorationState,
      domainEvents: this.getDomainEvents().map((t) => t.path).concat(this.handlesAllEvents() ? ["*"] : []),
      lastPosition: this.lastPosition,
      lastEventTimestamp: this.lastEventTimestamp,
      hasMetrics: this.isStateRestorer(),
      isStateRestorer: this.isStateRestorer(),
    };
    if (this.metrics.lastError !== undefined && this.#state === "failed") info.lastError = this.metrics.lastError;
    return info;
  }

  /** Whether this handler can rebuild its state (BaseReadmodel: true). */
  isStateRestorer(): boolean {
    return false;
  }

  // ---------------------------------------------------------------- live delivery

  /** @internal Live delivery: committed events (in commit order), or null for "read the store". */
  notify(events: readonly Event[] | null): void {
    if (this.#catching) {
      if (events === null) {
        this.#catchPull = true;
      } else {
        this.metrics.eventsCaught += events.length;
        if (!this.#catchOverflow && this.catchedEvents.length + events.length <= this.delivery.catchBufferLimit) {
          for (const e of events) this.catchedEvents.push(e);
        } else {
          this.#catchOverflow = true;
        }
      }
      return;
    }
    if (this.#state !== "running") return;
    this.#queue.push(events);
    // While a retry after UNAVAILABLE waits out its backoff, its timer starts the pump.
    if (this.#pumping === undefined && this.#retryTimer === undefined) this.#pumping = this.#pump();
  }

  /**
   * @internal Resolves when the handler has processed up to `to` (undefined), failed on an
   * event in [from, to] (that error), stepped back to standby before reaching `to`
   * (its `standbyError()`), or is stopped (undefined).
   */
  waitFor(from: number, to: number): Promise<Error | undefined> {
    const settled = this.#settle(from, to);
    if (settled !== null) return Promise.resolve(settled);
    return new Promise((resolve) => this.#waiters.push({ from, to, resolve }));
  }

  #settle(from: number, to: number): Error | undefined | null {
    if (this.lastPosition >= to) return undefined;
    if (this.#state === "failed") return this.#failedAt >= from && this.#failedAt <= to ? this.#failure : undefined;
    if (this.#state === "standby" && !this.#catching) return this.standbyError();
    if (this.#state === "stopped" && !this.#catching) return undefined;
    // Waiting out a backoff after UNAVAILABLE: report it rather than wait for the database to come back.
    if (this.#retryTimer !== undefined && this.#retryError !== undefined) return this.#retryError;
    return null;
  }

  /**
   * @internal What `waitToFinish` reports for this handler while it is in standby: the
   * events were not applied here (another instance holds its processing lock).
   */
  standbyError(): MnemeError {
    return new MnemeError(
      "INVALID_STATE",
      `event handler ${this.name} is in standby (another instance holds its processing lock): it has not applied these events here (at position ${this.lastPosition})`,
      { details: [{ message: "standby", eventHandlerName: this.name, state: "standby", lastPosition: this.lastPosition }] },
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
        while (i < item.length && item[i]!.position <= this.lastPosition) i++;
        if (i === item.length) continue;
        if (item[i]!.position !== this.lastPosition + 1) {
          // A gap: something committed before these is not applied yet. The store decides.
          await this.#pull();
          continue;
        }
        let j = i + 1;
        while (j < item.length && item[j]!.position === item[j - 1]!.position + 1) j++;
        await this.applyEvents(i === 0 && j === item.length ? item : item.slice(i, j), false);
        if (j < item.length) await this.#pull();
        this.#wake();
      }
      if (this.#retryError !== undefined && this.#state === "running" && !this.#resync) this.#recovered();
    } catch (err) {
      // A batch refused because the processing lock was lost is not the handler's failure: it waits in standby.
      // One that failed because the database was unreachable is retried from the checkpoint after a backoff.
      if (this.#state !== "standby" && this.#retryLater(err) === undefined) this.#fail(err);
    } finally {
      this.#pumping = undefined;
      this.#wake();
      // work queued while the last await settled
      if (this.#queue.length > 0 && this.#state === "running" && !this.#catching && this.#retryTimer === undefined) this.#pumping = this.#pump();
    }
  }

  /**
   * After UNAVAILABLE: the failed batch may have committed (a COMMIT cut off) or not, so
   * the persisted checkpoint, not lastPosition, says where to go on. Runs inside the pump.
   */
  async #readCheckpointAgain(): Promise<void> {
    const checkpoint = await this.checkpointBackend().getCheckpoint(this.name);
    this.#resync = false;
    this.lastPosition = checkpoint;
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
    this.metrics.lastError = errorMessage(cause);
    this.#retryError = cause;
    this.#resync = true;
    this.#queue = [];
    const { retryInitialMs, retryMaxMs } = this.delivery;
    this.#retryDelay = this.#retryDelay === 0 ? retryInitialMs : Math.min(retryMaxMs, this.#retryDelay * 2);
    this.#clearRetry();
    const timer = setTimeout(() => {
      if (this.#retryTimer !== timer) return;
      this.#retryTimer = undefined;
      if (this.#state !== "running" || this.#catching) return;
      this.#queue.push(null);
      if (this.#pumping === undefined) this.#pumping = this.#pump();
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
    if (this.isStateRestorer() && this.restorationState === "failed") this.restorationState = "restored";
  }

  #clearRetry(): void {
    if (this.#retryTimer !== undefined) clearTimeout(this.#retryTimer);
    this.#retryTimer = undefined;
  }

  /** Reads everything after lastPosition from the store and applies it. */
  async #pull(): Promise<void> {
    const host = this.#requireHost();
    const filter = this.eventPathFilter();
    const head = filter === undefined ? 0 : await host.eventRepository.headPosition();
    for await (const batch of host.eventRepository.readAll({
      afterPosition: this.lastPosition,
      batchSize: this.delivery.restoreBatchSize,
      ...(filter === undefined ? {} : { eventPaths: filter }),
    })) {
      if (this.#state !== "running") return;
      const fresh = batch[0] !== undefined && batch[0].position <= this.lastPosition ? batch.filter((e) => e.position > this.lastPosition) : batch;
      if (fresh.length > 0) await this.applyEvents(fresh, false);
      this.#wake();
    }
    if (filter !== undefined && head > this.lastPosition) {
      // every event this handler reads up to `head` has been applied
      const at = await this.#timestampAt(head);
      if (head > this.lastPosition) {
        this.lastPosition = head;
        this.lastEventTimestamp = at;
      }
    }
    host.noteHead(this.lastPosition);
  }

  /**
   * Applies events (ascending, all after lastPosition) in one backend
   * transaction with the checkpoint. On failure, the batch is rolled back and
   * replayed one event per transaction, so the prefix before the failing
   * event commits and the failing event's writes do not.
   */
  protected async applyEvents(events: readonly Event[], restoring: boolean): Promise<void> {
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
      this.lastPosition = last.position;
      this.lastEventTimestamp = last.createdAt;
      return;
    }
    const backend = this.checkpointBackend();
    const ctx: HandlerContext = { eventHandlerName: this.name, restoring };
    const t0 = performance.now();
    let handled = 0;
    try {
      await backend.transaction(async () => {
        await this.beforeBatch(events);
        for (const e of events) {
          const fns = this.handlersFor(e);
          if (fns.length === 0) continue;
          const s = restoring ? 0 : performance.now();
          for (const h of fns) {
            const r = h.fn(ctx, e, e.payload);
            if (r !== undefined && typeof (r as Promise<void>).then === "function") await r;
          }
          handled++;
          if (!restoring) this.metrics.sample((performance.now() - s) * 1000);
        }
        await this.afterBatch();
        await backend.setCheckpoint(this.name, last.position);
      });
    } catch (err) {
      this.discardBatch();
      if (err instanceof HandlerFailure) throw err;
      // A lost connection is no event's fault, and a COMMIT it cut off may have committed the
      // whole batch: no replay one by one here; the pump reads the checkpoint again (#retryLater).
      if (isMnemeError(err, "UNAVAILABLE")) throw new HandlerFailure(events[0]!, err);
      if (events.length > 1) {
        for (const e of events) await this.applyEvents([e], restoring);
        return;
      }
      throw new HandlerFailure(events[0]!, err);
    }
    if (restoring) this.metrics.sampleBatch(handled, (performance.now() - t0) * 1000);
    this.metrics.eventsProcessed += handled;
    this.lastPosition = last.position;
    this.lastEventTimestamp = last.createdAt;
    this.#persistedPosition = last.position;
  }

  /** Inside the batch's transaction, before its events are handled (e.g. to prefetch documents). */
  protected async beforeBatch(_events: readonly Event[]): Promise<void> {
    /* nothing by default */
  }

  /** Inside the batch's transaction, after its events were handled (e.g. to flush a write-back cache). */
  protected async afterBatch(): Promise<void> {
    /* nothing by default */
  }

  /** The batch was rolled back: drop whatever beforeBatch/handlers buffered. */
  protected discardBatch(): void {
    /* nothing by default */
  }

  #fail(err: unknown): void {
    const failure = err instanceof HandlerFailure ? err : undefined;
    const cause = failure?.error ?? err;
    this.metrics.eventsFailed++;
    this.metrics.lastError = errorMessage(cause);
    this.#failedAt = failure?.event.position ?? this.lastPosition + 1;
    this.#failure = isMnemeError(cause)
      ? cause
      : new MnemeError("HANDLER_FAILED", `event handler ${this.name} failed${failure ? ` on ${failure.event.domain}.${failure.event.name} at position ${failure.event.position}` : ""}: ${errorMessage(cause)}`, { cause });
    this.#queue = [];
    this.#setState("failed");
    this.host?.publish("HandlerFailed", {
      eventHandlerName: this.name,
      error: this.metrics.lastError,
      position: this.#failedAt,
      ...(failure ? { eventPath: `${failure.event.domain}.${failure.event.name}`, eventUuid: failure.event.eventUuid } : {}),
    }, failure?.event.tenantUuid || undefined);
  }

  #setState(state: EventHandlerState): void {
    if (this.#state === state) return;
    const from = this.#state;
    this.#state = state;
    if (state !== "running") this.#clearRetry();
    this.host?.publish("EventHandlerStateChanged", { eventHandlerName: this.name, from, to: state, restorationState: this.restorationState });
    this.#wake();
  }

  #requireHost(): HandlerHost {
    if (this.host === undefined) throw new MnemeError("NOT_STARTED", `event handler ${this.name} is not registered with a facade`);
    return this.host;
  }

  // ---------------------------------------------------------------- control

  /** Whether a restoration is running. */
  get restoring(): boolean {
    return this.#restore !== undefined;
  }

  /**
   * Resumes from the persisted checkpoint and goes live: catches up with the
   * store, then resolves. INVALID_STATE when running or restoring.
   */
  async start(): Promise<void> {
    if (this.#restore !== undefined) throw new MnemeError("INVALID_STATE", `event handler ${this.name} is restoring; wait for it or stop it`);
    if (this.#state === "running") throw new MnemeError("INVALID_STATE", `event handler ${this.name} is running already`);
    if (this.#state === "standby") throw new MnemeError("INVALID_STATE", `event handler ${this.name} is in standby: another instance processes it`);
    if (!(await this.#takeLock())) {
      this.#enterStandby();
      return;
    }
    const backend = this.checkpointBackend();
    const checkpoint = await backend.getCheckpoint(this.name);
    const at = await this.#timestampAt(checkpoint);
    this.lastPosition = checkpoint;
    this.lastEventTimestamp = at;
    this.#persistedPosition = checkpoint;
    this.#failure = undefined;
    this.#setState("running");
    this.notify(null);
    await this.idle();
    // Caught up from the checkpoint: a restorer whose last restore failed or was cancelled is whole again.
    if ((this.#state as EventHandlerState) === "running" && this.isStateRestorer() && (this.restorationState === "failed" || this.restorationState === "cancelled")) {
      this.restorationState = "restored";
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
    if (this.#state === "stopped") throw new MnemeError("INVALID_STATE", `event handler ${this.name} is stopped already`);
    this.#clearStandby();
    this.#setState("stopped");
    this.#wakeStandbyWaiters();
    this.#queue = [];
    await this.idle();
    await this.#persistCheckpoint();
    await this.#releaseLock();
  }

  /**
   * @internal Goes live as the facade starts it: restorers restore from their
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

  /** Restorers restore from the checkpoint through their (possibly overridden) restoreState; others catch up. */
  async #resume(): Promise<void> {
    if (this.isStateRestorer()) await (this as unknown as StateRestorer).restoreState(undefined, {}).done;
    else await this.start();
  }

  /** True when this instance may process the handler (no lock needed, or the lock is held). */
  async #takeLock(): Promise<boolean> {
    const backend = this.checkpointBackend();
    if (backend.tryLock === undefined || this.#lockHeld) return true;
    this.#lockHeld = await backend.tryLock(this.name);
    if (this.#lockHeld && backend.onLockLost !== undefined && this.#offLockLost === undefined) {
      this.#offLockLost = backend.onLockLost((names) => {
        if (names.includes(this.name)) this.#lockLost();
      });
    }
    return this.#lockHeld;
  }

  /** Another instance may process the handler now: stop applying and wait in standby to take it back. */
  #lockLost(): void {
    if (!this.#lockHeld) return;
    this.#lockHeld = false;
    this.#queue = [];
    this.#restore?.controller.abort();
    this.metrics.lastError = `lost the processing lock of ${this.name}`;
    this.#enterStandby();
  }

  async #releaseLock(): Promise<void> {
    this.#offLockLost?.();
    this.#offLockLost = undefined;
    if (!this.#lockHeld) return;
    this.#lockHeld = false;
    await this.checkpointBackend().unlock?.(this.name);
  }

  #enterStandby(): void {
    this.#setState("standby");
    this.#clearStandby();
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
              this.metrics.lastError = errorMessage(err);
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

  #scheduleStandby(fn: () => void): void {
    const t = setTimeout(fn, this.delivery.lockRetryMs);
    (t as { unref?: () => void }).unref?.();
    this.#standbyTimer = t;
  }

  #clearStandby(): void {
    if (this.#standbyTimer !== undefined) clearTimeout(this.#standbyTimer);
    this.#standbyTimer = undefined;
  }

  /**
   * @internal Resolves true once the handler is out of standby (it took the lock
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
  }

  async #persistCheckpoint(): Promise<void> {
    if (this.host === undefined || this.lastPosition === this.#persistedPosition) return;
    const backend = this.checkpointBackend();
    // Without its processing lock this instance must not write the checkpoint: the holder
    // owns it and may be further on (the write would move it back, and a crash of the
    // holder would then apply events twice).
    if (backend.tryLock !== undefined && !this.#lockHeld) return;
    await backend.setCheckpoint(this.name, this.lastPosition);
    this.#persistedPosition = this.lastPosition;
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
  protected startRestore(opts: { fromZero?: boolean; signal?: AbortSignal } = {}): { done: Promise<RestoreReport>; cancel(): void } {
    if (this.#restore !== undefined) {
      const done = Promise.reject(new MnemeError("INVALID_STATE", `event handler ${this.name} is restoring already`));
      done.catch(() => undefined);
      return { done, cancel: () => undefined };
    }
    const controller = new AbortController();
    if (opts.signal !== undefined) {
      if (opts.signal.aborted) controller.abort();
      else opts.signal.addEventListener("abort", () => controller.abort(), { once: true });
    }
    const done = this.#runRestore(opts.fromZero === true, controller.signal).finally(() => {
      this.#restore = undefined;
    });
    this.#restore = { controller, done };
    done.catch(() => undefined);
    return { done, cancel: () => controller.abort() };
  }

  /** Clears the handler's own state before a restoration from zero. BaseReadmodel clears its collections. */
  protected async resetState(): Promise<void> {
    /* a plain handler has no state of its own */
  }

  async #runRestore(fromZero: boolean, signal: AbortSignal): Promise<RestoreReport> {
    const host = this.#requireHost();
    const backend = this.checkpointBackend();
    if (this.#state === "standby") {
      throw new MnemeError("INVALID_STATE", `event handler ${this.name} is processed by another instance (standby): it cannot be restored here`);
    }
    // From here on live events are caught, not applied (set before any await, so none slips through).
    this.#catching = true;
    this.#catchOverflow = false;
    this.#catchPull = false;
    this.catchedEvents = [];
    const caughtBefore = this.metrics.eventsCaught;
    // tryLock may fail (UNAVAILABLE): live events must not stay caught then.
    if (!(await this.#takeLock().catch((e: unknown) => {
      this.#catching = false;
      throw e;
    }))) {
      this.#catching = false;
      throw new MnemeError("INVALID_STATE", `event handler ${this.name} is processed by another instance: it cannot be restored here`);
    }
    this.#queue = [];
    await this.idle();
    const t0 = performance.now();
    this.restorationState = "restoring";
    this.#setState("running");
    let replayed = 0;
    let afterPosition = 0;
    try {
      if (fromZero) {
        // One backend transaction: a crash or an error never leaves the collections
        // cleared at the old checkpoint (the next start would resume there with no documents).
        await backend.transaction(async () => {
          await this.resetState();
          await backend.setCheckpoint(this.name, 0);
        });
        this.lastPosition = 0;
        this.lastEventTimestamp = 0;
      } else {
        const checkpoint = await backend.getCheckpoint(this.name);
        const at = await this.#timestampAt(checkpoint);
        this.lastPosition = checkpoint;
        this.lastEventTimestamp = at;
      }
      this.#persistedPosition = this.lastPosition;
      afterPosition = this.lastPosition;
      host.publish("RestoreStarted", { eventHandlerName: this.name, fromZero, afterPosition });
      replayed += await this.#replayFromStore(signal, replayed);
      // Hand-off: apply what was caught, in position order, each once; repeat until nothing new.
      let cursor = 0;
      for (;;) {
        if (signal.aborted) break;
        if (this.#catchOverflow || this.#catchPull) {
          this.#catchOverflow = false;
          this.#catchPull = false;
          this.catchedEvents = [];
          cursor = 0;
          replayed += await this.#replayFromStore(signal, replayed);
          continue;
        }
        if (cursor >= this.catchedEvents.length) break; // nothing new: go live (no await between check and switch)
        const pending = this.catchedEvents.slice(cursor).sort((a, b) => a.position - b.position);
        cursor = this.catchedEvents.length;
        const fresh = pending.filter((e) => e.position > this.lastPosition);
        if (fresh.length === 0) continue;
        if (fresh[0]!.position !== this.lastPosition + 1 || !contiguous(fresh)) {
          this.#catchPull = true; // a gap: the store is the truth
          continue;
        }
        await this.applyEvents(fresh, true);
      }
      if (signal.aborted) throw new MnemeError("RESTORE_CANCELLED", `restoration of ${this.name} was cancelled at position ${this.lastPosition}`);
      this.#catching = false;
      this.restorationState = "restored";
      const durationMs = performance.now() - t0;
      const report: RestoreReport = {
        eventsReplayed: replayed,
        eventsCaught: this.metrics.eventsCaught - caughtBefore,
        durationMs,
        eventsPerSecond: durationMs > 0 ? (replayed / durationMs) * 1000 : replayed,
        afterPosition,
        toPosition: this.lastPosition,
      };
      this.metrics.lastRestore = report;
      host.noteHead(this.lastPosition);
      host.publish("RestoreCompleted", { eventHandlerName: this.name, ...report });
      this.#wake();
      // anything that was pushed after the switch is queued normally from now on
      return report;
    } catch (err) {
      this.#catching = false;
      this.catchedEvents = this.catchedEvents.slice();
      if ((this.#state as EventHandlerState) === "standby") {
        // The lock was lost mid-restore: the standby retry takes the handler back (and restores it) later.
        this.restorationState = "cancelled";
        host.publish("RestoreFailed", { eventHandlerName: this.name, cancelled: true, lockLost: true, position: this.lastPosition });
        throw new MnemeError("RESTORE_CANCELLED", `restoration of ${this.name} stopped at position ${this.lastPosition}: another instance took its processing lock`);
      }
      if (isMnemeError(err, "RESTORE_CANCELLED") || signal.aborted) {
        this.restorationState = "cancelled";
        await this.#persistCheckpoint().catch(() => undefined);
        this.#setState("stopped");
        host.publish("RestoreFailed", { eventHandlerName: this.name, cancelled: true, position: this.lastPosition });
        throw isMnemeError(err, "RESTORE_CANCELLED") ? err : new MnemeError("RESTORE_CANCELLED", `restoration of ${this.name} was cancelled at position ${this.lastPosition}`);
      }
      this.restorationState = "failed";
      // UNAVAILABLE (the database could not be reached): the handler stays running and catches up
      // from the checkpoint after a backoff (restored again then); any other error fails it.
      const unavailable = this.#retryLater(err);
      if (unavailable === undefined) this.#fail(err);
      host.publish("RestoreFailed", { eventHandlerName: this.name, cancelled: false, error: this.metrics.lastError ?? errorMessage(err), position: this.lastPosition });
      throw unavailable ?? this.#failure ?? err;
    }
  }

  async #replayFromStore(signal: AbortSignal, before: number): Promise<number> {
    const host = this.#requireHost();
    const filter = this.eventPathFilter();
    const head = filter === undefined ? 0 : await host.eventRepository.headPosition();
    let n = 0;
    let nextProgress = before + this.delivery.progressEvery;
    for await (const batch of host.eventRepository.readAll({
      afterPosition: this.lastPosition,
      batchSize: this.delivery.restoreBatchSize,
      signal,
      ...(filter === undefined ? {} : { eventPaths: filter }),
    })) {
      if (signal.aborted) break;
      const fresh = batch[0] !== undefined && batch[0].position <= this.lastPosition ? batch.filter((e) => e.position > this.lastPosition) : batch;
      if (fresh.length === 0) continue;
      await this.applyEvents(fresh, true);
      n += fresh.length;
      if (before + n >= nextProgress) {
        nextProgress += this.delivery.progressEvery;
        host.publish("RestoreProgress", { eventHandlerName: this.name, eventsReplayed: before + n, position: this.lastPosition, head: host.knownHead() });
      }
    }
    if (filter !== undefined && head > this.lastPosition && !signal.aborted) {
      // every event this handler reads up to `head` has been applied
      const at = await this.#timestampAt(head);
      if (head > this.lastPosition) {
        this.lastPosition = head;
        this.lastEventTimestamp = at;
      }
    }
    return n;
  }
}

function contiguous(events: readonly Event[]): boolean {
  for (let i = 1; i < events.length; i++) if (events[i]!.position !== events[i - 1]!.position + 1) return false;
  return true;
}
