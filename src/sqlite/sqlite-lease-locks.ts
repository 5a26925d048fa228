import { readlinkSync } from "node:fs";
import { addListener } from "../store/listeners.js";
import { hostname } from "node:os";
import { newUuid } from "../model/clock.js";
import { MnemeError } from "../model/errors.js";
import { lockLostError } from "../store/lock-fencing.js";
import { assertHandlerName } from "../store/readmodel-validation.js";
import type { SqliteDatabase } from "./sqlite-database.js";
import { toStoreError } from "./sqlite-errors.js";

/** Called with the handlers whose leases were lost (another instance took them, or they could not be renewed in time). */
export type SqliteLockLostListener = (handlers: readonly string[]) => void;

/** Options of {@link SqliteLeaseLocks}. */
export interface SqliteLeaseLocksOptions {
  /** The lease table (already prefixed; created by the owning backend). */
  readonly table: string;
  /** How long a lease lasts without renewal (ms); renewed every leaseMs/3. */
  readonly leaseMs: number;
  /** The open connection with the lease table created (throws STORE_CLOSED once closed). */
  readonly connection: () => SqliteDatabase;
}

/** The DDL of the lease table: one row per locked handler, with its fencing token and the holder's instance id. */
export function leaseTableDdl(table: string): string {
  return `CREATE TABLE IF NOT EXISTS ${table} (handler TEXT PRIMARY KEY, owner TEXT NOT NULL, expires_at INTEGER NOT NULL, token INTEGER NOT NULL DEFAULT 0, holder TEXT);`;
}

/** Adds the fencing columns to a lease table made by an earlier version (inside the owner's table creation). */
export function upgradeLeaseTable(db: SqliteDatabase, table: string): void {
  const columns = new Set((db.statement(`PRAGMA table_info(${table})`).all() as { name: string }[]).map((c) => c.name));
  if (!columns.has("token")) db.statement(`ALTER TABLE ${table} ADD COLUMN token INTEGER NOT NULL DEFAULT 0`).run();
  if (!columns.has("holder")) db.statement(`ALTER TABLE ${table} ADD COLUMN holder TEXT`).run();
}

/**
 * The single-processor lock of SqliteReadmodelStoreBackend: a lease per
 * handler in a table of the shared file, because SQLite has no lock that
 * outlives a transaction and dies with its process.
 *
 * - `tryLock` takes the row in one upsert under BEGIN IMMEDIATE when it is
 *   free, expired, or already this owner's (each backend instance is its own
 *   owner, so two backends in one process exclude each other too), and, in
 *   the same transaction, when its owner is a process of this machine that is
 *   gone: the owner id names its host and process (see {@link leaseOwnerId}),
 *   so a process restarted after a crash does not wait for its own dead lease.
 * - A heartbeat renews held leases every leaseMs/3; a renewal that finds the
 *   row gone or owned by someone else (this process stalled past expiry and
 *   another instance took over) reports the handler lost.
 * - The fence: `verify` runs inside the write transaction that commits a
 *   fenced handler's checkpoint and renews its lease there, so a stalled
 *   instance that wakes up cannot commit after another one took over — the
 *   check and the write are one SQLite transaction.
 * - The fencing token: every take (not a renewal of a lease this owner
 *   holds) adds one to the row's token in the same transaction;
 *   `checkTokens`, run in a commit's write transaction, refuses it when a
 *   token moved. That also fences a batch started before this owner lost
 *   the lease and took it back (same owner, newer token).
 * Expiry uses the wall clock (Date.now()): the processes sharing a file run
 * on one machine, so they share it.
 */
export class SqliteLeaseLocks {
  /** This instance's owner id in the lease table: `<uuid>/<pid>@<host>`. */
  readonly owner = leaseOwnerId();
  private readonly held = new Map<string, number>(); // handler -> expires_at we last wrote
  private readonly tokens = new Map<string, number>(); // handler -> fencing token of our take
  /** Held once and lost since: their checkpoint writes stay fenced until tryLock or unlock. */
  private readonly lost = new Set<string>();
  private readonly listeners = new Set<SqliteLockLostListener>();
  private heartbeat: ReturnType<typeof setInterval> | undefined;
  private heartbeatPaused = false;

