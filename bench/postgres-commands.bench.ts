/**
 * Postgres command handling through the facade, against raw pg doing the same
 * reads and writes by hand in the same run (DATABASE_URL, default
 * postgres://postgres@127.0.0.1:5432/test; schemas of its own, dropped at the end).
 *
 * (a) Sequential commands that load their aggregate, fold it and append one
 * event with the loaded version as expected version (and the audit record in
 * the same statement): 1,000 streams x 10 commands (BENCH_QUICK=1: 200 x 5).
 * The raw side runs the same SELECT, folds, and writes the event and the
 * command record in one autocommitted INSERT (the unique (aggregate, version)
 * index as its version check): two round trips, as mneme, without the lock,
 * the tenant rule or the gap-free positions.
 *
 * (b) Single-event commands (no load) from C = 1, 4, 16, 32 concurrent callers,
 * each on its own aggregate, against raw `BEGIN; INSERT; COMMIT` transactions
 * from C concurrent callers (each on a connection of its own). mneme runs with
 * group commit (the default) and without it (`maxAppendsPerCommit: 1`, one
 * statement per append, as before group commit), so the figures show what
 * group commit gains around the per-schema append lock.
 *
 * (c) The same with two instances (two facades, two pools) on one schema, 8
 * callers each: the lock is shared across instances, each flush carries its
 * instance's waiting commands.
 *
 * (d) Commands that load their aggregate (a fresh one per command) and append,
 * from C = 1, 4, 16, 32 callers (grouped), against the same raw transactions:
 * the load is a round trip of its own that group commit does not share.
 */
import pg from "pg";
import { createFacade, type Facade } from "../src/app/facade.js";
import { newUuid, nowNs } from "../src/model/clock.js";
import { defineDomain } from "../src/model/domain.js";
import type { DomainInstall } from "../src/model/domain-install.js";
import { createPostgresBackends, type PostgresBackends } from "../src/postgres/postgres-backends.js";
import { PostgresEventRepository } from "../src/postgres/postgres-event-repository.js";
import { BENCH_REQ_CTX as reqCtx, BENCH_TENANT as TENANT, type Bench, duel } from "./harness.js";

const DATABASE_URL = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test";
const COLUMNS = "position, event_uuid, tenant_uuid, domain, name, aggregate_uuid, version, command_uuid, created_at, req_ctx, payload";
/** Written with its event version, as mneme writes it (the schema refuses rows without one: see postgres-old-writers.ts). */
const INSERT_COLUMNS = `${COLUMNS}, event_version`;
const REQ_CTX_JSON = JSON.stringify(reqCtx);

interface Touch {
  itemUuid: string;
  title: string;
}

function itemDomain() {
  const Items = defineDomain("Items");
  const ItemTouched = Items.event<{ title: string }>("ItemTouched");
  const Item = Items.aggregate<{ title: string; n: number }>("Item", {
    initialState: () => ({ title: "", n: 0 }),
    evolve: { ItemTouched: (s, p: { title: string }) => ({ title: p.title, n: s.n + 1 }) },
  });
  const TouchItem = Items.command<Touch>("TouchItem");
  const NoteItem = Items.command<Touch>("NoteItem");
  const install: DomainInstall = (i) => {
    i.handleCommand(TouchItem, async (ctx, _cmd, p) => {
      const item = await ctx.aggregates.load(Item, p.itemUuid);
      return [ItemTouched.create(p.itemUuid, { title: `${p.title} after ${item.state.n}` })];
    });
    i.handleCommand(NoteItem, (_ctx, _cmd, p) => [ItemTouched.create(p.itemUuid, { title: p.title })]);
  };
  return { Items, TouchItem, NoteItem, install };
}

export default async function postgresCommandsBench(b: Bench): Promise<void> {
  const admin = new pg.Pool({ connectionString: DATABASE_URL, max: 2 });
  admin.on("error", () => {});
  try {
    await admin.query("SELECT 1");
  } catch (e) {
    console.log(`  postgres: skipped, no database at ${DATABASE_URL.replace(/:[^:@/]*@/, "@")} (${String(e)})`);
    await admin.end();
    return;
  }
  const schemas: string[] = [];
  const schema = (tag: string): string => {
    const s = `mneme_bench_cmd_${tag}_${process.pid}`;
    schemas.push(s);
    return s;
  };
  try {
    await sequentialBench(b, schema);
    await concurrentBench(b, schema, false);
    await concurrentBench(b, schema, true);
    await twoInstancesBench(b, schema);
  } finally {
    for (const s of schemas) await admin.query(`DROP SCHEMA IF EXISTS "${s}" CASCADE`).catch(() => undefined);
    await admin.end();
  }
}

/** A started facade on its own schema and pool. */
async function startFacade(
  schema: string,
  poolSize: number,
  maxAppendsPerCommit?: number,
): Promise<{ f: Facade; backends: PostgresBackends }> {
  const backends = createPostgresBackends({
    connectionString: DATABASE_URL,
    schema,
    poolSize,
    ...(maxAppendsPerCommit === undefined ? {} : { maxAppendsPerCommit }),
  });
  const f = createFacade({ appName: "bench-pg-commands", ...backends });
  return { f, backends };
}

