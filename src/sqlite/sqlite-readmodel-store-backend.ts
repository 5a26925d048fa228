import { AsyncLocalStorage } from "node:async_hooks";
import { MnemeError } from "../model/errors.js";
import type { CollectionScope, ReadmodelCollection, ReadmodelStoreBackend } from "../store/readmodel-store-backend.js";
import {
  assertCheckpoint,
  assertCollectionMoves,
  assertCollectionName,
  assertHandlerName,
  checkScope,
} from "../store/readmodel-validation.js";
import { type EnsureIndexesOptions, planCollectionIndexes } from "../store/readmodel-indexes.js";
import type { StoreInfo } from "../store/store-info.js";
import type { SqliteDatabase, SqliteStoreOptions } from "./sqlite-database.js";
import { toStoreError } from "./sqlite-errors.js";
import {
  leaseLostError,
  leaseTableDdl,
  SqliteLeaseLocks,
  tokenMovedError,
  upgradeLeaseTable,
  type SqliteLockLostListener,
} from "./sqlite-lease-locks.js";
import { noteFence } from "../store/lock-fencing.js";
import { SqliteStoreBase } from "./sqlite-store-base.js";
import { runStatements, SqliteSqlTableAccess } from "./sqlite-sql-table-access.js";
import type { SqlTableAccess } from "../store/sql-table-access.js";
import { type SqliteCollectionHost, SqliteReadmodelCollection } from "./sqlite-readmodel-collection.js";
import { SqliteReadmodelDocuments } from "./sqlite-readmodel-documents.js";
import { syncCollectionIndexes } from "./sqlite-readmodel-indexes.js";
import {
  newPendingWrites,
  type PendingStatement,
  type PendingWrites,
  touchesCollection,
  writesNothing,
} from "./sqlite-readmodel-pending.js";

/** The default lease of a readmodel lock (ms). */
const DEFAULT_LOCK_LEASE_MS = 5000;

/** Constructor options of {@link SqliteReadmodelStoreBackend}. */
export type SqliteReadmodelStoreBackendOptions = SqliteStoreOptions & {
  /**
   * How long a readmodel's processing lock lasts without renewal (ms; renewed
   * every lockLeaseMs/3). A process that dies or stalls longer loses it to
   * another instance after at most this long. Default 5000.
   */
  readonly lockLeaseMs?: number;
};

/**
 * Readmodel documents as JSON text in one table (collection, key, doc), plus
 * a checkpoint table.
 *
 * `transaction(fn)` is serialised by an async mutex and tracked with
 * AsyncLocalStorage: writes made inside fn (in its async context) are
 * buffered and written in one BEGIN IMMEDIATE ... COMMIT when fn resolves, or
 * dropped when it throws; writes from outside wait for the transaction to end;
 * a nested transaction joins the outer one. The buffer is deliberate: the
 * stores of one file share one connection, so a BEGIN held open across fn's
 * awaits would pull every event append, command record and log line made
 * meanwhile into this transaction (and its rollback), or block them all.
 * Buffering keeps the SQLite write lock for the few milliseconds of the final
 * commit only. Reads inside fn see its own writes: get() from the buffer,
 * list()/count() by replaying the collection's pending writes in a savepoint
 * that is rolled back straight after the query (all synchronous). Reads from
 * outside see committed data only.
 *
 * `tryLock`/`unlock`/`onLockLost`: a lease per handler in a table of the file
 * (see SqliteLeaseLocks), so that of several processes (or several backends
 * in one process) on one file exactly one processes a readmodel; the others
 * stand by; a lease whose owner process is gone from this machine is taken at
 * once, without waiting for it to expire. A commit that carries a locked
 * handler's checkpoint checks the lease in the same write transaction and is
 * refused (INVALID_STATE, nothing written, onLockLost told) when another
 * instance has taken it over. `checkFencingToken` adds a stronger check to a
 * transaction: its commit also proves the lease's fencing token is still the
 * one the batch began with, so a lease lost and taken back meanwhile fences
 * it too.
 */
