import { createHash } from "node:crypto";
import { MnemeError } from "../model/errors.js";
import { mapPgError } from "./postgres-errors.js";
import { checkout, type PgPool, type PgStatementHook } from "./postgres-pool.js";

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
 */
export async function runSchemaDdl(
  pool: PgPool,
  schema: string,
  statements: readonly string[],
  onStatement?: PgStatementHook,
): Promise<void> {
  const client = await checkout(pool, "ddl", onStatement, `postgres: creating the tables of schema ${schema}`);
  let broken = false;
  try {
    await client.query("BEGIN");
    await client.query("SELECT pg_advisory_xact_lock($1::bigint)", [advisoryKey("mneme:init", schema)]);
    for (const sql of statements) await client.query(sql);
    await client.query("COMMIT");
  } catch (e) {
    try {
      await client.query("ROLLBACK");
    } catch {
      broken = true;
    }
    throw mapPgError(e, `postgres: creating the tables of schema ${schema}`);
  } finally {
    client.release(broken);
  }
}
