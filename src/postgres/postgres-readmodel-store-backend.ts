import { AsyncLocalStorage } from "node:async_hooks";
import { nowNs } from "../model/clock.js";
import { isMnemeError, MnemeError } from "../model/errors.js";
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
import { lockLostError } from "../store/lock-fencing.js";
import {
  collectionIndexName,
  collectionIndexPrefix,
  type EnsureIndexesOptions,
  indexesKey,
  normalizeIndexes,
  tenantFirstOf,
} from "../store/readmodel-indexes.js";
import type { StoreInfo } from "../store/store-info.js";
import { isConnectionError, mapPgError } from "./postgres-errors.js";
import type { CheckedOutClient } from "./postgres-pool.js";
import { advisoryKey } from "./postgres-schema.js";
import { countUnscopedDocuments, unscopedDocuments } from "./postgres-old-writers.js";
import { PostgresStoreBase, type PostgresStoreOptions } from "./postgres-store-base.js";
import { PostgresSqlTableAccess } from "./postgres-sql-table-access.js";
import type { SqlTableAccess } from "../store/sql-table-access.js";

/** The running transaction: its dedicated client, and the fencing tokens it must still find at commit. */
interface Tx {
  readonly client: CheckedOutClient;
  /** checkFencingToken calls: handler -> token. */
  readonly fences: Map<string, number>;
  /** Fences already proven in this transaction (their lock row is held FOR SHARE until it ends). */
  readonly proven: Set<string>;
  /** ensureIndexes done inside this transaction: collection -> indexesKey, known to the backend once it commits. */
  readonly ensured: Map<string, string>;
}

type Where = ListOptions["where"];

/** Called with the handlers whose locks were lost because the lock connection failed. */
export type LockLostListener = (handlers: readonly string[]) => void;

/**
 * Readmodel documents as JSONB in one table (collection, key, doc), a table of
 * the collections that ever held a document, and a checkpoint table.
 *
 * `transaction(fn)` runs on one dedicated client (BEGIN ... COMMIT, ROLLBACK
 * when fn throws); AsyncLocalStorage routes every call made inside fn to that
 * client, so reads inside see fn's writes; a nested transaction joins the
 * outer one. Transactions are serialised, and writes from outside wait for the
 * running (and queued) ones, as the interface requires; reads never wait.
 * When the client's connection dies inside a transaction (between two
 * statements or during one), the transaction rejects with UNAVAILABLE and
 * nothing of it is committed (unless COMMIT itself was under way: then it may
 * have), and the client is destroyed, never reused.
 *
 * `tryLock(handler)` takes `pg_try_advisory_lock` on a dedicated session
 * client held while any lock is held, so one instance processes a handler at a
 * time; the lock goes when `unlock` is called, when this backend is closed, or
 * when the process or its connection dies, and another instance takes over.
 *
 * Fencing: taking a lock also bumps the handler's token in the locks table
 * (in its own committed statement, before tryLock resolves) and records the
 * holder. `checkFencingToken` makes the transaction read that row `FOR SHARE`
 * with the token as a condition: folded into its first checkpoint write
 * (`INSERT ... SELECT ... FROM locks WHERE token = $t FOR SHARE`, no extra
 * round trip), else as a statement of its own just before COMMIT. Under READ
 * COMMITTED a take-over's bump waits for a running transaction that holds the
 * row, and a transaction that comes after the bump sees the new token, writes
 * no checkpoint and rolls back. So a batch of an instance whose lock
 * connection died commits before the new holder reads the checkpoint, or not
 * at all.
 */
export class PostgresReadmodelStoreBackend extends PostgresStoreBase implements ReadmodelStoreBackend {
  /** Stores a tenant with each document (column tenant_uuid) and honours a collection's scope. */
  readonly tenantScopes = true;
  /** @internal */ readonly docs: string;
  /** @internal */ readonly collectionsTable: string;
  private readonly checkpoints: string;
  private readonly locks: string;
  /** handler -> the fencing token this backend got when it took the lock. */
  private readonly tokens = new Map<string, number>();
  private readonly als = new AsyncLocalStorage<Tx>();
  private activeTx: Tx | undefined;
  private mutexTail: Promise<void> = Promise.resolve();
  private mutexHolders = 0;
  private lockClient: CheckedOutClient | undefined;
  private lockOps: Promise<unknown> = Promise.resolve();
  private readonly heldLocks = new Set<string>();
  private readonly lockLostListeners = new Set<LockLostListener>();
  /** collection -> the indexes (indexesKey) this instance made sure of. */
  private readonly ensuredIndexes = new Map<string, string>();
  protected override readonly clientKind = "readmodel";
  #sqlTables: SqlTableAccess | undefined;

