import { MnemeError } from "../model/errors.js";
import type { PageRequest, StoreInfo, StorePage } from "./store-info.js";

export interface CacheEntry<T = unknown> {
  key: string;
  value: T;
  /** ms since the epoch, or undefined for no expiry. */
  expiresAt?: number;
  createdAt: number;
}

/**
 * The CacheStore: JSON values by key with an optional TTL (`ttlMs` > 0).
 * Expired entries are never returned; values must be JSON-serialisable;
 * `CacheEntry.createdAt` is in nanoseconds.
 */
export interface CacheStore {
  init(): Promise<void>;
  get<T = unknown>(key: string): Promise<T | undefined>;
  set<T = unknown>(key: string, value: T, opts?: { ttlMs?: number }): Promise<void>;
  /**
   * Adds `by` (a safe integer) to the integer at `key` in one atomic step and
   * resolves the new value, so concurrent increments from any number of
   * connections or instances sum exactly. An absent or expired entry starts
   * from 0 and takes `ttlMs` as its expiry; a live one keeps its expiry.
   * INVALID_REQUEST when the live value is not an integer.
   */
  increment(key: string, by: number, opts?: { ttlMs?: number }): Promise<number>;
  delete(key: string): Promise<boolean>;
  list(opts?: PageRequest & { prefix?: string }): Promise<StorePage<CacheEntry>>;
  clear(): Promise<void>;
  info(): Promise<StoreInfo>;
  close(): Promise<void>;
}

/**
 * Checks a CacheStore key: a non-empty string without NUL or lone surrogates
 * (so it reads back the same from every backend); else INVALID_REQUEST.
 */
export function assertCacheKey(key: unknown): asserts key is string {
  if (typeof key !== "string" || key === "") throw new MnemeError("INVALID_REQUEST", "a cache key must be a non-empty string");
  if (key.includes("\0")) throw new MnemeError("INVALID_REQUEST", "a cache key must not contain NUL");
  if (LONE_SURROGATE.test(key)) throw new MnemeError("INVALID_REQUEST", "a cache key must be well-formed Unicode (no lone surrogate)");
}

/** Matches a lone surrogate (a paired one is one code point under the u flag). */
const LONE_SURROGATE = /\p{Cs}/u;

/**
 * Normalises increment()'s arguments for every backend alike: the step (a
 * safe integer, else INVALID_REQUEST) and the expiry a new entry takes (as
 * {@link cacheEntryToStore}).
 */
export function cacheIncrementToStore(
  key: unknown,
  by: unknown,
  opts: { ttlMs?: number } | undefined,
  now: number,
): { key: string; by: number; expiresAt: number | undefined } {
  if (typeof by !== "number" || !Number.isSafeInteger(by)) {
    throw new MnemeError("INVALID_REQUEST", `a cache increment must be a safe integer, got ${String(by)}`);
  }
  const e = cacheEntryToStore(key, by, opts, now);
  return { key: e.key, by, expiresAt: e.expiresAt };
}

/** The error of increment() on a live entry whose value is not an integer. */
export function notAnIntegerEntry(key: string): MnemeError {
  return new MnemeError("INVALID_REQUEST", `the cache entry ${key} does not hold an integer, so it cannot be incremented`);
}

/**
 * Normalises set()'s arguments for every backend alike: the value as JSON
 * text (INVALID_REQUEST when it has none) and the expiry (ms since the epoch,
 * from `now`; undefined without a ttl; INVALID_REQUEST for a ttl that is not a
 * positive number).
 */
export function cacheEntryToStore(
  key: unknown,
  value: unknown,
  opts: { ttlMs?: number } | undefined,
  now: number,
): { key: string; json: string; expiresAt: number | undefined } {
  assertCacheKey(key);
  const ttl = opts?.ttlMs;
  if (ttl !== undefined && (typeof ttl !== "number" || !Number.isFinite(ttl) || ttl <= 0)) {
    throw new MnemeError("INVALID_REQUEST", `ttlMs must be a positive number, got ${String(ttl)}`);
  }
  let json: string | undefined;
  try {
    json = JSON.stringify(value);
  } catch (e) {
    throw new MnemeError("INVALID_REQUEST", `cache value for ${key} is not JSON-serialisable`, { cause: e });
  }
  if (json === undefined) throw new MnemeError("INVALID_REQUEST", `cache value for ${key} is not JSON-serialisable`);
  return { key, json, expiresAt: ttl === undefined ? undefined : now + ttl };
}
