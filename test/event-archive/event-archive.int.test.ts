/**
 * Archiving old events (`mneme store archive`) on SQLite and Postgres: every
 * read answers exactly as before at several boundaries (readAll with its
 * filters and windows, aggregate loads, loadEvents, the chain), appends go on
 * (versions, the tenant rule, the chain), verify checks the chain across the
 * files and the database, a copy of an archived store holds every event, a
 * restore gives back the store row for row (hashes included), refusals name
 * what needs the events, a changed or missing archive file is an error,
 * never fewer events, a SIGKILL at any point of an archive leaves the store
 * whole, an app rebuilds a readmodel from zero over the archive, and a
 * tenant move refuses a shard with archived events.
 */
import Database from "better-sqlite3";
import { mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { fileURLToPath } from "node:url";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { afterAll, describe, expect, it } from "vitest";
import { createFacade, type Event, type NewEvent } from "mneme";
import { createPostgresBackends } from "mneme/postgres";
import { createSqliteBackends } from "mneme/sqlite";
import { archiveStore, copyStore, restoreStoreArchive, verifyStore } from "mneme/store-copy";
import type { EventRepository } from "mneme/store";
import { DATABASE_URL, postgresScratch } from "../support/postgres-scratch.js";
import { sqliteScratch } from "../support/sqlite-scratch.js";
import { Counter, CounterTotals, Increment } from "../support/counter-domain.js";
import { runProcess } from "../support/run-process.js";
import { refuseArchived } from "../../src/shards/tenant-copy.js";

const files = sqliteScratch("event-archive");
const pgs = postgresScratch("archive");
const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});
const newDir = (): string => {
  const d = mkdtempSync(join(tmpdir(), "mneme-archive-"));
  dirs.push(d);
  return d;
};
const pgUrl = (schema: string): string => {
  const u = new URL(DATABASE_URL);
  u.searchParams.set("schema", schema);
  return u.toString();
};

/** One engine under test: how to open it, where the CLI finds it, and its events table as stored. */
interface Engine {
  readonly name: string;
  open(archiveDirectory?: string): { eventRepository: EventRepository; close(): Promise<void> };
  readonly location: string;
  rawDigest(): Promise<string>;
  sql(text: string): Promise<void>;
}

function sqliteEngine(): Engine {
  const file = files.newFile();
  return {
    name: "sqlite",
    location: file,
    open: (archiveDirectory) =>
      createSqliteBackends({ filename: file, pollIntervalMs: 0, ...(archiveDirectory === undefined ? {} : { archiveDirectory }) }),
    rawDigest: async () => {
      const db = new Database(file, { readonly: true });
      try {
        const rows = db.prepare("SELECT * FROM mneme_events ORDER BY position").raw(true).safeIntegers(true).all() as unknown[][];
        const tags = db.prepare("SELECT * FROM mneme_event_tags ORDER BY tenant_uuid, tag, position").raw(true).safeIntegers(true).all();
        return digest([rows, tags]);
      } finally {
        db.close();
      }
    },
    sql: async (text) => {
      const db = new Database(file);
      try {
        db.exec(text.replaceAll("$.", "mneme_"));
      } finally {
        db.close();
      }
    },
  };
}

function postgresEngine(): Engine {
  const schema = pgs.newSchema();
  return {
    name: "postgres",
    location: pgUrl(schema),
    open: (archiveDirectory) =>
      createPostgresBackends({
        connectionString: DATABASE_URL,
        schema,
        pollIntervalMs: 0,
        ...(archiveDirectory === undefined ? {} : { archiveDirectory }),
      }),
    rawDigest: async () => {
      const rows = await pgs.pool.query({
        text: `SELECT position::text, hash, event_uuid, tenant_uuid, domain, name, aggregate_uuid, version, command_uuid, created_at::text,
                      req_ctx::text, payload::text, event_version FROM "${schema}".events ORDER BY position`,
        rowMode: "array",
      });
      const tags = await pgs.pool.query({
        text: `SELECT * FROM "${schema}".event_tags ORDER BY tenant_uuid, tag, position`,
        rowMode: "array",
      });
      return digest([rows.rows, tags.rows]);
    },
    sql: async (text) => {
      await pgs.pool.query(text.replaceAll("$.", `"${schema}".`));
    },
  };
}

function digest(v: unknown): string {
  return createHash("sha256")
    .update(JSON.stringify(v, (_k, x: unknown) => (typeof x === "bigint" ? x.toString() : x)))
    .digest("hex");
}

