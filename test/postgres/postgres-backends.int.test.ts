import fc from "fast-check";
import type pg from "pg";
import { describe, expect, it, vi } from "vitest";
import { DATABASE_URL, postgresScratch } from "../support/postgres-scratch.js";
import { createFacade } from "../../src/index.js";
import { newUuid } from "../../src/model/clock.js";
import { isMnemeError } from "../../src/model/errors.js";
import type { Event } from "../../src/model/types.js";
import {
  createPostgresBackends,
  PostgresCommandStore,
  PostgresEventRepository,
  PostgresLogStore,
  PostgresReadmodelStoreBackend,
} from "../../src/postgres/index.js";
import type { CommandStore } from "../../src/store/command-store.js";
import type { EventRepository } from "../../src/store/event-repository.js";
import type { LogStore } from "../../src/store/log-store.js";
import type { ReadmodelStoreBackend } from "../../src/store/readmodel-store-backend.js";
import { advisoryKey } from "../../src/postgres/postgres-schema.js";
import { describeCommandStoreContract } from "../../src/testing/command-store-contract.js";
import { describeEventRepositoryContract } from "../../src/testing/event-repository-contract.js";
import { describeLogStoreContract } from "../../src/testing/log-store-contract.js";
import { describeReadmodelStoreBackendContract } from "../../src/testing/readmodel-store-backend-contract.js";
import { Counter, CounterTotals, Increment } from "../support/counter-domain.js";
import { rejectsWith } from "../support/rejections.js";
import { ev } from "../support/todo-events.js";

const { pool, newPool, newSchema, dropSchema, inSchema } = postgresScratch("mneme_t");
const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => from + i);

{
  const c = inSchema<EventRepository>((schema) => new PostgresEventRepository({ pool, schema }));
  describeEventRepositoryContract("PostgresEventRepository", c.factory, c.opts);
}
{
  // Without group commit every append is a statement of its own, on a connection of its own (the same rules).
  const c = inSchema<EventRepository>((schema) => new PostgresEventRepository({ pool, schema, maxAppendsPerCommit: 1 }));
  describeEventRepositoryContract("PostgresEventRepository, maxAppendsPerCommit 1", c.factory, c.opts);
}
{
  const c = inSchema<CommandStore>((schema) => new PostgresCommandStore({ pool, schema }));
  describeCommandStoreContract("PostgresCommandStore", c.factory, c.opts);
}
{
  // Claims committed without waiting for the disk flush keep every rule of the suite.
  const c = inSchema<CommandStore>((schema) => new PostgresCommandStore({ pool, schema, claimCommit: "async" }));
  describeCommandStoreContract("PostgresCommandStore (claimCommit: async)", c.factory, c.opts);
}
{
  const c = inSchema<LogStore>((schema) => new PostgresLogStore({ pool, schema }));
  describeLogStoreContract("PostgresLogStore", c.factory, c.opts);
}
{
  const c = inSchema<ReadmodelStoreBackend>((schema) => new PostgresReadmodelStoreBackend({ pool, schema }));
  describeReadmodelStoreBackendContract("PostgresReadmodelStoreBackend", c.factory, c.opts);
}

// Again through createPostgresBackends (one pool, one schema per test); the other three stores are closed at once.
type Backends = ReturnType<typeof createPostgresBackends>;
function storeOf<K extends "eventRepository" | "commandStore" | "logStore" | "readmodelStoreBackend">(schema: string, key: K): Backends[K] {
  const b = createPostgresBackends({ pool, schema });
  for (const k of ["eventRepository", "commandStore", "logStore", "readmodelStoreBackend"] as const) if (k !== key) void b[k].close();
  return b[key];
}
{
  const c = inSchema<EventRepository>((schema) => storeOf(schema, "eventRepository"));
  describeEventRepositoryContract("createPostgresBackends().eventRepository", c.factory, c.opts);
}
{
  const c = inSchema<ReadmodelStoreBackend>((schema) => storeOf(schema, "readmodelStoreBackend"));
  describeReadmodelStoreBackendContract("createPostgresBackends().readmodelStoreBackend", c.factory, c.opts);
}

async function readAll(repo: PostgresEventRepository): Promise<Event[]> {
  const out: Event[] = [];
  for await (const page of repo.readAll()) out.push(...page);
  return out;
}

