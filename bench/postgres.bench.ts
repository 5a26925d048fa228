/**
 * The Postgres event repository against raw pg in the same run, on the same
 * database (DATABASE_URL, default postgres://postgres@127.0.0.1:5432/test), in
 * its own schema dropped at the end: append in batches of 100, single-event
 * append, readAll of 1,000,000 events (BENCH_QUICK=1: 100,000), loadAggregate
 * of 50 events, loadAggregates of a 100-id list.
 *
 * Two raw baselines for appends: "same statement" runs mneme's own append
 * statement (`mneme_append_aggregate` or `mneme_append_flush`, the plpgsql
 * functions init() creates, with one call) through pg by hand, so the ratio
 * is what the library adds on the client; "hand-written transaction" is what
 * one would write without that function for the same guarantees (BEGIN,
 * advisory lock, read versions, INSERT ... unnest, pg_notify, COMMIT: four
 * round trips instead of one). Reads run the same SELECTs, rows in array mode
 * mapped to Event objects.
 */
import pg from "pg";
import { newUuid, nowNs } from "../src/model/clock.js";
import type { Event, NewEvent, RequestContext } from "../src/model/types.js";
import { PostgresEventRepository } from "../src/postgres/index.js";
import { advisoryKey } from "../src/postgres/postgres-schema.js";
import { BENCH_REQ_CTX, type Bench, duel, todoBatchOf100, todoEvent } from "./harness.js";

const DATABASE_URL = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test";

const COLUMNS = "position, event_uuid, tenant_uuid, domain, name, aggregate_uuid, version, command_uuid, created_at, req_ctx, payload";
/** Written with its event version, as mneme writes it (the schema refuses rows without one: see postgres-old-writers.ts). */
const INSERT_COLUMNS = `${COLUMNS}, event_version`;
type Row = [string, string, string, string, string, string, number, string | null, string, RequestContext, unknown];

function toEvent(r: Row): Event {
  const e: Event = {
    eventUuid: r[1],
    position: Number(r[0]),
    tenantUuid: r[2],
    domain: r[3],
    name: r[4],
    aggregateUuid: r[5],
    version: r[6],
    createdAt: Number(r[8]),
    reqCtx: r[9],
    payload: r[10],
  };
  if (r[7] !== null) e.commandUuid = r[7];
  return e;
}

/** A hand-written pg event store over the tables mneme's init() made: the baselines. */
class RawStore {
  private readonly lockKey: string;
  private readonly channel: string;
  constructor(
    private readonly pool: pg.Pool,
    private readonly schema: string,
  ) {
    this.lockKey = advisoryKey("mneme:events", schema);
    this.channel = `mneme_events_${schema}`;
  }

  private columns(events: readonly NewEvent[]): unknown[] {
    return [
      events.map(() => newUuid()),
      events.map((e) => e.tenantUuid ?? ""),
      events.map((e) => e.domain),
      events.map((e) => e.name),
      events.map((e) => e.aggregateUuid),
      events.map(() => null),
      events.map(() => null),
      events.map(() => nowNs()),
      events.map((e) => JSON.stringify(e.reqCtx ?? {})),
      events.map((e) => JSON.stringify(e.payload)),
    ];
  }

