/**
 * Which driver opens a file: the one named by the `driver` option, or the
 * default where it is available (bun:sqlite on Bun; elsewhere better-sqlite3
 * when the package is installed, else node:sqlite), so SQLite works with no
 * driver package at all.
 */
import { isMnemeError, MnemeError } from "../model/errors.js";
import { BETTER_SQLITE3, driverInstallCommand, loadBuiltinModule, runtimeName } from "../store/driver.js";
import { loadBetterSqlite3, openBetterSqlite3 } from "./sqlite-driver-better.js";
import { openBunSqlite } from "./sqlite-driver-bun.js";
import { openNodeSqlite } from "./sqlite-driver-node.js";
import { SQLITE_DRIVER_NAMES, type SqliteDriverName, type SqliteEngineDriver } from "./sqlite-driver.js";

/** The driver the `driver` option names (INVALID_REQUEST for another value), or the default one. */
export function resolveSqliteDriver(driver: SqliteDriverName | undefined): SqliteDriverName {
  if (driver === undefined) return defaultSqliteDriver();
  if (!SQLITE_DRIVER_NAMES.includes(driver))
    throw new MnemeError(
      "INVALID_REQUEST",
      `sqlite: driver must be one of ${SQLITE_DRIVER_NAMES.map((n) => JSON.stringify(n)).join(", ")}, got ${JSON.stringify(driver)}`,
    );
  return driver;
}

/** Opens `filename` with `driver` (or the default one). */
export function openSqliteDriver(filename: string, busyTimeoutMs: number, driver?: SqliteDriverName): SqliteEngineDriver {
  const name = resolveSqliteDriver(driver);
  switch (name) {
    case "better-sqlite3":
      return openBetterSqlite3(filename, busyTimeoutMs);
    case "node:sqlite":
      return openNodeSqlite(filename, busyTimeoutMs);
    case "bun:sqlite":
      return openBunSqlite(filename);
  }
}

/**
 * The driver used when none is named: bun:sqlite on Bun; elsewhere
 * better-sqlite3 when the package is installed (the app asked for it, and
 * node:sqlite is experimental on Node.js 22; through mneme the two are as
 * fast, docs/performance.md), else node:sqlite. INVALID_REQUEST naming both
 * when neither is there.
 */
export function defaultSqliteDriver(): SqliteDriverName {
  if ((process.versions as Record<string, string | undefined>).bun !== undefined) return "bun:sqlite";
  try {
    loadBetterSqlite3();
    return "better-sqlite3";
  } catch (e) {
    if (!isMnemeError(e)) throw e;
  }
  if (loadBuiltinModule<object>("node:sqlite") !== undefined) return "node:sqlite";
  throw new MnemeError(
    "INVALID_REQUEST",
    `mneme/sqlite: no SQLite driver in this runtime (${runtimeName()}): node:sqlite needs Node.js 22.16 or later (or Deno 2), ` +
      `and better-sqlite3 is not installed (${driverInstallCommand(BETTER_SQLITE3)})`,
  );
}
