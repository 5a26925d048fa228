/**
 * A restore from zero never exposes partial data to queries: readers see the
 * old data until the new data is complete, then the new (blue-green), on the
 * memory, SQLite and Postgres backends. A rebuild that fails or is cancelled
 * leaves the old data serving, and a later one succeeds; a process killed in
 * the middle of one (SQLite, a real child process) restarts with the old data
 * serving and the partial generation discarded.
 */
import { fork } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import pg from "pg";
import { afterAll, describe, expect, it } from "vitest";
import {
  createFacade,
  type Facade,
  type FacadeOptions,
  newUuid,
  ProjectionReadmodel,
  withReadmodelStoreBackend,
  withRestoreBatchSize,
} from "mneme";
import { createPostgresBackends } from "mneme/postgres";
import { createSqliteBackends, SqliteReadmodelStoreBackend } from "mneme/sqlite";
import { Counter, CounterTotals, Increment, IncrementMany } from "../support/counter-domain.js";
import { Catalog, type CatalogDoc, Item, Shelf, Stock, StockMany } from "../support/shelf-domain.js";
import { MemoryReadmodelStoreBackend } from "mneme/memory";

const dir = mkdtempSync(join(tmpdir(), "mneme-blue-green-"));
const DATABASE_URL = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test";
const admin = new pg.Pool({ connectionString: DATABASE_URL, max: 2 });
const schemas: string[] = [];
const facades: Facade[] = [];

afterAll(async () => {
  for (const f of facades) await f.stop().catch(() => undefined);
  for (const s of schemas) await admin.query(`DROP SCHEMA IF EXISTS "${s}" CASCADE`);
  await admin.end();
  rmSync(dir, { recursive: true, force: true });
});

const backends: Record<string, () => FacadeOptions> = {
  memory: () => ({}),
  SQLite: () => createSqliteBackends({ filename: join(dir, `${newUuid()}.db`) }),
  Postgres: () => {
    const schema = `mneme_bg_${newUuid().replace(/-/g, "").slice(-16)}`;
    schemas.push(schema);
    return createPostgresBackends({ connectionString: DATABASE_URL, schema, poolSize: 5, pollIntervalMs: 50 });
  },
};

const OLD = 200;
/** The new generation keeps the items whose n is not a multiple of 4. */
const keepNew = (n: number): boolean => n % 4 !== 0;

/** A started facade with Catalog and the Item projection, and OLD items stocked (positions 1..OLD). */
async function seeded(options: FacadeOptions): Promise<{ f: Facade; catalog: Catalog; projection: ProjectionReadmodel<{ n: number }> }> {
  const f = createFacade({ appName: "blue-green", ...options });
  facades.push(f);
  f.registerDomain(Shelf);
  const catalog = new Catalog(f, withRestoreBatchSize(10));
  const projection = new ProjectionReadmodel(f, { aggregate: Item }, withRestoreBatchSize(5));
  f.registerReadmodel(catalog);
  f.registerReadmodel(projection);
  await f.start();
  for (let b = 0; b < OLD / 20; b++) {
    const items = Array.from({ length: 20 }, (_, i) => ({ itemUuid: `item-${String(b * 20 + i).padStart(4, "0")}`, n: b * 20 + i }));
    await f.dispatch(StockMany, { items }, { waitToFinish: true });
  }
  return { f, catalog, projection };
}

type Seen = "old" | "new";

/**
 * Checks one read of Catalog: either the old generation, whole (OLD items
 * labelled "old"), or the new one, whole (every kept item of the seed labelled
 * "new", plus any live items it has applied); never a mix, never a part.
 */