  constructor(opts: PostgresStoreOptions) {
    super(opts);
    this.docs = `${this.qschema}.readmodel_documents`;
    this.collectionsTable = `${this.qschema}.readmodel_collections`;
    this.checkpoints = `${this.qschema}.readmodel_checkpoints`;
    this.locks = `${this.qschema}.readmodel_locks`;
  }

  /** Creates the schema and tables; idempotent, safe to run from several instances at once. */
  async init(): Promise<void> {
    await this.track(() =>
      this.runDdl((admitOldWriters) => [
        `CREATE SCHEMA IF NOT EXISTS ${this.qschema}`,
        // COLLATE "C": keys and names sort by code point, as in the other backends, and the primary key serves that order.
        `CREATE TABLE IF NOT EXISTS ${this.docs} (
          collection text COLLATE "C" NOT NULL,
          key text COLLATE "C" NOT NULL,
          doc jsonb NOT NULL,
          updated_at bigint NOT NULL,
          tenant_uuid text,
          PRIMARY KEY (collection, key)
        )`,
        // A schema written before documents carried their tenant is upgraded in place: those documents have
        // none (NULL) until a restore from zero writes them again; only unscoped reads see them meanwhile.
        `ALTER TABLE ${this.docs} ADD COLUMN IF NOT EXISTS tenant_uuid text`,
        `CREATE INDEX IF NOT EXISTS readmodel_documents_tenant ON ${this.docs} (collection, tenant_uuid, key)`,
        `CREATE TABLE IF NOT EXISTS ${this.collectionsTable} (collection text COLLATE "C" PRIMARY KEY)`,
        `CREATE TABLE IF NOT EXISTS ${this.checkpoints} (handler text PRIMARY KEY, position bigint NOT NULL)`,
        `CREATE TABLE IF NOT EXISTS ${this.locks} (handler text PRIMARY KEY, token bigint NOT NULL, holder text)`,
        // A document written without its tenant comes from a release that would leave it unseen: refused (in
        // compatibility mode, given the tenant of the aggregate its key names).
        ...unscopedDocuments(this.qschema, this.docs, this.schema, admitOldWriters),
      ]),
    );
  }

  collection<T>(name: string, scope?: CollectionScope): ReadmodelCollection<T> {
    assertCollectionName(name);
    return new PostgresReadmodelCollection<T>(this, name, checkScope(scope));
  }

  /** Documents of old writers whose tenant could not be derived, by collection (see postgres-old-writers.ts). */
  unscopedDocuments(): Promise<{ collection: string; documents: number }[]> {
    return countUnscopedDocuments(this.docs, (sql) => this.exec<{ collection: string; n: string }>(sql, [], false, "unscopedDocuments"));
  }

  async listCollections(): Promise<string[]> {
    const res = await this.exec<{ collection: string }>(
      `SELECT collection FROM ${this.collectionsTable} ORDER BY collection`,
      [],
      false,
      "listCollections",
    );
    return res.rows.map((r) => r.collection);
  }

