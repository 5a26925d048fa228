import type { CollectionScope, ListOptions, ReadmodelCollection } from "../store/readmodel-store-backend.js";
import {
  assertDocumentKey,
  assertDocumentKeys,
  assertFieldName,
  documentEntriesJson,
  documentJson,
  listWindow,
  ownerTenantOf,
  writerMayTouch,
} from "../store/readmodel-validation.js";
import { sqlStringLiteral } from "../store/readmodel-indexes.js";
import type { SqliteDatabase } from "./sqlite-database.js";
import { orderSql, whereClause } from "./sqlite-readmodel-fields.js";
import { pendDeleteOf, pendPut, type PendingWrites } from "./sqlite-readmodel-pending.js";
import { OWN_ROW } from "./sqlite-readmodel-documents.js";

/** What a collection needs of SqliteReadmodelStoreBackend (structurally: no import back up to it). */
export interface SqliteCollectionHost {
  /** The documents table. */
  readonly docs: string;
  connection(): SqliteDatabase;
  /** The running transaction's buffer when called from inside it. */
  pending(): PendingWrites | undefined;
  /** A write: into the buffer inside a transaction, else at once (after a running transaction). */
  write<R>(what: string, fn: (tx: PendingWrites | undefined) => R): Promise<R>;
  /** A read that sees the running transaction's pending writes on `collection`. */
  read<R>(what: string, collection: string, query: () => R): R;
  /** A read of committed rows only. */
  committed<R>(what: string, query: () => R): R;
  putNow(collection: string, entries: readonly (readonly [string, string])[], tenant: string | undefined): void;
}

/** One collection of a SqliteReadmodelStoreBackend. */
export class SqliteReadmodelCollection<T> implements ReadmodelCollection<T> {
  /** The SQL condition and parameter of the scope's read tenant; none without one. */
  private readonly tenantSql: string;
  private readonly tenantParams: string[];
  /**
   * `collection = '<name>'` with the name as a literal (list and count): the
   * indexes of a collection are partial (`WHERE collection = '<name>'`), and
   * SQLite uses a partial index only for a query whose WHERE holds that very term.
   */
  private readonly collectionSql: string;
  /** The tenant this collection's writes are held to (see ownerTenantOf). */
  private readonly owner: string | undefined;
  /** ` AND <OWN_ROW>` and its parameter for a writer held to a tenant: its deletes touch only rows it may. */
  private readonly ownSql: string;
  private readonly ownParams: string[];

  constructor(
    private readonly backend: SqliteCollectionHost,
    private readonly name: string,
    private readonly scope: CollectionScope,
  ) {
    this.owner = ownerTenantOf(scope);
    this.ownSql = this.owner === undefined ? "" : ` AND ${OWN_ROW}`;
    this.ownParams = this.owner === undefined ? [] : [this.owner];
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
    const found = this.scope.readTenantUuid !== undefined ? this.scopedDocs(keys) : this.docsSeenInTx(keys);
    // In the order asked for, like the memory backend.
    const ordered = new Map<string, T>();
    for (const key of keys) {
      const doc = found.get(key);
      if (doc !== undefined) ordered.set(key, JSON.parse(doc) as T);
    }
    return ordered;
  }

  /** The documents of `keys` in the read tenant, the running transaction's writes applied. */
  private scopedDocs(keys: readonly string[]): Map<string, string> {
    const rows = this.backend.read("getMany", this.name, () =>
      this.db()
        .rawStatement(
          `SELECT key, doc FROM ${this.backend.docs} WHERE collection = ? AND key IN (SELECT value FROM json_each(?))${this.tenantSql}`,
        )
        .all(this.name, JSON.stringify(keys), ...this.tenantParams),
    ) as [string, string][];
    return new Map(rows);
  }

  /** The documents of `keys`: pending ones from the buffer, the others committed. */
  private docsSeenInTx(keys: readonly string[]): Map<string, string> {
    const out = new Map<string, string>();
    const tx = this.backend.pending();
    const pending = tx?.docs.get(this.name);
    const fromDb: string[] = [];
    for (const key of keys) {
      const p = pending?.get(key);
      if (p !== undefined) {
        if (p !== null) out.set(key, p);
      } else if (tx?.cleared.has(this.name) !== true) fromDb.push(key);
    }
    if (fromDb.length > 0) {
      const rows = this.backend.committed("getMany", () =>
        this.db()
          .rawStatement(`SELECT key, doc FROM ${this.backend.docs} WHERE collection = ? AND key IN (SELECT value FROM json_each(?))`)
          .all(this.name, JSON.stringify(fromDb)),
      ) as [string, string][];
      for (const [key, doc] of rows) out.set(key, doc);
    }
    return out;
  }

  async put(key: string, doc: T): Promise<void> {
    await this.putRows("put", [[key, documentJson(key, doc)]]);
  }

  async putMany(entries: readonly (readonly [string, T])[]): Promise<void> {
    const rows = documentEntriesJson(entries);
    if (rows.length > 0) await this.putRows("putMany", rows);
  }

  private async putRows(what: string, rows: readonly (readonly [string, string])[]): Promise<void> {
    const tenant = this.scope.writeTenantUuid;
    await this.backend.write(what, (tx) => {
      if (tx !== undefined) for (const [key, json] of rows) pendPut(tx, this.name, key, json, tenant);
      else this.backend.putNow(this.name, rows, tenant);
    });
  }

