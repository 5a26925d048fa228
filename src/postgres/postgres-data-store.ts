import { nowNs } from "../model/clock.js";
import { assertDataKey, dataToStore } from "../store/data-key.js";
import type { DataEntry, DataEntryInfo, DataStore } from "../store/data-store.js";
import { encodeCursor, keyPage } from "../store/paging.js";
import type { PageRequest, StoreInfo, StorePage } from "../store/store-info.js";
import { PostgresStoreBase } from "./postgres-store-base.js";

interface InfoRow {
  key: string;
  size: number;
  content_type: string;
  created_at: string;
  updated_at: string;
}

/**
 * The DataStore on Postgres, one table in the schema of the events: blobs by
 * key, durable and shared by every instance on the schema. A put is one
 * upsert that keeps the row's `created_at` and never moves `updated_at` back,
 * so concurrent puts of one key leave one complete entry whose `createdAt` is
 * not after its `updatedAt`, in whatever order their stamps commit. Keys sort in code-point order (`COLLATE "C"`),
 * so listing and cursors do not depend on the database's locale.
 */
export class PostgresDataStore extends PostgresStoreBase implements DataStore {
  private readonly table = `${this.qschema}.data`;

  /** Creates the schema and table; idempotent, safe to run from several instances at once. Every other call runs it first. */
  init(): Promise<void> {
    return this.track(() => this.ensureTable());
  }

  async put(key: string, data: Uint8Array | string, opts?: { contentType?: string }): Promise<DataEntryInfo> {
    assertDataKey(key);
    const { bytes, contentType } = dataToStore(data, opts?.contentType);
    return this.track(async () => {
      await this.ensureTable();
      const now = nowNs();
      // updated_at never goes back: puts on other connections (or instances with another clock) may commit
      // out of the order of their stamps, and createdAt must never be after updatedAt.
      const res = await this.query<{ created_at: string; updated_at: string }>(
        `INSERT INTO ${this.table} AS d (key, data, size, content_type, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $5)
         ON CONFLICT (key) DO UPDATE SET data = excluded.data, size = excluded.size, content_type = excluded.content_type,
           updated_at = GREATEST(excluded.updated_at, d.updated_at)
         RETURNING created_at::text AS created_at, updated_at::text AS updated_at`,
        [key, Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength), bytes.byteLength, contentType, now],
        "data store put",
      );
      const row = res.rows[0]!;
      return { key, size: bytes.byteLength, contentType, createdAt: Number(row.created_at), updatedAt: Number(row.updated_at) };
    });
  }

  async get(key: string): Promise<DataEntry | undefined> {
    assertDataKey(key);
    return this.track(async () => {
      await this.ensureTable();
      const res = await this.query<InfoRow & { data: Uint8Array }>(
        `SELECT key, size, content_type, created_at::text AS created_at, updated_at::text AS updated_at, data FROM ${this.table} WHERE key = $1`,
        [key],
        "data store get",
      );
      const row = res.rows[0];
      // A private copy as a plain Uint8Array (the driver hands out a Buffer).
      return row === undefined ? undefined : { ...infoOf(row), data: new Uint8Array(row.data) };
    });
  }

  async delete(key: string): Promise<boolean> {
    assertDataKey(key);
    return this.track(async () => {
      await this.ensureTable();
      const res = await this.query(`DELETE FROM ${this.table} WHERE key = $1`, [key], "data store delete");
      return (res.rowCount ?? 0) > 0;
    });
  }

  async list(opts: PageRequest & { prefix?: string } = {}): Promise<StorePage<DataEntryInfo>> {
    const { limit, after, prefix } = keyPage(opts);
    return this.track(async () => {
      await this.ensureTable();
      const from = after !== undefined && after >= prefix ? after : prefix;
      const res = await this.query<InfoRow>(
        `SELECT key, size, content_type, created_at::text AS created_at, updated_at::text AS updated_at FROM ${this.table}
         WHERE key ${from === after ? ">" : ">="} $1 AND starts_with(key, $2) ORDER BY key LIMIT $3`,
        [from, prefix, limit + 1],
        "data store list",
      );
      const items = res.rows.slice(0, limit).map(infoOf);
      return res.rows.length > limit ? { items, nextCursor: encodeCursor([items[items.length - 1]!.key]) } : { items };
    });
  }

  async info(): Promise<StoreInfo> {
    return this.track(async () => {
      await this.ensureTable();
      return this.tableInfo(this.table, "data store info");
    });
  }

  private ensureTable(): Promise<void> {
    return this.ensureDdl([
      `CREATE TABLE IF NOT EXISTS ${this.table} (
          key text COLLATE "C" PRIMARY KEY,
          data bytea NOT NULL,
          size integer NOT NULL,
          content_type text NOT NULL,
          created_at bigint NOT NULL,
          updated_at bigint NOT NULL
        )`,
    ]);
  }
}

function infoOf(row: InfoRow): DataEntryInfo {
  return {
    key: row.key,
    size: row.size,
    contentType: row.content_type,
    createdAt: Number(row.created_at),
    updatedAt: Number(row.updated_at),
  };
}
