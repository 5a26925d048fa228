import { type ErrorCode, errorCodeDefinition, isMnemeError, type MnemeErrorCode, type MnemeErrorDetail } from "../model/errors.js";
import type { Reply } from "./exchange.js";

/**
 * The one table from mneme's own error codes to HTTP status. Codes that only a
 * programming or configuration mistake produces are 500: the client cannot fix them.
 * Codes defined with `defineErrorCode` answer with the status they were defined with.
 */
export const STATUS_BY_CODE: Readonly<Record<MnemeErrorCode, number>> = Object.freeze({
  INVALID_REQUEST: 400,
  VALIDATION_FAILED: 400,
  INVALID_ACTION: 400,
  UNAUTHENTICATED: 401,
  PERMISSION_DENIED: 403,
  CSRF: 403,
  NOT_FOUND: 404,
  UNKNOWN_COMMAND: 404,
  UNKNOWN_QUERY: 404,
  UNKNOWN_EVENT_HANDLER: 404,
  UNKNOWN_SCHEMA_TYPE: 404,
  CONFLICT: 409,
  INVALID_STATE: 409,
  RESTORE_CANCELLED: 409,
  PAYLOAD_TOO_LARGE: 413,
  RATE_LIMITED: 429,
  SSE_PRODUCER_NOT_RUNNING: 503,
  SSE_CONNECTION_LIMIT: 503,
  STORE_PERMISSIONS_NOT_REGISTERED: 503,
  NOT_STARTED: 503,
  STORE_CLOSED: 503,
  UNAVAILABLE: 503,
  INVALID_DOMAIN: 500,
  INVALID_PERMISSION: 500,
  INVALID_EVENT_HANDLER: 500,
  INVALID_EVENTS: 500,
  HANDLER_FAILED: 500,
  STORE_ERROR: 500,
  UPCAST_FAILED: 500,
  STORE_TOO_NEW: 500,
});

const TITLES: Readonly<Record<number, string>> = {
  400: "Bad Request",
  401: "Unauthorized",
  402: "Payment Required",
  403: "Forbidden",
  404: "Not Found",
  405: "Method Not Allowed",
  406: "Not Acceptable",
  408: "Request Timeout",
  409: "Conflict",
  410: "Gone",
  411: "Length Required",
  412: "Precondition Failed",
  413: "Content Too Large",
  414: "URI Too Long",
  415: "Unsupported Media Type",
  416: "Range Not Satisfiable",
  417: "Expectation Failed",
  421: "Misdirected Request",
  422: "Unprocessable Content",
  423: "Locked",
  424: "Failed Dependency",
  425: "Too Early",
  426: "Upgrade Required",
  428: "Precondition Required",
  429: "Too Many Requests",
  431: "Request Header Fields Too Large",
  451: "Unavailable For Legal Reasons",
  500: "Internal Server Error",
  501: "Not Implemented",
  502: "Bad Gateway",
  503: "Service Unavailable",
  504: "Gateway Timeout",
  507: "Insufficient Storage",
};

/** The body of an error response (RFC 9457 problem details plus mneme's `code`). */
export interface ProblemBody {
  type: string;
  title: string;
  status: number;
  detail: string;
  code: string;
  /** Validation failures: one entry per failing JSON pointer. */
  errors?: readonly MnemeErrorDetail[];
}

/** How an error becomes a problem response. */
export interface ProblemOptions {
  /** Prefix of the `type` URI; the code is appended. */
  readonly typeBase: string;
  /** Told about every 5xx (the client sees a generic detail when the error is not a MnemeError). */
  readonly onError: ((error: unknown, request: Request) => void) | undefined;
}

/** The request an error is reported with: made only when there is an `onError` to tell. */
export type RequestOf = () => Request;

/**
 * HTTP status of a MnemeError code: mneme's own from STATUS_BY_CODE, a user
 * code's from its `defineErrorCode`; 500 for a code neither knows.
 */
export function statusOf(code: string): number {
  if (Object.hasOwn(STATUS_BY_CODE, code)) return STATUS_BY_CODE[code as MnemeErrorCode];
  return errorCodeDefinition(code)?.status ?? 500;
}

/**
 * An `application/problem+json` reply. `status` overrides the table only
 * for protocol-level answers (405 Method Not Allowed, 415 Unsupported Media Type).
 */
export function problemResponse(
  opts: Pick<ProblemOptions, "typeBase">,
  code: ErrorCode,
  detail: string,
  extra: { status?: number; headers?: Record<string, string>; errors?: readonly MnemeErrorDetail[] } = {},
): Reply {
  const status = extra.status ?? statusOf(code);
  const body: ProblemBody = { type: `${opts.typeBase}${code}`, title: TITLES[status] ?? "Error", status, detail, code };
  if (extra.errors !== undefined && extra.errors.length > 0) body.errors = extra.errors;
  return {
    status,
    headers: { "content-type": "application/problem+json", "cache-control": "no-store", ...extra.headers },
    body: JSON.stringify(body),
  };
}

/**
 * The reply for anything a route threw. A MnemeError keeps its message;
 * anything else is a 500 whose detail does not leak internals.
 */
export function errorResponse(opts: ProblemOptions, error: unknown, request: RequestOf): Reply {
  if (isMnemeError(error)) {
    const status = statusOf(error.code);
    if (status >= 500) report(opts, error, request);
    return problemResponse(opts, error.code, error.message, error.details === undefined ? {} : { errors: error.details });
  }
  report(opts, error, request);
  return problemResponse(opts, "HANDLER_FAILED", "internal error: the server could not complete the request", { status: 500 });
}

function report(opts: ProblemOptions, error: unknown, request: RequestOf): void {
  if (opts.onError === undefined) return;
  try {
    opts.onError(error, request());
  } catch {
    // A failing error hook must not turn one error response into a crash.
  }
}
