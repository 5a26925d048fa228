import { nowNs } from "../model/clock.js";
import { assertCacheKey, cacheEntryToStore, cacheIncrementToStore, notAnIntegerEntry } from "../store/cache-store.js";
import type { CacheEntry, CacheStore } from "../store/cache-store.js";
import { encodeCursor, keyPage } from "../store/paging.js";
import type { PageRequest, StoreInfo, StorePage } from "../store/store-info.js";
import { SqliteStoreBase } from "./sqlite-store-base.js";

/** key, value, expires_at, created_at */
type EntryRow = [string, string, number | null, number];

/** Expired rows are deleted by the read that finds them, by list and info, and by a sweep every this many sets. */
const SWEEP_EVERY = 1000;

/**
 * The CacheStore in one SQLite table (in the events' file when made by
 * createSqliteBackends): JSON values by key with an optional TTL, durable and
 * shared by every process on the file, so counters kept in it (the failed-login
 * limit) hold across instances and restarts. Expiry is in ms since the epoch
 * by the writing process's clock; an expired row is never returned.
 */
export class SqliteCacheStore extends SqliteStoreBase implements CacheStore {
  private readonly table = `${this.prefix}cache`;
  private setsSinceSweep = 0;

  protected createTables(): void {
    this.db.exec(`
      CREATE TABLE IF NOT EXISTS ${this.table} (
        key TEXT NOT NULL PRIMARY KEY,
        value TEXT NOT NULL,
        expires_at INTEGER,
        created_at INTEGER NOT NULL
      );
      CREATE INDEX IF NOT EXISTS ${this.table}_expires ON ${this.table} (expires_at) WHERE expires_at IS NOT NULL;
    `);
  }

  async get<T = unknown>(key: string): Promise<T | undefined> {
    assertCacheKey(key);
    return this.attempt("cache get", (db) => {
      const now = Date.now();
      const row = db.rawStatement(`SELECT value, expires_at FROM ${this.table} WHERE key = ?`).get(key) as
        [string, number | null] | undefined;
      if (row === undefined) return undefined;
      if (row[1] !== null && row[1] <= now) {
        db.statement(`DELETE FROM ${this.table} WHERE key = ? AND expires_at <= ?`).run(key, now);
        return undefined;
      }
      return JSON.parse(row[0]) as T;
    });
  }

  async set<T = unknown>(key: string, value: T, opts?: { ttlMs?: number }): Promise<void> {
    const e = cacheEntryToStore(key, value, opts, Date.now());
    this.change(
      "cache set",
      `INSERT INTO ${this.table} (key, value, expires_at, created_at) VALUES (?, ?, ?, ?)
       ON CONFLICT (key) DO UPDATE SET value = excluded.value, expires_at = excluded.expires_at, created_at = excluded.created_at`,
      e.key,
      e.json,
      e.expiresAt ?? null,
      nowNs(),
    );
    if (++this.setsSinceSweep >= SWEEP_EVERY) this.sweep();
  }

  async increment(key: string, by: number, opts?: { ttlMs?: number }): Promise<number> {
    const now = Date.now();
    const e = cacheIncrementToStore(key, by, opts, now);
    // One statement: SQLite takes the write lock for it, so increments from every connection on the file sum exactly.
    // SET reads the row as it was, so an expired entry starts again from `by` with the new expiry.
    const row = this.attempt(
      "cache increment",
      (db) =>
        db
          .rawStatement(
            // `now` as four anonymous parameters: bun:sqlite binds no named object next to anonymous ones.
            `INSERT INTO ${this.table} (key, value, expires_at, created_at) VALUES (?, ?, ?, ?)
           ON CONFLICT (key) DO UPDATE SET
             value = CASE WHEN expires_at <= ? THEN excluded.value ELSE CAST(CAST(value AS INTEGER) + excluded.value AS TEXT) END,
             expires_at = CASE WHEN expires_at <= ? THEN excluded.expires_at ELSE expires_at END,
             created_at = CASE WHEN expires_at <= ? THEN excluded.created_at ELSE created_at END
           WHERE expires_at <= ? OR json_type(value) = 'integer'
           RETURNING value`,
          )
          .get(e.key, String(e.by), e.expiresAt ?? null, nowNs(), now, now, now, now) as [string] | undefined,
    );
    if (row === undefined) throw notAnIntegerEntry(e.key);
    if (++this.setsSinceSweep >= SWEEP_EVERY) this.sweep();
    return Number(row[0]);
  }

  async delete(key: string): Promise<boolean> {
    assertCacheKey(key);
    return this.attempt("cache delete", (db) =>
      db.writeTransaction(() => {
        const row = db.rawStatement(`SELECT expires_at FROM ${this.table} WHERE key = ?`).get(key) as [number | null] | undefined;
        if (row === undefined) return false;
        db.statement(`DELETE FROM ${this.table} WHERE key = ?`).run(key);
        return row[0] === null || row[0] > Date.now();
      }),
    );
  }

  async list(opts: PageRequest & { prefix?: string } = {}): Promise<StorePage<CacheEntry>> {
    const { limit, after, prefix } = keyPage(opts);
    this.sweep();
    return this.attempt("cache list", (db) => {
      const from = after !== undefined && after >= prefix ? after : prefix;
      const rows = db
        .rawStatement(
          `SELECT key, value, expires_at, created_at FROM ${this.table}
           WHERE key ${from === after ? ">" : ">="} ? AND substr(key, 1, length(?)) = ? AND (expires_at IS NULL OR expires_at > ?)
           ORDER BY key LIMIT ?`,
        )
        .all(from, prefix, prefix, Date.now(), limit + 1) as EntryRow[];
      const items = rows.slice(0, limit).map(entryOf);
      return rows.length > limit ? { items, nextCursor: encodeCursor([items[items.length - 1]!.key]) } : { items };
    });
  }

  async clear(): Promise<void> {
    this.change("cache clear", `DELETE FROM ${this.table}`);
  }

  async info(): Promise<StoreInfo> {
    this.sweep();
    return this.tableInfo(this.table, "cache info");
  }

  private sweep(): void {
    this.setsSinceSweep = 0;
    this.change("cache sweep", `DELETE FROM ${this.table} WHERE expires_at <= ?`, Date.now());
  }
}

function entryOf([key, value, expiresAt, createdAt]: EntryRow): CacheEntry {
  const entry: CacheEntry = { key, value: JSON.parse(value) as unknown, createdAt };
  if (expiresAt !== null) entry.expiresAt = expiresAt;
  return entry;
}
