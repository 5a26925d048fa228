/**
 * The few parts of a better-sqlite3 `Database` that mneme uses, typed
 * structurally so a caller can pass their own instance (or a compatible driver)
 * without mneme's types depending on `@types/better-sqlite3`.
 */
export interface SqliteDriverStatement {
  run(...params: unknown[]): { changes: number; lastInsertRowid: number | bigint };
  get(...params: unknown[]): unknown;
  all(...params: unknown[]): unknown[];
  /** Rows as arrays instead of objects (faster to read back). */
  raw(toggle?: boolean): this;
}

/** A better-sqlite3 `Database`, structurally. */
export interface SqliteDriverDatabase {
  /** The file name the database was opened with. */
  readonly name: string;
  readonly open: boolean;
  readonly inTransaction: boolean;
  prepare(sql: string): SqliteDriverStatement;
  exec(sql: string): unknown;
  pragma(source: string, options?: { simple?: boolean }): unknown;
  close(): unknown;
}

/** A `node:sqlite` `DatabaseSync` (Node.js 22.16+, Deno), structurally: what tells one apart. */
export interface NodeSqliteDatabaseLike {
  readonly isOpen: boolean;
  readonly isTransaction: boolean;
  location(dbName?: string): string | null;
  prepare(sql: string): unknown;
  exec(sql: string): void;
  close(): void;
}

/** A `bun:sqlite` `Database`, structurally: what tells one apart. */
export interface BunSqliteDatabaseLike {
  readonly filename: string;
  readonly inTransaction: boolean;
  query(sql: string): unknown;
  prepare(sql: string): unknown;
  exec(sql: string): unknown;
  close(throwOnError?: boolean): void;
}

/** A database object a caller opened and passes as `database`: better-sqlite3's, node:sqlite's or bun:sqlite's. */
export type SqliteDatabaseObject = SqliteDriverDatabase | NodeSqliteDatabaseLike | BunSqliteDatabaseLike;

/** The SQLite drivers mneme runs on. */
export type SqliteDriverName = "better-sqlite3" | "node:sqlite" | "bun:sqlite";

/** Every driver name, in the order the default is chosen where it is available. */
export const SQLITE_DRIVER_NAMES: readonly SqliteDriverName[] = ["better-sqlite3", "node:sqlite", "bun:sqlite"];

/**
 * A prepared statement as every driver's adapter presents it: better-sqlite3's
 * semantics (objects with a plain prototype, `undefined` for no row, integers
 * as numbers unless `safeIntegers`), whatever the driver underneath.
 */
export interface SqliteEngineStatement extends SqliteDriverStatement {
  /** Rows one at a time. */
  iterate(...params: unknown[]): IterableIterator<unknown>;
  /** Integers read back as bigint (exact) instead of number. */
  safeIntegers(toggle?: boolean): this;
  /** It returns rows (a SELECT, a PRAGMA with a result, or a write with RETURNING). */
  readonly reader: boolean;
  /** It writes nothing to the database file (sqlite3_stmt_readonly). */
  readonly readonly: boolean;
}

/**
 * The one connection interface the SQLite engine runs on: an adapter per
 * driver (sqlite-driver-better.ts, sqlite-driver-node.ts, sqlite-driver-bun.ts)
 * implements it. It keeps better-sqlite3's shape, so `SqliteDatabase.driver`
 * stays a `SqliteDriverDatabase`.
 */
export interface SqliteEngineDriver extends SqliteDriverDatabase {
  /** The driver underneath. */
  readonly driverName: SqliteDriverName;
  /** The driver's own database object. */
  readonly native: unknown;
  prepare(sql: string): SqliteEngineStatement;
  /** Rows of `PRAGMA <source>` (with `simple`, the first column of the first row). */
  pragma(source: string, options?: { simple?: boolean }): unknown;
  close(): void;
}

/** Marks an adapter, so a connection's `driver` passed back as `database` is used as it is. */
export const ENGINE_DRIVER: unique symbol = Symbol("mneme.sqliteEngineDriver");

/** An adapter made by one of the driver files. */
export function isEngineDriver(x: unknown): x is SqliteEngineDriver {
  return typeof x === "object" && x !== null && (x as { [ENGINE_DRIVER]?: unknown })[ENGINE_DRIVER] === true;
}

/**
 * The opcodes of a compiled program that make it a writer, as SQLite's own
 * sqlite3_stmt_readonly decides (a write Transaction, a checkpoint, VACUUM, a
 * journal mode change): for drivers that do not expose that flag.
 */
export function programWrites(ops: readonly { opcode: string; p2: number | bigint }[]): boolean {
  return ops.some(
    (o) =>
      (o.opcode === "Transaction" && Number(o.p2) !== 0) ||
      o.opcode === "Checkpoint" ||
      o.opcode === "Vacuum" ||
      o.opcode === "JournalMode",
  );
}
