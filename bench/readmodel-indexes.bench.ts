/**
 * Indexed collections: the page query of an order list,
 * `list({ where: { status: "open" }, orderBy: "placedAt", descending: true, limit: 20 })`,
 * on a collection declared with `indexes: [["status", "placedAt"]]`, next to
 * the same query on a hand-made table with the same index (columns status,
 * placed_at), in the same run, on SQLite and Postgres: p50 and p99 latency
 * and the throughput ratio (interleaved rounds). And what maintaining the
 * index costs on insert: putMany of the same documents into an indexed and a
 * plain collection. And a tenant collection (its indexes made with and
 * without the tenant lead) read by trusted code across every tenant next to
 * one tenant's read of it and the raw table's query, in the same rounds:
 * the unscoped read should be at least as fast as the scoped one.
 *
 * Size: 200,000 documents (BENCH_QUICK: 20,000); BENCH_INDEX_DOCS=1000000 for
 * the size the issue asks about (seeding takes minutes then).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import pg from "pg";
import type { ReadmodelCollection, ReadmodelStoreBackend } from "mneme/store";
import { PostgresReadmodelStoreBackend } from "mneme/postgres";
import { SqliteReadmodelStoreBackend } from "mneme/sqlite";
import type { Bench } from "./harness.js";

interface Order {
  id: string;
  status: string;
  placedAt: number;
  customer: string;
  total: number;
}

const STATUSES = ["open", "paid", "shipped", "delivered", "cancelled", "paid", "shipped", "delivered", "delivered", "delivered"];

/** Order `i`: a tenth open, placed at a scattered time. */
function order(i: number, n: number): Order {
  return {
    id: `order-${String(i).padStart(8, "0")}`,
    status: STATUSES[i % STATUSES.length]!,
    placedAt: 1_700_000_000_000 + ((i * 7919) % n) * 1000,
    customer: `customer-${i % 5000}`,
    total: (i % 997) + 0.5,
  };
}

const QUERY = { where: { status: "open" }, orderBy: "placedAt", descending: true, limit: 20 } as const;
const CHUNK = 5000;

/** Puts orders from..to in chunks (each putMany is one write transaction). */
async function seedCollection(col: ReadmodelCollection<Order>, from: number, to: number, n: number): Promise<void> {
  for (let i = from; i < to; i += CHUNK) {
    const entries: [string, Order][] = [];
    for (let j = i; j < Math.min(to, i + CHUNK); j++) {
      const o = order(j, n);
      entries.push([o.id, o]);
    }
    await col.putMany(entries);
  }
}

function pct(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((s.length * p) / 100))]!;
}

/** Interleaved rounds of mneme's query and the raw one; records p50/p99 of each and the throughput ratio. */
async function compareQueries(
  b: Bench,
  label: string,
  rounds: number,
  mneme: () => Promise<unknown[]>,
  raw: () => Promise<unknown[]> | unknown[],
): Promise<void> {
  const m: number[] = [];
  const r: number[] = [];
  for (let i = 0; i < 5; i++) {
    await mneme();
    await raw();
  }
  for (let i = 0; i < rounds; i++) {
    const first = i % 2 === 0;
    for (const side of first ? ["m", "r"] : ["r", "m"]) {
      const t0 = performance.now();
      const rows = side === "m" ? await mneme() : await raw();
      const ms = performance.now() - t0;
      if (rows.length !== 20) throw new Error(`${label}: ${side} returned ${rows.length} rows`);
      (side === "m" ? m : r).push(ms);
    }
  }
  const sum = (xs: number[]) => xs.reduce((a, x) => a + x, 0) / 1000;
  b.value("rm-indexes", `mneme p50: ${label}`, pct(m, 50), "ms", `p99 ${pct(m, 99).toFixed(2)} ms`);
  b.value("rm-indexes", `raw table p50: ${label}`, pct(r, 50), "ms", `p99 ${pct(r, 99).toFixed(2)} ms`);
  const mr = b.record("rm-indexes", `mneme: ${label}`, rounds, sum(m), "queries/s");
  const rr = b.record("rm-indexes", `raw table, same index: ${label}`, rounds, sum(r), "queries/s");
  b.compare(mr, rr);
}

/**
 * putMany of `count` orders into an indexed, a plain and an indexed tenant
 * collection (its index made with and without the tenant lead) of
 * `backend`, in alternating chunks.
 */
