/**
 * The JSON-safe payload rule, shared by dispatch, query and every event
 * repository's append, so a payload is accepted or refused identically on
 * every backend and every accepted payload reads back unchanged.
 *
 * A JSON-safe value is one of:
 * - `null`, `true`, `false`;
 * - a finite number (`-0` is accepted and reads back as `0`: JSON has no
 *   negative zero, and `-0 === 0`; the copies below make it `0` too, so the
 *   memory backends read it back as the others do);
 * - a string with no U+0000 and no lone surrogate (a UTF-16 surrogate that is
 *   not half of a pair): Postgres `jsonb` cannot hold either, so no backend
 *   takes them;
 * - an array (prototype `Array.prototype`) without holes whose every element
 *   is JSON-safe (`undefined` is refused: JSON would write `null`);
 * - a plain object (prototype `Object.prototype` or `null`) whose own
 *   enumerable properties are data properties (no getter or setter) with
 *   string keys that obey the string rule and JSON-safe values; no symbol keys
 *   (JSON drops them). A property whose value is `undefined` is refused too:
 *   `JSON.stringify` drops it, so the payload would not read back unchanged.
 *
 * Refused as well: `NaN`, `Infinity` (also a literal such as `1e400`, which
 * parses to Infinity), BigInt, symbols, functions, Date, Map, Set, class
 * instances, boxed primitives, typed arrays, cycles, and nesting deeper than
 * {@link JSON_SAFE_MAX_DEPTH} arrays / objects. Non-enumerable properties are
 * not looked at (JSON ignores them), nor are named (non-index) properties of
 * an array.
 *
 * The order of an object's keys is not part of the rule: Postgres `jsonb`
 * may return them in another order.
 */

/** A payload problem: an RFC 6901 pointer ("" for the root) and what is wrong there. */
export interface JsonSafeProblem {
  readonly pointer: string;
  readonly message: string;
}

/** The deepest nesting of arrays and objects a JSON-safe value may have. */
export const JSON_SAFE_MAX_DEPTH = 512;

/**
 * The first problem that keeps `value` from being JSON-safe (see the module
 * comment), or `undefined` when it is JSON-safe. One walk, in key order; it
 * allocates nothing on a JSON-safe value and never overflows the stack (a
 * cycle or a too-deep value is refused at {@link JSON_SAFE_MAX_DEPTH}).
 * @example
 * jsonSafeProblem({ items: [{ n: 1 }, { n: Infinity }] });
 * // { pointer: "/items/1/n", message: "is Infinity: only finite numbers are JSON-safe ..." }
 */
export function jsonSafeProblem(value: unknown): JsonSafeProblem | undefined {
  inheritedKeys = hasEnumerableKeys(OBJECT_PROTO);
  const failure = walk(value, 0);
  if (failure === undefined) return undefined;
  const tokens = failure.tokens.reverse();
  if (failure.message === TOO_DEEP) return tooDeep(value, tokens);
  return { pointer: toPointer(tokens, tokens.length), message: failure.message };
}

// --- the walk ---------------------------------------------------------------

/** A problem found by the walk: tokens are pushed while unwinding (so they are in reverse). */
interface Failure {
  readonly tokens: (string | number)[];
  readonly message: string;
}

const TOO_DEEP = "\u0000too deep";
/** True while Object.prototype has enumerable keys (a polluted prototype): for-in then needs an own-key check. */
let inheritedKeys = false;

function hasEnumerableKeys(o: object): boolean {
  for (const _ in o) return true;
  return false;
}
const OBJECT_PROTO = Object.prototype;
const ARRAY_PROTO = Array.prototype;
const hasOwn = Object.prototype.hasOwnProperty;
const getPrototypeOf = Object.getPrototypeOf;
const getOwnPropertySymbols = Object.getOwnPropertySymbols;
const isArray = Array.isArray;
const lookupGetter = (OBJECT_PROTO as unknown as { __lookupGetter__(key: string): unknown }).__lookupGetter__;
const lookupSetter = (OBJECT_PROTO as unknown as { __lookupSetter__(key: string): unknown }).__lookupSetter__;

function fail(message: string): Failure {
  return { tokens: [], message };
}

