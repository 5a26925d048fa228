import type { PageRequest, StoreInfo, StorePage } from "./store-info.js";

export type LogLevel = "debug" | "info" | "warn" | "error";

export interface NewLogEntry {
  level: LogLevel;
  message: string;
  source?: string;
  tenantUuid?: string;
  data?: Record<string, unknown>;
}

export interface LogEntry extends NewLogEntry {
  /** Increasing id assigned by the store. */
  id: number;
  /** ns since the epoch. */
  createdAt: number;
}

/**
 * The LogStore: structured log entries. Listing is in id order (oldest first);
 * the `level` filter is an exact match; ids are never reused after a delete.
 */
export interface LogStore {
  init(): Promise<void>;
  append(entry: NewLogEntry): Promise<LogEntry>;
  list(opts?: PageRequest & { level?: LogLevel; source?: string; tenantUuid?: string }): Promise<StorePage<LogEntry>>;
  delete(id: number): Promise<boolean>;
  /**
   * Optional: deletes every entry created before `createdAt` (ns since the
   * epoch) in one statement and resolves how many (the LogStore's retention,
   * see docs/operations.md). Without it the retention job deletes them one by one.
   */
  deleteBefore?(createdAt: number): Promise<number>;
  info(): Promise<StoreInfo>;
  close(): Promise<void>;
}