  async transaction<R>(fn: () => Promise<R>): Promise<R> {
    if (typeof fn !== "function") throw new MnemeError("INVALID_REQUEST", "transaction: fn must be a function");
    if (this.insideTx()) return fn();
    return this.track(async () => {
      const release = await this.acquire();
      let client: CheckedOutClient | undefined;
      let broken = false;
      try {
        this.assertOpen();
        client = await this.checkout("transaction", "postgres: readmodel transaction");
        try {
          await client.query("BEGIN");
        } catch (e) {
          broken = true;
          throw mapPgError(e, "postgres: readmodel transaction: BEGIN");
        }
        const tx: Tx = { client, fences: new Map(), proven: new Set(), ensured: new Map() };
        this.activeTx = tx;
        let result: R;
        try {
          result = await this.als.run(tx, async () => {
            const r = await fn();
            await this.proveFences(tx);
            return r;
          });
        } catch (e) {
          this.activeTx = undefined;
          let lost = client.lost;
          if (!lost) {
            try {
              await client.query("ROLLBACK");
            } catch (rollbackError) {
              broken = true;
              lost = client.lost || isConnectionError(rollbackError);
            }
          }
          if (lost) {
            // The session is gone and its transaction with it; fn may have seen (and wrapped) that error.
            broken = true;
            throw isMnemeError(e, "UNAVAILABLE")
              ? e
              : new MnemeError("UNAVAILABLE", "postgres: readmodel transaction: the database connection failed", { cause: e });
          }
          throw e;
        }
        this.activeTx = undefined;
        let committed;
        try {
          committed = await client.query("COMMIT");
        } catch (e) {
          broken = true;
          // A connection that died during COMMIT leaves its outcome unknown: UNAVAILABLE, and a caller reads its checkpoint again.
          throw mapPgError(e, "postgres: readmodel transaction: COMMIT");
        }
        // COMMIT of a transaction in which a statement failed (and fn caught it) rolls back instead.
        if (committed.command === "ROLLBACK") {
          throw new MnemeError("STORE_ERROR", "postgres: readmodel transaction rolled back: a statement inside it failed");
        }
        for (const [collection, key] of tx.ensured) this.ensuredIndexes.set(collection, key);
        return result;
      } finally {
        this.activeTx = undefined;
        client?.release(broken);
        release();
      }
    });
  }

  /**
   * For each `[target, source]`: makes `target` hold exactly the documents
   * `source` holds and empties `source`; all in one transaction (it joins a
   * running one). A readmodel's restore from zero switches generations with it.
   */
  async replaceCollections(moves: readonly (readonly [target: string, source: string])[]): Promise<void> {
    assertCollectionMoves(moves);
    await this.transaction(async () => {
      for (const [target, source] of moves) {
        await this.exec(`DELETE FROM ${this.docs} WHERE collection = $1`, [target], true, "replaceCollections");
        const moved = await this.exec(
          `UPDATE ${this.docs} SET collection = $1 WHERE collection = $2`,
          [target, source],
          true,
          "replaceCollections",
        );
        if ((moved.rowCount ?? 0) > 0) {
          await this.exec(
            `INSERT INTO ${this.collectionsTable} (collection) VALUES ($1) ON CONFLICT DO NOTHING`,
            [target],
            true,
            "replaceCollections",
          );
        }
      }
    });
  }

  /**
   * Makes the indexes of `collection` exactly `indexes` (see
   * ReadmodelStoreBackend.ensureIndexes): partial expression indexes on the
   * documents table, `WHERE collection = '<collection>'`, on each field's
   * type rank, number and text (the expressions list and count write), then
   * the key; led by `tenant_uuid` when `tenantFirst`. Outside a transaction
   * in one of its own, serialised across instances by an advisory lock;
   * inside one, as part of it (it counts as done once that commits).
   */
  async ensureIndexes(collection: string, indexes: readonly (readonly string[])[], options?: EnsureIndexesOptions): Promise<void> {
    assertCollectionName(collection);
    const tenantFirst = tenantFirstOf(options);
    const wanted = normalizeIndexes(indexes, collection);
    const key = indexesKey(wanted, tenantFirst);
    if (this.ensuredIndexes.get(collection) === key) return;
    const tx = this.currentTx();
    if (tx !== undefined && tx.ensured.get(collection) === key) return;
    const prefix = collectionIndexPrefix("", collection);
    const statements: string[] = [];
    const keep = new Set<string>();
    for (const fields of wanted) {
      const name = collectionIndexName("", collection, fields, tenantFirst);
      keep.add(name);
      const columns = [...(tenantFirst ? ["tenant_uuid"] : []), ...fields.flatMap(fieldColumns), "key"].join(", ");
      statements.push(
        `CREATE INDEX IF NOT EXISTS "${name}" ON ${this.docs} (${columns}) WHERE collection = ${pgStringLiteral(collection)}`,
      );
    }
    const run = async (query: (text: string, values: unknown[]) => Promise<{ rows: { name: string }[] }>): Promise<void> => {
      await query("SELECT pg_advisory_xact_lock($1::bigint)", [advisoryKey("mneme:readmodel-indexes", this.schema)]);
      const existing = await query(
        "SELECT indexname AS name FROM pg_indexes WHERE schemaname = $1 AND tablename = 'readmodel_documents' AND left(indexname, $2) = $3",
        [this.schema, prefix.length, prefix],
      );
      for (const sql of statements) await query(sql, []);
      for (const { name } of existing.rows) if (!keep.has(name)) await query(`DROP INDEX IF EXISTS ${this.qschema}."${name}"`, []);
    };
    if (tx !== undefined) {
      await run((text, values) => this.exec<{ name: string }>(text, values, true, "ensureIndexes"));
      tx.ensured.set(collection, key);
      return;
    }
    await this.transaction(() => run((text, values) => this.exec<{ name: string }>(text, values, true, "ensureIndexes")));
    this.ensuredIndexes.set(collection, key);
  }

