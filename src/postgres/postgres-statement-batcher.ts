/**
 * Requests that share statements: each `push` queues one request, and the
 * requests of callers resumed together (the pending callbacks of one turn,
 * such as the calls of one settled flush) go out in groups of at most
 * `maxPerGroup`, through at most `maxInFlight` draining loops at a time. A
 * lone request is sent on the next tick, so it waits for nothing. Used by the
 * aggregate loader and the tagged reader of the Postgres event repository.
 */
export class StatementBatcher<R> {
  readonly #queue: R[] = [];
  #inFlight = 0;
  #drainScheduled = false;

  constructor(
    private readonly maxInFlight: number,
    private readonly maxPerGroup: number,
    /** Sends one group; it settles every request of it (never throws). */
    private readonly sendGroup: (group: readonly R[]) => Promise<void>,
  ) {}

  push(request: R): void {
    this.#queue.push(request);
    if (this.#inFlight < this.maxInFlight && !this.#drainScheduled) {
      this.#drainScheduled = true;
      process.nextTick(() => {
        this.#drainScheduled = false;
        void this.#drain();
      });
    }
  }

  /** Sends the queued requests, a group at a time, until the queue is empty. */
  async #drain(): Promise<void> {
    this.#inFlight++;
    try {
      while (this.#queue.length > 0) await this.sendGroup(this.#queue.splice(0, this.maxPerGroup));
    } finally {
      this.#inFlight--;
    }
  }
}