  constructor(private readonly opts: SqliteLeaseLocksOptions) {}

  /** Takes or renews the lease of `handler` (recording `holder`); true when it is this owner's now. */
  tryLock(handler: string, holder?: string): boolean {
    assertHandlerName(handler);
    const db = this.opts.connection();
    const now = Date.now();
    const expiresAt = now + this.opts.leaseMs;
    let taken: boolean;
    let token = 0;
    try {
      const take = (): boolean => {
        const upserted =
          db
            .statement(
              `INSERT INTO ${this.opts.table} (handler, owner, expires_at) VALUES (?, ?, ?)
             ON CONFLICT (handler) DO UPDATE SET owner = excluded.owner, expires_at = excluded.expires_at
             WHERE ${this.opts.table}.owner = excluded.owner OR ${this.opts.table}.expires_at <= ?`,
            )
            .run(handler, this.owner, expiresAt, now).changes > 0;
        if (upserted) return true;
        // Held and not expired: still free for us when its owner process is gone from this machine.
        const row = db.statement(`SELECT owner FROM ${this.opts.table} WHERE handler = ?`).get(handler) as { owner: string } | undefined;
        if (row === undefined || !ownerIsGone(row.owner)) return false;
        return (
          db
            .statement(`UPDATE ${this.opts.table} SET owner = ?, expires_at = ? WHERE handler = ? AND owner = ?`)
            .run(this.owner, expiresAt, handler, row.owner).changes > 0
        );
      };
      taken = db.writeTransaction(() => {
        // A renewal keeps the token: this owner held the lease all along (the row is still its own, unexpired).
        const before = db.statement(`SELECT owner, expires_at FROM ${this.opts.table} WHERE handler = ?`).get(handler) as
          { owner: string; expires_at: number } | undefined;
        const renewal = this.held.has(handler) && before !== undefined && before.owner === this.owner && before.expires_at > now;
        if (!take()) return false;
        if (!renewal) {
          db.statement(`UPDATE ${this.opts.table} SET token = token + 1, holder = ? WHERE handler = ?`).run(holder ?? null, handler);
        }
        token = (db.statement(`SELECT token FROM ${this.opts.table} WHERE handler = ?`).get(handler) as { token: number }).token;
        return true;
      });
    } catch (e) {
      throw toStoreError(e, `tryLock(${handler})`);
    }
    if (taken) {
      this.held.set(handler, expiresAt);
      this.tokens.set(handler, token);
      this.lost.delete(handler);
      this.startHeartbeat();
    } else if (this.held.has(handler)) {
      this.markLost([handler]);
    }
    return taken;
  }

  /** Releases the lease of `handler` when this owner holds it (or held it); otherwise does nothing. */
  unlock(handler: string): void {
    const had = this.held.delete(handler) || this.lost.delete(handler);
    this.tokens.delete(handler);
    if (this.held.size === 0) this.stopHeartbeat();
    if (!had) return;
    try {
      // Freed, not deleted: the row keeps its token, so the next take's token is greater still.
      this.opts
        .connection()
        .statement(`UPDATE ${this.opts.table} SET expires_at = 0, holder = NULL WHERE handler = ? AND owner = ?`)
        .run(handler, this.owner);
    } catch (e) {
      throw toStoreError(e, `unlock(${handler})`);
    }
  }

  /** Adds a listener for lost leases; returns its remover. */
  onLockLost(listener: SqliteLockLostListener): () => void {
    return addListener(this.listeners, listener, "onLockLost");
  }

  /** The handlers whose leases this owner holds now. */
  heldLockNames(): string[] {
    return [...this.held.keys()];
  }

  /** The fencing token of the lease on `handler` this owner holds; undefined when it holds none. */
  tokenOf(handler: string): number | undefined {
    return this.held.has(handler) ? this.tokens.get(handler) : undefined;
  }

