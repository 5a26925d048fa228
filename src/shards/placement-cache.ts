/**
 * A process's copy of the placements: read whole at start, then kept by
 * LISTEN on the control store's channel (one tenant re-read per notice) and a
 * poll of the rows changed since the last one seen (a lost notice, a dropped
 * connection). Routing reads it without a round trip.
 */
import type pg from "pg";
import { MnemeError } from "../model/errors.js";
import { quoteIdent } from "../postgres/postgres-schema.js";
import type { Placement, PlacementStore } from "./placement-store.js";

export class PlacementCache {
  readonly #store: PlacementStore;
  readonly #pool: pg.Pool;
  readonly #pollMs: number;
  readonly #byTenant = new Map<string, Placement>();
  #change = 0;
  #listener: pg.PoolClient | undefined;
  #timer: ReturnType<typeof setInterval> | undefined;
  /** Callers waiting for a tenant's placement to change. */
  readonly #waiters = new Set<() => void>();
  #stopped = false;

  constructor(store: PlacementStore, pool: pg.Pool, pollMs: number) {
    this.#store = store;
    this.#pool = pool;
    this.#pollMs = pollMs;
  }

  async start(): Promise<void> {
    await this.refreshChanged();
    await this.#listen();
    this.#timer = setInterval(() => void this.refreshChanged().catch(() => undefined), this.#pollMs);
    this.#timer.unref?.();
  }

  async #listen(): Promise<void> {
    if (this.#stopped) return;
    const c = await this.#pool.connect();
    c.on("notification", (n) => {
      if (n.payload !== undefined) void this.refreshTenant(n.payload).catch(() => undefined);
    });
    c.on("error", () => {
      // The poll keeps the cache right meanwhile; the listener comes back on a new connection.
      if (this.#listener === c) this.#listener = undefined;
      c.release(true);
      setTimeout(() => void this.#listen().catch(() => undefined), this.#pollMs).unref?.();
    });
    await c.query(`LISTEN ${quoteIdent(this.#store.channel)}`);
    this.#listener = c;
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    if (this.#timer !== undefined) clearInterval(this.#timer);
    const c = this.#listener;
    this.#listener = undefined;
    if (c !== undefined) {
      await c.query(`UNLISTEN ${quoteIdent(this.#store.channel)}`).catch(() => undefined);
      c.release();
    }
    this.#wake();
  }

  /** The cached placement (undefined: not placed, as far as this process knows). */
  get(tenantUuid: string): Placement | undefined {
    return this.#byTenant.get(tenantUuid);
  }

  all(): Placement[] {
    return [...this.#byTenant.values()];
  }

  #set(p: Placement): void {
    const had = this.#byTenant.get(p.tenantUuid);
    if (had !== undefined && had.version > p.version) return;
    this.#byTenant.set(p.tenantUuid, p);
    this.#wake();
  }

  #wake(): void {
    for (const w of [...this.#waiters]) w();
  }

  async refreshTenant(tenantUuid: string): Promise<Placement | undefined> {
    const p = await this.#store.get(tenantUuid);
    if (p !== undefined) this.#set(p);
    return p;
  }

  async refreshChanged(): Promise<void> {
    const { placements, change } = await this.#store.changedSince(this.#change);
    for (const p of placements) this.#set(p);
    this.#change = change;
  }

  /**
   * The tenant's placement once it is active: re-read from the control store
   * at once (the cache may be behind), then on each notice or poll, until
   * `timeoutMs` has passed (UNAVAILABLE: the move is still paused or its mover died).
   */
  async waitActive(tenantUuid: string, timeoutMs: number): Promise<Placement | undefined> {
    const end = Date.now() + timeoutMs;
    for (;;) {
      const p = await this.refreshTenant(tenantUuid);
      if (p === undefined || p.state === "active") return p;
      const left = end - Date.now();
      if (left <= 0 || this.#stopped) {
        throw new MnemeError("UNAVAILABLE", `tenant ${tenantUuid} is being moved to another shard; its writes are paused, retry later`);
      }
      await new Promise<void>((resolve) => {
        const done = (): void => {
          this.#waiters.delete(done);
          clearTimeout(t);
          resolve();
        };
        const t = setTimeout(done, Math.min(left, 50));
        this.#waiters.add(done);
      });
    }
  }
}
