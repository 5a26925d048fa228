/**
 * SQLite files for a test file whose facades share them as instances do: a
 * scratch folder removed after the file, with every facade kept stopped first.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll } from "vitest";
import type { Facade } from "mneme";
import { SqliteDatabase, type SqliteDriverName } from "mneme/sqlite";

export interface SqliteScratch {
  /** A new file name in the scratch folder. */
  newFile(): string;
  /** Keeps `f` to be stopped after the test file (before its folder is removed); returns it. */
  keep(f: Facade): Facade;
}

export function sqliteScratch(prefix: string): SqliteScratch {
  const dir = mkdtempSync(join(tmpdir(), `mneme-${prefix}-`));
  let fileNo = 0;
  const facades: Facade[] = [];
  afterAll(async () => {
    for (const f of facades) await f.stop().catch(() => undefined);
    rmSync(dir, { recursive: true, force: true });
  });
  return {
    newFile: () => join(dir, `${++fileNo}.db`),
    keep: (f) => {
      facades.push(f);
      return f;
    },
  };
}

/**
 * Expires every lease from a third connection: stands for "the holder stalled
 * past its lease". Through `driver`, the one the test's instances use (two
 * SQLite libraries on one file in one process would drop each other's locks).
 */
export function expireLeases(filename: string, driver?: SqliteDriverName): void {
  const raw = SqliteDatabase.open(filename, driver === undefined ? {} : { driver });
  raw.statement("UPDATE mneme_readmodel_locks SET expires_at = 0").run();
  raw.close();
}
