/**
 * SQL-table readmodels on a SQLite file and a Postgres schema: handlers write
 * the application's tables in the batch's transaction (rows carry their
 * tenant, query handlers see their tenant's rows, on a second instance too),
 * a handler's error rolls its writes back, a restore from zero builds new
 * tables beside the served ones and switches atomically, and a batch in
 * flight when another instance took the lock over writes nothing.
 */
import type { Kysely } from "kysely";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { createFacade, type Facade, isMnemeError, SqlTableReadmodel, withReadmodelStoreBackend } from "mneme";
import { MemoryReadmodelStoreBackend } from "mneme/memory";
import type { SqlTables } from "mneme/types";
import { supportsSqlTables, type ReadmodelStoreBackend, type SqlTableAccess } from "mneme/store";
import { createPostgresBackends, PostgresReadmodelStoreBackend } from "mneme/postgres";
import { createSqliteBackends, SqliteReadmodelStoreBackend } from "mneme/sqlite";
import { describeSqlTableAccessContract } from "mneme/testing";
import { runnerOf } from "../../src/readmodel/base-event-handler.js";
import { loadKysely } from "../../src/readmodel/sql-kysely.js";
import { assertKeepsTransaction } from "../../src/sqlite/sqlite-sql-table-access.js";
import type { PoolClient } from "pg";
import { gate } from "../support/gated-totals.js";
import { postgresScratch } from "../support/postgres-scratch.js";
import { alice, bob } from "../support/shared-places.js";
import { Add, AddMany, Added, GetTotals, SqlTally, Tally } from "../support/sql-tally.js";
import { SQLITE_DRIVERS } from "../support/sqlite-drivers.js";
import { expireLeases, sqliteScratch } from "../support/sqlite-scratch.js";
import { until } from "../support/until.js";

const pg = postgresScratch("mneme_sqltables");
const files = sqliteScratch("sqltables");
const facades: Facade[] = [];
afterAll(async () => {
  for (const f of facades) await f.stop().catch(() => undefined);
});

interface Instance {
  f: Facade;
  tally: SqlTally;
  backend: ReadmodelStoreBackend;
  access: SqlTableAccess;
  info: () => ReturnType<Facade["runtime"]["listEventHandlers"]>[number];
  /** Makes another instance able to take this one's lock (its lease expired, or its lock connection killed). */
  loseLock: () => Promise<void>;
}

/** A fresh database; the function gives one more instance on it (`lockRetryMs`: how often it retries a lock it lacks, default 20). */
type Place = () => (lockRetryMs?: number) => Instance;

function build(backends: ReturnType<typeof createSqliteBackends>, loseLock: () => Promise<void>, lockRetryMs = 20): Instance {
  const f = createFacade({ appName: "sqltables", ...backends, delivery: { lockRetryMs } });
  f.registerDomain(Tally);
  const tally = new SqlTally(f);
  f.registerReadmodel(tally);
  facades.push(f);
  files.keep(f);
  const backend = backends.readmodelStoreBackend;
  if (!supportsSqlTables(backend)) throw new Error("no SQL tables");
  return {
    f,
    tally,
    backend,
    access: backend.sqlTables(),
    info: () => f.runtime.listEventHandlers().find((h) => h.eventHandlerName === "SqlTally")!,
    loseLock,
  };
}

const places: [string, Place][] = [
  ...SQLITE_DRIVERS.map((driver): [string, Place] => [
    `sqlite (${driver})`,
    () => {
      const filename = files.newFile();
      return (lockRetryMs?: number) =>
        build(
          createSqliteBackends({ filename, driver, pollIntervalMs: 20, lockLeaseMs: 3_600_000 }),
          async () => expireLeases(filename, driver),
          lockRetryMs,
        );
    },
  ]),
  [
    "postgres",
    () => {
      const schema = pg.newSchema();
      return (lockRetryMs?: number) => {
        let lockPid: number | undefined;
        const backends = createPostgresBackends({
          pool: pg.newPool(6),
          schema,
          pollIntervalMs: 30,
          onStatement: (s) => {
            if (s.kind === "lock") lockPid = s.processId;
          },
        });
        return build(
          backends as unknown as ReturnType<typeof createSqliteBackends>,
          async () => {
            await pg.pool.query("SELECT pg_terminate_backend($1)", [lockPid]);
          },
          lockRetryMs,
        );
      };
    },
  ],
];

