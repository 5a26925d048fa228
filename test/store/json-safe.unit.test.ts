import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  isSealedJsonSafe,
  JSON_SAFE_MAX_DEPTH,
  jsonSafeProblem,
  sealJsonSafe,
  tryFreezeJsonSafe,
  trySealJsonSafe,
} from "../../src/store/json-safe.js";
import { jsonSafeArbitrary, REFUSED_PAYLOADS, sameJson } from "../../src/testing/event-repository-payload-contract.js";

/** `depth` arrays, one inside the other, around `leaf`. */
function arrays(depth: number, leaf: unknown = 1): unknown {
  let v = leaf;
  for (let i = 0; i < depth; i++) v = [v];
  return v;
}

/** fast-check's anything, with every kind of value JSON cannot hold. */
const ANY_VALUE = {
  withBigInt: true,
  withBoxedValues: true,
  withDate: true,
  withMap: true,
  withSet: true,
  withNullPrototype: true,
  withObjectString: true,
  withSparseArray: true,
  withTypedArray: true,
  stringUnit: "binary",
} as const;

describe("jsonSafeProblem", () => {
  it("accepts JSON-safe values of every kind", () => {
    const ok: unknown[] = [
      null,
      true,
      false,
      0,
      -1.5,
      1e308,
      Number.MAX_VALUE,
      Number.MIN_VALUE,
      "",
      "日本語 😀 \u2028",
      [],
      {},
      { a: [1, "two", null, { three: [3] }, [], {}], b: { c: { d: false } } },
      Object.assign(Object.create(null) as object, { a: 1, nested: Object.assign(Object.create(null) as object, { b: [2] }) }),
      JSON.parse('{"__proto__": {"x": 1}, "constructor": "c"}') as unknown,
      { "": 1, "~": 2, "/": 3, "a/b~c": 4 },
    ];
    for (const v of ok) expect(jsonSafeProblem(v), JSON.stringify(v)).toBeUndefined();
  });

  it("accepts -0, which reads back as 0", () => {
    expect(jsonSafeProblem({ n: -0 })).toBeUndefined();
    expect(JSON.parse(JSON.stringify({ n: -0 }))).toEqual({ n: 0 });
  });

  it.each([
    ["Infinity", { n: Infinity }, "/n", /Infinity/],
    ["-Infinity", { n: -Infinity }, "/n", /-Infinity/],
    ["NaN", [1, NaN], "/1", /NaN/],
    ["1e400 in JSON text (parses to Infinity)", JSON.parse('{"n":1e400}'), "/n", /1e400/],
    ["U+0000 in a string", { s: "a\u0000" }, "/s", /U\+0000/],
    ["a lone high surrogate", { s: "\uD83D" }, "/s", /lone surrogate/],
    ["a lone low surrogate inside text", { s: "a\uDE00b" }, "/s", /lone surrogate/],
    ["a reversed pair", { s: "\uDE00\uD83D" }, "/s", /lone surrogate/],
    ["U+0000 in a key (pointer: the object)", { o: { "k\u0000": 1 } }, "/o", /has a key "k\\u0000" that contains U\+0000/],
    ["a lone surrogate in a key", { "\uD800": 1 }, "", /has a key "\\ud800" that contains a lone surrogate/],
    ["undefined as a property value", { a: 1, b: undefined }, "/b", /JSON.stringify drops the property/],
    ["undefined in an array", [1, undefined], "/1", /JSON writes null/],
    ["a hole in a sparse array", { list: [1, , 3] }, "/list/1", /sparse array/],
    ["undefined at the root", undefined, "", /undefined/],
    ["a BigInt", { n: 1n }, "/n", /BigInt/],
    ["a Date", { at: new Date(0) }, "/at", /Date.*toISOString/],
    [
      "a class instance",
      {
        c: new (class Money {
          amount = 1;
        })(),
      },
      "/c",
      /instance of Money/,
    ],
    ["a Map", new Map(), "", /instance of Map/],
    ["a Set", [new Set([1])], "/0", /instance of Set/],
    ["a boxed string", { s: new String("x") }, "/s", /instance of String/],
    ["a Buffer", { b: Buffer.from("x") }, "/b", /instance of Buffer/],
    ["an Array subclass", { a: new (class List extends Array {})() }, "/a", /instance of List, not an array/],
    ["an object whose prototype is not Object.prototype", Object.create({ inherited: 1 }), "", /not a plain object/],
    ["a function", { f() {} }, "/f", /function/],
    ["a symbol value", { s: Symbol("s") }, "/s", /symbol/],
    ["a symbol key", { o: { [Symbol("k")]: 1 } }, "/o", /symbol key \(Symbol\("k"\)\)/],
    [
      "a getter",
      {
        get g() {
          return 1;
        },
      },
      "/g",
      /accessor/,
    ],
    ["a getter and setter", Object.defineProperty({}, "gs", { get: () => 1, set: () => undefined, enumerable: true }), "/gs", /accessor/],
    ["a setter alone", Object.defineProperty({}, "s", { set: () => undefined, enumerable: true }), "/s", /accessor/],
    ["pointer tokens are escaped (RFC 6901)", { "a/b": { "c~d": [0, NaN] } }, "/a~1b/c~0d/1", /NaN/],
  ])("refuses %s", (_name, value, pointer, message) => {
    const p = jsonSafeProblem(value);
    expect(p?.pointer).toBe(pointer);
    expect(p?.message).toMatch(message);
  });

  it("reports the first problem in key and index order", () => {
    expect(jsonSafeProblem({ a: [1, 2, { b: NaN }], c: undefined })?.pointer).toBe("/a/2/b");
  });

  it("refuses a cycle with a clear message instead of overflowing the stack", () => {
    const root: Record<string, unknown> = { a: { list: [1] } };
    ((root.a as Record<string, unknown>).list as unknown[]).push(root.a);
    expect(jsonSafeProblem(root)).toEqual({
      pointer: "/a/list/1",
      message: expect.stringMatching(/refers back to \/a \(a cycle\)/) as unknown,
    });
    const self: Record<string, unknown> = {};
    self.me = self;
    expect(jsonSafeProblem(self)).toEqual({ pointer: "/me", message: expect.stringMatching(/refers back to the root/) as unknown });
  });

  it(`accepts ${JSON_SAFE_MAX_DEPTH} nested arrays / objects and refuses one more`, () => {
    expect(JSON_SAFE_MAX_DEPTH).toBe(512);
    expect(jsonSafeProblem(arrays(512))).toBeUndefined();
    const p = jsonSafeProblem(arrays(513));
    expect(p?.pointer).toBe("/0".repeat(512));
    expect(p?.message).toMatch(/deeper than 512/);
    // Far deeper than the stack allows a naive recursion: still a clear refusal.
    expect(jsonSafeProblem(arrays(200_000))?.message).toMatch(/deeper than 512/);
  });

  it("never puts U+0000 or a lone surrogate into its message or pointer (so the error itself can be stored)", () => {
    for (const v of [{ "\u0000": 1 }, { ["x".repeat(100) + "\uD800"]: 1 }, { [Symbol("\u0000")]: 1 }]) {
      const p = jsonSafeProblem(v);
      expect(p).toBeDefined();
      expect(jsonSafeProblem(p)).toBeUndefined();
    }
  });

  it("skips enumerable keys of a polluted Object.prototype", () => {
    const proto = Object.prototype as Record<string, unknown>;
    try {
      proto.polluted = NaN;
      expect(jsonSafeProblem({ a: 1 })).toBeUndefined();
      expect(jsonSafeProblem({ a: 1, polluted: Infinity })?.pointer).toBe("/polluted");
    } finally {
      delete proto.polluted;
    }
  });

  it("refuses every payload of the EventRepository contract's refusal table at the pointer the table names", () => {
    for (const c of REFUSED_PAYLOADS) expect(jsonSafeProblem(c.payload())?.pointer, c.name).toBe(c.pointer);
  });

  it("property: every generated JSON-safe value is accepted", () => {
    fc.assert(
      fc.property(jsonSafeArbitrary(fc, { maxDepth: 6 }), (v) => jsonSafeProblem(v) === undefined),
      { numRuns: 500 },
    );
  });

  it("property: every value it accepts survives JSON.parse(JSON.stringify(v)) deep-equal", () => {
    const anything = fc.anything(ANY_VALUE);
    let accepted = 0;
    fc.assert(
      fc.property(fc.oneof(anything, jsonSafeArbitrary(fc)), (v) => {
        if (jsonSafeProblem(v) !== undefined) return true;
        accepted++;
        return sameJson(JSON.parse(JSON.stringify(v)), v);
      }),
      { numRuns: 2000 },
    );
    expect(accepted).toBeGreaterThan(100);
  });

  it("property: a value it refuses has its problem where the pointer says", () => {
    // Put one bad value somewhere inside a JSON-safe object; the pointer must lead to it.
    const bad = fc.constantFrom<unknown>(NaN, Infinity, undefined, 1n, "\u0000", "\uD800", new Date(0), new Map(), () => 1);
    fc.assert(
      fc.property(
        fc.dictionary(fc.string(), jsonSafeArbitrary(fc, { maxDepth: 2 }), { minKeys: 0, maxKeys: 4 }),
        fc.string(),
        bad,
        (base, key, b) => {
          const token = key.replace(/~/g, "~0").replace(/\//g, "~1");
          const v = { ...base, [key]: { inner: [b] } };
          const p = jsonSafeProblem(v);
          if (p === undefined) return false;
          if (p.pointer === `/${token}/inner/0`) return true;
          // Another key of the base may come first only when it is itself refused (it cannot be: base is JSON-safe).
          return false;
        },
      ),
      { numRuns: 300 },
    );
  });
});

describe("trySealJsonSafe / tryFreezeJsonSafe (the check and the copy in one walk)", () => {
  const anything = fc.anything(ANY_VALUE);

  function deeplyFrozen(v: unknown): boolean {
    if (typeof v !== "object" || v === null) return true;
    return Object.isFrozen(v) && Object.values(v).every(deeplyFrozen);
  }

  it("property: accepts exactly what jsonSafeProblem accepts, and copies it as sealJsonSafe does", () => {
    fc.assert(
      fc.property(fc.oneof(anything, jsonSafeArbitrary(fc)), (v) => {
        const ok = jsonSafeProblem(v) === undefined;
        for (const copy of [trySealJsonSafe(v), tryFreezeJsonSafe(v)]) {
          if (!ok) {
            if (copy !== undefined) return false;
            continue;
          }
          if (!sameJson(copy, v) || !deeplyFrozen(copy)) return false;
          if (typeof v === "object" && v !== null && copy === v) return false;
        }
        return true;
      }),
      { numRuns: 2000 },
    );
  });

  it("copies -0 as 0, as every store reads it back (JSON has no negative zero)", () => {
    for (const copy of [sealJsonSafe, trySealJsonSafe, tryFreezeJsonSafe]) {
      expect(Object.is(copy(-0), 0)).toBe(true);
      const arr = copy([-0, 1, -1.5]) as number[];
      expect(Object.is(arr[0], 0)).toBe(true);
      expect(arr.slice(1)).toEqual([1, -1.5]);
      const obj = copy({ a: -0, b: { c: [-0] } }) as { a: number; b: { c: number[] } };
      expect(Object.is(obj.a, 0)).toBe(true);
      expect(Object.is(obj.b.c[0], 0)).toBe(true);
      expect(sameJson(copy({ a: -0 }), { a: -0 })).toBe(true);
    }
  });

  it("refuses every refused payload of the contract, and values too deep or with a cycle", () => {
    for (const c of REFUSED_PAYLOADS) expect(trySealJsonSafe(c.payload()), c.name).toBeUndefined();
    let deep: unknown = 1;
    for (let i = 0; i <= JSON_SAFE_MAX_DEPTH; i++) deep = [deep];
    expect(trySealJsonSafe(deep)).toBeUndefined();
    const cyclic: Record<string, unknown> = { a: 1 };
    cyclic.self = cyclic;
    expect(tryFreezeJsonSafe(cyclic)).toBeUndefined();
    expect(
      trySealJsonSafe({
        get x() {
          return 1;
        },
      }),
    ).toBeUndefined();
    expect(trySealJsonSafe({ [Symbol("s")]: 1 })).toBeUndefined();
  });

  it("marks only with trySealJsonSafe, and shares a sealed value as it is", () => {
    const v = { a: [1, { b: "c" }] };
    const sealed = trySealJsonSafe(v)!;
    expect(isSealedJsonSafe(sealed)).toBe(true);
    expect(isSealedJsonSafe(tryFreezeJsonSafe(v))).toBe(false);
    expect(trySealJsonSafe(sealed)).toBe(sealed);
    const inner = sealJsonSafe({ n: 1 });
    expect(tryFreezeJsonSafe({ inner })?.inner).toBe(inner);
    // The caller's object is not touched.
    expect(Object.isFrozen(v)).toBe(false);
  });
});
