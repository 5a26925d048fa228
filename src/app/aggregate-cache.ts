import type { AggregateType } from "../model/tokens.js";

/** Options of the aggregate cache (`createFacade({ aggregateCache })`). */
export interface AggregateCacheOptions {
  /** How many aggregates (uuids) it keeps, least recently used out first. Default 10,000. */
  readonly maxAggregates?: number;
}

/** What the Runtime and the benches read of the cache. */
export interface AggregateCacheStats {
  readonly size: number;
  readonly maxAggregates: number;
  readonly hits: number;
  readonly misses: number;
  /** Aggregate types whose state cannot be copied (class instances, functions): folded in full on every load. */
  readonly uncacheableTypes: readonly string[];
}

interface Entry {
  readonly state: unknown;
  readonly version: number;
  /** The tenant of the aggregate's first event: the tenant check needs no event. */
  readonly tenantUuid: string;
}

/** Thrown by copyState for a state the cache cannot copy faithfully (caught in set, never escapes). */
class NotCopyable extends Error {}
const NOT_COPYABLE = new NotCopyable("aggregate state cannot be copied");

/**
 * The in-process cache of folded aggregate state: per aggregate uuid and
 * aggregate type, the state at a version and the tenant of the first event.
 * A load folds only the events after the cached version, so it stays correct
 * when another process appended. Entries are private copies: a handler that
 * mutates what it loaded, or an evolve that mutates its state in place,
 * never changes the cache. States the cache cannot copy faithfully (class
 * instances, functions) turn caching off for their aggregate type.
 * Bounded and least recently used out first.
 */
export class AggregateCache {
  readonly maxAggregates: number;
  /** Aggregate uuid -> (type key -> entry); Map order is the recency order. */
  readonly #byUuid = new Map<string, Map<string, Entry>>();
  readonly #uncacheable = new Set<string>();
  #hits = 0;
  #misses = 0;

  constructor(opts: AggregateCacheOptions = {}) {
    const max = opts.maxAggregates ?? 10_000;
    if (!Number.isSafeInteger(max) || max < 1)
      throw new RangeError(`aggregateCache.maxAggregates must be a positive integer, got ${String(max)}`);
    this.maxAggregates = max;
  }

  /** False for a type whose state could not be copied: load it without the cache. */
  accepts(type: AggregateType<any>): boolean {
    return this.#uncacheable.size === 0 || !this.#uncacheable.has(typeKey(type));
  }

  /** A private copy of the cached state, its version and tenant; undefined on a miss. */
  get<S>(type: AggregateType<S>, aggregateUuid: string): { state: S; version: number; tenantUuid: string } | undefined {
    const types = this.#byUuid.get(aggregateUuid);
    const entry = types?.get(typeKey(type));
    if (entry === undefined) {
      this.#misses++;
      return undefined;
    }
    this.#hits++;
    // Most recently used goes last.
    this.#byUuid.delete(aggregateUuid);
    this.#byUuid.set(aggregateUuid, types!);
    return { state: copyCached(entry.state) as S, version: entry.version, tenantUuid: entry.tenantUuid };
  }

