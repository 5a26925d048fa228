/**
 * The SQLite event repository against raw better-sqlite3 running the same SQL
 * by hand (same schema, same pragmas, same statements, rows read in raw mode
 * and JSON parsed into event objects), in the same run:
 * append in batches of 100, single-event append, readAll of 1,000,000 events
 * (BENCH_QUICK=1: 100,000), loadAggregate of 50 events, loadAggregates of 100.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { newUuid, nowNs } from "../src/model/clock.js";
import type { Event, NewEvent, RequestContext } from "../src/model/types.js";
import { SqliteEventRepository } from "../src/sqlite/index.js";
import { type Bench, duel, todoBatchOf100, todoEvent } from "./harness.js";

const COLUMNS = "position, event_uuid, tenant_uuid, domain, name, aggregate_uuid, version, command_uuid, created_at, req_ctx, payload";
type Row = [number, string, string, string, string, string, number, string | null, number, string, string | null];

/** What a careful hand-written better-sqlite3 event store does: the baseline. */
class RawStore {
  readonly db: Database.Database;
  private readonly begin;
  private readonly commit;
  private readonly rollback;
  private readonly maxVersion;
  private readonly insert;
  private readonly page;
  private readonly oneAggregate;
  private readonly manyAggregates;

  constructor(filename: string) {
    this.db = new Database(filename, { timeout: 5000 });
    this.db.pragma("journal_mode = WAL");
    this.db.pragma("synchronous = NORMAL");
    this.db.pragma("foreign_keys = ON");
    this.db.exec(`
      CREATE TABLE IF NOT EXISTS mneme_events (
        position INTEGER PRIMARY KEY, event_uuid TEXT NOT NULL, tenant_uuid TEXT NOT NULL,
        domain TEXT NOT NULL, name TEXT NOT NULL, aggregate_uuid TEXT NOT NULL, version INTEGER NOT NULL,
        command_uuid TEXT, created_at INTEGER NOT NULL, req_ctx TEXT NOT NULL, payload TEXT,
        UNIQUE (aggregate_uuid, version));
      CREATE UNIQUE INDEX IF NOT EXISTS mneme_events_event_uuid ON mneme_events (event_uuid);`);
    this.begin = this.db.prepare("BEGIN IMMEDIATE");
    this.commit = this.db.prepare("COMMIT");
    this.rollback = this.db.prepare("ROLLBACK");
    this.maxVersion = this.db.prepare("SELECT MAX(version) AS v FROM mneme_events WHERE aggregate_uuid = ?");
    this.insert = this.db.prepare(
      `INSERT INTO mneme_events (event_uuid, tenant_uuid, domain, name, aggregate_uuid, version, command_uuid, created_at, req_ctx, payload)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    );
    this.page = this.db.prepare(`SELECT ${COLUMNS} FROM mneme_events WHERE position > ? ORDER BY position LIMIT ?`).raw(true);
    this.oneAggregate = this.db
      .prepare(`SELECT ${COLUMNS} FROM mneme_events WHERE aggregate_uuid = ? AND version >= ? ORDER BY version`)
      .raw(true);
    this.manyAggregates = this.db
      .prepare(
        `SELECT ${COLUMNS} FROM mneme_events WHERE aggregate_uuid IN (SELECT value FROM json_each(?)) ORDER BY aggregate_uuid, version`,
      )
      .raw(true);
  }

  append(events: readonly NewEvent[]): void {
    this.begin.run();
    try {
      const current = new Map<string, number>();
      for (const e of events) {
        let v = current.get(e.aggregateUuid);
        if (v === undefined) v = (this.maxVersion.get(e.aggregateUuid) as { v: number | null }).v ?? 0;
        v++;
        current.set(e.aggregateUuid, v);
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
    } catch (err) {
      if (this.db.inTransaction) this.rollback.run();
      throw err;
    }
  }

  *readAll(batchSize: number): Generator<Event[]> {
    let after = 0;
    for (;;) {
      const rows = this.page.all(after, batchSize) as Row[];
      if (rows.length === 0) return;
      const page = rows.map(toEvent);
      after = (page[page.length - 1] as Event).position;
      yield page;
    }
  }

  loadAggregate(aggregateUuid: string): Event[] {
    return (this.oneAggregate.all(aggregateUuid, 1) as Row[]).map(toEvent);
  }

  loadAggregates(ids: readonly string[]): Map<string, Event[]> {
    const out = new Map<string, Event[]>();
    for (const id of ids) out.set(id, []);
    for (const row of this.manyAggregates.all(JSON.stringify(ids)) as Row[]) out.get(row[5])?.push(toEvent(row));
    return out;
  }
}

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

export default async function sqliteBench(b: Bench): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "mneme-bench-sqlite-"));
  try {
    await appendBench(b, dir);
    await readBench(b, dir);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

async function appendBench(b: Bench, dir: string): Promise<void> {
  const rounds = 10;
  const batchesPerRound = b.quick ? 10 : 50;
  const singlesPerRound = b.quick ? 200 : 1_000;
  const mneme = new SqliteEventRepository({ filename: join(dir, "append-mneme.db") });
  await mneme.init();
  const raw = new RawStore(join(dir, "append-raw.db"));
  // Warm both (statement preparation, page cache, JIT) before measuring.
  for (let r = 0; r < 20; r++) {
    await mneme.append(todoBatchOf100(-1 - r));
    raw.append(todoBatchOf100(-1 - r));
  }
  const batches = Array.from({ length: rounds }, (_, r) =>
    Array.from({ length: batchesPerRound }, (_, k) => todoBatchOf100(r * batchesPerRound + k)),
  );
  await duel(
    b,
    "sqlite",
    "append, batches of 100",
    batchesPerRound * 100,
    rounds,
    async (r) => {
      for (const batch of batches[r] ?? []) await mneme.append(batch);
    },
    [
      {
        name: "raw",
        run: (r) => {
          for (const batch of batches[r] ?? []) raw.append(batch);
        },
      },
    ],
    "events/s",
  );
  const singles = Array.from({ length: rounds }, (_, r) =>
    Array.from({ length: singlesPerRound }, (_, i) => todoEvent(`single-${i % 500}`, r * singlesPerRound + i)),
  );
  await duel(
    b,
    "sqlite",
    "append, one event per call",
    singlesPerRound,
    rounds,
    async (r) => {
      for (const e of singles[r] ?? []) await mneme.append([e]);
    },
    [
      {
        name: "raw",
        run: (r) => {
          for (const e of singles[r] ?? []) raw.append([e]);
        },
      },
    ],
    "events/s",
  );
  await mneme.close();
  raw.db.close();
}

async function readBench(b: Bench, dir: string): Promise<void> {
  const total = b.quick ? 100_000 : 1_000_000;
  const filename = join(dir, "read.db");
  // One file read by both: identical data and layout. Filled through the raw store (fast bulk load).
  const raw = new RawStore(filename);
  const fill: NewEvent[] = [];
  for (let k = 0; k < 50; k++) fill.push(todoEvent("history-50", k));
  for (let a = 0; a < 100; a++) for (let k = 0; k < 5; k++) fill.push(todoEvent(`list-${a}`, a * 5 + k));
  raw.append(fill);
  let i = fill.length;
  while (i < total) {
    const chunk: NewEvent[] = [];
    for (let k = 0; k < 10_000 && i < total; k++, i++) chunk.push(todoEvent(`bulk-${i % 100_000}`, i));
    raw.append(chunk);
  }
  const mneme = new SqliteEventRepository({ filename });
  await mneme.init();

  const mnemeRead = async (): Promise<void> => {
    let n = 0;
    for await (const page of mneme.readAll({ batchSize: 1000 })) n += page.length;
    if (n !== total) throw new Error(`mneme readAll saw ${n} events, expected ${total}`);
  };
  const rawRead = (): void => {
    let n = 0;
    for (const page of raw.readAll(1000)) n += page.length;
    if (n !== total) throw new Error(`raw readAll saw ${n} events, expected ${total}`);
  };
  // Warm-up pass each (page cache, JIT).
  await mnemeRead();
  rawRead();
  await duel(
    b,
    "sqlite",
    `readAll ${total.toLocaleString("en-US")} events (pages of 1000)`,
    total,
    b.quick ? 4 : 3,
    mnemeRead,
    [{ name: "raw", run: rawRead }],
    "events/s",
  );

  const loads = b.quick ? 200 : 1_000;
  for (let w = 0; w < 200; w++) {
    await mneme.loadAggregate("history-50");
    raw.loadAggregate("history-50");
  }
  await duel(
    b,
    "sqlite",
    "loadAggregate (50 events)",
    loads,
    10,
    async () => {
      for (let k = 0; k < loads; k++) if ((await mneme.loadAggregate("history-50")).length !== 50) throw new Error("expected 50 events");
    },
    [
      {
        name: "raw",
        run: () => {
          for (let k = 0; k < loads; k++) if (raw.loadAggregate("history-50").length !== 50) throw new Error("expected 50 events");
        },
      },
    ],
    "loads/s",
  );

  const lists = b.quick ? 50 : 200;
  const ids = Array.from({ length: 100 }, (_, a) => `list-${a}`);
  for (let w = 0; w < 50; w++) {
    await mneme.loadAggregates(ids);
    raw.loadAggregates(ids);
  }
  await duel(
    b,
    "sqlite",
    "loadAggregates (100 ids, 500 events)",
    lists,
    10,
    async () => {
      for (let k = 0; k < lists; k++) if ((await mneme.loadAggregates(ids)).size !== 100) throw new Error("expected 100 aggregates");
    },
    [
      {
        name: "raw",
        run: () => {
          for (let k = 0; k < lists; k++) if (raw.loadAggregates(ids).size !== 100) throw new Error("expected 100 aggregates");
        },
      },
    ],
    "loads/s",
  );

  await mneme.close();
  raw.db.close();
}
