/** What every store reports about itself (runtime `stores.info`, `systemInfo`). */
export interface StoreInfo {
  /** e.g. "memory", "sqlite", "postgres", "filesystem". */
  storeType: string;
  numItems: number;
  /** createdAt (ns) of the newest item; 0 when empty. */
  lastItemCreatedAt: number;
  /** Where the data lives, without secrets (no password in a connection string). */
  connectionInfo: string;
}

/** A page of a store listing: `nextCursor` is absent on the last page. */
export interface StorePage<T> {
  items: T[];
  nextCursor?: string;
}

/**
 * Keyset paging: an opaque cursor from the previous page and a limit (default
 * 100; above 1000 it is capped at 1000; below 1, not an integer, or a
 * malformed cursor: INVALID_REQUEST). Every page but the last is full; the
 * last page has no `nextCursor`, also when it is full.
 *
 * Every store (checked by the conformance suites in `mneme/testing`): a call
 * after `close()` rejects with STORE_CLOSED, `close()` may be called twice,
 * and errors come back as rejected promises, never as synchronous throws.
 */
export interface PageRequest {
  cursor?: string;
  limit?: number;
}

export const DEFAULT_PAGE_LIMIT = 100;
export const MAX_PAGE_LIMIT = 1000;
