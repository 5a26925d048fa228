import type { EnsureIndexesOptions } from "./readmodel-indexes.js";
import type { StoreInfo } from "./store-info.js";

export interface ListOptions {
  offset?: number;
  limit?: number;
  /** A top-level field of the documents (an identifier: letters, digits, _); default: the key. */
  orderBy?: string;
  descending?: boolean;
  /** Equality filter on top-level fields (strings, numbers, booleans). */
  where?: Record<string, string | number | boolean>;
}

/**
 * Documents by key within one collection. Ties in `orderBy` are broken by key,
 * so paging is stable; `descending` is the exact reverse (ties by key
 * descending). `where` matches types exactly (1, "1" and true differ). An
 * invalid `orderBy`/`where` field name, or a negative offset or limit, gives
 * INVALID_REQUEST; limit 0 returns an empty list.
 */
export interface ReadmodelCollection<T> {
  get(key: string): Promise<T | undefined>;
  getMany(keys: readonly string[]): Promise<Map<string, T>>;
  put(key: string, doc: T): Promise<void>;
  putMany(entries: readonly (readonly [string, T])[]): Promise<void>;
  delete(key: string): Promise<boolean>;
  /**
   * Deletes the documents of `keys` as `delete` would one by one, in one
   * statement where the backend can; resolves with how many there were.
   * Optional: a caller without it deletes one by one.
   */
  deleteMany?(keys: readonly string[]): Promise<number>;
  list(opts?: ListOptions): Promise<T[]>;
  count(where?: ListOptions["where"]): Promise<number>;
  clear(): Promise<void>;
}

/**
 * The tenant side of a collection (readmodels' tenancy): which tenant's
 * documents its reads see, and which tenant its writes store with each
 * document. A backend honours it when it sets `tenantScopes`.
 */
export interface CollectionScope {
  /** get, getMany, list and count see only documents stored with this tenant. */
  readonly readTenantUuid?: string;
  /**
   * put and putMany store this tenant with each document. Without it a new
   * document has no tenant (seen only by reads without `readTenantUuid`) and a
   * replaced one keeps its tenant. `""` is the writer without a tenant (a
   * handler of an event without one, such as `Privacy.SubjectForgotten`): a
   * new document gets `""`, a replaced one keeps its tenant. A writer with a
   * tenant (not `""`) is held to it: put/putMany on a key holding another
   * tenant's document is CONFLICT with nothing of the call written (at the
   * latest when the running transaction commits, which then fails);
   * delete/deleteMany leave such a document (counted as absent); clear
   * empties only this tenant's documents. A document without a tenant is
   * anyone's to write.
   */
  readonly writeTenantUuid?: string;
}

/**
 * Persistence of readmodels: documents by collection and key, plus a
 * checkpoint per event handler.
 *
 * `transaction(fn)` runs fn so that every write made through this backend
 * inside it (including setCheckpoint) commits together or not at all: when fn
 * throws, its writes are rolled back and the error is rethrown; a crash before
 * it resolves leaves none of them on a durable backend. Every write counts,
 * `clear()` included: BaseReadmodel clears its collections and resets its
 * checkpoint to 0 in one transaction for a restore from zero, so an error or a
 * crash never leaves an emptied readmodel at an old checkpoint. Transactions
 * are serialised: writes from outside a running transaction wait for it.
 * A transaction inside a transaction joins the outer one.
 */
export interface ReadmodelStoreBackend {
  init(): Promise<void>;
  /** The documents of one collection; `scope` (with `tenantScopes`) limits reads to a tenant and tags writes with one. */
  collection<T>(name: string, scope?: CollectionScope): ReadmodelCollection<T>;
  /**
   * Optional capability: true when the backend stores a tenant with each
   * document and honours `collection(name, scope)`. Without it, readmodel
   * reads scoped to a tenant are refused (they would see every tenant's
   * documents); memory, SQLite and Postgres have it.
   */
  readonly tenantScopes?: boolean;
  /**
   * Optional flag, with tryLock: where the processing lock holds. `"database"`
   * (the default): every instance sharing the database (SQLite's lease,
   * Postgres' advisory lock), so a handler runs on one instance at a time.
   * `"process"`: only the holders in this process (the memory backend's
   * lease), no single-processor guarantee across processes.
   */
  readonly leaseScope?: "database" | "process";
  /** Names of the collections that hold or held documents. */
  listCollections(): Promise<string[]>;
  transaction<R>(fn: () => Promise<R>): Promise<R>;
  /**
   * Optional (blue-green rebuilds): in one transaction, each `[target, source]`
   * pair makes collection `target` hold what `source` holds and empties
   * `source` (a source with no documents empties the target). Without it a
   * restore from zero rebuilds in place.
   */
  replaceCollections?(moves: readonly (readonly [target: string, source: string])[]): Promise<void>;
  /**
   * Optional (indexed collections): makes the indexes of collection
   * `collection` exactly `indexes` (each a list of top-level fields, see
   * `normalizeIndexes`): creates the missing ones and drops the ones this
   * backend created earlier for that collection that are not listed (named
   * deterministically, so a later release or another instance reconciles
   * them). Idempotent and cheap when nothing changed; inside a transaction
   * it takes part in it. `list`/`count` with `where` on indexed fields and
   * `orderBy` one of them then use the indexes; results are the same with
   * or without them. SQLite and Postgres create indexes; memory has nothing
   * to create (it checks the declaration and scans as before).
   */
  ensureIndexes?(collection: string, indexes: readonly (readonly string[])[], options?: EnsureIndexesOptions): Promise<void>;
  /** The last position the handler processed; 0 when none was set. */
  getCheckpoint(handler: string): Promise<number>;
  setCheckpoint(handler: string, position: number): Promise<void>;
  info(): Promise<StoreInfo>;
  close(): Promise<void>;
  /**
   * Optional: an exclusive lock so one instance processes `handler` at a time
   * (Postgres: advisory lock). Resolves true when taken. `holder` names the
   * taking instance (the facade's instanceId), for {@link lockHolder}.
   */
  tryLock?(handler: string, holder?: string): Promise<boolean>;
  unlock?(handler: string): Promise<void>;
  /** Optional, with tryLock: tells when held locks were lost (e.g. the lock connection died), so their handlers step back. */
  onLockLost?(listener: (handlers: readonly string[]) => void): () => void;
  /**
   * Optional, with tryLock (fencing): the fencing token of the lock on
   * `handler` that this backend holds, or undefined when it holds none. Every
   * take-over of the lock, by any instance, gives a greater token, recorded in
   * the shared database in its own committed transaction before tryLock
   * resolves. A backend shared by several instances without it leaves an
   * instance that lost its lock unfenced (mneme warns with MNEME_UNFENCED_LOCK).
   */
  fencingToken?(handler: string): number | undefined;
  /**
   * Optional, with fencingToken: called inside a transaction (anywhere in
   * it), makes that transaction commit only while `token` is still the
   * current token of `handler`, checked in the same database transaction as
   * its writes (when exactly is the backend's choice: SQLite at its commit,
   * Postgres with its checkpoint write or just before COMMIT). When another
   * instance took the lock since, the transaction is rolled back and rejects
   * with INVALID_STATE (see `isLockLostError`), nothing written.
   */
  checkFencingToken?(handler: string, token: number): Promise<void>;
  /** Optional, with tryLock: the instance id recorded by the holder of `handler`'s lock, or undefined when it is free (or unknown). */
  lockHolder?(handler: string): Promise<string | undefined>;
}
