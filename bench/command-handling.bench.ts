/**
 * Command handling on SQLite, the way an application does it: a command loads
 * its aggregate (fold), decides, and appends one event with the loaded version
 * as expected version, its audit record in the same transaction. 1,000
 * streams x 100 commands (BENCH_QUICK=1: 200 x 20), round robin, so streams
 * grow to 100 events.
 *
 * Then the same commands on the in-memory stores (see memoryRuns).
 *
 * Three runs in one sitting, on files of their own: mneme with its aggregate
 * cache (the default), mneme without it (`aggregateCache: false`), and raw
 * better-sqlite3 doing the same work by hand with the same pragmas (WAL,
 * synchronous NORMAL): SELECT the stream, JSON.parse and fold it, then one
 * transaction with the version check, the event INSERT and the record INSERT.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { createFacade } from "../src/app/facade.js";
import { newUuid, nowNs } from "../src/model/clock.js";
import { defineDomain } from "../src/model/domain.js";
import type { DomainInstall } from "../src/model/domain-install.js";
import { MemoryCommandStore } from "../src/memory/memory-command-store.js";
import { MemoryEventRepository } from "../src/memory/memory-event-repository.js";
import { createSqliteBackends } from "../src/sqlite/sqlite-backends.js";
import { BENCH_REQ_CTX as reqCtx, BENCH_TENANT as TENANT, type Bench } from "./harness.js";

interface Deposit {
  accountUuid: string;
  amount: number;
}
interface Account {
  balance: number;
  deposits: number;
}

function bankDomain() {
  const Bank = defineDomain("Bank");
  const Deposited = Bank.event<{ amount: number }>("Deposited");
  const AccountAgg = Bank.aggregate<Account>("Account", {
    initialState: () => ({ balance: 0, deposits: 0 }),
    evolve: { Deposited: (s, p: { amount: number }) => ({ balance: s.balance + p.amount, deposits: s.deposits + 1 }) },
  });
  const DepositCmd = Bank.command<Deposit>("Deposit");
  const install: DomainInstall = (i) => {
    i.handleCommand(DepositCmd, async (ctx, _cmd, p) => {
      const { state } = await ctx.aggregates.load(AccountAgg, p.accountUuid);
      if (state.balance + p.amount < 0) throw new Error("overdrawn");
      return [Deposited.create(p.accountUuid, { amount: p.amount })];
    });
  };
  return { Bank, DepositCmd, install };
}

export default async function commandHandlingBench(b: Bench): Promise<void> {
  const streams = b.quick ? 200 : 1_000;
  const perStream = b.quick ? 20 : 100;
  const total = streams * perStream;
  const dir = mkdtempSync(join(tmpdir(), "mneme-bench-cmd-"));
  const ids = Array.from({ length: streams }, (_, i) => `0190a7a2-0000-7000-8000-${String(i).padStart(12, "0")}`);
  try {
    const raw = rawRun(join(dir, "raw.db"), ids, total);
    const base = b.record("command-handling", "raw better-sqlite3: read+fold, check+insert+record", total, raw, "commands/s");
    for (const cache of [true, false]) {
      const d = bankDomain();
      const f = createFacade({
        appName: "bench-commands",
        ...createSqliteBackends({ filename: join(dir, `mneme-${cache}.db`) }),
        ...(cache ? {} : { aggregateCache: false as const }),
      });
      f.registerDomain(d.Bank, d.install);
      await f.start();
      const t0 = performance.now();
      for (let i = 0; i < total; i++) await f.dispatch(d.DepositCmd, { accountUuid: ids[i % streams]!, amount: 1 }, { reqCtx });
      const seconds = (performance.now() - t0) / 1000;
      const row = b.record(
        "command-handling",
        `sqlite: dispatch load+append, ${streams} x ${perStream}, cache ${cache ? "on" : "off"}`,
        total,
        seconds,
        "commands/s",
      );
      b.compare(row, base);
      if (cache) {
        const s = f.aggregateCacheStats();
        if (s !== undefined)
          b.value("command-handling", "  aggregate cache hit rate", (100 * s.hits) / Math.max(1, s.hits + s.misses), "%");
      }
      await f.stop();
    }
    await memoryRuns(b, ids, perStream);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * The same commands on the in-memory stores (the default of createFacade), with
 * the aggregate cache, against the in-memory repository and command store
 * doing the same work by hand: loadAggregate, fold, append with the loaded
 * version as expected version, record.
 */
