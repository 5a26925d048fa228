import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Worker } from "node:worker_threads";
import Database from "better-sqlite3";
import fc from "fast-check";
import { afterAll, describe, expect, it } from "vitest";
import { nowNs } from "../../src/model/clock.js";
import { isMnemeError } from "../../src/model/errors.js";
import type { Event, NewEvent } from "../../src/model/types.js";
import type { CommandRecord } from "../../src/store/command-store.js";
import { verifyEventChain } from "../../src/store/event-chain.js";
import {
  createSqliteBackends,
  SqliteCommandStore,
  SqliteEventRepository,
  SqliteLogStore,
  SqliteReadmodelStoreBackend,
} from "../../src/sqlite/index.js";
import { describeCommandStoreContract } from "../../src/testing/command-store-contract.js";
import { describeEventRepositoryContract } from "../../src/testing/event-repository-contract.js";
import { describeLogStoreContract } from "../../src/testing/log-store-contract.js";
import { describeReadmodelStoreBackendContract } from "../../src/testing/readmodel-store-backend-contract.js";
import { rejectsWith } from "../support/rejections.js";
import { SQLITE_DRIVERS } from "../support/sqlite-drivers.js";
import { ev } from "../support/todo-events.js";

const dir = mkdtempSync(join(tmpdir(), "mneme-sqlite-"));
let fileNo = 0;
/** A new database file per test. */
const newFile = (): string => join(dir, `t${++fileNo}.db`);
afterAll(() => rmSync(dir, { recursive: true, force: true }));

