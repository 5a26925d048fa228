/**
 * The payload part of the EventRepository conformance suite: every JSON-safe
 * payload (see src/store/json-safe.ts) reads back unchanged, and every other
 * payload is refused with INVALID_EVENTS and a JSON pointer before anything
 * is written.
 *
 * The round trip is a fast-check property. fast-check is loaded when that
 * test runs, not when `mneme/testing` is imported, so a user who runs only
 * createTestFacade or scenario() never needs it; the suite needs it installed
 * (a dev dependency, like vitest).
 */
import type { Arbitrary } from "fast-check";
import { expect } from "vitest";
import { newUuid } from "../model/clock.js";
import type { Event, NewEvent } from "../model/types.js";
import type { EventRepository } from "../store/event-repository.js";
import { collectPages, expectRejectsWith, type ContractTest } from "./contract-harness.js";

/** The part of fast-check used here (its namespace and its default export both fit). */
type FastCheck = Pick<
  typeof import("fast-check"),
  | "array"
  | "assert"
  | "asyncProperty"
  | "boolean"
  | "constant"
  | "constantFrom"
  | "dictionary"
  | "double"
  | "integer"
  | "letrec"
  | "oneof"
  | "string"
>;

async function loadFastCheck(): Promise<FastCheck> {
  try {
    return await import("fast-check");
  } catch (e) {
    throw new Error(
      'the EventRepository payload round trip ("every accepted payload reads back unchanged") needs fast-check: install it as a dev dependency (npm install --save-dev fast-check)',
      { cause: e },
    );
  }
}

/** A string that may be stored: no U+0000, and well-formed UTF-16 (it survives UTF-8 encoding unchanged). */
function storableString(s: string): boolean {
  return !s.includes("\u0000") && Buffer.from(s, "utf8").toString("utf8") === s;
}

/** Strings with a meaning somewhere: pointer syntax, prototype names, JSON escapes, line separators, astral characters. */
const AWKWARD_STRINGS = [
  "",
  " ",
  "~",
  "/",
  "~0",
  "~1",
  "a/b~c",
  "__proto__",
  "constructor",
  "toString",
  '"',
  "\\",
  "\n\r\t",
  "\u0001\u001f",
  "\u2028\u2029",
  "\uFEFF",
  "é",
  "日本語",
  "😀",
  "👩‍👩‍👧",
  "\uFFFF",
  "null",
  "1e400",
];

/**
 * Arbitrary JSON-safe values: strings of every Unicode plane (no U+0000, no
 * lone surrogate) as values and keys, finite doubles and integers including
 * the extremes, nested arrays and objects (some with a null prototype).
 * `-0` is left out: it is JSON-safe but reads back as `0`.
 */
export function jsonSafeArbitrary(fc: FastCheck, opts: { maxDepth?: number } = {}): Arbitrary<unknown> {
  const string = fc.oneof(
    fc.string(),
    fc.string({ unit: "grapheme" }),
    fc.string({ unit: "binary" }).filter(storableString),
    fc.constantFrom(...AWKWARD_STRINGS),
  );
  const number = fc.oneof(
    fc.integer(),
    fc.double({ noNaN: true, noDefaultInfinity: true }).map((n) => (Object.is(n, -0) ? 0 : n)),
    fc.constantFrom(
      Number.MAX_VALUE,
      -Number.MAX_VALUE,
      Number.MIN_VALUE,
      Number.MAX_SAFE_INTEGER,
      Number.MIN_SAFE_INTEGER,
      2 ** 53 + 2,
      1e21,
      1e-7,
      0.1,
      0.30000000000000004,
    ),
  );
  const leaf = fc.oneof(string, number, fc.boolean(), fc.constant(null));
  const { value } = fc.letrec<{ value: unknown }>((tie) => ({
    value: fc.oneof(
      { depthSize: "small", maxDepth: opts.maxDepth ?? 4, withCrossShrink: true },
      leaf,
      fc.array(tie("value"), { maxLength: 6 }),
      fc.dictionary(string, tie("value"), { maxKeys: 6 }),
    ),
  }));
  return value;
}