async function insertCost(b: Bench, backend: ReadmodelStoreBackend, label: string, count: number): Promise<void> {
  await backend.ensureIndexes!("cost:indexed", [["status", "placedAt"]]);
  await backend.ensureIndexes!("cost:tenant", [["status", "placedAt"]], { tenantFirst: true });
  const cols = [
    backend.collection<Order>("cost:indexed"),
    backend.collection<Order>("cost:plain"),
    backend.collection<Order>("cost:tenant", { writeTenantUuid: "tenant-1" }),
  ];
  const took = [0, 0, 0];
  for (let i = 0; i < count; i += CHUNK) {
    for (let c = 0; c < cols.length; c++) {
      const a = performance.now();
      await seedCollection(cols[c]!, i, Math.min(count, i + CHUNK), count);
      took[c]! += performance.now() - a;
    }
  }
  const ri = b.record("rm-indexes", `putMany, indexed [status, placedAt] (${label})`, count, took[0]! / 1000, "docs/s");
  const rp = b.record("rm-indexes", `putMany, no index (${label})`, count, took[1]! / 1000, "docs/s");
  const rt = b.record(
    "rm-indexes",
    `putMany, tenant collection indexed [status, placedAt], two indexes (${label})`,
    count,
    took[2]! / 1000,
    "docs/s",
  );
  b.compare(ri, rp);
  b.compare(rt, rp);
}

/** `n` orders of a tenant collection over `tenants` tenants (runs of 10 orders, every status, per tenant in turn). */
async function seedTenants(backend: ReadmodelStoreBackend, name: string, n: number, tenants: number): Promise<void> {
  for (let i = 0; i < n; i += CHUNK) {
    const byTenant = new Map<string, [string, Order][]>();
    for (let j = i; j < Math.min(n, i + CHUNK); j++) {
      const tenant = `tenant-${Math.floor(j / 10) % tenants}`;
      const o = order(j, n);
      const list = byTenant.get(tenant) ?? [];
      list.push([o.id, o]);
      byTenant.set(tenant, list);
    }
    for (const [tenant, entries] of byTenant) await backend.collection<Order>(name, { writeTenantUuid: tenant }).putMany(entries);
  }
}

/**
 * The page query on a tenant collection of `n` orders over 20 tenants:
 * trusted code's read of every tenant, one tenant's read and the raw
 * table's read (of every row, like the unscoped one), interleaved.
 */
async function tenantReads(
  b: Bench,
  backend: ReadmodelStoreBackend,
  label: string,
  n: number,
  rounds: number,
  raw: () => Promise<unknown[]> | unknown[],
  analyze: () => Promise<void>,
): Promise<void> {
  const name = "Orders:tenanted";
  await backend.ensureIndexes!(name, [["status", "placedAt"]], { tenantFirst: true });
  await seedTenants(backend, name, n, 20);
  await analyze();
  const every = backend.collection<Order>(name);
  const one = backend.collection<Order>(name, { readTenantUuid: "tenant-7" });
  const sides: [string, () => Promise<unknown[]> | unknown[]][] = [
    ["unscoped", () => every.list(QUERY)],
    ["scoped", () => one.list(QUERY)],
    ["raw", raw],
  ];
  const times = new Map<string, number[]>(sides.map(([k]) => [k, []]));
  for (let i = 0; i < 5; i++) for (const [, run] of sides) await run();
  for (let i = 0; i < rounds; i++) {
    for (let j = 0; j < sides.length; j++) {
      const [k, run] = sides[(i + j) % sides.length]!;
      const t0 = performance.now();
      const rows = await run();
      const ms = performance.now() - t0;
      if (rows.length !== 20) throw new Error(`${label}: ${k} returned ${rows.length} rows`);
      times.get(k)!.push(ms);
    }
  }
  const sum = (xs: number[]) => xs.reduce((a, x) => a + x, 0) / 1000;
  for (const [k, xs] of times)
    b.value(
      "rm-indexes",
      `${k} p50: tenant collection, newest 20 open of ${n} (${label})`,
      pct(xs, 50),
      "ms",
      `p99 ${pct(xs, 99).toFixed(2)} ms`,
    );
  const u = b.record(
    "rm-indexes",
    `all tenants (unscoped): newest 20 open of ${n} over 20 tenants (${label})`,
    rounds,
    sum(times.get("unscoped")!),
    "queries/s",
  );
  const sc = b.record("rm-indexes", `one tenant (scoped): the same (${label})`, rounds, sum(times.get("scoped")!), "queries/s");
  const r = b.record("rm-indexes", `raw table, same query: every row (${label})`, rounds, sum(times.get("raw")!), "queries/s");
  b.compare(u, sc);
  b.compare(u, r);
}

