import { nowNs } from "../model/clock.js";
import { assertDataKey, dataToStore } from "../store/data-key.js";
import type { DataEntry, DataEntryInfo, DataStore } from "../store/data-store.js";
import { encodeCursor, keyPage } from "../store/paging.js";
import type { PageRequest, StoreInfo, StorePage } from "../store/store-info.js";
import { SqliteStoreBase } from "./sqlite-store-base.js";

/** key, size, content_type, created_at, updated_at */
type InfoRow = [string, number, string, number, number];

/**
 * The DataStore in one SQLite table (in the events' file when made by
 * createSqliteBackends): blobs by key, durable and shared by every process on
 * the file. A put is one upsert that keeps the row's `created_at`, so
 * concurrent puts of one key leave one complete entry. Listing is in the
 * table's key order (BINARY: the order of the keys' code points).
 */
export class SqliteDataStore extends SqliteStoreBase implements DataStore {
  private readonly table = `${this.prefix}data`;

  protected createTables(): void {
    this.db.exec(`
      CREATE TABLE IF NOT EXISTS ${this.table} (
        key TEXT NOT NULL PRIMARY KEY,
        data BLOB NOT NULL,
        size INTEGER NOT NULL,
        content_type TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL
      );
    `);
  }

  async put(key: string, data: Uint8Array | string, opts?: { contentType?: string }): Promise<DataEntryInfo> {
    assertDataKey(key);
    const { bytes, contentType } = dataToStore(data, opts?.contentType);
    const now = nowNs();
    return this.attempt("data store put", (db) =>
      db.writeTransaction(() => {
        // updated_at never goes back: another process on the file may have stamped the row with a clock ahead of
        // this one's, and createdAt must never be after updatedAt.
        db.statement(
          `INSERT INTO ${this.table} (key, data, size, content_type, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?)
           ON CONFLICT (key) DO UPDATE SET data = excluded.data, size = excluded.size, content_type = excluded.content_type,
             updated_at = MAX(excluded.updated_at, updated_at)`,
        ).run(key, Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength), bytes.byteLength, contentType, now, now);
        const [createdAt, updatedAt] = db.rawStatement(`SELECT created_at, updated_at FROM ${this.table} WHERE key = ?`).get(key) as [
          number,
          number,
        ];
        return { key, size: bytes.byteLength, contentType, createdAt, updatedAt };
      }),
    );
  }

  async get(key: string): Promise<DataEntry | undefined> {
    assertDataKey(key);
    return this.attempt("data store get", (db) => {
      const row = db
        .rawStatement(`SELECT key, size, content_type, created_at, updated_at, data FROM ${this.table} WHERE key = ?`)
        .get(key) as [...InfoRow, Uint8Array] | undefined;
      if (row === undefined) return undefined;
      // A private copy as a plain Uint8Array (the driver may hand out a Buffer).
      return { ...infoOf(row), data: new Uint8Array(row[5]) };
    });
  }

  async delete(key: string): Promise<boolean> {
    assertDataKey(key);
    return this.change("data store delete", `DELETE FROM ${this.table} WHERE key = ?`, key) > 0;
  }

  async list(opts: PageRequest & { prefix?: string } = {}): Promise<StorePage<DataEntryInfo>> {
    const { limit, after, prefix } = keyPage(opts);
    return this.attempt("data store list", (db) => {
      const from = after !== undefined && after >= prefix ? after : prefix;
      const rows = db
        .rawStatement(
          `SELECT key, size, content_type, created_at, updated_at FROM ${this.table}
           WHERE key ${from === after ? ">" : ">="} ? AND substr(key, 1, length(?)) = ? ORDER BY key LIMIT ?`,
        )
        .all(from, prefix, prefix, limit + 1) as InfoRow[];
      const items = rows.slice(0, limit).map(infoOf);
      return rows.length > limit ? { items, nextCursor: encodeCursor([items[items.length - 1]!.key]) } : { items };
    });
  }

  async info(): Promise<StoreInfo> {
    return this.tableInfo(this.table, "data store info");
  }
}

function infoOf(row: readonly [string, number, string, number, number, ...unknown[]]): DataEntryInfo {
  return { key: row[0], size: row[1], contentType: row[2], createdAt: row[3], updatedAt: row[4] };
}