  async getCheckpoint(handler: string): Promise<number> {
    const res = await this.exec<{ position: string }>(
      `SELECT position::text FROM ${this.checkpoints} WHERE handler = $1`,
      [handler],
      false,
      "getCheckpoint",
    );
    const row = res.rows[0];
    return row === undefined ? 0 : Number(row.position);
  }

  async setCheckpoint(handler: string, position: number): Promise<void> {
    assertHandlerName(handler);
    assertCheckpoint(position);
    const tx = this.currentTx();
    const fence = tx === undefined ? undefined : unproven(tx);
    if (tx !== undefined && fence !== undefined) {
      // The fence and the checkpoint in one statement: no checkpoint unless the token is still ours.
      const [fenced, token] = fence;
      const res = await this.exec(
        `INSERT INTO ${this.checkpoints} (handler, position)
         SELECT $1, $2 FROM ${this.locks} WHERE handler = $3 AND token = $4 FOR SHARE
         ON CONFLICT (handler) DO UPDATE SET position = EXCLUDED.position`,
        [handler, position, fenced, token],
        true,
        "setCheckpoint",
      );
      if ((res.rowCount ?? 0) === 0) throw lockLostError(fenced, `its fencing token is no longer ${token}`);
      tx.proven.add(fenced);
      return;
    }
    await this.exec(
      `INSERT INTO ${this.checkpoints} (handler, position) VALUES ($1, $2) ON CONFLICT (handler) DO UPDATE SET position = EXCLUDED.position`,
      [handler, position],
      true,
      "setCheckpoint",
    );
  }

  async info(): Promise<StoreInfo> {
    const res = await this.exec<{ n: string; t: string | null }>(
      `SELECT count(*)::text AS n, max(updated_at)::text AS t FROM ${this.docs}`,
      [],
      false,
      "info",
    );
    return this.storeInfoOf(res.rows[0]);
  }

  /**
   * Takes the exclusive lock of `handler` for this backend (a session advisory
   * lock on a dedicated client); true when taken or already held by this
   * backend. A take bumps the handler's fencing token and records `holder`.
   */
  async tryLock(handler: string, holder?: string): Promise<boolean> {
    if (typeof handler !== "string" || handler === "")
      throw new MnemeError("INVALID_REQUEST", "tryLock: a handler name must be a non-empty string");
    return this.track(() =>
      this.serialLockOp(async () => {
        this.assertOpen();
        if (this.heldLocks.has(handler)) return true;
        const client = await this.ensureLockClient();
        let ok: boolean;
        try {
          const res = await client.query<{ ok: boolean }>("SELECT pg_try_advisory_lock($1::bigint) AS ok", [this.lockKey(handler)]);
          ok = res.rows[0]?.ok === true;
        } catch (e) {
          throw mapPgError(e, `postgres: tryLock(${handler})`);
        }
        if (!ok) {
          if (this.heldLocks.size === 0) this.dropLockClient(false);
          return false;
        }
        let token: number;
        try {
          // Its own committed statement: a transaction of the previous holder that still holds the row
          // (checkFencingToken) commits first; any that comes later sees this token and rolls back.
          const res = await client.query<{ token: string }>(
            `INSERT INTO ${this.locks} (handler, token, holder) VALUES ($1, 1, $2)
             ON CONFLICT (handler) DO UPDATE SET token = ${this.locks}.token + 1, holder = EXCLUDED.holder
             RETURNING token::text AS token`,
            [handler, holder ?? null],
          );
          token = Number(res.rows[0]?.token);
        } catch (e) {
          // Not fenced: the lock must not stay taken.
          await client.query("SELECT pg_advisory_unlock($1::bigint)", [this.lockKey(handler)]).catch(() => this.dropLockClient(true));
          if (this.heldLocks.size === 0) this.dropLockClient(false);
          throw mapPgError(e, `postgres: tryLock(${handler})`);
        }
        this.heldLocks.add(handler);
        this.tokens.set(handler, token);
        return true;
      }),
    );
  }

