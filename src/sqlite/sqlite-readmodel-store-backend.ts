import { AsyncLocalStorage } from "node:async_hooks";
import { nowNs } from "../model/clock.js";
import { MnemeError } from "../model/errors.js";
import type { CollectionScope, ListOptions, ReadmodelCollection, ReadmodelStoreBackend } from "../store/readmodel-store-backend.js";
import {
  assertCheckpoint,
  assertCollectionMoves,
  assertCollectionName,
  assertDocumentKey,
  assertDocumentKeys,
  assertFieldName,
  assertHandlerName,
  checkScope,
  documentEntriesJson,
  documentJson,
  listWindow,
  whereConditions,
} from "../store/readmodel-validation.js";
import {
  collectionIndexName,
  collectionIndexPrefix,
  type EnsureIndexesOptions,
  indexesKey,
  normalizeIndexes,
  sqlStringLiteral,
  tenantFirstOf,
} from "../store/readmodel-indexes.js";
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
import { SqliteStoreBase } from "./sqlite-store-base.js";
import { runStatements, SqliteSqlTableAccess } from "./sqlite-sql-table-access.js";
import type { SqlTableAccess } from "../store/sql-table-access.js";

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
 * The writes of a running transaction, not yet in SQLite: per collection
 * key -> document JSON (null: deleted), the collections cleared first, and
 * checkpoints.
 */
interface PendingWrites {
  active: boolean;
  readonly docs: Map<string, Map<string, string | null>>;
  /** The tenant a pending document is written with, per collection and key; absent: its stored tenant stays. */
  readonly tenants: Map<string, Map<string, string>>;
  readonly cleared: Set<string>;
  readonly checkpoints: Map<string, number>;
  /** replaceCollection calls, [target, source], applied at commit after the document writes. */
  readonly moves: [string, string][];
  /** checkFencingToken calls: handler -> the token the commit must still find. */
  readonly fences: Map<string, number>;
  /** Statements of SQL-table readmodels (see SqliteSqlTableAccess), run at commit after the document writes. */
  readonly statements: PendingStatement[];
}

/** A statement of the application's own tables, run at the transaction's commit. */
export interface PendingStatement {
  readonly sql: string;
  readonly params: readonly unknown[];
}

type Where = ListOptions["where"];

/**
 * The JSON path of a top-level field as an SQL literal; quoted so a name of
 * digits is a key, not an index. Field names are checked (letters, digits, _)
 * before they get here, so the literal needs no escaping. Literals, not
 * parameters: an expression index is used only for the very same expression.
 */
function jsonPath(field: string): string {
  return `'$."${field}"'`;
}

/**
 * The type rank of a field, as the order of mixed types wants it: missing or
 * null 0, booleans 1, numbers 2, strings 3, arrays and objects 4.
 * (json_extract alone would sort booleans among the numbers as 0/1.)
 */
function rankSql(field: string): string {
  return (
    `CASE json_type(doc, ${jsonPath(field)}) WHEN 'true' THEN 1 WHEN 'false' THEN 1 WHEN 'integer' THEN 2 WHEN 'real' THEN 2 ` +
    `WHEN 'text' THEN 3 WHEN 'array' THEN 4 WHEN 'object' THEN 4 ELSE 0 END`
  );
}

/** The value of a field (true and false as 1 and 0, arrays and objects as JSON text). */
function valueSql(field: string): string {
  return `json_extract(doc, ${jsonPath(field)})`;
}

/**
 * The index columns of a field: its rank, then its value. `where` equality
 * and `orderBy` are written on the same two expressions, so an index on them
 * serves both (see {@link whereClause} and list()).
 */
