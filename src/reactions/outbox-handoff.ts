import type { OutboxEntry } from "./outbox-entry.js";

/** How many committed entries wait in memory at most; past it the worker lists the store again. */
const HAND_OFF_LIMIT = 10_000;

/**
 * The entries of an outbox's committed batches, handed to its worker in
 * memory, so that in the steady state the worker publishes what a batch
 * wrote without listing the store for it. The store stays the truth: the
 * worker lists it on start, after a failed delivery or a rolled-back batch,
 * when the hand-off overflowed, at least every poll interval (for what
 * another instance made pending), and hands over again only once a listing
 * found nothing pending.
 * @internal
 */
export class OutboxHandOff {
  /** Committed entries not yet taken, in position order; undefined: the worker lists the store. */
  #entries: OutboxEntry[] | undefined;
  /** The entries of the batch being committed, and the position it ends at. */
  #batch: { upTo: number; entries: OutboxEntry[]; whole: boolean } | undefined;
  /** A batch committed while the worker was listing: the listing may have read the store before it. */
  #committedWhileListing = false;
  #listedAt = -Infinity;

  /**
   * Inside a batch, its entries written: handed over once it has committed
   * (`whole`: they are all its changes to the outbox, each due now).
   */
  batchWritten(upTo: number, entries: OutboxEntry[], whole: boolean): void {
    // One not handed over yet (a rebuild moved the position back meanwhile): only the store knows both now.
    if (this.#batch !== undefined) this.#entries = undefined;
    this.#batch = { upTo, entries, whole };
  }

  /** The batch was rolled back, or may have committed or not: the worker lists the store. */
  discard(): void {
    this.#batch = undefined;
    this.#entries = undefined;
  }

  /** The worker lists the store next (a start, a dead entry made pending again, a stop of the processing here). */
  invalidate(): void {
    this.#entries = undefined;
  }

  /** Hands over the last batch's entries once the handler has passed its position (it committed). */
  promote(lastPosition: number): void {
    const batch = this.#batch;
    if (batch === undefined || lastPosition < batch.upTo) return;
    this.#batch = undefined;
    if (this.#entries === undefined) this.#committedWhileListing = true;
    else if (!batch.whole || this.#entries.length + batch.entries.length > HAND_OFF_LIMIT) this.#entries = undefined;
    else for (const e of batch.entries) this.#entries.push(e);
  }

  /**
   * Up to `max` handed-over entries (none: nothing is pending), or undefined
   * when the worker must list the store (the last listing is `pollMs` old or more).
   */
  take(max: number, now: number, pollMs: number): OutboxEntry[] | undefined {
    if (this.#entries !== undefined && now - this.#listedAt >= pollMs) this.#entries = undefined;
    return this.#entries?.splice(0, max);
  }

  /** The worker lists the store now. */
  listing(now: number): void {
    this.#committedWhileListing = false;
    this.#listedAt = now;
  }

  /** The listing found nothing pending: from now on, committed entries are handed over. */
  listedEmpty(): void {
    if (!this.#committedWhileListing) this.#entries ??= [];
  }
}