export class SqliteReadmodelStoreBackend extends SqliteStoreBase implements ReadmodelStoreBackend, SqliteCollectionHost {
  /** Stores a tenant with each document (column tenant_uuid) and honours a collection's scope. */
  readonly tenantScopes = true;
  private readonly documents: SqliteReadmodelDocuments;
  private readonly checkpointsTable: string;
  private readonly context = new AsyncLocalStorage<PendingWrites>();
  private readonly collections = new Map<string, SqliteReadmodelCollection<unknown>>();
  /** collection -> the indexes (indexesKey) this instance made sure of. */
  private readonly ensuredIndexes = new Map<string, string>();
  private locked = false;
  private readonly waiters: (() => void)[] = [];
  private readonly locksTable: string;
  private readonly leases: SqliteLeaseLocks;
  #sqlTables: SqlTableAccess | undefined;

  constructor(opts: SqliteReadmodelStoreBackendOptions) {
    const lockLeaseMs = opts?.lockLeaseMs ?? DEFAULT_LOCK_LEASE_MS;
    if (!Number.isInteger(lockLeaseMs) || lockLeaseMs < 3) {
      throw new MnemeError("INVALID_REQUEST", `sqlite: lockLeaseMs must be an integer >= 3, got ${String(lockLeaseMs)}`);
    }
    super(opts);
    this.documents = new SqliteReadmodelDocuments(this.db, this.prefix);
    this.checkpointsTable = `${this.prefix}readmodel_checkpoints`;
    this.locksTable = `${this.prefix}readmodel_locks`;
    this.leases = new SqliteLeaseLocks({ table: this.locksTable, leaseMs: lockLeaseMs, connection: () => this.ready() });
  }

  protected createTables(): void {
    this.documents.createTables();
    this.db.exec(`
      CREATE TABLE IF NOT EXISTS ${this.checkpointsTable} (handler TEXT PRIMARY KEY, position INTEGER NOT NULL);
      ${leaseTableDdl(this.locksTable)}
    `);
    upgradeLeaseTable(this.db, this.locksTable);
  }

  collection<T>(name: string, scope?: CollectionScope): ReadmodelCollection<T> {
    assertCollectionName(name);
    const checked = checkScope(scope);
    if (checked.readTenantUuid !== undefined || checked.writeTenantUuid !== undefined)
      return new SqliteReadmodelCollection<T>(this, name, checked);
    let c = this.collections.get(name);
    if (c === undefined) {
      c = new SqliteReadmodelCollection<unknown>(this, name, {});
      this.collections.set(name, c);
    }
    return c as ReadmodelCollection<T>;
  }

  async listCollections(): Promise<string[]> {
    const names = new Set<string>();
    try {
      this.ready();
      for (const name of this.documents.committedNames()) names.add(name);
    } catch (e) {
      throw toStoreError(e, "listCollections");
    }
    const tx = this.pending();
    if (tx !== undefined) {
      for (const [name, docs] of tx.docs) if ([...docs.values()].some((d) => d !== null)) names.add(name);
    }
    return [...names].sort();
  }

  async transaction<R>(fn: () => Promise<R>): Promise<R> {
    if (typeof fn !== "function") throw new MnemeError("INVALID_REQUEST", "transaction: fn must be a function");
    if (this.pending() !== undefined) return fn();
    this.ready();
    await this.acquire();
    const tx = newPendingWrites();
    try {
      const result = await this.context.run(tx, fn);
      tx.active = false;
      this.commit(tx);
      return result;
    } finally {
      tx.active = false;
      this.release();
    }
  }

  /**
   * For each `[target, source]`: makes `target` hold exactly the documents
   * `source` holds and empties `source`; all in one write transaction (a
   * readmodel's restore from zero switches generations with it). Inside a
   * transaction they are applied at its commit, after its document writes;
   * reads inside that transaction do not see them.
   */
  async replaceCollections(moves: readonly (readonly [target: string, source: string])[]): Promise<void> {
    assertCollectionMoves(moves);
    await this.write("replaceCollections", (tx) => {
      if (tx !== undefined) {
        for (const [target, source] of moves) tx.moves.push([target, source]);
        return;
      }
      this.ready();
      this.documents.replaceNow(moves);
    });
  }

  /**
   * Makes the indexes of `collection` exactly `indexes` (see
   * ReadmodelStoreBackend.ensureIndexes and syncCollectionIndexes), at once
   * in a write transaction of their own (also inside a transaction: DDL is
   * not buffered; an index changes no document).
   */
  async ensureIndexes(collection: string, indexes: readonly (readonly string[])[], options?: EnsureIndexesOptions): Promise<void> {
    assertCollectionName(collection);
    const plan = planCollectionIndexes(this.prefix, collection, indexes, options);
    if (this.ensuredIndexes.get(collection) === plan.key) return;
    syncCollectionIndexes(this.ready(), this.documents.docsTable, collection, plan);
    this.ensuredIndexes.set(collection, plan.key);
  }