/** The tables and views of the database whose names start with `prefix`. */
async function relations(access: SqlTableAccess, prefix: string): Promise<string[]> {
  const rows =
    access.dialect === "sqlite"
      ? await access.execute<{ name: string }>(
          `SELECT name FROM sqlite_master WHERE type IN ('table', 'view') AND name LIKE ? ORDER BY name`,
          [`${prefix}%`],
        )
      : await access.execute<{ name: string }>(
          `SELECT table_name AS name FROM information_schema.tables WHERE table_schema = $1 AND table_name LIKE $2 ORDER BY table_name`,
          [access.schema, `${prefix}%`],
        );
  return rows.rows.map((r) => r.name);
}

for (const driver of SQLITE_DRIVERS)
  describeSqlTableAccessContract(
    `SqliteReadmodelStoreBackend (${driver})`,
    async () => new SqliteReadmodelStoreBackend({ filename: files.newFile(), driver }),
  );
describeSqlTableAccessContract(
  "PostgresReadmodelStoreBackend",
  async () => new PostgresReadmodelStoreBackend({ pool: pg.pool, schema: pg.newSchema() }),
);

describe.each(places)("SQL-table readmodel on %s", (_name, place) => {
  it("handlers write the tables in the batch; query handlers see their tenant's rows; trusted code sees all; a second instance reads the same", async () => {
    const on = place();
    const a = on();
    await a.f.start();
    await a.f.dispatch(Add, { counterUuid: "a1", by: 1 }, { reqCtx: alice, waitToFinish: true });
    await a.f.dispatch(Add, { counterUuid: "a2", by: 2 }, { reqCtx: alice, waitToFinish: true });
    await a.f.dispatch(Add, { counterUuid: "a1", by: 3 }, { reqCtx: alice, waitToFinish: true });
    await a.f.dispatch(Add, { counterUuid: "b1", by: 10 }, { reqCtx: bob, waitToFinish: true });

    expect(await a.f.query(GetTotals, {}, { reqCtx: alice })).toEqual({ totals: { a1: 4, a2: 2 } });
    expect(await a.f.query(GetTotals, {}, { reqCtx: bob })).toEqual({ totals: { b1: 10 } });
    expect(await a.tally.totals()).toEqual({ a1: 4, a2: 2, b1: 10 });
    expect(await a.tally.asTenant("tenant-b").totalsViaKysely()).toEqual({ b1: 10 });
    expect(await a.tally.totalsViaKysely()).toEqual({ a1: 4, a2: 2, b1: 10 });
    // A global table is shared by every tenant's view.
    expect(await a.tally.asTenant("tenant-b").appliedTimes()).toEqual({ 1: 1, 2: 1, 3: 1, 4: 1 });
    // Rows carry their tenant.
    const rows = await a.access.execute<{ tenant_uuid: string; counter: string }>(
      `SELECT tenant_uuid, counter FROM ${a.access.qualify("totals")} ORDER BY counter`,
    );
    expect(rows.rows.map((r) => [r.tenant_uuid, r.counter])).toEqual([
      ["tenant-a", "a1"],
      ["tenant-a", "a2"],
      ["tenant-b", "b1"],
    ]);

    const b = on();
    await b.f.start();
    expect(b.info().state).toBe("standby");
    expect(await b.f.query(GetTotals, {}, { reqCtx: alice })).toEqual({ totals: { a1: 4, a2: 2 } });

    // Through Kysely in the handler, in the same transaction.
    a.tally.viaKysely = true;
    await a.f.dispatch(Add, { counterUuid: "b1", by: 5 }, { reqCtx: bob, waitToFinish: true });
    expect(await b.f.query(GetTotals, {}, { reqCtx: bob })).toEqual({ totals: { b1: 15 } });
    expect(await a.tally.appliedTimes()).toEqual({ 1: 1, 2: 1, 3: 1, 4: 1, 5: 1 });
  });

  it("a handler that throws rolls its writes back; the events before it in the batch commit", async () => {
    const a = place()();
    await a.f.start();
    a.tally.failOn = (e) => e.position === 3;
    await a.f.dispatch(AddMany, { counterUuids: ["x", "y", "z", "w"], by: 1 }, { reqCtx: alice });
    await until(() => a.info().state === "failed", "the handler fails");
    expect(await a.backend.getCheckpoint("SqlTally")).toBe(2);
    expect(await a.tally.totals()).toEqual({ x: 1, y: 1 });
    expect(await a.tally.appliedTimes()).toEqual({ 1: 1, 2: 1 });
    a.tally.failOn = undefined;
    await a.f.runtime.controlEventHandler({ action: "start", eventHandlerName: "SqlTally" });
    await until(async () => (await a.backend.getCheckpoint("SqlTally")) === 4, "the handler resumes");
    expect(await a.tally.totals()).toEqual({ w: 1, x: 1, y: 1, z: 1 });
    expect(await a.tally.appliedTimes()).toEqual({ 1: 1, 2: 1, 3: 1, 4: 1 });
  });

  it("a restore from zero builds new tables beside the served ones while queries read the old, then switches and drops the old", async () => {
    const a = place()();
    await a.f.start();
    for (let i = 0; i < 5; i++) await a.f.dispatch(Add, { counterUuid: `c${i % 2}`, by: i + 1 }, { reqCtx: alice, waitToFinish: true });
    expect(await relations(a.access, "totals")).toEqual(["totals", "totals__g1"]);
    const before = { totals: { c0: 9, c1: 6 } };
    expect(await a.f.query(GetTotals, {}, { reqCtx: alice })).toEqual(before);

    const held = gate();
    const entered = gate();
    a.tally.holdAt = { position: 3, entered: entered.open, wait: held.wait };
    const rebuild = a.tally.restoreState(undefined, { fromZero: true });
    await entered.wait;
    // The next generation is being built beside the served one: queries see the old rows, whole.
    expect(await relations(a.access, "totals")).toEqual(["totals", "totals__g1", "totals__g2"]);
    expect(await a.f.query(GetTotals, {}, { reqCtx: alice })).toEqual(before);
    // A live event meanwhile is caught, applied to the new generation before the switch.
    await a.f.dispatch(Add, { counterUuid: "c9", by: 100 }, { reqCtx: alice });
    expect(await a.f.query(GetTotals, {}, { reqCtx: alice })).toEqual(before);
    held.open();
    const report = await rebuild.done;
    expect(report.toPosition).toBe(6);
    expect(await a.f.query(GetTotals, {}, { reqCtx: alice })).toEqual({ totals: { c0: 9, c1: 6, c9: 100 } });
    expect(await relations(a.access, "totals")).toEqual(["totals", "totals__g2"]);
    expect(await a.tally.appliedTimes()).toEqual({ 1: 1, 2: 1, 3: 1, 4: 1, 5: 1, 6: 1 });
    // Live delivery goes on into the new generation.
    await a.f.dispatch(Add, { counterUuid: "c0", by: 1 }, { reqCtx: alice, waitToFinish: true });
    expect(await a.f.query(GetTotals, {}, { reqCtx: alice })).toEqual({ totals: { c0: 10, c1: 6, c9: 100 } });

    // A cancelled rebuild drops its tables and leaves the served ones.
    const held2 = gate();
    const entered2 = gate();
    a.tally.holdAt = { position: 2, entered: entered2.open, wait: held2.wait };
    const cancelled = a.tally.restoreState(undefined, { fromZero: true });
    await entered2.wait;
    expect(await relations(a.access, "totals")).toEqual(["totals", "totals__g2", "totals__g3"]);
    cancelled.cancel();
    held2.open();
    await expect(cancelled.done).rejects.toSatisfy((e: unknown) => isMnemeError(e, "RESTORE_CANCELLED"));
    expect(await relations(a.access, "totals")).toEqual(["totals", "totals__g2"]);
    expect(await a.f.query(GetTotals, {}, { reqCtx: alice })).toEqual({ totals: { c0: 10, c1: 6, c9: 100 } });
  });

  it("a crashed rebuild's tables are dropped at the next start; the served ones stay", async () => {
    const on = place();
    const a = on();
    await a.f.start();
    await a.f.dispatch(Add, { counterUuid: "c", by: 2 }, { reqCtx: alice, waitToFinish: true });
    await a.f.stop();
    // What a crash in the middle of a rebuild leaves: the next generation's tables, and its checkpoint past 0.
    const b = on();
    await b.backend.init();
    await b.access.execute(
      `CREATE TABLE ${b.access.qualify("totals__g2")} (tenant_uuid TEXT NOT NULL, counter TEXT NOT NULL, total BIGINT NOT NULL)`,
    );
    await b.access.execute(`CREATE TABLE ${b.access.qualify("applied__g2")} (position BIGINT PRIMARY KEY, times BIGINT NOT NULL)`);
    await b.backend.setCheckpoint("SqlTally#rebuild", 1);
    expect(await relations(b.access, "totals")).toEqual(["totals", "totals__g1", "totals__g2"]);
    await b.f.start();
    expect(await relations(b.access, "totals")).toEqual(["totals", "totals__g1"]);
    expect(await relations(b.access, "applied")).toEqual(["applied", "applied__g1"]);
    expect(await b.f.query(GetTotals, {}, { reqCtx: alice })).toEqual({ totals: { c: 2 } });
    // And a restore from zero afterwards builds generation 2 afresh.
    await b.tally.restoreState(undefined, { fromZero: true }).done;
    expect(await relations(b.access, "totals")).toEqual(["totals", "totals__g2"]);
    expect(await b.f.query(GetTotals, {}, { reqCtx: alice })).toEqual({ totals: { c: 2 } });
  });

  it("fencing: a batch in flight when another instance took the lock over writes nothing; each event applies once", async () => {
    const on = place();
    // a takes the lock first and, once it lost it, retries only after a minute: b (every 20 ms) is the one that takes over.
    const a = on(60_000);
    const b = on();
    await a.f.start();
    await b.f.start();
    expect([a.info().state, b.info().state]).toEqual(["running", "standby"]);
    await a.f.dispatch(Add, { counterUuid: "k", by: 1 }, { reqCtx: alice, waitToFinish: true });

    const held = gate();
    const entered = gate();
    a.tally.holdAt = { position: 2, entered: entered.open, wait: held.wait };
    await a.f.dispatch(Add, { counterUuid: "k", by: 10 }, { reqCtx: alice });
    await entered.wait;
    await a.loseLock();
    await until(() => b.info().state === "running", "b takes over");
    await b.f.dispatch(Add, { counterUuid: "k", by: 100 }, { reqCtx: alice, waitToFinish: true });
    await until(async () => (await b.backend.getCheckpoint("SqlTally")) === 3, "b applies positions 2 and 3");

    held.open();
    await runnerOf(a.tally).idle();
    expect(await b.backend.getCheckpoint("SqlTally")).toBe(3);
    expect(await b.tally.totals()).toEqual({ k: 111 });
    expect(await b.tally.appliedTimes()).toEqual({ 1: 1, 2: 1, 3: 1 });
  });
});