// Every test on each Node.js driver (see test/support/sqlite-drivers.ts).
describe.each(SQLITE_DRIVERS)("driver %s", (driver) => {
  // The conformance suites, each test on a new database file.
  describeEventRepositoryContract("SqliteEventRepository", async () => new SqliteEventRepository({ filename: newFile(), driver }));
  describeCommandStoreContract("SqliteCommandStore", async () => new SqliteCommandStore({ filename: newFile(), driver }));
  describeLogStoreContract("SqliteLogStore", async () => new SqliteLogStore({ filename: newFile(), driver }));
  describeReadmodelStoreBackendContract(
    "SqliteReadmodelStoreBackend",
    async () => new SqliteReadmodelStoreBackend({ filename: newFile(), driver }),
  );
  // Again on a connection shared as createSqliteBackends shares it; the other stores are closed at
  // once, so the suite's close() of the tested store is the one that closes the file.
  async function sharedStore<K extends "eventRepository" | "commandStore" | "logStore" | "readmodelStoreBackend">(key: K) {
    const b = createSqliteBackends({ filename: newFile(), driver });
    const others = (["eventRepository", "commandStore", "logStore", "readmodelStoreBackend"] as const).filter((k) => k !== key);
    await Promise.all(others.map((k) => b[k].close()));
    return b[key];
  }
  describeEventRepositoryContract("createSqliteBackends().eventRepository", () => sharedStore("eventRepository"));
  describeCommandStoreContract("createSqliteBackends().commandStore", () => sharedStore("commandStore"));
  describeLogStoreContract("createSqliteBackends().logStore", () => sharedStore("logStore"));
  describeReadmodelStoreBackendContract("createSqliteBackends().readmodelStoreBackend", () => sharedStore("readmodelStoreBackend"));

  async function collect(it: AsyncIterable<Event[]>): Promise<Event[][]> {
    const pages: Event[][] = [];
    for await (const p of it) pages.push(p);
    return pages;
  }

  describe("SqliteEventRepository", () => {
    it("fills defaults, assigns contiguous positions and round-trips createdAt (ns > 2^53) exactly", async () => {
      const repo = new SqliteEventRepository({ filename: newFile(), driver });
      await repo.init();
      const t = nowNs();
      expect(t).toBeGreaterThan(2 ** 53);
      // An undefined payload is not JSON-safe (it would not read back unchanged on every backend): refused, nothing written.
      await expect(repo.append([ev("a", { n: 1 }), { ...ev("b"), payload: undefined }])).rejects.toMatchObject({ code: "INVALID_EVENTS" });
      const out = await repo.append([
        ev("a", { n: 1 }, { createdAt: t }),
        ev("a", { n: 2 }),
        { ...ev("b"), payload: null, tenantUuid: "t1", commandUuid: "c1" },
      ]);
      expect(out.map((e) => [e.position, e.aggregateUuid, e.version])).toEqual([
        [1, "a", 1],
        [2, "a", 2],
        [3, "b", 1],
      ]);
      expect(out[0]?.createdAt).toBe(t);
      expect(out[0]?.tenantUuid).toBe("");
      expect(out[0]?.reqCtx).toEqual({});
      expect(out[0]?.eventUuid).toMatch(/^[0-9a-f-]{36}$/);
      expect(out[2]?.commandUuid).toBe("c1");
      expect(out[2]?.payload).toBeNull();
      const loaded = await repo.loadAggregate("a");
      expect(loaded).toEqual(out.slice(0, 2));
      expect(loaded[0]?.createdAt).toBe(t);
      expect(await repo.loadAggregate("a", { fromVersion: 2 })).toEqual(out.slice(1, 2));
      expect(await repo.headPosition()).toBe(3);
      const info = await repo.info();
      expect(info).toMatchObject({ storeType: "sqlite", numItems: 3, lastItemCreatedAt: out[2]?.createdAt });
      await repo.close();
    });

    it("rejects taken versions and moved expected versions with CONFLICT, gaps and bad events with INVALID_EVENTS, writing nothing", async () => {
      const repo = new SqliteEventRepository({ filename: newFile(), driver });
      await repo.append([ev("a"), ev("a")]);
      await rejectsWith(repo.append([ev("b"), ev("a", {}, { version: 2 })]), "CONFLICT");
      await rejectsWith(repo.append([ev("b"), ev("a", {}, { version: 4 })]), "INVALID_EVENTS");
      await rejectsWith(repo.append([ev("b")], { expectedVersions: { a: 1 } }), "CONFLICT");
      await rejectsWith(repo.append([ev("b")], { expectedVersions: { b: 1 } }), "CONFLICT");
      await rejectsWith(repo.append([ev("b"), { ...ev("c"), domain: "" }]), "INVALID_EVENTS");
      await rejectsWith(repo.append([ev("b"), ev("c", { big: 1n })]), "INVALID_EVENTS");
      expect(await repo.headPosition()).toBe(2);
      expect(await repo.loadAggregate("b")).toEqual([]);
      const ok = await repo.append([ev("b"), ev("a", {}, { version: 3 })], { expectedVersions: { a: 2, b: 0 } });
      expect(ok.map((e) => e.position)).toEqual([3, 4]);
      await repo.close();
    });

    it("a failure inside SQLite mid-batch (duplicate eventUuid after the first 64-row INSERT) leaves nothing; positions stay contiguous", async () => {
      const repo = new SqliteEventRepository({ filename: newFile(), driver });
      await repo.append([ev("x", {}, { eventUuid: "dup" })]);
      const batch = Array.from({ length: 70 }, (_, i) => ev(`agg${i % 3}`, { i }, i === 66 ? { eventUuid: "dup" } : {}));
      await rejectsWith(repo.append(batch), "CONFLICT");
      expect(await repo.headPosition()).toBe(1);
      expect((await repo.loadAggregates(["agg0", "agg1", "agg2"])).get("agg0")).toEqual([]);
      const next = await repo.append(batch.map((e, i) => (i === 66 ? ev("agg0", { i }) : e)));
      expect(next.map((e) => e.position)).toEqual(Array.from({ length: 70 }, (_, i) => i + 2));
      expect((await collect(repo.readAll())).flat()).toEqual([...(await repo.loadAggregate("x")), ...next]);
      await repo.close();
    });

    it("concurrent appends with the same expected version: exactly one wins per round (property)", async () => {
      const repo = new SqliteEventRepository({ filename: newFile(), driver });
      await fc.assert(
        fc.asyncProperty(fc.integer({ min: 2, max: 8 }), fc.uuid(), async (writers, agg) => {
          const results = await Promise.allSettled(
            Array.from({ length: writers }, (_, i) => repo.append([ev(agg, { i })], { expectedVersions: { [agg]: 0 } })),
          );
          const won = results.filter((r) => r.status === "fulfilled");
          const lost = results.filter((r) => r.status === "rejected");
          expect(won).toHaveLength(1);
          for (const r of lost) expect(isMnemeError(r.reason, "CONFLICT")).toBe(true);
          expect(await repo.loadAggregate(agg)).toHaveLength(1);
        }),
        { numRuns: 25 },
      );
      await repo.close();
    });

    it("two threads (two connections) appending to one file: versions stay dense, positions contiguous, a following reader misses nothing", async () => {
      const filename = newFile();
      const repo = new SqliteEventRepository({ filename, driver });
      await repo.init();
      const rounds = 100;
      const workers = [0, 1].map(
        (worker) =>
          // The worker is TypeScript: register tsx's loader in the worker, then import it.
          new Worker(
            `import("tsx/esm/api").then((m) => { m.register(); return import(${JSON.stringify(new URL("../support/sqlite-append-worker.ts", import.meta.url).href)}); })`,
            { eval: true, workerData: { filename, worker, rounds, driver } },
          ),
      );
      const done = Promise.all(
        workers.map(
          (w) =>
            new Promise<{ conflicts: number }>((resolve, reject) => {
              w.once("message", resolve);
              w.once("error", reject);
              w.once("exit", (code) => (code === 0 ? undefined : reject(new Error(`worker exited with ${code}`))));
            }),
        ),
      );
      let finished = false;
      void done.then(
        () => (finished = true),
        () => (finished = true),
      );
      // Follow the store as a checkpointed reader would, while the workers write.
      const seen: number[] = [];
      let after = 0;
      for (;;) {
        const last = finished;
        for await (const page of repo.readAll({ afterPosition: after, batchSize: 50 })) {
          for (const e of page) seen.push(e.position);
          after = (page[page.length - 1] as Event).position;
        }
        if (last) break;
        await new Promise((r) => setTimeout(r, 1));
      }
      // Each worker reports its CONFLICT retries (typically dozens); correctness is asserted below, not the count.
      await done;
      const total = 2 * rounds * 3;
      expect(seen).toEqual(Array.from({ length: total }, (_, i) => i + 1));
      const contended = await repo.loadAggregate("contended");
      expect(contended.map((e) => e.version)).toEqual(Array.from({ length: 2 * rounds }, (_, i) => i + 1));
      // The hash chain follows commit order across the two connections.
      expect(await verifyEventChain(repo)).toMatchObject({ ok: true, checked: total });
      await repo.close();
    }, 60_000);

    it("calls onAppend listeners synchronously after commit, in commit order, also when a listener appends", async () => {
      const repo = new SqliteEventRepository({ filename: newFile(), driver });
      const seenA: number[][] = [];
      const seenB: number[][] = [];
      let reentered = false;
      repo.onAppend((events) => {
        seenA.push(events.map((e) => e.position));
        if (!reentered) {
          reentered = true;
          void repo.append([ev("re")]);
        }
      });
      const off = repo.onAppend((events) => seenB.push(events.map((e) => e.position)));
      const p = repo.append([ev("a"), ev("b")]);
      await p;
      await repo.append([ev("c")]);
      expect(seenA).toEqual([[1, 2], [3], [4]]);
      expect(seenB).toEqual(seenA);
      off();
      await repo.append([ev("d")]);
      expect(seenB).toHaveLength(3);
      // A failed append notifies nobody.
      await rejectsWith(repo.append([ev("a", {}, { version: 1 })]), "CONFLICT");
      expect(seenA).toHaveLength(4);
      await repo.close();
    });

    it("readAll streams keyset pages honouring afterPosition, untilPosition, tenantUuid, eventPaths and signal", async () => {
      const repo = new SqliteEventRepository({ filename: newFile(), driver });
      const batch: NewEvent[] = [];
      for (let i = 0; i < 250; i++) {
        batch.push(ev(`agg${i % 14}`, { i }, { tenantUuid: i % 2 === 0 ? "even" : "odd", name: i % 5 === 0 ? "Five" : "Other" }));
      }
      await repo.append(batch);
      const all = (await collect(repo.readAll({ batchSize: 100 }))).map((p) => p.length);
      expect(all).toEqual([100, 100, 50]);
      const after = (await collect(repo.readAll({ afterPosition: 240, batchSize: 3 }))).flat().map((e) => e.position);
      expect(after).toEqual([241, 242, 243, 244, 245, 246, 247, 248, 249, 250]);
      const bounded = (await collect(repo.readAll({ afterPosition: 10, untilPosition: 20 }))).flat().map((e) => e.position);
      expect(bounded).toEqual([11, 12, 13, 14, 15, 16, 17, 18, 19, 20]);
      const even = (await collect(repo.readAll({ tenantUuid: "even", batchSize: 7 }))).flat();
      expect(even).toHaveLength(125);
      expect(even.every((e) => e.tenantUuid === "even")).toBe(true);
      const fives = (await collect(repo.readAll({ eventPaths: ["Todo.Five"], batchSize: 4 }))).flat();
      expect(fives.map((e) => (e.payload as { i: number }).i)).toEqual(Array.from({ length: 50 }, (_, k) => k * 5));
      expect(await collect(repo.readAll({ eventPaths: [] }))).toEqual([]);
      const ac = new AbortController();
      const pages: Event[][] = [];
      for await (const p of repo.readAll({ batchSize: 10, signal: ac.signal })) {
        pages.push(p);
        if (pages.length === 2) ac.abort();
      }
      expect(pages).toHaveLength(2);
      await rejectsWith(collect(repo.readAll({ batchSize: 0 })), "INVALID_REQUEST");
      await repo.close();
    });

    it("readAll is lazy: events appended between pages are read, pages are queried one at a time", async () => {
      const repo = new SqliteEventRepository({ filename: newFile(), driver });
      await repo.append([ev("a"), ev("a"), ev("a")]);
      const seen: number[] = [];
      let appended = false;
      for await (const page of repo.readAll({ batchSize: 2 })) {
        seen.push(...page.map((e) => e.position));
        if (!appended) {
          appended = true;
          await repo.append([ev("b"), ev("b")]);
        }
      }
      expect(seen).toEqual([1, 2, 3, 4, 5]);
      await repo.close();
    });

    it("loadAggregates answers many aggregates in one query, absent ones as []", async () => {
      const repo = new SqliteEventRepository({ filename: newFile(), driver });
      const batch: NewEvent[] = [];
      for (let i = 0; i < 300; i++) batch.push(ev(`agg${i % 100}`, { i }));
      await repo.append(batch);
      const ids = Array.from({ length: 100 }, (_, i) => `agg${i}`).concat(["missing"]);
      const m = await repo.loadAggregates(ids);
      expect([...m.keys()]).toEqual(ids);
      expect(m.get("missing")).toEqual([]);
      expect(m.get("agg7")?.map((e) => [e.version, (e.payload as { i: number }).i])).toEqual([
        [1, 7],
        [2, 107],
        [3, 207],
      ]);
      await repo.close();
    });

    it("a reopened file keeps everything", async () => {
      const filename = newFile();
      const b1 = createSqliteBackends({ filename, driver });
      const events = await b1.eventRepository.append([
        ev("a", { t: "x" }, { reqCtx: { senderAccountUuid: "acc", attributes: { k: [1, 2] } } }),
        ev("b"),
      ]);
      await b1.commandStore.record(commandRecord("cmd1", events[0]?.createdAt ?? 0));
      const log = await b1.logStore.append({ level: "info", message: "hello", data: { n: 1 } });
      await b1.readmodelStoreBackend.collection("todos").put("a", { title: "x" });
      await b1.readmodelStoreBackend.setCheckpoint("TodoProjection", 2);
      await b1.close();

      const b2 = createSqliteBackends({ filename, driver });
      expect(await b2.eventRepository.loadAggregate("a")).toEqual([events[0]]);
      expect(await b2.eventRepository.headPosition()).toBe(2);
      expect(await b2.commandStore.get("cmd1")).toEqual(commandRecord("cmd1", events[0]?.createdAt ?? 0));
      expect((await b2.logStore.list()).items).toEqual([log]);
      expect(await b2.readmodelStoreBackend.collection("todos").get("a")).toEqual({ title: "x" });
      expect(await b2.readmodelStoreBackend.getCheckpoint("TodoProjection")).toBe(2);
      expect(await b2.readmodelStoreBackend.listCollections()).toEqual(["todos"]);
      const more = await b2.eventRepository.append([ev("a")]);
      expect(more[0]).toMatchObject({ position: 3, version: 2 });
      await b2.close();
    });
  });

  function commandRecord(commandUuid: string, createdAt: number): CommandRecord {
    return {
      commandUuid,
      domain: "Todo",
      name: "CreateTodo",
      tenantUuid: "t",
      reqCtx: { senderAccountUuid: "acc" },
      payload: { title: "x" },
      status: "succeeded",
      eventUuids: ["e1"],
      createdAt,
      durationMicros: 12.5,
    };
  }

  describe("SqliteReadmodelStoreBackend", () => {
    it("a throwing transaction leaves nothing; a resolving one commits docs and checkpoint together", async () => {
      const b = new SqliteReadmodelStoreBackend({ filename: newFile(), driver });
      const todos = b.collection<{ n: number }>("todos");
      await todos.put("keep", { n: 0 });
      await expect(
        b.transaction(async () => {
          await todos.put("a", { n: 1 });
          await todos.delete("keep");
          await b.setCheckpoint("h", 5);
          expect(await todos.get("a")).toEqual({ n: 1 });
          expect(await todos.get("keep")).toBeUndefined();
          expect(await todos.count()).toBe(1);
          expect(await b.getCheckpoint("h")).toBe(5);
          throw new Error("boom");
        }),
      ).rejects.toThrow("boom");
      expect(await todos.list()).toEqual([{ n: 0 }]);
      expect(await b.getCheckpoint("h")).toBe(0);

      const r = await b.transaction(async () => {
        await todos.clear();
        await todos.putMany([
          ["b", { n: 2 }],
          ["c", { n: 3 }],
        ]);
        expect(await todos.list()).toEqual([{ n: 2 }, { n: 3 }]);
        await b.setCheckpoint("h", 7);
        return "ok";
      });
      expect(r).toBe("ok");
      expect(await todos.list()).toEqual([{ n: 2 }, { n: 3 }]);
      expect(await b.getCheckpoint("h")).toBe(7);
      await b.close();
    });

    it("serialises: outside writes wait for the running transaction, outside reads see committed data, nested joins outer", async () => {
      const b = new SqliteReadmodelStoreBackend({ filename: newFile(), driver });
      const c = b.collection<{ v: string }>("c");
      const order: string[] = [];
      let release!: () => void;
      const gate = new Promise<void>((r) => (release = r));
      const tx = b.transaction(async () => {
        await c.put("k", { v: "tx" });
        order.push("tx-put");
        await b.transaction(async () => {
          await c.put("n", { v: "nested" });
        });
        await gate;
        order.push("tx-end");
      });
      // Let the transaction start before the outside write.
      await new Promise((r) => setImmediate(r));
      const outside = c.put("k", { v: "outside" }).then(() => order.push("outside-put"));
      await new Promise((r) => setImmediate(r));
      expect(await c.get("k")).toBeUndefined();
      expect(await c.get("n")).toBeUndefined();
      release();
      await Promise.all([tx, outside]);
      expect(order).toEqual(["tx-put", "tx-end", "outside-put"]);
      expect(await c.get("k")).toEqual({ v: "outside" });
      expect(await c.get("n")).toEqual({ v: "nested" });
      await b.close();
    });

    it("does not let a readmodel transaction capture event appends made on the shared connection meanwhile", async () => {
      const backends = createSqliteBackends({ filename: newFile(), driver });
      const { eventRepository, readmodelStoreBackend } = backends;
      await expect(
        readmodelStoreBackend.transaction(async () => {
          await readmodelStoreBackend.collection("c").put("x", { a: 1 });
          // e.g. live traffic while a restore batch runs
          await eventRepository.append([ev("a")]);
          throw new Error("restore batch failed");
        }),
      ).rejects.toThrow("restore batch failed");
      expect(await eventRepository.headPosition()).toBe(1);
      expect(await readmodelStoreBackend.collection("c").get("x")).toBeUndefined();
      await backends.close();
    });

    it("lists by a document field with stable key tie-break, filters with where, rejects unsafe field names", async () => {
      const b = new SqliteReadmodelStoreBackend({ filename: newFile(), driver });
      const c = b.collection<{ n?: unknown; s?: string; done?: boolean }>("c");
      await c.putMany([
        ["k1", { n: 2, s: "b", done: true }],
        ["k2", { n: 1, s: "a", done: false }],
        ["k3", { n: 2, s: "c", done: true }],
        ["k4", { s: "d", done: false }],
        ["k5", { n: "1", s: "e", done: false }],
        ["k6", { n: true, s: "f", done: true }],
      ]);
      const keysOf = (docs: { s?: string }[]) => docs.map((d) => d.s).join("");
      expect(keysOf(await c.list({ orderBy: "n" }))).toBe("dfabce");
      expect(keysOf(await c.list({ orderBy: "n", descending: true }))).toBe("ecbafd");
      expect(keysOf(await c.list({ orderBy: "n", offset: 2, limit: 2 }))).toBe("ab");
      expect(keysOf(await c.list({ where: { done: true } }))).toBe("bcf");
      expect(keysOf(await c.list({ where: { n: 1 } }))).toBe("a");
      expect(keysOf(await c.list({ where: { n: "1" } }))).toBe("e");
      expect(await c.count({ done: false })).toBe(3);
      expect(await c.count()).toBe(6);
      await rejectsWith(c.list({ orderBy: "n') --" }), "INVALID_REQUEST");
      await rejectsWith(c.list({ orderBy: "a.b" }), "INVALID_REQUEST");
      await rejectsWith(c.list({ where: { "x'y": 1 } }), "INVALID_REQUEST");
      await rejectsWith(c.count({ n: Number.NaN }), "INVALID_REQUEST");
      expect([...(await c.getMany(["k3", "zz", "k1"])).keys()]).toEqual(["k3", "k1"]);
      expect(await c.delete("k1")).toBe(true);
      expect(await c.delete("k1")).toBe(false);
      await b.close();
    });
  });

  describe("SqliteCommandStore and SqliteLogStore", () => {
    it("pages commands by (createdAt, commandUuid) and filters", async () => {
      const s = new SqliteCommandStore({ filename: newFile(), driver });
      const t = nowNs();
      for (let i = 0; i < 25; i++)
        await s.record({
          ...commandRecord(`c${String(i).padStart(2, "0")}`, t + (i % 5) * 256),
          status: i % 3 === 0 ? "failed" : "succeeded",
        });
      await rejectsWith(s.record(commandRecord("c00", t)), "CONFLICT");
      const seen: string[] = [];
      let cursor: string | undefined;
      do {
        const page = await s.list({ limit: 4, ...(cursor === undefined ? {} : { cursor }) });
        seen.push(...page.items.map((r) => r.commandUuid));
        cursor = page.nextCursor;
      } while (cursor !== undefined);
      const expected = Array.from({ length: 25 }, (_, i) => ({ id: `c${String(i).padStart(2, "0")}`, at: t + (i % 5) * 256 }))
        .sort((a, b) => a.at - b.at || (a.id < b.id ? -1 : 1))
        .map((x) => x.id);
      expect(seen).toEqual(expected);
      expect((await s.list({ status: "failed", limit: 100 })).items).toHaveLength(9);
      await rejectsWith(s.list({ cursor: "garbage!" }), "INVALID_REQUEST");
      expect(await s.delete("c00")).toBe(true);
      expect((await s.info()).numItems).toBe(24);
      await s.close();
    });

    it("gives log entries increasing ids, never reused after a delete", async () => {
      const s = new SqliteLogStore({ filename: newFile(), driver });
      const a = await s.append({ level: "info", message: "a" });
      const b = await s.append({ level: "error", message: "b", source: "x", tenantUuid: "t", data: { k: 1 } });
      expect(b.id).toBeGreaterThan(a.id);
      expect(await s.delete(b.id)).toBe(true);
      const c = await s.append({ level: "warn", message: "c" });
      expect(c.id).toBeGreaterThan(b.id);
      expect((await s.list({ level: "warn" })).items).toEqual([c]);
      await rejectsWith(s.append({ level: "loud" as "info", message: "x" }), "INVALID_REQUEST");
      await s.close();
    });
  });

  describe("createSqliteBackends", () => {
    it("shares one connection, closes it once when every store is closed, and close() is idempotent", async () => {
      const b = createSqliteBackends({ filename: newFile(), driver, tablePrefix: "app1_" });
      await b.eventRepository.append([ev("a")]);
      await b.eventRepository.close();
      // The other stores still work on the shared connection.
      await b.logStore.append({ level: "info", message: "still open" });
      await rejectsWith(b.eventRepository.headPosition(), "STORE_CLOSED");
      await b.close();
      await b.close();
      await rejectsWith(b.logStore.list(), "STORE_CLOSED");
    });

    it("uses a caller's Database without closing it, and keeps table prefixes apart", async () => {
      const db = new Database(newFile());
      const one = createSqliteBackends({ database: db, tablePrefix: "one_" });
      const two = createSqliteBackends({ database: db, tablePrefix: "two_" });
      await one.eventRepository.append([ev("a")]);
      expect(await two.eventRepository.headPosition()).toBe(0);
      await one.close();
      await two.close();
      expect(db.open).toBe(true);
      const tables = db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'one_%' ORDER BY name").all();
      // The events table, its tag index (docs/dcb.md) and the prefix's store format record (see docs/upgrading.md).
      expect(tables).toEqual([{ name: "one_event_tags" }, { name: "one_events" }, { name: "one_store_format" }]);
      db.close();
      expect(() => createSqliteBackends({ filename: newFile(), driver, tablePrefix: "x; DROP" })).toThrow(/tablePrefix/);
    });
  });
});
