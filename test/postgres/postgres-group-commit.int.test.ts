/**
 * Postgres write path: round trips per dispatched command, group commit
 * (concurrent appends of one repository in one statement, each call with its
 * own outcome), two instances appending while a reader follows, a connection
 * lost in the middle of a coalesced flush, and a tenant-sharded deployment
 * (two facades on two schemas behind a tenant router).
 */
import fc from "fast-check";
import pg from "pg";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { createFacade, defineDomain, type Event, type Facade, isMnemeError, newUuid, type NewEvent } from "mneme";
import { createPostgresBackends, PostgresCommandStore, PostgresEventRepository, type PgStatement } from "mneme/postgres";
import { type CommandRecord, verifyEventChain } from "mneme/store";
import { outcomeCode } from "../support/rejections.js";
import { ev } from "../support/todo-events.js";
import { MemoryEventRepository } from "mneme/memory";

const DATABASE_URL = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test";
const pools: pg.Pool[] = [];
function newPool(max = 6): pg.Pool {
  const p = new pg.Pool({ connectionString: DATABASE_URL, max });
  p.on("error", () => {});
  pools.push(p);
  return p;
}
const admin = newPool(3);
const schemas: string[] = [];
function newSchema(): string {
  const s = `mneme_g_${newUuid().replace(/-/g, "").slice(-16)}`;
  schemas.push(s);
  return s;
}
const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
});
afterAll(async () => {
  for (const s of schemas) await admin.query(`DROP SCHEMA IF EXISTS "${s}" CASCADE`);
  await Promise.all(pools.map((p) => p.end()));
});

/** A gate the statement hook waits at: closed until opened. */
function gate(): { wait: Promise<void>; open: () => void } {
  let open!: () => void;
  const wait = new Promise<void>((r) => (open = r));
  return { wait, open };
}