  /**
   * Inside a write transaction: the handlers of `fences` (handler -> token)
   * whose row's token is another one now (another take happened since).
   */
  checkTokens(fences: ReadonlyMap<string, number>): string[] {
    if (fences.size === 0) return [];
    const read = this.opts.connection().statement(`SELECT token FROM ${this.opts.table} WHERE handler = ?`);
    const moved: string[] = [];
    for (const [h, token] of fences) if ((read.get(h) as { token: number } | undefined)?.token !== token) moved.push(h);
    return moved;
  }

  /** The holder recorded in `handler`'s unexpired lease; undefined when it is free (its owner process gone from this machine included). */
  holderOf(handler: string): string | undefined {
    const row = this.opts
      .connection()
      .statement(`SELECT holder, owner FROM ${this.opts.table} WHERE handler = ? AND expires_at > ?`)
      .get(handler, Date.now()) as { holder: string | null; owner: string } | undefined;
    return row === undefined || ownerIsGone(row.owner) ? undefined : (row.holder ?? undefined);
  }

  /** True when `handler`'s checkpoint writes must prove the lease is still this owner's. */
  fenced(handler: string): boolean {
    return this.held.has(handler) || this.lost.has(handler);
  }

  /**
   * Inside a write transaction: renews each handler's lease if this owner
   * still holds the row; returns the handlers whose row is gone or someone
   * else's (the caller rolls back and calls `markLost`).
   */
  verify(handlers: readonly string[]): string[] {
    if (handlers.length === 0) return [];
    const db = this.opts.connection();
    const expiresAt = Date.now() + this.opts.leaseMs;
    const renew = db.statement(`UPDATE ${this.opts.table} SET expires_at = ? WHERE handler = ? AND owner = ?`);
    const gone: string[] = [];
    for (const h of handlers) if (renew.run(expiresAt, h, this.owner).changes === 0) gone.push(h);
    return gone;
  }

  /**
   * Inside a write transaction, for a commit fenced by tokens: renews the
   * lease of each of `handlers` when this owner holds it under the token
   * `fences` names for it (one statement each), and checks the tokens of the
   * other fences. Returns the handlers whose lease is another owner's
   * (`gone`) and those whose token moved while this owner holds the lease
   * again (`moved`: a batch of an earlier hold).
   */
  verifyFenced(handlers: readonly string[], fences: ReadonlyMap<string, number>): { gone: string[]; moved: string[] } {
    const db = this.opts.connection();
    const expiresAt = Date.now() + this.opts.leaseMs;
    const renew = db.statement(`UPDATE ${this.opts.table} SET expires_at = ? WHERE handler = ? AND owner = ? AND token = ?`);
    const gone: string[] = [];
    const moved: string[] = [];
    const rest = new Map(fences);
    for (const h of handlers) {
      const token = fences.get(h);
      if (token === undefined) {
        gone.push(...this.verify([h]));
        continue;
      }
      rest.delete(h);
      if (renew.run(expiresAt, h, this.owner, token).changes > 0) continue;
      // Which of the two: the lease is someone else's, or ours under a newer token.
      (this.verify([h]).length > 0 ? gone : moved).push(h);
    }
    moved.push(...this.checkTokens(rest));
    return { gone, moved };
  }

  /**
   * The heartbeat's work, run now: renews every held lease in one write
   * transaction and reports the ones lost. When the renewal itself fails
   * (file busy past busy_timeout), leases whose expiry has passed are no
   * longer provably ours and are reported lost too.
   */
  renew(): string[] {
    if (this.held.size === 0) return [];
    const handlers = [...this.held.keys()];
    const now = Date.now();
    const expiresAt = now + this.opts.leaseMs;
    let gone: string[];
    try {
      const db = this.opts.connection();
      gone = db.writeTransaction(() => this.verify(handlers));
    } catch {
      gone = handlers.filter((h) => (this.held.get(h) ?? 0) <= now);
      this.markLost(gone);
      return gone;
    }
    for (const h of handlers) if (!gone.includes(h) && this.held.has(h)) this.held.set(h, expiresAt);
    this.markLost(gone);
    return gone;
  }

