/**
 * The JSON-safe payload rule at dispatch, query and on returned events, the
 * same on memory, SQLite and Postgres: a refused payload never reaches a
 * handler or a store, and an accepted one reads back unchanged.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import fc from "fast-check";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { anonymous, createFacade, defineDomain, type Facade, type FacadeOptions, newUuid } from "mneme";
import { createPostgresBackends } from "mneme/postgres";
import { createSqliteBackends } from "mneme/sqlite";
import { rejection } from "../support/rejections.js";

const DATABASE_URL = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test";
const dir = mkdtempSync(join(tmpdir(), "mneme-payloads-"));
const pool = new pg.Pool({ connectionString: DATABASE_URL, max: 4 });
const schema = `mneme_payloads_${newUuid().replace(/-/g, "").slice(-12)}`;
afterAll(async () => {
  await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).catch(() => undefined);
  await pool.end();
  rmSync(dir, { recursive: true, force: true });
});

function domain() {
  const D = defineDomain("Payloads");
  const Store = D.command<{ id: string; value: unknown }>("Store", {
    permission: anonymous,
    schema: { type: "object", properties: { id: { type: "string" }, n: { type: "integer" } } },
  });
  const Echo = D.command<{ id: string; value: unknown }>("Echo", { permission: anonymous });
  const Ask = D.query<{ value: unknown }, unknown>("Ask", { permission: anonymous });
  const Stored = D.event<{ value: unknown }>("Stored");
  let handled = 0;
  D.handleCommand(Store, (_ctx, _c, p) => {
    handled++;
    return [Stored.create(p.id, { value: p.value })];
  });
  // Returns an event whose payload the handler made itself (not from the request).
  D.handleCommand(Echo, (_ctx, _c, p) => [
    Stored.create(p.id, { value: p.id === "inf" ? Infinity : p.id === "date" ? new Date(0) : p.value }),
  ]);
  D.handleQuery(Ask, (_ctx, _q, p) => p.value);
  // An event type with a schema of its own, and a command that returns one event of it with a second, schemaless one before.
  const Counted = D.event("Counted", { schema: z.object({ n: z.number().int().min(1) }) });
  const Count = D.command<{ id: string; n: number }>("Count", { permission: anonymous });
  D.handleCommand(Count, (_ctx, _c, p) => [Stored.create(p.id, { value: p.n }), Counted.create(p.id, { n: p.n })]);
  return { D, Store, Echo, Ask, Count, handled: () => handled };
}

const backends: [string, () => Partial<FacadeOptions>][] = [
  ["memory", () => ({})],
  ["sqlite", () => createSqliteBackends({ filename: join(dir, "payloads.db") })],
  ["postgres", () => createPostgresBackends({ pool, schema })],
];

describe.each(backends)("payloads on %s", (_name, make) => {
  const d = domain();
  let f: Facade;
  beforeAll(async () => {
    f = createFacade({ appName: "payloads", ...make() });
    f.registerDomain(d.D);
    await f.start();
  });
  afterAll(() => f.stop());

  const refused: [string, unknown, string][] = [
    ["1e400 (Infinity), even where the schema says integer", JSON.parse('{"n":1e400}'), "/value/n"],
    ["NaN", { n: Number.NaN }, "/value/n"],
    ["U+0000 in a string", { s: "a\u0000b" }, "/value/s"],
    ["a lone surrogate", { s: "\ud800" }, "/value/s"],
    ["a lone surrogate in a key", { ["k\udc00"]: 1 }, "/value"],
    ["undefined in an array", [1, undefined], "/value/1"],
    ["a Date", { at: new Date(0) }, "/value/at"],
    ["a BigInt", { n: 1n }, "/value/n"],
    ["a class instance", { m: new Map() }, "/value/m"],
  ];

  it.each(refused)(
    "a command payload with %s is VALIDATION_FAILED with a pointer, before the handler runs",
    async (_what, value, pointer) => {
      const before = d.handled();
      const head = await f.eventRepository.headPosition();
      const e = await rejection(f.dispatch(d.Store, { id: newUuid(), value }));
      expect(e.code).toBe("VALIDATION_FAILED");
      expect(e.details![0]!.pointer!.startsWith(pointer)).toBe(true);
      expect(d.handled()).toBe(before);
      expect(await f.eventRepository.headPosition()).toBe(head);
    },
  );

  it("a query payload is held to the same rule", async () => {
    expect((await rejection(f.query(d.Ask, { value: { n: Infinity } }))).code).toBe("VALIDATION_FAILED");
    expect(await f.query(d.Ask, { value: { n: 1 } })).toEqual({ n: 1 });
  });

  it("an event a handler returns with a payload no backend can hold is INVALID_EVENTS, and nothing is written", async () => {
    const head = await f.eventRepository.headPosition();
    for (const id of ["inf", "date"]) {
      const e = await rejection(f.dispatch(d.Echo, { id, value: 1 }));
      expect(e.code).toBe("INVALID_EVENTS");
      expect(e.details![0]!.pointer!).toBe("/0/payload/value");
    }
    expect(await f.eventRepository.headPosition()).toBe(head);
  });

  it("an event its type's schema refuses fails the command with INVALID_EVENTS and a pointer; nothing is written", async () => {
    const head = await f.eventRepository.headPosition();
    const id = newUuid();
    const e = await rejection(f.dispatch(d.Count, { id, n: -5 }));
    expect(e.code).toBe("INVALID_EVENTS");
    expect(e.details?.map((x) => x.pointer)).toEqual(["/1/payload/n"]);
    expect(await f.eventRepository.headPosition()).toBe(head);
    expect(await f.eventRepository.loadAggregate(id)).toEqual([]);
    expect((await f.dispatch(d.Count, { id, n: 5 })).events.map((x) => x.payload)).toEqual([{ value: 5 }, { n: 5 }]);
  });

  it("a commandUuid with a lone surrogate or U+0000, or over 512 characters, is INVALID_REQUEST: two such would be one record on Postgres", async () => {
    const head = await f.eventRepository.headPosition();
    for (const commandUuid of ["\ud800", "\udc00", "c\u0000", "c".repeat(513)]) {
      const e = await rejection(f.dispatch(d.Store, { id: newUuid(), value: 1 }, { commandUuid }));
      expect(e.code).toBe("INVALID_REQUEST");
    }
    expect(await f.eventRepository.headPosition()).toBe(head);
    // U+FFFD is a command uuid like any other, its own record.
    const own = `${newUuid()}\ufffd`;
    await f.dispatch(d.Store, { id: newUuid(), value: 1 }, { commandUuid: own });
    expect((await f.commandStore.get(own))?.commandUuid).toBe(own);
  });

  it("accepted payloads read back unchanged: live, loaded and replayed", async () => {
    const value = {
      text: 'é 😀 \u2028 "q" \\',
      big: 2 ** 53 - 1,
      neg: -0.5,
      tiny: 5e-324,
      nested: [[], {}, [null, true, false]],
      empty: "",
    };
    const id = newUuid();
    const r = await f.dispatch(d.Store, { id, value });
    expect(r.events[0]!.payload).toEqual({ value });
    expect((await f.eventRepository.loadAggregate(id))[0]!.payload).toEqual({ value });
    const all: unknown[] = [];
    for await (const page of f.eventRepository.readAll()) for (const e of page) if (e.aggregateUuid === id) all.push(e.payload);
    expect(all).toEqual([{ value }]);
  });
});

/** Aggregate ids from Unicode's edges: lone surrogates, pairs, U+FFFD, NUL, noncharacters, very long ones, anything of UTF-16. */
const edgeIds = fc.oneof(
  fc.constantFrom(
    "\ud800",
    "\udc00",
    "\ufffd",
    "\udbff\udfff",
    "\ud83d\ude00",
    "\u0000",
    "a\u0000b",
    "\ufffe",
    "\uffff",
    "\ufdd0",
    "\ud83f\udffe",
    "\ud800\ud800",
    "\udc00\ud800",
    "",
  ),
  fc.string({ unit: "binary", maxLength: 6 }),
  fc.string({ unit: "grapheme", maxLength: 6 }),
  fc.string({ unit: fc.constantFrom("\ud800", "\udc00", "\ufffd", "a", "\ud83d\ude00"), minLength: 1, maxLength: 6 }),
  fc.constantFrom(200, 255, 300, 1000).map((n) => "\ud83d\ude00".repeat(n)),
  fc.string({ unit: "grapheme", minLength: 400, maxLength: 800 }),
);
/** What every backend stores alike: no NUL, no lone surrogate, at most 512 UTF-16 code units. */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
const STORABLE = (s: string) => !s.includes("\u0000") && !LONE_SURROGATE.test(s) && s.length <= 512;