/** Polls a database fact (not a duration) until true. */
async function until(cond: () => Promise<boolean> | boolean, what: string, tries = 500): Promise<void> {
  for (let i = 0; i < tries; i++) {
    if (await cond()) return;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error(`timed out waiting for: ${what}`);
}

async function storedEvents(schema: string): Promise<{ position: number; event_uuid: string; aggregate_uuid: string; version: number }[]> {
  const res = await admin.query<{ pos: string; event_uuid: string; aggregate_uuid: string; version: number }>(
    `SELECT position::text AS pos, event_uuid, aggregate_uuid, version FROM "${schema}".events ORDER BY position`,
  );
  return res.rows.map(({ pos, ...r }) => ({ ...r, position: Number(pos) }));
}

function record(commandUuid: string, tenantUuid = ""): CommandRecord {
  return {
    commandUuid,
    domain: "Todo",
    name: "CreateTodo",
    tenantUuid,
    status: "succeeded",
    reqCtx: {},
    payload: {},
    eventUuids: [],
    createdAt: Date.now() * 1e6,
    durationMicros: 1,
  };
}

/** A repository joined with its command store; every append statement passes `hook`. */
async function joinedRepo(
  schema: string,
  hook?: (s: PgStatement) => Promise<void> | void,
): Promise<{ repo: PostgresEventRepository; commands: PostgresCommandStore }> {
  const pool = newPool();
  const opts = { pool, schema, ...(hook === undefined ? {} : { onStatement: hook }) };
  const repo = new PostgresEventRepository({ ...opts, pollIntervalMs: 0 });
  const commands = new PostgresCommandStore(opts);
  await repo.init();
  await commands.init();
  expect(repo.joinCommandStore(commands)).toBe(true);
  cleanups.push(
    () => repo.close(),
    () => commands.close(),
  );
  return { repo, commands };
}

const Items = defineDomain("Items");
const ItemTouched = Items.event<{ title: string }>("ItemTouched");
const Item = Items.aggregate<{ n: number }>("Item", {
  initialState: () => ({ n: 0 }),
  evolve: { ItemTouched: (s) => ({ n: s.n + 1 }) },
});
const TouchItem = Items.command<{ itemUuid: string }>("TouchItem");
Items.handleCommand(TouchItem, async (ctx, _cmd, p) => {
  const item = await ctx.aggregates.load(Item, p.itemUuid);
  return [ItemTouched.create(p.itemUuid, { title: `touch ${item.state.n + 1}` })];
});
const NoteItem = Items.command<{ itemUuid: string }>("NoteItem");
Items.handleCommand(NoteItem, (_ctx, _cmd, p) => [ItemTouched.create(p.itemUuid, { title: "note" })]);
const GetItem = Items.query<{ itemUuid: string }, { n: number; version: number }>("GetItem");
Items.handleQuery(GetItem, async (ctx, _q, p) => {
  const item = await ctx.aggregates.load(Item, p.itemUuid);
  return { n: item.state.n, version: item.version };
});

const reqCtxOf = (tenant: string) => ({
  senderAccountUuid: "a",
  senderSessionUuid: "s",
  senderIdentityUuid: "i",
  senderTenantUuid: tenant,
});

describe("round trips per dispatched command", () => {
  it("a command that loads its aggregate: one read statement and one append statement (events and record), no BEGIN/COMMIT", async () => {
    const schema = newSchema();
    const statements: PgStatement[] = [];
    let recording = false;
    const backends = createPostgresBackends({
      pool: newPool(),
      schema,
      pollIntervalMs: 0,
      onStatement: (s) => {
        if (recording) statements.push(s);
      },
    });
    const f = createFacade({ appName: "pg-round-trips", ...backends });
    f.registerDomain(Items);
    await f.start();
    cleanups.push(() => f.stop());
    // The LISTEN client's statements (LISTEN, the head position) run once, in the background, after start.
    await until(() => backends.eventRepository.externalAppendListening, "the LISTEN client is up");
    const reqCtx = reqCtxOf("t");
    const itemUuid = newUuid();
    const dispatch = async (type: typeof TouchItem | typeof NoteItem, commandUuid?: string): Promise<PgStatement[]> => {
      statements.length = 0;
      recording = true;
      const res = await f.dispatch(type, { itemUuid }, commandUuid === undefined ? { reqCtx } : { reqCtx, commandUuid });
      recording = false;
      expect(res.events).toHaveLength(1);
      expect(await backends.commandStore.get(res.commandUuid)).toMatchObject({
        status: "succeeded",
        eventUuids: [res.events[0]!.eventUuid],
      });
      return statements.slice();
    };
    const kinds = (ss: PgStatement[]) => ss.map((s) => s.kind);
    // A new aggregate, the same one again (loaded in full, or from a cached version on), and a command without load.
    for (const ss of [await dispatch(TouchItem), await dispatch(TouchItem)]) {
      expect(kinds(ss)).toEqual(["read", "append"]);
      expect(ss[0]!.text).toMatch(/^SELECT .* FROM "[^"]+"\.events WHERE aggregate_uuid = \$1/);
      expect(ss[1]!.text).toMatch(/mneme_append_aggregate\(/);
      for (const s of ss) expect(s.text).not.toMatch(/^\s*(BEGIN|COMMIT|ROLLBACK)/i);
    }
    // The caller's own commandUuid: one claim of it first (a command recorded already, or in progress elsewhere,
    // does not run again); the append's record replaces the claim.
    // The store's first claim opens its claim session once (the advisory lock that tells other instances it lives).
    const first = await dispatch(TouchItem, newUuid());
    expect(kinds(first)).toEqual(["lock", "command", "read", "append"]);
    expect(first[0]!.text).toMatch(/pg_try_advisory_lock/);
    const withUuid = await dispatch(TouchItem, newUuid());
    expect(kinds(withUuid)).toEqual(["command", "read", "append"]);
    expect(withUuid[0]!.text).toMatch(/FROM "[^"]+"\.mneme_claim_command\(\$1/);
    expect(kinds(await dispatch(NoteItem))).toEqual(["append"]);
    expect((await f.eventRepository.loadAggregate(itemUuid)).map((e) => e.version)).toEqual([1, 2, 3, 4, 5]);
  });
});

describe("group commit", () => {
  it("the calls of one coalesced flush each get their own outcome; refused calls write nothing, the others are written without holes", async () => {
    const schema = newSchema();
    let appendStatements = 0;
    let hold: { wait: Promise<void>; open: () => void } | undefined;
    const { repo, commands } = await joinedRepo(schema, async (s) => {
      if (s.kind !== "append") return;
      appendStatements++;
      if (hold !== undefined) await hold.wait;
    });
    const [x] = await repo.append([ev("x", {}, { tenantUuid: "A" })]);
    await repo.append([ev("y", {}, { tenantUuid: "A" }), ev("y", {}, { tenantUuid: "A" })]);
    const seen: Event[][] = [];
    repo.onAppend((events) => seen.push([...events]));

    // The first flush waits at the statement hook; every call made meanwhile goes into the next flush together.
    hold = gate();
    const before = appendStatements;
    const blocker = repo.append([ev("blocker", {}, { tenantUuid: "A" })]);
    await until(() => appendStatements === before + 1, "the first flush is at its statement");
    const rec1 = newUuid();
    const calls: [string, Promise<Event[]>][] = [
      ["new aggregate with a record", repo.append([ev("n1", {}, { tenantUuid: "A" })], { commandRecord: record(rec1, "A") })],
      ["stale expected version", repo.append([ev("y", {}, { tenantUuid: "A" })], { expectedVersions: { y: 1 } })],
      ["another tenant's aggregate", repo.append([ev("z1", {}, { tenantUuid: "B" }), ev("x", {}, { tenantUuid: "B" })])],
      ["expected version met", repo.append([ev("y", {}, { tenantUuid: "A" })], { expectedVersions: { y: 2 } })],
      ["the same expected version again", repo.append([ev("y", {}, { tenantUuid: "A" })], { expectedVersions: { y: 2 } })],
      ["a command recorded already", repo.append([ev("n2", {}, { tenantUuid: "A" })], { commandRecord: record(rec1, "A") })],
      ["a version gap", repo.append([ev("n3", {}, { tenantUuid: "A", version: 2 })])],
      ["first event of w from tenant B", repo.append([ev("w", {}, { tenantUuid: "B" })])],
      ["w from tenant A after it", repo.append([ev("w", {}, { tenantUuid: "A" })])],
      [
        "several aggregates",
        repo.append([ev("m1", {}, { tenantUuid: "A" }), ev("m2", {}, { tenantUuid: "A" }), ev("m1", {}, { tenantUuid: "A" })]),
      ],
      ["a duplicate event uuid", repo.append([ev("n4", {}, { tenantUuid: "A", eventUuid: x!.eventUuid })])],
    ];
    // Outcomes are taken at once (a rejection nobody listens to yet would be reported as unhandled).
    const settled = calls.map(([name, p]) => outcomeCode(p).then((code) => [name, code] as const));
    const dup = calls[5]![1].catch((e: unknown) => e);
    hold.open();
    hold = undefined;
    await blocker;
    const outcomes = Object.fromEntries(await Promise.all(settled));
    expect(outcomes).toEqual({
      "new aggregate with a record": "ok",
      "stale expected version": "CONFLICT",
      "another tenant's aggregate": "NOT_FOUND",
      "expected version met": "ok",
      "the same expected version again": "CONFLICT",
      "a command recorded already": "CONFLICT",
      "a version gap": "INVALID_EVENTS",
      "first event of w from tenant B": "ok",
      "w from tenant A after it": "NOT_FOUND",
      "several aggregates": "ok",
      "a duplicate event uuid": "CONFLICT",
    });
    // One statement for the blocker, one for the eleven calls.
    expect(appendStatements).toBe(before + 2);
    const dupError = await dup;
    expect(isMnemeError(dupError, "CONFLICT") && dupError.message).toContain(`command ${rec1} is already recorded`);

    const rows = await storedEvents(schema);
    // Positions without holes: the refused calls took none.
    expect(rows.map((r) => r.position)).toEqual(rows.map((_, i) => i + 1));
    expect(rows.map((r) => `${r.aggregate_uuid}@${r.version}`)).toEqual([
      "x@1",
      "y@1",
      "y@2",
      "blocker@1",
      "n1@1",
      "y@3",
      "w@1",
      "m1@1",
      "m2@1",
      "m1@2",
    ]);
    expect(await commands.get(rec1)).toMatchObject({ commandUuid: rec1 });
    expect((await commands.list()).items).toHaveLength(1);
    // onAppend: each call that succeeded, once, in position order.
    expect(seen.map((evs) => evs.map((e) => e.position))).toEqual([[4], [5], [6], [7], [8, 9, 10]]);
  });

  it("property: the appends of one flush have the outcomes and results of the same appends made one after another", async () => {
    const schema = newSchema();
    let appendStatements = 0;
    let hold: { wait: Promise<void>; open: () => void } | undefined;
    const { repo } = await joinedRepo(schema, async (s) => {
      if (s.kind !== "append") return;
      appendStatements++;
      if (hold !== undefined) await hold.wait;
    });
    const call = fc.record({
      events: fc.array(fc.record({ agg: fc.integer({ min: 0, max: 3 }), tenant: fc.constantFrom("A", "B") }), {
        minLength: 1,
        maxLength: 3,
      }),
      expected: fc.option(fc.record({ agg: fc.integer({ min: 0, max: 3 }), version: fc.integer({ min: 0, max: 3 }) }), { nil: undefined }),
      global: fc.boolean(),
    });
    let run = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(call, { minLength: 1, maxLength: 30 }), async (calls) => {
        const prefix = `r${run++}-`;
        const args = calls.map((c): [NewEvent[], { expectedVersions?: Record<string, number>; globalAggregates?: string[] }] => {
          const events = c.events.map((e) => ev(`${prefix}${e.agg}`, {}, { tenantUuid: e.tenant }));
          const opts: { expectedVersions?: Record<string, number>; globalAggregates?: string[] } = {};
          if (c.expected !== undefined) opts.expectedVersions = { [`${prefix}${c.expected.agg}`]: c.expected.version };
          if (c.global) opts.globalAggregates = [`${prefix}0`];
          return [events, opts];
        });
        // The reference: the same appends one after another on the in-memory repository.
        const memory = new MemoryEventRepository();
        const expected: string[] = [];
        for (const [events, opts] of args) {
          expected.push(await outcomeCode(memory.append(events, opts)));
        }
        hold = gate();
        const before = appendStatements;
        const blocker = repo.append([ev(`${prefix}blocker`)]);
        await until(() => appendStatements === before + 1, "the first flush is at its statement");
        const results = args.map(([events, opts]) => repo.append(events, opts));
        const codes = Promise.all(results.map(outcomeCode));
        hold.open();
        hold = undefined;
        await blocker;
        expect(await codes).toEqual(expected);
        expect(appendStatements).toBe(before + 2);
        for (let a = 0; a < 4; a++) {
          const strip = (es: readonly Event[]) => es.map((e) => [e.version, e.tenantUuid]);
          expect(strip(await repo.loadAggregate(`${prefix}${a}`))).toEqual(strip(await memory.loadAggregate(`${prefix}${a}`)));
        }
        await memory.close();
      }),
      { numRuns: 25 },
    );
    const rows = await storedEvents(schema);
    expect(rows.map((r) => r.position)).toEqual(rows.map((_, i) => i + 1));
  });

  it("hundreds of concurrent appends are coalesced (at most maxAppendsPerCommit per statement) with exact optimistic concurrency", async () => {
    const schema = newSchema();
    const batches: number[] = [];
    const { repo } = await joinedRepo(schema, (s) => {
      if (s.kind === "append") batches.push(1);
    });
    const contested = Array.from({ length: 10 }, () => newUuid());
    const calls: Promise<string>[] = [];
    // Made in one synchronous loop: the first flush takes the first call's turn, the rest queue behind it.
    for (let i = 0; i < 300; i++)
      calls.push(outcomeCode(repo.append([ev(contested[i % 10]!, { i })], { expectedVersions: { [contested[i % 10]!]: 0 } })));
    for (let i = 0; i < 100; i++) calls.push(outcomeCode(repo.append([ev("free", { i })])));
    const codes = await Promise.all(calls);
    expect(codes.slice(0, 300).filter((c) => c === "ok")).toHaveLength(10);
    expect(
      codes
        .slice(0, 300)
        .filter((c) => c !== "ok")
        .every((c) => c === "CONFLICT"),
    ).toBe(true);
    expect(codes.slice(300).every((c) => c === "ok")).toBe(true);
    for (const agg of contested) expect((await repo.loadAggregate(agg)).map((e) => e.version)).toEqual([1]);
    expect((await repo.loadAggregate("free")).map((e) => e.version)).toEqual(Array.from({ length: 100 }, (_, i) => i + 1));
    // 400 calls in statements of at most 50 (the default): a flush takes its calls once its connection is at hand,
    // and all 400 were queued before the first connection was (a checkout always yields).
    expect(batches.length).toBe(400 / 50);
    const rows = await storedEvents(schema);
    expect(rows.map((r) => r.position)).toEqual(Array.from({ length: 110 }, (_, i) => i + 1));
  });

  it("two instances (two pools) append concurrently: positions 1..n without holes, and a reader following them never skips one", async () => {
    const schema = newSchema();
    const a = new PostgresEventRepository({ pool: newPool(), schema, pollIntervalMs: 0 });
    const b = new PostgresEventRepository({ pool: newPool(), schema, pollIntervalMs: 0, maxAppendsPerCommit: 7 });
    const reader = new PostgresEventRepository({ pool: newPool(), schema, pollIntervalMs: 0 });
    cleanups.push(
      () => a.close(),
      () => b.close(),
      () => reader.close(),
    );
    await a.init();
    await b.init();
    let done = false;
    const read: number[] = [];
    const follow = (async () => {
      let after = 0;
      for (;;) {
        // A pass that starts after the writers finished sees everything.
        const last = done;
        for await (const page of reader.readAll({ afterPosition: after, batchSize: 37 })) {
          for (const e of page) {
            // Never skip: each position read is the next one; a later commit with a lower position would break this.
            expect(e.position).toBe(after + 1);
            read.push(e.position);
            after = e.position;
          }
        }
        if (last) return;
        await new Promise((r) => setImmediate(r));
      }
    })();
    const total = 600;
    const writers = Array.from({ length: 12 }, async (_, w) => {
      const repo = w % 2 === 0 ? a : b;
      for (let i = 0; i < total / 12; i++) {
        const events: NewEvent[] = [ev(`agg-${w}`, { i })];
        if (i % 5 === 0) events.push(ev(`shared`, { w, i }));
        await repo.append(i % 5 === 0 ? events : events.slice(0, 1));
      }
    });
    await Promise.all(writers);
    done = true;
    await follow;
    const rows = await storedEvents(schema);
    expect(rows).toHaveLength(total + 120);
    expect(rows.map((r) => r.position)).toEqual(rows.map((_, i) => i + 1));
    expect(read).toEqual(rows.map((r) => r.position));
    expect((await a.loadAggregate("shared")).map((e) => e.version)).toEqual(Array.from({ length: 120 }, (_, i) => i + 1));
    // The hash chain follows commit order across both instances' flushes.
    expect(await verifyEventChain(reader)).toMatchObject({ ok: true, checked: total + 120 });
  });

  it("a connection lost while a coalesced flush is under way: every waiting call rejects with UNAVAILABLE and nothing of the flush is written", async () => {
    const schema = newSchema();
    let hold: { wait: Promise<void>; open: () => void } | undefined;
    let flushPid: number | undefined;
    let appendStatements = 0;
    const { repo, commands } = await joinedRepo(schema, async (s) => {
      if (s.kind !== "append") return;
      appendStatements++;
      flushPid = s.processId;
      if (hold !== undefined) await hold.wait;
    });
    await repo.append([ev("before")]);
    // Another session holds an uncommitted record of command "held": a call with that record waits on it inside the flush,
    // after the calls before it in the flush have inserted their events (in the flush's transaction).
    const other = await admin.connect();
    let blocking = true;
    try {
      await other.query("BEGIN");
      await other.query(
        `INSERT INTO "${schema}".commands (command_uuid, domain, name, tenant_uuid, status, created_at, record) VALUES ('held', 'D', 'N', '', 'succeeded', 0, '{}')`,
      );
      hold = gate();
      const blocker = repo.append([ev("blocker")]);
      await until(() => appendStatements === 2, "the first flush is at its statement");
      const calls = [
        ...Array.from({ length: 5 }, (_, i) => repo.append([ev(`lost-${i}`), ev(`lost-${i}`)])),
        repo.append([ev("lost-held")], { commandRecord: record("held") }),
        ...Array.from({ length: 4 }, (_, i) => repo.append([ev(`lost-after-${i}`)], { commandRecord: record(newUuid()) })),
      ].map(outcomeCode);
      hold.open();
      hold = undefined;
      await blocker;
      await until(() => appendStatements === 3, "the coalesced flush is sent");
      const pid = flushPid!;
      await until(async () => {
        const r = await admin.query<{ w: string | null }>("SELECT wait_event_type AS w FROM pg_stat_activity WHERE pid = $1", [pid]);
        return r.rows[0]?.w === "Lock";
      }, "the flush waits on the held record");
      await admin.query("SELECT pg_terminate_backend($1, 5000)", [pid]);
      const codes = await Promise.all(calls);
      expect(codes).toEqual(calls.map(() => "UNAVAILABLE"));
      await other.query("ROLLBACK");
      blocking = false;
    } finally {
      if (blocking) await other.query("ROLLBACK").catch(() => undefined);
      other.release();
    }
    const rows = await storedEvents(schema);
    expect(rows.map((r) => r.aggregate_uuid)).toEqual(["before", "blocker"]);
    expect((await commands.list()).items).toEqual([]);
    // The repository goes on, on a fresh connection, with the next position.
    const [next] = await repo.append([ev("after")]);
    expect(next!.position).toBe(3);
    expect(appendStatements).toBe(4);
  });

  it("a statement refused as a whole (not a lost connection) is sent again append by append, so each gets its own outcome", async () => {
    const schema = newSchema();
    let appendStatements = 0;
    let hold: { wait: Promise<void>; open: () => void } | undefined;
    /** Statement numbers the hook refuses as Postgres refuses a value it cannot read (SQLSTATE 22P02). */
    const refuse = new Set<number>();
    const { repo } = await joinedRepo(schema, async (s) => {
      if (s.kind !== "append") return;
      const n = ++appendStatements;
      if (hold !== undefined) await hold.wait;
      if (refuse.has(n)) throw Object.assign(new Error("invalid input syntax"), { code: "22P02" });
    });
    hold = gate();
    const blocker = repo.append([ev("blocker")]);
    await until(() => appendStatements === 1, "the first flush is at its statement");
    const calls = Array.from({ length: 5 }, (_, i) => outcomeCode(repo.append([ev(`call-${i}`)])));
    // Statement 2 is the flush of the five; 3..7 are the five sent alone, of which the second (4) is refused too.
    refuse.add(2).add(4);
    hold.open();
    hold = undefined;
    await blocker;
    expect(await Promise.all(calls)).toEqual(["ok", "INVALID_EVENTS", "ok", "ok", "ok"]);
    expect(appendStatements).toBe(7);
    const rows = await storedEvents(schema);
    expect(rows.map((r) => r.aggregate_uuid)).toEqual(["blocker", "call-0", "call-2", "call-3", "call-4"]);
    expect(rows.map((r) => r.position)).toEqual([1, 2, 3, 4, 5]);
  });

  it("maxAppendsPerCommit is validated", () => {
    for (const bad of [0, 61, 1.5, Number.NaN]) {
      expect(() => new PostgresEventRepository({ pool: admin, schema: "x", maxAppendsPerCommit: bad })).toThrow(/maxAppendsPerCommit/);
    }
  });
});

