import { nowNs } from "../model/clock.js";
import type { CollectionScope, ListOptions, ReadmodelCollection } from "../store/readmodel-store-backend.js";
import {
  assertDocumentKey,
  assertDocumentKeys,
  assertFieldName,
  documentEntriesJson,
  documentJson,
  listWindow,
  ownerTenantOf,
  tenantKeyConflict,
} from "../store/readmodel-validation.js";
import { isMnemeError } from "../model/errors.js";
import { sqlState } from "./postgres-errors.js";
import { fieldColumns, pgStringLiteral, whereSql } from "./postgres-readmodel-fields.js";

/** What a collection needs of PostgresReadmodelStoreBackend (structurally: no import back up to it). */
export interface PostgresCollectionHost {
  /** The documents table, schema-qualified. */
  readonly docs: string;
  /** The table of collections that ever held a document. */
  readonly collectionsTable: string;
  /** Runs one statement: in the running transaction inside one, else on the pool (a write after running transactions). */
  exec<R extends object>(text: string, values: unknown[], write: boolean, what: string): Promise<{ rows: R[]; rowCount: number | null }>;
}

/** What the upsert's refusal says, before the key (see UPSERT). */
const REFUSED = "mneme: key held by another tenant: ";

/**
 * The upsert of a document: a write without a tenant (none, or "": a handler of an event without one) keeps
 * the stored document's tenant. A tenant's write replaces only its own or a tenantless document: for another
 * tenant's the statement fails (a cast of the refusal, which cannot be folded ahead since it names the row's
 * key), so nothing of it is written and a running transaction is aborted, with no read before the write.
 */
const UPSERT = `ON CONFLICT (collection, key) DO UPDATE SET doc = EXCLUDED.doc, updated_at = EXCLUDED.updated_at,
       tenant_uuid = CASE
         WHEN d.tenant_uuid IS NULL OR COALESCE(EXCLUDED.tenant_uuid, '') = '' OR d.tenant_uuid = EXCLUDED.tenant_uuid
         THEN COALESCE(NULLIF(EXCLUDED.tenant_uuid, ''), d.tenant_uuid)
         ELSE ((${pgStringLiteral(REFUSED)} || d.key)::int)::text END`;

/** The CONFLICT of an upsert `e` refused (see UPSERT), else `e`. */
function refusal(e: unknown, collection: string): unknown {
  const cause = isMnemeError(e) ? e.cause : undefined;
  const msg = cause instanceof Error ? cause.message : "";
  const at = msg.indexOf(REFUSED);
  if (sqlState(cause) !== "22P02" || at < 0) return e;
  // The driver's message: invalid input syntax for type integer: "<REFUSED><key>"
  return tenantKeyConflict(collection, [msg.slice(at + REFUSED.length, msg.endsWith('"') ? -1 : undefined)]);
}

/** The condition (with the writer's tenant as parameter `$n`) of a row that writer may delete: its own, or one without a tenant. */
const ownRow = (n: number): string => ` AND (tenant_uuid IS NULL OR tenant_uuid = $${n})`;

/** One collection of a {@link PostgresReadmodelStoreBackend}. */
export class PostgresReadmodelCollection<T> implements ReadmodelCollection<T> {
  /**
   * `collection = '<name>'` with the name as a literal (list and count): the
   * indexes of a collection are partial (`WHERE collection = '<name>'`), and
   * the planner proves a partial index usable from constants only.
   */
  private readonly collectionSql: string;
  /** The tenant this collection's writes are held to (see ownerTenantOf). */
  private readonly owner: string | undefined;

  constructor(
    private readonly backend: PostgresCollectionHost,
    private readonly name: string,
    private readonly scope: CollectionScope,
  ) {
    this.collectionSql = `collection = ${pgStringLiteral(name)}`;
    this.owner = ownerTenantOf(scope);
  }

  /** ` AND <own row>` for a writer held to a tenant (its tenant pushed onto `values`); "" for one that may touch any row. */
  private ownSql(values: unknown[]): string {
    return this.owner === undefined ? "" : ownRow(values.push(this.owner));
  }

  /** ` AND tenant_uuid = $n` for a scope's read tenant (its value pushed onto `values`); "" without one. */
  private tenantSql(values: unknown[]): string {
    return this.scope.readTenantUuid === undefined ? "" : ` AND tenant_uuid = $${values.push(this.scope.readTenantUuid)}`;
  }

  async get(key: string): Promise<T | undefined> {
    assertDocumentKey(key);
    const values: unknown[] = [this.name, key];
    const res = await this.backend.exec<{ doc: T }>(
      `SELECT doc FROM ${this.backend.docs} WHERE collection = $1 AND key = $2${this.tenantSql(values)}`,
      values,
      false,
      "get",
    );
    return res.rows[0]?.doc;
  }

