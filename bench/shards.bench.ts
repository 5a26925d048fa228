/**
 * Tenant shards (mneme/shards), on DATABASE_URL (default
 * postgres://postgres@127.0.0.1:5432/test; schemas of its own, dropped at the end).
 *
 * (a) Routing: the router's placement lookup alone (ns per call), then
 * single-event commands (one load, one append) from 16 concurrent callers of
 * one tenant through the sharded app's router, against the same shard's
 * facade called directly and against a plain facade on a schema of its own
 * (no write fence), in interleaved rounds of one run.
 *
 * (b) A tenant move of 100,000 events (BENCH_QUICK=1: 20,000) between two
 * schemas, with one caller writing to the tenant all along: the move's time,
 * the time its writes were paused (from the report, and the slowest command
 * the caller saw), against raw pg copying the same rows (keyset SELECT pages
 * from the source, one multi-row INSERT per page into the target) in the same run.
 */
import pg from "pg";
import { createFacade } from "../src/app/facade.js";
import { newUuid } from "../src/model/clock.js";
import { defineDomain } from "../src/model/domain.js";
import { anonymous } from "../src/model/permission.js";
import type { Facade } from "../src/app/facade.js";
import { createPostgresBackends } from "../src/postgres/postgres-backends.js";
import { PostgresEventRepository } from "../src/postgres/postgres-event-repository.js";
import { createShardedApp, type ShardedApp } from "../src/shards/sharded-app.js";
import { type Bench, duel } from "./harness.js";

const DATABASE_URL = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test";
const TENANT = "0190a7a2-7d3c-7b5e-9f00-00000000bead";

function ledger() {
  const Ledger = defineDomain("Ledger");
  const Deposited = Ledger.event<{ amount: number }>("Deposited");
  const Account = Ledger.aggregate<{ balance: number }>("Account", {
    initialState: () => ({ balance: 0 }),
    evolve: { Deposited: (s, p: { amount: number }) => ({ balance: s.balance + p.amount }) },
  });
  const Deposit = Ledger.command<{ accountUuid: string; amount: number }>("Deposit", { permission: anonymous });
  const configure = (f: Facade): void => {
    f.registerDomain(Ledger, (d) =>
      d.handleCommand(Deposit, async (ctx, _c, p) => {
        await ctx.aggregates.load(Account, p.accountUuid);
        return [Deposited.create(p.accountUuid, { amount: p.amount })];
      }),
    );
  };
  return { Deposit, configure };
}

/** One definition for every facade of the bench, as an app defines its domains once. */
const LEDGER = ledger();

export default async function shardsBench(b: Bench): Promise<void> {
  const admin = new pg.Pool({ connectionString: DATABASE_URL, max: 4 });
  admin.on("error", () => {});
  try {
    await admin.query("SELECT 1");
  } catch (e) {
    console.log(`  shards: skipped, no database (${String(e)})`);
    await admin.end();
    return;
  }
  const tag = String(process.pid);
  const schemas = [
    `mneme_bench_shc_${tag}`,
    `mneme_bench_sh0_${tag}`,
    `mneme_bench_sh1_${tag}`,
    `mneme_bench_plain_${tag}`,
    `mneme_bench_raw_${tag}`,
  ];
  const app = createShardedApp({
    control: { connectionString: DATABASE_URL, schema: schemas[0]! },
    shards: [
      { name: "s0", connectionString: DATABASE_URL, schema: schemas[1]!, poolSize: 20 },
      { name: "s1", connectionString: DATABASE_URL, schema: schemas[2]!, poolSize: 20 },
    ],
    configure: (f) => LEDGER.configure(f),
  });
  try {
    await app.start();
    await app.placeTenant(TENANT, { shard: "s0" });
    await routingBench(b, app, schemas[3]!);
    await moveBench(b, app, admin, schemas[4]!);
  } finally {
    await app.stop();
    for (const s of schemas) await admin.query(`DROP SCHEMA IF EXISTS "${s}" CASCADE`).catch(() => undefined);
    await admin.end();
  }
}

async function routingBench(b: Bench, app: ShardedApp, plainSchema: string): Promise<void> {
  const { Deposit, configure } = LEDGER;
  const plain = createFacade({
    appName: "bench-plain",
    ...createPostgresBackends({ connectionString: DATABASE_URL, schema: plainSchema, poolSize: 20 }),
  });
  configure(plain);
  await plain.start();
  const callers = 16;
  const perCaller = b.quick ? 40 : 150;
  const reqCtx = { senderTenantUuid: TENANT };
  const round = (dispatch: (accountUuid: string) => Promise<unknown>) => async () => {
    await Promise.all(
      Array.from({ length: callers }, async () => {
        const accountUuid = newUuid();
        for (let k = 0; k < perCaller; k++) await dispatch(accountUuid);
      }),
    );
  };
  // The router's own work, alone: the placement lookup and the shard's facade, per call.
  const lookups = 200_000;
  const l0 = performance.now();
  for (let i = 0; i < lookups; i++) await app.facadeFor(TENANT);
  b.value("shards", "routing alone (placement lookup), per call", ((performance.now() - l0) * 1e6) / lookups, "ns");
  const routed = round((accountUuid) => app.dispatch(Deposit, { accountUuid, amount: 1 }, { reqCtx }));
  const direct = round((accountUuid) => app.shard("s0").dispatch(Deposit, { accountUuid, amount: 1 }, { reqCtx }));
  const plainRound = round((accountUuid) => plain.dispatch(Deposit, { accountUuid, amount: 1 }, { reqCtx }));
  try {
    // One untimed round of each side first: the JIT and each pool's prepared statements are warm before timing.
    for (const warm of [routed, direct, plainRound]) await warm();
    await duel(
      b,
      "shards",
      `routed commands, ${callers} callers (load + append)`,
      callers * perCaller,
      b.quick ? 4 : 10,
      routed,
      [
        { name: "the shard's facade, direct", run: direct },
        { name: "a plain facade, no fence", run: plainRound },
      ],
      "commands/s",
    );
  } finally {
    await plain.stop();
  }
}

