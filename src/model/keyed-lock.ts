/**
 * FIFO mutual exclusion per key (in-process). Used to serialise commands on
 * one aggregate; across processes the store's unique (aggregateUuid, version) decides.
 */
export class KeyedLock {
  readonly #tails = new Map<string, Promise<void>>();

  /** True when someone holds or waits for `key`. */
  isHeld(key: string): boolean {
    return this.#tails.has(key);
  }

  /** Waits for the key, then resolves with its release function (call it once). */
  async acquire(key: string): Promise<() => void> {
    const prev = this.#tails.get(key);
    let release!: () => void;
    const mine = new Promise<void>((r) => {
      release = r;
    });
    const tail = prev === undefined ? mine : prev.then(() => mine);
    this.#tails.set(key, tail);
    if (prev !== undefined) await prev;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      release();
      if (this.#tails.get(key) === tail) this.#tails.delete(key);
    };
  }
}