  /**
   * mneme's append statement for one call without a command record, called by hand: `mneme_append_aggregate`
   * when every event belongs to one aggregate, else `mneme_append_flush` (see src/postgres/postgres-append-statements.ts).
   */
  async appendSameStatement(events: readonly NewEvent[]): Promise<void> {
    const cols = this.columns(events);
    const ones = events.map(() => 1);
    const agg = events[0]?.aggregateUuid;
    if (events.every((e) => e.aggregateUuid === agg)) {
      await this.pool.query(
        `SELECT "${this.schema}".mneme_append_aggregate($1::bigint, $2::text, 'raw', $3::text, $4::text[], $5::text[], $6::text[], $7::text[],
          NULL, $8::text[], $9::bigint[], $10::jsonb[], $11::jsonb[], $12::integer[], NULL, NULL, false, NULL, NULL, NULL, NULL, NULL, NULL, NULL)`,
        [this.lockKey, this.channel, agg, cols[0], cols[1], cols[2], cols[3], cols[6], cols[7], cols[8], cols[9], ones],
      );
      return;
    }
    await this.pool.query(
      `SELECT base_position, versions, error_state FROM "${this.schema}".mneme_append_flush($1::bigint, $2::text, 'raw', $3::integer[],
        $4::integer[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[], $10::integer[], $11::text[], $12::bigint[], $13::jsonb[],
        $14::jsonb[], $15::integer[], '{0}', '{}', '{}', '{}', '{0}', '{}', '{NULL}', '{NULL}', '{NULL}', '{NULL}', '{NULL}', '{NULL}', '{NULL}')`,
      [this.lockKey, this.channel, [events.length], ones, ...cols, ones],
    );
  }

  /** The same guarantees in a client-side transaction: lock, versions read under it, one INSERT, NOTIFY, COMMIT. */
  async appendTransaction(events: readonly NewEvent[]): Promise<void> {
    const client = await this.pool.connect();
    try {
      await client.query(`BEGIN; SELECT pg_advisory_xact_lock(${this.lockKey})`);
      const aggs = [...new Set(events.map((e) => e.aggregateUuid))];
      const cur = await client.query<{ a: string; v: number | null }>(
        `SELECT a, (SELECT version FROM "${this.schema}".events WHERE aggregate_uuid = a ORDER BY version DESC LIMIT 1) AS v FROM unnest($1::text[]) AS a`,
        [aggs],
      );
      const next = new Map(cur.rows.map((r) => [r.a, r.v ?? 0] as const));
      const versions = events.map((e) => {
        const v = (next.get(e.aggregateUuid) ?? 0) + 1;
        next.set(e.aggregateUuid, v);
        return v;
      });
      const cols = this.columns(events);
      cols[5] = versions;
      await client.query(
        `WITH base AS (SELECT setval('"${this.schema}".events_position_seq', nextval('"${this.schema}".events_position_seq') + $11 - 1) - $11 AS b)
         INSERT INTO "${this.schema}".events (${INSERT_COLUMNS})
         SELECT base.b + u.ord, u.eu, u.t, u.d, u.n, u.a, u.v, u.c, u.ca, u.rc, u.p, 1
         FROM base, unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::integer[], $7::text[], $8::bigint[], $9::jsonb[], $10::jsonb[])
              WITH ORDINALITY AS u(eu, t, d, n, a, v, c, ca, rc, p, ord)`,
        [...cols, events.length],
      );
      await client.query("SELECT pg_notify($1, 'raw')", [this.channel]);
      await client.query("COMMIT");
    } catch (e) {
      await client.query("ROLLBACK").catch(() => undefined);
      throw e;
    } finally {
      client.release();
    }
  }

  async *readAll(batchSize: number): AsyncGenerator<Event[]> {
    let after = 0;
    for (;;) {
      const res = await this.pool.query<Row>({
        text: `SELECT ${COLUMNS} FROM "${this.schema}".events WHERE position > $1 ORDER BY position LIMIT $2`,
        values: [after, batchSize],
        rowMode: "array",
      });
      if (res.rows.length === 0) return;
      const page = res.rows.map(toEvent);
      after = (page[page.length - 1] as Event).position;
      yield page;
    }
  }

  async loadAggregate(aggregateUuid: string): Promise<Event[]> {
    const res = await this.pool.query<Row>({
      text: `SELECT ${COLUMNS} FROM "${this.schema}".events WHERE aggregate_uuid = $1 AND version >= $2 ORDER BY version`,
      values: [aggregateUuid, 1],
      rowMode: "array",
    });
    return res.rows.map(toEvent);
  }