/** The probe's Kysely instance, untyped (the tests write any column). */
function kysely(sql: SqlTables<never>): Kysely<Record<string, Record<string, unknown>>> {
  return sql.kysely as unknown as Kysely<Record<string, Record<string, unknown>>>;
}

/** A readmodel whose one handler runs `body` (what a test wants refused), recording the error it throws. */
class Probe extends SqlTableReadmodel {
  error: unknown;
  constructor(f: Facade, ddl: string, body: (sql: SqlTables<never>) => Promise<unknown>) {
    super(f, { tables: { things: {} }, ddl: (t) => [ddl.replace("$T", t("things"))] });
    this.domain = "Tally";
    this.name = "Probe";
    this.addDomainEventHandler(Added, async () => {
      try {
        await body(this.sql as unknown as SqlTables<never>);
      } catch (e) {
        this.error = e;
        throw e;
      }
    });
  }

  /** A write of trusted code (unscoped, or in a tenant's view through asTenant). */
  insertRow(row: Record<string, unknown>): Promise<void> {
    return this.sql.insert("things", row);
  }
}

/** One pool for every probe's facade (each is stopped after its test): a shared server has few connections to spare. */
let probePoolInstance: ReturnType<typeof pg.newPool> | undefined;
const probePool = () => (probePoolInstance ??= pg.newPool(6));

