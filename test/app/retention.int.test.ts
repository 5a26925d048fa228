/**
 * Retention: events older than their type's `retainFor` become tombstones on
 * memory, SQLite (a real file) and Postgres (a schema of its own); after the
 * run no byte of their payloads is left in the SQLite file or its -wal, nor in
 * any row of any table of the Postgres schema (enumerated from
 * information_schema, the privacy scan's method); the hash chain still
 * verifies (`mneme store verify`'s library, and the CLI); an expired event a
 * live aggregate depends on without a snapshot stays; the run is recorded in
 * the chain and the LogStore; the dry run changes nothing.
 */
import { existsSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import Database from "better-sqlite3";
import { describe, expect, it } from "vitest";
import { createFacade, defineDomain, type Event, type Facade, type FacadeOptions, nowNs } from "mneme";
import { MemoryEventRepository } from "mneme/memory";
import { createPostgresBackends, PostgresEventRepository } from "mneme/postgres";
import { ApplyRetention, type RetentionReport } from "mneme/runtime";
import { createSqliteBackends, SqliteEventRepository } from "mneme/sqlite";
import { verifyEventChain } from "mneme/store";
import { copyStore, verifyStore } from "mneme/store-copy";
import { ADMIN, call, serve, TENANT_SYS, testAuthorizer, USER } from "../support/http-fixture.js";
import { DATABASE_URL, postgresScratch } from "../support/postgres-scratch.js";
import { runProcess } from "../support/run-process.js";
import { sqliteScratch } from "../support/sqlite-scratch.js";
import { until } from "../support/until.js";
import { shop } from "../support/retention-app.js";

const cwd = fileURLToPath(new URL("../..", import.meta.url));
const cli = fileURLToPath(new URL("../../src/cli/main.ts", import.meta.url));
const mneme = (args: string[]) => runProcess(process.execPath, ["--import", "tsx", cli, ...args], cwd);
const files = sqliteScratch("retention");
const pg = postgresScratch("mneme_retention");
const pgUrl = (schema: string): string => {
  const u = new URL(DATABASE_URL);
  u.searchParams.set("schema", schema);
  return u.toString();
};

const DAY_NS = 86_400 * 1e9;

interface Place {
  readonly name: string;
  stores(): Partial<FacadeOptions>;
  /** Every byte or row the stores wrote, as text. */
  scan(f: Facade): Promise<string>;
  /** The chain verified as `mneme store verify` does it. */
  verify(f: Facade): Promise<{ ok: boolean; removals?: { removed: number; byType: Record<string, number> } }>;
  /** The location `mneme store verify` takes. */
  readonly location?: string;
}

function memoryPlace(): Place {
  return {
    name: "memory",
    stores: () => ({}),
    scan: async (f) => {
      let text = "";
      for await (const page of f.eventRepository.stored.readAll()) text += JSON.stringify(page);
      text += JSON.stringify((await f.commandStore.list({ limit: 1000 })).items);
      text += JSON.stringify((await f.logStore.list({ limit: 1000 })).items);
      return text;
    },
    verify: async (f) => verifyEventChain(f.eventRepository.stored as never),
  };
}

function sqlitePlace(): Place {
  const filename = files.newFile();
  return {
    name: "sqlite",
    location: filename,
    stores: () => createSqliteBackends({ filename }),
    scan: async () =>
      Buffer.concat([filename, `${filename}-wal`, `${filename}-journal`].filter((f) => existsSync(f)).map((f) => readFileSync(f))).toString(
        "latin1",
      ),
    verify: async () => verifyStore(filename),
  };
}

function postgresPlace(): Place {
  const schema = pg.newSchema();
  return {
    name: "postgres",
    location: pgUrl(schema),
    stores: () => createPostgresBackends({ pool: pg.pool, schema }),
    scan: async () => {
      const tables = await pg.pool.query<{ table_name: string }>(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = $1 AND table_type = 'BASE TABLE' ORDER BY table_name",
        [schema],
      );
      expect(tables.rows.length).toBeGreaterThan(5);
      let text = "";
      for (const { table_name } of tables.rows) {
        const rows = await pg.pool.query(`SELECT t::text AS row FROM "${schema}"."${table_name}" t`);
        text += `${table_name}\n${rows.rows.map((r: { row: string }) => r.row).join("\n")}\n`;
      }
      return text;
    },
    verify: async () => verifyStore(pgUrl(schema)),
  };
}

/** Appends the old and new events of the scenario; returns the events by name. */
async function seed(f: Facade, s: ReturnType<typeof shop>): Promise<Record<string, Event>> {
  const old = nowNs() - 40 * DAY_NS;
  const at = (e: ReturnType<typeof s.Noted.create>, createdAt: number, extra: { commandUuid?: string; tenantUuid?: string } = {}) => ({
    ...e,
    createdAt,
    tenantUuid: TENANT_SYS,
    ...extra,
  });
  const out: Record<string, Event> = {};
  const put = async (name: string, e: Parameters<typeof at>[0], createdAt: number, extra?: { commandUuid?: string }) => {
    // Appended as dispatch would, with the tags its type declares.
    const tags = s.Visited.is(e as never) ? s.Visited.tags!(e.payload as never) : undefined;
    out[name] = (await f.eventRepository.append([{ ...at(e, createdAt, extra), ...(tags === undefined ? {} : { tags }) }]))[0]!;
  };
  await put("visit1", s.Visited.create("visit-ann-0", { visitor: "ann", note: "SECRET-VISIT-ONE" }), old, { commandUuid: "cmd-visit-1" });
  await put("visit2", s.Visited.create("visit-ann-1", { visitor: "ann", note: "SECRET-VISIT-TWO" }), old + 1e9);
  await put("orderA1", s.Placed.create("order-a", { orderId: "a", note: "SECRET-ORDER-A1" }), old + 2e9);
  await put("orderA2", s.Placed.create("order-a", { orderId: "a", note: "SECRET-ORDER-A2" }), old + 3e9);
  await put("orderB1", s.Placed.create("order-b", { orderId: "b", note: "KEPT-ORDER-B" }), old + 4e9);
  await put("visit3", s.Visited.create("visit-ann-2", { visitor: "ann", note: "FRESH-VISIT" }), nowNs());
  await put("note", s.Noted.create("notes", { note: "OLD-NOTE-NO-RETENTION" }), old);
  // The record of the command that appended visit1: it holds the payload too, and goes with its last event.
  await f.commandStore.record({
    commandUuid: "cmd-visit-1",
    domain: "Shop",
    name: "Visit",
    tenantUuid: TENANT_SYS,
    reqCtx: {},
    payload: { visitor: "ann", note: "SECRET-COMMAND-RECORD" },
    status: "succeeded",
    eventUuids: [out.visit1!.eventUuid],
    createdAt: old,
    durationMicros: 1,
  });
  // order-a is loaded once: its snapshot (snapshotEvery 1) covers both of its expired events; order-b has none.
  expect((await f.loadAggregate(s.Order, "order-a", { tenantUuid: TENANT_SYS })).state).toEqual({ count: 2 });
  await until(async () => (await f.snapshotStore.latest("Shop", "Order", "order-a", 1))?.version === 2, "the snapshot of order-a");
  await f.logStore.append({ level: "info", source: "app", message: "SECRET-LOG-LINE" });
  return out;
}

/** Dispatches Visit for ann and returns what its tag query saw. */
async function visitNote(f: Facade, s: ReturnType<typeof shop>): Promise<string> {
  const r = await f.dispatch(s.Visit, { visitor: "ann" }, { reqCtx: ADMIN.reqCtx });
  return (r.events[0]!.payload as { note: string }).note;
}

describe.each([
  ["memory", memoryPlace],
  ["sqlite", sqlitePlace],
  ["postgres", postgresPlace],
])("retention on %s", (_name, makePlace) => {
  it("removes expired events from every table and file, keeps the chain verifiable and what a live aggregate needs", async () => {
    const place = makePlace();
    const s = shop();
    const f = createFacade({ appName: "retention", ...place.stores(), authorizer: testAuthorizer, retention: { logs: 1 } });
    f.registerDomain(s.D);
    await f.start();
    try {
      const e = await seed(f, s);
      // The tag query of a command finds the three visits (two expired).
      expect(await visitNote(f, s)).toBe("seen 3");
      const before = await place.scan(f);
      for (const marker of ["SECRET-VISIT-ONE", "SECRET-ORDER-A1", "SECRET-COMMAND-RECORD", "SECRET-LOG-LINE"])
        expect(before).toContain(marker);
      await new Promise((r) => setTimeout(r, 5));

      // The dry run lists what would go and changes nothing.
      const dry = (await f.dispatch(ApplyRetention, { dryRun: true }, { reqCtx: ADMIN.reqCtx })).result as RetentionReport;
      expect(dry).toMatchObject({
        dryRun: true,
        recordPosition: null,
        events: {
          removed: 4,
          byType: { "Shop.OrderPlaced": 2, "Shop.PageVisited": 2 },
          firstPosition: e.visit1!.position,
          lastPosition: e.orderA2!.position,
          keptCount: 1,
          kept: [{ type: "Shop.OrderPlaced", aggregateUuid: "order-b", version: 1 }],
        },
        commandRecords: { deleted: 1 },
      });
      expect(dry.logs?.deleted).toBeGreaterThanOrEqual(1);
      expect(await place.scan(f)).toContain("SECRET-VISIT-ONE");
      expect((await f.commandStore.get("cmd-visit-1"))?.payload).toBeDefined();

      // The run, by a system administrator through the Runtime command.
      const report = (await f.dispatch(ApplyRetention, {}, { reqCtx: ADMIN.reqCtx })).result as RetentionReport;
      expect(report).toMatchObject({
        dryRun: false,
        ranBy: ADMIN.reqCtx.senderAccountUuid,
        events: { removed: 4, keptCount: 1 },
        commandRecords: { deleted: 1 },
      });
      expect(report.logs?.deleted).toBeGreaterThanOrEqual(1);
      expect(report.recordPosition).toBeGreaterThan(e.note!.position);
      // The LogStore keeps the run's own entry, written after the expired ones were deleted.
      const audit = await f.logStore.list({ source: "retention" });
      expect(audit.items.map((x) => x.data)).toEqual([expect.objectContaining({ run: report.run, ranBy: ADMIN.reqCtx.senderAccountUuid })]);

      // Gone from every table and file; what is not expired, and what order-b needs, stays.
      const after = await place.scan(f);
      expect(after).not.toMatch(/SECRET-/);
      for (const marker of ["FRESH-VISIT", "KEPT-ORDER-B", "OLD-NOTE-NO-RETENTION"]) expect(after).toContain(marker);
      expect(await f.commandStore.get("cmd-visit-1")).toBeUndefined();

      // The chain verifies, with the tombstones counted by the type they had.
      const verified = await place.verify(f);
      expect(verified).toMatchObject({ ok: true, removals: { removed: 4, byType: { "Shop.OrderPlaced": 2, "Shop.PageVisited": 2 } } });

      // Reads: tombstones stand where the events were; the aggregate loads from its snapshot; tag reads skip them.
      const all: Event[] = [];
      for await (const page of f.eventRepository.readAll()) all.push(...page);
      const at = (p: number) => all.find((x) => x.position === p)!;
      expect(at(e.visit1!.position)).toMatchObject({
        domain: "Runtime",
        name: "EventRemoved",
        aggregateUuid: "visit-ann-0",
        version: 1,
        eventUuid: e.visit1!.eventUuid,
        payload: { type: "Shop.PageVisited", reason: "retention", run: report.run },
      });
      expect(at(report.recordPosition!)).toMatchObject({ domain: "Runtime", name: "RetentionApplied", payload: { run: report.run } });
      expect(all.filter((x) => x.name === "EventRemoved")).toHaveLength(4);
      expect((await f.loadAggregate(s.Order, "order-a", { tenantUuid: TENANT_SYS })).state).toEqual({ count: 2 });
      expect((await f.loadAggregate(s.Order, "order-b", { tenantUuid: TENANT_SYS })).state).toEqual({ count: 1 });
      // The removed visits left the tag index: the fresh one and the visit dispatched before the run remain.
      expect(await visitNote(f, s)).toBe("seen 2");
      // The load of order-b saved its snapshot: the next run removes its event too, chaining on after the appends.
      await until(async () => (await f.snapshotStore.latest("Shop", "Order", "order-b", 1))?.version === 1, "the snapshot of order-b");
      const again = await f.applyRetention();
      expect(again.events).toMatchObject({ removed: 1, keptCount: 0, firstPosition: e.orderB1!.position });
      expect(again.recordPosition).toBeGreaterThan(report.recordPosition!);
      expect(await place.scan(f)).not.toContain("KEPT-ORDER-B");
      expect((await f.loadAggregate(s.Order, "order-b", { tenantUuid: TENANT_SYS })).state).toEqual({ count: 1 });
      // A third finds nothing to remove and records nothing.
      expect(await f.applyRetention()).toMatchObject({ events: { removed: 0 }, recordPosition: null });
      expect(await place.verify(f)).toMatchObject({ ok: true, removals: { removed: 5 } });
      if (place.location !== undefined) {
        const out = await mneme(["store", "verify", "--store", place.location]);
        expect(out.code, out.stderr).toBe(0);
        expect(out.stdout).toContain("the hash chain holds");
        expect(out.stdout).toContain("of which 5 removed by retention (Shop.OrderPlaced 3, Shop.PageVisited 2)");
      }
    } finally {
      await f.stop();
    }
  });
});

describe("retention", () => {
  it("refuses a retainFor it cannot read, when the event is defined", () => {
    const D = defineDomain("Bad");
    for (const bad of ["30 days", "P1M", "P1Y", 0, -5, 1.5, "", "PT", "d30"]) {
      expect(() =>
        D.event(`E${String(bad).replace(/\W/g, "")}x${Math.random().toString(36).slice(2, 6)}`, { retainFor: bad as never }),
      ).toThrow(expect.objectContaining({ code: "INVALID_DOMAIN", message: expect.stringContaining("retainFor") }) as Error);
    }
    for (const [good, ms] of [
      [60_000, 60_000],
      ["30d", 30 * 86_400_000],
      ["12h", 43_200_000],
      ["P30D", 30 * 86_400_000],
      ["PT1H30M", 5_400_000],
      ["P1DT0.5S", 86_400_500],
      ["2w", 14 * 86_400_000],
    ] as const) {
      expect(D.event(`Ok${Math.random().toString(36).slice(2, 8)}`, { retainFor: good }).retainForMs).toBe(ms);
    }
    expect(() => createFacade({ retention: { logs: "forever" } })).toThrow(expect.objectContaining({ code: "INVALID_REQUEST" }) as Error);
  });

  it("is a command of system administrators over HTTP, and its dry run lists what would go", async () => {
    const s = shop();
    const f = createFacade({ appName: "retention-http", authorizer: testAuthorizer });
    f.registerDomain(s.D);
    await f.start();
    const server = await serve(f);
    try {
      await seed(f, s);
      const path = `/api/tenants/${TENANT_SYS}/commands/Runtime/ApplyRetention?wait=true`;
      const dry = await call(server.url, "POST", path, { headers: ADMIN.headers, body: { dryRun: true } });
      expect(dry.status).toBe(200);
      expect(JSON.stringify(dry.body)).toContain('"removed":4');
      const denied = await call(server.url, "POST", path, { headers: USER.headers, body: {} });
      expect(denied.status).toBe(403);
      const bad = await call(server.url, "POST", path, { headers: ADMIN.headers, body: { batchSize: 0 } });
      expect(bad.status).toBe(400);
    } finally {
      await server.close();
      await f.stop();
    }
  });

  it("the verifier refuses a tombstone that does not link, and one whose run has no removal record", async () => {
    const filename = files.newFile();
    const s = shop();
    const f = createFacade({ appName: "retention-tamper", ...createSqliteBackends({ filename }) });
    f.registerDomain(s.D);
    await f.start();
    let e: Record<string, Event>;
    try {
      e = await seed(f, s);
      await f.applyRetention();
    } finally {
      await f.stop();
    }
    expect(await verifyStore(filename)).toMatchObject({ ok: true });
    // A copy to Postgres: the target chains the tombstones as it stores them; both sides verify, the data stays gone.
    const schema = pg.newSchema();
    const copied = await copyStore({ from: filename, to: pgUrl(schema) });
    expect(copied.chain.source).toMatchObject({ ok: true, removals: { removed: 4 } });
    expect(copied.chain.target).toMatchObject({ ok: true, removals: { removed: 4 } });
    expect(await verifyStore(pgUrl(schema))).toMatchObject({ ok: true, removals: { removed: 4 } });
    const rows = await pg.pool.query<{ t: string }>(`SELECT e::text AS t FROM "${schema}".events e`);
    expect(rows.rows.map((r) => r.t).join("\n")).not.toMatch(/SECRET-/);
    const db = new Database(filename);
    try {
      // A normal event made to look removed (a run no record names): refused, though it links.
      const prev = (db.prepare("SELECT hash FROM mneme_events WHERE position = ?").get(e.note!.position - 1) as { hash: string }).hash;
      db.prepare("UPDATE mneme_events SET domain = 'Runtime', name = 'EventRemoved', payload = ? WHERE position = ?").run(
        JSON.stringify({ type: "Shop.Noted", reason: "retention", run: "a-run-never-recorded", prevHash: prev }),
        e.note!.position,
      );
      expect(await verifyStore(filename)).toMatchObject({
        ok: false,
        position: e.note!.position,
        reason: expect.stringContaining("has no removal record") as string,
      });
      // A tombstone whose predecessor's hash is not the chain's: refused at its position.
      const t = db.prepare("SELECT payload FROM mneme_events WHERE position = ?").get(e.visit2!.position) as { payload: string };
      db.prepare("UPDATE mneme_events SET payload = ? WHERE position = ?").run(
        JSON.stringify({ ...(JSON.parse(t.payload) as object), prevHash: "f".repeat(64) }),
        e.visit2!.position,
      );
      expect(await verifyStore(filename)).toMatchObject({
        ok: false,
        position: e.visit2!.position,
        reason: expect.stringContaining("does not link") as string,
      });
    } finally {
      db.close();
    }
  });
});

describe("mneme store retention", () => {
  it("runs from the mneme binary: --dry-run lists, the run removes and records the tool, store verify passes", async () => {
    const filename = files.newFile();
    const s = shop();
    const f = createFacade({ appName: "retention-cli", ...createSqliteBackends({ filename }) });
    f.registerDomain(s.D);
    await f.start();
    try {
      await seed(f, s);
    } finally {
      await f.stop();
    }
    process.env.RETENTION_FILE = filename;
    const dry = await mneme(["store", "retention", "--app", "test/support/retention-app.ts", "--dry-run"]);
    expect(dry.code, dry.stderr).toBe(0);
    expect(JSON.parse(dry.stdout)).toMatchObject({ dryRun: true, events: { removed: 4, keptCount: 1 }, recordPosition: null });
    expect(
      readFileSync(filename).toString("latin1") + (existsSync(`${filename}-wal`) ? readFileSync(`${filename}-wal`).toString("latin1") : ""),
    ).toContain("SECRET-VISIT-ONE");
    const real = await mneme(["store", "retention", "--app", "test/support/retention-app.ts", "--batch-size", "2"]);
    expect(real.code, real.stderr).toBe(0);
    const report = JSON.parse(real.stdout) as RetentionReport;
    expect(report).toMatchObject({ dryRun: false, events: { removed: 4 }, commandRecords: { deleted: 1 }, logs: { retainForMs: 1 } });
    expect(report.ranBy).toMatch(/^mneme store retention \(OS user .+\)$/);
    const bytes = [filename, `${filename}-wal`]
      .filter((x) => existsSync(x))
      .map((x) => readFileSync(x).toString("latin1"))
      .join("");
    expect(bytes.match(/SECRET-[A-Z0-9-]+/g) ?? []).toEqual([]);
    const verified = await mneme(["store", "verify", "--store", filename]);
    expect(verified.code, verified.stderr).toBe(0);
    expect(verified.stdout).toContain("of which 4 removed by retention");
    const usage = await mneme(["store", "retention"]);
    expect(usage.code).toBe(2);
    expect(usage.stderr).toContain("missing --app");
  }, 120_000);
});

describe.each([
  ["memory", () => new MemoryEventRepository()],
  ["sqlite", () => new SqliteEventRepository({ filename: files.newFile() })],
  ["postgres", () => new PostgresEventRepository({ pool: pg.pool, schema: pg.newSchema() })],
])("removeEvents on %s", (_name, make) => {
  it("hollows only the rows named by position and uuid, once, and takes them out of the tag index", async () => {
    const repo = make();
    await repo.init();
    try {
      const ev = (i: number) => ({
        domain: "Shop",
        name: "PageVisited",
        aggregateUuid: `v-${i}`,
        tenantUuid: "t1",
        payload: { visitor: "ann", note: `MARK-${i}` },
        tags: ["visitor:ann"],
      });
      const stored = await repo.append([ev(1), ev(2), ev(3), ev(4)]);
      const [a, b, c] = stored as [Event, Event, Event];
      await expect(repo.removeEvents("", [])).rejects.toMatchObject({ code: "INVALID_REQUEST" });
      await expect(repo.removeEvents("r", [{ position: 0, eventUuid: "x" }])).rejects.toMatchObject({ code: "INVALID_REQUEST" });
      // A uuid that is not the one at the position: skipped.
      expect(await repo.removeEvents("run-1", [{ position: a.position, eventUuid: b.eventUuid }])).toBe(0);
      expect(
        await repo.removeEvents(
          "run-1",
          [a, b].map((e) => ({ position: e.position, eventUuid: e.eventUuid })),
        ),
      ).toBe(2);
      // Already removed: skipped, the first run's tombstone stays.
      expect(await repo.removeEvents("run-2", [{ position: b.position, eventUuid: b.eventUuid }])).toBe(0);
      const all: Event[] = [];
      for await (const page of repo.readAll()) all.push(...page);
      expect(all.map((e) => `${e.domain}.${e.name}`)).toEqual([
        "Runtime.EventRemoved",
        "Runtime.EventRemoved",
        "Shop.PageVisited",
        "Shop.PageVisited",
      ]);
      expect(all[1]).toMatchObject({
        aggregateUuid: "v-2",
        version: 1,
        tenantUuid: "t1",
        reqCtx: {},
        payload: { type: "Shop.PageVisited", run: "run-1" },
      });
      expect(JSON.stringify(all)).not.toMatch(/MARK-[12]/);
      const tagged = await repo.readTagged!("t1", [{ tags: ["visitor:ann"] }]);
      expect(tagged.events.map((e) => e.position)).toEqual([c.position, stored[3]!.position]);
      // Without the run's removal record the chain does not verify; it links, so the verifier names the missing record.
      const chain = await verifyEventChain(repo as never);
      expect(chain).toMatchObject({ ok: false, position: a.position, reason: expect.stringContaining("no removal record") as string });
    } finally {
      await repo.close();
    }
  });
});