  /** Deletes `key`; a writer held to a tenant leaves another tenant's document alone (false, as for an absent one). */
  async delete(key: string): Promise<boolean> {
    assertDocumentKey(key);
    return this.backend.write("delete", (tx) => {
      if (tx === undefined) {
        return (
          this.db()
            .statement(`DELETE FROM ${this.backend.docs} WHERE collection = ? AND key = ?${this.ownSql}`)
            .run(this.name, key, ...this.ownParams).changes > 0
        );
      }
      return this.pendDelete(tx, key);
    });
  }

  async deleteMany(keys: readonly string[]): Promise<number> {
    assertDocumentKeys(keys, "deleteMany");
    if (keys.length === 0) return 0;
    return this.backend.write("deleteMany", (tx) => {
      if (tx === undefined) {
        return this.db()
          .statement(`DELETE FROM ${this.backend.docs} WHERE collection = ? AND key IN (SELECT value FROM json_each(?))${this.ownSql}`)
          .run(this.name, JSON.stringify(keys), ...this.ownParams).changes;
      }
      let deleted = 0;
      for (const key of keys) if (this.pendDelete(tx, key)) deleted++;
      return deleted;
    });
  }

  /**
   * Deletes `key` in the transaction's buffer; whether it existed for this writer (pending, or committed and not
   * cleared; another tenant's document counts as absent and stays).
   */
  private pendDelete(tx: PendingWrites, key: string): boolean {
    const p = tx.docs.get(this.name)?.get(key);
    let existed: boolean;
    if (p !== undefined) {
      const tenant = tx.tenants.get(this.name)?.get(key);
      if (p !== null && !writerMayTouch(this.owner, tenant === undefined || tenant === "" ? null : tenant)) return false;
      existed = p !== null;
    } else {
      existed =
        !tx.cleared.has(this.name) &&
        this.db()
          .statement(`SELECT 1 AS x FROM ${this.backend.docs} WHERE collection = ? AND key = ?${this.ownSql}`)
          .get(this.name, key, ...this.ownParams) !== undefined;
      // Another tenant's committed document: nothing to buffer (a tenantless or absent one is deleted as before).
      if (!existed && this.owner !== undefined && !tx.cleared.has(this.name)) return false;
    }
    pendDeleteOf(tx, this.name, key, this.owner);
    return existed;
  }

  async list(opts: ListOptions = {}): Promise<T[]> {
    const { offset, limit } = listWindow(opts);
    const { sql: whereSql, params } = whereClause(opts.where);
    if (opts.orderBy !== undefined) assertFieldName(opts.orderBy, "orderBy");
    const order = orderSql(opts.orderBy, opts.descending);
    const sql = `SELECT doc FROM ${this.backend.docs} WHERE ${this.collectionSql}${this.tenantSql}${whereSql} ORDER BY ${order} LIMIT ? OFFSET ?`;
    const rows = this.backend.read("list", this.name, () =>
      this.db()
        .rawStatement(sql)
        .all(...this.tenantParams, ...params, limit ?? -1, offset),
    ) as [string][];
    return rows.map((r) => JSON.parse(r[0]) as T);
  }

  async count(where?: ListOptions["where"]): Promise<number> {
    const { sql: whereSql, params } = whereClause(where);
    const row = this.backend.read("count", this.name, () =>
      this.db()
        .statement(`SELECT COUNT(*) AS n FROM ${this.backend.docs} WHERE ${this.collectionSql}${this.tenantSql}${whereSql}`)
        .get(...this.tenantParams, ...params),
    ) as { n: number };
    return row.n;
  }

  /** Empties the collection; a writer held to a tenant empties only that tenant's documents. */
  async clear(): Promise<void> {
    const owner = this.owner;
    await this.backend.write("clear", (tx) => {
      if (owner !== undefined) {
        this.clearOwn(tx, owner);
        return;
      }
      if (tx === undefined) {
        this.db().statement(`DELETE FROM ${this.backend.docs} WHERE collection = ?`).run(this.name);
        return;
      }
      tx.cleared.add(this.name);
      tx.docs.get(this.name)?.clear();
      tx.tenants.get(this.name)?.clear();
    });
  }

  private clearOwn(tx: PendingWrites | undefined, owner: string): void {
    const own = `SELECT key FROM ${this.backend.docs} WHERE collection = ? AND tenant_uuid = ?`;
    if (tx === undefined) {
      this.db().statement(`DELETE FROM ${this.backend.docs} WHERE key IN (${own}) AND collection = ?`).run(this.name, owner, this.name);
      return;
    }
    // The tenant's documents as the transaction sees them: committed ones (their pending writes keep the tenant
    // unless a tenant replaced them) and those it put; each deleted as that tenant would one by one.
    const keys = new Set<string>();
    if (!tx.cleared.has(this.name)) {
      const rows = this.db().rawStatement(own).all(this.name, owner) as [string][];
      for (const [key] of rows) keys.add(key);
    }
    const tenants = tx.tenants.get(this.name);
    for (const [key, json] of tx.docs.get(this.name) ?? []) {
      const tenant = tenants?.get(key);
      if (json !== null && tenant === owner) keys.add(key);
      else if (tenant !== undefined && tenant !== "" && tenant !== owner) keys.delete(key);
    }
    for (const key of keys) pendDeleteOf(tx, this.name, key, owner);
  }

  private db(): SqliteDatabase {
    return this.backend.connection();
  }
}
