/**
 * SQL-table readmodels (SqlTableReadmodel), on SQLite and Postgres, next to
 * the raw driver doing the same inserts in the same run:
 * - rebuild from zero: one row inserted per event, one transaction per page of
 *   1,000 events (the restore's page), against raw inserts of the same rows in
 *   one transaction per page of 1,000; and against raw reading the page of
 *   events and then inserting (what the rebuild does, less mneme);
 * - live apply: rounds of 100 events appended while the readmodel runs, timed
 *   from the append's commit until the rows and the checkpoint are committed, against
 *   raw inserts of the same 100 rows in one transaction per round.
 * Sizes: SQLite 200,000 rows, Postgres 20,000 (one round trip per row on both
 * sides, unnamed parameterised statements as mneme sends them); BENCH_QUICK=1 a tenth.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import pg from "pg";
import { createFacade, defineDomain, type Facade, type NewEvent, newUuid, SqlTableReadmodel } from "mneme";
import { createPostgresBackends } from "mneme/postgres";
import { createSqliteBackends } from "mneme/sqlite";
import type { Bench } from "./harness.js";

const D = defineDomain("SqlBench");
const Added = D.event<{ n: number }>("Added");

const DDL = (table: string) =>
  `CREATE TABLE ${table} (tenant_uuid TEXT NOT NULL, id TEXT NOT NULL, n BIGINT NOT NULL, PRIMARY KEY (tenant_uuid, id))`;

/** One row per event, written with one prepared INSERT through the batch's transaction. */
class Rows extends SqlTableReadmodel {
  constructor(f: Facade) {
    super(f, { tables: { rows: {} }, ddl: (t) => [DDL(t("rows"))] });
    this.domain = "SqlBench";
    this.name = "Rows";
    this.addDomainEventHandler(Added, async (_ctx, e, p) => {
      const sql = this.sql;
      const values = sql.dialect === "postgres" ? "($1, $2, $3)" : "(?, ?, ?)";
      await sql.execute(`INSERT INTO ${sql.table("rows")} (tenant_uuid, id, n) VALUES ${values}`, [e.tenantUuid, e.eventUuid, p.n]);
    });
  }
}

const TENANT = "t";

function events(from: number, count: number, now: number): NewEvent[] {
  const out: NewEvent[] = [];
  for (let i = from; i < from + count; i++)
    out.push({ domain: "SqlBench", name: "Added", aggregateUuid: `agg-${i}`, payload: { n: i }, tenantUuid: TENANT, createdAt: now + i });
  return out;
}

async function waitApplied(rm: Rows, position: number): Promise<void> {
  while (rm.lastPosition < position) await new Promise((r) => setImmediate(r));
}

/** The raw side of one database: a fresh table, and inserts of rows [from, from + count) in one transaction. */
interface Raw {
  reset(): Promise<void>;
  insertPage(from: number, count: number): Promise<void>;
  readPage(after: number): Promise<number>;
  close(): Promise<void>;
}

async function run(b: Bench, label: string, open: () => ReturnType<typeof createSqliteBackends>, raw: Raw, n: number): Promise<void> {
  const now = Date.now() * 1e6;
  const f = createFacade({ appName: "sqlbench", ...open() });
  f.registerDomain(D);
  const rm = new Rows(f);
  f.registerReadmodel(rm);
  await f.start();
  for (let i = 0; i < n; i += 10_000) await f.eventRepository.append(events(i, Math.min(10_000, n - i), now));
  await waitApplied(rm, n);

  // ---- rebuild from zero, interleaved with the raw runs (warm-up first)
  const page = 1000;
  const rawInserts = async () => {
    await raw.reset();
    for (let i = 0; i < n; i += page) await raw.insertPage(i, Math.min(page, n - i));
  };
  const rawReadInsert = async () => {
    await raw.reset();
    for (let i = 0; i < n; i += page) {
      await raw.readPage(i);
      await raw.insertPage(i, Math.min(page, n - i));
    }
  };
  await rawInserts();
  const rawRow = await b.measure("sql-tables", `${label} raw: insert ${n} rows, 1 tx per 1,000`, n, rawInserts, "rows/s");
  const rawReadRow = await b.measure("sql-tables", `${label} raw: read page + insert, 1 tx per 1,000`, n, rawReadInsert, "rows/s");
  const rebuild = await b.measure(
    "sql-tables",
    `${label} SqlTableReadmodel rebuild from zero`,
    n,
    async () => {
      const r = await rm.restoreState(undefined, { fromZero: true }).done;
      if (r.eventsReplayed !== n) throw new Error(`replayed ${r.eventsReplayed}`);
    },
    "rows/s",
  );
  b.compare(rebuild, rawRow);
  b.compare(rebuild, rawReadRow);

  // ---- live apply: rounds of 100 events
  const round = 100;
  const rounds = Math.max(10, Math.floor(n / 20 / round));
  await raw.reset();
  let rawSeconds = 0;
  let liveSeconds = 0;
  let head = n;
  for (let r = 0; r < rounds; r++) {
    const t0 = performance.now();
    await raw.insertPage(n + r * round, round);
    rawSeconds += (performance.now() - t0) / 1000;
    await f.eventRepository.append(events(n + r * round, round, now));
    const t1 = performance.now();
    head += round;
    await waitApplied(rm, head);
    liveSeconds += (performance.now() - t1) / 1000;
  }
  const rawLive = b.record("sql-tables", `${label} raw: insert 100 rows in 1 tx (x${rounds})`, rounds * round, rawSeconds, "rows/s");
  const live = b.record(
    "sql-tables",
    `${label} SqlTableReadmodel live apply (appended -> committed)`,
    rounds * round,
    liveSeconds,
    "rows/s",
  );
  b.compare(live, rawLive);
  await f.stop();
  await raw.close();
}