/** Creates the tables of `schema` (events and commands) for the raw side. */
async function rawTables(pool: pg.Pool, schema: string): Promise<void> {
  const repo = new PostgresEventRepository({ pool, schema, pollIntervalMs: 0 });
  await repo.init();
  await repo.close();
  await pool.query(`CREATE TABLE IF NOT EXISTS "${schema}".commands (
    command_uuid text COLLATE "C" PRIMARY KEY, domain text NOT NULL, name text NOT NULL, tenant_uuid text NOT NULL,
    status text NOT NULL, created_at bigint NOT NULL, record jsonb NOT NULL)`);
}

async function sequentialBench(b: Bench, schemaOf: (tag: string) => string): Promise<void> {
  const streams = b.quick ? 200 : 1_000;
  const perStream = b.quick ? 5 : 10;
  const d = itemDomain();
  const { f, backends } = await startFacade(schemaOf("seq"), 10);
  f.registerDomain(d.Items, d.install);
  await f.start();
  const rawSchema = schemaOf("seqraw");
  const pool = new pg.Pool({ connectionString: DATABASE_URL, max: 10 });
  pool.on("error", () => {});
  await rawTables(pool, rawSchema);
  const loadSql = `SELECT ${COLUMNS} FROM "${rawSchema}".events WHERE aggregate_uuid = $1 AND version >= $2 ORDER BY version`;
  const writeSql =
    `WITH e AS (INSERT INTO "${rawSchema}".events (${INSERT_COLUMNS}) ` +
    `VALUES (nextval('"${rawSchema}".events_position_seq'), $1, $2, 'Items', 'ItemTouched', $3, $4, $5, $6, $7::jsonb, $8::jsonb, 1) RETURNING position) ` +
    `INSERT INTO "${rawSchema}".commands (command_uuid, domain, name, tenant_uuid, status, created_at, record) ` +
    `SELECT $5, 'Items', 'TouchItem', $2, 'succeeded', $6, $9::jsonb FROM e`;
  const rawCommand = async (itemUuid: string, title: string): Promise<void> => {
    const rows = (
      await pool.query<[string, string, string, string, string, string, number, string, string, unknown, { title: string }]>({
        text: loadSql,
        values: [itemUuid, 1],
        rowMode: "array",
      })
    ).rows;
    let n = 0;
    let version = 0;
    for (const r of rows) {
      n++;
      version = r[6];
    }
    const commandUuid = newUuid();
    const createdAt = nowNs();
    const payload = JSON.stringify({ title: `${title} after ${n}` });
    const record = JSON.stringify({ commandUuid, domain: "Items", name: "TouchItem", tenantUuid: TENANT, status: "succeeded", createdAt });
    await pool.query(writeSql, [newUuid(), TENANT, itemUuid, version + 1, commandUuid, createdAt, REQ_CTX_JSON, payload, record]);
  };
  const mnemeIds = Array.from({ length: streams }, () => newUuid());
  const rawIds = Array.from({ length: streams }, () => newUuid());
  // Warm-up of both paths, on aggregates of their own.
  for (let w = 0; w < 100; w++) {
    await f.dispatch(d.TouchItem, { itemUuid: `warm-${w % 10}`, title: "warm" }, { reqCtx });
    await rawCommand(`warm-${w % 10}`, "warm");
  }
  // A round is one command on each stream; the sides alternate by round (rotating who goes first).
  await duel(
    b,
    "postgres-cmd",
    `sequential load+fold+append, ${streams} streams x ${perStream}`,
    streams,
    perStream,
    async (round) => {
      for (const id of mnemeIds) await f.dispatch(d.TouchItem, { itemUuid: id, title: `t${round}` }, { reqCtx });
    },
    [
      {
        name: "raw pg (SELECT, then INSERT event + record)",
        run: async (round) => {
          for (const id of rawIds) await rawCommand(id, `t${round}`);
        },
      },
    ],
    "commands/s",
  );
  for (const id of [mnemeIds[0]!, mnemeIds[streams - 1]!]) {
    const n = (await f.eventRepository.loadAggregate(id)).length;
    if (n !== perStream) throw new Error(`stream ${id} holds ${n} events, expected ${perStream}`);
  }
  await f.stop();
  await backends.close();
  await pool.end();
}

/** Raw `BEGIN; INSERT; COMMIT` of one event on `rawSchema`'s events table, on a connection of its own. */
function rawTransaction(pool: pg.Pool, rawSchema: string): (itemUuid: string, title: string) => Promise<void> {
  const insertSql =
    `INSERT INTO "${rawSchema}".events (${INSERT_COLUMNS}) ` +
    `VALUES (nextval('"${rawSchema}".events_position_seq'), $1, $2, 'Items', 'ItemTouched', $3, $4, $5, $6, $7::jsonb, $8::jsonb, 1)`;
  const versions = new Map<string, number>();
  return async (itemUuid, title) => {
    const version = (versions.get(itemUuid) ?? 0) + 1;
    versions.set(itemUuid, version);
    const client = await pool.connect();
    try {
      await client.query("BEGIN");
      await client.query(insertSql, [newUuid(), TENANT, itemUuid, version, newUuid(), nowNs(), REQ_CTX_JSON, JSON.stringify({ title })]);
      await client.query("COMMIT");
    } finally {
      client.release();
    }
  };
}