const AGGS = 10;

function newEvents(from: number, n: number): NewEvent[] {
  const out: NewEvent[] = [];
  for (let i = from; i < from + n; i++) {
    const a = i % AGGS;
    out.push({
      aggregateUuid: `agg-${a}`,
      tenantUuid: `t${a % 2}`,
      domain: "shop",
      name: i % 3 === 0 ? "Paid" : "Ordered",
      payload: i % 11 === 5 ? null : { n: i, text: `ärger ${i}`, nested: { z: 1, a: [i, "x"] } },
      ...(i % 4 === 0 ? { commandUuid: `cmd-${i}` } : {}),
      ...(i % 7 === 0 ? { eventVersion: 2 } : {}),
      ...(i % 17 === 3 ? { tags: [`order:${i}`] } : {}),
      reqCtx: i % 5 === 0 ? { correlationId: `c-${i}` } : { senderAccountUuid: "u1" },
    });
  }
  return out;
}

async function fill(repo: EventRepository, total: number): Promise<void> {
  for (let i = 0; i < total; i += 6) await repo.append(newEvents(i, Math.min(6, total - i)));
}

async function all<T>(it: AsyncIterable<T[]>): Promise<{ pages: number[]; items: T[] }> {
  const pages: number[] = [];
  const items: T[] = [];
  for await (const p of it) {
    pages.push(p.length);
    items.push(...p);
  }
  return { pages, items };
}

/** Every read the archive must answer as before. */
async function reads(repo: EventRepository): Promise<Record<string, unknown>> {
  const whole = await all(repo.readAll({ batchSize: 7 }));
  const uuids = whole.items.filter((_e, i) => i % 9 === 0).map((e) => e.eventUuid);
  const aggs = Array.from({ length: AGGS }, (_x, i) => `agg-${i}`);
  const loads: Record<string, Event[]> = {};
  for (const a of aggs) {
    loads[a] = await repo.loadAggregate(a);
    loads[`${a}@5`] = await repo.loadAggregate(a, { fromVersion: 5 });
    loads[`${a}@12`] = await repo.loadAggregate(a, { fromVersion: 12 });
  }
  return {
    whole: whole.items,
    big: (await all(repo.readAll({ batchSize: 1000 }))).items,
    tenant: (await all(repo.readAll({ tenantUuid: "t1", batchSize: 4 }))).items,
    paths: (await all(repo.readAll({ eventPaths: ["shop.Paid"], batchSize: 3 }))).items,
    window: (await all(repo.readAll({ afterPosition: 30, untilPosition: 90, batchSize: 5 }))).items,
    tail: (await all(repo.readAll({ afterPosition: 100 }))).items,
    loads,
    many: [...(await repo.loadAggregates(aggs)).entries()],
    byUuid: await repo.loadEvents!(uuids),
    chain: (await all(repo.readChain!({ batchSize: 13 }))).items,
    head: await repo.headPosition(),
    count: (await repo.info()).numItems,
  };
}

async function readsOf(engine: Engine, archiveDirectory?: string): Promise<Record<string, unknown>> {
  const b = engine.open(archiveDirectory);
  try {
    await b.eventRepository.init();
    return await reads(b.eventRepository);
  } finally {
    await b.close();
  }
}

