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
  delete(key: string): Promise<boolean>;
  list(opts?: PageRequest & { prefix?: string }): Promise<StorePage<CacheEntry>>;
  clear(): Promise<void>;
  info(): Promise<StoreInfo>;
  close(): Promise<void>;
}