/**
 * `total` operations from `c` callers. Each caller works on an aggregate of its own, or, with
 * `freshAggregates`, on a new aggregate per operation.
 */
async function callers(
  c: number,
  total: number,
  op: (itemUuid: string, title: string) => Promise<unknown>,
  freshAggregates = false,
): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: c }, async () => {
      const itemUuid = newUuid();
      while (next < total) {
        const i = next++;
        await op(freshAggregates ? newUuid() : itemUuid, `t${i}`);
      }
    }),
  );
}

/**
 * C concurrent callers. (b) Single-event commands without a load, grouped and without group commit;
 * (d) with `withLoad`, commands that load their aggregate (a fresh one per command) and append: grouped only.
 * The baseline of both is raw `BEGIN; INSERT; COMMIT` on a table of the events table's shape.
 */
async function concurrentBench(b: Bench, schemaOf: (tag: string) => string, withLoad: boolean): Promise<void> {
  const perC = b.quick ? 400 : 2_000;
  const tag = withLoad ? "l" : "";
  for (const c of [1, 4, 16, 32]) {
    const d = itemDomain();
    const grouped = await startFacade(schemaOf(`gc${tag}${c}`), Math.max(10, c));
    const single = withLoad ? undefined : await startFacade(schemaOf(`sc${c}`), Math.max(10, c), 1);
    const facades = single === undefined ? [grouped] : [grouped, single];
    for (const { f } of facades) {
      f.registerDomain(d.Items, d.install);
      await f.start();
    }
    const rawSchema = schemaOf(`raw${tag}${c}`);
    const pool = new pg.Pool({ connectionString: DATABASE_URL, max: c });
    pool.on("error", () => {});
    await rawTables(pool, rawSchema);
    const rawTx = rawTransaction(pool, rawSchema);
    const command = withLoad ? d.TouchItem : d.NoteItem;
    const dispatchWith = (f: Facade) => (itemUuid: string, title: string) => f.dispatch(command, { itemUuid, title }, { reqCtx });
    // Warm-up: connections of every pool opened, plans cached.
    for (const { f } of facades) await callers(c, Math.max(100, 4 * c), dispatchWith(f), withLoad);
    await callers(c, Math.max(100, 4 * c), rawTx, withLoad);
    const rounds = 4;
    const baselines = [{ name: "raw pg BEGIN; INSERT; COMMIT", run: () => callers(c, perC / rounds, rawTx, withLoad) }];
    if (single !== undefined) baselines.unshift({ name: "no group commit", run: () => callers(c, perC / rounds, dispatchWith(single.f)) });
    await duel(
      b,
      "postgres-cmd",
      withLoad ? `load+append, fresh aggregate per command, C = ${c}` : `single-event commands, C = ${c}`,
      perC / rounds,
      rounds,
      () => callers(c, perC / rounds, dispatchWith(grouped.f), withLoad),
      baselines,
      "commands/s",
    );
    for (const { f, backends } of facades) {
      await f.stop();
      await backends.close();
    }
    await pool.end();
  }
}

async function twoInstancesBench(b: Bench, schemaOf: (tag: string) => string): Promise<void> {
  const perInstance = 8;
  const total = b.quick ? 400 : 2_000;
  const d = itemDomain();
  const groupedSchema = schemaOf("gc2i");
  const singleSchema = schemaOf("sc2i");
  const grouped = [await startFacade(groupedSchema, 10), await startFacade(groupedSchema, 10)];
  const single = [await startFacade(singleSchema, 10, 1), await startFacade(singleSchema, 10, 1)];
  for (const { f } of [...grouped, ...single]) {
    f.registerDomain(d.Items, d.install);
    await f.start();
  }
  /** `n` commands from 8 callers on each of the two instances, each caller on its own aggregate. */
  const run = async (instances: { f: Facade }[], n: number): Promise<void> => {
    let next = 0;
    await Promise.all(
      Array.from({ length: 2 * perInstance }, async (_, k) => {
        const f = (instances[k % 2] as { f: Facade }).f;
        const itemUuid = newUuid();
        while (next < n) {
          const i = next++;
          await f.dispatch(d.NoteItem, { itemUuid, title: `t${i}` }, { reqCtx });
        }
      }),
    );
  };
  await run(grouped, 200);
  await run(single, 200);
  const rounds = 4;
  await duel(
    b,
    "postgres-cmd",
    `single-event commands, 2 instances x ${perInstance} callers`,
    total / rounds,
    rounds,
    () => run(grouped, total / rounds),
    [{ name: "no group commit", run: () => run(single, total / rounds) }],
    "commands/s",
  );
  for (const { f, backends } of [...grouped, ...single]) {
    await f.stop();
    await backends.close();
  }
}