  async loadAggregates(ids: readonly string[]): Promise<Map<string, Event[]>> {
    const out = new Map<string, Event[]>();
    for (const id of ids) out.set(id, []);
    const res = await this.pool.query<Row>({
      text: `SELECT ${COLUMNS} FROM "${this.schema}".events WHERE aggregate_uuid = ANY($1::text[]) ORDER BY aggregate_uuid, version`,
      values: [ids],
      rowMode: "array",
    });
    for (const row of res.rows) out.get(row[5])?.push(toEvent(row));
    return out;
  }
}

export default async function postgresBench(b: Bench): Promise<void> {
  const pool = new pg.Pool({ connectionString: DATABASE_URL, max: 4 });
  pool.on("error", () => {});
  try {
    await pool.query("SELECT 1");
  } catch (e) {
    console.log(`  postgres: skipped, no database at ${DATABASE_URL.replace(/:[^:@/]*@/, "@")} (${String(e)})`);
    await pool.end();
    return;
  }
  const schema = `mneme_bench_${Date.now().toString(36)}`;
  try {
    await appendBench(b, pool, `${schema}_a`);
    await readBench(b, pool, `${schema}_r`);
  } finally {
    await pool.query(`DROP SCHEMA IF EXISTS "${schema}_a" CASCADE`);
    await pool.query(`DROP SCHEMA IF EXISTS "${schema}_r" CASCADE`);
    await pool.end();
  }
}

async function appendBench(b: Bench, pool: pg.Pool, schema: string): Promise<void> {
  const rounds = 6;
  const batchesPerRound = b.quick ? 10 : 40;
  const singlesPerRound = b.quick ? 200 : 600;
  const mneme = new PostgresEventRepository({ pool, schema, pollIntervalMs: 0 });
  await mneme.init();
  const raw = new RawStore(pool, schema);
  for (let r = 0; r < 20; r++) {
    await mneme.append(todoBatchOf100(-1 - r));
    await raw.appendSameStatement(todoBatchOf100(-100 - r));
    await raw.appendTransaction(todoBatchOf100(-200 - r));
  }
  let seq = 0;
  const fresh = (): NewEvent[] => todoBatchOf100(seq++);
  await duel(
    b,
    "postgres",
    "append, batches of 100",
    batchesPerRound * 100,
    rounds,
    async () => {
      for (let k = 0; k < batchesPerRound; k++) await mneme.append(fresh());
    },
    [
      {
        name: "raw (same statement)",
        run: async () => {
          for (let k = 0; k < batchesPerRound; k++) await raw.appendSameStatement(fresh());
        },
      },
      {
        name: "raw (hand-written transaction)",
        run: async () => {
          for (let k = 0; k < batchesPerRound; k++) await raw.appendTransaction(fresh());
        },
      },
    ],
    "events/s",
  );
  let single = 0;
  const one = (): NewEvent[] => [todoEvent(`single-${single % 500}`, single++)];
  await duel(
    b,
    "postgres",
    "append, one event per call",
    singlesPerRound,
    rounds,
    async () => {
      for (let k = 0; k < singlesPerRound; k++) await mneme.append(one());
    },
    [
      {
        name: "raw (same statement)",
        run: async () => {
          for (let k = 0; k < singlesPerRound; k++) await raw.appendSameStatement(one());
        },
      },
      {
        name: "raw (hand-written transaction)",
        run: async () => {
          for (let k = 0; k < singlesPerRound; k++) await raw.appendTransaction(one());
        },
      },
    ],
    "events/s",
  );
  await mneme.close();
}

