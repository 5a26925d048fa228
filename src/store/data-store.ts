import type { PageRequest, StoreInfo, StorePage } from "./store-info.js";

export interface DataEntryInfo {
  key: string;
  size: number;
  contentType: string;
  /** ns since the epoch. */
  createdAt: number;
  updatedAt: number;
}

export interface DataEntry extends DataEntryInfo {
  data: Uint8Array;
}

/**
 * The DataStore: blobs by key. Keys are non-empty, at most 1024 characters,
 * without NUL or ".." (else INVALID_REQUEST). Listing is in key order. Default
 * content types: `text/plain; charset=utf-8` for strings,
 * `application/octet-stream` for bytes. An overwrite keeps `createdAt`.
 */
export interface DataStore {
  init(): Promise<void>;
  put(key: string, data: Uint8Array | string, opts?: { contentType?: string }): Promise<DataEntryInfo>;
  get(key: string): Promise<DataEntry | undefined>;
  delete(key: string): Promise<boolean>;
  list(opts?: PageRequest & { prefix?: string }): Promise<StorePage<DataEntryInfo>>;
  info(): Promise<StoreInfo>;
  close(): Promise<void>;
}
