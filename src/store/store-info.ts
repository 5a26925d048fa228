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

/** Keyset paging: an opaque cursor from the previous page and a limit (default 100, max 1000). */
export interface PageRequest {
  cursor?: string;
  limit?: number;
}

export const DEFAULT_PAGE_LIMIT = 100;
export const MAX_PAGE_LIMIT = 1000;
