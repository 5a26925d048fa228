/**
 * The SQLite engine on each Node.js driver (better-sqlite3 and node:sqlite),
 * each against its raw driver doing the same statements by hand, all four
 * interleaved in one run (rotating who goes first, so background load hits
 * all alike): appends (batches of 100 in one write transaction), aggregate
 * loads (50 events, raw rows parsed into events), readmodel writes (a batch
 * transaction of 50 document upserts and the checkpoint). Prints each
 * side's throughput, mneme / raw per driver, node:sqlite / better-sqlite3 for
 * mneme and for the raw drivers, and the load average before and after.
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type BetterSqlite3 from "better-sqlite3";
import { newUuid, nowNs } from "../src/model/clock.js";
import type { Event, NewEvent, RequestContext } from "../src/model/types.js";
import { SqliteEventRepository, SqliteReadmodelStoreBackend, type SqliteDriverName } from "../src/sqlite/index.js";
import { type Bench, type BenchRow, todoBatchOf100, todoEvent } from "./harness.js";

const require = createRequire(import.meta.url);
const COLUMNS = "position, event_uuid, tenant_uuid, domain, name, aggregate_uuid, version, command_uuid, created_at, req_ctx, payload";
type Row = [number, string, string, string, string, string, number, string | null, number, string, string | null];

/** The statement calls the raw stores make, on either driver. */
interface RawStatement {
  run(...params: unknown[]): unknown;
  get(...params: unknown[]): unknown;
  /** Rows as arrays, integers as numbers (created_at near 1.8e18 included). */
  rows(...params: unknown[]): unknown[][];
}
interface RawDb {
  prepare(sql: string): RawStatement;
  exec(sql: string): void;
  close(): void;
}

/** better-sqlite3 as a careful hand-written store uses it: raw mode for rows. */
function rawBetter(filename: string): RawDb {
  const Database = require("better-sqlite3") as typeof BetterSqlite3;
  const db = new Database(filename, { timeout: 5000 });
  return {
    prepare(sql) {
      const st = db.prepare(sql);
      const raw = st.reader ? db.prepare(sql).raw(true) : undefined;
      return { run: (...p) => st.run(...p), get: (...p) => st.get(...p), rows: (...p) => raw!.all(...p) as unknown[][] };
    },
    exec: (sql) => void db.exec(sql),
    close: () => void db.close(),
  };
}

/** node:sqlite as a careful hand-written store uses it: arrays for rows, bigints for the columns past 2^53, converted. */
function rawNode(filename: string): RawDb {
  const { DatabaseSync } = require("node:sqlite") as typeof import("node:sqlite");
  const db = new DatabaseSync(filename, { timeout: 5000 });
  return {
    prepare(sql) {
      const st = db.prepare(sql);
      const raw = db.prepare(sql);
      raw.setReturnArrays(true);
      raw.setReadBigInts(true);
      return {
        run: (...p) => st.run(...(p as never[])),
        get: (...p) => st.get(...(p as never[])),
        rows: (...p) => {
          const rows = raw.all(...(p as never[])) as unknown as unknown[][];
          for (const r of rows) for (let i = 0; i < r.length; i++) if (typeof r[i] === "bigint") r[i] = Number(r[i]);
          return rows;
        },
      };
    },
    exec: (sql) => db.exec(sql),
    close: () => db.close(),
  };
}

const RAW: Record<"better-sqlite3" | "node:sqlite", (filename: string) => RawDb> = { "better-sqlite3": rawBetter, "node:sqlite": rawNode };

/** The event repository's statements by hand (same schema, pragmas and statements as sqlite.bench.ts's raw store). */
class RawEvents {
  private readonly begin;
  private readonly commit;
  private readonly maxVersion;
  private readonly insert;
  private readonly oneAggregate;