  async getCheckpoint(handler: string): Promise<number> {
    assertHandlerName(handler);
    const pending = this.pending()?.checkpoints.get(handler);
    if (pending !== undefined) return pending;
    try {
      const row = this.ready().statement(`SELECT position FROM ${this.checkpointsTable} WHERE handler = ?`).get(handler) as
        { position: number } | undefined;
      return row?.position ?? 0;
    } catch (e) {
      throw toStoreError(e, "getCheckpoint");
    }
  }

  async setCheckpoint(handler: string, position: number): Promise<void> {
    assertHandlerName(handler);
    assertCheckpoint(position);
    await this.write("setCheckpoint", (tx) => {
      if (tx !== undefined) tx.checkpoints.set(handler, position);
      else if (this.leases.fenced(handler))
        this.fencedWrite("setCheckpoint", [handler], new Map(), () => this.upsertCheckpoint(handler, position));
      else this.upsertCheckpoint(handler, position);
    });
  }

  /**
   * Takes the processing lock of `handler` for this backend instance (a lease
   * in the file): true when it was free, expired, or already ours (then renewed).
   */
  async tryLock(handler: string, holder?: string): Promise<boolean> {
    return this.leases.tryLock(handler, holder);
  }

  /** The fencing token of the lease on `handler` this backend holds; undefined when it holds none. */
  fencingToken(handler: string): number | undefined {
    return this.leases.tokenOf(handler);
  }

  /**
   * Inside a transaction: its commit (one write transaction) first proves
   * that `handler`'s token is still `token`, else writes nothing and rejects
   * with INVALID_STATE (lock lost).
   */
  async checkFencingToken(handler: string, token: number): Promise<void> {
    noteFence(this.pending()?.fences, handler, token);
  }

  /** The instance id recorded in `handler`'s unexpired lease; undefined when it is free. */
  async lockHolder(handler: string): Promise<string | undefined> {
    assertHandlerName(handler);
    try {
      return this.leases.holderOf(handler);
    } catch (e) {
      throw toStoreError(e, "lockHolder");
    }
  }

  /** Releases the lock of `handler` when this backend holds it; otherwise does nothing. */
  async unlock(handler: string): Promise<void> {
    this.leases.unlock(handler);
  }

  /** Tells `listener` which handlers' locks were lost (another instance took an expired lease), so they step back. */
  onLockLost(listener: SqliteLockLostListener): () => void {
    return this.leases.onLockLost(listener);
  }

  /** The handlers whose locks this backend holds now. */
  heldLockNames(): string[] {
    return this.leases.heldLockNames();
  }

  /** This backend's owner id in the lease table (one per instance): `<uuid>/<pid>@<host>`, so a restarted process sees a dead owner. */
  get lockOwner(): string {
    return this.leases.owner;
  }

  /** @internal The lease heartbeat, for tests: renews now, or is paused to stand for a stalled process. */
  get leaseLocks(): SqliteLeaseLocks {
    return this.leases;
  }

  /** Releases this backend's locks, then the connection; idempotent. */
  override async close(): Promise<void> {
    this.leases.close();
    await super.close();
  }

  async info(): Promise<StoreInfo> {
    // The newest write stands for "last item created": documents are replaced in place.
    return this.tableInfo(this.documents.docsTable, "info", { created: "updated_at" });
  }

  // ---- used by SqliteReadmodelCollection ----

  /** The running transaction's buffer when called from inside it. */
  pending(): PendingWrites | undefined {
    const tx = this.context.getStore();
    return tx?.active === true ? tx : undefined;
  }

  /**
   * Runs a write: into the buffer inside a transaction; otherwise on SQLite at
   * once, or after the running transaction (and earlier waiting writes) end.
   */
  async write<R>(what: string, fn: (tx: PendingWrites | undefined) => R): Promise<R> {
    const tx = this.pending();
    if (tx !== undefined) return fn(tx);
    this.ready();
    if (this.locked) {
      await this.acquire();
      try {
        return this.direct(what, fn);
      } finally {
        this.release();
      }
    }
    return this.direct(what, fn);
  }

  /** Runs a read query: inside a transaction with pending writes on `collection`, against a throw-away copy of them. */
  read<R>(what: string, collection: string, query: () => R): R {
    const db = this.ready();
    const tx = this.pending();
    try {
      if (tx === undefined || !touchesCollection(tx, collection)) return query();
      return db.scratch(() => {
        this.documents.applyCollection(tx, collection);
        return query();
      });
    } catch (e) {
      throw toStoreError(e, what);
    }
  }

