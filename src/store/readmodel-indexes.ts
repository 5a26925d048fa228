import { MnemeError } from "../model/errors.js";
import { sha256Hex } from "./sha256.js";

/**
 * One declared index of a readmodel collection: a top-level field (`"status"`)
 * or a compound of several, in order (`["status", "placedAt"]`). A compound
 * index serves `where` equality on a prefix of its fields together with
 * `orderBy` the field that follows (or the last one).
 */
export type CollectionIndex = string | readonly string[];

/** The most fields one compound index may have. */
export const MAX_INDEX_FIELDS = 8;

/** The most indexes one collection may declare. */
export const MAX_COLLECTION_INDEXES = 16;

/** A top-level field: the same whitelist as `where` and `orderBy` (it keeps names out of reach of SQL). */
const FIELD = /^[A-Za-z0-9_]+$/;

/**
 * Bumped when the SQL shape of an index changes between releases: it is part
 * of every index's name, so indexes of the old shape are dropped and the new
 * ones created by the reconciliation at start.
 */
const INDEX_SHAPE_VERSION = 1;

/**
 * The declared indexes of `collection`, checked and normalised: each a
 * non-empty list of distinct field names, duplicates removed, in declaration
 * order. INVALID_REQUEST for anything else (`unique` and other options are
 * not supported: an index only speeds reads up, it never refuses a write).
 */
export function normalizeIndexes(indexes: unknown, collection: string): string[][] {
  const bad = (why: string): MnemeError =>
    new MnemeError("INVALID_REQUEST", `collection ${collection}: indexes ${why} (a list of field names or of lists of field names)`);
  if (!Array.isArray(indexes)) throw bad("must be an array");
  if (indexes.length > MAX_COLLECTION_INDEXES) throw bad(`are at most ${MAX_COLLECTION_INDEXES}`);
  const out: string[][] = [];
  const seen = new Set<string>();
  for (const entry of indexes as unknown[]) {
    const fields: unknown[] = typeof entry === "string" ? [entry] : Array.isArray(entry) ? (entry as unknown[]) : [entry];
    if (fields.length === 0) throw bad("must not hold an empty list");
    if (fields.length > MAX_INDEX_FIELDS) throw bad(`have at most ${MAX_INDEX_FIELDS} fields each`);
    for (const f of fields) {
      if (typeof f !== "string" || !FIELD.test(f)) throw bad(`name top-level fields of letters, digits and _, got ${JSON.stringify(f)}`);
    }
    const names = fields as string[];
    if (new Set(names).size !== names.length) throw bad(`repeat a field within one index: ${JSON.stringify(names)}`);
    const id = names.join(",");
    if (seen.has(id)) continue;
    seen.add(id);
    out.push(names);
  }
  return out;
}

/** A stable text form of a normalised index list (the same declaration gives the same text). */
export function indexesKey(indexes: readonly (readonly string[])[], tenantFirst: boolean): string {
  return `${tenantFirst ? "t" : "g"}|${indexes.map((i) => i.join(",")).join("|")}`;
}

/**
 * The prefix of every index name of `collection` (`<tablePrefix>rmx_<16 hex>_`):
 * deterministic, so another instance or a later release finds the indexes
 * it has to keep or drop.
 */
export function collectionIndexPrefix(tablePrefix: string, collection: string): string {
  return `${tablePrefix}rmx_${sha256Hex(`collection:${collection}`).slice(0, 16)}_`;
}

/**
 * The name of one index of `collection`: its collection prefix and a hash of
 * its fields, whether the tenant leads it and the shape version (at most
 * 37 characters after `tablePrefix`: within Postgres's 63).
 */
export function collectionIndexName(tablePrefix: string, collection: string, fields: readonly string[], tenantFirst: boolean): string {
  const spec = `v${INDEX_SHAPE_VERSION}|${tenantFirst ? "tenant" : "global"}|${fields.join(",")}`;
  return collectionIndexPrefix(tablePrefix, collection) + sha256Hex(spec).slice(0, 16);
}

/** Options of `ensureIndexes`. */
export interface EnsureIndexesOptions {
  /**
   * The collection is read per tenant: each declared index is made twice, led
   * by the tenant (a tenant's reads) and without it (trusted code's reads of
   * every tenant).
   */
  readonly tenantFirst?: boolean;
}

/** Checks the `tenantFirst` option of ensureIndexes. */
export function tenantFirstOf(options: EnsureIndexesOptions | undefined): boolean {
  const t = options?.tenantFirst ?? false;
  if (typeof t !== "boolean") throw new MnemeError("INVALID_REQUEST", "ensureIndexes: tenantFirst must be a boolean");
  return t;
}

/** The indexes one collection must have, as a backend makes sure of them (see {@link planCollectionIndexes}). */
export interface CollectionIndexPlan {
  /** The same for the same declaration: a backend skips a plan whose key it already made sure of. */
  readonly key: string;
  readonly tenantFirst: boolean;
  /** The name prefix of every index of the collection: one with it that the plan does not name is dropped. */
  readonly prefix: string;
  /** Each index: its name, fields, and whether the tenant leads it (a tenant-first plan has each fields list with and without). */
  readonly indexes: readonly { readonly name: string; readonly fields: readonly string[]; readonly tenantLead: boolean }[];
}

/**
 * Checks an ensureIndexes call (its indexes and options; the caller checks
 * the collection name) and names each index as the backend whose names
 * start with `tablePrefix` creates it.
 */
export function planCollectionIndexes(
  tablePrefix: string,
  collection: string,
  indexes: readonly (readonly string[])[],
  options: EnsureIndexesOptions | undefined,
): CollectionIndexPlan {
  const tenantFirst = tenantFirstOf(options);
  const wanted = normalizeIndexes(indexes, collection);
  return {
    key: indexesKey(wanted, tenantFirst),
    tenantFirst,
    prefix: collectionIndexPrefix(tablePrefix, collection),
    // A tenant's read pins the tenant, trusted code's read of all tenants cannot: an index led by the tenant
    // serves only the first, so a tenant collection gets both (a store made before has the first; its next start adds the second).
    indexes: wanted.flatMap((fields) =>
      (tenantFirst ? [true, false] : [false]).map((tenantLead) => ({
        name: collectionIndexName(tablePrefix, collection, fields, tenantLead),
        fields,
        tenantLead,
      })),
    ),
  };
}

/** Escapes `text` as an SQL string literal (standard quoting: ' doubled); SQLite and Postgres with standard_conforming_strings. */
export function sqlStringLiteral(text: string): string {
  if (text.includes("\0")) throw new MnemeError("INVALID_REQUEST", "a collection name must not contain NUL");
  return `'${text.replace(/'/g, "''")}'`;
}