describe.each(backends)("aggregate ids on %s", (_name, make) => {
  let f: Facade;
  beforeAll(async () => {
    f = createFacade({ appName: "aggregate-ids", ...make() });
    await f.start();
  });
  afterAll(() => f.stop());

  it("the three ids that merged on Postgres: the lone ones are INVALID_EVENTS (pointer), U+FFFD is its own aggregate", async () => {
    const head = await f.eventRepository.headPosition();
    for (const [i, id] of ["\ud800", "\udc00"].entries()) {
      const err = await rejection(f.eventRepository.append([{ domain: "Ids", name: "Seen", aggregateUuid: id, payload: { i } }]));
      expect(err.code).toBe("INVALID_EVENTS");
      expect(err.details?.[0]?.pointer).toBe("/0/aggregateUuid");
      expect((await rejection(f.eventRepository.loadAggregate(id))).code).toBe("INVALID_REQUEST");
      expect((await rejection(f.eventRepository.loadAggregates([id]))).code).toBe("INVALID_REQUEST");
    }
    // A tenant uuid is held to the same rule: two tenants must not become one.
    const tenant = await rejection(
      f.eventRepository.append([{ domain: "Ids", name: "Seen", aggregateUuid: newUuid(), tenantUuid: "t\udc00", payload: {} }]),
    );
    expect(tenant.code).toBe("INVALID_EVENTS");
    expect(await f.eventRepository.headPosition()).toBe(head);
    const own = `fffd-${newUuid()}-\ufffd`;
    await f.eventRepository.append([{ domain: "Ids", name: "Seen", aggregateUuid: own, payload: { i: 3 } }]);
    expect((await f.eventRepository.loadAggregate(own)).map((e) => e.aggregateUuid)).toEqual([own]);
  });

  it("any aggregate id is either refused with INVALID_EVENTS, or stored, read back identical and distinct (fast-check)", async () => {
    await fc.assert(
      fc.asyncProperty(fc.uniqueArray(edgeIds, { minLength: 1, maxLength: 5 }), async (tails) => {
        const run = newUuid();
        const ids = tails.map((t) => `${run}:${t}`);
        // The bare edge id too, where a prefix would hide a leading lone surrogate or NUL.
        const bare = tails[0]!;
        const accepted: string[] = [];
        for (const id of [...ids, ...(STORABLE(bare) && bare !== "" ? [] : [bare])]) {
          const append = f.eventRepository.append([{ domain: "Ids", name: "Seen", aggregateUuid: id, payload: { id: ids.indexOf(id) } }]);
          if (id === "" || !STORABLE(id)) {
            expect((await rejection(append)).code).toBe("INVALID_EVENTS");
            if (id !== "") expect((await rejection(f.eventRepository.loadAggregate(id))).code).toBe("INVALID_REQUEST");
          } else {
            await append;
            accepted.push(id);
          }
        }
        for (const id of accepted) {
          const events = await f.eventRepository.loadAggregate(id);
          expect(events.map((e) => [e.aggregateUuid, e.payload])).toEqual([[id, { id: ids.indexOf(id) }]]);
        }
        const all = await f.eventRepository.loadAggregates(accepted);
        for (const id of accepted) expect(all.get(id)?.map((e) => e.aggregateUuid)).toEqual([id]);
      }),
      { numRuns: 40 },
    );
  }, 120_000);
});
