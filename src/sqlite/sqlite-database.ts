import { MnemeError } from "../model/errors.js";
import { isBunSqliteDatabase, wrapBunSqlite } from "./sqlite-driver-bun.js";
import { wrapBetterSqlite3 } from "./sqlite-driver-better.js";
import { isNodeSqliteDatabase, wrapNodeSqlite } from "./sqlite-driver-node.js";
import { openSqliteDriver, resolveSqliteDriver } from "./sqlite-driver-open.js";
import {
  isEngineDriver,
  type SqliteDatabaseObject,
  type SqliteDriverDatabase,
  type SqliteDriverName,
  type SqliteEngineDriver,
  type SqliteEngineStatement,
} from "./sqlite-driver.js";
import { toStoreError } from "./sqlite-errors.js";
import { claimFileForDriver } from "./sqlite-file-drivers.js";

/** Options for opening a database file. */
export interface SqliteOpenOptions {
  /** How long a write waits for another process's lock before SQLITE_BUSY (ms). Default 5000. */
  readonly busyTimeoutMs?: number;
  /**
   * The SQLite driver that opens the file: "better-sqlite3" (the package),
   * "node:sqlite" (built into Node.js 22.16+ and Deno) or "bun:sqlite" (Bun's).
   * Default: bun:sqlite on Bun; elsewhere better-sqlite3 where it is installed,
   * else node:sqlite. Every driver keeps the same file format and locking, so
   * instances on different drivers share a file.
   */
  readonly driver?: SqliteDriverName;
}

/** Where a SQLite store keeps its data: a file it opens, a driver instance the caller owns, or a connection shared with other stores. */
export type SqliteConnectionOption =
  | { readonly filename: string; readonly database?: never; readonly connection?: never }
  | { readonly database: SqliteDatabaseObject; readonly filename?: never; readonly connection?: never }
  | { readonly connection: SqliteDatabase; readonly filename?: never; readonly database?: never };

/** Constructor options of every SQLite store. */
export type SqliteStoreOptions = SqliteConnectionOption &
  SqliteOpenOptions & {
    /** Prepended to every table name, so several apps can share one file. Default "mneme_". */
    readonly tablePrefix?: string;
  };

/** The table prefix used when none is given. */
export const DEFAULT_TABLE_PREFIX = "mneme_";

const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]*$/;

/**
 * One SQLite connection shared by the stores of one file: applies the pragmas,
 * caches prepared statements, and closes the driver when the last store
 * releases it (only when it opened the driver itself).
 *
 * Every method is synchronous: each driver (better-sqlite3, node:sqlite,
 * bun:sqlite) runs a statement to completion on the calling thread, which is
 * what makes commit order equal call order. `driver` is the driver's adapter
 * (see sqlite-driver.ts), in better-sqlite3's shape whatever is underneath.
 */
export class SqliteDatabase {
  readonly driver: SqliteEngineDriver;
  /** True when this object opened the driver and so must close it. */
  readonly ownsDriver: boolean;
  private refs = 0;
  private closed = false;
  private readonly statements = new Map<string, SqliteEngineStatement>();
  private savepointDepth = 0;
  private readonly releaseFile: () => void;

  private constructor(driver: SqliteEngineDriver, ownsDriver: boolean, releaseFile: () => void) {
    this.releaseFile = releaseFile;
    this.driver = driver;
    this.ownsDriver = ownsDriver;
  }

  /**
   * Opens (creating if needed) a database file with WAL, synchronous=NORMAL
   * (durable across process crashes; a power loss may drop the last commits),
   * foreign_keys and a busy timeout.
   */
  static open(filename: string, opts: SqliteOpenOptions = {}): SqliteDatabase {
    if (typeof filename !== "string" || filename === "") {
      throw new MnemeError("INVALID_REQUEST", "sqlite: filename must be a non-empty string");
    }
    const busyTimeoutMs = opts.busyTimeoutMs ?? 5000;
    if (!Number.isInteger(busyTimeoutMs) || busyTimeoutMs < 0) {
      throw new MnemeError("INVALID_REQUEST", `sqlite: busyTimeoutMs must be a non-negative integer, got ${String(busyTimeoutMs)}`);
    }
    const name = resolveSqliteDriver(opts.driver);
    // Claimed before opening: a refused second SQLite library must not even open (its close would drop the first one's locks).
    const claimed = claimFileForDriver(filename, name);
    let driver: SqliteEngineDriver;
    let release: () => void;
    try {
      driver = openSqliteDriver(filename, busyTimeoutMs, name);
      release = claimed ?? claimFileForDriver(filename, name) ?? noRelease;
    } catch (e) {
      claimed?.();
      throw e;
    }
    try {
      driver.pragma("journal_mode = WAL");
      driver.pragma("synchronous = NORMAL");
      driver.pragma("foreign_keys = ON");
      driver.pragma(`busy_timeout = ${busyTimeoutMs}`);
      // Deleted rows and freed pages are overwritten with zeros, not only unlinked: a forgotten value leaves no copy behind.
      driver.pragma("secure_delete = ON");
    } catch (e) {
      driver.close();
      release();
      throw toStoreError(e, `configuring ${filename}`);
    }
    return new SqliteDatabase(driver, true, release);
  }