async function readBench(b: Bench, pool: pg.Pool, schema: string): Promise<void> {
  const total = b.quick ? 100_000 : 1_000_000;
  const mneme = new PostgresEventRepository({ pool, schema, pollIntervalMs: 0 });
  await mneme.init();
  const raw = new RawStore(pool, schema);
  // Aggregates the loads read, through mneme's append; the bulk of the history straight in SQL (fast).
  await mneme.append(Array.from({ length: 50 }, (_, k) => todoEvent("history-50", k)));
  for (let a = 0; a < 100; a += 10) {
    const chunk: NewEvent[] = [];
    for (let x = a; x < a + 10; x++) for (let k = 0; k < 5; k++) chunk.push(todoEvent(`list-${x}`, x * 5 + k));
    await mneme.append(chunk);
  }
  const seeded = 550;
  const ctxJson = JSON.stringify(BENCH_REQ_CTX);
  const base = nowNs();
  for (let from = seeded + 1; from <= total; from += 100_000) {
    const to = Math.min(total, from + 99_999);
    await pool.query(
      `INSERT INTO "${schema}".events (${INSERT_COLUMNS})
       SELECT i, gen_random_uuid()::text, '0190a7a2-7d3c-7b5e-9f00-1234567890ae', 'Todo', 'TodoCreated', 'bulk-' || (i % 100000),
              i / 100000 + 1, NULL, $3::bigint + i * 1000, $4::jsonb,
              jsonb_build_object('title', 'todo number ' || i, 'done', i % 2 = 0, 'tags', jsonb_build_array('work', 'bench'), 'n', i), 1
       FROM generate_series($1::bigint, $2::bigint) AS i`,
      [from, to, base, ctxJson],
    );
  }
  await pool.query(`SELECT setval('"${schema}".events_position_seq', $1)`, [total]);
  await pool.query(`VACUUM ANALYZE "${schema}".events`);
  if ((await mneme.headPosition()) !== total) throw new Error("seeding failed");

  const mnemeRead = async (): Promise<void> => {
    let n = 0;
    for await (const page of mneme.readAll({ batchSize: 1000 })) n += page.length;
    if (n !== total) throw new Error(`mneme readAll saw ${n} events, expected ${total}`);
  };
  const rawRead = async (): Promise<void> => {
    let n = 0;
    for await (const page of raw.readAll(1000)) n += page.length;
    if (n !== total) throw new Error(`raw readAll saw ${n} events, expected ${total}`);
  };
  await mnemeRead();
  await rawRead();
  await duel(
    b,
    "postgres",
    `readAll ${total.toLocaleString("en-US")} events (pages of 1000)`,
    total,
    b.quick ? 4 : 2,
    mnemeRead,
    [{ name: "raw (same SQL)", run: rawRead }],
    "events/s",
  );

  const loads = b.quick ? 200 : 1_000;
  for (let w = 0; w < 200; w++) {
    await mneme.loadAggregate("history-50");
    await raw.loadAggregate("history-50");
  }
  await duel(
    b,
    "postgres",
    "loadAggregate (50 events)",
    loads,
    6,
    async () => {
      for (let k = 0; k < loads; k++) if ((await mneme.loadAggregate("history-50")).length !== 50) throw new Error("expected 50 events");
    },
    [
      {
        name: "raw (same SQL)",
        run: async () => {
          for (let k = 0; k < loads; k++) if ((await raw.loadAggregate("history-50")).length !== 50) throw new Error("expected 50 events");
        },
      },
    ],
    "loads/s",
  );

  const lists = b.quick ? 50 : 200;
  const ids = Array.from({ length: 100 }, (_, a) => `list-${a}`);
  for (let w = 0; w < 50; w++) {
    await mneme.loadAggregates(ids);
    await raw.loadAggregates(ids);
  }
  const check = (m: Map<string, Event[]>): void => {
    if (m.size !== 100 || [...m.values()].some((v) => v.length !== 5)) throw new Error("expected 100 aggregates of 5 events");
  };
  await duel(
    b,
    "postgres",
    "loadAggregates (100 ids, 500 events)",
    lists,
    6,
    async () => {
      for (let k = 0; k < lists; k++) check(await mneme.loadAggregates(ids));
    },
    [
      {
        name: "raw (same SQL)",
        run: async () => {
          for (let k = 0; k < lists; k++) check(await raw.loadAggregates(ids));
        },
      },
    ],
    "lists/s",
  );
  await mneme.close();
}
