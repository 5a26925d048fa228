/**
 * The two append functions of this release (docs/scaling.md, "The append
 * statement"): a lone call on one aggregate goes through
 * `mneme_append_aggregate`, which refuses by raising; every other flush
 * through `mneme_append_flush`, one outcome row per call, with the calls
 * written by one statement when they share no aggregate. Both must give the
 * outcomes and versions of the in-memory repository, leave no hole in the
 * positions, and write nothing of a refused call.
 */
import fc from "fast-check";
import pg from "pg";
import { afterEach, describe, expect, it } from "vitest";
import { type Event, isMnemeError, newUuid, type NewEvent } from "mneme";
import { MemoryEventRepository } from "mneme/memory";
import { PostgresCommandStore, PostgresEventRepository, type PgStatement } from "mneme/postgres";
import { advisoryKey } from "../../src/postgres/postgres-schema.js";
import type { CommandRecord } from "mneme/store";
import { outcomeCode } from "../support/rejections.js";
import { ev } from "../support/todo-events.js";
import { postgresScratch } from "../support/postgres-scratch.js";

const scratch = postgresScratch("mneme_ap");
const admin = scratch.pool;
const newPool = (max = 6): pg.Pool => scratch.newPool(max);
const newSchema = (): string => scratch.newSchema();
const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
});

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

/** A repository joined with its command store; the append statements' texts are collected in `statements`. */
async function joinedRepo(
  schema: string,
  hook?: (s: PgStatement) => Promise<void> | void,
): Promise<{ repo: PostgresEventRepository; commands: PostgresCommandStore; statements: string[] }> {
  const statements: string[] = [];
  const pool = newPool();
  const onStatement = async (s: PgStatement): Promise<void> => {
    if (s.kind === "append") statements.push(s.text);
    await hook?.(s);
  };
  const repo = new PostgresEventRepository({ pool, schema, pollIntervalMs: 0, onStatement });
  const commands = new PostgresCommandStore({ pool, schema });
  await repo.init();
  await commands.init();
  expect(repo.joinCommandStore(commands)).toBe(true);
  cleanups.push(
    () => repo.close(),
    () => commands.close(),
  );
  return { repo, commands, statements };
}

async function positions(schema: string): Promise<number[]> {
  const res = await admin.query<{ p: string }>(`SELECT position::text AS p FROM "${schema}".events ORDER BY position`);
  return res.rows.map((r) => Number(r.p));
}

const oneTo = (n: number): number[] => Array.from({ length: n }, (_, i) => i + 1);

