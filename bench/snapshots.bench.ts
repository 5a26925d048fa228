/**
 * The SQLite and Postgres snapshot stores against the raw driver running the
 * same SQL by hand (same table, same upsert, the state JSON-stringified and
 * parsed), in the same run: save of a new version (the upsert that replaces
 * the row) and latest (one keyed read). mneme's side does what a load does:
 * the save carries the snapshot's digest, computed then, and latest's result
 * is checked against its digest; the raw side has no digest, so the ratio
 * includes its cost. The state is a folded aggregate of a realistic size
 * (~1 KB of JSON). Postgres runs in its own schema, dropped at the end.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import pg from "pg";
import { newUuid, nowNs } from "../src/model/clock.js";
import { PostgresSnapshotStore } from "../src/postgres/index.js";
import { SqliteSnapshotStore } from "../src/sqlite/index.js";
import { snapshotDigest, snapshotDigestMatches, type SnapshotRecord } from "../src/store/snapshot-store.js";
import { type Bench, duel } from "./harness.js";

const DATABASE_URL = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test";

/** The snapshot of Shop.Order `u` at `version`, with its digest (as a load saves it). */
function snapshotOf(u: string, version: number) {
  const parts = {
    tenantUuid: "",
    domain: "Shop",
    aggregate: "Order",
    aggregateUuid: u,
    version,
    snapshotVersion: 1,
    state: stateAt(version),
  };
  return { ...parts, digest: snapshotDigest(parts) };
}

/** What a load does with what latest returns: folds on it only when its digest matches. */
function checked(s: SnapshotRecord | undefined): void {
  if (s === undefined || !snapshotDigestMatches(s)) throw new Error("bench: a snapshot without a matching digest");
}

/** A folded aggregate's state: a few fields and a list of 20 items (~1 KB as JSON). */
function stateAt(version: number): Record<string, unknown> {
  return {
    exists: true,
    title: `order ${version}`,
    total: version * 12.5,
    items: Array.from({ length: 20 }, (_, i) => ({ sku: `SKU-${i}`, qty: (i % 3) + 1, price: 9.99 + i })),
    tags: ["bench", "snapshot"],
  };
}

const SQLITE_UPSERT = `INSERT INTO mneme_snapshots (domain, aggregate, aggregate_uuid, snapshot_version, version, tenant_uuid, state, created_at)
  VALUES (?, ?, ?, ?, ?, ?, ?, ?)
  ON CONFLICT (domain, aggregate, aggregate_uuid, snapshot_version) DO UPDATE SET
    version = excluded.version, tenant_uuid = excluded.tenant_uuid, state = excluded.state, created_at = excluded.created_at
  WHERE excluded.version > mneme_snapshots.version`;
const SQLITE_READ = `SELECT rowid, tenant_uuid, version, state, created_at FROM mneme_snapshots
  WHERE domain = ? AND aggregate = ? AND aggregate_uuid = ? AND snapshot_version = ?`;

