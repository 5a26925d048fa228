/**
 * A FIFO lock for async code: `acquire()` resolves with a release function once
 * every earlier holder has released. Used to serialise transactions.
 */
export class AsyncMutex {
  private held = false;
  private readonly waiters: (() => void)[] = [];

  /** True while someone holds the lock or waits for it. */
  get locked(): boolean {
    return this.held;
  }

  /** The release function when the lock is free (taken now), else undefined: no promise and no turn for a free lock. */
  tryAcquire(): (() => void) | undefined {
    if (this.held) return undefined;
    this.held = true;
    return this.releaser();
  }

  acquire(): Promise<() => void> {
    if (!this.held) {
      this.held = true;
      return Promise.resolve(this.releaser());
    }
    return new Promise((resolve) => {
      this.waiters.push(() => resolve(this.releaser()));
    });
  }

  private releaser(): () => void {
    let released = false;
    return () => {
      if (released) return;
      released = true;
      // Hand the lock straight to the next waiter so nobody can slip in between.
      const next = this.waiters.shift();
      if (next !== undefined) next();
      else this.held = false;
    };
  }
}
