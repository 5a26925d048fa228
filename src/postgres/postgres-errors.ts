import { isMnemeError, MnemeError, type MnemeErrorCode } from "../model/errors.js";
import { conditionFailed } from "../store/event-tags.js";

/** SQLSTATE raised by the append function when a version or expected version is taken (-> CONFLICT). */
export const SQLSTATE_VERSION_TAKEN = "MN409";
/** SQLSTATE raised by the append function when a given version leaves a gap (-> INVALID_EVENTS). */
export const SQLSTATE_VERSION_GAP = "MN422";

/** SQLSTATE of a call refused because an event matching one of its query conditions was stored after it read (-> CONFLICT). */
export const SQLSTATE_QUERY_MATCHED = "MN412";

/** SQLSTATE raised by the append function when an event's tenant is not its aggregate's (-> NOT_FOUND). */
export const SQLSTATE_NOT_IN_TENANT = "MN404";

/** The SQLSTATE of a driver error, when it has one. */
export function sqlState(e: unknown): string | undefined {
  const code = (e as { code?: unknown } | null)?.code;
  return typeof code === "string" && /^[0-9A-Z]{5}$/.test(code) ? code : undefined;
}

/** Socket-level error codes of a connection that failed or could not be made. */
const CONNECTION_ERROR_CODES = new Set([
  "ECONNRESET",
  "EPIPE",
  "ECONNREFUSED",
  "ECONNABORTED",
  "ETIMEDOUT",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "ENETDOWN",
  "EAI_AGAIN",
]);

/**
 * SQLSTATEs that end or refuse the session rather than fail one statement:
 * class 08 (connection exception), 57P01 admin_shutdown (pg_terminate_backend,
 * a fast shutdown), 57P02 crash_shutdown, 57P03 cannot_connect_now (starting
 * up, in recovery), 57P05 idle_session_timeout, 25P03
 * idle_in_transaction_session_timeout, 53300 too_many_connections.
 */
const CONNECTION_SQLSTATES = new Set(["57P01", "57P02", "57P03", "57P05", "25P03", "53300"]);

/** Messages of node-postgres and pg-pool for a connection that is gone or could not be had. */
const CONNECTION_MESSAGES = [
  "Connection terminated", // "... unexpectedly", "... due to connection timeout"
  "Client has encountered a connection error",
  "Client was closed and is not queryable",
  "timeout exceeded when trying to connect",
  "Connection ended unexpectedly",
];

/**
 * True when `e` says the connection failed (lost, refused, terminated by the
 * server) rather than that the statement was wrong: the same call may succeed
 * on a new connection once the database is reachable again.
 */
export function isConnectionError(e: unknown): boolean {
  if (typeof e !== "object" || e === null) return false;
  const code = (e as { code?: unknown }).code;
  if (typeof code === "string") {
    if (CONNECTION_ERROR_CODES.has(code) || CONNECTION_SQLSTATES.has(code) || /^08[0-9A-Z]{3}$/.test(code)) return true;
  }
  const msg = (e as { message?: unknown }).message;
  return typeof msg === "string" && CONNECTION_MESSAGES.some((m) => msg.startsWith(m));
}

/**
 * Maps a driver error to a MnemeError a caller can act on: a lost or refused
 * connection is UNAVAILABLE (retry later; see {@link isConnectionError}); unique violations,
 * serialization failures and deadlocks are CONFLICT; values Postgres cannot
 * store (NUL characters, lone surrogates in JSON) are `invalidCode`; a missing
 * table means init() was not called; anything else is STORE_ERROR with the cause.
 */
export function mapPgError(e: unknown, what: string, invalidCode: MnemeErrorCode = "INVALID_REQUEST"): MnemeError {
  if (isMnemeError(e)) return e;
  const state = sqlState(e);
  const msg = e instanceof Error ? e.message : String(e);
  if (isConnectionError(e)) return new MnemeError("UNAVAILABLE", `${what}: the database connection failed: ${msg}`, { cause: e });
  switch (state) {
    case "23505":
    case "40001":
    case "40P01":
    case SQLSTATE_VERSION_TAKEN:
      return new MnemeError("CONFLICT", `${what}: ${msg}`, { cause: e });
    case SQLSTATE_VERSION_GAP:
      return new MnemeError("INVALID_EVENTS", `${what}: ${msg}`, { cause: e });
    case SQLSTATE_NOT_IN_TENANT:
      return new MnemeError("NOT_FOUND", msg, { cause: e });
    case SQLSTATE_QUERY_MATCHED:
      return queryMatched(msg, e);
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

/** The CONFLICT of a refused condition, from the append function's message "query Q item K after A at P" (P "-": a call of the same flush). */
function queryMatched(msg: string, cause: unknown): MnemeError {
  const m = /^query (\d+) item (\d+) after (\d+) at (\d+|-)$/.exec(msg);
  if (m === null) return new MnemeError("CONFLICT", `postgres: append: ${msg}`, { cause });
  const e = conditionFailed(Number(m[1]), Number(m[2]), Number(m[3]), m[4] === "-" ? undefined : Number(m[4]));
  return new MnemeError("CONFLICT", e.message, { details: e.details ?? [], cause });
}
