import { MnemeError } from "../model/errors.js";
import type { StoreFormatRecord } from "../store/store-format.js";
import type { StoreInfo } from "../store/store-info.js";
import { SqliteDatabase, type SqliteStoreOptions, validateTablePrefix } from "./sqlite-database.js";
import { toStoreError } from "./sqlite-errors.js";
import { withStoreFormat } from "./sqlite-store-format.js";

/**
 * What every SQLite store shares: its connection (retained while the store is
 * open, so stores sharing one file close it exactly once), its table prefix,
 * lazy idempotent table creation, and STORE_CLOSED after close().
 */
export abstract class SqliteStoreBase {
  protected readonly db: SqliteDatabase;
  protected readonly prefix: string;
  private closed = false;
  private tablesReady = false;
  private formatRecord: StoreFormatRecord | undefined;

  constructor(opts: SqliteStoreOptions) {
    this.prefix = validateTablePrefix(opts?.tablePrefix);
    this.db = SqliteDatabase.fromOptions(opts);
    this.db.retain();
  }

  /** Creates the store's tables and indexes (IF NOT EXISTS); runs once per instance. */
  protected abstract createTables(): void;

  /** Creates the tables; idempotent. Every other method also does it on first use. */
  async init(): Promise<void> {
    this.ready();
  }

  /** The file's store format record (for this table prefix) as this store's `init()` left it; undefined before. See docs/upgrading.md. */
  storeFormat(): StoreFormatRecord | undefined {
    return this.formatRecord;
  }

  /** Releases this store's hold on the connection; idempotent. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.db.release();
  }

  /** The connection, after checking the store is open and its tables exist. */
  protected ready(): SqliteDatabase {
    if (this.closed || this.db.isClosed) throw new MnemeError("STORE_CLOSED", `sqlite: ${this.constructor.name} is closed`);
    if (!this.tablesReady) {
      try {
        this.formatRecord = withStoreFormat(this.db, this.prefix, () => this.createTables());
      } catch (e) {
        throw toStoreError(e, `creating the tables of ${this.constructor.name}`);
      }
      this.tablesReady = true;
    }
    return this.db;
  }

  /** The file this store writes (stores sharing it are scrubbed once): see {@link scrubStorage}. */
  storageScope(): string {
    return `sqlite:${this.db.filename}`;
  }

  /**
   * Overwrites what deleted rows left in the file and its write-ahead log
   * (`secure_delete`, then a TRUNCATE checkpoint); see SqliteDatabase.scrub.
   */
  async scrubStorage(): Promise<void> {
    this.attempt(`scrubbing ${this.db.filename}`, (db) => db.scrub());
  }

  /** True when `other` writes through the same connection (so both can write in one transaction). */
  sharesConnectionWith(other: SqliteStoreBase): boolean {
    return other.db === this.db;
  }

  /** Runs `fn` on the open connection; what it throws becomes a MnemeError naming `what` (STORE_ERROR for a driver error). */
  protected attempt<R>(what: string, fn: (db: SqliteDatabase) => R): R {
    try {
      return fn(this.ready());
    } catch (e) {
      throw toStoreError(e, what);
    }
  }

  /** Runs one writing statement (see {@link attempt}); the number of rows it changed. */
  protected change(what: string, sql: string, ...params: unknown[]): number {
    return this.attempt(what, (db) => db.statement(sql).run(...params).changes);
  }

  /**
   * The StoreInfo of `table`: its rows, and the newest row's `created`
   * column (default created_at): the largest, or with `newestBy` the one of
   * the row last in that indexed order (one index entry read, not every row).
   */
  protected tableInfo(table: string, what: string, opts: { readonly created?: string; readonly newestBy?: string } = {}): StoreInfo {
    const created = opts.created ?? "created_at";
    return this.attempt(what, (db) => {
      if (opts.newestBy === undefined) {
        const row = db.statement(`SELECT COUNT(*) AS n, MAX(${created}) AS t FROM ${table}`).get() as { n: number; t: number | null };
        return this.storeInfo(row.n, row.t ?? 0);
      }
      const { n } = db.statement(`SELECT COUNT(*) AS n FROM ${table}`).get() as { n: number };
      const last = db.statement(`SELECT ${created} AS t FROM ${table} ORDER BY ${opts.newestBy} DESC LIMIT 1`).get() as
        { t: number } | undefined;
      return this.storeInfo(n, last?.t ?? 0);
    });
  }

  /** A StoreInfo for this store's file. */
  protected storeInfo(numItems: number, lastItemCreatedAt: number): StoreInfo {
    return { storeType: "sqlite", numItems, lastItemCreatedAt, connectionInfo: `sqlite:${this.db.filename}` };
  }
}
