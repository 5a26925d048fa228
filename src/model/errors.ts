/**
 * The one error class of mneme. Every failure a caller can act on carries a
 * string-literal `code`; HTTP status is mapped from it in `mneme/http` only.
 */
export type MnemeErrorCode =
  | "UNKNOWN_COMMAND"
  | "UNKNOWN_QUERY"
  | "INVALID_DOMAIN"
  | "PERMISSION_DENIED"
  | "UNAUTHENTICATED"
  | "CONFLICT"
  | "NOT_FOUND"
  | "VALIDATION_FAILED"
  | "INVALID_PERMISSION"
  | "STORE_PERMISSIONS_NOT_REGISTERED"
  | "UNKNOWN_EVENT_HANDLER"
  | "INVALID_ACTION"
  | "INVALID_STATE"
  | "RESTORE_CANCELLED"
  | "UNKNOWN_SCHEMA_TYPE"
  | "SSE_PRODUCER_NOT_RUNNING"
  | "SSE_CONNECTION_LIMIT"
  | "PAYLOAD_TOO_LARGE"
  | "RATE_LIMITED"
  | "INVALID_REQUEST"
  | "INVALID_EVENT_HANDLER"
  | "HANDLER_FAILED"
  | "INVALID_EVENTS"
  | "STORE_CLOSED"
  | "STORE_ERROR"
  | "NOT_STARTED"
  | "UNAVAILABLE"
  | "CSRF";

/** A problem detail attached to an error, e.g. one failing JSON pointer of a validation. */
export interface MnemeErrorDetail {
  readonly pointer?: string;
  readonly message: string;
  readonly [key: string]: unknown;
}

const BRAND = Symbol.for("mneme.error");

/**
 * @example
 * throw new MnemeError("CONFLICT", `todo ${uuid} exists already`);
 */
export class MnemeError extends Error {
  readonly code: MnemeErrorCode;
  readonly details: readonly MnemeErrorDetail[] | undefined;

  constructor(code: MnemeErrorCode, message: string, options?: { cause?: unknown; details?: readonly MnemeErrorDetail[] }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = "MnemeError";
    this.code = code;
    this.details = options?.details;
    Object.defineProperty(this, BRAND, { value: true });
  }

  toJSON(): { code: MnemeErrorCode; message: string; details?: readonly MnemeErrorDetail[] } {
    return this.details === undefined
      ? { code: this.code, message: this.message }
      : { code: this.code, message: this.message, details: this.details };
  }
}

/**
 * True when `e` is a MnemeError (of `code`, when given). Works across duplicate
 * installs of mneme: it checks a global brand and the code, not only `instanceof`.
 */
export function isMnemeError(e: unknown, code?: MnemeErrorCode): e is MnemeError {
  if (typeof e !== "object" || e === null) return false;
  const branded = e instanceof MnemeError || (e as Record<symbol, unknown>)[BRAND] === true;
  if (!branded) return false;
  return code === undefined || (e as MnemeError).code === code;
}

/** The message of anything thrown, for logs and metrics. */
export function errorMessage(e: unknown): string {
  if (e instanceof Error) return e.message;
  return typeof e === "string" ? e : JSON.stringify(e) ?? String(e);
}