  /** Releases the lock of `handler` when this backend holds it; otherwise does nothing. */
  async unlock(handler: string): Promise<void> {
    await this.track(() =>
      this.serialLockOp(async () => {
        const client = this.lockClient;
        if (!this.heldLocks.has(handler) || client === undefined) return;
        this.heldLocks.delete(handler);
        const token = this.tokens.get(handler);
        this.tokens.delete(handler);
        try {
          // The holder is cleared only while the token is still ours (a standby lists no one then).
          await client.query(`UPDATE ${this.locks} SET holder = NULL WHERE handler = $1 AND token = $2`, [handler, token ?? -1]);
          await client.query("SELECT pg_advisory_unlock($1::bigint)", [this.lockKey(handler)]);
        } catch (e) {
          // Ending the session is the sure way to let the lock go.
          this.dropLockClient(true);
          throw mapPgError(e, `postgres: unlock(${handler})`);
        }
        if (this.heldLocks.size === 0) this.dropLockClient(false);
      }),
    );
  }

  /** The handlers whose locks this backend holds now. */
  heldLockNames(): string[] {
    return [...this.heldLocks];
  }

  /** The fencing token of the lock on `handler` this backend holds; undefined when it holds none. */
  fencingToken(handler: string): number | undefined {
    return this.heldLocks.has(handler) ? this.tokens.get(handler) : undefined;
  }

  /**
   * Inside a transaction: holds `handler`'s lock row (FOR SHARE) until the
   * transaction ends and throws INVALID_STATE (lock lost; the transaction
   * rolls back) unless its token is still `token`.
   */
  async checkFencingToken(handler: string, token: number): Promise<void> {
    assertHandlerName(handler);
    const tx = this.currentTx();
    if (tx === undefined) throw new MnemeError("INVALID_REQUEST", "checkFencingToken: call it inside a transaction");
    tx.fences.set(handler, token);
    tx.proven.delete(handler);
  }

  /** Before COMMIT: proves every fence of `tx` that no checkpoint write proved (its row FOR SHARE); throws when a token moved. */
  private async proveFences(tx: Tx): Promise<void> {
    for (const [handler, token] of tx.fences) {
      if (tx.proven.has(handler)) continue;
      const res = await this.exec<{ token: string }>(
        `SELECT token::text AS token FROM ${this.locks} WHERE handler = $1 FOR SHARE`,
        [handler],
        false,
        "checkFencingToken",
      );
      const current = res.rows[0] === undefined ? undefined : Number(res.rows[0].token);
      if (current !== token) throw lockLostError(handler, `its fencing token moved from ${token} to ${String(current)}`);
      tx.proven.add(handler);
    }
  }

  /** The instance id the holder of `handler`'s lock recorded; undefined when it is free or unknown. */
  async lockHolder(handler: string): Promise<string | undefined> {
    const res = await this.exec<{ holder: string | null }>(
      `SELECT holder FROM ${this.locks} WHERE handler = $1`,
      [handler],
      false,
      "lockHolder",
    );
    return res.rows[0]?.holder ?? undefined;
  }

  /** Tells `listener` when the lock connection failed and the listed locks were lost (another instance may take them). */
  onLockLost(listener: LockLostListener): () => void {
    this.lockLostListeners.add(listener);
    return () => {
      this.lockLostListeners.delete(listener);
    };
  }

