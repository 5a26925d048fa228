/**
 * FIFO mutual exclusion per key (in-process). Used to serialise commands on
 * one aggregate; across processes the store's unique (aggregateUuid, version) decides.
 */
export class KeyedLock {
  /** Per held key: the waiters, first in line first. */
  readonly #queues = new Map<string, (() => void)[]>();

  /** True when someone holds or waits for `key`. */
  isHeld(key: string): boolean {
    return this.#queues.has(key);
  }

  /** Takes the key when it is free and returns its release function (call it once); undefined when it is held. */
  tryAcquire(key: string): (() => void) | undefined {
    if (this.#queues.has(key)) return undefined;
    this.#queues.set(key, []);
    return this.#releaser(key);
  }

  /** Waits for the key, then resolves with its release function (call it once). */
  acquire(key: string): Promise<() => void> {
    const queue = this.#queues.get(key);
    if (queue === undefined) {
      this.#queues.set(key, []);
      return Promise.resolve(this.#releaser(key));
    }
    return new Promise((resolve) => queue.push(() => resolve(this.#releaser(key))));
  }

  /** The release of one holding: hands the key to the next waiter, or frees it. */
  #releaser(key: string): () => void {
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const queue = this.#queues.get(key)!;
      const next = queue.shift();
      if (next === undefined) this.#queues.delete(key);
      else next();
    };
  }
}
