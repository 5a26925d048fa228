import { isMnemeError, MnemeError, type MnemeErrorCode } from "../core/errors.js";

/** SQLSTATE raised by the append function when a version or expected version is taken (-> CONFLICT). */
export const SQLSTATE_VERSION_TAKEN = "MN409";
/** SQLSTATE raised by the append function when a given version leaves a gap (-> INVALID_EVENTS). */
export const SQLSTATE_VERSION_GAP = "MN422";

/** The SQLSTATE of a driver error, when it has one. */
export function sqlState(e: unknown): string | undefined {
  const code = (e as { code?: unknown } | null)?.code;
  return typeof code === "string" && /^[0-9A-Z]{5}$/.test(code) ? code : undefined;
}

/**
 * Maps a driver error to a MnemeError a caller can act on: unique violations,
 * serialization failures and deadlocks are CONFLICT; values Postgres cannot
 * store (NUL characters, lone surrogates in JSON) are `invalidCode`; a missing
 * table means init() was not called; anything else is STORE_ERROR with the cause.
 */
export function mapPgError(e: unknown, what: string, invalidCode: MnemeErrorCode = "INVALID_REQUEST"): MnemeError {
  if (isMnemeError(e)) return e;
  const state = sqlState(e);
  const msg = e instanceof Error ? e.message : String(e);
  switch (state) {
    case "23505":
    case "40001":
    case "40P01":
    case SQLSTATE_VERSION_TAKEN:
      return new MnemeError("CONFLICT", `${what}: ${msg}`, { cause: e });
    case SQLSTATE_VERSION_GAP:
      return new MnemeError("INVALID_EVENTS", `${what}: ${msg}`, { cause: e });
    case "22P05": // untranslatable character (\u0000 or a lone surrogate in JSONB)
    case "22P02": // invalid text representation
    case "22021": // character not in repertoire (NUL byte in text)
    case "22003": // numeric value out of range
    case "54000": // program limit exceeded (e.g. a too large JSONB value)
      return new MnemeError(invalidCode, `${what}: Postgres cannot store this value: ${msg}`, { cause: e });
    case "42P01": // undefined table
    case "3F000": // undefined schema
    case "42883": // undefined function
      return new MnemeError("NOT_STARTED", `${what}: the tables do not exist; call init() first (${msg})`, { cause: e });
    default:
      return new MnemeError("STORE_ERROR", `${what}: ${msg}`, { cause: e });
  }
}
