import { nowNs } from "../model/clock.js";
import { memoryStoreInfo } from "./memory-store-info.js";
import { assertCacheKey, cacheEntryToStore, cacheIncrementToStore, notAnIntegerEntry } from "../store/cache-store.js";
import type { CacheEntry, CacheStore } from "../store/cache-store.js";
import { encodeCursor, keyPage } from "../store/paging.js";
import type { PageRequest, StoreInfo, StorePage } from "../store/store-info.js";
import { storeClosed } from "../store/store-closed.js";

interface Slot {
  /** The value as JSON: a copy nobody else holds, like Redis would keep. */
  json: string;
  /** ms since the epoch; undefined: no expiry. */
  expiresAt: number | undefined;
  /** ns since the epoch. */
  createdAt: number;
}

/** Expired entries are dropped lazily on access and by a sweep every this many sets. */
const SWEEP_EVERY = 1000;

/**
 * The in-memory CacheStore: JSON values by key with an optional TTL (ms).
 * Values are serialised on set, so later changes to the caller's object do not
 * leak in; expired entries are never returned.
 */
export class MemoryCacheStore implements CacheStore {
  private readonly slots = new Map<string, Slot>();
  private setsSinceSweep = 0;
  private closed = false;

  async init(): Promise<void> {
    this.assertOpen();
  }

  async get<T = unknown>(key: string): Promise<T | undefined> {
    this.assertOpen();
    assertCacheKey(key);
    const s = this.live(key, Date.now());
    return s === undefined ? undefined : (JSON.parse(s.json) as T);
  }

  async set<T = unknown>(key: string, value: T, opts?: { ttlMs?: number }): Promise<void> {
    this.assertOpen();
    const e = cacheEntryToStore(key, value, opts, Date.now());
    this.slots.set(e.key, { json: e.json, expiresAt: e.expiresAt, createdAt: nowNs() });
    if (++this.setsSinceSweep >= SWEEP_EVERY) this.sweep(Date.now());
  }

  async increment(key: string, by: number, opts?: { ttlMs?: number }): Promise<number> {
    this.assertOpen();
    const now = Date.now();
    const e = cacheIncrementToStore(key, by, opts, now);
    const s = this.live(e.key, now);
    if (s === undefined) {
      this.slots.set(e.key, { json: String(e.by), expiresAt: e.expiresAt, createdAt: nowNs() });
      if (++this.setsSinceSweep >= SWEEP_EVERY) this.sweep(now);
      return e.by;
    }
    const value: unknown = JSON.parse(s.json);
    if (!Number.isSafeInteger(value)) throw notAnIntegerEntry(e.key);
    const next = (value as number) + e.by;
    s.json = String(next);
    return next;
  }

  async delete(key: string): Promise<boolean> {
    this.assertOpen();
    assertCacheKey(key);
    const live = this.live(key, Date.now()) !== undefined;
    this.slots.delete(key);
    return live;
  }

  async list(opts: PageRequest & { prefix?: string } = {}): Promise<StorePage<CacheEntry>> {
    this.assertOpen();
    const { limit, after, prefix } = keyPage(opts);
    const now = Date.now();
    this.sweep(now);
    const keys = [...this.slots.keys()].filter((k) => k.startsWith(prefix) && (after === undefined || k > after)).sort();
    const items: CacheEntry[] = [];
    for (const k of keys) {
      if (items.length === limit) return { items, nextCursor: encodeCursor([(items[items.length - 1] as CacheEntry).key]) };
      const s = this.slots.get(k) as Slot;
      const entry: CacheEntry = { key: k, value: JSON.parse(s.json) as unknown, createdAt: s.createdAt };
      if (s.expiresAt !== undefined) entry.expiresAt = s.expiresAt;
      items.push(entry);
    }
    return { items };
  }

  async clear(): Promise<void> {
    this.assertOpen();
    this.slots.clear();
  }

  async info(): Promise<StoreInfo> {
    this.assertOpen();
    this.sweep(Date.now());
    return memoryStoreInfo(this.slots.values(), this.slots.size);
  }

  async close(): Promise<void> {
    this.closed = true;
    this.slots.clear();
  }

  private live(key: string, now: number): Slot | undefined {
    const s = this.slots.get(key);
    if (s === undefined) return undefined;
    if (s.expiresAt !== undefined && s.expiresAt <= now) {
      this.slots.delete(key);
      return undefined;
    }
    return s;
  }

  private sweep(now: number): void {
    this.setsSinceSweep = 0;
    for (const [k, s] of this.slots) if (s.expiresAt !== undefined && s.expiresAt <= now) this.slots.delete(k);
  }

  private assertOpen(): void {
    if (this.closed) throw storeClosed("MemoryCacheStore");
  }
}