function classify(read: { count: number; items: CatalogDoc[] }): Seen {
  const labels = new Set(read.items.map((d) => d.label));
  expect(labels.size, `one generation per read: ${[...labels].join(", ")}`).toBe(1);
  if (labels.has("old")) {
    expect(read.count).toBe(OLD);
    expect(read.items).toHaveLength(OLD);
    return "old";
  }
  expect(labels.has("new")).toBe(true);
  const seeded = read.items.filter((d) => d.n < OLD);
  expect(seeded.map((d) => d.n)).toEqual(Array.from({ length: OLD }, (_, n) => n).filter(keepNew));
  // the count and the list are two queries: the switch may fall between them, never a partial generation
  expect(read.count).toBeGreaterThanOrEqual(seeded.length);
  return "new";
}

/** Reads Catalog in a loop until `until` settles; every read is classified, and once new, never old again. */
async function pollWhile(catalog: Catalog, until: Promise<unknown>): Promise<Seen[]> {
  let settled = false;
  const done = until.then(
    () => (settled = true),
    () => (settled = true),
  );
  const seen: Seen[] = [];
  while (!settled) {
    const s = classify(await catalog.read());
    if (seen.at(-1) === "new") expect(s).toBe("new");
    seen.push(s);
  }
  await done;
  return seen;
}

