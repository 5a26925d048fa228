import { nowNs } from "../model/clock.js";
import { tenantKeyConflict } from "../store/readmodel-validation.js";
import type { SqliteDatabase } from "./sqlite-database.js";
import type { PendingWrites } from "./sqlite-readmodel-pending.js";

/** The condition (one parameter: a writer's tenant) of a row that writer may delete: its own, or one without a tenant. */
export const OWN_ROW = "(tenant_uuid IS NULL OR tenant_uuid = ?)";

/**
 * The documents table (collection, key, doc as JSON text, updated_at,
 * tenant_uuid) and the table of collections that ever held a document, of
 * one SqliteReadmodelStoreBackend: their DDL and every write of documents.
 * Each method runs inside the caller's write transaction or savepoint unless
 * it says otherwise.
 */
export class SqliteReadmodelDocuments {
  readonly docsTable: string;
  readonly collectionsTable: string;
  /** Collections known to be in the collections table (added once their write committed). */
  private readonly registered = new Set<string>();

  constructor(
    private readonly db: SqliteDatabase,
    prefix: string,
  ) {
    this.docsTable = `${prefix}readmodel_documents`;
    this.collectionsTable = `${prefix}readmodel_collections`;
  }

  createTables(): void {
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
    `);
    this.addTenantColumn();
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

  /** The names in the collections table (committed only). */
  committedNames(): string[] {
    const rows = this.db.rawStatement(`SELECT name FROM ${this.collectionsTable} ORDER BY name`).all() as [string][];
    return rows.map((r) => r[0]);
  }

  /** Remembers that `names` are in the collections table, once the transaction that put them there committed. */
  noteCommitted(names: readonly string[]): void {
    for (const name of names) this.registered.add(name);
  }

  /** Writes the pending changes of `tx` to the documents and moves of `tx`; the collections that got documents. */
  applyAll(tx: PendingWrites): string[] {
    const touched: string[] = [];
    for (const name of new Set([...tx.cleared, ...tx.docs.keys()])) if (this.applyCollection(tx, name)) touched.push(name);
    for (const [target, source] of tx.moves) if (this.move(target, source)) touched.push(target);
    return touched;
  }

  /** Writes one collection's pending changes; true when it put documents. */
  applyCollection(tx: PendingWrites, name: string): boolean {
    const db = this.db;
    if (tx.cleared.has(name)) db.statement(`DELETE FROM ${this.docsTable} WHERE collection = ?`).run(name);
    const docs = tx.docs.get(name);
    if (docs === undefined) return false;
    const tenants = tx.tenants.get(name);
    const upsert = db.statement(this.upsertSql());
    const del = db.statement(`DELETE FROM ${this.docsTable} WHERE collection = ? AND key = ?`);
    const delOwn = db.statement(`DELETE FROM ${this.docsTable} WHERE collection = ? AND key = ? AND ${OWN_ROW}`);
    const refused: string[] = [];
    let put = false;
    const at = nowNs();
    for (const [key, json] of docs) {
      const tenant = tenants?.get(key);
      if (json === null) {
        if (tenant === undefined || tenant === "") del.run(name, key);
        else delOwn.run(name, key, tenant);
      } else {
        if (upsert.run(name, key, json, at, tenant ?? null).changes === 0) refused.push(key);
        put = true;
      }
    }
    // Thrown inside the commit's (or a scratch read's) write transaction: nothing of it stays.
    if (refused.length > 0) throw tenantKeyConflict(name, refused);
    if (put) this.register(name);
    return put;
  }

  /** Runs `moves` in one write transaction of its own (see {@link move}). */
  replaceNow(moves: readonly (readonly [target: string, source: string])[]): void {
    const touched: string[] = [];
    this.db.writeTransaction(() => {
      for (const [target, source] of moves) if (this.move(target, source)) touched.push(target);
    });
    this.noteCommitted(touched);
  }

  /** Moves the documents of `source` over those of `target`; true when it moved some. */
  private move(target: string, source: string): boolean {
    const db = this.db;
    db.statement(`DELETE FROM ${this.docsTable} WHERE collection = ?`).run(target);
    const moved = db.statement(`UPDATE ${this.docsTable} SET collection = ? WHERE collection = ?`).run(target, source).changes;
    if (moved > 0) this.register(target);
    return moved > 0;
  }

  /** Upserts documents with `tenant` (undefined: a replaced document keeps its own) and registers the collection, in one write transaction. */
  putNow(collection: string, entries: readonly (readonly [string, string])[], tenant: string | undefined): void {
    const db = this.db;
    db.writeTransaction(() => {
      this.register(collection);
      const upsert = db.statement(this.upsertSql());
      const at = nowNs();
      const refused: string[] = [];
      for (const [key, json] of entries) if (upsert.run(collection, key, json, at, tenant ?? null).changes === 0) refused.push(key);
      if (refused.length > 0) throw tenantKeyConflict(collection, [...new Set(refused)]);
    });
    this.registered.add(collection);
  }

  private register(collection: string): void {
    if (this.registered.has(collection)) return;
    this.db.statement(`INSERT OR IGNORE INTO ${this.collectionsTable} (name) VALUES (?)`).run(collection);
  }

  private upsertSql(): string {
    // A write without a tenant (none, or "": a handler of an event without one) keeps the stored document's tenant.
    // A tenant's write replaces only its own or a tenantless document: for another tenant's the WHERE leaves the row
    // alone and the statement reports no change (the caller's CONFLICT), with no read before the write.
    return `INSERT INTO ${this.docsTable} (collection, key, doc, updated_at, tenant_uuid) VALUES (?, ?, ?, ?, ?)
            ON CONFLICT (collection, key) DO UPDATE SET doc = excluded.doc, updated_at = excluded.updated_at,
            tenant_uuid = COALESCE(NULLIF(excluded.tenant_uuid, ''), tenant_uuid)
            WHERE tenant_uuid IS NULL OR COALESCE(excluded.tenant_uuid, '') = '' OR tenant_uuid = excluded.tenant_uuid`;
  }
}