describe("beyond one database: tenants sharded over schemas", () => {
  it("a tenant router sends each tenant's commands and queries to its facade; each tenant's events land only in its schema", async () => {
    const shardSchemas = [newSchema(), newSchema()];
    const shards: Facade[] = [];
    for (const schema of shardSchemas) {
      const f = createFacade({ appName: "pg-sharded", ...createPostgresBackends({ pool: newPool(), schema, pollIntervalMs: 0 }) });
      f.registerDomain(Items);
      await f.start();
      cleanups.push(() => f.stop());
      shards.push(f);
    }
    // The placement: a table of tenants (here: fixed), looked up per request.
    const placement = new Map([
      ["tenant-1", 0],
      ["tenant-2", 1],
      ["tenant-3", 0],
    ]);
    const facadeFor = (tenant: string): Facade => {
      const shard = placement.get(tenant);
      if (shard === undefined) throw new Error(`no shard for ${tenant}`);
      return shards[shard]!;
    };
    const items = new Map<string, string>();
    for (const tenant of placement.keys()) {
      const itemUuid = newUuid();
      items.set(tenant, itemUuid);
      for (let k = 0; k < 3; k++) await facadeFor(tenant).dispatch(TouchItem, { itemUuid }, { reqCtx: reqCtxOf(tenant) });
    }
    for (const [tenant, itemUuid] of items) {
      const reqCtx = reqCtxOf(tenant);
      expect(await facadeFor(tenant).query(GetItem, { itemUuid }, { reqCtx })).toEqual({ n: 3, version: 3 });
      // The other shard has never heard of it.
      const elsewhere = shards.find((f) => f !== facadeFor(tenant))!;
      expect(await elsewhere.eventRepository.loadAggregate(itemUuid)).toEqual([]);
    }
    for (const [i, schema] of shardSchemas.entries()) {
      const res = await admin.query<{ tenant_uuid: string; n: string }>(
        `SELECT tenant_uuid, count(*)::text AS n FROM "${schema}".events GROUP BY tenant_uuid ORDER BY tenant_uuid`,
      );
      const expected = [...placement].filter(([, s]) => s === i).map(([t]) => ({ tenant_uuid: t, n: "3" }));
      expect(res.rows).toEqual(expected);
      const records = await admin.query<{ n: string }>(`SELECT count(*)::text AS n FROM "${schema}".commands`);
      expect(Number(records.rows[0]!.n)).toBe(expected.length * 3);
    }
  });
});