  protected override async onClose(): Promise<void> {
    await this.lockOps.catch(() => undefined);
    const client = this.lockClient;
    if (client !== undefined && this.heldLocks.size > 0) {
      // Released before close() resolves, so another instance can take over at once
      // (ending the session below would release them too, but asynchronously).
      try {
        await client.query("SELECT pg_advisory_unlock_all()");
      } catch {
        // The connection is gone, and its locks with it.
      }
    }
    this.heldLocks.clear();
    this.tokens.clear();
    this.dropLockClient(true);
  }

  // --- used by PostgresReadmodelCollection -----------------------------------

  /**
   * @internal Runs one statement: on the transaction's client inside a
   * transaction, else on the pool, a write first waiting for running transactions.
   */
  async exec<R extends object>(text: string, values: unknown[], write: boolean, what: string) {
    return this.track(async () => {
      try {
        const tx = this.currentTx();
        if (tx !== undefined) return await tx.client.query<R>(text, values);
        if (!write || this.mutexHolders === 0) return await this.poolQuery<R>("readmodel", text, values);
        const release = await this.acquire();
        try {
          this.assertOpen();
          return await this.poolQuery<R>("readmodel", text, values);
        } finally {
          release();
        }
      } catch (e) {
        throw mapPgError(e, `postgres: readmodel ${what}`);
      }
    });
  }

  /** @internal The pg client of the running transaction (in this async context), or undefined outside one. */
  transactionDriverClient(): unknown {
    return this.currentTx()?.client.raw;
  }

  /** The application's own tables in this backend's schema, for SQL-table readmodels (statements join this backend's transactions). */
  sqlTables(): SqlTableAccess {
    return (this.#sqlTables ??= new PostgresSqlTableAccess(this, this.schema));
  }

  private currentTx(): Tx | undefined {
    const tx = this.als.getStore();
    // A stale context (a callback that outlived its transaction) counts as outside.
    return tx !== undefined && tx === this.activeTx ? tx : undefined;
  }

  private insideTx(): boolean {
    return this.currentTx() !== undefined;
  }

  /** A FIFO mutex: resolves with its release function once every earlier holder released. */
  private acquire(): Promise<() => void> {
    const prev = this.mutexTail;
    let release!: () => void;
    const mine = new Promise<void>((r) => {
      release = r;
    });
    this.mutexTail = prev.then(() => mine);
    this.mutexHolders++;
    let released = false;
    return prev.then(() => () => {
      if (released) return;
      released = true;
      this.mutexHolders--;
      release();
    });
  }

  private lockKey(handler: string): string {
    return advisoryKey("mneme:readmodel-lock", this.schema, handler);
  }

  private serialLockOp<R>(op: () => Promise<R>): Promise<R> {
    const run = this.lockOps.then(op, op);
    this.lockOps = run.catch(() => undefined);
    return run;
  }

  private async ensureLockClient(): Promise<CheckedOutClient> {
    if (this.lockClient !== undefined) return this.lockClient;
    // Told once when the session dies (an 'error' or an unexpected 'end'): its advisory locks are gone.
    const onLost = (): void => {
      if (this.lockClient !== client) return;
      const lost = [...this.heldLocks];
      this.heldLocks.clear();
      this.tokens.clear();
      this.dropLockClient(true);
      if (lost.length === 0) return;
      for (const l of [...this.lockLostListeners]) {
        try {
          l(lost);
        } catch {
          // A listener's failure must not hide the loss from the others.
        }
      }
    };
    const client = await this.checkout("lock", "postgres: the readmodel lock client", onLost);
    this.lockClient = client;
    return client;
  }

  private dropLockClient(destroy: boolean): void {
    const client = this.lockClient;
    if (client === undefined) return;
    this.lockClient = undefined;
    client.release(destroy);
  }
}

/** A fence of `tx` not proven yet, if any. */
function unproven(tx: Tx): [string, number] | undefined {
  for (const f of tx.fences) if (!tx.proven.has(f[0])) return f;
  return undefined;
}

/** One collection of a {@link PostgresReadmodelStoreBackend}. */
class PostgresReadmodelCollection<T> implements ReadmodelCollection<T> {
  /**
   * `collection = '<name>'` with the name as a literal (list and count): the
   * indexes of a collection are partial (`WHERE collection = '<name>'`), and
   * the planner proves a partial index usable from constants only.
   */
  private readonly collectionSql: string;

