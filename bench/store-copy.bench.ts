/**
 * `mneme store copy` SQLite -> Postgres: N events (100,000; BENCH_QUICK=1:
 * 20,000) written by the SQLite event repository, copied by copyStore into an
 * empty schema (every table; pages of 2,000 rows, each read from SQLite,
 * digested, and inserted with one INSERT ... SELECT FROM unnest(arrays) in its
 * own transaction), against the raw drivers doing the same transfer in the
 * same run: better-sqlite3 reading the events in pages of 2,000 (integers as
 * bigint, as the copy reads them) and pg inserting each page with the same
 * multi-row INSERT into a schema made by the same stores. Two rounds,
 * interleaved, summed. The copy's figure is shown twice: up to its last row
 * (its copy phase), and with its verification (reading both sides again and
 * comparing digests), which the raw transfer does not do. Postgres is
 * DATABASE_URL (default postgres://postgres@127.0.0.1:5432/test).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import pg from "pg";
import { createPostgresBackends } from "../src/postgres/postgres-backends.js";
import { createSqliteBackends } from "../src/sqlite/sqlite-backends.js";
import { copyStore } from "../src/store-copy/copy-store.js";
import type { NewEvent } from "../src/model/types.js";
import { type Bench, todoEvent } from "./harness.js";

const DATABASE_URL = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test";
const PAGE = 2_000;
const COLUMNS = [
  "position",
  "event_uuid",
  "tenant_uuid",
  "domain",
  "name",
  "aggregate_uuid",
  "version",
  "command_uuid",
  "created_at",
  "req_ctx",
  "payload",
  "event_version",
];
const TYPES = ["bigint", "text", "text", "text", "text", "text", "bigint", "text", "bigint", "jsonb", "jsonb", "bigint"];

async function writeSource(file: string, events: number): Promise<void> {
  const stores = createSqliteBackends({ filename: file, pollIntervalMs: 0 });
  await stores.eventRepository.init();
  for (let i = 0; i < events; i += 1_000) {
    const batch: NewEvent[] = [];
    for (let j = i; j < i + 1_000; j++) batch.push(todoEvent(`0190a7a2-0000-7000-8000-${String(Math.floor(j / 10)).padStart(12, "0")}`, j));
    await stores.eventRepository.append(batch);
  }
  await stores.close();
}

/** The raw transfer: read pages from SQLite, insert each with one multi-row INSERT in its own transaction (autocommit). */
async function rawCopy(file: string, pool: pg.Pool, schema: string): Promise<void> {
  const db = new Database(file, { readonly: true });
  const stmt = db
    .prepare(`SELECT ${COLUMNS.join(", ")} FROM mneme_events ORDER BY position`)
    .raw(true)
    .safeIntegers(true);
  const insert = `INSERT INTO "${schema}".events (${COLUMNS.join(", ")}) SELECT * FROM unnest(${TYPES.map((t, i) => `$${i + 1}::${t}[]`).join(", ")})`;
  const flush = async (page: unknown[][]): Promise<void> => {
    await pool.query(
      insert,
      COLUMNS.map((_, i) => page.map((r) => (typeof r[i] === "bigint" ? String(r[i]) : r[i]))),
    );
  };
  let page: unknown[][] = [];
  db.exec("BEGIN");
  for (const row of stmt.iterate() as Iterable<unknown[]>) {
    page.push(row);
    if (page.length === PAGE) {
      await flush(page);
      page = [];
    }
  }
  if (page.length > 0) await flush(page);
  db.exec("COMMIT");
  db.close();
}

export default async function storeCopyBench(b: Bench): Promise<void> {
  const events = b.quick ? 20_000 : 100_000;
  const pool = new pg.Pool({ connectionString: DATABASE_URL, max: 4 });
  try {
    await pool.query("SELECT 1");
  } catch (e) {
    console.log(`  store-copy: skipped, no database (${String(e)})`);
    await pool.end();
    return;
  }
  const dir = mkdtempSync(join(tmpdir(), "mneme-bench-store-copy-"));
  const file = join(dir, "source.db");
  const schemas: string[] = [];
  try {
    await writeSource(file, events);
    let raw = 0;
    let copyPhase = 0;
    let withVerify = 0;
    for (let round = 0; round < 2; round++) {
      const rawSchema = `bench_copy_raw_${round}`;
      const copySchema = `bench_copy_${round}`;
      schemas.push(rawSchema, copySchema);
      for (const s of [rawSchema, copySchema]) await pool.query(`DROP SCHEMA IF EXISTS "${s}" CASCADE`);
      const stores = createPostgresBackends({ pool, schema: rawSchema, pollIntervalMs: 0 });
      await stores.eventRepository.init();
      await stores.close();
      let t0 = performance.now();
      await rawCopy(file, pool, rawSchema);
      raw += (performance.now() - t0) / 1000;
      t0 = performance.now();
      let verifyStarted = 0;
      const report = await copyStore({
        from: file,
        to: `${DATABASE_URL}?schema=${copySchema}`,
        pageSize: PAGE,
        onProgress: (p) => {
          if (p.phase === "verify" && verifyStarted === 0) verifyStarted = performance.now();
        },
      });
      if (!report.verified) throw new Error("store copy bench: the copy did not verify");
      copyPhase += (verifyStarted - t0) / 1000;
      withVerify += (performance.now() - t0) / 1000;
    }
    const rawRow = b.record("store copy", "raw: SQLite pages -> pg multi-row INSERT", events * 2, raw, "events/s");
    const copyRow = b.record("store copy", "copyStore SQLite -> Postgres (copy phase)", events * 2, copyPhase, "events/s");
    const fullRow = b.record("store copy", "copyStore SQLite -> Postgres (with verify)", events * 2, withVerify, "events/s");
    b.compare(copyRow, rawRow);
    b.compare(fullRow, rawRow);
  } finally {
    for (const s of schemas) await pool.query(`DROP SCHEMA IF EXISTS "${s}" CASCADE`).catch(() => undefined);
    await pool.end();
    rmSync(dir, { recursive: true, force: true });
  }
}