/** Polls `cond` (a database fact, not a duration) until true; fails after `tries`. */
async function until(cond: () => Promise<boolean> | boolean, what: string, tries = 500): Promise<void> {
  for (let i = 0; i < tries; i++) {
    if (await cond()) return;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error(`timed out waiting for: ${what}`);
}

/**
 * Sessions holding (granted) or waiting for (not granted) the advisory lock of
 * `key`. Only this one key: other test files run in parallel on the same
 * database, and their sessions must never be counted (or terminated) here.
 * pg_locks shows a bigint key as its high and low 32 bits (classid, objid; objsubid 1).
 */
async function advisoryLockPids(key: string, granted: boolean): Promise<number[]> {
  const u = BigInt.asUintN(64, BigInt(key));
  const res = await pool.query<{ pid: number }>(
    `SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted = $1 AND classid = $2::bigint::oid AND objid = $3::bigint::oid AND objsubid = 1
       AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`,
    [granted, Number(u >> 32n), Number(u & 0xffffffffn)],
  );
  return res.rows.map((r) => r.pid);
}

/** Sessions waiting for the advisory lock of `key`. */
function advisoryWaiters(key: string): Promise<number[]> {
  return advisoryLockPids(key, false);
}

/** Calls the append function in an explicit transaction left open: an append "in flight" of another instance. */
async function openAppend(schema: string, client: pg.PoolClient, aggregateUuid: string, channel = `mneme_events_${schema}`): Promise<void> {
  await client.query("BEGIN");
  await client.query(
    `SELECT * FROM "${schema}".mneme_append($1::bigint, $2, 'test', $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::integer[], $9::text[], $10::bigint[], $11::jsonb[], $12::jsonb[], '{}', '{}', '{}')`,
    [
      advisoryKey("mneme:events", schema),
      channel,
      [newUuid()],
      [""],
      ["Todo"],
      ["TodoCreated"],
      [aggregateUuid],
      [null],
      [null],
      [Date.now() * 1e6],
      ["{}"],
      ['{"held":true}'],
    ],
  );
}

describe("PostgresEventRepository across instances", () => {
  it("init runs concurrently from several instances and is idempotent", async () => {
    const schema = newSchema();
    const repos = [newPool(2), newPool(2), newPool(2)].map((p) => new PostgresEventRepository({ pool: p, schema }));
    await Promise.all(repos.map((r) => r.init()));
    await Promise.all(repos.map((r) => r.init()));
    await repos[0]?.append([ev("a")]);
    expect(await repos[2]?.headPosition()).toBe(1);
    await Promise.all(repos.map((r) => r.close()));
  });

  it("two instances on two pools appending with the same expected version: exactly one wins", async () => {
    const schema = newSchema();
    const a = new PostgresEventRepository({ pool: newPool(), schema });
    const b = new PostgresEventRepository({ pool: newPool(), schema });
    await a.init();
    await b.init();
    for (let round = 0; round < 10; round++) {
      const agg = newUuid();
      await a.append([ev(agg)]);
      const results = await Promise.allSettled(
        [a, b, a, b].map((r, i) => r.append([ev(agg, { i }), ev(agg, { i })], { expectedVersions: { [agg]: 1 } })),
      );
      const ok = results.filter((r) => r.status === "fulfilled");
      expect(ok).toHaveLength(1);
      for (const r of results) if (r.status === "rejected") expect(isMnemeError(r.reason, "CONFLICT")).toBe(true);
      expect((await b.loadAggregate(agg)).map((e) => e.version)).toEqual([1, 2, 3]);
    }
    // Without expected versions, both instances' appends all land, versions assigned under the lock.
    const agg = newUuid();
    await Promise.all(Array.from({ length: 20 }, (_, i) => (i % 2 === 0 ? a : b).append([ev(agg, { i })])));
    expect((await a.loadAggregate(agg)).map((e) => e.version)).toEqual(Array.from({ length: 20 }, (_, i) => i + 1));
    const all = await readAll(b);
    expect(all.map((e) => e.position)).toEqual(Array.from({ length: all.length }, (_, i) => i + 1));
    await a.close();
    await b.close();
  });

  it("property: concurrent appends from two instances with random expected versions match a serial model", async () => {
    const schema = newSchema();
    const a = new PostgresEventRepository({ pool: newPool(), schema, pollIntervalMs: 0 });
    const b = new PostgresEventRepository({ pool: newPool(), schema, pollIntervalMs: 0 });
    await a.init();
    let run = 0;
    const call = fc.record({
      instance: fc.boolean(),
      agg: fc.integer({ min: 0, max: 2 }),
      count: fc.integer({ min: 1, max: 3 }),
      expected: fc.option(fc.integer({ min: 0, max: 4 }), { nil: undefined }),
    });
    await fc.assert(
      fc.asyncProperty(fc.array(call, { minLength: 1, maxLength: 12 }), async (calls) => {
        const prefix = `p${run++}-`;
        const results = await Promise.allSettled(
          calls.map((c, i) =>
            (c.instance ? a : b).append(
              Array.from({ length: c.count }, (_, k) => ev(prefix + c.agg, { i, k })),
              c.expected === undefined ? {} : { expectedVersions: { [prefix + c.agg]: c.expected } },
            ),
          ),
        );
        const ok = new Map<number, Event[]>();
        results.forEach((r, i) => {
          if (r.status === "fulfilled") ok.set(i, r.value);
          else expect(isMnemeError(r.reason, "CONFLICT"), String(r.reason)).toBe(true);
        });
        // A call without expectedVersions never conflicts; one that succeeded saw exactly its expected version.
        calls.forEach((c, i) => {
          if (c.expected === undefined) expect(ok.has(i)).toBe(true);
          const got = ok.get(i);
          if (got !== undefined && c.expected !== undefined) expect(got[0]?.version).toBe(c.expected + 1);
        });
        // Replaying the successful calls in position order rebuilds every aggregate's stream: versions 1..n, nothing else stored.
        const committed = [...ok.values()].sort((x, y) => (x[0] as Event).position - (y[0] as Event).position);
        for (const agg of [0, 1, 2]) {
          const mine = committed.flat().filter((e) => e.aggregateUuid === prefix + agg);
          expect(mine.map((e) => e.version)).toEqual(mine.map((_, k) => k + 1));
          expect(await a.loadAggregate(prefix + agg)).toEqual(mine);
        }
      }),
      { numRuns: 25 },
    );
    const all = await readAll(b);
    expect(all.map((e) => e.position)).toEqual(all.map((_, i) => i + 1));
    await a.close();
    await b.close();
  });

  it("is gap-safe: an append committed after another still in flight is not readable before it, and gets the higher position", async () => {
    const schema = newSchema();
    const repo = new PostgresEventRepository({ pool, schema, pollIntervalMs: 0 });
    await repo.init();
    await repo.append([ev("before")]);
    const held = await pool.connect();
    try {
      await openAppend(schema, held, "held");
      // A later append from this instance must wait for the open one: it cannot take a lower position nor commit first.
      let settled = false;
      const later = repo.append([ev("later")]).finally(() => {
        settled = true;
      });
      await until(
        async () => (await advisoryWaiters(advisoryKey("mneme:events", schema))).length === 1,
        "the later append waits for the append lock",
      );
      expect(settled).toBe(false);
      expect((await readAll(repo)).map((e) => e.aggregateUuid)).toEqual(["before"]);
      expect(await repo.headPosition()).toBe(1);
      await held.query("COMMIT");
      const [laterEvent] = await later;
      const all = await readAll(repo);
      expect(all.map((e) => e.aggregateUuid)).toEqual(["before", "held", "later"]);
      expect(all.map((e) => e.position)).toEqual([1, 2, 3]);
      expect(laterEvent?.position).toBe(3);
    } finally {
      held.release();
      await repo.close();
    }
  });

  it("readAll reads the page after a full one while the caller works, from the second page on; a read-ahead nobody takes is dropped", async () => {
    const schema = newSchema();
    const repo = new PostgresEventRepository({ pool: newPool(), schema, pollIntervalMs: 0 });
    await repo.init();
    try {
      for (let i = 0; i < 35; i++) await repo.append([ev(`r${i}`)]);
      const reads = vi.spyOn(repo as unknown as { poolQuery: (...a: unknown[]) => Promise<unknown> }, "poolQuery");
      const it = repo.readAll({ batchSize: 10 })[Symbol.asyncIterator]();
      expect((await it.next()).value!.map((e: Event) => e.position)).toEqual(range(1, 10));
      // One page handed out: a caller that reads one page (a shared partition read) pays for no other.
      expect(reads).toHaveBeenCalledTimes(1);
      expect((await it.next()).value!.map((e: Event) => e.position)).toEqual(range(11, 20));
      // The second page is full: the third is on its way before the caller asks for it.
      expect(reads).toHaveBeenCalledTimes(3);
      // Appended now, after the read-ahead was sent: not in the third page, found by the next read.
      await repo.append([ev("late")]);
      expect((await it.next()).value!.map((e: Event) => e.position)).toEqual(range(21, 30));
      expect((await it.next()).value!.map((e: Event) => e.position)).toEqual(range(31, 36));
      expect((await it.next()).done).toBe(true);
      // Pages 1 and 2, 3 and 4 read ahead, the empty read after the partial page 4.
      expect(reads).toHaveBeenCalledTimes(5);
      reads.mockClear();
      // Left after two pages: the read-ahead of the third is dropped without an unhandled rejection, and the pool is free again.
      const left = repo.readAll({ batchSize: 10 })[Symbol.asyncIterator]();
      await left.next();
      await left.next();
      await left.return!(undefined);
      expect(reads).toHaveBeenCalledTimes(3);
      const again: number[] = [];
      for await (const page of repo.readAll({ afterPosition: 30, batchSize: 10 })) again.push(...page.map((e) => e.position));
      expect(again).toEqual(range(31, 36));
    } finally {
      await repo.close();
      await dropSchema(schema);
    }
  });

  it("a follower that checkpoints while appends stay open never skips a position (many writers, two instances)", async () => {
    const schema = newSchema();
    const a = new PostgresEventRepository({ pool: newPool(), schema, pollIntervalMs: 0 });
    const b = new PostgresEventRepository({ pool: newPool(), schema, pollIntervalMs: 0 });
    await a.init();
    let writing = true;
    const writers = Promise.all(
      Array.from({ length: 6 }, async (_, w) => {
        for (let i = 0; i < 25; i++) await (w % 2 === 0 ? a : b).append([ev(`w${w}`, { i }), ev(newUuid())]);
      }),
    ).finally(() => {
      writing = false;
    });
    const seen: number[] = [];
    let checkpoint = 0;
    const follow = async (): Promise<void> => {
      for await (const page of b.readAll({ afterPosition: checkpoint, batchSize: 5 })) {
        for (const e of page) seen.push(e.position);
        checkpoint = (page[page.length - 1] as Event).position;
      }
    };
    while (writing) await follow();
    await writers;
    await follow();
    expect(seen).toEqual(Array.from({ length: 300 }, (_, i) => i + 1));
    await a.close();
    await b.close();
  });

  it("a connection killed mid-append (rows inserted, not committed) leaves no partial batch", async () => {
    const schema = newSchema();
    const repo = new PostgresEventRepository({ pool, schema, pollIntervalMs: 0 });
    await repo.init();
    await repo.append([ev("first")]);
    // A test-only trigger makes the append wait after its INSERT, before COMMIT, on a lock this test holds.
    const gateKey = advisoryKey("test-gate", schema);
    await pool.query(`CREATE FUNCTION "${schema}".test_gate() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN PERFORM pg_advisory_xact_lock(${gateKey}); RETURN NULL; END $$`);
    await pool.query(
      `CREATE TRIGGER test_gate AFTER INSERT ON "${schema}".events FOR EACH STATEMENT EXECUTE FUNCTION "${schema}".test_gate()`,
    );
    const gate = await pool.connect();
    try {
      await gate.query("BEGIN");
      await gate.query(`SELECT pg_advisory_xact_lock(${gateKey})`);
      // rejectsWith attaches its handler now: the rejection may come before the next line that awaits it.
      const pending = rejectsWith(repo.append(Array.from({ length: 50 }, (_, i) => ev("batch", { i }))), "UNAVAILABLE");
      await until(async () => (await advisoryWaiters(gateKey)).length === 1, "the append waits in the trigger, after its INSERT");
      const [pid] = await advisoryWaiters(gateKey);
      await pool.query("SELECT pg_terminate_backend($1)", [pid]);
      await pending;
      await gate.query("COMMIT");
    } finally {
      gate.release();
    }
    await pool.query(`DROP TRIGGER test_gate ON "${schema}".events`);
    expect(await repo.loadAggregate("batch")).toEqual([]);
    expect((await readAll(repo)).map((e) => e.aggregateUuid)).toEqual(["first"]);
    // The repository goes on: the next append gets the next version and a higher position.
    const [next] = await repo.append([ev("batch")]);
    expect(next?.version).toBe(1);
    expect(next?.position).toBeGreaterThan(1);
    await repo.close();
  });

  it("LISTEN/NOTIFY tells a second instance about appends (not about its own), and it listens again after its connection is killed", async () => {
    const schema = newSchema();
    const a = new PostgresEventRepository({ pool: newPool(), schema, pollIntervalMs: 0 });
    const b = new PostgresEventRepository({ pool: newPool(), schema, pollIntervalMs: 0, reconnectDelayMs: 10 });
    await a.init();
    const calls: (number | undefined)[] = [];
    const off = b.onExternalAppend((position) => {
      calls.push(position);
    });
    await until(() => b.externalAppendListening, "b listens");
    const [own] = await b.append([ev("own")]);
    const [x] = await a.append([ev("x")]);
    await until(() => calls.length >= 1, "b is notified of a's append");
    // b's own notification came first on the same session and was not reported.
    expect(own?.position).toBe(1);
    expect(calls).toEqual([x?.position]);

    const listener = await pool.query<{ pid: number }>("SELECT pid FROM pg_stat_activity WHERE query = $1", [
      `LISTEN "mneme_events_${schema}"`,
    ]);
    expect(listener.rows).toHaveLength(1);
    await pool.query("SELECT pg_terminate_backend($1)", [listener.rows[0]?.pid]);
    await until(() => b.externalAppendListening && calls.length === 2, "b listens again and reports a possible miss once");
    expect(calls[1]).toBeUndefined();
    const [y] = await a.append([ev("y")]);
    await until(() => calls.length === 3, "b is notified after reconnecting");
    expect(calls[2]).toBe(y?.position);
    off();
    await a.close();
    await b.close();
  });

  it("the polling fallback reports appends that sent no notification", async () => {
    const schema = newSchema();
    const a = new PostgresEventRepository({ pool, schema, pollIntervalMs: 0 });
    const b = new PostgresEventRepository({ pool: newPool(), schema, pollIntervalMs: 20 });
    await a.init();
    let calls = 0;
    b.onExternalAppend(() => {
      calls++;
    });
    await until(() => b.externalAppendListening, "b listens");
    const held = await pool.connect();
    try {
      // An append notifying another channel: only the poll can see it.
      await openAppend(schema, held, "silent", "some_other_channel");
      await held.query("COMMIT");
    } finally {
      held.release();
    }
    await until(() => calls >= 1, "the poll reports the silent append");
    expect((await readAll(b)).map((e) => e.aggregateUuid)).toEqual(["silent"]);
    await a.close();
    await b.close();
  });

  it("rejects bad options and bad input with codes", async () => {
    expect(() => new PostgresEventRepository({ pool, schema: "bad-name" })).toThrow(/identifier/);
    expect(() => new PostgresEventRepository({ pool, schema: 'x"; DROP TABLE y; --' })).toThrow(/identifier/);
    const schema = newSchema();
    const repo = new PostgresEventRepository({ pool, schema });
    await rejectsWith(repo.append([ev("a")]), "NOT_STARTED");
    await repo.init();
    await rejectsWith(repo.append([ev("a", { s: "nul \u0000 inside" })]), "INVALID_EVENTS");
    await rejectsWith(repo.append([ev("a", {}, { createdAt: 1.5 })]), "INVALID_EVENTS");
    await rejectsWith(repo.append([ev("a", 1n)]), "INVALID_EVENTS");
    const [e] = await repo.append([ev("a", { ok: true }, { eventUuid: "fixed-id" })]);
    await rejectsWith(repo.append([ev("b", {}, { eventUuid: "fixed-id" })]), "CONFLICT");
    expect(await repo.loadAggregate("b")).toEqual([]);
    expect(e?.createdAt).toBeGreaterThan(2 ** 53);
    expect((await repo.loadAggregate("a"))[0]?.createdAt).toBe(e?.createdAt);
    await repo.close();
  });
});

describe("PostgresReadmodelStoreBackend across instances", () => {
  it("the advisory lock of a handler is exclusive across two backends and passes on when the holder closes or loses its connection", async () => {
    const schema = newSchema();
    const a = new PostgresReadmodelStoreBackend({ pool: newPool(), schema });
    const b = new PostgresReadmodelStoreBackend({ pool: newPool(), schema });
    await a.init();
    expect(await a.tryLock("Projection")).toBe(true);
    expect(await a.tryLock("Projection")).toBe(true);
    expect(await b.tryLock("Projection")).toBe(false);
    expect(await b.tryLock("Other")).toBe(true);
    expect(await a.tryLock("Other")).toBe(false);
    await a.unlock("Projection");
    expect(await b.tryLock("Projection")).toBe(true);
    expect(await a.tryLock("Projection")).toBe(false);
    await b.close();
    expect(await a.tryLock("Projection")).toBe(true);
    expect(await a.tryLock("Other")).toBe(true);

    // The holder's connection dies: it is told, and a third backend takes over.
    const lost: string[][] = [];
    a.onLockLost((handlers) => lost.push([...handlers].sort()));
    // a's lock session, found by the key of one of its locks (this schema's), never another test file's session.
    const holder = await advisoryLockPids(advisoryKey("mneme:readmodel-lock", schema, "Projection"), true);
    expect(holder).toHaveLength(1);
    expect(await advisoryLockPids(advisoryKey("mneme:readmodel-lock", schema, "Other"), true)).toEqual(holder);
    await pool.query("SELECT pg_terminate_backend($1)", [holder[0]]);
    await until(() => lost.length === 1, "a is told its locks are lost");
    expect(lost).toEqual([["Other", "Projection"]]);
    const c = new PostgresReadmodelStoreBackend({ pool: newPool(), schema });
    expect(await c.tryLock("Projection")).toBe(true);
    expect(await a.tryLock("Projection")).toBe(false);
    await a.close();
    await c.close();
  });

  it("a transaction runs on one client: rolled back on throw, and a write from outside waits for it", async () => {
    const schema = newSchema();
    const backend = new PostgresReadmodelStoreBackend({ pool, schema });
    await backend.init();
    const docs = backend.collection<{ n: number }>("docs");
    const boom = new Error("boom");
    await expect(
      backend.transaction(async () => {
        await docs.put("a", { n: 1 });
        await backend.setCheckpoint("h", 5);
        expect(await docs.get("a")).toEqual({ n: 1 });
        throw boom;
      }),
    ).rejects.toBe(boom);
    expect(await docs.get("a")).toBeUndefined();
    expect(await backend.getCheckpoint("h")).toBe(0);

    const order: string[] = [];
    let release!: () => void;
    const gate = new Promise<void>((r) => {
      release = r;
    });
    const tx = backend.transaction(async () => {
      await docs.put("k", { n: 1 });
      order.push("tx-write");
      await gate;
      await docs.put("k", { n: 2 });
      order.push("tx-end");
    });
    await until(() => order.length === 1, "the transaction wrote");
    const outside = docs.put("k", { n: 3 }).then(() => order.push("outside"));
    // A read from outside does not wait and sees committed data only.
    expect(await docs.get("k")).toBeUndefined();
    release();
    await tx;
    await outside;
    expect(order).toEqual(["tx-write", "tx-end", "outside"]);
    expect(await docs.get("k")).toEqual({ n: 3 });
    await backend.close();
  });

  it("a statement failing inside a transaction that fn swallows still rolls it back", async () => {
    const schema = newSchema();
    const backend = new PostgresReadmodelStoreBackend({ pool, schema });
    await backend.init();
    const docs = backend.collection<unknown>("docs");
    await rejectsWith(
      backend.transaction(async () => {
        await docs.put("a", { n: 1 });
        await docs.put("b", { s: "\u0000" }).catch(() => undefined);
      }),
      "STORE_ERROR",
    );
    expect(await docs.get("a")).toBeUndefined();
    await backend.close();
  });
});

describe("createPostgresBackends", () => {
  it("makes all four stores in one schema, hides the password, and close() is idempotent and ends its own pool", async () => {
    const schema = newSchema();
    const url = new URL(DATABASE_URL);
    url.password = "not-a-real-secret";
    const b = createPostgresBackends({ connectionString: DATABASE_URL, schema });
    await Promise.all([b.eventRepository.init(), b.commandStore.init(), b.logStore.init(), b.readmodelStoreBackend.init()]);
    await b.eventRepository.append([ev("a")]);
    await b.logStore.append({ level: "info", message: "hi" });
    const tables = await pool.query<{ table_name: string }>(
      "SELECT table_name FROM information_schema.tables WHERE table_schema = $1 ORDER BY 1",
      [schema],
    );
    expect(tables.rows.map((r) => r.table_name)).toEqual([
      "command_claims",
      "commands",
      "event_archive_streams",
      "event_archives",
      "event_tags",
      "events",
      "logs",
      "mneme_rearm_old_start",
      "mneme_store_format",
      "mneme_store_format_record",
      "readmodel_checkpoints",
      "readmodel_collections",
      "readmodel_documents",
      "readmodel_locks",
    ]);
    const info = await b.eventRepository.info();
    expect(info).toMatchObject({ storeType: "postgres", numItems: 1 });
    expect(info.connectionInfo).toContain(`schema=${schema}`);
    const withSecret = createPostgresBackends({ connectionString: url.toString() }, { schema });
    expect((await withSecret.logStore.info().catch(() => undefined))?.connectionInfo ?? "").not.toContain("not-a-real-secret");
    await withSecret.close();
    await b.close();
    await b.close();
    await rejectsWith(b.eventRepository.headPosition(), "STORE_CLOSED");
  });

  it("takes a pool it does not end, and validates the schema", async () => {
    const own = newPool(3);
    const b = createPostgresBackends({ pool: own, schema: newSchema() });
    await b.commandStore.init();
    await b.close();
    expect((await own.query("SELECT 1 AS one")).rows[0]).toEqual({ one: 1 });
    expect(() => createPostgresBackends({ pool: own, schema: "no spaces" })).toThrow(/identifier/);
    expect(() => createPostgresBackends({ connectionString: "" })).toThrow(/connectionString/);
  });
});

describe("two facades (app instances) on one Postgres schema", () => {
  it("deliver each other's events live, and the readmodel passes to the other instance when its holder stops", async () => {
    const schema = newSchema();
    const start = async () => {
      const backends = createPostgresBackends({ connectionString: DATABASE_URL, schema, poolSize: 5, pollIntervalMs: 100 });
      const facade = createFacade({ appName: "pg-instances", version: "1.0.0", ...backends, delivery: { lockRetryMs: 20 } });
      facade.registerDomain(Counter);
      const totals = new CounterTotals(facade);
      facade.registerReadmodel(totals);
      await facade.start();
      return { facade, totals, state: () => facade.runtime.listEventHandlers().find((h) => h.eventHandlerName === "CounterTotals")?.state };
    };
    const a = await start();
    const b = await start();
    expect(a.state()).toBe("running");
    expect(b.state()).toBe("standby");
    const counter = newUuid();
    for (let i = 0; i < 5; i++) {
      await a.facade.dispatch(Increment, { counterUuid: counter, by: 1 });
      await b.facade.dispatch(Increment, { counterUuid: counter, by: 10 });
    }
    // b's events reach a's readmodel through NOTIFY (or the poll): a applies all ten, once each.
    await until(async () => (await a.totals.total(counter)) === 55, "a's readmodel has both instances' events");
    expect([...a.totals.applied].sort((x, y) => x - y)).toEqual(Array.from({ length: 10 }, (_, i) => i + 1));

    await a.facade.stop();
    await until(() => b.state() === "running", "b takes the readmodel over");
    await b.facade.dispatch(Increment, { counterUuid: counter, by: 100 });
    await until(async () => (await b.totals.total(counter)) === 155, "b continues from a's checkpoint");
    // b resumed from the shared checkpoint: it applied only the new event.
    expect(b.totals.applied).toEqual([11]);
    await b.facade.stop();
  });
});
