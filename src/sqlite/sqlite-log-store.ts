import { nowNs } from "../model/clock.js";
import { MnemeError } from "../model/errors.js";
import { isLogLevel, validateNewLogEntry } from "../store/log-entry-validation.js";
import type { LogEntry, LogLevel, LogStore, NewLogEntry } from "../store/log-store.js";
import { decodeCursor, encodeCursor, pageLimit, stringFilters } from "../store/paging.js";
import type { PageRequest, StoreInfo, StorePage } from "../store/store-info.js";
import { toStoreError } from "./sqlite-errors.js";
import { SqliteStoreBase } from "./sqlite-store-base.js";

type LogRow = [number, string, string, string | null, string | null, string | null, number];

/** The LogStore in one SQLite table; ids are an AUTOINCREMENT rowid (never reused, also after a delete), listing is keyset by id. */
export class SqliteLogStore extends SqliteStoreBase implements LogStore {
  private readonly table = `${this.prefix}logs`;

  protected createTables(): void {
    this.db.exec(`
      CREATE TABLE IF NOT EXISTS ${this.table} (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        level TEXT NOT NULL,
        message TEXT NOT NULL,
        source TEXT,
        tenant_uuid TEXT,
        data TEXT,
        created_at INTEGER NOT NULL
      );
    `);
  }

  async append(entry: NewLogEntry): Promise<LogEntry> {
    const dataJson = validateNewLogEntry(entry) ?? null;
    const createdAt = nowNs();
    let id: number;
    try {
      const info = this.ready()
        .statement(`INSERT INTO ${this.table} (level, message, source, tenant_uuid, data, created_at) VALUES (?, ?, ?, ?, ?, ?)`)
        .run(entry.level, entry.message, entry.source ?? null, entry.tenantUuid ?? null, dataJson, createdAt);
      id = Number(info.lastInsertRowid);
    } catch (e) {
      throw toStoreError(e, "append");
    }
    return toEntry([id, entry.level, entry.message, entry.source ?? null, entry.tenantUuid ?? null, dataJson, createdAt]);
  }

  async list(opts: PageRequest & { level?: LogLevel; source?: string; tenantUuid?: string } = {}): Promise<StorePage<LogEntry>> {
    const limit = pageLimit(opts.limit);
    const after = decodeCursor(opts.cursor, ["number"]);
    const where = ["id > ?"];
    const params: unknown[] = [after?.[0] ?? 0];
    if (opts.level !== undefined) {
      if (!isLogLevel(opts.level)) throw new MnemeError("INVALID_REQUEST", "list: level must be one of debug, info, warn, error");
      where.push("level = ?");
      params.push(opts.level);
    }
    for (const [column, value] of stringFilters(opts, [
      ["source", "source"],
      ["tenantUuid", "tenant_uuid"],
    ])) {
      where.push(`${column} = ?`);
      params.push(value);
    }
    let rows: LogRow[];
    try {
      rows = this.ready()
        .rawStatement(
          `SELECT id, level, message, source, tenant_uuid, data, created_at FROM ${this.table} WHERE ${where.join(" AND ")} ORDER BY id LIMIT ?`,
        )
        .all(...params, limit + 1) as LogRow[];
    } catch (e) {
      throw toStoreError(e, "list");
    }
    const items = rows.slice(0, limit).map(toEntry);
    const last = items[items.length - 1];
    return rows.length > limit && last !== undefined ? { items, nextCursor: encodeCursor([last.id]) } : { items };
  }

  /** See LogStore.deleteBefore. */
  async deleteBefore(createdAt: number): Promise<number> {
    if (typeof createdAt !== "number" || !Number.isFinite(createdAt)) {
      throw new MnemeError("INVALID_REQUEST", `deleteBefore: createdAt must be a finite number (ns), got ${String(createdAt)}`);
    }
    return this.change("deleteBefore", `DELETE FROM ${this.table} WHERE created_at < ?`, createdAt);
  }

  async delete(id: number): Promise<boolean> {
    if (!Number.isInteger(id)) throw new MnemeError("INVALID_REQUEST", `delete: id must be an integer, got ${String(id)}`);
    return this.change("delete", `DELETE FROM ${this.table} WHERE id = ?`, id) > 0;
  }

  async info(): Promise<StoreInfo> {
    return this.tableInfo(this.table, "info", { newestBy: "id" });
  }
}

function toEntry(r: LogRow): LogEntry {
  const entry: LogEntry = { id: r[0], level: r[1] as LogLevel, message: r[2], createdAt: r[6] };
  if (r[3] !== null) entry.source = r[3];
  if (r[4] !== null) entry.tenantUuid = r[4];
  if (r[5] !== null) entry.data = JSON.parse(r[5]) as Record<string, unknown>;
  return entry;
}
