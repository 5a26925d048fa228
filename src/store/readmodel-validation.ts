import { MnemeError } from "../model/errors.js";
import { stringProblem } from "./json-safe.js";
import type { CollectionScope, ListOptions } from "./readmodel-store-backend.js";

/** A top-level document field: the whitelist that keeps field names out of reach of SQL and JSON-path injection. */
const FIELD = /^[A-Za-z0-9_]+$/;

/** A `where` condition after {@link whereConditions} checked it: a field name and a string, finite number or boolean. */
export type WhereCondition = readonly [field: string, value: string | number | boolean];

/** Throws INVALID_REQUEST unless `name` is a collection name (a non-empty string). */
export function assertCollectionName(name: unknown): asserts name is string {
  if (typeof name !== "string" || name === "") throw new MnemeError("INVALID_REQUEST", "a collection name must be a non-empty string");
}

/** Throws INVALID_REQUEST unless `moves` are `[target, source]` pairs of collection names, none replacing itself (replaceCollections). */
export function assertCollectionMoves(moves: unknown): asserts moves is readonly (readonly [target: string, source: string])[] {
  if (!Array.isArray(moves)) throw new MnemeError("INVALID_REQUEST", "replaceCollections: moves must be an array of [target, source]");
  for (const move of moves as unknown[]) {
    if (!Array.isArray(move)) throw new MnemeError("INVALID_REQUEST", "replaceCollections: moves must be an array of [target, source]");
    const [target, source] = move as unknown[];
    assertCollectionName(target);
    assertCollectionName(source);
    if (target === source) throw new MnemeError("INVALID_REQUEST", `replaceCollections: ${target} cannot replace itself`);
  }
}

/**
 * Throws INVALID_REQUEST unless `key` is a document key: a string without
 * U+0000 or a lone surrogate (the payloads' string rule). Postgres reads a
 * lone surrogate as U+FFFD, so keys "\ud800" and "\udc00" would be one
 * document there (a key cut in the middle of an emoji makes one).
 */
export function assertDocumentKey(key: unknown): asserts key is string {
  if (typeof key !== "string") throw new MnemeError("INVALID_REQUEST", "a document key must be a string");
  const problem = stringProblem(key);
  if (problem !== undefined) throw new MnemeError("INVALID_REQUEST", `a document key ${problem}`);
}

/** Throws INVALID_REQUEST unless `keys` (of getMany, or the method named) is an array of document keys. */
export function assertDocumentKeys(keys: unknown, method = "getMany"): asserts keys is readonly string[] {
  if (!Array.isArray(keys)) throw new MnemeError("INVALID_REQUEST", `${method} takes an array of keys`);
  for (const k of keys) assertDocumentKey(k);
}

/** The JSON a backend stores for document `key`; INVALID_REQUEST when the key is not a string or the document has no JSON form. */
export function documentJson(key: string, doc: unknown): string {
  assertDocumentKey(key);
  let json: string | undefined;
  try {
    json = JSON.stringify(doc);
  } catch (e) {
    throw new MnemeError("INVALID_REQUEST", `document ${key} is not JSON-serialisable`, { cause: e });
  }
  if (json === undefined) throw new MnemeError("INVALID_REQUEST", `document ${key} is not JSON-serialisable`);
  return json;
}

/** The [key, JSON] pairs of a putMany call, in order, checked all before anything is written. */
export function documentEntriesJson(entries: unknown): [string, string][] {
  if (!Array.isArray(entries)) throw notEntries();
  // A loop, no closures: a readmodel's every batch goes through here.
  const out: [string, string][] = [];
  for (const entry of entries as unknown[]) {
    if (!Array.isArray(entry) || entry.length !== 2) throw notEntries();
    const [key, doc] = entry as [string, unknown];
    out.push([key, documentJson(key, doc)]);
  }
  return out;
}

function notEntries(): MnemeError {
  return new MnemeError("INVALID_REQUEST", "putMany takes an array of [key, document] pairs");
}

/** Throws INVALID_REQUEST unless `handler` is an event handler name (a non-empty string). */
export function assertHandlerName(handler: unknown): asserts handler is string {
  if (typeof handler !== "string" || handler === "") throw new MnemeError("INVALID_REQUEST", "a handler name must be a non-empty string");
}

