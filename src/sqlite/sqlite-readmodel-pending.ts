import { tenantKeyConflict, writerMayTouch } from "../store/readmodel-validation.js";

/** A statement of the application's own tables, run at the transaction's commit. */
export interface PendingStatement {
  readonly sql: string;
  readonly params: readonly unknown[];
}

/**
 * The writes of a running transaction of SqliteReadmodelStoreBackend, not
 * yet in SQLite: per collection key -> document JSON (null: deleted), the
 * collections cleared first, and checkpoints.
 */
export interface PendingWrites {
  active: boolean;
  readonly docs: Map<string, Map<string, string | null>>;
  /**
   * The tenant a pending document is written with, per collection and key; absent: its stored tenant stays. For a
   * pending delete (null), the tenant of the writer that deleted: the commit deletes the row only if that writer may.
   */
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

/** The buffer of a transaction that has written nothing yet. */
export function newPendingWrites(): PendingWrites {
  return {
    active: true,
    docs: new Map(),
    tenants: new Map(),
    cleared: new Set(),
    checkpoints: new Map(),
    moves: [],
    fences: new Map(),
    statements: [],
  };
}

/** True when the commit of `tx` has nothing to write. */
export function writesNothing(tx: PendingWrites): boolean {
  return tx.cleared.size === 0 && tx.docs.size === 0 && tx.checkpoints.size === 0 && tx.moves.length === 0 && tx.statements.length === 0;
}

/** True when `tx` changes the documents of `collection` (a read of it must see them applied). */
export function touchesCollection(tx: PendingWrites, collection: string): boolean {
  return tx.cleared.has(collection) || (tx.docs.get(collection)?.size ?? 0) > 0;
}

/** The pending documents of collection `name` in `tx`, made on first use. */
export function pendingDocs(tx: PendingWrites, name: string): Map<string, string | null> {
  let docs = tx.docs.get(name);
  if (docs === undefined) {
    docs = new Map();
    tx.docs.set(name, docs);
  }
  return docs;
}

/**
 * Buffers a put of `key` in collection `name`, with the write tenant (undefined: the stored document keeps its
 * own; "": so does a document put earlier in the transaction, with the tenant it was put with). A tenant's put over
 * a document another tenant put earlier in the transaction is CONFLICT at once; over a committed one, at the commit
 * (the upsert refuses it there, without a read now).
 */
export function pendPut(tx: PendingWrites, name: string, key: string, json: string, tenant: string | undefined): void {
  const docs = pendingDocs(tx, name);
  const prev = docs.get(key);
  let tenants = tx.tenants.get(name);
  const prevTenant = typeof prev === "string" ? tenants?.get(key) : undefined;
  const owner = tenant === "" ? undefined : tenant;
  if (!writerMayTouch(owner, prevTenant === "" ? null : (prevTenant ?? null))) throw tenantKeyConflict(name, [key]);
  docs.set(key, json);
  // A pending delete's entry names who deleted, not a document's tenant.
  if (prev === null) tenants?.delete(key);
  if (tenant === undefined || (tenant === "" && typeof prev === "string")) return;
  if (tenants === undefined) tx.tenants.set(name, (tenants = new Map()));
  tenants.set(key, tenant);
}

/** Buffers a delete of `key` by a writer held to `owner` (see ownerTenantOf): the commit deletes only a row that writer may touch. */
export function pendDeleteOf(tx: PendingWrites, name: string, key: string, owner: string | undefined): void {
  pendingDocs(tx, name).set(key, null);
  const tenants = tx.tenants.get(name);
  if (owner === undefined) tenants?.delete(key);
  else if (tenants === undefined) tx.tenants.set(name, new Map([[key, owner]]));
  else tenants.set(key, owner);
}
