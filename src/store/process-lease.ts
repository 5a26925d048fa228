import { addListener } from "./listeners.js";
import { lockLostError } from "./lock-fencing.js";
import { assertHandlerName } from "./readmodel-validation.js";

/** One handler's lease: its fencing token (kept when freed, so the next take's is greater) and who holds it. */
interface Lease {
  token: number;
  held: boolean;
  holder: string | undefined;
}

/**
 * The processing lease of a readmodel backend whose data lives in this
 * process (the memory engine, and the in-process lease composition gives a
 * readmodel backend that has none of its own). The owner is the backend, as
 * in SQLite and Postgres (each backend object is one owner): facades given
 * one backend share its holds.
 *
 * - `tryLock` takes the lease when it is free or already held (a renewal
 *   keeps the token); every take of a free lease adds one to its fencing
 *   token, so a take-over after `unlock` always gives a greater token.
 * - `holderOf` is the instance id recorded by the take (undefined when free).
 * - `check` refuses fences (handler -> token) whose lease was taken again
 *   since (its token moved on): the transaction that noted them must not
 *   commit. A lease freed and not taken again keeps its token, as the lock
 *   rows of SQLite and Postgres do, so a facade sharing the backend with one
 *   that let go goes on committing until someone takes the lease.
 * - `loseAll` frees every lease and tells the `onLockLost` listeners (the
 *   backend closing).
 */
export class ProcessLease {
  readonly #leases = new Map<string, Lease>();
  readonly #listeners = new Set<(handlers: readonly string[]) => void>();

  tryLock(handler: string, holder?: string): boolean {
    assertHandlerName(handler);
    const lease = this.#leases.get(handler) ?? { token: 0, held: false, holder: undefined };
    if (!lease.held) {
      lease.token++;
      lease.held = true;
      lease.holder = holder;
      this.#leases.set(handler, lease);
    }
    return true;
  }

  unlock(handler: string): void {
    assertHandlerName(handler);
    const lease = this.#leases.get(handler);
    if (lease === undefined) return;
    lease.held = false;
    lease.holder = undefined;
  }

  /** The fencing token of the held lease on `handler`; undefined when it is free. */
  tokenOf(handler: string): number | undefined {
    const lease = this.#leases.get(handler);
    return lease?.held === true ? lease.token : undefined;
  }

  holderOf(handler: string): string | undefined {
    assertHandlerName(handler);
    const lease = this.#leases.get(handler);
    return lease?.held === true ? lease.holder : undefined;
  }

  /** INVALID_STATE (lock lost) for the first fence whose lease was taken since with a newer token (or never taken). */
  check(fences: ReadonlyMap<string, number>): void {
    for (const [handler, token] of fences) {
      if (this.#leases.get(handler)?.token !== token) throw lockLostError(handler);
    }
  }

  onLockLost(listener: (handlers: readonly string[]) => void): () => void {
    return addListener(this.#listeners, listener, "onLockLost");
  }

  /** Frees every held lease and tells the listeners which were held. */
  loseAll(): void {
    const lost: string[] = [];
    for (const [handler, lease] of this.#leases) {
      if (!lease.held) continue;
      lease.held = false;
      lease.holder = undefined;
      lost.push(handler);
    }
    if (lost.length === 0) return;
    for (const listener of [...this.#listeners]) listener(lost);
  }
}
