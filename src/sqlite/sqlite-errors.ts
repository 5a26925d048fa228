import { isMnemeError, MnemeError } from "../model/errors.js";

/**
 * Turns whatever a driver call threw into a MnemeError: MnemeErrors pass
 * through, SQLite failures become STORE_ERROR (the driver error is the cause)
 * so callers only ever see one error class, whichever driver threw.
 */
export function toStoreError(e: unknown, what: string): MnemeError {
  if (isMnemeError(e)) return e;
  const code = sqliteCode(e);
  return new MnemeError("STORE_ERROR", `sqlite: ${what} failed${code === undefined ? "" : ` (${code})`}`, { cause: e });
}

/**
 * The SQLite extended result code of a driver error (e.g.
 * "SQLITE_CONSTRAINT_UNIQUE"), if it is one: better-sqlite3 and bun:sqlite
 * name it in `code`; node:sqlite gives `code` "ERR_SQLITE_ERROR" and the
 * number in `errcode`, named here the same way.
 */
export function sqliteCode(e: unknown): string | undefined {
  if (typeof e !== "object" || e === null) return undefined;
  const { code, errcode } = e as { code?: unknown; errcode?: unknown };
  if (typeof code === "string" && code.startsWith("SQLITE_")) return code;
  if (code === "ERR_SQLITE_ERROR" && typeof errcode === "number") return resultCodeName(errcode);
  return undefined;
}

/** SQLite's primary result codes (the low 8 bits of an extended one). */
const PRIMARY: readonly string[] = [
  "OK", "ERROR", "INTERNAL", "PERM", "ABORT", "BUSY", "LOCKED", "NOMEM", "READONLY", "INTERRUPT", "IOERR", "CORRUPT", "NOTFOUND",
  "FULL", "CANTOPEN", "PROTOCOL", "EMPTY", "SCHEMA", "TOOBIG", "CONSTRAINT", "MISMATCH", "MISUSE", "NOLFS", "AUTH", "FORMAT",
  "RANGE", "NOTADB", "NOTICE", "WARNING",
]; // prettier-ignore

/** SQLite's extended result codes by primary code: the name of (primary | n << 8) is at index n - 1. */
const EXTENDED: Readonly<Record<string, readonly string[]>> = {
  ERROR: ["MISSING_COLLSEQ", "RETRY", "SNAPSHOT"],
  ABORT: ["ROLLBACK"],
  BUSY: ["RECOVERY", "SNAPSHOT", "TIMEOUT"],
  LOCKED: ["SHAREDCACHE", "VTAB"],
  READONLY: ["RECOVERY", "CANTLOCK", "ROLLBACK", "DBMOVED", "CANTINIT", "DIRECTORY"],
  CORRUPT: ["VTAB", "SEQUENCE", "INDEX"],
  CANTOPEN: ["NOTEMPDIR", "ISDIR", "FULLPATH", "CONVPATH", "DIRTYWAL", "SYMLINK"],
  CONSTRAINT: ["CHECK", "COMMITHOOK", "FOREIGNKEY", "FUNCTION", "NOTNULL", "PRIMARYKEY", "TRIGGER", "UNIQUE", "VTAB", "ROWID", "PINNED", "DATATYPE"],
  IOERR: [
    "READ", "SHORT_READ", "WRITE", "FSYNC", "DIR_FSYNC", "TRUNCATE", "FSTAT", "UNLOCK", "RDLOCK", "DELETE", "BLOCKED", "NOMEM",
    "ACCESS", "CHECKRESERVEDLOCK", "LOCK", "CLOSE", "DIR_CLOSE", "SHMOPEN", "SHMSIZE", "SHMLOCK", "SHMMAP", "SEEK",
    "DELETE_NOENT", "MMAP", "GETTEMPPATH", "CONVPATH", "VNODE", "AUTH", "BEGIN_ATOMIC", "COMMIT_ATOMIC", "ROLLBACK_ATOMIC",
    "DATA", "CORRUPTFS", "IN_PAGE",
  ],
}; // prettier-ignore

/** "SQLITE_CONSTRAINT_UNIQUE" for 2067; the primary name when the extension is not known. */
export function resultCodeName(errcode: number): string | undefined {
  const primary = PRIMARY[errcode & 0xff];
  if (primary === undefined) return undefined;
  const extended = errcode >> 8 === 0 ? undefined : EXTENDED[primary]?.[(errcode >> 8) - 1];
  return extended === undefined ? `SQLITE_${primary}` : `SQLITE_${primary}_${extended}`;
}