  /** Moves held handlers to lost and tells the listeners (once per loss). */
  markLost(handlers: readonly string[]): void {
    const told = handlers.filter((h) => this.held.delete(h));
    for (const h of handlers) this.lost.add(h);
    if (this.held.size === 0) this.stopHeartbeat();
    if (told.length === 0) return;
    for (const l of [...this.listeners]) {
      try {
        l(told);
      } catch (e) {
        process.emitWarning(e instanceof Error ? e : new Error(String(e)), { code: "MNEME_LOCK_LOST_LISTENER_FAILED" });
      }
    }
  }

  /** Releases every lease of this owner (best effort: a closed file has no one to release to) and stops the heartbeat. */
  close(): void {
    this.stopHeartbeat();
    const hadAny = this.held.size > 0 || this.lost.size > 0;
    this.held.clear();
    this.lost.clear();
    this.tokens.clear();
    this.listeners.clear();
    if (!hadAny) return;
    try {
      this.opts.connection().statement(`UPDATE ${this.opts.table} SET expires_at = 0, holder = NULL WHERE owner = ?`).run(this.owner);
    } catch {
      // The connection is closed already; the leases expire on their own after leaseMs.
    }
  }

  /** @internal Test hook: a paused heartbeat stands for a process that stalled (its leases run out). */
  pauseHeartbeat(paused: boolean): void {
    this.heartbeatPaused = paused;
  }

  private startHeartbeat(): void {
    if (this.heartbeat !== undefined) return;
    this.heartbeat = setInterval(
      () => {
        if (!this.heartbeatPaused) this.renew();
      },
      Math.max(1, Math.floor(this.opts.leaseMs / 3)),
    );
    this.heartbeat.unref?.();
  }

  private stopHeartbeat(): void {
    if (this.heartbeat !== undefined) clearInterval(this.heartbeat);
    this.heartbeat = undefined;
  }
}

/** The error of a commit refused because a handler's fencing token moved (another take since this one's). */
export function tokenMovedError(handlers: readonly string[]): MnemeError {
  return lockLostError(handlers.join(", "), "sqlite: its lease was taken again since this batch began");
}

/** The error of a commit refused because another instance holds the handlers' leases now. */
export function leaseLostError(handlers: readonly string[]): MnemeError {
  return new MnemeError(
    "INVALID_STATE",
    `sqlite: the processing lock of ${handlers.join(", ")} is held by another instance now (this one did not renew its lease in time); nothing was written`,
    { details: handlers.map((h) => ({ message: "lease lost", eventHandlerName: h })) },
  );
}

/** This machine as lease owners name it: the hostname, plus the PID namespace where the platform tells it (containers that share a hostname). */
const THIS_HOST = ((): string => {
  let ns = "";
  try {
    ns = readlinkSync("/proc/self/ns/pid"); // e.g. "pid:[4026531836]"
  } catch {
    // not Linux (or no /proc): the hostname alone
  }
  return ns === "" ? hostname() : `${hostname()}|${ns}`;
})();

/** A fresh lease owner id: `<uuid>/<pid>@<host>` (one per backend instance; the process and host let a restarted process see its predecessor is gone). */
export function leaseOwnerId(): string {
  return `${newUuid()}/${process.pid}@${THIS_HOST}`;
}

/**
 * True only when `owner` names a process of this host (and PID namespace)
 * other than this one that no longer exists. Anything else (another host,
 * this process, an id without host and pid, a live process, a PID reused by
 * another live process) is treated as alive: its lease runs until it expires.
 */
export function ownerIsGone(owner: string): boolean {
  const m = /^[^/]+\/(\d+)@(.+)$/.exec(owner);
  if (m === null || m[2] !== THIS_HOST) return false;
  const pid = Number(m[1]);
  if (!Number.isSafeInteger(pid) || pid <= 0 || pid === process.pid) return false;
  try {
    process.kill(pid, 0); // signal 0: existence check only
    return false;
  } catch (e) {
    // ESRCH: no such process. EPERM: it exists (another user's).
    return (e as NodeJS.ErrnoException).code === "ESRCH";
  }
}