async function sqlite(b: Bench, n: number, rounds: number): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "mneme-bench-indexes-"));
  try {
    const backend = new SqliteReadmodelStoreBackend({ filename: join(dir, "mneme.db") });
    await backend.init();
    await backend.ensureIndexes("Orders:orders", [["status", "placedAt"]]);
    const col = backend.collection<Order>("Orders:orders");
    const seeded = await b.measure("rm-indexes", `seed ${n} orders, indexed (SQLite)`, n, () => seedCollection(col, 0, n, n), "docs/s");

    const raw = new Database(join(dir, "raw.db"));
    raw.pragma("journal_mode = WAL");
    raw.pragma("synchronous = NORMAL");
    raw.exec(`CREATE TABLE orders (key TEXT PRIMARY KEY, status TEXT NOT NULL, placed_at INTEGER NOT NULL, doc TEXT NOT NULL);
              CREATE INDEX orders_status_placed ON orders (status, placed_at, key);`);
    const ins = raw.prepare("INSERT INTO orders (key, status, placed_at, doc) VALUES (?, ?, ?, ?)");
    const rawSeed = await b.measure(
      "rm-indexes",
      `seed ${n} rows, raw table + index (SQLite)`,
      n,
      () => {
        for (let i = 0; i < n; i += CHUNK)
          raw.transaction(() => {
            for (let j = i; j < Math.min(n, i + CHUNK); j++) {
              const o = order(j, n);
              ins.run(o.id, o.status, o.placedAt, JSON.stringify(o));
            }
          })();
      },
      "docs/s",
    );
    b.compare(seeded, rawSeed);
    const q = raw.prepare("SELECT doc FROM orders WHERE status = ? ORDER BY placed_at DESC, key DESC LIMIT 20").raw(true);
    await compareQueries(
      b,
      `open orders, newest 20 of ${n} (SQLite)`,
      rounds,
      () => col.list(QUERY),
      () => (q.all("open") as [string][]).map((row) => JSON.parse(row[0]) as Order),
    );
    await tenantReads(
      b,
      backend,
      "SQLite",
      n,
      rounds,
      () => (q.all("open") as [string][]).map((row) => JSON.parse(row[0]) as Order),
      async () => {},
    );
    await insertCost(b, backend, "SQLite", Math.min(n, 50_000));
    raw.close();
    await backend.close();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

async function postgres(b: Bench, n: number, rounds: number): Promise<void> {
  const url = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test";
  const pool = new pg.Pool({ connectionString: url, max: 4 });
  const schema = `mneme_bench_idx_${process.pid}`;
  try {
    await pool.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
    const backend = new PostgresReadmodelStoreBackend({ pool, schema });
    await backend.init();
    await backend.ensureIndexes("Orders:orders", [["status", "placedAt"]]);
    const col = backend.collection<Order>("Orders:orders");
    const seeded = await b.measure("rm-indexes", `seed ${n} orders, indexed (Postgres)`, n, () => seedCollection(col, 0, n, n), "docs/s");

    await pool.query(
      `CREATE TABLE ${schema}.orders (key text COLLATE "C" PRIMARY KEY, status text NOT NULL, placed_at bigint NOT NULL, doc jsonb NOT NULL)`,
    );
    await pool.query(`CREATE INDEX orders_status_placed ON ${schema}.orders (status, placed_at, key)`);
    const rawSeed = await b.measure(
      "rm-indexes",
      `seed ${n} rows, raw table + index (Postgres)`,
      n,
      async () => {
        for (let i = 0; i < n; i += CHUNK) {
          const rows: Order[] = [];
          for (let j = i; j < Math.min(n, i + CHUNK); j++) rows.push(order(j, n));
          await pool.query(
            `INSERT INTO ${schema}.orders (key, status, placed_at, doc)
             SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::jsonb[])`,
            [rows.map((o) => o.id), rows.map((o) => o.status), rows.map((o) => o.placedAt), rows.map((o) => JSON.stringify(o))],
          );
        }
      },
      "docs/s",
    );
    b.compare(seeded, rawSeed);
    await pool.query(`ANALYZE ${schema}.readmodel_documents`);
    await pool.query(`ANALYZE ${schema}.orders`);
    await compareQueries(
      b,
      `open orders, newest 20 of ${n} (Postgres)`,
      rounds,
      () => col.list(QUERY),
      async () =>
        (
          await pool.query<{ doc: Order }>(
            `SELECT doc FROM ${schema}.orders WHERE status = $1 ORDER BY placed_at DESC, key DESC LIMIT 20`,
            ["open"],
          )
        ).rows.map((r) => r.doc),
    );
    await tenantReads(
      b,
      backend,
      "Postgres",
      n,
      rounds,
      async () =>
        (
          await pool.query<{ doc: Order }>(
            `SELECT doc FROM ${schema}.orders WHERE status = $1 ORDER BY placed_at DESC, key DESC LIMIT 20`,
            ["open"],
          )
        ).rows.map((r) => r.doc),
      async () => {
        await pool.query(`ANALYZE ${schema}.readmodel_documents`);
      },
    );
    await insertCost(b, backend, "Postgres", Math.min(n, 50_000));
    await backend.close();
  } finally {
    await pool.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`).catch(() => undefined);
    await pool.end();
  }
}

export default async function (b: Bench): Promise<void> {
  const n = Number(process.env.BENCH_INDEX_DOCS ?? (b.quick ? 20_000 : 200_000));
  if (!Number.isInteger(n) || n < 1000) throw new Error("BENCH_INDEX_DOCS must be an integer >= 1000");
  const rounds = b.quick ? 50 : 200;
  await sqlite(b, n, rounds);
  await postgres(b, n, rounds);
}
