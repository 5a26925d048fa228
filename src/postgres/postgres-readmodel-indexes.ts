import type { CollectionIndexPlan } from "../store/readmodel-indexes.js";
import { fieldColumns, pgStringLiteral } from "./postgres-readmodel-fields.js";
import { advisoryKey } from "./postgres-schema.js";

/** Runs one statement of the caller's transaction. */
export type IndexQuery = (text: string, values: unknown[]) => Promise<{ rows: { name: string }[] }>;

/**
 * Makes the indexes of `collection` exactly those of `plan`, inside the
 * caller's transaction: partial expression indexes on the documents table,
 * `WHERE collection = '<collection>'`, on each field's type rank, number and
 * text (the expressions list and count write), then the key; led by
 * `tenant_uuid` when the index is tenant-led. Serialised across instances by an
 * advisory lock of the schema.
 */
export async function syncCollectionIndexes(
  query: IndexQuery,
  where: { readonly schema: string; readonly qschema: string; readonly docs: string },
  collection: string,
  plan: CollectionIndexPlan,
): Promise<void> {
  await query("SELECT pg_advisory_xact_lock($1::bigint)", [advisoryKey("mneme:readmodel-indexes", where.schema)]);
  const existing = await query(
    "SELECT indexname AS name FROM pg_indexes WHERE schemaname = $1 AND tablename = 'readmodel_documents' AND left(indexname, $2) = $3",
    [where.schema, plan.prefix.length, plan.prefix],
  );
  const keep = new Set<string>();
  for (const { name, fields, tenantLead } of plan.indexes) {
    keep.add(name);
    const columns = [...(tenantLead ? ["tenant_uuid"] : []), ...fields.flatMap(fieldColumns), "key"].join(", ");
    await query(`CREATE INDEX IF NOT EXISTS "${name}" ON ${where.docs} (${columns}) WHERE collection = ${pgStringLiteral(collection)}`, []);
  }
  for (const { name } of existing.rows) if (!keep.has(name)) await query(`DROP INDEX IF EXISTS ${where.qschema}."${name}"`, []);
}
