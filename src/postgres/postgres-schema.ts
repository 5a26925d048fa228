import { createHash } from "node:crypto";
import { isMnemeError, MnemeError } from "../model/errors.js";
import {
  admitsOldWriters,
  checkStoreFormat,
  type LowestWriterChange,
  type StoreFormatRecord,
  storeFormatRecord,
  upgradedStoreFormat,
} from "../store/store-format.js";
import { mapPgError } from "./postgres-errors.js";
import { FORMAT_RECORD_TABLE, formatRecordDdl } from "./postgres-old-starts.js";
import { type CheckedOutClient, checkout, type PgPool, type PgStatementHook, withClient } from "./postgres-pool.js";

/** The schema the Postgres backends use when none is given. */
export const DEFAULT_POSTGRES_SCHEMA = "mneme";

const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]{0,62}$/;

/**
 * Checks a schema name (letters, digits, _; at most 63 bytes, Postgres' limit)
 * and returns it; anything else is INVALID_REQUEST, since the name is spliced
 * into DDL (identifiers cannot be parameters).
 */
export function validateSchemaName(schema: unknown): string {
  if (schema === undefined) return DEFAULT_POSTGRES_SCHEMA;
  if (typeof schema !== "string" || !IDENTIFIER.test(schema)) {
    throw new MnemeError(
      "INVALID_REQUEST",
      `postgres: schema must be an identifier (letters, digits, _; at most 63), got ${JSON.stringify(schema)}`,
    );
  }
  return schema;
}

/** A validated identifier, double-quoted (so its case is kept). */
export function quoteIdent(name: string): string {
  if (!IDENTIFIER.test(name)) throw new MnemeError("INVALID_REQUEST", `postgres: not an identifier: ${JSON.stringify(name)}`);
  return `"${name}"`;
}

/**
 * A 64-bit advisory-lock key (as a decimal string, bound as bigint) derived
 * from its parts, so locks of different schemas and purposes do not collide.
 */
export function advisoryKey(...parts: string[]): string {
  const digest = createHash("sha256").update(parts.join("\u0000")).digest();
  return digest.readBigInt64BE(0).toString();
}

/**
 * Runs DDL in one transaction under a per-schema advisory lock: init() of
 * several stores or app instances may run at the same time, and concurrent
 * `CREATE ... IF NOT EXISTS` on the same name can otherwise fail on the catalog's unique indexes.
 *
 * The schema's store format is checked and raised in the same transaction,
 * under the same lock: a schema whose format record admits no writer of this
 * release's format is refused (STORE_TOO_NEW) before any DDL runs, and an older
 * schema (or one without a record: the first release kept none) is upgraded by
 * the statements and gets this release's record when they commit. Instances
 * starting at once upgrade it once; the others see the record and pass.
 * Returns the schema's format record as it stands after the commit.
 *
 * `statements` may depend on whether the schema admits the writers of older
 * releases once the transaction commits (compatibility mode of a rolling
 * deploy, see postgres-old-writers.ts); `change` enters or finishes that mode.
 */
export async function runSchemaDdl(
  pool: PgPool,
  schema: string,
  statements: SchemaStatements,
  onStatement?: PgStatementHook,
  change?: LowestWriterChange,
): Promise<StoreFormatRecord> {
  const client = await checkout(pool, "ddl", onStatement, `postgres: creating the tables of schema ${schema}`);
  let broken = false;
  try {
    await client.query("BEGIN");
    await client.query("SELECT pg_advisory_xact_lock($1::bigint)", [advisoryKey("mneme:init", schema)]);
    const stored = await readStoreFormat(client, schema);
    checkStoreFormat(stored, `postgres schema ${schema}`);
    const record = upgradedStoreFormat(stored, Date.now(), change);
    const after = record ?? (stored as StoreFormatRecord);
    const list = typeof statements === "function" ? statements(admitsOldWriters(after)) : statements;
    for (const sql of list) await client.query(sql);
    if (record !== undefined) await writeStoreFormat(client, schema, record);
    await client.query("COMMIT");
    return after;
  } catch (e) {
    try {
      await client.query("ROLLBACK");
    } catch {
      broken = true;
    }
    if (isMnemeError(e)) throw e;
    throw mapPgError(e, `postgres: creating the tables of schema ${schema}`);
  } finally {
    client.release(broken);
  }
}

/** A store's DDL: fixed, or depending on whether the schema admits writers of older releases (compatibility mode). */
export type SchemaStatements = readonly string[] | ((admitsOldWriters: boolean) => readonly string[]);

/** The schema's format record as stored now (undefined when it has none), read without DDL. */
export async function currentStoreFormat(
  pool: PgPool,
  schema: string,
  onStatement?: PgStatementHook,
): Promise<StoreFormatRecord | undefined> {
  const what = `postgres: reading the store format of schema ${schema}`;
  try {
    return await withClient(pool, "read", onStatement, what, (client) => readStoreFormat(client, schema));
  } catch (e) {
    if (isMnemeError(e)) throw e;
    throw mapPgError(e, what);
  }
}

/** The table of a schema's store format record (one row). */
function formatTable(schema: string): string {
  return `${quoteIdent(schema)}.${FORMAT_RECORD_TABLE}`;
}

/**
 * The schema's format record; undefined when it has none (a new schema, or one of the first release). Read
 * from its table: the view `mneme_store_format` is 0.2.0's way in (see postgres-old-starts.ts), or, before this
 * release's DDL ran on the schema, the table of that name 0.2.0 made.
 */
async function readStoreFormat(client: CheckedOutClient, schema: string): Promise<StoreFormatRecord | undefined> {
  const tables = await client.query<{ own: string | null; earlier: string | null }>(
    "SELECT to_regclass($1) AS own, to_regclass($2) AS earlier",
    [formatTable(schema), `${quoteIdent(schema)}.mneme_store_format`],
  );
  const table =
    tables.rows[0]?.own != null
      ? formatTable(schema)
      : tables.rows[0]?.earlier != null
        ? `${quoteIdent(schema)}.mneme_store_format`
        : undefined;
  if (table === undefined) return undefined;
  const res = await client.query<{ format: number; lowest_writer_format: number; upgraded_by: string; upgraded_at: string }>(
    `SELECT format, lowest_writer_format, upgraded_by, upgraded_at::text AS upgraded_at FROM ${table} WHERE id = 1`,
  );
  const r = res.rows[0];
  return r === undefined ? undefined : storeFormatRecord(r.format, r.lowest_writer_format, r.upgraded_by, r.upgraded_at);
}

async function writeStoreFormat(client: CheckedOutClient, schema: string, record: StoreFormatRecord): Promise<void> {
  for (const sql of formatRecordDdl(quoteIdent(schema), schema)) await client.query(sql);
  await client.query(
    `INSERT INTO ${formatTable(schema)} (id, format, lowest_writer_format, upgraded_by, upgraded_at) VALUES (1, $1, $2, $3, $4)
     ON CONFLICT (id) DO UPDATE SET format = EXCLUDED.format, lowest_writer_format = EXCLUDED.lowest_writer_format,
       upgraded_by = EXCLUDED.upgraded_by, upgraded_at = EXCLUDED.upgraded_at`,
    [record.format, record.lowestWriterFormat, record.upgradedBy, record.upgradedAt],
  );
}