const probeBackends: [string, () => ReturnType<typeof createSqliteBackends>][] = [
  ...SQLITE_DRIVERS.map((driver): [string, () => ReturnType<typeof createSqliteBackends>] => [
    `sqlite (${driver})`,
    () => createSqliteBackends({ filename: files.newFile(), driver }),
  ]),
  [
    "postgres",
    () =>
      createPostgresBackends({ pool: probePool(), schema: pg.newSchema(), pollIntervalMs: 30 }) as unknown as ReturnType<
        typeof createSqliteBackends
      >,
  ],
];

describe.each(probeBackends)("SQL-table readmodel: what it refuses (%s)", (_name, backends) => {
  const started: Facade[] = [];
  afterEach(async () => {
    for (const f of started.splice(0)) await f.stop().catch(() => undefined);
  });
  const start = async (ddl: string, body: (sql: SqlTables<never>) => Promise<unknown>) => {
    const f = createFacade({ appName: "sqltables-probe", ...backends() });
    started.push(f);
    f.registerDomain(Tally);
    const probe = new Probe(f, ddl, body);
    f.registerReadmodel(probe);
    facades.push(f);
    files.keep(f);
    return { f, probe };
  };
  const WITH_TENANT = "CREATE TABLE $T (tenant_uuid TEXT NOT NULL, k TEXT PRIMARY KEY)";

  it("a tenant table without tenant_uuid is refused at start", async () => {
    const { f } = await start("CREATE TABLE $T (k TEXT PRIMARY KEY)", async () => undefined);
    await expect(f.start()).rejects.toThrow(/table things is tenant-scoped but has no tenant_uuid column/);
  });

  it.each([
    ["a row of another tenant", (sql: SqlTables<never>) => sql.insert("things", { tenant_uuid: "tenant-b", k: "x" }), "INVALID_REQUEST"],
    [
      "a row of its own tenant, named",
      (sql: SqlTables<never>) => sql.insert("things", { tenant_uuid: "tenant-a", k: "x" }),
      "INVALID_REQUEST",
    ],
    ["TENANT_UUID through insert", (sql: SqlTables<never>) => sql.insert("things", { k: "x", TENANT_UUID: "tenant-b" }), "INVALID_REQUEST"],
    [
      "Tenant_Uuid through upsert",
      (sql: SqlTables<never>) => sql.upsert("things", { k: "x", Tenant_Uuid: "tenant-b" }, { key: ["k"] }),
      "INVALID_REQUEST",
    ],
    ["two spellings of one column", (sql: SqlTables<never>) => sql.insert("things", { k: "x", K: "y" }), "INVALID_REQUEST"],
    ["a quoted column name", (sql: SqlTables<never>) => sql.insert("things", { k: "x", '"tenant_uuid"': "tenant-b" }), "INVALID_REQUEST"],
    [
      "TENANT_UUID through Kysely",
      (sql: SqlTables<never>) => kysely(sql).insertInto("things").values({ k: "x", TENANT_UUID: "tenant-b" }).execute(),
      "INVALID_REQUEST",
    ],
    [
      "another tenant through Kysely",
      (sql: SqlTables<never>) => kysely(sql).insertInto("things").values({ k: "x", tenant_uuid: "tenant-b" }).execute(),
      "INVALID_REQUEST",
    ],
    [
      "a tenant moved by a Kysely update",
      (sql: SqlTables<never>) => kysely(sql).updateTable("things").set({ tenant_uuid: "tenant-b" }).where("k", "=", "before").execute(),
      "INVALID_REQUEST",
    ],
    ["/* */ COMMIT", (sql: SqlTables<never>) => sql.query("/* audit */ COMMIT"), "INVALID_REQUEST"],
    ["-- COMMIT", (sql: SqlTables<never>) => sql.query("-- note\nCOMMIT"), "INVALID_REQUEST"],
    ["SELECT 1; COMMIT", (sql: SqlTables<never>) => sql.query("SELECT 1; COMMIT"), "INVALID_REQUEST"],
    ["BEGIN", (sql: SqlTables<never>) => sql.query("BEGIN"), "INVALID_REQUEST"],
    ["a Kysely transaction", (sql: SqlTables<never>) => sql.kysely.transaction().execute(async () => undefined), "INVALID_REQUEST"],
    ["an undeclared table", (sql: SqlTables<never>) => sql.insert("nope", { k: "x" }), "INVALID_REQUEST"],
  ] as const)("a handler writing %s fails with %s, writing nothing", async (_what, body, code) => {
    const { f, probe } = await start(WITH_TENANT, async (sql) => {
      // A good row first: the refusal must take it back too.
      await sql.insert("things", { k: "before" });
      await (body as (sql: SqlTables<never>) => Promise<unknown>)(sql);
    });
    await f.start();
    await f.dispatch(Add, { counterUuid: "k", by: 1 }, { reqCtx: alice });
    await until(() => f.runtime.listEventHandlers().find((h) => h.eventHandlerName === "Probe")?.state === "failed", "the probe fails");
    expect(isMnemeError(probe.error, code), String(probe.error)).toBe(true);
    expect(await f.readmodelStoreBackend.getCheckpoint("Probe")).toBe(0);
    const access = (f.readmodelStoreBackend as unknown as { sqlTables(): SqlTableAccess }).sqlTables();
    expect((await access.execute(`SELECT k, tenant_uuid FROM ${access.qualify("things")}`)).rows).toEqual([]);
  });

  it("a handler's Kysely update, delete and ON CONFLICT update reach only its tenant's rows, whatever their WHERE", async () => {
    const counts: unknown[] = [];
    const { f, probe } = await start("CREATE TABLE $T (tenant_uuid TEXT NOT NULL, k TEXT PRIMARY KEY, v TEXT)", async (sql) => {
      const k = kysely(sql);
      // Bob's event writes his row; Alice's writes hers, then reaches for every row.
      if (sql.tenantUuid === "tenant-b") return sql.insert("things", { k: "b-row", v: "b" });
      await sql.insert("things", { k: "a-row", v: "a" });
      counts.push(
        (await k.updateTable("things").set({ v: "taken" }).where("k", "in", ["b-row", "a-row"]).executeTakeFirst()).numUpdatedRows,
      );
      await k
        .insertInto("things")
        .values({ k: "b-row", v: "upserted", tenant_uuid: sql.tenantUuid })
        .onConflict((oc) => oc.column("k").doUpdateSet({ v: "upserted" }))
        .execute();
      counts.push((await k.deleteFrom("things").where("k", "like", "%-row").executeTakeFirst()).numDeletedRows);
    });
    await f.start();
    await f.dispatch(Add, { counterUuid: "k", by: 1 }, { reqCtx: bob, waitToFinish: true });
    await f.dispatch(Add, { counterUuid: "k2", by: 1 }, { reqCtx: alice, waitToFinish: true });
    expect(probe.error).toBeUndefined();
    // Alice's own row only: updated, then deleted; Bob's stays as it was (the upsert found it and left it alone).
    // (SQLite runs a handler's statements at the batch's commit: no counts in the handler.)
    if (_name === "postgres") expect(counts).toEqual([1n, 1n]);
    const access = (f.readmodelStoreBackend as unknown as { sqlTables(): SqlTableAccess }).sqlTables();
    expect((await access.execute(`SELECT k, v, tenant_uuid FROM ${access.qualify("things")}`)).rows).toEqual([
      { k: "b-row", v: "b", tenant_uuid: "tenant-b" },
    ]);
  });

  it("outside a handler and a tenant's view a tenant table's row has no tenant to get, and no view lets a row name one: INVALID_REQUEST", async () => {
    const { f, probe } = await start(WITH_TENANT, async () => undefined);
    await f.start();
    await expect(probe.insertRow({ k: "x" })).rejects.toSatisfy((e: unknown) => isMnemeError(e, "INVALID_REQUEST"));
    await expect(probe.insertRow({ k: "x", tenant_uuid: "tenant-b" })).rejects.toSatisfy((e: unknown) =>
      isMnemeError(e, "INVALID_REQUEST"),
    );
    await expect(probe.asTenant("tenant-b").insertRow({ k: "x", TENANT_UUID: "tenant-a" })).rejects.toSatisfy((e: unknown) =>
      isMnemeError(e, "INVALID_REQUEST"),
    );
  });
});

