import { errorMessage, isMnemeError, MnemeError } from "../model/errors.js";
import type { EventHandlerState } from "../model/event-handler.js";
import type { BoundTransaction, BoundTransactions } from "../store/bound-transaction.js";
import type { LeasedReadmodelStoreBackend } from "../store/leased-readmodel-backend.js";
import { isLockLostError, lockLostError } from "../store/lock-fencing.js";
import { SharedCheckpointWatch, type CheckpointWaitResult } from "./shared-checkpoint-watch.js";
import { type RunnerState, warn } from "./runner-state.js";

/** Lockable backends without fencing tokens that were warned about already (once per backend). */
const warnedUnfenced = new WeakSet<object>();

/**
 * The runner's part that keeps a handler on one instance (backends with
 * `tryLock`): takes and releases the processing lock, fences every write of
 * the handler with the lock's token, steps back to standby when the lock is
 * lost and takes the handler over when it frees, and answers `waitToFinish`
 * in standby from the holder's checkpoint. Its state is the runner's.
 * @internal
 */
export class RunnerLocks {
  readonly #s: RunnerState;
  /** How the handler goes live once this instance took its lock over (the runner's resume). */
  readonly #resume: () => Promise<void>;

  constructor(state: RunnerState, resume: () => Promise<void>) {
    this.#s = state;
    this.#resume = resume;
  }

  // ---------------------------------------------------------------- fencing

  /**
   * Runs fn in one backend transaction that commits only while `token` is
   * still the handler's fencing token (checked in the same transaction). When the check refuses it and `token` is the current hold,
   * this instance lost the lock without being told: it steps back to standby.
   */
  fencedTransaction<R>(backend: LeasedReadmodelStoreBackend, token: number | undefined, fn: () => Promise<R>): Promise<R> {
    // Without a fencing token, the backend's own promise: no async frame of this method per batch.
    if (token === undefined) return backend.transaction(fn);
    const name = this.#s.key;
    // Promise steps rather than async frames: this runs once per batch.
    const fenced = backend.transaction(() => {
      const whole = this.#s.partition?.whole;
      // Registered first: a backend may fold the check into the transaction's checkpoint write.
      const checked = backend.checkFencingToken(name, token);
      if (whole === undefined) return checked.then(fn);
      // A restore from zero of every partition commits only while this instance holds every partition's lock.
      return checked.then(async () => {
        for (const [key, t] of whole.fences()) if (t !== undefined) await backend.checkFencingToken(key, t);
        return fn();
      });
    });
    return fenced.catch((err: unknown) => {
      if (isLockLostError(err)) this.#fencedOff(backend, token);
      throw err;
    });
  }

  /**
   * As fencedTransaction, in a transaction handed to fn (`run`: the backend's
   * bound transactions), fenced through it. Not for a restore from zero of
   * every partition (fencedTransaction checks every partition's lock).
   */
  fencedBoundTransaction<R>(
    run: BoundTransactions,
    backend: LeasedReadmodelStoreBackend,
    token: number | undefined,
    fn: (tx: BoundTransaction) => Promise<R>,
  ): Promise<R> {
    if (token === undefined) return run(fn);
    const name = this.#s.key;
    return run((tx) => tx.checkFencingToken(name, token).then(() => fn(tx))).catch((err: unknown) => {
      if (isLockLostError(err)) this.#fencedOff(backend, token);
      throw err;
    });
  }

