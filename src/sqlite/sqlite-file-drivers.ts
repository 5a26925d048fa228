/**
 * One SQLite library per file in a process. better-sqlite3, node:sqlite and
 * bun:sqlite each carry their own copy of SQLite, and SQLite's locks are POSIX
 * advisory locks, which belong to the process: when one copy closes its
 * descriptor of a file, the process's locks on it are gone, including those
 * the other copy's connections hold, and their next writes can corrupt the
 * file (sqlite.org/howtocorrupt.html, "multiple copies of SQLite linked into
 * the same application"). So a file open through one driver in this process
 * is refused to another; other processes may use any driver on it.
 *
 * The table lives on globalThis, so two loaded copies of mneme share it.
 */
import { realpathSync } from "node:fs";
import { MnemeError } from "../model/errors.js";
import type { SqliteDriverName } from "./sqlite-driver.js";

interface FileUse {
  readonly driver: SqliteDriverName;
  count: number;
}

const KEY = Symbol.for("mneme.sqlite.fileDrivers");
const uses: Map<string, FileUse> =
  ((globalThis as Record<symbol, unknown>)[KEY] as Map<string, FileUse> | undefined) ??
  ((globalThis as Record<symbol, unknown>)[KEY] = new Map<string, FileUse>());

/**
 * Records that `driver` has `filename` open; INVALID_REQUEST when another
 * driver has it open in this process. Returns the release (idempotent), or
 * undefined when there is no such file (yet, or in memory): nothing can
 * have it open, and a file is claimed again once opened.
 */
export function claimFileForDriver(filename: string, driver: SqliteDriverName): (() => void) | undefined {
  const path = canonicalPath(filename);
  if (path === undefined) return undefined;
  const use = uses.get(path);
  if (use !== undefined && use.driver !== driver)
    throw new MnemeError(
      "INVALID_REQUEST",
      `sqlite: ${filename} is open in this process through ${use.driver}; opening it through ${driver} too would put two copies of SQLite on one file in one process, ` +
        "whose locks (held per process) the other copy drops when it closes, which can corrupt the file. Use one driver per file in a process (another process may use another driver)",
    );
  if (use === undefined) uses.set(path, { driver, count: 1 });
  else use.count++;
  let released = false;
  return () => {
    if (released) return;
    released = true;
    const u = uses.get(path);
    if (u === undefined) return;
    if (--u.count === 0) uses.delete(path);
  };
}

function canonicalPath(filename: string): string | undefined {
  if (filename === "" || filename === ":memory:" || filename.startsWith("file::memory:")) return undefined;
  try {
    return realpathSync(filename.startsWith("file:") ? new URL(filename).pathname : filename);
  } catch {
    return undefined;
  }
}