export default async function (b: Bench): Promise<void> {
  // ---- SQLite
  const dir = mkdtempSync(join(tmpdir(), "mneme-sqltables-"));
  const filename = join(dir, "bench.db");
  try {
    const db = new Database(filename);
    db.pragma("journal_mode = WAL");
    db.pragma("synchronous = NORMAL");
    const rawTable = "raw_rows";
    const sqliteRaw: Raw = {
      async reset() {
        db.exec(`DROP TABLE IF EXISTS ${rawTable}`);
        db.exec(DDL(rawTable));
      },
      async insertPage(from, count) {
        const ins = db.prepare(`INSERT INTO ${rawTable} (tenant_uuid, id, n) VALUES (?, ?, ?)`);
        db.exec("BEGIN IMMEDIATE");
        for (let i = from; i < from + count; i++) ins.run(TENANT, `e-${i}`, i);
        db.exec("COMMIT");
      },
      async readPage(after) {
        const rows = db
          .prepare("SELECT position, req_ctx, payload FROM mneme_events WHERE position > ? ORDER BY position LIMIT 1000")
          .all(after) as { req_ctx: string | null; payload: string }[];
        for (const r of rows) {
          if (r.req_ctx !== null) JSON.parse(r.req_ctx);
          JSON.parse(r.payload);
        }
        return rows.length;
      },
      async close() {
        db.close();
      },
    };
    await run(b, "sqlite", () => createSqliteBackends({ filename }), sqliteRaw, b.quick ? 20_000 : 200_000);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }

  // ---- Postgres
  const connectionString = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test";
  const schema = `mneme_bench_sql_${newUuid().replace(/-/g, "").slice(-12)}`;
  const pool = new pg.Pool({ connectionString, max: 2 });
  const client = await pool.connect();
  try {
    const rawTable = `"${schema}".raw_rows`;
    const pgRaw: Raw = {
      async reset() {
        await client.query(`DROP TABLE IF EXISTS ${rawTable}`);
        await client.query(DDL(rawTable));
      },
      async insertPage(from, count) {
        await client.query("BEGIN");
        for (let i = from; i < from + count; i++)
          await client.query(`INSERT INTO ${rawTable} (tenant_uuid, id, n) VALUES ($1, $2, $3)`, [TENANT, `e-${i}`, i]);
        await client.query("COMMIT");
      },
      async readPage(after) {
        const { rows } = await client.query(
          `SELECT position, event_uuid, tenant_uuid, domain, name, aggregate_uuid, version, command_uuid, created_at, req_ctx, payload FROM "${schema}".events WHERE position > $1 ORDER BY position LIMIT 1000`,
          [after],
        );
        return rows.length;
      },
      async close() {},
    };
    await client.query(`CREATE SCHEMA IF NOT EXISTS "${schema}"`);
    await run(
      b,
      "postgres",
      () => createPostgresBackends({ connectionString, schema }) as unknown as ReturnType<typeof createSqliteBackends>,
      pgRaw,
      b.quick ? 2_000 : 20_000,
    );
  } finally {
    client.release();
    await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await pool.end();
  }
}
