/**
 * The write line of a tenant's readmodel handler: a batch transaction that
 * replaces documents of its own tenant (put and putMany, the path where the
 * store checks that a key holds no other tenant's document), next to the same
 * writes by trusted code without a tenant (no check), interleaved in one run.
 * Memory, a SQLite file, and Postgres (DATABASE_URL, default
 * postgres://postgres@127.0.0.1:5432/test, in a schema of its own dropped at
 * the end).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import type { ReadmodelStoreBackend } from "mneme/store";
import { MemoryReadmodelStoreBackend } from "mneme/memory";
import { SqliteReadmodelStoreBackend } from "mneme/sqlite";
import { PostgresReadmodelStoreBackend } from "mneme/postgres";
import { type Bench, duel } from "./harness.js";

const DATABASE_URL = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test";
const KEYS = 1000;
/** Per round: one transaction of 50 puts and a putMany of 50. */
const PER_ROUND = 100;

async function writeLine(b: Bench, label: string, backend: ReadmodelStoreBackend, rounds: number): Promise<void> {
  await backend.init();
  const own = backend.collection<{ n: number }>("docs", { writeTenantUuid: "tenant-a" });
  const trusted = backend.collection<{ n: number }>("docs");
  await own.putMany(Array.from({ length: KEYS }, (_, i) => [`k${i}`, { n: i }] as const));
  const batch = (col: typeof own, r: number) =>
    backend.transaction(async () => {
      const base = (r * PER_ROUND) % KEYS;
      for (let i = 0; i < PER_ROUND / 2; i++) await col.put(`k${(base + i) % KEYS}`, { n: r });
      await col.putMany(Array.from({ length: PER_ROUND / 2 }, (_, i) => [`k${(base + PER_ROUND / 2 + i) % KEYS}`, { n: r }] as const));
    });
  await duel(
    b,
    "readmodel-write",
    `tenant's batch replacing its documents (${label})`,
    PER_ROUND,
    rounds,
    (r) => batch(own, r),
    [{ name: "without a tenant", run: (r) => batch(trusted, r) }],
    "writes/s",
  );
  await backend.close();
}

export default async function (b: Bench): Promise<void> {
  const rounds = b.quick ? 100 : 400;
  await writeLine(b, "memory", new MemoryReadmodelStoreBackend(), rounds * 5);
  const dir = mkdtempSync(join(tmpdir(), "mneme-bench-rmwrites-"));
  try {
    await writeLine(b, "SQLite file", new SqliteReadmodelStoreBackend({ filename: join(dir, "bench.db") }), rounds);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  const pool = new pg.Pool({ connectionString: DATABASE_URL, max: 4 });
  const schema = `bench_rmwrites_${process.pid}`;
  try {
    await writeLine(b, "Postgres", new PostgresReadmodelStoreBackend({ pool, schema }), Math.ceil(rounds / 2));
  } finally {
    await pool.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
    await pool.end();
  }
}
