import { errorMessage, isMnemeError, MnemeError } from "../model/errors.js";
import type { Event } from "../model/types.js";
import type { HandlerContext } from "../model/event-handler.js";
import { boundTransactionsOf } from "../store/bound-transaction.js";
import { isLockLostError } from "../store/lock-fencing.js";
import { nextGenerationCheckpoint } from "./readmodel-generations.js";
import { clearEventTenant, inReadmodelBatch } from "./tenant-scope.js";
import { HandlerFailure, type Rebuild, type RunnerState } from "./runner-state.js";
import type { RunnerLocks } from "./runner-locks.js";

/** How soon a checkpoint that lags behind passed events (none of them the handler's) is written (ms). */
export const PASS_CHECKPOINT_MS = 250;
/**
 * The runner's part that delivers events: the live queue and its pump (in
 * position order, exactly once, gaps read from the store), the batch applied
 * in one fenced backend transaction with its checkpoint (one event per
 * transaction after a failure), the retry with backoff after UNAVAILABLE, and
 * the failure of the handler. Its state is the runner's.
 * @internal
 */
export class RunnerDelivery {
  readonly #s: RunnerState;
  readonly #locks: RunnerLocks;

  constructor(state: RunnerState, locks: RunnerLocks) {
    this.#s = state;
    this.#locks = locks;
  }

  /** Live delivery: committed events (in commit order), or null for "read the store". */
  notify(events: readonly Event[] | null): void {
    const s = this.#s;
    if (s.catching) {
      if (events === null) {
        s.catchPull = true;
      } else {
        s.metrics.eventsCaught += events.length;
        if (!s.catchOverflow && s.caught.length + events.length <= s.delivery.catchBufferLimit) {
          for (const e of events) s.caught.push(e);
        } else {
          s.catchOverflow = true;
        }
      }
      return;
    }
    if (s.state !== "running") return;
    if (events !== null && this.#passedIdle(events)) return;
    s.queue.push(events);
    // While a retry after UNAVAILABLE waits out its backoff, its timer starts the pump.
    if (s.retryTimer === undefined) this.#startPump();
  }

  /**
   * Live events this handler has no handler for, right after its position,
   * with nothing queued or pending: passed at once, as the pump's `apply`
   * would pass them, without starting a pump (a consumer or a readmodel of
   * other events pays nothing per append). False: the pump decides.
   */
  #passedIdle(events: readonly Event[]): boolean {
    const s = this.#s;
    if (s.queue.length > 0 || s.pumping !== undefined || s.retryTimer !== undefined || s.retryError !== undefined || s.resync) return false;
    let expected = s.lastPosition + 1;
    for (const e of events) {
      if (e.position < expected) continue;
      if (e.position !== expected || s.handlersFor(e).length > 0) return false;
      expected++;
    }
    const last = events[events.length - 1];
    if (last === undefined || last.position < s.lastPosition + 1) return true;
    s.lastPosition = last.position;
    s.lastEventTimestamp = last.createdAt;
    this.#passed();
    s.wake();
    return true;
  }

