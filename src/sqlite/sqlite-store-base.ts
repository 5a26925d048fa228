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
    try {
      this.ready().scrub();
    } catch (e) {
      throw toStoreError(e, `scrubbing ${this.db.filename}`);
    }
  }

  /** True when `other` writes through the same connection (so both can write in one transaction). */
  sharesConnectionWith(other: SqliteStoreBase): boolean {
    return other.db === this.db;
  }

  /** A StoreInfo for this store's file. */
  protected storeInfo(numItems: number, lastItemCreatedAt: number): StoreInfo {
    return { storeType: "sqlite", numItems, lastItemCreatedAt, connectionInfo: `sqlite:${this.db.filename}` };
  }
}