  /**
   * Keeps a copy of `state` at `version` unless a newer one is cached. A
   * state that cannot be copied turns caching off for its type.
   */
  set(type: AggregateType<any>, aggregateUuid: string, state: unknown, version: number, tenantUuid: string): void {
    const key = typeKey(type);
    if (this.#uncacheable.has(key)) return;
    let types = this.#byUuid.get(aggregateUuid);
    const current = types?.get(key);
    // Checked before copying: a state no newer than the cached one is not copied at all.
    if (current !== undefined && current.version >= version) return;
    let copy: unknown;
    try {
      copy = copyState(state);
    } catch (e) {
      if (e !== NOT_COPYABLE) throw e;
      this.#uncacheable.add(key);
      for (const types of this.#byUuid.values()) types.delete(key);
      return;
    }
    if (types === undefined) types = new Map();
    else this.#byUuid.delete(aggregateUuid);
    types.set(key, { state: copy, version, tenantUuid });
    this.#byUuid.set(aggregateUuid, types);
    if (this.#byUuid.size > this.maxAggregates) {
      const oldest = this.#byUuid.keys().next().value as string;
      this.#byUuid.delete(oldest);
    }
  }

  /** Forgets every type's entry of an aggregate (after a CONFLICT on it, for instance). */
  invalidate(aggregateUuid: string): void {
    this.#byUuid.delete(aggregateUuid);
  }

  /** Forgets everything. */
  clear(): void {
    this.#byUuid.clear();
  }

  stats(): AggregateCacheStats {
    return {
      size: this.#byUuid.size,
      maxAggregates: this.maxAggregates,
      hits: this.#hits,
      misses: this.#misses,
      uncacheableTypes: [...this.#uncacheable],
    };
  }
}

/** "Domain.Name" per aggregate type, made once (not a new string to hash on every load). */
const TYPE_KEYS = new WeakMap<AggregateType<any>, string>();
function typeKey(type: AggregateType<any>): string {
  let key = TYPE_KEYS.get(type);
  if (key === undefined) TYPE_KEYS.set(type, (key = `${type.domain}.${type.name}`));
  return key;
}

/**
 * A deep copy of an aggregate state made of plain objects, arrays, Map, Set,
 * Date and primitives, keeping shared references and cycles as they are;
 * throws NOT_COPYABLE for anything else (a class instance, a function, a
 * symbol, an accessor or non-enumerable property, a sparse array), whose copy
 * would not behave like the original.
 */
function copyState(v: unknown): unknown {
  if (typeof v !== "object" || v === null) {
    if (typeof v === "function" || typeof v === "symbol") throw NOT_COPYABLE;
    return v;
  }
  return copyObject(v, new Seen());
}

/** The copies made so far (shared references and cycles stay so): a Map only once there is more than the root. */
class Seen {
  #root: object | undefined;
  #rootCopy: unknown;
  #more: Map<object, unknown> | undefined;

  get(v: object): unknown {
    return v === this.#root ? this.#rootCopy : this.#more?.get(v);
  }

  set(v: object, copy: unknown): void {
    if (this.#root === undefined) {
      this.#root = v;
      this.#rootCopy = copy;
    } else {
      (this.#more ??= new Map()).set(v, copy);
    }
  }
}

function copyValue(v: unknown, seen: Seen): unknown {
  if (typeof v !== "object" || v === null) {
    if (typeof v === "function" || typeof v === "symbol") throw NOT_COPYABLE;
    return v;
  }
  const done = seen.get(v);
  return done !== undefined ? done : copyObject(v, seen);
}

const propertyIsEnumerable = Object.prototype.propertyIsEnumerable;
const lookupGetter = (Object.prototype as unknown as { __lookupGetter__(key: string): unknown }).__lookupGetter__;
const lookupSetter = (Object.prototype as unknown as { __lookupSetter__(key: string): unknown }).__lookupSetter__;

/** True for an own property that is not a plain enumerable data property (its copy would not behave alike). */
function isSpecial(v: object, k: string): boolean {
  return !propertyIsEnumerable.call(v, k) || lookupGetter.call(v, k) !== undefined || lookupSetter.call(v, k) !== undefined;
}

function copyObject(v: object, seen: Seen): unknown {
  const proto: unknown = Object.getPrototypeOf(v);
  if (proto === Array.prototype) {
    const a = v as unknown[];
    const out = new Array<unknown>(a.length);
    seen.set(v, out);
    for (let i = 0; i < a.length; i++) {
      if (!(i in a)) throw NOT_COPYABLE;
      out[i] = copyValue(a[i], seen);
    }
    return out;
  }
  if (proto === Object.prototype || proto === null) {
    if (Object.getOwnPropertySymbols(v).length > 0) throw NOT_COPYABLE;
    const out: Record<string, unknown> = proto === null ? (Object.create(null) as Record<string, unknown>) : {};
    seen.set(v, out);
    // No descriptor objects: every key of every copy passes here.
    for (const k of Object.getOwnPropertyNames(v)) {
      if (isSpecial(v, k)) throw NOT_COPYABLE;
      const y = copyValue((v as Record<string, unknown>)[k], seen);
      if (k === "__proto__") Object.defineProperty(out, k, { value: y, enumerable: true, writable: true, configurable: true });
      else out[k] = y;
    }
    return out;
  }
  if (proto === Map.prototype) {
    const out = new Map<unknown, unknown>();
    seen.set(v, out);
    for (const [k, x] of v as Map<unknown, unknown>) out.set(copyValue(k, seen), copyValue(x, seen));
    return out;
  }
  if (proto === Set.prototype) {
    const out = new Set<unknown>();
    seen.set(v, out);
    for (const x of v as Set<unknown>) out.add(copyValue(x, seen));
    return out;
  }
  if (proto === Date.prototype) {
    const out = new Date((v as Date).getTime());
    seen.set(v, out);
    return out;
  }
  throw NOT_COPYABLE;
}

/**
 * A copy of a cached state, which copyState made: only plain objects
 * (enumerable data properties, no symbols), dense arrays, Map, Set, Date and
 * primitives, so nothing needs checking again; shared references and cycles
 * stay so.
 */
function copyCached(v: unknown): unknown {
  if (typeof v !== "object" || v === null) return v;
  // A polluted Object.prototype adds its enumerable keys to for-in: only own keys are copied then.
  return copyTrusted(v, new Seen(), hasEnumerableKeys(Object.prototype));
}

function hasEnumerableKeys(o: object): boolean {
  for (const _ in o) return true;
  return false;
}

function copyTrusted(v: object, seen: Seen, inherited: boolean): unknown {
  const proto: unknown = Object.getPrototypeOf(v);
  if (proto !== Object.prototype && proto !== null)
    return proto === Array.prototype ? copyTrustedArray(v as unknown[], seen, inherited) : copyObject(v, seen);
  const o = v as Record<string, unknown>;
  const out: Record<string, unknown> = proto === null ? (Object.create(null) as Record<string, unknown>) : {};
  seen.set(v, out);
  for (const k in o) {
    if (inherited && !Object.hasOwn(o, k)) continue;
    const x = o[k];
    const y = typeof x === "object" && x !== null ? (seen.get(x) ?? copyTrusted(x, seen, inherited)) : x;
    if (k === "__proto__") Object.defineProperty(out, k, { value: y, enumerable: true, writable: true, configurable: true });
    else out[k] = y;
  }
  return out;
}

function copyTrustedArray(a: unknown[], seen: Seen, inherited: boolean): unknown[] {
  const out = new Array<unknown>(a.length);
  seen.set(a, out);
  for (let i = 0; i < a.length; i++) {
    const x = a[i];
    out[i] = typeof x === "object" && x !== null ? (seen.get(x) ?? copyTrusted(x, seen, inherited)) : x;
  }
  return out;
}