  /** Live and behind its position, with no restore (whose end writes the checkpoint, a rebuild's its own) under way. */
  #mayPassCheckpoint(): boolean {
    const s = this.#s;
    return (
      s.state === "running" && s.restore === undefined && s.rebuild === undefined && !s.catching && s.lastPosition !== s.persistedPosition
    );
  }

  /**
   * The position moved past events that are not this handler's (another partition's, or of types it does not
   * handle) without a batch, so the checkpoint lags: it is written once within {@link PASS_CHECKPOINT_MS}, by
   * the pump when its queue is empty (never beside a batch, which writes its own), so that the listings of
   * the other instances, which read the shared checkpoint, show where this holder really is.
   */
  #passed(): void {
    const s = this.#s;
    if (s.passTimer !== undefined || s.lastPosition === s.persistedPosition) return;
    s.passTimer = setTimeout(() => {
      s.passTimer = undefined;
      if (!this.#mayPassCheckpoint()) {
        // Busy for now (catching up, restoring): looked at again later while the position still lags.
        if (s.state === "running") this.#passed();
        return;
      }
      s.persistDue = true;
      this.#startPump();
    }, PASS_CHECKPOINT_MS);
    s.passTimer.unref?.();
  }

  /** Resolves when live delivery has nothing queued. */
  async idle(): Promise<void> {
    while (this.#s.pumping !== undefined) await this.#s.pumping;
  }

  /**
   * Starts the pump unless one runs. `pumping` is set here only, before the
   * pump can settle (a `then` callback never runs synchronously), and cleared
   * only when that same pump settles: a pump that ends without awaiting (every
   * queued event applied already) can never be left behind looking like a
   * running one, which would keep later events queued with no pump to apply
   * them and make `idle()` spin.
   */
  #startPump(): void {
    const s = this.#s;
    if (s.pumping !== undefined) return;
    const pump: Promise<void> = s
      .detached(() => this.#pump())
      .then(
        () => this.#pumpSettled(pump),
        (err: unknown) => {
          // #pump reports its own errors; one escaping it (from that report) still fails the handler, never the process.
          try {
            if (s.state !== "failed") this.fail(err);
          } finally {
            this.#pumpSettled(pump);
          }
        },
      );
    s.pumping = pump;
  }

  #pumpSettled(pump: Promise<void>): void {
    const s = this.#s;
    if (s.pumping === pump) s.pumping = undefined;
    s.wake();
    // work queued, or a passed checkpoint asked for, while the last await settled
    if ((s.queue.length > 0 || s.persistDue) && s.state === "running" && !s.catching && s.retryTimer === undefined) this.#startPump();
  }

  /** Applies what is queued, in position order. Only `#startPump` runs it. */
  async #pump(): Promise<void> {
    const s = this.#s;
    try {
      while (s.queue.length > 0 && s.state === "running") {
        if (s.resync) await this.#readCheckpointAgain();
        const item = s.queue.take()!;
        if (item === null) {
          while (s.queue.peek() === null) s.queue.take(); // coalesce reads
          await this.#pull();
          continue;
        }
        let i = 0;
        while (i < item.length && item[i]!.position <= s.lastPosition) i++;
        if (i === item.length) continue;
        if (item[i]!.position !== s.lastPosition + 1) {
          // A gap: something committed before these is not applied yet. The store decides.
          await this.#pull();
          continue;
        }
        let j = i + 1;
        while (j < item.length && item[j]!.position === item[j - 1]!.position + 1) j++;
        await this.apply(i === 0 && j === item.length ? item : item.slice(i, j), false);
        if (j < item.length) await this.#pull();
        s.wake();
      }
      if (s.persistDue && s.queue.length === 0) {
        s.persistDue = false;
        if (this.#mayPassCheckpoint()) await this.#locks.persistCheckpoint();
      }
      if (s.retryError !== undefined && s.state === "running" && !s.resync) this.#recovered();
    } catch (err) {
      // A batch refused because the processing lock was lost is not the handler's failure: it waits in standby
      // (or, a batch of an earlier hold of the lock, is simply dropped: the current hold reads the checkpoint).
      // One that failed because the database was unreachable is retried from the checkpoint after a backoff.
      if (s.state !== "standby" && !isLockLostError(err) && this.retryLater(err) === undefined) this.fail(err);
    }
  }

  /**
   * After UNAVAILABLE: the failed batch may have committed (a COMMIT cut off) or not, so
   * the persisted checkpoint, not lastPosition, says where to go on. Runs inside the pump.
   */
  async #readCheckpointAgain(): Promise<void> {
    const s = this.#s;
    const checkpoint = await s.backend().getCheckpoint(s.key);
    s.resync = false;
    s.lastPosition = checkpoint;
    s.persistedPosition = checkpoint;
  }

  /**
   * When `err` is UNAVAILABLE (the database could not be reached), schedules a retry
   * (the pump reads the checkpoint and the store again) after a backoff doubling from
   * `retryInitialMs` to `retryMaxMs`, and returns that error; else returns undefined.
   * The handler stays running meanwhile; waitToFinish reports the error.
   */
  retryLater(err: unknown): MnemeError | undefined {
    const s = this.#s;
    const cause = err instanceof HandlerFailure ? err.error : err;
    if (!isMnemeError(cause, "UNAVAILABLE") || s.state !== "running") return undefined;
    s.metrics.lastError = errorMessage(cause);
    s.retryError = cause;
    s.resync = true;
    s.queue.clear();
    const { retryInitialMs, retryMaxMs } = s.delivery;
    s.retryDelay = s.retryDelay === 0 ? retryInitialMs : Math.min(retryMaxMs, s.retryDelay * 2);
    s.clearRetry();
    const timer = setTimeout(() => {
      if (s.retryTimer !== timer) return;
      s.retryTimer = undefined;
      if (s.state !== "running" || s.catching) return;
      s.queue.push(null);
      this.#startPump();
    }, s.retryDelay);
    (timer as { unref?: () => void }).unref?.();
    s.retryTimer = timer;
    s.wake();
    return cause;
  }

  /** A retry after UNAVAILABLE went through: the backoff starts over; a restore that failed so is whole again. */
  #recovered(): void {
    const s = this.#s;
    s.retryError = undefined;
    s.retryDelay = 0;
    if (s.isStateRestorer && s.restorationState === "failed") s.restorationState = "restored";
  }

  /** Reads everything after lastPosition from the store and applies it. */
  async #pull(): Promise<void> {
    const s = this.#s;
    const host = s.requireHost();
    const filter = s.eventPathFilter();
    const head = filter === undefined ? 0 : await host.eventRepository.headPosition();
    for await (const batch of s.readAfter(s.lastPosition)) {
      if (s.state !== "running") return;
      const fresh =
        batch[0] !== undefined && batch[0].position <= s.lastPosition ? batch.filter((e) => e.position > s.lastPosition) : batch;
      if (fresh.length > 0) await this.apply(fresh, false);
      s.wake();
    }
    if (filter !== undefined && head > s.lastPosition) await this.passedTo(head);
    host.noteHead(s.lastPosition);
  }

  /** Every event this handler reads up to `head` has been applied: it has passed `head`. */
  async passedTo(head: number): Promise<void> {
    const s = this.#s;
    const at = await s.timestampAt(head);
    if (head > s.lastPosition) {
      s.lastPosition = head;
      s.lastEventTimestamp = at;
      // A restore writes its own checkpoint when it ends (a rebuild's position is not the served one).
      if (s.restore === undefined) this.#passed();
    }
  }

  /**
   * Applies events (ascending, all after lastPosition) in one backend
   * transaction with the checkpoint. On failure, the batch is rolled back and
   * replayed one event per transaction, so the prefix before the failing
   * event commits and the failing event's writes do not.
   */
  async apply(events: readonly Event[], restoring: boolean): Promise<void> {
    const s = this.#s;
    const last = events[events.length - 1];
    if (last === undefined) return;
    if (!events.some((e) => s.handlersFor(e).length > 0)) {
      s.lastPosition = last.position;
      s.lastEventTimestamp = last.createdAt;
      if (!restoring) this.#passed();
      return;
    }
    const name = s.name;
    const rebuild = s.rebuild;
    // The hold this batch belongs to: a batch still running when the lock was lost and taken back must not commit.
    const token = s.token;
    const t0 = performance.now();
    const traced = s.host?.telemetry?.()?.handle(name, events, restoring);
    let handled = 0;
    try {
      // A partition's lane hands its hooks and its loop only its own events (a prefetch reads no other partition's documents).
      const own = s.partition === undefined ? events : events.filter((e) => s.handlersFor(e).length > 0);
      // The common case (live, no rebuild, no tracing) makes no closure: this runs once per command.
      if (rebuild === undefined && traced === undefined) handled = await this.#batch(own, last, restoring, token, rebuild);
      else {
        const batch = async (): Promise<void> => {
          handled = await this.#batch(own, last, restoring, token, rebuild);
        };
        await (traced === undefined ? batch() : traced.within(batch));
      }
    } catch (err) {
      traced?.failed(err);
      s.hooks.discardBatch();
      if (err instanceof HandlerFailure || isLockLostError(err)) throw err;
      // A lost connection is no event's fault, and a COMMIT it cut off may have committed the
      // whole batch: no replay one by one here; the pump reads the checkpoint again (retryLater).
      if (isMnemeError(err, "UNAVAILABLE")) throw new HandlerFailure(events[0]!, err);
      if (events.length > 1) {
        for (const e of events) await this.apply([e], restoring);
        return;
      }
      throw new HandlerFailure(events[0]!, err);
    }
    if (restoring) s.metrics.sampleBatch(handled, (performance.now() - t0) * 1000);
    s.metrics.eventsProcessed += handled;
    traced?.committed(handled);
    s.lastPosition = last.position;
    s.lastEventTimestamp = last.createdAt;
    s.persistedPosition = last.position;
    const commits = s.host?.commits;
    if (commits?.active === true && handled > 0) commits.committed(name, events, restoring);
  }

  /** One batch in one fenced backend transaction with its checkpoint (at `last`); returns how many events had handlers. */
  async #batch(
    events: readonly Event[],
    last: Event,
    restoring: boolean,
    token: number | undefined,
    rebuild: Rebuild | undefined,
  ): Promise<number> {
    const s = this.#s;
    const backend = s.backend();
    const name = s.name;
    const hooks = s.hooks;
    const metrics = s.metrics;
    const lane = s.partition;
    const ctx: HandlerContext =
      lane === undefined || lane.whole !== undefined
        ? { eventHandlerName: name, restoring }
        : { eventHandlerName: name, restoring, partition: { index: lane.index, count: lane.count } };
    const checkpoint = rebuild === undefined ? s.key : nextGenerationCheckpoint(name);
    let handled = 0;
    // A handler whose own hooks do every write of the batch (a ProjectionReadmodel's), live or catching up,
    // on a backend that hands its transaction over: the transaction is an argument, no async context.
    const bound = rebuild === undefined && lane === undefined ? s.bound : undefined;
    const run = bound !== undefined && bound.eligible() ? boundTransactionsOf(backend) : undefined;
    if (bound !== undefined && run !== undefined) {
      await this.#locks.fencedBoundTransaction(run, backend, token, async (tx) => {
        handled = 0;
        await bound.beforeBatch(events, tx);
        for (const e of events) {
          const fns = s.handlersFor(e);
          if (fns.length === 0) continue;
          const t = restoring ? 0 : performance.now();
          for (const h of fns) {
            const r = h.fn(ctx, e, e.payload);
            if (r !== undefined && typeof r.then === "function") await r;
          }
          handled++;
          if (!restoring) metrics.sample((performance.now() - t) * 1000);
        }
        await bound.afterBatch(tx);
        await tx.setCheckpoint(checkpoint, last.position);
      });
      return handled;
    }
    // A rebuild's batch, and a readmodel's batch of several events, runs in a context of its own: the
    // generation it writes and the tenant of the event being applied (see tenant-scope.ts). A batch of
    // one live event needs none (its handler functions set their event's tenant each in a context of
    // their own, as they would in the batch's), nor does a plain handler's.
    const context = rebuild !== undefined || (s.isStateRestorer && events.length > 1);
    const transaction = () =>
      this.#locks.fencedTransaction(backend, token, async () => {
        handled = 0;
        await hooks.beforeBatch(events);
        for (const e of events) {
          const fns = s.handlersFor(e);
          if (fns.length === 0) continue;
          if (context) clearEventTenant();
          const t = restoring ? 0 : performance.now();
          for (const h of fns) {
            const r = h.fn(ctx, e, e.payload);
            if (r !== undefined && typeof r.then === "function") await r;
          }
          handled++;
          if (!restoring) metrics.sample((performance.now() - t) * 1000);
        }
        if (context) clearEventTenant();
        await hooks.afterBatch();
        await backend.setCheckpoint(checkpoint, last.position);
        // Without fencing tokens a backend may fence a commit by the checkpoint of the locked handler (SQLite's
        // lease check): writing the served one unchanged keeps an instance that lost the lock out of the new generation.
        if (rebuild !== undefined && token === undefined) await backend.setCheckpoint(s.key, rebuild.servedPosition);
      });
    const inTransaction = context ? () => inReadmodelBatch(rebuild === undefined ? undefined : name, transaction) : transaction;
    const gate = s.partition?.gate;
    await (gate === undefined ? inTransaction() : gate(inTransaction));
    return handled;
  }

  /** The handler failed (on an event, for a HandlerFailure): it stops, records and publishes why. */
  fail(err: unknown): void {
    const s = this.#s;
    const failure = err instanceof HandlerFailure ? err : undefined;
    const cause = failure?.error ?? err;
    const name = s.name;
    s.metrics.eventsFailed++;
    if (failure === undefined) s.metrics.lastError = errorMessage(cause);
    else s.metrics.failedOn(errorMessage(cause), failure.event.tenantUuid);
    s.failedAt = failure?.event.position ?? s.lastPosition + 1;
    s.failure = isMnemeError(cause)
      ? cause
      : new MnemeError(
          "HANDLER_FAILED",
          `event handler ${name} failed${failure ? ` on ${failure.event.domain}.${failure.event.name} at position ${failure.event.position}` : ""}: ${errorMessage(cause)}`,
          { cause },
        );
    s.queue.clear();
    s.setState("failed");
    s.host?.publish(
      "HandlerFailed",
      {
        eventHandlerName: name,
        error: s.metrics.lastError,
        position: s.failedAt,
        ...(failure ? { eventPath: `${failure.event.domain}.${failure.event.name}`, eventUuid: failure.event.eventUuid } : {}),
      },
      failure?.event.tenantUuid || undefined,
    );
  }
}
