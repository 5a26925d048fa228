/**
 * The better-sqlite3 adapter: its statements already have the engine's
 * semantics, so they are handed out as they are (no wrapper on the hot path).
 */
import type BetterSqlite3 from "better-sqlite3";
import { MnemeError } from "../model/errors.js";
import { BETTER_SQLITE3, nativeBuildMissing, requireDriver } from "../store/driver.js";
import { ENGINE_DRIVER, type SqliteDriverDatabase, type SqliteEngineDriver, type SqliteEngineStatement } from "./sqlite-driver.js";
import { toStoreError } from "./sqlite-errors.js";

/** better-sqlite3's module, or the MnemeError naming the package and its install command. */
export function loadBetterSqlite3(): typeof BetterSqlite3 {
  return requireDriver<typeof BetterSqlite3>(BETTER_SQLITE3);
}

/** Opens `filename` with better-sqlite3 (its busy timeout set to `busyTimeoutMs`). */
export function openBetterSqlite3(filename: string, busyTimeoutMs: number): SqliteEngineDriver {
  const Database = loadBetterSqlite3();
  try {
    return new BetterSqlite3Driver(new Database(filename, { timeout: busyTimeoutMs }));
  } catch (e) {
    throw nativeBuildMissing(e) ?? toStoreError(e, `opening ${filename}`);
  }
}

/** A better-sqlite3 `Database` (or one shaped like it) the caller opened. */
export function wrapBetterSqlite3(db: SqliteDriverDatabase): SqliteEngineDriver {
  if (typeof db.pragma !== "function" || typeof db.exec !== "function")
    throw new MnemeError("INVALID_REQUEST", "sqlite: database is not a better-sqlite3 Database (no pragma/exec)");
  return new BetterSqlite3Driver(db);
}

class BetterSqlite3Driver implements SqliteEngineDriver {
  readonly [ENGINE_DRIVER] = true;
  readonly driverName = "better-sqlite3" as const;

  constructor(readonly native: SqliteDriverDatabase) {}

  get name(): string {
    return this.native.name;
  }

  get open(): boolean {
    return this.native.open;
  }

  get inTransaction(): boolean {
    return this.native.inTransaction;
  }

  prepare(sql: string): SqliteEngineStatement {
    return this.native.prepare(sql) as SqliteEngineStatement;
  }

  exec(sql: string): void {
    this.native.exec(sql);
  }

  pragma(source: string, options?: { simple?: boolean }): unknown {
    return this.native.pragma(source, options);
  }

  close(): void {
    this.native.close();
  }
}