  /** Upserts documents with `tenant` (undefined: a replaced document keeps its own) and registers the collection, in one write transaction. */
  putNow(collection: string, entries: readonly (readonly [string, string])[], tenant: string | undefined): void {
    this.ready();
    this.documents.putNow(collection, entries, tenant);
  }

  get docs(): string {
    return this.documents.docsTable;
  }

  /** @internal Inside a transaction: runs `stmt` at its commit (true); outside one: false, nothing done. */
  deferStatement(stmt: PendingStatement): boolean {
    const tx = this.pending();
    if (tx === undefined) return false;
    tx.statements.push(stmt);
    return true;
  }

  /**
   * @internal Runs a query that must see the running transaction's pending
   * statements: against a throw-away savepoint with them applied (always
   * with `isolate`: a write whose rows are wanted now); outside a
   * transaction, or with none pending, directly.
   */
  readPending<R>(what: string, query: () => R, isolate = false): R {
    const db = this.ready();
    const pending = this.pending()?.statements ?? [];
    try {
      if (pending.length === 0 && !isolate) return query();
      return db.scratch(() => {
        runStatements(db, pending);
        return query();
      });
    } catch (e) {
      throw toStoreError(e, what);
    }
  }

  /** The application's own tables in this file, for SQL-table readmodels (statements join this backend's transactions). */
  sqlTables(): SqlTableAccess {
    return (this.#sqlTables ??= new SqliteSqlTableAccess(this, this.prefix));
  }

  /** The open connection, for this backend's collections. */
  connection(): SqliteDatabase {
    return this.ready();
  }

  /** Runs a read of committed rows only (the caller consults the buffer itself). */
  committed<R>(what: string, query: () => R): R {
    try {
      return query();
    } catch (e) {
      throw toStoreError(e, what);
    }
  }

  // ---- internals ----

  private direct<R>(what: string, fn: (tx: undefined) => R): R {
    try {
      return fn(undefined);
    } catch (e) {
      throw toStoreError(e, what);
    }
  }

  private commit(tx: PendingWrites): void {
    if (writesNothing(tx)) return;
    let touched: string[] = [];
    const fenced = [...tx.checkpoints.keys()].filter((h) => this.leases.fenced(h));
    this.fencedWrite("transaction commit", fenced, tx.fences, () => {
      touched = this.documents.applyAll(tx);
      runStatements(this.db, tx.statements);
      for (const [handler, position] of tx.checkpoints) this.upsertCheckpoint(handler, position);
    });
    this.documents.noteCommitted(touched);
  }

  /**
   * Runs fn in one write transaction after proving (and renewing) this
   * backend's lease on each of `handlers`; when one was taken over, rolls
   * back, reports the loss and throws INVALID_STATE. The same when a token
   * of `fences` moved (the caller's lock was taken since it began).
   */
  private fencedWrite(what: string, handlers: readonly string[], fences: ReadonlyMap<string, number>, fn: () => void): void {
    const db = this.ready();
    let gone: string[] = [];
    try {
      db.writeTransaction(() => {
        if (fences.size === 0) gone = this.leases.verify(handlers);
        else {
          const found = this.leases.verifyFenced(handlers, fences);
          gone = found.gone;
          if (gone.length === 0 && found.moved.length > 0) throw tokenMovedError(found.moved);
        }
        if (gone.length > 0) throw leaseLostError(gone);
        fn();
      });
    } catch (e) {
      if (gone.length > 0) this.leases.markLost(gone);
      throw toStoreError(e, what);
    }
  }

  private upsertCheckpoint(handler: string, position: number): void {
    this.ready()
      .statement(
        `INSERT INTO ${this.checkpointsTable} (handler, position) VALUES (?, ?)
         ON CONFLICT (handler) DO UPDATE SET position = excluded.position`,
      )
      .run(handler, position);
  }

  /** Takes the mutex; FIFO, handed straight to the next waiter on release. */
  private acquire(): Promise<void> | void {
    if (!this.locked) {
      this.locked = true;
      return;
    }
    return new Promise<void>((resolve) => this.waiters.push(resolve));
  }

  private release(): void {
    const next = this.waiters.shift();
    if (next !== undefined) next();
    else this.locked = false;
  }
}