  async getMany(keys: readonly string[]): Promise<Map<string, T>> {
    assertDocumentKeys(keys);
    const out = new Map<string, T>();
    if (keys.length === 0) return out;
    const values: unknown[] = [this.name, keys];
    const res = await this.backend.exec<{ key: string; doc: T }>(
      `SELECT key, doc FROM ${this.backend.docs} WHERE collection = $1 AND key = ANY($2::text[])${this.tenantSql(values)}`,
      values,
      false,
      "getMany",
    );
    const found = new Map(res.rows.map((r) => [r.key, r.doc] as const));
    for (const k of keys) if (found.has(k)) out.set(k, found.get(k) as T);
    return out;
  }

  async put(key: string, doc: T): Promise<void> {
    const json = documentJson(key, doc);
    await this.backend
      .exec(
        `WITH registered AS (INSERT INTO ${this.backend.collectionsTable} (collection) VALUES ($1) ON CONFLICT DO NOTHING)
         INSERT INTO ${this.backend.docs} AS d (collection, key, doc, updated_at, tenant_uuid) VALUES ($1, $2, $3::jsonb, $4, $5::text)
         ${UPSERT}`,
        [this.name, key, json, nowNs(), this.scope.writeTenantUuid ?? null],
        true,
        "put",
      )
      .catch((e: unknown) => {
        throw refusal(e, this.name);
      });
  }

  async putMany(entries: readonly (readonly [string, T])[]): Promise<void> {
    // The last document of a key wins, as if put one by one (ON CONFLICT cannot touch a row twice in one statement).
    const byKey = new Map<string, string>();
    for (const [k, json] of documentEntriesJson(entries)) {
      byKey.delete(k);
      byKey.set(k, json);
    }
    if (byKey.size === 0) return;
    await this.backend
      .exec(
        `WITH registered AS (INSERT INTO ${this.backend.collectionsTable} (collection) VALUES ($1) ON CONFLICT DO NOTHING)
         INSERT INTO ${this.backend.docs} AS d (collection, key, doc, updated_at, tenant_uuid)
         SELECT $1, u.key, u.doc, $4, $5::text FROM unnest($2::text[], $3::jsonb[]) AS u(key, doc)
         ${UPSERT}`,
        [this.name, [...byKey.keys()], [...byKey.values()], nowNs(), this.scope.writeTenantUuid ?? null],
        true,
        "putMany",
      )
      .catch((e: unknown) => {
        throw refusal(e, this.name);
      });
  }

  /** Deletes `key`; a writer held to a tenant leaves another tenant's document alone (false, as for an absent one). */
  async delete(key: string): Promise<boolean> {
    assertDocumentKey(key);
    const values: unknown[] = [this.name, key];
    const res = await this.backend.exec(
      `DELETE FROM ${this.backend.docs} WHERE collection = $1 AND key = $2${this.ownSql(values)}`,
      values,
      true,
      "delete",
    );
    return (res.rowCount ?? 0) > 0;
  }

  async deleteMany(keys: readonly string[]): Promise<number> {
    assertDocumentKeys(keys, "deleteMany");
    if (keys.length === 0) return 0;
    const values: unknown[] = [this.name, [...keys]];
    const res = await this.backend.exec(
      `DELETE FROM ${this.backend.docs} WHERE collection = $1 AND key = ANY($2::text[])${this.ownSql(values)}`,
      values,
      true,
      "deleteMany",
    );
    return res.rowCount ?? 0;
  }

  async list(opts: ListOptions = {}): Promise<T[]> {
    const { offset, limit } = listWindow(opts);
    if (opts.orderBy !== undefined) assertFieldName(opts.orderBy, "orderBy");
    const values: unknown[] = [];
    const where = this.tenantSql(values) + whereSql(opts.where, values);
    const dir = opts.descending === true ? "DESC" : "ASC";
    let order = `key ${dir}`;
    if (opts.orderBy !== undefined) {
      // Typed order, as the other backends: missing/null < booleans < numbers < strings < arrays and objects; ties by key.
      order = [...fieldColumns(opts.orderBy), "key"].map((c) => `${c} ${dir}`).join(", ");
    }
    const lim = `$${values.push(limit ?? null)}`;
    const off = `$${values.push(offset)}`;
    const res = await this.backend.exec<{ doc: T }>(
      `SELECT doc FROM ${this.backend.docs} WHERE ${this.collectionSql}${where} ORDER BY ${order} LIMIT ${lim} OFFSET ${off}`,
      values,
      false,
      "list",
    );
    return res.rows.map((r) => r.doc);
  }

  async count(where?: ListOptions["where"]): Promise<number> {
    const values: unknown[] = [];
    const cond = this.tenantSql(values) + whereSql(where, values);
    const res = await this.backend.exec<{ n: string }>(
      `SELECT count(*)::text AS n FROM ${this.backend.docs} WHERE ${this.collectionSql}${cond}`,
      values,
      false,
      "count",
    );
    return Number(res.rows[0]?.n ?? 0);
  }

  /** Empties the collection; a writer held to a tenant empties only that tenant's documents. */
  async clear(): Promise<void> {
    const values: unknown[] = [this.name];
    const own = this.owner === undefined ? "" : ` AND tenant_uuid = $${values.push(this.owner)}`;
    await this.backend.exec(`DELETE FROM ${this.backend.docs} WHERE collection = $1${own}`, values, true, "clear");
  }
}
