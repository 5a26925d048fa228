import { MnemeError } from "../model/errors.js";
import { nowNs } from "../model/clock.js";
import { validateNewLogEntry } from "../store/log-entry-validation.js";
import type { LogEntry, LogLevel, LogStore, NewLogEntry } from "../store/log-store.js";
import { decodeCursor, encodeCursor, pageLimit } from "../store/paging.js";
import type { PageRequest, StoreInfo, StorePage } from "../store/store-info.js";
import { MemoryStoreBase } from "./memory-store-base.js";

/**
 * The in-memory LogStore: entries get increasing ids (never reused, also after
 * a delete) and are listed oldest first. `level` filters by exact level.
 */
export class MemoryLogStore extends MemoryStoreBase implements LogStore {
  /** In id order; entries are private and frozen, `data` is kept as JSON. */
  private readonly entries: { entry: LogEntry; dataJson: string | undefined }[] = [];
  private lastId = 0;
  async append(input: NewLogEntry): Promise<LogEntry> {
    this.assertOpen();
    const dataJson = validateNewLogEntry(input);
    const entry: LogEntry = { id: ++this.lastId, createdAt: nowNs(), level: input.level, message: input.message };
    if (input.source !== undefined) entry.source = input.source;
    if (input.tenantUuid !== undefined) entry.tenantUuid = input.tenantUuid;
    this.entries.push({ entry: Object.freeze(entry), dataJson });
    return materialise(entry, dataJson);
  }

  async list(opts: PageRequest & { level?: LogLevel; source?: string; tenantUuid?: string } = {}): Promise<StorePage<LogEntry>> {
    this.assertOpen();
    const limit = pageLimit(opts.limit);
    const afterId = opts.cursor === undefined ? 0 : (decodeCursor(opts.cursor, ["number"])[0] as number);
    const items: LogEntry[] = [];
    for (let i = firstAfter(this.entries, afterId); i < this.entries.length; i++) {
      const { entry, dataJson } = this.entries[i] as (typeof this.entries)[number];
      if (opts.level !== undefined && entry.level !== opts.level) continue;
      if (opts.source !== undefined && entry.source !== opts.source) continue;
      if (opts.tenantUuid !== undefined && entry.tenantUuid !== opts.tenantUuid) continue;
      if (items.length === limit) return { items, nextCursor: encodeCursor([(items[items.length - 1] as LogEntry).id]) };
      items.push(materialise(entry, dataJson));
    }
    return { items };
  }

  /** See LogStore.deleteBefore. */
  async deleteBefore(createdAt: number): Promise<number> {
    this.assertOpen();
    checkCreatedAt(createdAt);
    let n = 0;
    for (let i = this.entries.length - 1; i >= 0; i--) {
      if (this.entries[i]!.entry.createdAt < createdAt) {
        this.entries.splice(i, 1);
        n++;
      }
    }
    return n;
  }

  async delete(id: number): Promise<boolean> {
    this.assertOpen();
    const i = firstAfter(this.entries, id - 1);
    if (this.entries[i]?.entry.id !== id) return false;
    this.entries.splice(i, 1);
    return true;
  }

  async info(): Promise<StoreInfo> {
    this.assertOpen();
    const last = this.entries[this.entries.length - 1];
    return { storeType: "memory", numItems: this.entries.length, lastItemCreatedAt: last?.entry.createdAt ?? 0, connectionInfo: "memory" };
  }
}

function materialise(entry: LogEntry, dataJson: string | undefined): LogEntry {
  const out: LogEntry = { ...entry };
  if (dataJson !== undefined) out.data = JSON.parse(dataJson) as Record<string, unknown>;
  return out;
}

/** Index of the first entry with an id greater than `id`. */
function firstAfter(entries: readonly { entry: LogEntry }[], id: number): number {
  let lo = 0;
  let hi = entries.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if ((entries[mid] as { entry: LogEntry }).entry.id <= id) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

function checkCreatedAt(createdAt: number): void {
  if (typeof createdAt !== "number" || !Number.isFinite(createdAt)) {
    throw new MnemeError("INVALID_REQUEST", `deleteBefore: createdAt must be a finite number (ns), got ${String(createdAt)}`);
  }
}
