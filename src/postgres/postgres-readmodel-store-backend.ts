import { AsyncLocalStorage } from "node:async_hooks";
import { isMnemeError, MnemeError } from "../model/errors.js";
import type { CollectionScope, ReadmodelCollection, ReadmodelStoreBackend } from "../store/readmodel-store-backend.js";
import {
  assertCheckpoint,
  assertCollectionMoves,
  assertCollectionName,
  assertHandlerName,
  checkScope,
} from "../store/readmodel-validation.js";
import { lockLostError, noteFence } from "../store/lock-fencing.js";
import { type EnsureIndexesOptions, planCollectionIndexes } from "../store/readmodel-indexes.js";
import type { StoreInfo } from "../store/store-info.js";
import { isConnectionError, mapPgError } from "./postgres-errors.js";
import type { CheckedOutClient, PgQuery } from "./postgres-pool.js";
import { countUnscopedDocuments, unscopedDocuments } from "./postgres-old-writers.js";
import { PostgresStoreBase, type PostgresStoreOptions } from "./postgres-store-base.js";
import { assertPgTransactionOpen, PostgresSqlTableAccess } from "./postgres-sql-table-access.js";
import type { SqlTableAccess } from "../store/sql-table-access.js";
import { type PostgresCollectionHost, PostgresReadmodelCollection } from "./postgres-readmodel-collection.js";
import { type IndexQuery, syncCollectionIndexes } from "./postgres-readmodel-indexes.js";
import { type LockLostListener, PostgresReadmodelLocks } from "./postgres-readmodel-locks.js";

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