describe.each([
  ["sqlite", sqliteEngine],
  ["postgres", postgresEngine],
] as const)("event archive on %s", (_name, make) => {
  it("answers every read as before at several boundaries, verifies, copies and restores row for row", async () => {
    const engine = make();
    const b = engine.open();
    await b.eventRepository.init();
    await fill(b.eventRepository, 150);
    await b.close();
    const before = await readsOf(engine);
    const raw = await engine.rawDigest();
    const dir = newDir();

    const first = await archiveStore(engine.location, { before: 41, to: dir, segmentEvents: 7 });
    expect(first.archived).toBeGreaterThan(15);
    expect(first.range?.toPosition).toBe(40);
    expect(await readsOf(engine)).toEqual(before);
    expect(await engine.rawDigest()).not.toBe(raw);

    const second = await archiveStore(engine.location, { before: 120, to: dir, segmentEvents: 7 });
    expect(second.range?.fromPosition).toBe(40);
    expect(await readsOf(engine)).toEqual(before);
    // Nothing left below the boundary: a second run does nothing.
    expect((await archiveStore(engine.location, { before: 120, to: dir })).archived).toBe(0);

    const verified = await verifyStore(engine.location);
    expect(verified.ok).toBe(true);
    if (verified.ok) expect(verified.checked).toBe(150);

    // A copy of the archived store holds every event, with the same answers.
    const target = make();
    const copy = await copyStore({ from: engine.location, to: target.location });
    expect(copy.tables.filter((t) => !t.matches).map((t) => [t.table, t.source, t.target])).toEqual([]);
    expect(copy.verified).toBe(true);
    const copied = target.open();
    try {
      const got = await all(copied.eventRepository.readAll({ batchSize: 1000 }));
      expect(got.items).toEqual(before["big"]);
    } finally {
      await copied.close();
    }

    // A moved archive is found through archiveDirectory; without it, the read fails with STORE_ERROR.
    const moved = newDir();
    for (const d of readdirSync(dir)) renameSync(join(dir, d), join(moved, d));
    await expect(readsOf(engine)).rejects.toMatchObject({ code: "STORE_ERROR" });
    expect(await readsOf(engine, moved)).toEqual(before);
    await expect(restoreStoreArchive(engine.location)).rejects.toMatchObject({ code: "STORE_ERROR" });

    const restored = await restoreStoreArchive(engine.location, { from: moved });
    expect(restored.restored).toBe(first.archived + second.archived);
    expect(await engine.rawDigest()).toBe(raw);
    expect(await readsOf(engine)).toEqual(before);
  });

  it("keeps appends right after archiving: versions, the tenant rule, the chain", async () => {
    const engine = make();
    const b = engine.open();
    await b.eventRepository.init();
    await fill(b.eventRepository, 80);
    await b.close();
    const dir = newDir();
    const r = await archiveStore(engine.location, { before: 81, to: dir, segmentEvents: 10 });
    expect(r.range?.toPosition).toBe(79);
    const c = engine.open();
    try {
      await c.eventRepository.init();
      const [e] = await c.eventRepository.append([
        { aggregateUuid: "agg-3", tenantUuid: "t1", domain: "shop", name: "Paid", payload: { n: 1 } },
      ]);
      expect(e!.version).toBe(9);
      expect(e!.position).toBe(81);
      await expect(
        c.eventRepository.append([{ aggregateUuid: "agg-3", tenantUuid: "t0", domain: "shop", name: "Paid", payload: { n: 2 } }]),
      ).rejects.toMatchObject({ code: "NOT_FOUND" });
      await expect(
        c.eventRepository.append([{ aggregateUuid: "agg-3", domain: "shop", name: "Paid", tenantUuid: "t1", payload: {} }], {
          expectedVersions: { "agg-3": 8 },
        }),
      ).rejects.toMatchObject({
        code: "CONFLICT",
      });
      const agg = await c.eventRepository.loadAggregate("agg-3");
      expect(agg.map((x) => x.version)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9]);
    } finally {
      await c.close();
    }
    const v = await verifyStore(engine.location);
    expect(v.ok).toBe(true);
    // A tenant move reads the events table itself: a Postgres shard with archived events is refused.
    if (engine.name === "postgres") {
      const schema = new URL(engine.location).searchParams.get("schema")!;
      await expect(refuseArchived({ pool: pgs.pool, schema }, "source")).rejects.toMatchObject({ code: "INVALID_STATE" });
      await restoreStoreArchive(engine.location);
      await expect(refuseArchived({ pool: pgs.pool, schema }, "source")).resolves.toBeUndefined();
    }
  });

  it("refuses while a handler's checkpoint or a snapshot needs the events, naming it", async () => {
    const engine = make();
    const b = engine.open();
    await b.eventRepository.init();
    await fill(b.eventRepository, 60);
    for (const s of ["readmodelStoreBackend", "snapshotStore"] as const)
      await (b as unknown as Record<string, { init(): Promise<void> }>)[s]!.init();
    await b.close();
    const raw = await engine.rawDigest();
    const dir = newDir();
    await engine.sql("INSERT INTO $.readmodel_checkpoints (handler, position) VALUES ('Orders', 20)");
    await expect(archiveStore(engine.location, { before: 40, to: dir })).rejects.toMatchObject({
      code: "CONFLICT",
      message: expect.stringContaining("handler Orders is at position 20"),
      details: [expect.objectContaining({ kind: "checkpoint", name: "Orders", position: 20 })],
    });
    await engine.sql("UPDATE $.readmodel_checkpoints SET position = 60");
    await engine.sql(
      "INSERT INTO $.snapshots (domain, aggregate, aggregate_uuid, snapshot_version, version, tenant_uuid, state, created_at) VALUES ('shop', 'Order', 'agg-4', 1, 2, 't0', '{}', 0)",
    );
    await expect(archiveStore(engine.location, { before: 40, to: dir })).rejects.toMatchObject({
      code: "CONFLICT",
      details: [expect.objectContaining({ kind: "snapshot", name: "shop.Order agg-4", position: 2 })],
    });
    expect(await engine.rawDigest()).toBe(raw);
    // A snapshot at or past the archived versions lets loads skip the archive: archiving goes on.
    await engine.sql("UPDATE $.snapshots SET version = 5");
    const r = await archiveStore(engine.location, { before: 40, to: dir });
    expect(r.archived).toBeGreaterThan(0);
    // The files are gone: a load from the snapshot (version 6 on) still answers, a load from 1 fails loudly.
    rmSync(dir, { recursive: true, force: true });
    const c = engine.open();
    try {
      await c.eventRepository.init();
      expect((await c.eventRepository.loadAggregate("agg-4", { fromVersion: 6 })).map((e) => e.version)).toEqual([6]);
      await expect(c.eventRepository.loadAggregate("agg-4")).rejects.toMatchObject({ code: "STORE_ERROR" });
      await expect(all(c.eventRepository.readAll())).rejects.toMatchObject({ code: "STORE_ERROR" });
    } finally {
      await c.close();
    }
  });

  it("finds a changed byte of an archive file: reads and verify fail, nothing is read short", async () => {
    const engine = make();
    const b = engine.open();
    await b.eventRepository.init();
    await fill(b.eventRepository, 60);
    await b.close();
    const dir = newDir();
    await archiveStore(engine.location, { before: 50, to: dir, segmentEvents: 8 });
    const range = join(dir, readdirSync(dir)[0]!);
    const seg = readdirSync(range).find((f) => f.endsWith(".jsonl.gz"))!;
    const bytes = readFileSync(join(range, seg));
    bytes[bytes.length - 10] = bytes[bytes.length - 10]! ^ 1;
    writeFileSync(join(range, seg), bytes);
    await expect(readsOf(engine)).rejects.toMatchObject({ code: "STORE_ERROR", message: expect.stringContaining("was changed") });
    await expect(verifyStore(engine.location)).rejects.toMatchObject({ code: "STORE_ERROR" });
    // A changed manifest is not the one the store recorded.
    const manifest = join(range, "manifest.json");
    writeFileSync(manifest, readFileSync(manifest, "utf8").replace('"events"', ' "events"'));
    await expect(readsOf(engine)).rejects.toMatchObject({ code: "STORE_ERROR", message: expect.stringContaining("not the manifest") });
  });
});