async function sqlite(b: Bench, aggregates: number, rounds: number): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "mneme-bench-snap-"));
  try {
    const store = new SqliteSnapshotStore({ filename: join(dir, "mneme.db") });
    await store.init();
    const raw = new Database(join(dir, "raw.db"));
    raw.pragma("journal_mode = WAL");
    raw.pragma("synchronous = NORMAL");
    raw.exec(`CREATE TABLE mneme_snapshots (domain TEXT NOT NULL, aggregate TEXT NOT NULL, aggregate_uuid TEXT NOT NULL,
      snapshot_version INTEGER NOT NULL, version INTEGER NOT NULL, tenant_uuid TEXT NOT NULL, state TEXT NOT NULL,
      created_at INTEGER NOT NULL, PRIMARY KEY (domain, aggregate, aggregate_uuid, snapshot_version))`);
    const upsert = raw.prepare(SQLITE_UPSERT);
    const read = raw.prepare(SQLITE_READ).raw(true);
    const uuids = Array.from({ length: aggregates }, () => newUuid());

    await duel(
      b,
      "sqlite",
      "snapshot save (a new version)",
      aggregates,
      rounds,
      async (r) => {
        for (const u of uuids) await store.save(snapshotOf(u, r + 1));
      },
      [
        {
          name: "raw (same SQL)",
          run: (r) => {
            for (const u of uuids) upsert.run("Shop", "Order", u, 1, r + 1, "", JSON.stringify(stateAt(r + 1)), nowNs());
          },
        },
      ],
      "saves/s",
    );
    await duel(
      b,
      "sqlite",
      "snapshot latest",
      aggregates,
      rounds,
      async () => {
        for (const u of uuids) checked(await store.latest("Shop", "Order", u, 1));
      },
      [
        {
          name: "raw (same SQL)",
          run: () => {
            for (const u of uuids) {
              const row = read.get("Shop", "Order", u, 1) as [number, string, number, string, number];
              JSON.parse(row[3]);
            }
          },
        },
      ],
      "reads/s",
    );
    await store.close();
    raw.close();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

async function postgres(b: Bench, aggregates: number, rounds: number): Promise<void> {
  const pool = new pg.Pool({ connectionString: DATABASE_URL, max: 4 });
  const schema = `mneme_bench_snap_${newUuid().replace(/-/g, "").slice(-12)}`;
  const rawSchema = `${schema}_raw`;
  try {
    const store = new PostgresSnapshotStore({ pool, schema });
    await store.init();
    await pool.query(`CREATE SCHEMA "${rawSchema}"`);
    await pool.query(`CREATE TABLE "${rawSchema}".snapshots (domain text NOT NULL, aggregate text NOT NULL, aggregate_uuid text NOT NULL,
      snapshot_version bigint NOT NULL, version bigint NOT NULL, tenant_uuid text NOT NULL, state jsonb NOT NULL, created_at bigint NOT NULL,
      PRIMARY KEY (domain, aggregate, aggregate_uuid, snapshot_version))`);
    const upsert = `INSERT INTO "${rawSchema}".snapshots AS t (domain, aggregate, aggregate_uuid, snapshot_version, version, tenant_uuid, state, created_at)
      VALUES ($1, $2, $3, $4, $5, $6, $7::jsonb, $8)
      ON CONFLICT (domain, aggregate, aggregate_uuid, snapshot_version) DO UPDATE SET
        version = excluded.version, tenant_uuid = excluded.tenant_uuid, state = excluded.state, created_at = excluded.created_at
      WHERE excluded.version > t.version`;
    const read = `SELECT tenant_uuid, version::text, state::text, created_at::text FROM "${rawSchema}".snapshots
      WHERE domain = $1 AND aggregate = $2 AND aggregate_uuid = $3 AND snapshot_version = $4`;
    const uuids = Array.from({ length: aggregates }, () => newUuid());

    await duel(
      b,
      "postgres",
      "snapshot save (a new version), 4 at a time",
      aggregates,
      rounds,
      async (r) => {
        await inParallel(uuids, 4, (u) => store.save(snapshotOf(u, r + 1)));
      },
      [
        {
          name: "raw (same SQL)",
          run: async (r) => {
            await inParallel(uuids, 4, (u) =>
              pool.query(upsert, ["Shop", "Order", u, 1, r + 1, "", JSON.stringify(stateAt(r + 1)), nowNs()]),
            );
          },
        },
      ],
      "saves/s",
    );
    await duel(
      b,
      "postgres",
      "snapshot latest, 4 at a time",
      aggregates,
      rounds,
      async () => {
        await inParallel(uuids, 4, async (u) => checked(await store.latest("Shop", "Order", u, 1)));
      },
      [
        {
          name: "raw (same SQL)",
          run: async () => {
            await inParallel(uuids, 4, async (u) => {
              const res = await pool.query<{ state: string }>(read, ["Shop", "Order", u, 1]);
              JSON.parse(res.rows[0]?.state ?? "null");
            });
          },
        },
      ],
      "reads/s",
    );
    await store.close();
  } finally {
    await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await pool.query(`DROP SCHEMA IF EXISTS "${rawSchema}" CASCADE`);
    await pool.end();
  }
}

/** Runs `fn` over `items` with at most `width` calls in flight. */
async function inParallel<T>(items: readonly T[], width: number, fn: (item: T) => Promise<unknown>): Promise<void> {
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < items.length) await fn(items[next++] as T);
  };
  await Promise.all(Array.from({ length: width }, worker));
}

export default async function (b: Bench): Promise<void> {
  await sqlite(b, b.quick ? 200 : 2000, b.quick ? 3 : 10);
  await postgres(b, b.quick ? 100 : 1000, b.quick ? 3 : 6);
}
