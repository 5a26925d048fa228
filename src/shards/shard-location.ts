/** Where a shard is, and the small reads of its schema that the listings and the mover share. */
import type pg from "pg";
import { mapPgError } from "../postgres/postgres-errors.js";
import { quoteIdent } from "../postgres/postgres-schema.js";

/** One shard: a Postgres schema, in any database or cluster. */
export interface ShardLocation {
  /** The name placements use (stable: renaming a shard orphans its tenants). */
  readonly name: string;
  readonly connectionString: string;
  readonly schema: string;
  /** The pool size of the shard's facade. Default 10. */
  readonly poolSize?: number;
}

/** The shard in words: host, database and schema, never a password. */
export function shardDescription(location: ShardLocation): string {
  try {
    const u = new URL(location.connectionString);
    return `postgres ${u.host}${u.pathname} schema ${location.schema}`;
  } catch {
    return `postgres schema ${location.schema}`;
  }
}

/** The head position of a shard and the tenants it refuses writes of. */
export async function shardHead(pool: pg.Pool, schema: string): Promise<{ head: number; frozen: string[] }> {
  try {
    return await readHead(pool, schema);
  } catch (e) {
    throw mapPgError(e, `shard ${schema}: head`);
  }
}

async function readHead(pool: pg.Pool, schema: string): Promise<{ head: number; frozen: string[] }> {
  const s = quoteIdent(schema);
  const head = await pool.query<{ h: string }>(`SELECT coalesce(max(position), 0)::text AS h FROM ${s}.events`);
  const frozen = await pool.query<{ tenant_uuid: string }>(
    `SELECT tenant_uuid FROM ${s}.shard_frozen_tenants ORDER BY tenant_uuid COLLATE "C"`,
  );
  return { head: Number(head.rows[0]?.h ?? 0), frozen: frozen.rows.map((r) => r.tenant_uuid) };
}