for (const [backend, options] of Object.entries(backends)) {
  describe(`blue-green restore from zero (${backend})`, () => {
    it("readers see the old data until the new is complete, then the new; live events end up in the new; the Runtime shows the progress", async () => {
      const { f, catalog } = await seeded(options());
      expect(classify(await catalog.read())).toBe("old");
      catalog.label = "new";
      catalog.keep = keepNew;
      catalog.pauseAt = 101;
      const r = catalog.restoreState(undefined, { fromZero: true });
      const polled = pollWhile(catalog, r.done);
      await catalog.paused.promise;

      // Paused inside the rebuild, after 100 replayed events: the served generation answers, whole.
      expect(classify(await catalog.read())).toBe("old");
      const listing = f.runtime.listEventHandlers().find((h) => h.name === "Catalog")!;
      expect(listing).toMatchObject({ state: "running", restorationState: "restoring" });
      const progress = (listing as unknown as { restoration?: { targetHead: number; eventsPerSecond: number } }).restoration;
      expect(progress).toMatchObject({ phase: "rebuilding", position: 100, servedPosition: OLD, eventsReplayed: 100 });
      expect(progress!.targetHead).toBeGreaterThanOrEqual(OLD);
      expect(progress!.eventsPerSecond).toBeGreaterThan(0);

      // Live events meanwhile: caught, not in the old generation; waitToFinish waits for the switch.
      for (let i = 0; i < 5; i++) await f.dispatch(Stock, { itemUuid: `live-${i}`, n: 1001 + i });
      let waited = false;
      const waiting = f.dispatch(Stock, { itemUuid: "live-w", n: 1007 }, { waitToFinish: true }).then(() => (waited = true));
      const during = await catalog.read();
      expect(classify(during)).toBe("old");
      expect(during.items.some((d) => d.itemUuid.startsWith("live-"))).toBe(false);
      expect(waited).toBe(false);

      catalog.resume.resolve();
      const report = await r.done;
      await waiting;
      const seen = await polled;
      expect(seen[0]).toBe("old");
      expect(report.afterPosition).toBe(0);
      expect(report.toPosition).toBe(OLD + 6);

      const after = await catalog.read();
      expect(classify(after)).toBe("new");
      // 1001, 1002, 1003, 1005 and 1007 are kept (1004 is a multiple of 4)
      expect(after.items.filter((d) => d.n > 1000).map((d) => d.n)).toEqual([1001, 1002, 1003, 1005, 1007]);
      expect(after.count).toBe(OLD * 0.75 + 5);
      expect(catalog.lastPosition).toBe(OLD + 6);
      expect(await f.readmodelStoreBackend.getCheckpoint("Catalog")).toBe(OLD + 6);
      expect(await f.readmodelStoreBackend.getCheckpoint("Catalog#rebuild")).toBe(0);
      expect(await f.readmodelStoreBackend.collection("Catalog#rebuild:items").count()).toBe(0);
      const info = f.runtime.listEventHandlers().find((h) => h.name === "Catalog")!;
      expect(info).toMatchObject({ state: "running", restorationState: "restored", lastPosition: OLD + 6 });
      expect("restoration" in info).toBe(false);

      // live delivery goes on into the served (new) generation
      await f.dispatch(Stock, { itemUuid: "after", n: 2001 }, { waitToFinish: true });
      expect((await catalog.read()).count).toBe(OLD * 0.75 + 6);
    }, 60_000);

    it("a ProjectionReadmodel's list total never drops below the old one during a rebuild", async () => {
      const { projection } = await seeded(options());
      const r = projection.restoreState(undefined, { fromZero: true });
      let done = false;
      void r.done.then(
        () => (done = true),
        () => (done = true),
      );
      let reads = 0;
      do {
        const list = await projection.getModelList({ pageSize: 1000 });
        expect(list.total).toBe(OLD);
        expect(list.items).toHaveLength(OLD);
        expect(list.items.every((m) => m.model.n === Number(m.aggregateUuid.slice(5)))).toBe(true);
        reads++;
      } while (!done);
      await r.done;
      expect(reads).toBeGreaterThan(0);
      expect((await projection.getModelList({ pageSize: 1000 })).total).toBe(OLD);
    }, 60_000);

    it("a rebuild that fails on its Nth event leaves the old data serving; a later restore succeeds", async () => {
      const { f, catalog } = await seeded(options());
      catalog.label = "new";
      catalog.keep = keepNew;
      catalog.failAt = 57;
      const r = catalog.restoreState(undefined, { fromZero: true });
      const seen = await pollWhile(catalog, r.done);
      await expect(r.done).rejects.toMatchObject({ code: "HANDLER_FAILED" });
      expect(seen.every((s) => s === "old")).toBe(true);
      expect(catalog.state).toBe("failed");
      expect(catalog.restorationState).toBe("failed");
      expect(classify(await catalog.read())).toBe("old");
      expect(catalog.lastPosition).toBe(OLD);
      expect(await f.readmodelStoreBackend.getCheckpoint("Catalog")).toBe(OLD);
      expect(await f.readmodelStoreBackend.collection("Catalog#rebuild:items").count()).toBe(0);

      // start resumes the old generation; a later restore from zero (fixed) switches to the new
      catalog.failAt = undefined;
      await f.runtime.controlEventHandler({ action: "start", eventHandlerName: "Catalog" });
      expect(catalog.state).toBe("running");
      expect(classify(await catalog.read())).toBe("old");
      await catalog.restoreState(undefined, { fromZero: true }).done;
      const after = await catalog.read();
      expect(classify(after)).toBe("new");
      expect(after.count).toBe(OLD * 0.75);
    }, 60_000);

    it("a cancelled rebuild (stop) leaves the old data serving; a later restore succeeds", async () => {
      const { f, catalog } = await seeded(options());
      catalog.label = "new";
      catalog.keep = keepNew;
      catalog.pauseAt = 77;
      const r = catalog.restoreState(undefined, { fromZero: true });
      await catalog.paused.promise;
      // stop cancels the restoration; the paused batch finishes into the new generation, which is then discarded
      const stopping = f.runtime.controlEventHandler({ action: "stop", eventHandlerName: "Catalog" });
      catalog.resume.resolve();
      await stopping;
      await expect(r.done).rejects.toMatchObject({ code: "RESTORE_CANCELLED" });
      expect(catalog.state).toBe("stopped");
      expect(catalog.restorationState).toBe("cancelled");
      expect(classify(await catalog.read())).toBe("old");
      expect(await f.readmodelStoreBackend.getCheckpoint("Catalog")).toBe(OLD);
      expect(await f.readmodelStoreBackend.getCheckpoint("Catalog#rebuild")).toBe(0);
      expect(await f.readmodelStoreBackend.collection("Catalog#rebuild:items").count()).toBe(0);

      catalog.pauseAt = undefined;
      await f.runtime.controlEventHandler({ action: "restore", eventHandlerName: "Catalog", restoreFromZero: true });
      expect(catalog.state).toBe("running");
      const after = await catalog.read();
      expect(classify(after)).toBe("new");
      expect(after.count).toBe(OLD * 0.75);
    }, 60_000);
  });
}

