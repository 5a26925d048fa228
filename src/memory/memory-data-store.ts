import { nowNs } from "../model/clock.js";
import { memoryStoreInfo } from "./memory-store-info.js";
import type { DataEntry, DataEntryInfo, DataStore } from "../store/data-store.js";
import { encodeCursor, keyPage } from "../store/paging.js";
import type { PageRequest, StoreInfo, StorePage } from "../store/store-info.js";
import { assertDataKey, dataToStore } from "../store/data-key.js";
import { storeClosed } from "../store/store-closed.js";

/**
 * The in-memory DataStore: blobs by key. Bytes are copied on the way in and out,
 * so a caller's array never aliases stored data. A string is stored as UTF-8
 * with content type "text/plain; charset=utf-8", bytes default to
 * "application/octet-stream".
 */
export class MemoryDataStore implements DataStore {
  private readonly entries = new Map<string, DataEntry>();
  /** Keys in order, rebuilt lazily after inserts and deletes. */
  private sortedKeys: string[] | undefined = [];
  private closed = false;

  async init(): Promise<void> {
    this.assertOpen();
  }

  async put(key: string, data: Uint8Array | string, opts?: { contentType?: string }): Promise<DataEntryInfo> {
    this.assertOpen();
    assertDataKey(key);
    const { bytes, contentType } = dataToStore(data, opts?.contentType);
    const now = nowNs();
    const prev = this.entries.get(key);
    const entry: DataEntry = { key, size: bytes.byteLength, contentType, createdAt: prev?.createdAt ?? now, updatedAt: now, data: bytes };
    if (prev === undefined) this.sortedKeys = undefined;
    this.entries.set(key, entry);
    return infoOf(entry);
  }

  async get(key: string): Promise<DataEntry | undefined> {
    this.assertOpen();
    assertDataKey(key);
    const e = this.entries.get(key);
    return e === undefined ? undefined : { ...infoOf(e), data: e.data.slice() };
  }

  async delete(key: string): Promise<boolean> {
    this.assertOpen();
    assertDataKey(key);
    const had = this.entries.delete(key);
    if (had) this.sortedKeys = undefined;
    return had;
  }

  async list(opts: PageRequest & { prefix?: string } = {}): Promise<StorePage<DataEntryInfo>> {
    this.assertOpen();
    const { limit, after, prefix } = keyPage(opts);
    const keys = this.keys();
    // Start at the first key after the cursor, or at the prefix.
    const from = after !== undefined && after >= prefix ? after : prefix;
    let i = lowerBound(keys, from);
    if (after !== undefined && keys[i] === after) i++;
    const items: DataEntryInfo[] = [];
    for (; i < keys.length; i++) {
      const k = keys[i] as string;
      if (!k.startsWith(prefix)) break;
      if (items.length === limit) return { items, nextCursor: encodeCursor([(items[items.length - 1] as DataEntryInfo).key]) };
      items.push(infoOf(this.entries.get(k) as DataEntry));
    }
    return { items };
  }

  async info(): Promise<StoreInfo> {
    this.assertOpen();
    return memoryStoreInfo(this.entries.values(), this.entries.size);
  }

  async close(): Promise<void> {
    this.closed = true;
  }

  private keys(): string[] {
    // Code-unit order, the same order as `<` on strings.
    this.sortedKeys ??= [...this.entries.keys()].sort();
    return this.sortedKeys;
  }

  private assertOpen(): void {
    if (this.closed) throw storeClosed("MemoryDataStore");
  }
}

function infoOf(e: DataEntryInfo): DataEntryInfo {
  return { key: e.key, size: e.size, contentType: e.contentType, createdAt: e.createdAt, updatedAt: e.updatedAt };
}

function lowerBound(keys: readonly string[], k: string): number {
  let lo = 0;
  let hi = keys.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if ((keys[mid] as string) < k) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}
