/** The verdict of a rate limiter: allowed, or how long to wait. */
export type RateVerdict = { readonly allowed: true } | { readonly allowed: false; readonly retryAfterSeconds: number };

interface Bucket {
  tokens: number;
  at: number;
}

/**
 * A token bucket per key (a session): `requests` in a burst, refilled evenly
 * over `windowMs`. Idle full buckets are swept so memory stays bounded by the
 * number of recently active sessions.
 */
export class TokenBucketLimiter {
  readonly #buckets = new Map<string, Bucket>();
  readonly #ratePerMs: number;
  #nextSweep = 0;

  constructor(
    readonly requests: number,
    readonly windowMs: number,
    readonly now: () => number = Date.now,
  ) {
    this.#ratePerMs = requests / windowMs;
  }

  /** Takes one token for `key`. */
  take(key: string): RateVerdict {
    const now = this.now();
    this.#sweep(now);
    let b = this.#buckets.get(key);
    if (b === undefined) {
      b = { tokens: this.requests, at: now };
      this.#buckets.set(key, b);
    } else {
      b.tokens = Math.min(this.requests, b.tokens + Math.max(0, now - b.at) * this.#ratePerMs);
      b.at = now;
    }
    if (b.tokens >= 1) {
      b.tokens -= 1;
      return { allowed: true };
    }
    return { allowed: false, retryAfterSeconds: Math.max(1, Math.ceil((1 - b.tokens) / this.#ratePerMs / 1000)) };
  }

  /** Keys currently tracked (for tests and metrics). */
  get size(): number {
    return this.#buckets.size;
  }

  #sweep(now: number): void {
    if (now < this.#nextSweep) return;
    this.#nextSweep = now + this.windowMs;
    for (const [key, b] of this.#buckets) {
      // A bucket that has refilled completely carries no information: forget it.
      if (b.tokens + (now - b.at) * this.#ratePerMs >= this.requests) this.#buckets.delete(key);
    }
  }
}

/** Counts open long-lived connections (SSE streams) against a maximum. */
export class ConnectionGauge {
  #open = 0;

  constructor(readonly max: number) {}

  get open(): number {
    return this.#open;
  }

  /** Takes a slot; returns the release function (idempotent), or undefined when full. */
  tryAcquire(): (() => void) | undefined {
    if (this.#open >= this.max) return undefined;
    this.#open++;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.#open--;
    };
  }
}