function walk(v: unknown, depth: number): Failure | undefined {
  switch (typeof v) {
    case "string": {
      const problem = stringProblem(v);
      return problem === undefined ? undefined : fail(problem);
    }
    case "number":
      // Finite numbers give 0; NaN and ±Infinity give NaN.
      return v - v === 0 ? undefined : fail(numberMessage(v));
    case "boolean":
      return undefined;
    case "object":
      if (v === null) return undefined;
      if (depth >= JSON_SAFE_MAX_DEPTH) return fail(TOO_DEEP);
      return isArray(v) ? walkArray(v, depth) : walkObject(v as Record<string, unknown>, depth);
    case "undefined":
      return fail("is undefined, which JSON cannot hold: use null, or leave the value out");
    case "bigint":
      return fail("is a BigInt, which JSON cannot hold: use a number (up to 2^53) or a string");
    case "function":
      return fail("is a function, which JSON cannot hold");
    default:
      return fail("is a symbol, which JSON cannot hold");
  }
}

function walkArray(a: unknown[], depth: number): Failure | undefined {
  if (marked(a)) return undefined;
  if (getPrototypeOf(a) !== ARRAY_PROTO) return fail(instanceMessage(a));
  for (let i = 0, n = a.length; i < n; i++) {
    const x = a[i];
    if (x === undefined) {
      return failAt(
        i,
        i in a ? "is undefined: JSON writes null for it, so use null" : "is a hole of a sparse array: JSON writes null for it, so use null",
      );
    }
    const f = walk(x, depth + 1);
    if (f !== undefined) {
      f.tokens.push(i);
      return f;
    }
  }
  return undefined;
}

function walkObject(o: Record<string, unknown>, depth: number): Failure | undefined {
  // A sealed value (see sealJsonSafe) is JSON-safe and frozen.
  if (marked(o)) return undefined;
  const proto: unknown = getPrototypeOf(o);
  if (proto !== OBJECT_PROTO && proto !== null) return fail(instanceMessage(o));
  const symbols = getOwnPropertySymbols(o);
  if (symbols.length > 0) return fail(`has a symbol key (Symbol(${quoted((symbols[0] as symbol).description ?? "")})), which JSON drops`);
  // for-in allocates nothing (V8's enum cache); it also lists enumerable keys of a polluted Object.prototype, skipped here.
  for (const k in o) {
    if (inheritedKeys && proto !== null && !hasOwn.call(o, k)) continue;
    const keyProblem = stringProblem(k);
    if (keyProblem !== undefined) return fail(`has a key ${quoted(k)} that ${keyProblem}`);
    // A getter (with or without a setter); a setter alone reads as undefined and is told apart below.
    if (lookupGetter.call(o, k) !== undefined) return failAt(k, ACCESSOR);
    const x = o[k];
    if (x === undefined) return failAt(k, lookupSetter.call(o, k) !== undefined ? ACCESSOR : UNDEFINED_PROPERTY);
    const f = walk(x, depth + 1);
    if (f !== undefined) {
      f.tokens.push(k);
      return f;
    }
  }
  return undefined;
}

const ACCESSOR = "is an accessor property (a getter or setter), not a data property";
const UNDEFINED_PROPERTY = "is undefined: JSON.stringify drops the property, so it would not read back; leave it out or use null";

function failAt(token: string | number, message: string): Failure {
  return { tokens: [token], message };
}

/**
 * Why a string breaks the string rule ("contains ..."): U+0000 or a lone
 * surrogate; undefined when it obeys it. The rule of every string a backend
 * stores as text, payload or not (ids and names of events included).
 */
export function stringProblem(s: string): string | undefined {
  if (s.indexOf("\u0000") !== -1) return "contains U+0000 (NUL), which no backend stores: remove it";
  if (!isWellFormed(s)) return "contains a lone surrogate (half of a UTF-16 pair), which is not valid Unicode: remove it";
  return undefined;
}

const nativeIsWellFormed = (String.prototype as { isWellFormed?: (this: string) => boolean }).isWellFormed;
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
const isWellFormed: (s: string) => boolean =
  nativeIsWellFormed === undefined ? (s) => !LONE_SURROGATE.test(s) : (s) => nativeIsWellFormed.call(s);

function numberMessage(n: number): string {
  if (Number.isNaN(n)) return "is NaN: only finite numbers are JSON-safe";
  return `is ${n > 0 ? "Infinity" : "-Infinity"}: only finite numbers are JSON-safe (a literal beyond ±1.8e308, such as 1e400, reads as Infinity)`;
}