describe("a lone call on one aggregate (mneme_append_aggregate)", () => {
  it("property: appends one after another have the outcomes and versions of the in-memory repository, positions without holes", async () => {
    const schema = newSchema();
    const { repo, statements } = await joinedRepo(schema);
    const call = fc.record({
      events: fc.array(
        fc.record({
          agg: fc.integer({ min: 0, max: 2 }),
          tenant: fc.constantFrom("A", "B"),
          version: fc.option(fc.integer({ min: 1, max: 5 }), { nil: undefined }),
        }),
        { minLength: 1, maxLength: 3 },
      ),
      oneAggregate: fc.boolean(),
      expected: fc.option(fc.record({ agg: fc.integer({ min: 0, max: 2 }), version: fc.integer({ min: 0, max: 4 }) }), { nil: undefined }),
      global: fc.boolean(),
    });
    let run = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(call, { minLength: 1, maxLength: 12 }), async (calls) => {
        const prefix = `r${run++}-`;
        const memory = new MemoryEventRepository();
        for (const c of calls) {
          const events: NewEvent[] = c.events.map((e) =>
            ev(
              `${prefix}${c.oneAggregate ? c.events[0]!.agg : e.agg}`,
              {},
              { tenantUuid: e.tenant, ...(e.version === undefined ? {} : { version: e.version }) },
            ),
          );
          const opts: { expectedVersions?: Record<string, number>; globalAggregates?: string[] } = {};
          if (c.expected !== undefined) opts.expectedVersions = { [`${prefix}${c.expected.agg}`]: c.expected.version };
          if (c.global) opts.globalAggregates = [`${prefix}0`];
          const want = await outcomeCode(memory.append(events, opts));
          const got = await outcomeCode(repo.append(events, opts));
          expect(got).toBe(want);
        }
        for (let a = 0; a < 3; a++) {
          const strip = (es: readonly Event[]) => es.map((e) => [e.version, e.tenantUuid]);
          expect(strip(await repo.loadAggregate(`${prefix}${a}`))).toEqual(strip(await memory.loadAggregate(`${prefix}${a}`)));
        }
        await memory.close();
      }),
      { numRuns: 30 },
    );
    expect(statements.some((t) => t.includes("mneme_append_aggregate("))).toBe(true);
    expect(statements.some((t) => t.includes("mneme_append_flush("))).toBe(true);
    const stored = await positions(schema);
    expect(stored).toEqual(oneTo(stored.length));
  });

  it("a command recorded already and a duplicate event uuid are CONFLICT, write nothing, and take no position", async () => {
    const schema = newSchema();
    const { repo, commands, statements } = await joinedRepo(schema);
    const rec = newUuid();
    const [first] = await repo.append([ev("a")], { commandRecord: record(rec) });
    const again = await repo.append([ev("b")], { commandRecord: record(rec) }).catch((e: unknown) => e);
    expect(isMnemeError(again, "CONFLICT") && again.message).toBe(`command ${rec} is already recorded`);
    const dup = await repo.append([ev("c", {}, { eventUuid: first!.eventUuid })]).catch((e: unknown) => e);
    expect(isMnemeError(dup, "CONFLICT")).toBe(true);
    const [next] = await repo.append([ev("a"), ev("a")], { expectedVersions: { a: 1 }, commandRecord: record(newUuid()) });
    expect([next!.position, next!.version]).toEqual([2, 2]);
    expect(await positions(schema)).toEqual([1, 2, 3]);
    expect(await repo.loadAggregate("b")).toEqual([]);
    expect((await commands.list()).items).toHaveLength(2);
    expect(statements.every((t) => t.includes("mneme_append_aggregate("))).toBe(true);
  });

  it("refusals keep their codes and words: another tenant's aggregate, a stale expected version, a taken or gapped given version", async () => {
    const schema = newSchema();
    const { repo } = await joinedRepo(schema);
    await repo.append([ev("t", {}, { tenantUuid: "A" })]);
    const refusal = (p: Promise<unknown>) =>
      p.then(
        () => "written",
        (e: unknown) => (isMnemeError(e) ? `${e.code}: ${e.message}` : String(e)),
      );
    expect(await refusal(repo.append([ev("t", {}, { tenantUuid: "B" })]))).toBe("NOT_FOUND: aggregate t was not found");
    // The tenant rule comes first: a stale expected version of another tenant's aggregate does not tell that it exists.
    expect(await refusal(repo.append([ev("t", {}, { tenantUuid: "B" })], { expectedVersions: { t: 5 } }))).toBe(
      "NOT_FOUND: aggregate t was not found",
    );
    expect(await refusal(repo.append([ev("t", {}, { tenantUuid: "A" })], { expectedVersions: { t: 0 } }))).toBe(
      "CONFLICT: postgres: append: aggregate t is at version 1, expected 0",
    );
    expect(await refusal(repo.append([ev("t", {}, { tenantUuid: "A" })], { expectedVersions: { other: 1 } }))).toBe(
      "CONFLICT: postgres: append: aggregate other is at version 0, expected 1",
    );
    expect(await refusal(repo.append([ev("t", {}, { tenantUuid: "A", version: 1 })]))).toBe(
      "CONFLICT: postgres: append: events[0]: version 1 of aggregate t is already taken (next is 2)",
    );
    expect(await refusal(repo.append([ev("t", {}, { tenantUuid: "A" }), ev("t", {}, { tenantUuid: "A", version: 4 })]))).toBe(
      "INVALID_EVENTS: postgres: append: events[1]: version 4 of aggregate t leaves a gap (next is 3)",
    );
    // A global aggregate takes events of any tenant.
    expect(await refusal(repo.append([ev("t", {}, { tenantUuid: "B", version: 2 })], { globalAggregates: ["t"] }))).toBe("written");
    expect(await positions(schema)).toEqual([1, 2]);
  });

  it("called by hand, the functions refuse arguments that do not fit together, and a NULL p_global does not skip the tenant rule", async () => {
    const schema = newSchema();
    const { repo } = await joinedRepo(schema);
    await repo.append([ev("h", {}, { tenantUuid: "A" })]);
    const agg = (events: number, global: boolean | null) =>
      admin
        .query(
          `SELECT "${schema}".mneme_append_aggregate(1, 'c', 'n', 'h', $1::text[], $2::text[], $3::text[], $3::text[], NULL, $4::text[],
             $5::bigint[], $6::jsonb[], $6::jsonb[], NULL, NULL, NULL, $7, NULL, NULL, NULL, NULL, NULL, NULL, NULL)`,
          [
            Array.from({ length: events }, () => newUuid()),
            Array.from({ length: events }, () => "B"),
            Array.from({ length: events }, () => "Todo"),
            Array.from({ length: events }, () => null),
            Array.from({ length: events }, () => 1),
            Array.from({ length: events }, () => "{}"),
            global,
          ],
        )
        .then(
          () => "written",
          (e: { code?: string }) => e.code,
        );
    expect(await agg(1, null)).toBe("MN404");
    expect(await agg(0, true)).toBe("22023");
    const flush = await admin
      .query(
        `SELECT * FROM "${schema}".mneme_append_flush(1, 'c', 'n', '{1}', '{1,1}', '{x}', '{A}', '{Todo}', '{T}', '{h}', '{NULL}', '{NULL}',
           '{1}', '{"{}"}', '{"{}"}', NULL, '{0}', NULL, NULL, NULL, '{0}', NULL, '{NULL}', '{NULL}', '{NULL}', '{NULL}', '{NULL}', '{NULL}', '{NULL}')`,
      )
      .then(
        () => "written",
        (e: { code?: string }) => e.code,
      );
    expect(flush).toBe("22023");
    expect(await positions(schema)).toEqual([1]);
  });
});