  /** A write of the hold `token` was refused: when that is the current hold, the lock is gone (told or not). */
  #fencedOff(backend: LeasedReadmodelStoreBackend, token: number | undefined): void {
    const s = this.#s;
    if (!s.lockHeld || s.token !== token) return;
    if (s.state === "stopped") {
      // stop() persisting the checkpoint: it releases the lock next and stays stopped.
      s.lockHeld = false;
      s.token = undefined;
      return;
    }
    this.lockLost();
    // The backend may still count the lock as its own (nobody told it): give it back, so the standby retry takes a new token.
    backend.unlock(s.key).catch(() => undefined);
  }

  /**
   * Runs fn (writes of the handler made outside its batches, e.g. an outbox
   * worker's) in one backend transaction, fenced like a batch: it commits only
   * while this instance still holds the handler's lock. INVALID_STATE (lock
   * lost) when it does not hold it.
   */
  async fencedWrite<R>(fn: () => Promise<R>): Promise<R> {
    const backend = this.#s.backend();
    if (!this.#s.lockHeld) throw lockLostError(this.#s.key, "this instance does not hold it");
    return this.fencedTransaction(backend, this.#s.token, fn);
  }

  /** Writes lastPosition as the checkpoint, unless it is there already or this instance lost the lock. */
  async persistCheckpoint(): Promise<void> {
    const s = this.#s;
    if (s.host === undefined || s.lastPosition === s.persistedPosition) return;
    const backend = s.backend();
    // Without its processing lock this instance must not write the checkpoint: the holder
    // owns it and may be further on (the write would move it back, and a crash of the
    // holder would then apply events twice).
    if (!s.lockHeld) return;
    const position = s.lastPosition;
    try {
      await this.fencedTransaction(backend, s.token, () => backend.setCheckpoint(s.key, position));
    } catch (err) {
      // Fenced off: the lock is another instance's now, and so is the checkpoint.
      if (isLockLostError(err)) return;
      throw err;
    }
    s.persistedPosition = position;
  }

  // ---------------------------------------------------------------- the lock

  /** True when this instance may process the handler (no lock needed, or the lock is held). */
  async takeLock(): Promise<boolean> {
    const s = this.#s;
    const backend = s.backend();
    if (s.lockHeld) return true;
    const name = s.key;
    s.lockHeld = await backend.tryLock(name, s.host?.instanceId);
    s.token = s.lockHeld ? backend.fencingToken(name) : undefined;
    if (s.lockHeld && s.token === undefined && !warnedUnfenced.has(backend)) {
      warnedUnfenced.add(backend);
      warn(
        `the readmodel backend of ${name} has tryLock but no fencing tokens (fencingToken, checkFencingToken): an instance that loses its lock unnoticed may still commit a batch`,
        "MNEME_UNFENCED_LOCK",
      );
    }
    if (s.lockHeld) s.standbyView = undefined;
    if (s.lockHeld && s.offLockLost === undefined) {
      s.offLockLost = backend.onLockLost((names) => {
        if (names.includes(name)) this.lockLost();
      });
    }
    return s.lockHeld;
  }

  /** Another instance may process the handler now: stop applying and wait in standby to take it back. */
  lockLost(): void {
    const s = this.#s;
    if (!s.lockHeld) return;
    s.lockHeld = false;
    s.token = undefined;
    s.queue.clear();
    s.restore?.controller.abort();
    s.metrics.lastError = `lost the processing lock of ${s.key}`;
    this.enterStandby();
  }

  async releaseLock(): Promise<void> {
    const s = this.#s;
    s.offLockLost?.();
    s.offLockLost = undefined;
    if (!s.lockHeld) return;
    s.lockHeld = false;
    s.token = undefined;
    await s.backend().unlock(s.key);
  }

  /** The instance processing the handler, as far as this one knows: itself, or in standby the lock's recorded holder. */
  holder(): string | undefined {
    const s = this.#s;
    if (s.state === "standby") return s.standbyView?.holder;
    const own = s.host?.instanceId;
    if (s.host === undefined) return s.state === "stopped" ? undefined : own;
    return s.lockHeld ? own : undefined;
  }

  // ---------------------------------------------------------------- standby

  enterStandby(): void {
    const s = this.#s;
    s.setState("standby");
    this.clearStandby();
    void s.detached(() => this.#readStandbyView());
    const retry = (): void => {
      s.standbyTimer = undefined;
      if (s.state !== "standby") return;
      this.takeLock().then(
        (got) => this.#afterRetry(got, retry),
        () => this.#scheduleStandby(retry),
      );
    };
    this.#scheduleStandby(retry);
  }

  /** A standby retry took the lock (`got`) or not: take the handler over, or wait for the next retry. */
  async #afterRetry(got: boolean, retry: () => void): Promise<void> {
    const s = this.#s;
    if (s.state !== "standby") {
      // An unlock that fails (its connection died: the lock went with it) must not become an unhandled rejection.
      if (got) await this.releaseLock().catch(() => undefined);
      this.wakeStandbyWaiters();
      return;
    }
    if (!got) {
      await this.#readStandbyView();
      this.#scheduleStandby(retry);
      return;
    }
    // The lock is ours: standby -> stopped -> (restore from the checkpoint) -> running, each published.
    s.takingOver = true;
    s.setState("stopped");
    try {
      await this.#resume();
    } catch (err) {
      // The failure is recorded in state and metrics. A transient one (the database went away while
      // catching up) must not leave the handler stopped while it holds the lock: give it back, stand by.
      if ((s.state as EventHandlerState) === "stopped" && isMnemeError(err, "UNAVAILABLE")) {
        s.metrics.lastError = errorMessage(err);
        await this.releaseLock().catch(() => undefined);
        s.takingOver = false;
        this.enterStandby();
        return;
      }
    } finally {
      s.takingOver = false;
    }
    // Lost again while catching up: still in standby, waiters keep waiting.
    if (s.state !== "standby") this.wakeStandbyWaiters();
  }

  /**
   * A partition's take-over, as the balancer asks for it: in standby, tries
   * the lock; `took` says whether it was taken, and `live` settles once the
   * partition went live from its checkpoint (or stood by again).
   */
  async retryTakeOver(): Promise<{ took: boolean; live: Promise<void> }> {
    if (this.#s.state !== "standby") return { took: false, live: Promise.resolve() };
    const got = await this.takeLock();
    return { took: got, live: this.#afterRetry(got, () => undefined) };
  }

  /** In standby: reads the holder and its checkpoint again, for the listing. */
  refreshStandbyView(): Promise<void> {
    return this.#readStandbyView();
  }

  /** In standby: reads who holds the lock and the shared checkpoint, for the listing (best effort: kept as it was on an error). */
  async #readStandbyView(): Promise<void> {
    const s = this.#s;
    const backend = s.backend();
    const name = s.key;
    try {
      const [holder, position] = await Promise.all([backend.lockHolder(name), backend.getCheckpoint(name)]);
      if (s.state === "standby") s.standbyView = { holder, position };
    } catch {
      // The database is unreachable: the next retry reads again.
    }
  }

  #scheduleStandby(fn: () => void): void {
    // A partition's take-overs are the balancer's to decide (its fair share), not a timer's of its own.
    if (this.#s.partition !== undefined) return;
    // Detached: a loss found by a batch's fence is handled inside that batch's async context (its transaction,
    // a rebuild's next generation); the take-over this timer starts must not run in it.
    const t = this.#s.detached(() => setTimeout(fn, this.#s.delivery.lockRetryMs));
    (t as { unref?: () => void }).unref?.();
    this.#s.standbyTimer = t;
  }

  clearStandby(): void {
    if (this.#s.standbyTimer !== undefined) clearTimeout(this.#s.standbyTimer);
    this.#s.standbyTimer = undefined;
  }

  /**
   * Resolves true once the handler is out of standby (it took the lock
   * over and caught up, failed, or was stopped), false when `timeoutMs` passed first.
   * Resolves true at once when it is not in standby.
   */
  untilOutOfStandby(timeoutMs: number): Promise<boolean> {
    const s = this.#s;
    if (s.state !== "standby" && !s.takingOver) return Promise.resolve(true);
    return new Promise((resolve) => {
      const done = (out: boolean): void => {
        clearTimeout(timer);
        s.standbyWaiters.delete(wake);
        resolve(out);
      };
      const wake = (): void => done(true);
      const timer = setTimeout(() => done(false), Math.max(0, timeoutMs));
      s.standbyWaiters.add(wake);
    });
  }

  wakeStandbyWaiters(): void {
    for (const w of [...this.#s.standbyWaiters]) w();
    this.#s.holderWatch?.recheck();
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
    const s = this.#s;
    s.holderWatch ??= new SharedCheckpointWatch(
      () => s.backend().getCheckpoint(s.key),
      () => s.state !== "standby" && !s.takingOver,
      s.delivery.standbyPollMs,
    );
    const t0 = performance.now();
    const r = await s.holderWatch.until(to, s.delivery.standbyWaitMs);
    if (r.outcome === "reached") return undefined;
    if (r.outcome === "left") return s.waitFor(from, to);
    return this.#holderTimeout(to, r, performance.now() - t0);
  }

  #holderTimeout(position: number, r: CheckpointWaitResult, waitedMs: number): MnemeError {
    const name = this.#s.name;
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
}