/** SQL: the advisory lock of key $2 (a bigint) is held by a session of this database (pg_locks shows its halves). */
const ADVISORY_LOCK_HELD = `EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 1
  AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
  AND classid = (($2::bigint >> 32) & 4294967295)::oid AND objid = ($2::bigint & 4294967295)::oid)`;

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
export class PostgresReadmodelStoreBackend extends PostgresStoreBase implements ReadmodelStoreBackend, PostgresCollectionHost {
  /** Stores a tenant with each document (column tenant_uuid) and honours a collection's scope. */
  readonly tenantScopes = true;
  /** @internal */ readonly docs: string;
  /** @internal */ readonly collectionsTable: string;
  private readonly checkpoints: string;
  private readonly locks: string;
  private readonly lockSession: PostgresReadmodelLocks;
  private readonly als = new AsyncLocalStorage<Tx>();
  private activeTx: Tx | undefined;
  private mutexTail: Promise<void> = Promise.resolve();
  private mutexHolders = 0;
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
    this.lockSession = new PostgresReadmodelLocks({
      locksTable: this.locks,
      schema: this.schema,
      checkout: (onLost) => this.checkout("lock", "postgres: the readmodel lock client", onLost),
      assertOpen: () => this.assertOpen(),
    });
  }

  /** Creates the schema and tables; idempotent, safe to run from several instances at once. */
  async init(): Promise<void> {
    await this.track(() =>
      this.runDdl((admitOldWriters) => [
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
      const session: TxSession = { client: undefined, broken: false };
      try {
        this.assertOpen();
        const client = (session.client = await this.checkout("transaction", "postgres: readmodel transaction"));
        await txStatement(session, client, "BEGIN");
        const tx: Tx = { client, fences: new Map(), proven: new Set(), ensured: new Map() };
        this.activeTx = tx;
        let result: R;
        try {
          result = await this.als.run(tx, async () => {
            const r = await fn();
            await this.proveFences(tx);
            assertPgTransactionOpen(client.raw);
            return r;
          });
        } catch (e) {
          this.activeTx = undefined;
          throw await rollBack(session, client, e);
        }
        this.activeTx = undefined;
        const committed = await txStatement(session, client, "COMMIT");
        // COMMIT of a transaction in which a statement failed (and fn caught it) rolls back instead.
        if (committed.command === "ROLLBACK") {
          throw new MnemeError("STORE_ERROR", "postgres: readmodel transaction rolled back: a statement inside it failed");
        }
        for (const [collection, key] of tx.ensured) this.ensuredIndexes.set(collection, key);
        return result;
      } finally {
        this.activeTx = undefined;
        session.client?.release(session.broken);
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
   * ReadmodelStoreBackend.ensureIndexes and syncCollectionIndexes). Outside a
   * transaction in one of its own; inside one, as part of it (it counts as
   * done once that commits).
   */
  async ensureIndexes(collection: string, indexes: readonly (readonly string[])[], options?: EnsureIndexesOptions): Promise<void> {
    assertCollectionName(collection);
    const plan = planCollectionIndexes("", collection, indexes, options);
    if (this.ensuredIndexes.get(collection) === plan.key) return;
    const tx = this.currentTx();
    if (tx !== undefined && tx.ensured.get(collection) === plan.key) return;
    const query: IndexQuery = (text, values) => this.exec<{ name: string }>(text, values, true, "ensureIndexes");
    const where = { schema: this.schema, qschema: this.qschema, docs: this.docs };
    if (tx !== undefined) {
      await syncCollectionIndexes(query, where, collection, plan);
      tx.ensured.set(collection, plan.key);
      return;
    }
    await this.transaction(() => syncCollectionIndexes(query, where, collection, plan));
    this.ensuredIndexes.set(collection, plan.key);
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
    return this.track(() => this.lockSession.tryLock(handler, holder));
  }

  /** Releases the lock of `handler` when this backend holds it; otherwise does nothing. */
  async unlock(handler: string): Promise<void> {
    await this.track(() => this.lockSession.unlock(handler));
  }

  /** The handlers whose locks this backend holds now. */
  heldLockNames(): string[] {
    return this.lockSession.heldLockNames();
  }

  /** The fencing token of the lock on `handler` this backend holds; undefined when it holds none. */
  fencingToken(handler: string): number | undefined {
    return this.lockSession.fencingToken(handler);
  }

  /**
   * Inside a transaction: holds `handler`'s lock row (FOR SHARE) until the
   * transaction ends and throws INVALID_STATE (lock lost; the transaction
   * rolls back) unless its token is still `token`.
   */
  async checkFencingToken(handler: string, token: number): Promise<void> {
    const tx = this.currentTx();
    noteFence(tx?.fences, handler, token);
    tx?.proven.delete(handler);
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

  /**
   * The instance id the holder of `handler`'s lock recorded; undefined when it
   * is free or unknown. Only while the advisory lock is held: a holder whose
   * session died (a killed process) left its id in the row, not the lock.
   */
  async lockHolder(handler: string): Promise<string | undefined> {
    const res = await this.exec<{ holder: string | null }>(
      `SELECT holder FROM ${this.locks} WHERE handler = $1 AND ${ADVISORY_LOCK_HELD}`,
      [handler, this.lockSession.key(handler)],
      false,
      "lockHolder",
    );
    return res.rows[0]?.holder ?? undefined;
  }

  /** Tells `listener` when the lock connection failed and the listed locks were lost (another instance may take them). */
  onLockLost(listener: LockLostListener): () => void {
    return this.lockSession.onLockLost(listener);
  }

  protected override async onClose(): Promise<void> {
    await this.lockSession.release();
  }

  // --- used by PostgresReadmodelCollection -----------------------------------

  /**
   * @internal Runs one statement: on the transaction's client inside a
   * transaction, else on the pool, a write first waiting for running transactions.
   */
  async exec<R extends object>(text: string | PgQuery, values: unknown[], write: boolean, what: string) {
    return this.track(async () => {
      try {
        const tx = this.currentTx();
        if (tx !== undefined) {
          // However a statement got past the checks, the transaction it ended is noticed here: no later statement
          // runs outside it (it would commit on its own), and the batch is not taken for whole.
          assertPgTransactionOpen(tx.client.raw);
          const res = await tx.client.query<R>(text, values);
          assertPgTransactionOpen(tx.client.raw);
          return res;
        }
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
}

/** A fence of `tx` not proven yet, if any. */
function unproven(tx: Tx): [string, number] | undefined {
  for (const f of tx.fences) if (!tx.proven.has(f[0])) return f;
  return undefined;
}

/** The client of a transaction, and whether it must be destroyed rather than reused. */
interface TxSession {
  client: CheckedOutClient | undefined;
  broken: boolean;
}

/**
 * BEGIN or COMMIT; a failure breaks the session. A connection that died
 * during COMMIT leaves its outcome unknown: UNAVAILABLE, and a caller reads
 * its checkpoint again.
 */
async function txStatement(session: TxSession, client: CheckedOutClient, sql: "BEGIN" | "COMMIT"): Promise<{ command: string }> {
  try {
    return await client.query(sql);
  } catch (e) {
    session.broken = true;
    throw mapPgError(e, `postgres: readmodel transaction: ${sql}`);
  }
}

/**
 * After the transaction's function threw `e`: rolls back, and gives the error
 * to throw: `e`, or UNAVAILABLE when the session is gone (and its transaction
 * with it; fn may have seen and wrapped that error).
 */
async function rollBack(session: TxSession, client: CheckedOutClient, e: unknown): Promise<unknown> {
  let lost = client.lost;
  if (!lost) {
    try {
      await client.query("ROLLBACK");
    } catch (rollbackError) {
      session.broken = true;
      lost = client.lost || isConnectionError(rollbackError);
    }
  }
  if (!lost) return e;
  session.broken = true;
  return isMnemeError(e, "UNAVAILABLE")
    ? e
    : new MnemeError("UNAVAILABLE", "postgres: readmodel transaction: the database connection failed", { cause: e });
}