describe("a flush of calls that share no aggregate (mneme_append_flush, one write for all)", () => {
  it("property: such a flush has the outcomes and versions of the same appends made one after another in memory", async () => {
    const schema = newSchema();
    let hold: { wait: Promise<void>; open: () => void } | undefined;
    let appends = 0;
    const { repo, statements } = await joinedRepo(schema, async (s) => {
      if (s.kind !== "append") return;
      appends++;
      if (hold !== undefined) await hold.wait;
    });
    const call = fc.record({
      tenant: fc.constantFrom("A", "B"),
      events: fc.integer({ min: 1, max: 3 }),
      expected: fc.option(fc.integer({ min: 0, max: 3 }), { nil: undefined }),
      version: fc.option(fc.integer({ min: 1, max: 4 }), { nil: undefined }),
      global: fc.boolean(),
    });
    let run = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.array(call, { minLength: 2, maxLength: 8 }),
        fc.array(fc.constantFrom("A", "B"), { maxLength: 8 }),
        async (calls, stored) => {
          const prefix = `f${run++}-`;
          const memory = new MemoryEventRepository();
          // Some aggregates exist already (two events in a tenant), the others are new; each call has one of its own.
          for (const [i, tenantUuid] of stored.entries()) {
            const two = [ev(`${prefix}${i}`, {}, { tenantUuid }), ev(`${prefix}${i}`, {}, { tenantUuid })];
            await memory.append(two);
            await repo.append(two);
          }
          const args = calls.map((c, i): [NewEvent[], { expectedVersions?: Record<string, number>; globalAggregates?: string[] }] => {
            const agg = `${prefix}${i}`;
            const events = Array.from({ length: c.events }, (_, k) =>
              ev(agg, {}, { tenantUuid: c.tenant, ...(k === 0 && c.version !== undefined ? { version: c.version } : {}) }),
            );
            return [
              events,
              {
                ...(c.expected === undefined ? {} : { expectedVersions: { [agg]: c.expected } }),
                ...(c.global ? { globalAggregates: [agg] } : {}),
              },
            ];
          });
          const want: string[] = [];
          for (const [events, opts] of args) want.push(await outcomeCode(memory.append(events, opts)));
          let open!: () => void;
          hold = { wait: new Promise<void>((r) => (open = r)), open: () => open() };
          const before = appends;
          const blocker = repo.append([ev(`${prefix}blocker`)]);
          for (let i = 0; i < 500 && appends === before; i++) await new Promise((r) => setTimeout(r, 10));
          const codes = Promise.all(args.map(([events, opts]) => outcomeCode(repo.append(events, opts))));
          hold.open();
          hold = undefined;
          await blocker;
          expect(await codes).toEqual(want);
          expect(appends).toBe(before + 2);
          for (let i = 0; i < calls.length; i++) {
            const strip = (es: readonly Event[]) => es.map((e) => [e.version, e.tenantUuid]);
            expect(strip(await repo.loadAggregate(`${prefix}${i}`))).toEqual(strip(await memory.loadAggregate(`${prefix}${i}`)));
          }
          await memory.close();
        },
      ),
      { numRuns: 25 },
    );
    expect(statements.some((t) => t.includes("mneme_append_flush("))).toBe(true);
    const all = await positions(schema);
    expect(all).toEqual(oneTo(all.length));
  });

  it("a call whose write fails (a command recorded already) is refused alone; the others are written at consecutive positions, in one statement", async () => {
    const schema = newSchema();
    let hold: { wait: Promise<void>; open: () => void } | undefined;
    let appends = 0;
    const { repo } = await joinedRepo(schema, async (s) => {
      if (s.kind !== "append") return;
      appends++;
      if (hold !== undefined) await hold.wait;
    });
    const rec = newUuid();
    await repo.append([ev("x")], { commandRecord: record(rec) });
    let open!: () => void;
    hold = { wait: new Promise<void>((r) => (open = r)), open: () => open() };
    const before = appends;
    const blocker = repo.append([ev("blocker")]);
    for (let i = 0; i < 500 && appends === before; i++) await new Promise((r) => setTimeout(r, 10));
    expect(appends).toBe(before + 1);
    const calls = [
      repo.append([ev("p"), ev("q")], { commandRecord: record(newUuid()) }),
      repo.append([ev("r")], { commandRecord: record(rec) }),
      repo.append([ev("s"), ev("s")], { commandRecord: record(newUuid()) }),
    ];
    const codes = Promise.all(calls.map(outcomeCode));
    hold.open();
    hold = undefined;
    await blocker;
    expect(await codes).toEqual(["ok", "CONFLICT", "ok"]);
    expect(appends).toBe(before + 2);
    const written = (await Promise.all([calls[0]!, calls[2]!])).flat();
    expect(written.map((e) => [e.aggregateUuid, e.position, e.version])).toEqual([
      ["p", 3, 1],
      ["q", 4, 1],
      ["s", 5, 1],
      ["s", 6, 2],
    ]);
    expect(await positions(schema)).toEqual(oneTo(6));
    expect(await repo.loadAggregate("r")).toEqual([]);
  });
});

