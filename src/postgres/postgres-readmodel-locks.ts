import { MnemeError } from "../model/errors.js";
import { mapPgError } from "./postgres-errors.js";
import type { CheckedOutClient } from "./postgres-pool.js";
import { advisoryKey } from "./postgres-schema.js";

/** Called with the handlers whose locks were lost because the lock connection failed. */
export type LockLostListener = (handlers: readonly string[]) => void;

/** What the locks need of their backend. */
export interface PostgresReadmodelLocksOptions {
  /** The locks table (handler, token, holder), schema-qualified. */
  readonly locksTable: string;
  /** The schema, part of each advisory lock's key. */
  readonly schema: string;
  /** Checks out the dedicated session client; `onLost` is told once when its session dies. */
  readonly checkout: (onLost: () => void) => Promise<CheckedOutClient>;
  /** Throws STORE_CLOSED once the backend is closed. */
  readonly assertOpen: () => void;
}

/**
 * The processing locks of a PostgresReadmodelStoreBackend: a session
 * advisory lock per handler (`pg_try_advisory_lock`) on one dedicated client
 * held while any lock is held, so one instance processes a handler at a
 * time; the lock goes on `unlock`, on `release`, or when the process or its
 * connection dies. Taking a lock bumps the handler's fencing token in the
 * locks table (its own committed statement) and records the holder; the
 * backend's transactions prove that token (see checkFencingToken there).
 */
export class PostgresReadmodelLocks {
  /** handler -> the fencing token this backend got when it took the lock. */
  private readonly tokens = new Map<string, number>();
  private readonly held = new Set<string>();
  private readonly listeners = new Set<LockLostListener>();
  private client: CheckedOutClient | undefined;
  private ops: Promise<unknown> = Promise.resolve();

  constructor(private readonly opts: PostgresReadmodelLocksOptions) {}

  /** Takes `handler`'s lock (true), or finds it held by another session (false); true at once when this backend holds it. */
  async tryLock(handler: string, holder?: string): Promise<boolean> {
    if (typeof handler !== "string" || handler === "")
      throw new MnemeError("INVALID_REQUEST", "tryLock: a handler name must be a non-empty string");
    return this.serial(async () => {
      this.opts.assertOpen();
      if (this.held.has(handler)) return true;
      const client = await this.lockClient();
      let ok: boolean;
      try {
        const res = await client.query<{ ok: boolean }>("SELECT pg_try_advisory_lock($1::bigint) AS ok", [this.key(handler)]);
        ok = res.rows[0]?.ok === true;
      } catch (e) {
        throw mapPgError(e, `postgres: tryLock(${handler})`);
      }
      if (!ok) {
        if (this.held.size === 0) this.dropClient(false);
        return false;
      }
      this.tokens.set(handler, await this.bumpToken(client, handler, holder));
      this.held.add(handler);
      return true;
    });
  }

  /** After the advisory lock is taken: the handler's next fencing token, with `holder` recorded. */
  private async bumpToken(client: CheckedOutClient, handler: string, holder: string | undefined): Promise<number> {
    try {
      // Its own committed statement: a transaction of the previous holder that still holds the row
      // (checkFencingToken) commits first; any that comes later sees this token and rolls back.
      const res = await client.query<{ token: string }>(
        `INSERT INTO ${this.opts.locksTable} (handler, token, holder) VALUES ($1, 1, $2)
         ON CONFLICT (handler) DO UPDATE SET token = ${this.opts.locksTable}.token + 1, holder = EXCLUDED.holder
         RETURNING token::text AS token`,
        [handler, holder ?? null],
      );
      return Number(res.rows[0]?.token);
    } catch (e) {
      // Not fenced: the lock must not stay taken.
      await client.query("SELECT pg_advisory_unlock($1::bigint)", [this.key(handler)]).catch(() => this.dropClient(true));
      if (this.held.size === 0) this.dropClient(false);
      throw mapPgError(e, `postgres: tryLock(${handler})`);
    }
  }

  /** Releases `handler`'s lock when this backend holds it; otherwise does nothing. */
  async unlock(handler: string): Promise<void> {
    await this.serial(async () => {
      const client = this.client;
      if (!this.held.has(handler) || client === undefined) return;
      this.held.delete(handler);
      const token = this.tokens.get(handler);
      this.tokens.delete(handler);
      try {
        // The holder is cleared only while the token is still ours (a standby lists no one then).
        await client.query(`UPDATE ${this.opts.locksTable} SET holder = NULL WHERE handler = $1 AND token = $2`, [handler, token ?? -1]);
        await client.query("SELECT pg_advisory_unlock($1::bigint)", [this.key(handler)]);
      } catch (e) {
        // Ending the session is the sure way to let the lock go.
        this.dropClient(true);
        throw mapPgError(e, `postgres: unlock(${handler})`);
      }
      if (this.held.size === 0) this.dropClient(false);
    });
  }

  /** The handlers whose locks are held now. */
  heldLockNames(): string[] {
    return [...this.held];
  }

  /** The fencing token of the lock on `handler` held now; undefined when none is. */
  fencingToken(handler: string): number | undefined {
    return this.held.has(handler) ? this.tokens.get(handler) : undefined;
  }

  /** Tells `listener` when the lock connection failed and the listed locks were lost. */
  onLockLost(listener: LockLostListener): () => void {
    this.listeners.add(listener);
    return () => {
      this.listeners.delete(listener);
    };
  }

  /** Releases every lock (before it resolves, so another instance can take over at once) and ends the session. */
  async release(): Promise<void> {
    await this.ops.catch(() => undefined);
    const client = this.client;
    if (client !== undefined && this.held.size > 0) {
      // Ending the session below would release them too, but asynchronously.
      try {
        await client.query("SELECT pg_advisory_unlock_all()");
      } catch {
        // The connection is gone, and its locks with it.
      }
    }
    this.held.clear();
    this.tokens.clear();
    this.dropClient(true);
  }

  /** The advisory-lock key (a bigint as text) of `handler`'s lock. */
  key(handler: string): string {
    return advisoryKey("mneme:readmodel-lock", this.opts.schema, handler);
  }

  private serial<R>(op: () => Promise<R>): Promise<R> {
    const run = this.ops.then(op, op);
    this.ops = run.catch(() => undefined);
    return run;
  }

  private async lockClient(): Promise<CheckedOutClient> {
    if (this.client !== undefined) return this.client;
    // Told once when the session dies (an 'error' or an unexpected 'end'): its advisory locks are gone.
    const onLost = (): void => {
      if (this.client !== client) return;
      const lost = [...this.held];
      this.held.clear();
      this.tokens.clear();
      this.dropClient(true);
      if (lost.length > 0) this.tellLost(lost);
    };
    const client = await this.opts.checkout(onLost);
    this.client = client;
    return client;
  }

  private tellLost(lost: readonly string[]): void {
    for (const l of [...this.listeners]) {
      try {
        l(lost);
      } catch {
        // A listener's failure must not hide the loss from the others.
      }
    }
  }

  private dropClient(destroy: boolean): void {
    const client = this.client;
    if (client === undefined) return;
    this.client = undefined;
    client.release(destroy);
  }
}
