/** How a wait for the shared checkpoint ended. */
export interface CheckpointWaitResult {
  /** "reached": the checkpoint is at or past the position; "left": the predicate given to the watch turned true first; "timeout": neither in time. */
  readonly outcome: "reached" | "left" | "timeout";
  /** The checkpoint as last read (0 before any read succeeded). */
  readonly checkpoint: number;
  /** The error of the last read, when it failed (the database could not be reached, for one). */
  readonly readError?: unknown;
}

interface Waiter {
  readonly position: number;
  readonly deadline: number;
  readonly resolve: (r: CheckpointWaitResult) => void;
}

/** The first re-read follows this soon: a holder usually applies a command's events within milliseconds. */
const FIRST_POLL_MS = 2;

/**
 * Waits until a checkpoint that another instance writes reaches a position:
 * how `waitToFinish` learns, on an instance whose handler is in standby, that
 * the holder of the handler's lock has applied a command's events (so the
 * shared documents show them). One loop per handler reads the checkpoint for
 * every waiting dispatch, starting soon after a wait begins and backing off
 * to `maxPollMs` while nothing moves: the backends send no notice when a
 * checkpoint is written, and one primary-key read per interval per handler is
 * cheap. It reads nothing while nobody waits.
 * @internal
 */
export class SharedCheckpointWatch {
  readonly #read: () => Promise<number>;
  readonly #left: () => boolean;
  readonly #maxPollMs: number;
  #waiters: Waiter[] = [];
  #polling = false;
  #interval = FIRST_POLL_MS;
  #checkpoint = 0;
  #readError: unknown;
  #sleeping: { wake: () => void } | undefined;

  /**
   * @param read reads the shared checkpoint.
   * @param left true when waiting on the checkpoint no longer answers the question (this instance took the handler over).
   */
  constructor(read: () => Promise<number>, left: () => boolean, maxPollMs: number) {
    this.#read = read;
    this.#left = left;
    this.#maxPollMs = Math.max(FIRST_POLL_MS, maxPollMs);
  }

  /** Resolves once the checkpoint is at or past `position`, `left()` is true, or `timeoutMs` passed. */
  until(position: number, timeoutMs: number): Promise<CheckpointWaitResult> {
    return new Promise((resolve) => {
      this.#waiters.push({ position, deadline: performance.now() + Math.max(0, timeoutMs), resolve });
      // A new wait is read for soon, not after the backed-off interval of older ones.
      this.#interval = FIRST_POLL_MS;
      if (this.#polling) this.recheck();
      else void this.#poll();
    });
  }

  /** Checks `left()` and the checkpoint now instead of after the current interval (the handler's state changed). */
  recheck(): void {
    this.#sleeping?.wake();
  }

  async #poll(): Promise<void> {
    this.#polling = true;
    try {
      while (this.#waiters.length > 0) {
        const before = this.#checkpoint;
        if (!this.#left()) {
          try {
            this.#checkpoint = await this.#read();
            this.#readError = undefined;
          } catch (e) {
            // Reported at the deadline if it lasts; the next read may go through.
            this.#readError = e;
          }
        }
        this.#settle();
        if (this.#waiters.length === 0) break;
        if (this.#checkpoint !== before) this.#interval = FIRST_POLL_MS;
        const nearest = Math.min(...this.#waiters.map((w) => w.deadline)) - performance.now();
        await this.#sleep(Math.max(0, Math.min(this.#interval, nearest)));
        this.#interval = Math.min(this.#maxPollMs, this.#interval * 2);
      }
    } finally {
      this.#polling = false;
    }
  }

  #settle(): void {
    const left = this.#left();
    const now = performance.now();
    const keep: Waiter[] = [];
    for (const w of this.#waiters) {
      if (left) w.resolve(this.#result("left"));
      else if (this.#checkpoint >= w.position) w.resolve(this.#result("reached"));
      else if (now >= w.deadline) w.resolve(this.#result("timeout"));
      else keep.push(w);
    }
    this.#waiters = keep;
  }

  #result(outcome: CheckpointWaitResult["outcome"]): CheckpointWaitResult {
    return this.#readError === undefined
      ? { outcome, checkpoint: this.#checkpoint }
      : { outcome, checkpoint: this.#checkpoint, readError: this.#readError };
  }

  #sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const wake = (): void => {
        clearTimeout(timer);
        this.#sleeping = undefined;
        resolve();
      };
      const timer = setTimeout(wake, ms);
      this.#sleeping = { wake };
    });
  }
}