async function memoryRuns(b: Bench, ids: readonly string[], perStream: number): Promise<void> {
  const total = ids.length * perStream;
  const raw = { events: new MemoryEventRepository(), records: new MemoryCommandStore() };
  let t0 = performance.now();
  for (let i = 0; i < total; i++) {
    const agg = ids[i % ids.length]!;
    const t = performance.now();
    let state: Account = { balance: 0, deposits: 0 };
    let version = 0;
    for (const e of await raw.events.loadAggregate(agg)) {
      state = { balance: state.balance + (e.payload as { amount: number }).amount, deposits: state.deposits + 1 };
      version = e.version;
    }
    if (state.balance + 1 < 0) throw new Error("overdrawn");
    const commandUuid = newUuid();
    const payload = { accountUuid: agg, amount: 1 };
    const [ev] = await raw.events.append(
      [{ domain: "Bank", name: "Deposited", aggregateUuid: agg, payload: { amount: 1 }, tenantUuid: TENANT, reqCtx, commandUuid }],
      { expectedVersions: { [agg]: version } },
    );
    await raw.records.record({
      commandUuid,
      domain: "Bank",
      name: "Deposit",
      tenantUuid: TENANT,
      reqCtx,
      payload,
      status: "succeeded",
      eventUuids: [ev!.eventUuid],
      createdAt: nowNs(),
      durationMicros: Math.round((performance.now() - t) * 1000),
    });
  }
  const base = b.record(
    "command-handling",
    "raw memory repository + command store: same work",
    total,
    (performance.now() - t0) / 1000,
    "commands/s",
  );
  const d = bankDomain();
  const f = createFacade({ appName: "bench-commands" }).registerDomain(d.Bank, d.install);
  await f.start();
  t0 = performance.now();
  for (let i = 0; i < total; i++) await f.dispatch(d.DepositCmd, { accountUuid: ids[i % ids.length]!, amount: 1 }, { reqCtx });
  const row = b.record(
    "command-handling",
    `memory: dispatch load+append, ${ids.length} x ${perStream}, cache on`,
    total,
    (performance.now() - t0) / 1000,
    "commands/s",
  );
  b.compare(row, base);
  await f.stop();
}

/** The same work by hand on better-sqlite3; returns seconds. */
function rawRun(file: string, ids: readonly string[], total: number): number {
  const db = new Database(file);
  db.pragma("journal_mode = WAL");
  db.pragma("synchronous = NORMAL");
  db.exec(`
    CREATE TABLE events (
      position INTEGER PRIMARY KEY, event_uuid TEXT NOT NULL, tenant_uuid TEXT NOT NULL, domain TEXT NOT NULL, name TEXT NOT NULL,
      aggregate_uuid TEXT NOT NULL, version INTEGER NOT NULL, command_uuid TEXT, created_at INTEGER NOT NULL,
      req_ctx TEXT NOT NULL, payload TEXT, UNIQUE (aggregate_uuid, version));
    CREATE UNIQUE INDEX events_event_uuid ON events (event_uuid);
    CREATE TABLE commands (command_uuid TEXT PRIMARY KEY, domain TEXT NOT NULL, name TEXT NOT NULL, tenant_uuid TEXT NOT NULL,
      status TEXT NOT NULL, created_at INTEGER NOT NULL, record TEXT NOT NULL);
  `);
  const read = db.prepare("SELECT version, payload FROM events WHERE aggregate_uuid = ? ORDER BY version").raw();
  const current = db.prepare("SELECT MAX(version) AS v FROM events WHERE aggregate_uuid = ?").pluck();
  const insert = db.prepare(
    "INSERT INTO events (event_uuid, tenant_uuid, domain, name, aggregate_uuid, version, command_uuid, created_at, req_ctx, payload) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
  );
  const record = db.prepare(
    "INSERT INTO commands (command_uuid, domain, name, tenant_uuid, status, created_at, record) VALUES (?, ?, ?, ?, ?, ?, ?)",
  );
  const commit = db.transaction((agg: string, expected: number, payload: { amount: number }) => {
    const v = (current.get(agg) as number | null) ?? 0;
    if (v !== expected) throw new Error("conflict");
    const commandUuid = newUuid();
    const eventUuid = newUuid();
    const at = nowNs();
    const ctx = JSON.stringify(reqCtx);
    insert.run(eventUuid, TENANT, "Bank", "Deposited", agg, v + 1, commandUuid, at, ctx, JSON.stringify(payload));
    record.run(
      commandUuid,
      "Bank",
      "Deposit",
      TENANT,
      "succeeded",
      at,
      JSON.stringify({ commandUuid, domain: "Bank", name: "Deposit", tenantUuid: TENANT, reqCtx, payload, eventUuids: [eventUuid] }),
    );
  });
  const t0 = performance.now();
  for (let i = 0; i < total; i++) {
    const agg = ids[i % ids.length]!;
    let state: Account = { balance: 0, deposits: 0 };
    let version = 0;
    for (const [v, p] of read.all(agg) as [number, string][]) {
      const e = JSON.parse(p) as { amount: number };
      state = { balance: state.balance + e.amount, deposits: state.deposits + 1 };
      version = v;
    }
    if (state.balance + 1 < 0) throw new Error("overdrawn");
    commit(agg, version, { amount: 1 });
  }
  const seconds = (performance.now() - t0) / 1000;
  db.close();
  return seconds;
}