/**
 * True when `actual` is `expected` read back through JSON: the same arrays,
 * the same primitives (`Object.is`, except that `-0` reads back as `0`) and
 * objects with the same own keys and values, in any key order and whatever
 * their prototype. Unlike `toEqual`, a missing key and an undefined one differ.
 */
export function sameJson(actual: unknown, expected: unknown): boolean {
  if (typeof expected !== "object" || expected === null) {
    return Object.is(actual, Object.is(expected, -0) ? 0 : expected);
  }
  if (typeof actual !== "object" || actual === null) return false;
  if (Array.isArray(expected)) {
    if (!Array.isArray(actual) || actual.length !== expected.length) return false;
    for (let i = 0; i < expected.length; i++) if (!sameJson(actual[i], expected[i])) return false;
    return true;
  }
  if (Array.isArray(actual)) return false;
  const e = expected as Record<string, unknown>;
  const a = actual as Record<string, unknown>;
  const keys = Object.keys(e);
  if (Object.keys(a).length !== keys.length) return false;
  for (const k of keys) if (!Object.hasOwn(a, k) || !sameJson(a[k], e[k])) return false;
  return true;
}

/** A payload that no backend may accept, and where the problem is (a pointer into the payload). */
interface RefusedCase {
  readonly name: string;
  readonly payload: () => unknown;
  readonly pointer: string;
}

function cycle(): unknown {
  const o: Record<string, unknown> = { a: { list: [1] } };
  ((o.a as Record<string, unknown>).list as unknown[]).push(o);
  return o;
}

function nested(depth: number): unknown {
  let v: unknown = { leaf: true };
  for (let i = 0; i < depth; i++) v = [v];
  return { deep: v };
}

class Money {
  constructor(readonly amount: number) {}
}

/** Every kind of non-JSON-safe value, each inside a payload that is otherwise fine. */
export const REFUSED_PAYLOADS: readonly RefusedCase[] = [
  { name: "Infinity", payload: () => ({ ok: 1, n: Infinity }), pointer: "/n" },
  { name: "-Infinity", payload: () => ({ n: -Infinity }), pointer: "/n" },
  { name: "NaN", payload: () => ({ list: [1, NaN] }), pointer: "/list/1" },
  { name: "1e400 parsed from JSON (Infinity)", payload: () => JSON.parse('{"n":1e400}') as unknown, pointer: "/n" },
  { name: "U+0000 in a string", payload: () => ({ title: "a\u0000b" }), pointer: "/title" },
  { name: "a lone high surrogate", payload: () => ({ items: [{ s: "x\uD800" }] }), pointer: "/items/0/s" },
  { name: "a lone low surrogate", payload: () => ({ s: "\uDC00y" }), pointer: "/s" },
  { name: "U+0000 in a key", payload: () => ({ inner: { "k\u0000": 1 } }), pointer: "/inner" },
  { name: "a lone surrogate in a key", payload: () => ({ "\uDFFF": 1 }), pointer: "" },
  { name: "undefined as a property value", payload: () => ({ a: 1, b: undefined }), pointer: "/b" },
  { name: "undefined in an array", payload: () => ({ list: [1, undefined, 3] }), pointer: "/list/1" },
  { name: "a sparse array", payload: () => ({ list: [1, , 3] }), pointer: "/list/1" },
  { name: "a BigInt", payload: () => ({ n: 10n }), pointer: "/n" },
  { name: "a Date", payload: () => ({ at: new Date(0) }), pointer: "/at" },
  { name: "a class instance", payload: () => ({ price: new Money(1) }), pointer: "/price" },
  { name: "a Map", payload: () => ({ m: new Map([["a", 1]]) }), pointer: "/m" },
  { name: "a Set", payload: () => ({ s: new Set([1]) }), pointer: "/s" },
  { name: "a function", payload: () => ({ f: () => 1 }), pointer: "/f" },
  { name: "a symbol value", payload: () => ({ s: Symbol("s") }), pointer: "/s" },
  { name: "a symbol key", payload: () => ({ inner: { [Symbol("k")]: 1, a: 1 } }), pointer: "/inner" },
  { name: "a getter", payload: () => ({ inner: Object.defineProperty({}, "g", { get: () => 1, enumerable: true }) }), pointer: "/inner/g" },
  { name: "a cycle", payload: cycle, pointer: "/a/list/1" },
  { name: "nesting deeper than 512", payload: () => nested(600), pointer: `/deep${"/0".repeat(511)}` },
  { name: "key with pointer syntax leading to NaN", payload: () => ({ "a/b~c": NaN }), pointer: "/a~1b~0c" },
];