function instanceMessage(v: object): string {
  if (v instanceof Date) return "is a Date, not a plain object: use an ISO string (date.toISOString())";
  let name: string | undefined;
  try {
    const ctor = (getPrototypeOf(v) as { constructor?: unknown } | null)?.constructor;
    if (typeof ctor === "function" && typeof ctor.name === "string" && ctor.name !== "") name = ctor.name;
  } catch {
    // a hostile prototype: fall through to the generic wording
  }
  const what = isArray(v) ? "an array" : "a plain object";
  return name === undefined
    ? `is not ${what}: its prototype is not ${isArray(v) ? "Array" : "Object"}.prototype`
    : `is an instance of ${quoted(name).slice(1, -1)}, not ${what}`;
}

/**
 * A string for a message, JSON-quoted and cut at 64 characters: U+0000 and
 * lone surrogates come out as escapes, so the message itself can be stored.
 */
function quoted(s: string): string {
  return JSON.stringify(s.length > 64 ? `${s.slice(0, 64)}...` : s);
}

// --- pointers and the slow path of a too-deep value -------------------------

/** RFC 6901 pointer of the first `n` tokens. */
function toPointer(tokens: readonly (string | number)[], n: number): string {
  let p = "";
  for (let i = 0; i < n; i++) {
    const t = tokens[i] as string | number;
    p += `/${typeof t === "number" ? t : t.replace(/~/g, "~0").replace(/\//g, "~1")}`;
  }
  return p;
}

/** A too-deep path: a cycle when a container on it is its own ancestor, else plain nesting. */
function tooDeep(root: unknown, tokens: readonly (string | number)[]): JsonSafeProblem {
  const ancestors: unknown[] = [];
  let node = root;
  for (let i = 0; i <= tokens.length; i++) {
    const at = ancestors.indexOf(node);
    if (at !== -1) {
      return {
        pointer: toPointer(tokens, i),
        message: `refers back to ${at === 0 ? "the root" : toPointer(tokens, at)} (a cycle), which JSON cannot hold`,
      };
    }
    ancestors.push(node);
    if (i < tokens.length) node = (node as Record<string | number, unknown>)[tokens[i] as string | number];
  }
  return { pointer: toPointer(tokens, tokens.length), message: `nests deeper than ${JSON_SAFE_MAX_DEPTH} arrays / objects` };
}

// --- sealed values ------------------------------------------------------------

/** A base class whose constructor returns the object it is given: see SealMark. */
// eslint-disable-next-line @typescript-eslint/no-extraneous-class -- the point: `new SealMark(o)` adds its private field to `o`
class Given {
  constructor(o: object) {
    return o;
  }
}

/**
 * The mark of a root that sealJsonSafe made: a private class field stamped on
 * the copy before the freeze (`new SealMark(copy)`). Nothing outside this
 * class can see it (not JSON, spreads, for-in, Object.getOwnPropertySymbols or
 * structuredClone), nor forge it; the prototype stays Object.prototype or
 * Array.prototype. Stamping costs about what a property write does (defining a
 * non-enumerable symbol property cost five to eight times as much), and the
 * check (`#sealed in o`) what a property read does.
 */
class SealMark extends Given {
  readonly #sealed = true;
  static on(o: object): boolean {
    return #sealed in o;
  }
}
const freeze = Object.freeze;
const defineProperty = Object.defineProperty;

/** True when `o` (an object) is a root that sealJsonSafe or trySealJsonSafe made. */
function marked(o: object): boolean {
  return SealMark.on(o);
}

/**
 * A deeply frozen copy of a JSON-safe `value` (call jsonSafeProblem first: this
 * does not check), marked as sealed so that later checks and copies of it are
 * skipped: a sealed value is shared, not copied.
 */
export function sealJsonSafe<T>(value: T): T {
  if (typeof value !== "object" || value === null) return plusZero(value);
  if (marked(value as object)) return value;
  const copy = copyFrozen(value as object);
  new SealMark(copy);
  return freeze(copy) as T;
}

/** True when `value` is an object or array sealJsonSafe returned: it is JSON-safe and cannot change. */
export function isSealedJsonSafe(value: unknown): boolean {
  return typeof value === "object" && value !== null && marked(value as object);
}

/** A deep copy, frozen below the root (the caller marks and freezes the root); sealed values inside are shared. */
function copyFrozen(v: object): object {
  if (isArray(v)) {
    const n = v.length;
    const out = new Array<unknown>(n);
    for (let i = 0; i < n; i++) {
      const x: unknown = v[i];
      out[i] = typeof x === "object" && x !== null ? frozenPart(x) : plusZero(x);
    }
    return out;
  }
  const out: Record<string, unknown> = {};
  const o = v as Record<string, unknown>;
  for (const k in o) {
    if (inheritedKeys && !hasOwn.call(o, k)) continue;
    const x = o[k];
    const y = typeof x === "object" && x !== null ? frozenPart(x) : plusZero(x);
    // An own "__proto__" key (JSON.parse makes one) must stay a property, not become the prototype.
    if (k === "__proto__") defineProperty(out, k, { value: y, enumerable: true, writable: true, configurable: true });
    else out[k] = y;
  }
  return out;
}

