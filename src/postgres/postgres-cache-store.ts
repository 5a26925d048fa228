import { nowNs } from "../model/clock.js";
import { assertCacheKey, cacheEntryToStore, cacheIncrementToStore, notAnIntegerEntry } from "../store/cache-store.js";
import type { CacheEntry, CacheStore } from "../store/cache-store.js";
import { encodeCursor, keyPage } from "../store/paging.js";
import type { PageRequest, StoreInfo, StorePage } from "../store/store-info.js";
import { PostgresStoreBase } from "./postgres-store-base.js";

interface EntryRow {
  key: string;
  value: string;
  expires_at: string | null;
  created_at: string;
}

/** Expired rows are deleted by list and info, and by a sweep every this many sets. */
const SWEEP_EVERY = 1000;

/**
 * The CacheStore on Postgres, one UNLOGGED table in the schema of the events:
 * JSON values by key with an optional TTL, shared by every instance on the
 * schema and kept across their restarts, so counters kept in it (the
 * failed-login limit) hold across instances. UNLOGGED, as befits a cache:
 * writes skip the write-ahead log, and Postgres empties the table after a
 * crash of the server and does not copy it to standbys (a failover starts
 * with an empty cache). Expiry is in ms since the epoch by the writing
 * instance's clock; an expired row is never returned.
 */
export class PostgresCacheStore extends PostgresStoreBase implements CacheStore {
  private readonly table = `${this.qschema}.cache`;
  private setsSinceSweep = 0;

  /** Creates the schema and table; idempotent, safe to run from several instances at once. Every other call runs it first. */
  init(): Promise<void> {
    return this.track(() => this.ensureTable());
  }

  async get<T = unknown>(key: string): Promise<T | undefined> {
    assertCacheKey(key);
    return this.track(async () => {
      await this.ensureTable();
      const res = await this.query<{ value: string }>(
        `SELECT value FROM ${this.table} WHERE key = $1 AND (expires_at IS NULL OR expires_at > $2)`,
        [key, Date.now()],
        "cache get",
      );
      const row = res.rows[0];
      return row === undefined ? undefined : (JSON.parse(row.value) as T);
    });
  }

  async set<T = unknown>(key: string, value: T, opts?: { ttlMs?: number }): Promise<void> {
    const e = cacheEntryToStore(key, value, opts, Date.now());
    await this.track(async () => {
      await this.ensureTable();
      await this.query(
        `INSERT INTO ${this.table} (key, value, expires_at, created_at) VALUES ($1, $2, $3, $4)
         ON CONFLICT (key) DO UPDATE SET value = excluded.value, expires_at = excluded.expires_at, created_at = excluded.created_at`,
        [e.key, e.json, e.expiresAt ?? null, nowNs()],
        "cache set",
      );
      if (++this.setsSinceSweep >= SWEEP_EVERY) await this.sweep();
    });
  }

  async increment(key: string, by: number, opts?: { ttlMs?: number }): Promise<number> {
    const now = Date.now();
    const e = cacheIncrementToStore(key, by, opts, now);
    return this.track(async () => {
      await this.ensureTable();
      // One statement: the row lock of ON CONFLICT DO UPDATE makes increments from every connection sum exactly.
      // SET reads the row as it was, so an expired entry starts again from `by` with the new expiry.
      const res = await this.query<{ value: string }>(
        `INSERT INTO ${this.table} AS c (key, value, expires_at, created_at) VALUES ($1, $2::bigint::text, $3, $4)
         ON CONFLICT (key) DO UPDATE SET
           value = CASE WHEN c.expires_at <= $5 THEN excluded.value ELSE (c.value::bigint + $2::bigint)::text END,
           expires_at = CASE WHEN c.expires_at <= $5 THEN excluded.expires_at ELSE c.expires_at END,
           created_at = CASE WHEN c.expires_at <= $5 THEN excluded.created_at ELSE c.created_at END
         WHERE c.expires_at <= $5 OR c.value ~ '^-?[0-9]{1,18}$'
         RETURNING value`,
        [e.key, e.by, e.expiresAt ?? null, nowNs(), now],
        "cache increment",
      );
      const row = res.rows[0];
      if (row === undefined) throw notAnIntegerEntry(e.key);
      if (++this.setsSinceSweep >= SWEEP_EVERY) await this.sweep();
      return Number(row.value);
    });
  }

  async delete(key: string): Promise<boolean> {
    assertCacheKey(key);
    return this.track(async () => {
      await this.ensureTable();
      const res = await this.query<{ live: boolean }>(
        `DELETE FROM ${this.table} WHERE key = $1 RETURNING (expires_at IS NULL OR expires_at > $2) AS live`,
        [key, Date.now()],
        "cache delete",
      );
      return res.rows[0]?.live === true;
    });
  }

  async list(opts: PageRequest & { prefix?: string } = {}): Promise<StorePage<CacheEntry>> {
    const { limit, after, prefix } = keyPage(opts);
    return this.track(async () => {
      await this.ensureTable();
      await this.sweep();
      const from = after !== undefined && after >= prefix ? after : prefix;
      const res = await this.query<EntryRow>(
        `SELECT key, value, expires_at::text AS expires_at, created_at::text AS created_at FROM ${this.table}
         WHERE key ${from === after ? ">" : ">="} $1 AND starts_with(key, $2) AND (expires_at IS NULL OR expires_at > $3)
         ORDER BY key LIMIT $4`,
        [from, prefix, Date.now(), limit + 1],
        "cache list",
      );
      const items = res.rows.slice(0, limit).map(entryOf);
      return res.rows.length > limit ? { items, nextCursor: encodeCursor([items[items.length - 1]!.key]) } : { items };
    });
  }

  async clear(): Promise<void> {
    await this.track(async () => {
      await this.ensureTable();
      await this.query(`DELETE FROM ${this.table}`, [], "cache clear");
    });
  }

  async info(): Promise<StoreInfo> {
    return this.track(async () => {
      await this.ensureTable();
      await this.sweep();
      return this.tableInfo(this.table, "cache info");
    });
  }

  private async sweep(): Promise<void> {
    this.setsSinceSweep = 0;
    await this.query(`DELETE FROM ${this.table} WHERE expires_at <= $1`, [Date.now()], "cache sweep");
  }

  private ensureTable(): Promise<void> {
    return this.ensureDdl([
      `CREATE UNLOGGED TABLE IF NOT EXISTS ${this.table} (
          key text COLLATE "C" PRIMARY KEY,
          value text NOT NULL,
          expires_at bigint,
          created_at bigint NOT NULL
        )`,
      `CREATE INDEX IF NOT EXISTS cache_expires ON ${this.table} (expires_at) WHERE expires_at IS NOT NULL`,
    ]);
  }
}

function entryOf(row: EntryRow): CacheEntry {
  const entry: CacheEntry = { key: row.key, value: JSON.parse(row.value) as unknown, createdAt: Number(row.created_at) };
  if (row.expires_at !== null) entry.expiresAt = Number(row.expires_at);
  return entry;
}