  constructor(
    private readonly backend: PostgresReadmodelStoreBackend,
    private readonly name: string,
    private readonly scope: CollectionScope,
  ) {
    this.collectionSql = `collection = ${pgStringLiteral(name)}`;
  }

  /** ` AND tenant_uuid = $n` for a scope's read tenant (its value pushed onto `values`); "" without one. */
  private tenantSql(values: unknown[]): string {
    return this.scope.readTenantUuid === undefined ? "" : ` AND tenant_uuid = $${values.push(this.scope.readTenantUuid)}`;
  }

  async get(key: string): Promise<T | undefined> {
    assertDocumentKey(key);
    const values: unknown[] = [this.name, key];
    const res = await this.backend.exec<{ doc: T }>(
      `SELECT doc FROM ${this.backend.docs} WHERE collection = $1 AND key = $2${this.tenantSql(values)}`,
      values,
      false,
      "get",
    );
    return res.rows[0]?.doc;
  }

  async getMany(keys: readonly string[]): Promise<Map<string, T>> {
    assertDocumentKeys(keys);
    const out = new Map<string, T>();
    if (keys.length === 0) return out;
    const values: unknown[] = [this.name, keys];
    const res = await this.backend.exec<{ key: string; doc: T }>(
      `SELECT key, doc FROM ${this.backend.docs} WHERE collection = $1 AND key = ANY($2::text[])${this.tenantSql(values)}`,
      values,
      false,
      "getMany",
    );
    const found = new Map(res.rows.map((r) => [r.key, r.doc] as const));
    for (const k of keys) if (found.has(k)) out.set(k, found.get(k) as T);
    return out;
  }

  async put(key: string, doc: T): Promise<void> {
    const json = documentJson(key, doc);
    await this.backend.exec(
      `WITH registered AS (INSERT INTO ${this.backend.collectionsTable} (collection) VALUES ($1) ON CONFLICT DO NOTHING)
       INSERT INTO ${this.backend.docs} AS d (collection, key, doc, updated_at, tenant_uuid) VALUES ($1, $2, $3::jsonb, $4, $5::text)
       ${UPSERT}`,
      [this.name, key, json, nowNs(), this.scope.writeTenantUuid ?? null],
      true,
      "put",
    );
  }

  async putMany(entries: readonly (readonly [string, T])[]): Promise<void> {
    // The last document of a key wins, as if put one by one (ON CONFLICT cannot touch a row twice in one statement).
    const byKey = new Map<string, string>();
    for (const [k, json] of documentEntriesJson(entries)) {
      byKey.delete(k);
      byKey.set(k, json);
    }
    if (byKey.size === 0) return;
    await this.backend.exec(
      `WITH registered AS (INSERT INTO ${this.backend.collectionsTable} (collection) VALUES ($1) ON CONFLICT DO NOTHING)
       INSERT INTO ${this.backend.docs} AS d (collection, key, doc, updated_at, tenant_uuid)
       SELECT $1, u.key, u.doc, $4, $5::text FROM unnest($2::text[], $3::jsonb[]) AS u(key, doc)
       ${UPSERT}`,
      [this.name, [...byKey.keys()], [...byKey.values()], nowNs(), this.scope.writeTenantUuid ?? null],
      true,
      "putMany",
    );
  }

  async delete(key: string): Promise<boolean> {
    assertDocumentKey(key);
    const res = await this.backend.exec(
      `DELETE FROM ${this.backend.docs} WHERE collection = $1 AND key = $2`,
      [this.name, key],
      true,
      "delete",
    );
    return (res.rowCount ?? 0) > 0;
  }