// The pg import keeps the driver's types in the file's graph (the scratch pool is a pg.Pool).
void pg;

describe("event archive killed with SIGKILL (SQLite)", () => {
  const cwd = fileURLToPath(new URL("../..", import.meta.url));
  const script = fileURLToPath(new URL("../support/archive-kill-process.ts", import.meta.url));

  /** Runs the archive process, SIGKILLed after its `killAfter`-th progress line (never, when 0); its output. */
  function run(store: string, dir: string, killAfter: number): Promise<string> {
    return new Promise((resolve, reject) => {
      const child = spawn(process.execPath, ["--import", "tsx", script, store, dir, "1900", "40"], {
        cwd,
        stdio: ["ignore", "pipe", "inherit"],
      });
      let out = "";
      let lines = 0;
      child.stdout.on("data", (d: Buffer) => {
        out += d.toString();
        lines = out.split("\n").filter((l) => l.startsWith("progress")).length;
        if (killAfter > 0 && lines >= killAfter) child.kill("SIGKILL");
      });
      child.once("error", reject);
      child.once("exit", (_code, signal) => resolve(`${signal ?? "exited"}\n${out}`));
    });
  }

  it("leaves the store whole at any point; a rerun archives, and reads answer as before", async () => {
    const engine = sqliteEngine();
    const b = engine.open();
    await b.eventRepository.init();
    for (let i = 0; i < 2000; i += 100) await b.eventRepository.append(newEvents(i, 100));
    await b.close();
    const before = await readsOf(engine);
    const raw = await engine.rawDigest();
    const dir = newDir();
    // About 40 segments are written, then verified: 80 progress lines; kill at random points of them.
    const points = [1, 2, ...Array.from({ length: 5 }, () => 3 + Math.floor(Math.random() * 76))];
    let kills = 0;
    for (const k of points) {
      const out = await run(engine.location, dir, k);
      if (!out.startsWith("SIGKILL")) break;
      kills++;
      // Killed before the commit: the database is untouched and verifies; the reads answer as before.
      expect(await engine.rawDigest()).toBe(raw);
      expect((await verifyStore(engine.location)).ok).toBe(true);
      expect(await readsOf(engine)).toEqual(before);
    }
    expect(kills).toBeGreaterThan(0);
    const done = await run(engine.location, dir, 0);
    expect(done).toMatch(/^exited[\s\S]*done \d+/);
    expect(await engine.rawDigest()).not.toBe(raw);
    expect(await readsOf(engine)).toEqual(before);
    expect((await verifyStore(engine.location)).ok).toBe(true);
    // Only the recorded range's directory is left (the partial ones were replaced).
    expect(readdirSync(dir)).toEqual(["range-1-1899"]);
    await restoreStoreArchive(engine.location);
    expect(await engine.rawDigest()).toBe(raw);
  }, 240_000);
});

