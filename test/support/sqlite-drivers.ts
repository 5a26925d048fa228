/**
 * The SQLite drivers the SQLite tests run on: both Node.js drivers
 * (better-sqlite3 and node:sqlite) in one run, so every SQLite test and
 * contract suite passes on each. MNEME_SQLITE_DRIVER=<name> narrows a run to
 * one of them (e.g. on a runtime or CI job for one driver).
 */
import type { SqliteDriverName } from "../../src/sqlite/index.js";

const NODE_DRIVERS: readonly SqliteDriverName[] = ["better-sqlite3", "node:sqlite"];

function drivers(): readonly SqliteDriverName[] {
  const only = process.env.MNEME_SQLITE_DRIVER;
  if (only === undefined || only === "") return NODE_DRIVERS;
  if (!["better-sqlite3", "node:sqlite", "bun:sqlite"].includes(only))
    throw new Error(`MNEME_SQLITE_DRIVER must be better-sqlite3, node:sqlite or bun:sqlite, got ${only}`);
  return [only as SqliteDriverName];
}

export const SQLITE_DRIVERS: readonly SqliteDriverName[] = drivers();

/** The other Node.js driver than `driver`: the second instance of an interoperability test. */
export function otherSqliteDriver(driver: SqliteDriverName): SqliteDriverName {
  return driver === "node:sqlite" ? "better-sqlite3" : "node:sqlite";
}