/** Appends `n` events of the tenant to s0 (100 per aggregate), 2,000 per call, straight through its repository. */
async function preload(pool: pg.Pool, schema: string, n: number): Promise<void> {
  const repo = new PostgresEventRepository({ pool, schema, pollIntervalMs: 0 });
  let agg = newUuid();
  for (let i = 0; i < n; i += 2000) {
    const events = [];
    for (let k = i; k < Math.min(n, i + 2000); k++) {
      if (k % 100 === 0) agg = newUuid();
      events.push({
        domain: "Ledger",
        name: "Deposited",
        aggregateUuid: agg,
        tenantUuid: TENANT,
        reqCtx: { senderTenantUuid: TENANT },
        payload: { amount: k },
      });
    }
    await repo.append(events);
  }
  await repo.close();
}

async function moveBench(b: Bench, app: ShardedApp, admin: pg.Pool, rawSchema: string): Promise<void> {
  const n = b.quick ? 20_000 : 100_000;
  const [s0, s1] = [`mneme_bench_sh0_${String(process.pid)}`, `mneme_bench_sh1_${String(process.pid)}`];
  await preload(admin, s0, n);
  const raw = await rawCopy(admin, s0, rawSchema);
  b.record("shards", `raw pg: copy ${String(raw.rows)} events (SELECT pages -> multi-row INSERT)`, raw.rows, raw.seconds, "events/s");
  // One caller writes to the tenant during the whole move; its slowest command shows the pause as a caller sees it.
  const { Deposit } = ledger();
  let stop = false;
  let slowest = 0;
  const accountUuid = newUuid();
  const caller = (async () => {
    while (!stop) {
      const t0 = performance.now();
      await app.dispatch(Deposit, { accountUuid, amount: 1 }, { reqCtx: { senderTenantUuid: TENANT } });
      slowest = Math.max(slowest, performance.now() - t0);
    }
  })();
  const t0 = performance.now();
  const report = await app.moveTenant(TENANT, "s1", { handlerWaitMs: 60_000 });
  const seconds = (performance.now() - t0) / 1000;
  stop = true;
  await caller;
  const row = b.record(
    "shards",
    `tenant move of ${String(report.copied)} events (copy, pause, verify, switch)`,
    report.copied,
    seconds,
    "events/s",
  );
  b.compare(row, b.record("shards", "raw pg copy of the same rows (above)", raw.rows, raw.seconds, "events/s"));
  b.value("shards", "writes paused (report.pausedMs)", report.pausedMs, "ms");
  b.value("shards", "slowest command of the caller during the move", slowest, "ms");
  b.value("shards", `the move, whole (${s0} -> ${s1})`, seconds * 1000, "ms");
}

/** Raw pg: the tenant's rows copied in keyset pages of 5,000 into a plain table of the same columns. */
async function rawCopy(pool: pg.Pool, source: string, target: string): Promise<{ rows: number; seconds: number }> {
  await pool.query(`CREATE SCHEMA IF NOT EXISTS "${target}"`);
  await pool.query(`CREATE TABLE "${target}".events (LIKE "${source}".events INCLUDING ALL)`);
  const cols =
    "position, event_uuid, tenant_uuid, domain, name, aggregate_uuid, version, command_uuid, created_at, req_ctx, payload, event_version";
  const t0 = performance.now();
  let after = 0;
  let rows = 0;
  for (;;) {
    const page = await pool.query<Record<string, unknown>>(
      `SELECT ${cols} FROM "${source}".events AS e WHERE tenant_uuid = $1 AND e.position > $2 ORDER BY e.position LIMIT 5000`,
      [TENANT, after],
    );
    if (page.rows.length === 0) break;
    const names = cols.split(", ");
    const types = ["bigint", "text", "text", "text", "text", "text", "int", "text", "bigint", "jsonb", "jsonb", "int"];
    await pool.query(
      `INSERT INTO "${target}".events (${cols}) SELECT * FROM unnest(${types.map((t, i) => `$${String(i + 1)}::${t}[]`).join(", ")})`,
      names.map((c) => page.rows.map((r) => (c === "req_ctx" || c === "payload" ? JSON.stringify(r[c]) : r[c]))),
    );
    rows += page.rows.length;
    after = Number(page.rows.at(-1)!.position);
  }
  return { rows, seconds: (performance.now() - t0) / 1000 };
}