  async list(opts: ListOptions = {}): Promise<T[]> {
    const { offset, limit } = listWindow(opts);
    if (opts.orderBy !== undefined) assertFieldName(opts.orderBy, "orderBy");
    const values: unknown[] = [];
    const where = this.tenantSql(values) + whereSql(opts.where, values);
    const dir = opts.descending === true ? "DESC" : "ASC";
    let order = `key ${dir}`;
    if (opts.orderBy !== undefined) {
      // Typed order, as the other backends: missing/null < booleans < numbers < strings < arrays and objects; ties by key.
      order = [...fieldColumns(opts.orderBy), "key"].map((c) => `${c} ${dir}`).join(", ");
    }
    const lim = `$${values.push(limit ?? null)}`;
    const off = `$${values.push(offset)}`;
    const res = await this.backend.exec<{ doc: T }>(
      `SELECT doc FROM ${this.backend.docs} WHERE ${this.collectionSql}${where} ORDER BY ${order} LIMIT ${lim} OFFSET ${off}`,
      values,
      false,
      "list",
    );
    return res.rows.map((r) => r.doc);
  }

  async count(where?: Where): Promise<number> {
    const values: unknown[] = [];
    const cond = this.tenantSql(values) + whereSql(where, values);
    const res = await this.backend.exec<{ n: string }>(
      `SELECT count(*)::text AS n FROM ${this.backend.docs} WHERE ${this.collectionSql}${cond}`,
      values,
      false,
      "count",
    );
    return Number(res.rows[0]?.n ?? 0);
  }

  async clear(): Promise<void> {
    await this.backend.exec(`DELETE FROM ${this.backend.docs} WHERE collection = $1`, [this.name], true, "clear");
  }
}

/** The upsert of a document: a write without a tenant keeps the stored document's; only a tenant's write changes it. */
const UPSERT = `ON CONFLICT (collection, key) DO UPDATE SET doc = EXCLUDED.doc, updated_at = EXCLUDED.updated_at,
       tenant_uuid = COALESCE(EXCLUDED.tenant_uuid, d.tenant_uuid)`;

/**
 * The index columns of a top-level field, and the terms list() orders by:
 * its type rank (missing or null 0, booleans 1, numbers 2, strings 3, arrays
 * and objects 4), its number (0 unless a number) and its text (a string's
 * value, `true`/`false`, an array's or object's JSON; '' otherwise), in code
 * point order. None is NULL, so equality on all three pins a field for a
 * compound index and the next field's order follows. The field name is
 * checked (letters, digits, _) before it gets here: a literal, because an
 * expression index serves only the very same expression.
 */
function fieldColumns(field: string): [rank: string, num: string, text: string] {
  const f = `(doc -> '${field}')`;
  return [
    `(CASE jsonb_typeof${f} WHEN 'boolean' THEN 1 WHEN 'number' THEN 2 WHEN 'string' THEN 3 WHEN 'array' THEN 4 WHEN 'object' THEN 4 ELSE 0 END)`,
    `(CASE WHEN jsonb_typeof${f} = 'number' THEN ${f}::numeric ELSE 0 END)`,
    `(CASE WHEN jsonb_typeof${f} IN ('boolean', 'string', 'array', 'object') THEN doc ->> '${field}' ELSE '' END) COLLATE "C"`,
  ];
}

/**
 * Equality filters as terms on a field's three index columns, the values as
 * parameters; typed (1 matches neither "1" nor true): a string is rank 3,
 * number 0 and its text; a number rank 2, itself and ''; a boolean rank 1, 0
 * and 'true'/'false'.
 */
function whereSql(where: Where, values: unknown[]): string {
  let sql = "";
  for (const [f, v] of whereConditions(where)) {
    const [rank, num, text] = fieldColumns(f);
    const r = typeof v === "string" ? 3 : typeof v === "number" ? 2 : 1;
    const n = typeof v === "number" ? `$${values.push(v)}::numeric` : "0";
    const t = typeof v === "number" ? "''" : `$${values.push(String(v))}::text`;
    sql += ` AND ${rank} = ${r} AND ${num} = ${n} AND ${text} = ${t}`;
  }
  return sql;
}

/** An SQL string literal of `text`, right whatever standard_conforming_strings is (E'' with backslashes doubled when it has any). */
function pgStringLiteral(text: string): string {
  if (text.includes("\0")) throw new MnemeError("INVALID_REQUEST", "a collection name must not contain NUL");
  const quoted = text.replace(/'/g, "''");
  return text.includes("\\") ? ` E'${quoted.replace(/\\/g, "\\\\")}'` : `'${quoted}'`;
}
