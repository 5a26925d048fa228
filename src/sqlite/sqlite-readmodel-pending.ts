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
 * own; "": so does a document put earlier in the transaction, with the tenant it was put with).
 */
export function pendPut(tx: PendingWrites, name: string, key: string, json: string, tenant: string | undefined): void {
  const docs = pendingDocs(tx, name);
  const replacesPending = typeof docs.get(key) === "string";
  docs.set(key, json);
  if (tenant === undefined || (tenant === "" && replacesPending)) return;
  let tenants = tx.tenants.get(name);
  if (tenants === undefined) tx.tenants.set(name, (tenants = new Map()));
  tenants.set(key, tenant);
}
