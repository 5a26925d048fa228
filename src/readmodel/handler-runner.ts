import { AsyncLocalStorage } from "node:async_hooks";
import { MnemeError } from "../model/errors.js";
import type { Event } from "../model/types.js";
import type {
  DomainEventHandler,
  EventHandler,
  EventHandlerMetrics,
  EventHandlerState,
  RestorationState,
  RestoreReport,
} from "../model/event-handler.js";
import { assertPartitionCount } from "./partition-routing.js";
import { PartitionedRunner } from "./partitioned-runner.js";
import { RunnerDelivery } from "./runner-delivery.js";
import { type EventHandlerListing, handlerListing, handlerMetrics } from "./runner-listing.js";
import { RunnerLocks } from "./runner-locks.js";
import { RunnerRestore } from "./runner-restore.js";
import {
  type BoundBatchHooks,
  DEFAULT_DELIVERY,
  type DeliveryOptions,
  type HandlerHost,
  type PartitionLane,
  type RestorerConfig,
  type RunnerHooks,
  RunnerState,
} from "./runner-state.js";

export { DEFAULT_DELIVERY, HandlerFailure, type DeliveryOptions, type HandlerHost } from "./runner-state.js";
export type { EventHandlerListing } from "./runner-listing.js";

/**
 * Runs one event handler: live delivery in position order, exactly once, a
 * persisted checkpoint, restoration with the hand-off of live events,
 * start/stop, the single-processor lock and standby, retries after
 * UNAVAILABLE, failure isolation and metrics. It is made of parts, each a
 * file: delivery and backoff (runner-delivery.ts), restore and rebuild
 * (runner-restore.ts), locks, fencing and standby (runner-locks.ts), the
 * listing and metrics (runner-listing.ts). Every piece of state is in one
 * RunnerState that the runner makes and its parts share; the handler shows
 * it through read-only getters. The runner itself holds the control flow:
 * attach, start, stop, going live.
 * @internal
 */
export class HandlerRunner {
  readonly #s: RunnerState;
  readonly #locks: RunnerLocks;
  readonly #delivery: RunnerDelivery;
  readonly #restore: RunnerRestore;
  readonly #onAttach: ((host: HandlerHost) => void)[] = [];
  /** Set by `withPartitions(n)`: the handler runs as n lanes (runners of this class), and this runner answers through them. */
  #partitioned: PartitionedRunner | undefined;

  /** Makes the runner of `handler`: BaseEventHandler makes one in its constructor and holds it (see `runnerOf`). */
  constructor(handler: EventHandler, hooks: RunnerHooks) {
    this.#s = new RunnerState(handler, hooks, AsyncLocalStorage.snapshot());
    this.#locks = new RunnerLocks(this.#s, () => this.#resume());
    this.#delivery = new RunnerDelivery(this.#s, this.#locks);
    this.#restore = new RunnerRestore(this.#s, this.#locks, this.#delivery);
  }

  // ---------------------------------------------------------------- configuration

  /** Makes the handler a state restorer (BaseReadmodel). */
  configureRestorer(config: RestorerConfig): void {
    this.#s.restorer = config;
    this.#partitioned?.configureRestorer(config);
  }

  /** Lets the handler's batches run in a transaction handed to its hooks (see BoundBatchHooks); a partitioned handler's do not. */
  configureBoundBatch(hooks: BoundBatchHooks): void {
    this.#s.bound = hooks;
  }

  /** Runs the handler as `count` partitions (`withPartitions`), before it is registered. */
  configurePartitions(count: number): void {
    assertPartitionCount(count);
    const s = this.#s;
    if (s.host !== undefined || this.#partitioned !== undefined)
      throw new MnemeError("INVALID_STATE", `event handler ${s.name}: partitions are set once, before it is registered`);
    this.#partitioned = new PartitionedRunner(
      s.handler,
      count,
      () => new HandlerRunner(s.handler, s.hooks),
      () => s.restorer,
    );
    if (s.restorer !== undefined) this.#partitioned.configureRestorer(s.restorer);
  }

  /** The number of partitions (`withPartitions`), or undefined for a handler that runs as one. */
  get partitions(): number | undefined {
    return this.#partitioned?.count;
  }