  /**
   * Uses a database the caller opened and configured (better-sqlite3's
   * `Database`, node:sqlite's `DatabaseSync` or bun:sqlite's `Database`, told
   * apart by their shape); mneme never closes it.
   */
  static wrap(database: SqliteDatabaseObject, driver?: SqliteDriverName): SqliteDatabase {
    const adapter = adapterOf(database);
    if (driver !== undefined && driver !== adapter.driverName)
      throw new MnemeError(
        "INVALID_REQUEST",
        `sqlite: driver is ${JSON.stringify(driver)} but database is a ${adapter.driverName} database`,
      );
    return new SqliteDatabase(adapter, false, claimFileForDriver(adapter.name, adapter.driverName) ?? noRelease);
  }

  /** The connection a store's options name, opened or wrapped as needed. */
  static fromOptions(opts: SqliteStoreOptions): SqliteDatabase {
    if (typeof opts !== "object" || opts === null) {
      throw new MnemeError("INVALID_REQUEST", "sqlite: options are required ({ filename } or { database })");
    }
    const given = [opts.filename, opts.database, opts.connection].filter((x) => x !== undefined).length;
    if (given !== 1) {
      throw new MnemeError("INVALID_REQUEST", "sqlite: give exactly one of filename, database or connection");
    }
    if (opts.connection !== undefined) {
      if (!(opts.connection instanceof SqliteDatabase)) {
        throw new MnemeError("INVALID_REQUEST", "sqlite: connection must be a SqliteDatabase");
      }
      return opts.connection;
    }
    if (opts.database !== undefined) return SqliteDatabase.wrap(opts.database, opts.driver);
    return SqliteDatabase.open(opts.filename, opts);
  }

  /** The file name, for `StoreInfo.connectionInfo`. */
  get filename(): string {
    return this.driver.name;
  }

  get isClosed(): boolean {
    return this.closed || !this.driver.open;
  }

  /** A store starts using the connection. */
  retain(): void {
    if (this.closed) throw new MnemeError("STORE_CLOSED", "sqlite: the database is closed");
    this.refs++;
  }

  /** A store stops using the connection; the last one closes it (when owned). */
  release(): void {
    if (this.refs === 0) return;
    this.refs--;
    if (this.refs === 0) this.close();
  }

  /** Closes the driver now if owned; idempotent. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.statements.clear();
    this.releaseFile();
    if (this.ownsDriver && this.driver.open) this.driver.close();
  }

  /**
   * Overwrites what deleted rows left behind: turns `secure_delete` on (it is
   * on for files this class opened) and checkpoints the write-ahead log with
   * TRUNCATE, so the old page images it held are gone from the `-wal` file
   * and the database file holds only the current pages. UNAVAILABLE when
   * another connection keeps a read open past the busy timeout (the log
   * could not be emptied); INVALID_STATE inside a transaction.
   */
  scrub(): void {
    this.assertOpen();
    if (this.driver.inTransaction) throw new MnemeError("INVALID_STATE", "sqlite: the storage cannot be scrubbed inside a transaction");
    this.driver.pragma("secure_delete = ON");
    const rows = this.driver.pragma("wal_checkpoint(TRUNCATE)") as { busy?: number; log?: number }[] | undefined;
    const busy = Array.isArray(rows) ? rows[0]?.busy : undefined;
    if (busy !== undefined && busy !== 0) {
      throw new MnemeError(
        "UNAVAILABLE",
        `sqlite: ${this.filename}: the write-ahead log could not be emptied (another connection keeps a read open); try again`,
      );
    }
  }