describe("a readmodel backend without replaceCollections", () => {
  it("restores from zero in place, as documented: readers see the replay in progress, the result is whole", async () => {
    const memory = new MemoryReadmodelStoreBackend();
    // The same backend without the optional capability (as a backend of one's own may be).
    const plain = new Proxy(memory, {
      get: (target, key) => {
        if (key === "replaceCollections") return undefined;
        const v = Reflect.get(target, key, target) as unknown;
        return typeof v === "function" ? (v as (...a: unknown[]) => unknown).bind(target) : v;
      },
    });
    const { f, catalog } = await seeded({ readmodelStoreBackend: plain });
    catalog.label = "new";
    catalog.keep = keepNew;
    catalog.pauseAt = 101;
    const r = catalog.restoreState(undefined, { fromZero: true });
    await catalog.paused.promise;
    const during = await catalog.read();
    expect(during.items.every((d) => d.label === "new")).toBe(true);
    expect(during.count).toBeLessThan(OLD * 0.75);
    expect(await memory.listCollections()).not.toContain("Catalog#rebuild:items");
    catalog.resume.resolve();
    await r.done;
    const after = await catalog.read();
    expect(classify(after)).toBe("new");
    expect(after.count).toBe(OLD * 0.75);
    expect(await f.readmodelStoreBackend.getCheckpoint("Catalog")).toBe(OLD);
  }, 60_000);
});

describe("blue-green restore from zero: the database connection dies in the middle (Postgres)", () => {
  it("the rebuild rejects with UNAVAILABLE, the old data keeps serving and is caught up; a later restore succeeds", async () => {
    const options = backends.Postgres!();
    const schema = schemas.at(-1)!;
    const { f, catalog } = await seeded(options);
    catalog.label = "new";
    catalog.keep = keepNew;
    catalog.pauseAt = 105; // four documents of this page are written in its open transaction
    const r = catalog.restoreState(undefined, { fromZero: true });
    const polled = pollWhile(catalog, r.done);
    await catalog.paused.promise;
    const { rows } = await admin.query<{ pid: number }>(
      "SELECT pid FROM pg_stat_activity WHERE state = 'idle in transaction' AND query LIKE $1",
      [`%"${schema}".readmodel_documents%`],
    );
    expect(rows).toHaveLength(1);
    await admin.query("SELECT pg_terminate_backend($1, 5000)", [rows[0]!.pid]);
    await f.dispatch(Stock, { itemUuid: "live-0", n: 1001 });
    catalog.resume.resolve();
    await expect(r.done).rejects.toMatchObject({ code: "UNAVAILABLE" });
    expect((await polled).every((x) => x === "old")).toBe(true);

    // The handler stays running on the old generation and catches up from its checkpoint after a backoff.
    catalog.pauseAt = undefined;
    for (let i = 0; i < 1000 && !(catalog.lastPosition === OLD + 1 && catalog.restorationState === "restored"); i++) {
      await new Promise((res) => setTimeout(res, 10));
    }
    expect(catalog.state).toBe("running");
    expect(catalog.lastPosition).toBe(OLD + 1);
    const served = await catalog.read();
    expect(served.items.every((d) => d.label === "old" || d.itemUuid === "live-0")).toBe(true);
    expect(served.count).toBe(OLD + 1);
    expect(await f.readmodelStoreBackend.getCheckpoint("Catalog#rebuild")).toBe(0);
    expect(await f.readmodelStoreBackend.collection("Catalog#rebuild:items").count()).toBe(0);

    await catalog.restoreState(undefined, { fromZero: true }).done;
    const after = await catalog.read();
    expect(classify(after)).toBe("new");
    expect(after.count).toBe(OLD * 0.75 + 1);
  }, 60_000);
});