/**
 * Registers the payload tests of the EventRepository contract (called by
 * describeEventRepositoryContract with its `test`).
 */
export function describeEventRepositoryPayloadContract(test: ContractTest<EventRepository>): void {
  test("every accepted payload reads back unchanged", async (repo) => {
    const fc = await loadFastCheck();
    let after = await repo.headPosition();
    await fc.assert(
      fc.asyncProperty(fc.array(jsonSafeArbitrary(fc), { minLength: 1, maxLength: 8 }), async (payloads) => {
        const agg = newUuid();
        const appended = await repo.append(payloads.map((payload) => ({ domain: "Test", name: "Payload", aggregateUuid: agg, payload })));
        const loaded = await repo.loadAggregate(agg);
        const read = (await collectPages(repo.readAll({ afterPosition: after }))).flat();
        after = appended[appended.length - 1]?.position ?? after;
        const mismatch = (events: readonly Event[], where: string): string | undefined => {
          if (events.length !== payloads.length) return `${where} gave ${events.length} events, not ${payloads.length}`;
          const i = events.findIndex((e, k) => !sameJson(e.payload, payloads[k]));
          return i === -1 ? undefined : `${where}: payload ${i} was ${safeJson(payloads[i])}, read back ${safeJson(events[i]?.payload)}`;
        };
        const problem = mismatch(appended, "append") ?? mismatch(loaded, "loadAggregate") ?? mismatch(read, "readAll");
        if (problem !== undefined) expect.fail(problem);
      }),
      { numRuns: 60 },
    );
  }, 120_000);

  test("a non-JSON-safe payload is refused with INVALID_EVENTS and a pointer, nothing written", async (repo) => {
    const failures: string[] = [];
    for (const c of REFUSED_PAYLOADS) {
      const agg = newUuid();
      const events: NewEvent[] = [
        { domain: "Test", name: "Fine", aggregateUuid: agg, payload: { fine: true } },
        { domain: "Test", name: "Refused", aggregateUuid: agg, payload: c.payload() },
      ];
      let error: Error;
      try {
        error = await expectRejectsWith(() => repo.append(events), "INVALID_EVENTS");
      } catch (e) {
        failures.push(`${c.name}: ${e instanceof Error ? e.message : String(e)}`);
        continue;
      }
      // The pointer is into append's `events` argument: event 1, its payload, then the place in the payload.
      const want = `/1/payload${c.pointer}`;
      const details = (error as { details?: readonly { pointer?: unknown; message?: unknown }[] }).details ?? [];
      if (!details.some((d) => d.pointer === want && typeof d.message === "string" && d.message !== "")) {
        failures.push(`${c.name}: no detail with pointer ${JSON.stringify(want)} and a message (got ${safeJson(details)})`);
      }
      if ((await repo.loadAggregate(agg)).length !== 0) failures.push(`${c.name}: events of the refused call were written`);
    }
    expect(await repo.headPosition(), "nothing of any refused call is written").toBe(0);
    expect(failures).toEqual([]);
  });
}

/** JSON of a value for a failure message (which may hold anything). */
function safeJson(v: unknown): string {
  try {
    const s = JSON.stringify(v, (_k, x: unknown) => (typeof x === "bigint" ? `${x}n` : x));
    return s === undefined ? String(v) : s.length > 500 ? `${s.slice(0, 500)}...` : s;
  } catch {
    return String(v);
  }
}
