import { MnemeError } from "../model/errors.js";
import { nowNs } from "../model/clock.js";
import { validateNewLogEntry } from "../store/log-entry-validation.js";
import type { LogEntry, LogLevel, LogStore, NewLogEntry } from "../store/log-store.js";
import { decodeCursor, encodeCursor, pageLimit, stringFilters } from "../store/paging.js";
import type { PageRequest, StoreInfo, StorePage } from "../store/store-info.js";
import { PostgresStoreBase } from "./postgres-store-base.js";

interface LogRow {
  id: string;
  level: LogLevel;
  message: string;
  source: string | null;
  tenant_uuid: string | null;
  data: Record<string, unknown> | null;
  created_at: string;
}

/**
 * The LogStore on Postgres: ids from an identity column (never reused), listed
 * oldest first, keyset by id; `level` filters by exact level. Ids are drawn at
 * insert, so entries written concurrently by several instances may commit out
 * of id order: a page read meanwhile can miss one, which a log listing accepts.
 */
export class PostgresLogStore extends PostgresStoreBase implements LogStore {
  private readonly table = `${this.qschema}.logs`;
  protected override readonly clientKind = "log";

  /** Creates the schema and table; idempotent, safe to run from several instances at once. */
  async init(): Promise<void> {
    await this.track(() =>
      this.runDdl([
        `CREATE TABLE IF NOT EXISTS ${this.table} (
          id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
          level text NOT NULL,
          message text NOT NULL,
          source text,
          tenant_uuid text,
          data jsonb,
          created_at bigint NOT NULL
        )`,
      ]),
    );
  }

  async append(input: NewLogEntry): Promise<LogEntry> {
    return this.track(async () => {
      const dataJson = validateNewLogEntry(input) ?? null;
      const res = await this.query<LogRow>(
        `INSERT INTO ${this.table} (level, message, source, tenant_uuid, data, created_at) VALUES ($1, $2, $3, $4, $5::jsonb, $6)
         RETURNING id::text, level, message, source, tenant_uuid, data, created_at::text`,
        [input.level, input.message, input.source ?? null, input.tenantUuid ?? null, dataJson, nowNs()],
        "log append",
      );
      return toEntry(res.rows[0] as LogRow);
    });
  }

  async list(opts: PageRequest & { level?: LogLevel; source?: string; tenantUuid?: string } = {}): Promise<StorePage<LogEntry>> {
    return this.track(async () => {
      const limit = pageLimit(opts.limit);
      const after = decodeCursor(opts.cursor, ["integer"]);
      const values: unknown[] = [after?.[0] ?? 0];
      let where = "id > $1";
      for (const [column, value] of stringFilters(opts, [
        ["level", "level"],
        ["source", "source"],
        ["tenantUuid", "tenant_uuid"],
      ]))
        where += ` AND ${column} = $${values.push(value)}`;
      const res = await this.query<LogRow>(
        `SELECT id::text, level, message, source, tenant_uuid, data, created_at::text FROM ${this.table}
         WHERE ${where} ORDER BY ${this.table}.id LIMIT $${values.push(limit + 1)}`,
        values,
        "log list",
      );
      const items = res.rows.slice(0, limit).map(toEntry);
      if (res.rows.length <= limit) return { items };
      return { items, nextCursor: encodeCursor([(items[items.length - 1] as LogEntry).id]) };
    });
  }

  /** See LogStore.deleteBefore. */
  async deleteBefore(createdAt: number): Promise<number> {
    return this.track(async () => {
      if (typeof createdAt !== "number" || !Number.isFinite(createdAt)) {
        throw new MnemeError("INVALID_REQUEST", `deleteBefore: createdAt must be a finite number (ns), got ${String(createdAt)}`);
      }
      const res = await this.query(
        `DELETE FROM ${this.table} WHERE created_at < $1::bigint`,
        [BigInt(Math.floor(createdAt)).toString()],
        "log deleteBefore",
      );
      return res.rowCount ?? 0;
    });
  }

  async delete(id: number): Promise<boolean> {
    return this.track(async () => {
      if (!Number.isSafeInteger(id)) return false;
      const res = await this.query(`DELETE FROM ${this.table} WHERE id = $1`, [id], "log delete");
      return (res.rowCount ?? 0) > 0;
    });
  }

  async info(): Promise<StoreInfo> {
    // The newest row by id reads one index entry, not every row.
    return this.tableInfo(this.table, "log info", `SELECT created_at FROM ${this.table} ORDER BY id DESC LIMIT 1`);
  }
}

function toEntry(r: LogRow): LogEntry {
  const entry: LogEntry = { id: Number(r.id), createdAt: Number(r.created_at), level: r.level, message: r.message };
  if (r.source !== null) entry.source = r.source;
  if (r.tenant_uuid !== null) entry.tenantUuid = r.tenant_uuid;
  if (r.data !== null) entry.data = r.data;
  return entry;
}
