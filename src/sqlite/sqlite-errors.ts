import { isMnemeError, MnemeError } from "../model/errors.js";

/**
 * Turns whatever a driver call threw into a MnemeError: MnemeErrors pass
 * through, SQLite failures become STORE_ERROR (the driver error is the cause)
 * so callers only ever see one error class.
 */
export function toStoreError(e: unknown, what: string): MnemeError {
  if (isMnemeError(e)) return e;
  const code = sqliteCode(e);
  return new MnemeError("STORE_ERROR", `sqlite: ${what} failed${code === undefined ? "" : ` (${code})`}`, { cause: e });
}

/** The SQLite extended result code of a driver error (e.g. "SQLITE_CONSTRAINT_UNIQUE"), if it is one. */
export function sqliteCode(e: unknown): string | undefined {
  if (typeof e !== "object" || e === null) return undefined;
  const code = (e as { code?: unknown }).code;
  return typeof code === "string" && code.startsWith("SQLITE_") ? code : undefined;
}