  /** The driver underneath: "better-sqlite3", "node:sqlite" or "bun:sqlite". */
  get driverName(): SqliteDriverName {
    return this.driver.driverName;
  }

  /** A cached prepared statement (by SQL text). */
  statement(sql: string): SqliteEngineStatement {
    let stmt = this.statements.get(sql);
    if (stmt === undefined) {
      this.assertOpen();
      stmt = this.driver.prepare(sql);
      this.statements.set(sql, stmt);
    }
    return stmt;
  }

  /** A cached prepared statement returning rows as arrays. */
  rawStatement(sql: string): SqliteEngineStatement {
    const key = `raw:${sql}`;
    let stmt = this.statements.get(key);
    if (stmt === undefined) {
      this.assertOpen();
      stmt = this.driver.prepare(sql).raw(true);
      this.statements.set(key, stmt);
    }
    return stmt;
  }

  /** Runs DDL (CREATE ... IF NOT EXISTS). */
  exec(sql: string): void {
    this.assertOpen();
    this.driver.exec(sql);
  }

  /**
   * Runs fn in a write transaction: BEGIN IMMEDIATE takes the write lock up
   * front (so a read-then-write never fails half-way with SQLITE_BUSY); when a
   * transaction is already open on the driver, a savepoint joins it.
   */
  writeTransaction<R>(fn: () => R): R {
    this.assertOpen();
    if (this.driver.inTransaction) return this.withSavepoint(fn, false);
    this.statement("BEGIN IMMEDIATE").run();
    try {
      const result = fn();
      this.statement("COMMIT").run();
      return result;
    } catch (e) {
      if (this.driver.open && this.driver.inTransaction) this.statement("ROLLBACK").run();
      throw e;
    }
  }

  /** Runs fn inside a savepoint that is always rolled back: a private, throw-away view of pending writes. */
  scratch<R>(fn: () => R): R {
    this.assertOpen();
    return this.withSavepoint(fn, true);
  }

  private withSavepoint<R>(fn: () => R, discard: boolean): R {
    const name = `mneme_sp${this.savepointDepth++}`;
    this.driver.exec(`SAVEPOINT ${name}`);
    try {
      const result = fn();
      if (discard) this.driver.exec(`ROLLBACK TO ${name}`);
      this.driver.exec(`RELEASE ${name}`);
      return result;
    } catch (e) {
      if (this.driver.open) {
        this.driver.exec(`ROLLBACK TO ${name}`);
        this.driver.exec(`RELEASE ${name}`);
      }
      throw e;
    } finally {
      this.savepointDepth--;
    }
  }

  private assertOpen(): void {
    if (this.isClosed) throw new MnemeError("STORE_CLOSED", "sqlite: the database is closed");
  }
}

/** Validates a table prefix: it is spliced into SQL, so only an identifier (or "") is allowed. */
export function validateTablePrefix(prefix: string | undefined): string {
  const p = prefix ?? DEFAULT_TABLE_PREFIX;
  if (typeof p !== "string" || (p !== "" && !IDENTIFIER.test(p))) {
    throw new MnemeError(
      "INVALID_REQUEST",
      `sqlite: tablePrefix must be letters, digits and _ (not starting with a digit), got ${JSON.stringify(p)}`,
    );
  }
  return p;
}

const noRelease = (): void => undefined;

const ACCEPTED = "a better-sqlite3 Database, a node:sqlite DatabaseSync or a bun:sqlite Database";

/** The adapter of a database object a caller passed, by its shape; INVALID_REQUEST naming what is accepted otherwise. */
function adapterOf(database: SqliteDatabaseObject): SqliteEngineDriver {
  if (typeof database !== "object" || database === null)
    throw new MnemeError("INVALID_REQUEST", `sqlite: database must be ${ACCEPTED}, got ${database === null ? "null" : typeof database}`);
  if (isEngineDriver(database)) return database;
  if (typeof (database as Partial<SqliteDriverDatabase>).pragma === "function" && typeof database.prepare === "function")
    return wrapBetterSqlite3(database as SqliteDriverDatabase);
  if (isNodeSqliteDatabase(database)) return wrapNodeSqlite(database);
  if (isBunSqliteDatabase(database)) return wrapBunSqlite(database);
  throw new MnemeError("INVALID_REQUEST", `sqlite: database must be ${ACCEPTED} (an object of another shape was given)`);
}