  /** Runs `fn` when the handler is registered with a facade, after the host is set. */
  onAttach(fn: (host: HandlerHost) => void): void {
    this.#onAttach.push(fn);
  }

  /** Called by the facade on registration. */
  attach(host: HandlerHost, delivery: DeliveryOptions = DEFAULT_DELIVERY): void {
    const s = this.#s;
    const own = s.restorer?.options();
    s.host = host;
    s.delivery =
      own === undefined
        ? delivery
        : {
            ...delivery,
            restoreBatchSize: own.restoreBatchSize ?? delivery.restoreBatchSize,
            catchBufferLimit: own.catchBufferLimit ?? delivery.catchBufferLimit,
          };
    s.resolved = new Map();
    this.#partitioned?.attach(host, s.delivery);
    for (const fn of this.#onAttach) fn(host);
  }

  /** The handler's map of handler functions changed: forget the resolved lookups. */
  invalidate(): void {
    this.#s.resolved = new Map();
  }

  // ---------------------------------------------------------------- read-only state

  get state(): EventHandlerState {
    if (this.#partitioned !== undefined) return this.#partitioned.state;
    return this.#s.state;
  }

  get lastPosition(): number {
    if (this.#partitioned !== undefined) return this.#partitioned.lastPosition;
    return this.#s.lastPosition;
  }

  get lastEventTimestamp(): number {
    if (this.#partitioned !== undefined) return this.#partitioned.lastEventTimestamp;
    return this.#s.lastEventTimestamp;
  }

  get restorationState(): RestorationState {
    if (this.#partitioned !== undefined) return this.#partitioned.restorationState;
    return this.#s.restorationState;
  }

  /** The live events caught by the current (or last) restoration, as a copy. */
  get catchedEvents(): readonly Event[] {
    return Object.freeze(this.#s.caught.slice());
  }

  /** Whether a restoration is running. */
  get restoring(): boolean {
    if (this.#partitioned !== undefined) return this.#partitioned.restoring;
    return this.#s.restore !== undefined;
  }

  /**
   * Settles once the restorations running now are done, when each is the runner's own catch-up from the
   * checkpoint (a start or a takeover); undefined when none runs or one was asked for (a restore).
   */
  get catchingUp(): Promise<void> | undefined {
    if (this.#partitioned !== undefined) return this.#partitioned.catchingUp;
    const r = this.#s.restore;
    return r?.catchUp === true ? r.done.then(settled, settled) : undefined;
  }

  /** Whether the handler can rebuild its state (a BaseReadmodel). */
  get isStateRestorer(): boolean {
    return this.#s.isStateRestorer;
  }

  /** Metrics of event processing. */
  getMetrics(): EventHandlerMetrics {
    if (this.#partitioned !== undefined) return this.#partitioned.getMetrics();
    return handlerMetrics(this.#s);
  }

  /** The record the Runtime lists. */
  info(): EventHandlerListing {
    if (this.#partitioned !== undefined) return this.#partitioned.info();
    return handlerListing(this.#s, this.#locks.holder());
  }

  /** Handlers for a stored event, cached per path. */
  handlersFor(event: Event): DomainEventHandler[] {
    return this.#s.handlersFor(event);
  }

  // ---------------------------------------------------------------- delivery

  /** Live delivery: committed events (in commit order), or null for "read the store". */
  notify(events: readonly Event[] | null): void {
    if (this.#partitioned !== undefined) this.#partitioned.notify(events);
    else this.#delivery.notify(events);
  }

  /**
   * Resolves when the handler has processed up to `to` (undefined), failed on an
   * event in [from, to] (that error), stepped back to standby before reaching `to`
   * (its `standbyError()`), or is stopped (undefined).
   */
  waitFor(from: number, to: number): Promise<Error | undefined> {
    if (this.#partitioned !== undefined) return this.#partitioned.waitFor(from, to);
    return this.#s.waitFor(from, to);
  }

  /** What `waitToFinish` reports for this handler while it is in standby. */
  standbyError(): MnemeError {
    return this.#s.standbyError();
  }

  /** `waitToFinish` for a handler in standby here: waits for the checkpoint of the lock's holder (see RunnerLocks). */
  waitForHolder(from: number, to: number): Promise<Error | undefined> {
    if (this.#partitioned !== undefined) return this.#partitioned.waitFor(from, to);
    return this.#locks.waitForHolder(from, to);
  }

  /** Resolves true once the handler is out of standby, false when `timeoutMs` passed first. */
  untilOutOfStandby(timeoutMs: number): Promise<boolean> {
    // A partitioned handler in standby here is balanced so: the other instances apply its partitions.
    if (this.#partitioned !== undefined) return Promise.resolve(true);
    return this.#locks.untilOutOfStandby(timeoutMs);
  }

  /**
   * Runs fn (writes of the handler made outside its batches, e.g. an outbox
   * worker's) in one backend transaction, fenced like a batch. INVALID_STATE
   * (lock lost) when this instance does not hold the handler's lock.
   * @internal
   */
  fencedWrite<R>(fn: () => Promise<R>): Promise<R> {
    if (this.#partitioned !== undefined)
      return Promise.reject(
        new MnemeError("INVALID_ACTION", `event handler ${this.#s.name} is partitioned: it has no single lock to fence a write with`),
      );
    return this.#locks.fencedWrite(fn);
  }

  /** Resolves when live delivery has nothing queued. */
  idle(): Promise<void> {
    if (this.#partitioned !== undefined) return this.#partitioned.idle();
    return this.#delivery.idle();
  }

  // ---------------------------------------------------------------- control

  /**
   * Resumes from the persisted checkpoint and goes live: catches up with the
   * store, then resolves. INVALID_STATE when running or restoring.
   */
  async start(): Promise<void> {
    if (this.#partitioned !== undefined) return this.#partitioned.start();
    const s = this.#s;
    const name = s.name;
    s.hooks.starting();
    if (s.restore !== undefined) throw new MnemeError("INVALID_STATE", `event handler ${name} is restoring; wait for it or stop it`);
    if (s.state === "running") throw new MnemeError("INVALID_STATE", `event handler ${name} is running already`);
    if (s.state === "standby") throw new MnemeError("INVALID_STATE", `event handler ${name} is in standby: another instance processes it`);
    if (!(await this.#locks.takeLock())) {
      this.#locks.enterStandby();
      return;
    }
    // A batch that a stop() let finish may still be committing: the checkpoint is read after it.
    await this.idle();
    const checkpoint = await s.backend().getCheckpoint(s.key);
    const at = await s.timestampAt(checkpoint);
    s.lastPosition = checkpoint;
    s.lastEventTimestamp = at;
    s.persistedPosition = checkpoint;
    s.failure = undefined;
    s.setState("running");
    this.notify(null);
    await this.idle();
    // Caught up from the checkpoint: a restorer whose last restore failed or was cancelled is whole again.
    if (
      (s.state as EventHandlerState) === "running" &&
      s.isStateRestorer &&
      (s.restorationState === "failed" || s.restorationState === "cancelled")
    ) {
      s.restorationState = "restored";
    }
  }

  /**
   * Stops live delivery (a running restoration is cancelled) and persists the
   * checkpoint. INVALID_STATE when already stopped.
   */
  async stop(): Promise<void> {
    if (this.#partitioned !== undefined) return this.#partitioned.stop();
    const s = this.#s;
    await s.hooks.stopping();
    if (s.restore !== undefined) {
      const r = s.restore;
      r.controller.abort();
      await r.done.catch(() => undefined);
      await this.#locks.releaseLock();
      return;
    }
    if (s.state === "stopped") throw new MnemeError("INVALID_STATE", `event handler ${s.name} is stopped already`);
    this.#locks.clearStandby();
    s.setState("stopped");
    this.#locks.wakeStandbyWaiters();
    s.queue.clear();
    await this.idle();
    await this.#locks.persistCheckpoint();
    await this.#locks.releaseLock();
  }

  /**
   * Goes live as the facade starts it: restorers restore from their
   * checkpoint, plain handlers catch up. With a lockable backend, an instance
   * that cannot take the handler's lock waits in standby and takes over later.
   */
  async goLive(): Promise<void> {
    if (this.#partitioned !== undefined) return this.#partitioned.goLive();
    if (!(await this.#locks.takeLock())) {
      this.#locks.enterStandby();
      return;
    }
    await this.#resume();
  }

  /**
   * Rebuilds state from the event store: from zero (after `resetState`) or
   * from the checkpoint. Live events that arrive meanwhile are caught and
   * applied after the replay, each exactly once.
   */
  startRestore(opts: { fromZero?: boolean; signal?: AbortSignal } = {}): { done: Promise<RestoreReport>; cancel(): void } {
    if (this.#partitioned !== undefined) return this.#partitioned.startRestore(opts);
    this.#s.hooks.starting();
    return this.#restore.start(opts);
  }

  /** Restores through the handler's own (possibly overridden) restoreState, as the Runtime's `restore` does. */
  restoreThroughHandler(opts: { fromZero?: boolean }): { done: Promise<RestoreReport> } {
    const restorer = this.#s.restorer;
    if (restorer === undefined) {
      throw new MnemeError(
        "INVALID_ACTION",
        `event handler ${this.#s.name} is not a state restorer: it can be started and stopped, not restored`,
      );
    }
    return restorer.restoreState(opts);
  }

  /**
   * `waitToFinish` of a partitioned handler: each partition that has some of
   * `events` (those of its aggregates that the handler handles), where it runs.
   */
  waitForPartitions(events: readonly Event[]): Promise<Error | undefined> {
    const p = this.#partitioned;
    if (p === undefined) return this.waitFor(events[0]?.position ?? 0, events[events.length - 1]?.position ?? 0);
    return p.waitForEvents(events, (e) => this.#s.handlersFor(e).length > 0);
  }

  // ---------------------------------------------------------------- a lane of a partitioned handler

  /** Makes this runner lane `lane.index` of a partitioned handler (PartitionedRunner makes its lanes so). */
  configureLane(lane: PartitionLane): void {
    this.#s.partition = lane;
  }

  /** Whether this instance holds the lane's lock, and its fencing token. */
  get lockHold(): { readonly held: boolean; readonly token: number | undefined } {
    const s = this.#s;
    return { held: s.lockHeld, token: s.token };
  }

  /**
   * The balancer's take-over of a lane, from standby or stopped: tries the lock;
   * `took` says whether it was taken, `live` settles once the lane went live from its checkpoint.
   */
  async claim(): Promise<{ took: boolean; live: Promise<void> }> {
    const s = this.#s;
    if (s.state === "standby") return this.#locks.retryTakeOver();
    if (s.state !== "stopped" || this.restoring) return { took: false, live: Promise.resolve() };
    if (!(await this.#locks.takeLock())) {
      this.#locks.enterStandby();
      return { took: false, live: Promise.resolve() };
    }
    return { took: true, live: this.#resume() };
  }

  refreshStandbyView(): Promise<void> {
    return this.#locks.refreshStandbyView();
  }

  /** Enters standby without the lock: the balancer takes the lane over when its fair share allows. */
  standBy(): void {
    this.#locks.enterStandby();
  }

  /** Takes the lock without going live (a standby lane is stopped then); false when another instance holds it. */
  async holdStopped(): Promise<boolean> {
    const s = this.#s;
    if (this.lockHold.held) return true;
    if (s.state !== "standby" && s.state !== "stopped") return false;
    if (!(await this.#locks.takeLock())) return false;
    this.#locks.clearStandby();
    s.setState("stopped");
    this.#locks.wakeStandbyWaiters();
    return true;
  }

  /** Stops applying and keeps the lock (a restore from zero of every partition runs meanwhile). */
  async pause(): Promise<void> {
    const s = this.#s;
    if (s.state !== "running") return;
    s.setState("stopped");
    s.queue.clear();
    await this.idle();
  }

  /** Gives the lane up to another instance: stopped (checkpoint persisted), lock released, in standby. */
  async yieldLock(): Promise<void> {
    if (this.#s.state === "standby") return;
    if (this.#s.state !== "stopped" || this.restoring) await this.stop();
    else await this.#locks.releaseLock();
    this.#locks.enterStandby();
  }

  /** Restorers restore from the checkpoint through their (possibly overridden) restoreState; others catch up. */
  async #resume(): Promise<void> {
    const restorer = this.#s.restorer;
    if (restorer === undefined) return this.start();
    // Marks the restore it starts as the runner's own catch-up (a restore asked for meanwhile follows it).
    this.#s.resuming = true;
    let restore: { done: Promise<RestoreReport> };
    try {
      restore = restorer.restoreState({});
    } finally {
      this.#s.resuming = false;
    }
    await restore.done;
  }
}

function settled(): void {}