describe("an app over an archived SQLite store (the CLI, a readmodel from zero)", () => {
  const cwd = fileURLToPath(new URL("../..", import.meta.url));
  const cli = fileURLToPath(new URL("../../src/cli/main.ts", import.meta.url));
  const mneme = (args: string[]) => runProcess(process.execPath, ["--import", "tsx", cli, ...args], cwd);

  it("builds a readmodel from zero over the archive and restores it from zero, as over the database", async () => {
    const filename = files.newFile();
    const writer = files.keep(createFacade({ appName: "archive-app", ...createSqliteBackends({ filename, pollIntervalMs: 0 }) }));
    writer.registerDomain(Counter);
    await writer.start();
    const expected: Record<string, number> = {};
    for (let i = 1; i <= 120; i++) {
      const counterUuid = `c${i % 7}`;
      expected[counterUuid] = (expected[counterUuid] ?? 0) + i;
      await writer.dispatch(Increment, { counterUuid, by: i });
    }
    await writer.stop();
    const dir = newDir();
    const bad = await mneme(["store", "archive", "--store", filename, "--before", "yesterday", "--to", dir]);
    expect(bad.code).toBe(2);
    const run = await mneme(["store", "archive", "--store", filename, "--before", "100", "--to", dir, "--segment-events", "16"]);
    expect(run.stderr).toBe("");
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(/events of positions 1\.\.99 archived/);
    const verify = await mneme(["store", "verify", "--store", filename]);
    expect(verify.code).toBe(0);
    expect(verify.stdout).toMatch(/the hash chain holds: 120 events/);

    const reader = files.keep(createFacade({ appName: "archive-app", ...createSqliteBackends({ filename, pollIntervalMs: 0 }) }));
    reader.registerDomain(Counter);
    const totals = new CounterTotals(reader);
    reader.registerReadmodel(totals);
    await reader.start();
    await until(async () => (await totals.allTotals())["c0"] === expected["c0"], "the readmodel caught up from zero");
    expect(await totals.allTotals()).toEqual(expected);
    expect(totals.applied).toEqual(Array.from({ length: 120 }, (_x, i) => i + 1));
    await reader.runtime.controlEventHandler({ eventHandlerName: "CounterTotals", action: "restore", restoreFromZero: true });
    await until(async () => totals.applied.length === 120, "restored from zero");
    await until(
      () => reader.runtime.listEventHandlers().find((h) => h.eventHandlerName === "CounterTotals")?.restorationState === "restored",
      "the rebuild switched",
    );
    expect(await totals.allTotals()).toEqual(expected);
    await reader.stop();

    // The handler is at the head now: the rest may go too, and --restore brings everything back.
    const rest = await mneme(["store", "archive", "--store", filename, "--before", "2099-01-01T00:00:00Z", "--to", dir]);
    expect(rest.stderr).toBe("");
    expect(rest.code).toBe(0);
    const back = await mneme(["store", "archive", "--restore", "--store", filename]);
    expect(back.stderr).toBe("");
    expect(back.code).toBe(0);
    expect(back.stdout).toMatch(/events of 2 range\(s\) are back in the database/);
  }, 120_000);
});

async function until(check: () => boolean | Promise<boolean>, what: string, ms = 20_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`timed out waiting until ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}