describe("blue-green restore from zero: a crash in the middle (SQLite, a real process)", () => {
  it("a process killed with SIGKILL after pages of the new generation committed restarts with the old data serving; the partial generation is discarded", async () => {
    const filename = join(dir, "rebuild-crash.db");
    const first = createFacade({ appName: "rebuild-crash", ...createSqliteBackends({ filename }) });
    first.registerDomain(Counter);
    const firstTotals = new CounterTotals(first);
    first.registerReadmodel(firstTotals);
    await first.start();
    const expected: Record<string, number> = {};
    for (let i = 0; i < 20; i++) {
      const r =
        i % 3 === 0
          ? await first.dispatch(IncrementMany, { counterUuids: ["c1", "c2", "c3"], by: i + 1 }, { waitToFinish: true })
          : await first.dispatch(Increment, { counterUuid: `c${i % 4}`, by: i + 1 }, { waitToFinish: true });
      for (const e of r.events) expected[e.aggregateUuid] = (expected[e.aggregateUuid] ?? 0) + i + 1;
    }
    const head = await first.eventRepository.headPosition();
    expect(await firstTotals.allTotals()).toEqual(expected);
    await first.stop();

    const child = fork(fileURLToPath(new URL("../support/rebuild-crash-process.ts", import.meta.url)), [filename], {
      execArgv: ["--import", "tsx"],
      cwd: fileURLToPath(new URL("../..", import.meta.url)),
      stdio: ["ignore", "inherit", "inherit", "ipc"],
    });
    const exit = await new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve, reject) => {
      child.once("error", reject);
      child.once("exit", (code, signal) => resolve({ code, signal }));
    });
    expect(exit).toEqual({ code: null, signal: "SIGKILL" });

    // Before any restart: the served generation is whole at its checkpoint, the partial one lies beside it.
    const raw = new SqliteReadmodelStoreBackend({ filename });
    await raw.init();
    expect(await raw.getCheckpoint("CounterTotals")).toBe(head);
    expect(await raw.getCheckpoint("CounterTotals#rebuild")).toBe(20);
    expect(await raw.collection("CounterTotals#rebuild:totals").count()).toBeGreaterThan(0);
    const served: Record<string, number> = {};
    for (const d of await raw.collection<{ counterUuid: string; total: number }>("CounterTotals:totals").list())
      served[d.counterUuid] = d.total;
    expect(served).toEqual(expected);
    await raw.close();

    const f = createFacade({ appName: "rebuild-crash", ...createSqliteBackends({ filename }) });
    facades.push(f);
    f.registerDomain(Counter);
    const totals = new CounterTotals(f);
    const replay = new CounterTotals(f, "FullReplay", withReadmodelStoreBackend(new MemoryReadmodelStoreBackend()));
    f.registerReadmodel(totals);
    f.registerReadmodel(replay);
    await f.start();
    expect(totals.state).toBe("running");
    expect(totals.lastPosition).toBe(head);
    expect(await totals.allTotals()).toEqual(expected);
    expect(await replay.allTotals()).toEqual(expected);
    expect(await f.readmodelStoreBackend.getCheckpoint("CounterTotals#rebuild")).toBe(0);
    expect(await f.readmodelStoreBackend.collection("CounterTotals#rebuild:totals").count()).toBe(0);
    // and a restore from zero completes
    await totals.restoreState(undefined, { fromZero: true }).done;
    expect(await totals.allTotals()).toEqual(expected);
    expect(totals.applied).toEqual(Array.from({ length: head }, (_, i) => i + 1));
  }, 60_000);
});