/** Throws INVALID_REQUEST unless `position` is a checkpoint (an integer >= 0). */
export function assertCheckpoint(position: unknown): asserts position is number {
  if (!Number.isInteger(position) || (position as number) < 0)
    throw new MnemeError("INVALID_REQUEST", `a checkpoint must be an integer >= 0, got ${String(position)}`);
}

/** Throws INVALID_REQUEST unless `name` is a top-level field name (letters, digits, _); `what` names it in the message. */
export function assertFieldName(name: unknown, what: string): asserts name is string {
  if (typeof name !== "string" || !FIELD.test(name)) {
    throw new MnemeError("INVALID_REQUEST", `${what} must be a field name of letters, digits and _, got ${JSON.stringify(name)}`);
  }
}

/** The offset (default 0) and limit (default none) of a collection listing, each an integer >= 0. */
export function listWindow(opts: ListOptions): { offset: number; limit: number | undefined } {
  const offset = opts.offset ?? 0;
  const limit = opts.limit;
  if (!Number.isInteger(offset) || offset < 0)
    throw new MnemeError("INVALID_REQUEST", `offset must be an integer >= 0, got ${String(offset)}`);
  if (limit !== undefined && (!Number.isInteger(limit) || limit < 0))
    throw new MnemeError("INVALID_REQUEST", `limit must be an integer >= 0, got ${String(limit)}`);
  return { offset, limit };
}

/** The checked conditions of a `where` filter (none when it is absent): field names by {@link assertFieldName}, values strings, finite numbers or booleans. */
export function whereConditions(where: ListOptions["where"]): WhereCondition[] {
  if (where === undefined) return [];
  if (where === null || typeof where !== "object" || Array.isArray(where))
    throw new MnemeError("INVALID_REQUEST", "where must be an object");
  const conds = Object.entries(where);
  for (const [f, v] of conds) {
    assertFieldName(f, "a where field");
    const ok = typeof v === "string" || typeof v === "boolean" || (typeof v === "number" && Number.isFinite(v));
    if (!ok) throw new MnemeError("INVALID_REQUEST", `where.${f} must be a string, a finite number or a boolean`);
  }
  return conds;
}

/** A collection's scope, checked: tenants are strings. INVALID_REQUEST otherwise. */
export function checkScope(scope: unknown): CollectionScope {
  if (scope === undefined) return {};
  if (typeof scope !== "object" || scope === null) throw new MnemeError("INVALID_REQUEST", "a collection's scope must be an object");
  const { readTenantUuid, writeTenantUuid } = scope as CollectionScope;
  if (readTenantUuid !== undefined && typeof readTenantUuid !== "string")
    throw new MnemeError("INVALID_REQUEST", "readTenantUuid must be a string");
  if (writeTenantUuid !== undefined && typeof writeTenantUuid !== "string")
    throw new MnemeError("INVALID_REQUEST", "writeTenantUuid must be a string");
  return scope as CollectionScope;
}

/**
 * The tenant a scope's writes are held to: a document stored with another
 * tenant is not theirs to replace, delete or clear. Undefined for a writer
 * without a tenant (trusted code: none; a handler of an event without one:
 * `""`), which may write any document and keeps its tenant.
 */
export function ownerTenantOf(scope: CollectionScope): string | undefined {
  const t = scope.writeTenantUuid;
  return t === undefined || t === "" ? undefined : t;
}

/**
 * Whether a writer held to `owner` (see {@link ownerTenantOf}) may replace or
 * delete a document stored with `stored` (null: a document without a tenant,
 * written by trusted code or before documents carried one, which any writer
 * may take). SQL backends state the same rule in their statements.
 */
export function writerMayTouch(owner: string | undefined, stored: string | null): boolean {
  return owner === undefined || stored === null || stored === owner;
}

/**
 * CONFLICT for a tenant's write to a key that holds a document of another
 * tenant: keys are unique per collection, and a tenant never replaces another
 * tenant's document. The message names neither tenant.
 */
export function tenantKeyConflict(collection: string, keys: readonly string[]): MnemeError {
  const shown = keys.slice(0, 3).map((k) => JSON.stringify(k));
  const more = keys.length > 3 ? ` and ${keys.length - 3} more` : "";
  return new MnemeError(
    "CONFLICT",
    `readmodel collection ${collection}: key ${shown.join(", ")}${more} holds a document of another tenant; a tenant cannot replace it (key documents by something unique to one tenant, such as an aggregate uuid, or declare the collection { tenancy: "global" })`,
  );
}
