import { type CollectionIndexPlan, sqlStringLiteral } from "../store/readmodel-indexes.js";
import type { SqliteDatabase } from "./sqlite-database.js";
import { toStoreError } from "./sqlite-errors.js";
import { fieldColumns } from "./sqlite-readmodel-fields.js";

/**
 * Makes the indexes of `collection` exactly those of `plan`: partial
 * expression indexes on the documents table, `WHERE collection = '<collection>'`,
 * on the collection, then `tenant_uuid` when the index is tenant-led, each field's type
 * rank and `json_extract` value (the expressions list and count write), then
 * the key. Created and dropped in one write transaction of their own.
 */
export function syncCollectionIndexes(db: SqliteDatabase, docsTable: string, collection: string, plan: CollectionIndexPlan): void {
  try {
    db.writeTransaction(() => {
      const existing = db
        .rawStatement("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = ? AND substr(name, 1, ?) = ?")
        .all(docsTable, plan.prefix.length, plan.prefix) as [string][];
      const keep = new Set<string>();
      for (const { name, fields, tenantLead } of plan.indexes) {
        keep.add(name);
        // The collection leads too (partial index or not): without statistics SQLite would rather sort the
        // rows the primary key finds (collection = ?) than scan an index led by nothing the query pins.
        const columns = ["collection", ...(tenantLead ? ["tenant_uuid"] : []), ...fields.map(fieldColumns), "key"].join(", ");
        db.exec(`CREATE INDEX IF NOT EXISTS "${name}" ON ${docsTable} (${columns}) WHERE collection = ${sqlStringLiteral(collection)}`);
      }
      for (const [name] of existing) if (!keep.has(name)) db.exec(`DROP INDEX IF EXISTS "${name}"`);
    });
  } catch (e) {
    throw toStoreError(e, "ensureIndexes");
  }
}