  constructor(readonly db: RawDb) {
    for (const p of ["journal_mode = WAL", "synchronous = NORMAL", "foreign_keys = ON"]) db.exec(`PRAGMA ${p}`);
    db.exec(`
      CREATE TABLE IF NOT EXISTS mneme_events (
        position INTEGER PRIMARY KEY, event_uuid TEXT NOT NULL, tenant_uuid TEXT NOT NULL,
        domain TEXT NOT NULL, name TEXT NOT NULL, aggregate_uuid TEXT NOT NULL, version INTEGER NOT NULL,
        command_uuid TEXT, created_at INTEGER NOT NULL, req_ctx TEXT NOT NULL, payload TEXT,
        UNIQUE (aggregate_uuid, version));
      CREATE UNIQUE INDEX IF NOT EXISTS mneme_events_event_uuid ON mneme_events (event_uuid);`);
    this.begin = db.prepare("BEGIN IMMEDIATE");
    this.commit = db.prepare("COMMIT");
    this.maxVersion = db.prepare("SELECT MAX(version) AS v FROM mneme_events WHERE aggregate_uuid = ?");
    this.insert = db.prepare(
      `INSERT INTO mneme_events (event_uuid, tenant_uuid, domain, name, aggregate_uuid, version, command_uuid, created_at, req_ctx, payload)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    );
    this.oneAggregate = db.prepare(`SELECT ${COLUMNS} FROM mneme_events WHERE aggregate_uuid = ? AND version >= ? ORDER BY version`);
  }

  append(events: readonly NewEvent[]): void {
    this.begin.run();
    const current = new Map<string, number>();
    for (const e of events) {
      let v = current.get(e.aggregateUuid);
      if (v === undefined) v = ((this.maxVersion.get(e.aggregateUuid) as { v: number | null }).v ?? 0) as number;
      current.set(e.aggregateUuid, ++v);
      this.insert.run(
        newUuid(),
        e.tenantUuid ?? "",
        e.domain,
        e.name,
        e.aggregateUuid,
        v,
        null,
        nowNs(),
        JSON.stringify(e.reqCtx ?? {}),
        JSON.stringify(e.payload),
      );
    }
    this.commit.run();
  }

  loadAggregate(aggregateUuid: string): Event[] {
    return (this.oneAggregate.rows(aggregateUuid, 1) as Row[]).map(toEvent);
  }
}

/** A readmodel batch by hand: the documents table's upsert per document and the checkpoint, in one write transaction. */
class RawDocs {
  private readonly begin;
  private readonly commit;
  private readonly upsert;
  private readonly checkpoint;

  constructor(db: RawDb) {
    db.exec(`
      CREATE TABLE IF NOT EXISTS docs (collection TEXT NOT NULL, key TEXT NOT NULL, doc TEXT NOT NULL, updated_at INTEGER NOT NULL,
        tenant_uuid TEXT, PRIMARY KEY (collection, key));
      CREATE TABLE IF NOT EXISTS checkpoints (handler TEXT PRIMARY KEY, position INTEGER NOT NULL);`);
    this.begin = db.prepare("BEGIN IMMEDIATE");
    this.commit = db.prepare("COMMIT");
    this.upsert = db.prepare(`INSERT INTO docs (collection, key, doc, updated_at, tenant_uuid) VALUES (?, ?, ?, ?, ?)
      ON CONFLICT (collection, key) DO UPDATE SET doc = excluded.doc, updated_at = excluded.updated_at`);
    this.checkpoint = db.prepare(
      "INSERT INTO checkpoints (handler, position) VALUES (?, ?) ON CONFLICT (handler) DO UPDATE SET position = excluded.position",
    );
  }

  batch(round: number, keys: number): void {
    this.begin.run();
    for (let i = 0; i < DOCS_PER_BATCH; i++)
      this.upsert.run("docs", `k${(round * DOCS_PER_BATCH + i) % keys}`, JSON.stringify({ n: round, i }), Date.now(), null);
    this.checkpoint.run("Bench", round + 1);
    this.commit.run();
  }
}

const DOCS_PER_BATCH = 50;

function toEvent(r: Row): Event {
  const e: Event = {
    eventUuid: r[1],
    position: r[0],
    tenantUuid: r[2],
    domain: r[3],
    name: r[4],
    aggregateUuid: r[5],
    version: r[6],
    createdAt: r[8],
    reqCtx: JSON.parse(r[9]) as RequestContext,
    payload: r[10] === null ? undefined : JSON.parse(r[10]),
  };
  if (r[7] !== null) e.commandUuid = r[7];
  return e;
}

type Driver = "better-sqlite3" | "node:sqlite";
const DRIVERS: readonly Driver[] = ["better-sqlite3", "node:sqlite"];

interface Side {
  readonly name: string;
  run(round: number): Promise<void> | void;
}

/** Every side in interleaved rounds (rotating who goes first); one row per side, then the ratios. */
async function quartet(
  b: Bench,
  what: string,
  opsPerRound: number,
  rounds: number,
  sides: Record<string, Side>,
  unit: string,
): Promise<void> {
  const list = Object.values(sides);
  const ms = list.map(() => 0);
  for (let r = 0; r < rounds; r++) {
    for (let k = 0; k < list.length; k++) {
      const i = (k + r) % list.length;
      const t0 = performance.now();
      const done = list[i]!.run(r);
      if (done !== undefined) await done;
      ms[i]! += performance.now() - t0;
    }
  }
  const rows = new Map<string, BenchRow>();
  list.forEach((s, i) => rows.set(s.name, b.record("sqlite-drivers", `${s.name}: ${what}`, opsPerRound * rounds, ms[i]! / 1000, unit)));
  const row = (n: string) => rows.get(n)!;
  for (const d of DRIVERS) b.compare(row(`mneme ${d}`), row(`raw ${d}`));
  b.compare(row("mneme node:sqlite"), row("mneme better-sqlite3"));
  b.compare(row("raw node:sqlite"), row("raw better-sqlite3"));
}

function loadavg(): string {
  try {
    return readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" ");
  } catch {
    return "n/a";
  }
}

export default async function sqliteDriversBench(b: Bench): Promise<void> {
  console.log(`  node ${process.version}, load average before: ${loadavg()}`);
  const dir = mkdtempSync(join(tmpdir(), "mneme-bench-sqlite-drivers-"));
  try {
    await appends(b, dir);
    await loads(b, dir);
    await readmodelWrites(b, dir);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  console.log(`  load average after: ${loadavg()}`);
}

async function appends(b: Bench, dir: string): Promise<void> {
  const rounds = 10;
  const perRound = b.quick ? 10 : 40;
  const sides: Record<string, Side> = {};
  const closers: (() => Promise<void> | void)[] = [];
  // Made before the clock runs; every side appends the same events (to its own file).
  const made = Array.from({ length: rounds }, (_, r) => Array.from({ length: perRound }, (_, k) => todoBatchOf100(r * perRound + k)));
  const batches = (r: number): NewEvent[][] => made[r] ?? [];
  for (const d of DRIVERS) {
    const repo = new SqliteEventRepository({ filename: join(dir, `append-mneme-${d.replace(":", "-")}.db`), driver: d });
    await repo.init();
    const raw = new RawEvents(RAW[d](join(dir, `append-raw-${d.replace(":", "-")}.db`)));
    for (let w = 0; w < 20; w++) {
      await repo.append(todoBatchOf100(-1 - w));
      raw.append(todoBatchOf100(-1 - w));
    }
    sides[`mneme ${d}`] = {
      name: `mneme ${d}`,
      run: async (r) => {
        for (const batch of batches(r)) await repo.append(batch);
      },
    };
    sides[`raw ${d}`] = {
      name: `raw ${d}`,
      run: (r) => {
        for (const batch of batches(r)) raw.append(batch);
      },
    };
    closers.push(
      () => repo.close(),
      () => raw.db.close(),
    );
  }
  await quartet(b, "append, batches of 100", perRound * 100, rounds, sides, "events/s");
  for (const c of closers) await c();
}

async function loads(b: Bench, dir: string): Promise<void> {
  const loadsPerRound = b.quick ? 100 : 500;
  const sides: Record<string, Side> = {};
  const closers: (() => Promise<void> | void)[] = [];
  for (const d of DRIVERS) {
    // One file per driver, filled through its raw store and read by both sides.
    const filename = join(dir, `load-${d.replace(":", "-")}.db`);
    const raw = new RawEvents(RAW[d](filename));
    raw.append(Array.from({ length: 50 }, (_, k) => todoEvent("history-50", k)));
    for (let k = 0; k < 20; k++) raw.append(todoBatchOf100(k));
    const repo = new SqliteEventRepository({ filename, driver: d });
    await repo.init();
    for (let w = 0; w < 200; w++) {
      await repo.loadAggregate("history-50");
      raw.loadAggregate("history-50");
    }
    sides[`mneme ${d}`] = {
      name: `mneme ${d}`,
      run: async () => {
        for (let i = 0; i < loadsPerRound; i++) if ((await repo.loadAggregate("history-50")).length !== 50) throw new Error("short load");
      },
    };
    sides[`raw ${d}`] = {
      name: `raw ${d}`,
      run: () => {
        for (let i = 0; i < loadsPerRound; i++) if (raw.loadAggregate("history-50").length !== 50) throw new Error("short load");
      },
    };
    closers.push(
      () => repo.close(),
      () => raw.db.close(),
    );
  }
  await quartet(b, "loadAggregate of 50 events", loadsPerRound, 10, sides, "loads/s");
  for (const c of closers) await c();
}

async function readmodelWrites(b: Bench, dir: string): Promise<void> {
  const rounds = b.quick ? 200 : 1000;
  const keys = 1000;
  const sides: Record<string, Side> = {};
  const closers: (() => Promise<void> | void)[] = [];
  for (const d of DRIVERS as readonly SqliteDriverName[]) {
    const backend = new SqliteReadmodelStoreBackend({ filename: join(dir, `rm-mneme-${d.replace(":", "-")}.db`), driver: d });
    await backend.init();
    const docs = backend.collection<{ n: number; i: number }>("docs");
    const rawDb = RAW[d as Driver](join(dir, `rm-raw-${d.replace(":", "-")}.db`));
    for (const p of ["journal_mode = WAL", "synchronous = NORMAL"]) rawDb.exec(`PRAGMA ${p}`);
    const raw = new RawDocs(rawDb);
    const batch = (r: number) =>
      backend.transaction(async () => {
        for (let i = 0; i < DOCS_PER_BATCH; i++) await docs.put(`k${(r * DOCS_PER_BATCH + i) % keys}`, { n: r, i });
        await backend.setCheckpoint("Bench", r + 1);
      });
    for (let w = 0; w < 20; w++) {
      await batch(w);
      raw.batch(w, keys);
    }
    sides[`mneme ${d}`] = { name: `mneme ${d}`, run: (r) => batch(r) };
    sides[`raw ${d}`] = { name: `raw ${d}`, run: (r) => raw.batch(r, keys) };
    closers.push(
      () => backend.close(),
      () => rawDb.close(),
    );
  }
  await quartet(b, `readmodel batch of ${DOCS_PER_BATCH} puts + checkpoint`, DOCS_PER_BATCH, rounds, sides, "docs/s");
  for (const c of closers) await c();
}