function fieldColumns(field: string): string {
  return `${rankSql(field)}, ${valueSql(field)}`;
}

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
export class SqliteReadmodelStoreBackend extends SqliteStoreBase implements ReadmodelStoreBackend {
  /** Stores a tenant with each document (column tenant_uuid) and honours a collection's scope. */
  readonly tenantScopes = true;
  private readonly docsTable: string;
  private readonly collectionsTable: string;
  private readonly checkpointsTable: string;
  private readonly context = new AsyncLocalStorage<PendingWrites>();
  private readonly collections = new Map<string, SqliteReadmodelCollection<unknown>>();
  /** Collections known to be in the collections table. */
  private readonly registered = new Set<string>();
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
    this.docsTable = `${this.prefix}readmodel_documents`;
    this.collectionsTable = `${this.prefix}readmodel_collections`;
    this.checkpointsTable = `${this.prefix}readmodel_checkpoints`;
    this.locksTable = `${this.prefix}readmodel_locks`;
    this.leases = new SqliteLeaseLocks({ table: this.locksTable, leaseMs: lockLeaseMs, connection: () => this.ready() });
  }

  protected createTables(): void {
    this.db.exec(`
      CREATE TABLE IF NOT EXISTS ${this.docsTable} (
        collection TEXT NOT NULL,
        key TEXT NOT NULL,
        doc TEXT NOT NULL,
        updated_at INTEGER NOT NULL,
        tenant_uuid TEXT,
        PRIMARY KEY (collection, key)
      );
      CREATE TABLE IF NOT EXISTS ${this.collectionsTable} (name TEXT PRIMARY KEY);
      CREATE TABLE IF NOT EXISTS ${this.checkpointsTable} (handler TEXT PRIMARY KEY, position INTEGER NOT NULL);
      ${leaseTableDdl(this.locksTable)}
    `);
    this.addTenantColumn();
    upgradeLeaseTable(this.db, this.locksTable);
  }

  /**
   * Upgrades a file written before documents carried their tenant: the column
   * is added in place, and those documents have none (NULL) until a restore
   * from zero writes them again; only unscoped reads see them meanwhile.
   */
  private addTenantColumn(): void {
    const has = this.db.statement("SELECT 1 AS x FROM pragma_table_info(?) WHERE name = 'tenant_uuid'").get(this.docsTable) !== undefined;
    if (!has) {
      try {
        this.db.exec(`ALTER TABLE ${this.docsTable} ADD COLUMN tenant_uuid TEXT`);
      } catch (e) {
        // Another process on the file added it first.
        if (!/duplicate column/i.test(String((e as Error)?.message))) throw e;
      }
    }
    this.db.exec(`CREATE INDEX IF NOT EXISTS ${this.docsTable}_tenant ON ${this.docsTable} (collection, tenant_uuid, key)`);
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
      const rows = this.ready().rawStatement(`SELECT name FROM ${this.collectionsTable} ORDER BY name`).all() as [string][];
      for (const r of rows) names.add(r[0]);
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
    const tx: PendingWrites = {
      active: true,
      docs: new Map(),
      tenants: new Map(),
      cleared: new Set(),
      checkpoints: new Map(),
      moves: [],
      fences: new Map(),
      statements: [],
    };
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
      const touched: string[] = [];
      this.ready().writeTransaction(() => {
        for (const [target, source] of moves) if (this.move(target, source)) touched.push(target);
      });
      for (const name of touched) this.registered.add(name);
    });
  }

  /**
   * Makes the indexes of `collection` exactly `indexes` (see
   * ReadmodelStoreBackend.ensureIndexes): partial expression indexes on the
   * documents table, `WHERE collection = '<collection>'`, on the collection,
   * then `tenant_uuid` when `tenantFirst`, each field's type rank and
   * `json_extract` value (the expressions list and count write), then the key. Created
   * and dropped in one write transaction of their own, at once (also inside
   * a transaction: DDL is not buffered; an index changes no document).
   */
  async ensureIndexes(collection: string, indexes: readonly (readonly string[])[], options?: EnsureIndexesOptions): Promise<void> {
    assertCollectionName(collection);
    const tenantFirst = tenantFirstOf(options);
    const wanted = normalizeIndexes(indexes, collection);
    const key = indexesKey(wanted, tenantFirst);
    if (this.ensuredIndexes.get(collection) === key) return;
    const db = this.ready();
    const prefix = collectionIndexPrefix(this.prefix, collection);
    try {
      db.writeTransaction(() => {
        const existing = db
          .rawStatement("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = ? AND substr(name, 1, ?) = ?")
          .all(this.docsTable, prefix.length, prefix) as [string][];
        const keep = new Set<string>();
        for (const fields of wanted) {
          const name = collectionIndexName(this.prefix, collection, fields, tenantFirst);
          keep.add(name);
          // The collection leads too (partial index or not): without statistics SQLite would rather sort the
          // rows the primary key finds (collection = ?) than scan an index led by nothing the query pins.
          const columns = ["collection", ...(tenantFirst ? ["tenant_uuid"] : []), ...fields.map(fieldColumns), "key"].join(", ");
          db.exec(
            `CREATE INDEX IF NOT EXISTS "${name}" ON ${this.docsTable} (${columns}) WHERE collection = ${sqlStringLiteral(collection)}`,
          );
        }
        for (const [name] of existing) if (!keep.has(name)) db.exec(`DROP INDEX IF EXISTS "${name}"`);
      });
    } catch (e) {
      throw toStoreError(e, "ensureIndexes");
    }
    this.ensuredIndexes.set(collection, key);
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
    assertHandlerName(handler);
    const tx = this.pending();
    if (tx === undefined) throw new MnemeError("INVALID_REQUEST", "checkFencingToken: call it inside a transaction");
    tx.fences.set(handler, token);
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
    try {
      // The newest write stands for "last item created": documents are replaced in place.
      const row = this.ready().statement(`SELECT COUNT(*) AS n, MAX(updated_at) AS t FROM ${this.docsTable}`).get() as {
        n: number;
        t: number | null;
      };
      return this.storeInfo(row.n, row.t ?? 0);
    } catch (e) {
      throw toStoreError(e, "info");
    }
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
      if (tx === undefined || (!tx.cleared.has(collection) && (tx.docs.get(collection)?.size ?? 0) === 0)) return query();
      return db.scratch(() => {
        this.applyCollection(tx, collection);
        return query();
      });
    } catch (e) {
      throw toStoreError(e, what);
    }
  }

  /** Upserts documents with `tenant` (undefined: a replaced document keeps its own) and registers the collection, in one write transaction. */
  putNow(collection: string, entries: readonly (readonly [string, string])[], tenant: string | undefined): void {
    const db = this.ready();
    db.writeTransaction(() => {
      this.register(collection);
      const upsert = db.statement(this.upsertSql());
      const at = nowNs();
      for (const [key, json] of entries) upsert.run(collection, key, json, at, tenant ?? null);
    });
    this.registered.add(collection);
  }

  get docs(): string {
    return this.docsTable;
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
    if (tx.cleared.size === 0 && tx.docs.size === 0 && tx.checkpoints.size === 0 && tx.moves.length === 0 && tx.statements.length === 0)
      return;
    const touched: string[] = [];
    const fenced = [...tx.checkpoints.keys()].filter((h) => this.leases.fenced(h));
    this.fencedWrite("transaction commit", fenced, tx.fences, () => {
      const names = new Set([...tx.cleared, ...tx.docs.keys()]);
      for (const name of names) {
        if (this.applyCollection(tx, name)) touched.push(name);
      }
      for (const [target, source] of tx.moves) if (this.move(target, source)) touched.push(target);
      runStatements(this.db, tx.statements);
      for (const [handler, position] of tx.checkpoints) this.upsertCheckpoint(handler, position);
    });
    for (const name of touched) this.registered.add(name);
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

  /** Writes one collection's pending changes (inside a transaction or savepoint); true when it put documents. */
  private applyCollection(tx: PendingWrites, name: string): boolean {
    const db = this.db;
    if (tx.cleared.has(name)) db.statement(`DELETE FROM ${this.docsTable} WHERE collection = ?`).run(name);
    const docs = tx.docs.get(name);
    if (docs === undefined) return false;
    const tenants = tx.tenants.get(name);
    const upsert = db.statement(this.upsertSql());
    const del = db.statement(`DELETE FROM ${this.docsTable} WHERE collection = ? AND key = ?`);
    let put = false;
    const at = nowNs();
    for (const [key, json] of docs) {
      if (json === null) del.run(name, key);
      else {
        upsert.run(name, key, json, at, tenants?.get(key) ?? null);
        put = true;
      }
    }
    if (put) this.register(name);
    return put;
  }

  /** Moves the documents of `source` over those of `target` (inside a write transaction); true when it moved some. */
  private move(target: string, source: string): boolean {
    const db = this.db;
    db.statement(`DELETE FROM ${this.docsTable} WHERE collection = ?`).run(target);
    const moved = db.statement(`UPDATE ${this.docsTable} SET collection = ? WHERE collection = ?`).run(target, source).changes;
    if (moved > 0) this.register(target);
    return moved > 0;
  }

  private register(collection: string): void {
    if (this.registered.has(collection)) return;
    this.db.statement(`INSERT OR IGNORE INTO ${this.collectionsTable} (name) VALUES (?)`).run(collection);
  }

  private upsertSql(): string {
    // A write without a tenant keeps the stored document's (COALESCE): only a tenant's write changes it.
    return `INSERT INTO ${this.docsTable} (collection, key, doc, updated_at, tenant_uuid) VALUES (?, ?, ?, ?, ?)
            ON CONFLICT (collection, key) DO UPDATE SET doc = excluded.doc, updated_at = excluded.updated_at,
            tenant_uuid = COALESCE(excluded.tenant_uuid, tenant_uuid)`;
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

/** One collection of a SqliteReadmodelStoreBackend. */
class SqliteReadmodelCollection<T> implements ReadmodelCollection<T> {
  /** The SQL condition and parameter of the scope's read tenant; none without one. */
  private readonly tenantSql: string;
  private readonly tenantParams: string[];
  /**
   * `collection = '<name>'` with the name as a literal (list and count): the
   * indexes of a collection are partial (`WHERE collection = '<name>'`), and
   * SQLite uses a partial index only for a query whose WHERE holds that very term.
   */
  private readonly collectionSql: string;

  constructor(
    private readonly backend: SqliteReadmodelStoreBackend,
    private readonly name: string,
    private readonly scope: CollectionScope,
  ) {
    this.collectionSql = `collection = ${sqlStringLiteral(name)}`;
    this.tenantSql = scope.readTenantUuid === undefined ? "" : " AND tenant_uuid = ?";
    this.tenantParams = scope.readTenantUuid === undefined ? [] : [scope.readTenantUuid];
  }

  async get(key: string): Promise<T | undefined> {
    assertDocumentKey(key);
    if (this.scope.readTenantUuid !== undefined) {
      // Scoped: the tenant of a pending document is known only once written, so the read sees the pending writes applied.
      const row = this.backend.read("get", this.name, () =>
        this.db()
          .statement(`SELECT doc FROM ${this.backend.docs} WHERE collection = ? AND key = ?${this.tenantSql}`)
          .get(this.name, key, ...this.tenantParams),
      ) as { doc: string } | undefined;
      return row === undefined ? undefined : (JSON.parse(row.doc) as T);
    }
    const tx = this.backend.pending();
    if (tx !== undefined) {
      const pending = tx.docs.get(this.name)?.get(key);
      if (pending !== undefined) return pending === null ? undefined : (JSON.parse(pending) as T);
      if (tx.cleared.has(this.name)) return undefined;
    }
    const row = this.backend.committed("get", () =>
      this.db().statement(`SELECT doc FROM ${this.backend.docs} WHERE collection = ? AND key = ?`).get(this.name, key),
    ) as { doc: string } | undefined;
    return row === undefined ? undefined : (JSON.parse(row.doc) as T);
  }

  async getMany(keys: readonly string[]): Promise<Map<string, T>> {
    assertDocumentKeys(keys);
    if (this.scope.readTenantUuid !== undefined) {
      const rows = this.backend.read("getMany", this.name, () =>
        this.db()
          .rawStatement(
            `SELECT key, doc FROM ${this.backend.docs} WHERE collection = ? AND key IN (SELECT value FROM json_each(?))${this.tenantSql}`,
          )
          .all(this.name, JSON.stringify(keys), ...this.tenantParams),
      ) as [string, string][];
      const found = new Map(rows);
      const ordered = new Map<string, T>();
      for (const key of keys) {
        const doc = found.get(key);
        if (doc !== undefined) ordered.set(key, JSON.parse(doc) as T);
      }
      return ordered;
    }
    const out = new Map<string, T>();
    const tx = this.backend.pending();
    const pending = tx?.docs.get(this.name);
    const fromDb: string[] = [];
    for (const key of keys) {
      const p = pending?.get(key);
      if (p !== undefined) {
        if (p !== null) out.set(key, JSON.parse(p) as T);
      } else if (tx?.cleared.has(this.name) !== true) fromDb.push(key);
    }
    if (fromDb.length > 0) {
      const rows = this.backend.committed("getMany", () =>
        this.db()
          .rawStatement(`SELECT key, doc FROM ${this.backend.docs} WHERE collection = ? AND key IN (SELECT value FROM json_each(?))`)
          .all(this.name, JSON.stringify(fromDb)),
      ) as [string, string][];
      for (const [key, doc] of rows) out.set(key, JSON.parse(doc) as T);
    }
    // In the order asked for, like the memory backend.
    const ordered = new Map<string, T>();
    for (const key of keys) if (out.has(key)) ordered.set(key, out.get(key) as T);
    return ordered;
  }

  async put(key: string, doc: T): Promise<void> {
    const json = documentJson(key, doc);
    await this.backend.write("put", (tx) => {
      if (tx !== undefined) this.pend(tx, key, json);
      else this.backend.putNow(this.name, [[key, json]], this.scope.writeTenantUuid);
    });
  }

  async putMany(entries: readonly (readonly [string, T])[]): Promise<void> {
    const rows = documentEntriesJson(entries);
    if (rows.length === 0) return;
    await this.backend.write("putMany", (tx) => {
      if (tx !== undefined) for (const [key, json] of rows) this.pend(tx, key, json);
      else this.backend.putNow(this.name, rows, this.scope.writeTenantUuid);
    });
  }

  async delete(key: string): Promise<boolean> {
    assertDocumentKey(key);
    return this.backend.write("delete", (tx) => {
      if (tx === undefined) {
        return this.db().statement(`DELETE FROM ${this.backend.docs} WHERE collection = ? AND key = ?`).run(this.name, key).changes > 0;
      }
      const docs = pendingDocs(tx, this.name);
      const p = docs.get(key);
      const existed =
        p !== undefined
          ? p !== null
          : !tx.cleared.has(this.name) &&
            this.db().statement(`SELECT 1 AS x FROM ${this.backend.docs} WHERE collection = ? AND key = ?`).get(this.name, key) !==
              undefined;
      docs.set(key, null);
      tx.tenants.get(this.name)?.delete(key);
      return existed;
    });
  }

  /** Buffers a put in the running transaction, with the scope's write tenant. */
  private pend(tx: PendingWrites, key: string, json: string): void {
    pendingDocs(tx, this.name).set(key, json);
    const tenant = this.scope.writeTenantUuid;
    if (tenant === undefined) return;
    let tenants = tx.tenants.get(this.name);
    if (tenants === undefined) tx.tenants.set(this.name, (tenants = new Map()));
    tenants.set(key, tenant);
  }

  async list(opts: ListOptions = {}): Promise<T[]> {
    const { offset, limit } = listWindow(opts);
    const dir = opts.descending === true ? "DESC" : "ASC";
    const { sql: whereSql, params } = whereClause(opts.where);
    let order = `key ${dir}`;
    if (opts.orderBy !== undefined) {
      assertFieldName(opts.orderBy, "orderBy");
      // The field-name check is the whitelist that keeps paths to one top-level field.
      // Ranks first, as the memory backend does: missing/null < booleans < numbers < strings < arrays/objects.
      order = `${rankSql(opts.orderBy)} ${dir}, ${valueSql(opts.orderBy)} ${dir}, key ${dir}`;
    }
    const sql = `SELECT doc FROM ${this.backend.docs} WHERE ${this.collectionSql}${this.tenantSql}${whereSql} ORDER BY ${order} LIMIT ? OFFSET ?`;
    const rows = this.backend.read("list", this.name, () =>
      this.db()
        .rawStatement(sql)
        .all(...this.tenantParams, ...params, limit ?? -1, offset),
    ) as [string][];
    return rows.map((r) => JSON.parse(r[0]) as T);
  }

  async count(where?: Where): Promise<number> {
    const { sql: whereSql, params } = whereClause(where);
    const row = this.backend.read("count", this.name, () =>
      this.db()
        .statement(`SELECT COUNT(*) AS n FROM ${this.backend.docs} WHERE ${this.collectionSql}${this.tenantSql}${whereSql}`)
        .get(...this.tenantParams, ...params),
    ) as { n: number };
    return row.n;
  }

  async clear(): Promise<void> {
    await this.backend.write("clear", (tx) => {
      if (tx === undefined) {
        this.db().statement(`DELETE FROM ${this.backend.docs} WHERE collection = ?`).run(this.name);
        return;
      }
      tx.cleared.add(this.name);
      tx.docs.get(this.name)?.clear();
      tx.tenants.get(this.name)?.clear();
    });
  }

  private db(): SqliteDatabase {
    return this.backend.connection();
  }
}

/**
 * Equality filters on top-level fields as SQL, the values as parameters.
 * The type rank pins the JSON type too, so `{ n: 1 }` does not match `"1"` or
 * `true` (json_extract gives 1 for true): a string is rank 3, a number 2, a
 * boolean 1 with the value 1 or 0. Both terms are equalities on an index's
 * columns (rank, value), so a compound index serves the filter and then the order.
 */
function whereClause(where: Where): { sql: string; params: unknown[] } {
  let sql = "";
  const params: unknown[] = [];
  for (const [field, value] of whereConditions(where)) {
    const rank = typeof value === "string" ? 3 : typeof value === "number" ? 2 : 1;
    sql += ` AND ${rankSql(field)} = ${rank} AND ${valueSql(field)} = ?`;
    params.push(typeof value === "boolean" ? (value ? 1 : 0) : value);
  }
  return { sql, params };
}

function pendingDocs(tx: PendingWrites, name: string): Map<string, string | null> {
  let docs = tx.docs.get(name);
  if (docs === undefined) {
    docs = new Map();
    tx.docs.set(name, docs);
  }
  return docs;
}
