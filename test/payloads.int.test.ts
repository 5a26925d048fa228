/**
 * The JSON-safe payload rule at dispatch, query and on returned events, the
 * same on memory, SQLite and Postgres: a refused payload never reaches a
 * handler or a store, and an accepted one reads back unchanged.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { anonymous, createFacade, defineDomain, type Facade, type FacadeOptions, newUuid } from "mneme";
import { createPostgresBackends } from "mneme/postgres";
import { createSqliteBackends } from "mneme/sqlite";
import { rejection } from "./support/rejections.js";

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
  return { D, Store, Echo, Ask, handled: () => handled };
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