/** A primitive of a copy as a store reads it back: `-0` becomes `0` (JSON has no negative zero), the rest is unchanged. */
function plusZero<T>(x: T): T {
  return (x === 0 ? 0 : x) as T;
}

/** A nested value of a copy: a sealed one is deeply frozen already, so it is shared as it is. */
function frozenPart(x: object): object {
  return marked(x) ? x : freeze(copyFrozen(x));
}

// --- checked and sealed in one walk ---------------------------------------------

/** What sealWalk returns for a value that is not JSON-safe (the caller asks jsonSafeProblem why). */
const REFUSED: unique symbol = Symbol("mneme.refused");

/**
 * sealJsonSafe of `value` when it is JSON-safe, undefined when it is not (then
 * {@link jsonSafeProblem} tells why): the check and the copy in one walk, for
 * a value that is to be stored anyway. Accepts and refuses exactly what
 * jsonSafeProblem does.
 */
export function trySealJsonSafe<T>(value: T): T | undefined {
  return checkedCopy(value, true);
}

/**
 * As {@link trySealJsonSafe}, without the mark: a deeply frozen copy that a
 * later check walks again, for a copy kept where nothing checks it again.
 */
export function tryFreezeJsonSafe<T>(value: T): T | undefined {
  return checkedCopy(value, false);
}

function checkedCopy<T>(value: T, mark: boolean): T | undefined {
  if (typeof value !== "object" || value === null) return jsonSafeProblem(value) === undefined ? plusZero(value) : undefined;
  if (marked(value as object)) return value;
  inheritedKeys = hasEnumerableKeys(OBJECT_PROTO);
  const copy = isArray(value) ? sealArray(value, 0) : sealObject(value as Record<string, unknown>, 0);
  if (copy === REFUSED) return undefined;
  if (mark) new SealMark(copy);
  return freeze(copy) as T;
}

/** The copy of one value (frozen below the root), or REFUSED: the same rules as walk. */
function sealWalk(v: unknown, depth: number): unknown {
  switch (typeof v) {
    case "string":
      return stringProblem(v) === undefined ? v : REFUSED;
    case "number":
      // Finite, and -0 copied as 0 (v + 0 is v for every other number).
      return v - v === 0 ? v + 0 : REFUSED;
    case "boolean":
      return v;
    case "object": {
      if (v === null) return v;
      if (depth >= JSON_SAFE_MAX_DEPTH) return REFUSED;
      if (marked(v)) return v;
      const copy = isArray(v) ? sealArray(v, depth) : sealObject(v as Record<string, unknown>, depth);
      return copy === REFUSED ? REFUSED : freeze(copy);
    }
    default:
      return REFUSED;
  }
}

function sealArray(a: unknown[], depth: number): unknown[] | typeof REFUSED {
  if (getPrototypeOf(a) !== ARRAY_PROTO) return REFUSED;
  const n = a.length;
  const out = new Array<unknown>(n);
  for (let i = 0; i < n; i++) {
    const x = a[i];
    if (x === undefined) return REFUSED;
    const y = sealWalk(x, depth + 1);
    if (y === REFUSED) return REFUSED;
    out[i] = y;
  }
  return out;
}

function sealObject(o: Record<string, unknown>, depth: number): Record<string, unknown> | typeof REFUSED {
  const proto: unknown = getPrototypeOf(o);
  if (proto !== OBJECT_PROTO && proto !== null) return REFUSED;
  if (getOwnPropertySymbols(o).length > 0) return REFUSED;
  const out: Record<string, unknown> = {};
  for (const k in o) {
    if (inheritedKeys && proto !== null && !hasOwn.call(o, k)) continue;
    if (stringProblem(k) !== undefined || lookupGetter.call(o, k) !== undefined) return REFUSED;
    const x = o[k];
    if (x === undefined) return REFUSED;
    const y = sealWalk(x, depth + 1);
    if (y === REFUSED) return REFUSED;
    // An own "__proto__" key (JSON.parse makes one) must stay a property, not become the prototype.
    if (k === "__proto__") defineProperty(out, k, { value: y, enumerable: true, writable: true, configurable: true });
    else out[k] = y;
  }
  return out;
}