describe("SQL-table readmodel: what it needs", () => {
  it("a backend without SQL tables is refused at start, naming what it needs", async () => {
    const f = createFacade({ appName: "sqltables-memory" });
    f.registerDomain(Tally);
    f.registerReadmodel(new SqlTally(f, withReadmodelStoreBackend(new MemoryReadmodelStoreBackend())));
    facades.push(f);
    await expect(f.start()).rejects.toThrow(/SqlTableReadmodel needs the SQLite or Postgres backend/);
  });

  it("a missing kysely is a MnemeError naming the package and how to install it", async () => {
    const err = await loadKysely("kysely-not-installed-here").catch((e: unknown) => e);
    expect(isMnemeError(err, "INVALID_REQUEST")).toBe(true);
    expect((err as Error).message).toContain("npm install kysely-not-installed-here");
  });
});

describe("SQL tables: the backends' own checks, behind the statement check", () => {
  it.each(SQLITE_DRIVERS)(
    "SQLite (%s): the engine refuses a program that ends or nests the transaction, however the text reads",
    async (driver) => {
      const backend = new SqliteReadmodelStoreBackend({ filename: files.newFile(), driver });
      await backend.init();
      const db = backend.connection();
      for (const sql of ["COMMIT", "/* x */ end", "ROLLBACK TO s", "RELEASE s", "BEGIN IMMEDIATE", "SAVEPOINT s"]) {
        expect(() => assertKeepsTransaction(db, sql, []), sql).toThrow(expect.objectContaining({ code: "INVALID_REQUEST" }));
      }
      expect(() => assertKeepsTransaction(db, "SELECT ?", [1])).not.toThrow();
      await backend.close();
    },
  );

  it("Postgres: a transaction ended behind the checks (the raw client) is INVALID_REQUEST at the next statement and at the commit", async () => {
    const backend = new PostgresReadmodelStoreBackend({ pool: pg.pool, schema: pg.newSchema() });
    await backend.init();
    const access = backend.sqlTables();
    await access.execute(`CREATE TABLE ${access.qualify("smuggled")} (k TEXT)`);
    const atStatement = await backend
      .transaction(async () => {
        await (backend.transactionDriverClient() as PoolClient).query("COMMIT");
        await access.execute(`INSERT INTO ${access.qualify("smuggled")} (k) VALUES ('after')`);
      })
      .catch((e: unknown) => e);
    expect(isMnemeError(atStatement, "INVALID_REQUEST"), String(atStatement)).toBe(true);
    const atCommit = await backend
      .transaction(async () => {
        await (backend.transactionDriverClient() as PoolClient).query("ROLLBACK");
        await backend.setCheckpoint("smuggler", 5);
      })
      .catch((e: unknown) => e);
    expect(isMnemeError(atCommit, "INVALID_REQUEST"), String(atCommit)).toBe(true);
    expect(await backend.getCheckpoint("smuggler")).toBe(0);
    await backend.close();
  });
});