describe("beside the release before (a rolling deploy)", () => {
  it("its mneme_append_batch, called from a pool of its own, and this release's functions append concurrently: positions 1..n, versions dense", async () => {
    const schema = newSchema();
    const { repo } = await joinedRepo(schema);
    const older = newPool(4);
    // The statement the release before sends: one call per flush here, events of one or two aggregates.
    const olderAppend = (aggs: string[]) =>
      older.query(
        `SELECT error_state FROM "${schema}".mneme_append_batch($1::bigint, $2::text, 'older', $3::integer[], $4::text[], $5::text[],
           $6::text[], $7::text[], $8::text[], $9::integer[], $10::text[], $11::bigint[], $12::text[], $13::text[], '{0}', '{}', '{}',
           '{0}', '{}', '{NULL}', '{NULL}', '{NULL}', '{NULL}', '{NULL}', '{NULL}', '{NULL}', $14::integer[])`,
        [
          advisoryKey("mneme:events", schema),
          `mneme_events_${schema}`,
          [aggs.length],
          aggs.map(() => newUuid()),
          aggs.map(() => ""),
          aggs.map(() => "Todo"),
          aggs.map(() => "TodoCreated"),
          aggs,
          aggs.map(() => null),
          aggs.map(() => null),
          aggs.map(() => 1),
          aggs.map(() => "{}"),
          aggs.map(() => "{}"),
          aggs.map(() => 1),
        ],
      );
    const work: Promise<unknown>[] = [];
    let events = 0;
    for (let i = 0; i < 40; i++) {
      const a = `agg-${i % 4}`;
      const b = `agg-${(i + 1) % 4}`;
      work.push(repo.append(i % 3 === 0 ? [ev(a), ev(b)] : [ev(a)]));
      events += i % 3 === 0 ? 2 : 1;
      work.push(olderAppend(i % 2 === 0 ? [b] : [a, b]).then((r) => expect(r.rows.every((row) => row.error_state === null)).toBe(true)));
      events += i % 2 === 0 ? 1 : 2;
    }
    await Promise.all(work);
    expect(await positions(schema)).toEqual(oneTo(events));
    let total = 0;
    for (let a = 0; a < 4; a++) {
      const versions = (await repo.loadAggregate(`agg-${a}`)).map((e) => e.version);
      expect(versions).toEqual(oneTo(versions.length));
      total += versions.length;
    }
    expect(total).toBe(events);
  });
});
