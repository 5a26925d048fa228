/** mneme's own error codes, in a list a program can read (e.g. to refuse redefining one). */
export const MNEME_ERROR_CODES = Object.freeze([
  "UNKNOWN_COMMAND",
  "UNKNOWN_QUERY",
  "INVALID_DOMAIN",
  "PERMISSION_DENIED",
  "UNAUTHENTICATED",
  "CONFLICT",
  "NOT_FOUND",
  "VALIDATION_FAILED",
  "INVALID_PERMISSION",
  "STORE_PERMISSIONS_NOT_REGISTERED",
  "UNKNOWN_EVENT_HANDLER",
  "INVALID_ACTION",
  "INVALID_STATE",
  "RESTORE_CANCELLED",
  "UNKNOWN_SCHEMA_TYPE",
  "SSE_PRODUCER_NOT_RUNNING",
  "SSE_CONNECTION_LIMIT",
  "PAYLOAD_TOO_LARGE",
  "RATE_LIMITED",
  "INVALID_REQUEST",
  "INVALID_EVENT_HANDLER",
  "HANDLER_FAILED",
  "INVALID_EVENTS",
  "STORE_CLOSED",
  "STORE_ERROR",
  "NOT_STARTED",
  "UNAVAILABLE",
  "CSRF",
  "UPCAST_FAILED",
  "STORE_TOO_NEW",
] as const);

/**
 * mneme's own error codes: a closed list of string literals, so a table over
 * them (the HTTP status table of `mneme/http`) is checked for completeness.
 * An application adds its own with `defineErrorCode` (see `ErrorCode`).
 */
export type MnemeErrorCode = (typeof MNEME_ERROR_CODES)[number];

declare const USER_ERROR_CODE: unique symbol;

/**
 * An error code the application defined with `defineErrorCode`: the code's
 * string at run time, branded for the compiler. The brand (rather than
 * widening codes to any string) keeps typos a type error and means every user
 * code that reaches `new MnemeError` went through `defineErrorCode`, so
 * `mneme/http` knows its status.
 */
export type UserErrorCode<C extends string = string> = C & { readonly [USER_ERROR_CODE]: C };

/** Any code a MnemeError carries: one of mneme's own, or one the application defined. */
export type ErrorCode = MnemeErrorCode | UserErrorCode;

/** A user-defined error code as registered: its HTTP status and what it means. */
export interface ErrorCodeDefinition {
  readonly code: string;
  /** The HTTP status `mneme/http` answers with (400 to 599). */
  readonly status: number;
  readonly description: string;
}

/** Process-wide, and shared by duplicate installs of mneme (as the error brand is), so mneme/http sees codes defined through another copy. */
const REGISTRY_KEY = Symbol.for("mneme.errorCodes");
const registry: Map<string, ErrorCodeDefinition> = ((globalThis as Record<symbol, unknown>)[REGISTRY_KEY] ??= new Map()) as Map<
  string,
  ErrorCodeDefinition
>;
const BUILT_IN: ReadonlySet<string> = new Set(MNEME_ERROR_CODES);
const CODE = /^[A-Z][A-Z0-9_]*$/;

/**
 * Defines an error code for a domain rule, with the HTTP status `mneme/http`
 * maps it to. Returns the code, typed for `new MnemeError(code, message)` and
 * `isMnemeError(e, code)`. Defining the same code again with the same status
 * and description returns it (a module loaded twice); anything else is
 * INVALID_DOMAIN: a code that is not UPPER_SNAKE_CASE, one of mneme's own
 * codes, a status outside 400..599, or a code defined already differently.
 * @example
 * export const INSUFFICIENT_FUNDS = defineErrorCode("INSUFFICIENT_FUNDS", { status: 422, description: "The balance does not cover the amount" });
 * throw new MnemeError(INSUFFICIENT_FUNDS, `balance ${balance} < ${amount}`);
 */
export function defineErrorCode<C extends string>(code: C, opts: { status: number; description?: string }): UserErrorCode<C> {
  if (typeof code !== "string" || !CODE.test(code)) {
    throw new MnemeError(
      "INVALID_DOMAIN",
      `error code ${JSON.stringify(code)} must be UPPER_SNAKE_CASE (A-Z, 0-9, _; starting with a letter)`,
    );
  }
  if (BUILT_IN.has(code)) throw new MnemeError("INVALID_DOMAIN", `error code ${code} is one of mneme's own codes and cannot be redefined`);
  const status = opts?.status;
  if (typeof status !== "number" || !Number.isInteger(status) || status < 400 || status > 599) {
    throw new MnemeError("INVALID_DOMAIN", `error code ${code}: status must be an integer from 400 to 599, got ${JSON.stringify(status)}`);
  }
  if (opts.description !== undefined && typeof opts.description !== "string") {
    throw new MnemeError("INVALID_DOMAIN", `error code ${code}: description must be a string`);
  }
  const description = opts.description ?? code;
  const known = registry.get(code);
  if (known !== undefined) {
    if (known.status === status && known.description === description) return code as UserErrorCode<C>;
    throw new MnemeError(
      "INVALID_DOMAIN",
      `error code ${code} is defined already with status ${known.status} (${JSON.stringify(known.description)}); now with status ${status} (${JSON.stringify(description)})`,
    );
  }
  registry.set(code, Object.freeze({ code, status, description }));
  return code as UserErrorCode<C>;
}

/** The definition of a user-defined error code, or undefined (mneme's own codes and unknown ones). */
export function errorCodeDefinition(code: string): ErrorCodeDefinition | undefined {
  return registry.get(code);
}

/** Every user-defined error code, in the order they were defined. */
export function listErrorCodes(): ErrorCodeDefinition[] {
  return [...registry.values()];
}

/** True when `code` is one of mneme's own codes. */
export function isMnemeErrorCode(code: string): code is MnemeErrorCode {
  return BUILT_IN.has(code);
}

/** A problem detail attached to an error, e.g. one failing JSON pointer of a validation. */
export interface MnemeErrorDetail {
  readonly pointer?: string;
  readonly message: string;
  readonly [key: string]: unknown;
}

const BRAND = Symbol.for("mneme.error");

/**
 * The one error class of mneme. Every failure a caller can act on carries a
 * string `code`, one of mneme's own or one defined with `defineErrorCode`;
 * the HTTP status is mapped from it in `mneme/http` only.
 * @example
 * throw new MnemeError("CONFLICT", `todo ${uuid} exists already`);
 * throw new MnemeError(INSUFFICIENT_FUNDS, "the balance does not cover 120.00"); // a user code
 */
export class MnemeError extends Error {
  readonly code: ErrorCode;
  readonly details: readonly MnemeErrorDetail[] | undefined;

  constructor(code: ErrorCode, message: string, options?: { cause?: unknown; details?: readonly MnemeErrorDetail[] }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = "MnemeError";
    this.code = code;
    this.details = options?.details;
    Object.defineProperty(this, BRAND, { value: true });
  }

  toJSON(): { code: ErrorCode; message: string; details?: readonly MnemeErrorDetail[] } {
    return this.details === undefined
      ? { code: this.code, message: this.message }
      : { code: this.code, message: this.message, details: this.details };
  }
}

/**
 * True when `e` is a MnemeError (of `code`, when given: mneme's own or a user
 * code). Works across duplicate installs of mneme: it checks a global brand and
 * the code, not only `instanceof`.
 */
export function isMnemeError<C extends ErrorCode>(e: unknown, code: C): e is MnemeError & { readonly code: C };
export function isMnemeError(e: unknown, code?: ErrorCode): e is MnemeError;
export function isMnemeError(e: unknown, code?: ErrorCode): e is MnemeError {
  if (typeof e !== "object" || e === null) return false;
  const branded = e instanceof MnemeError || (e as Record<symbol, unknown>)[BRAND] === true;
  if (!branded) return false;
  return code === undefined || (e as MnemeError).code === code;
}

/** The message of anything thrown, for logs and metrics. */
export function errorMessage(e: unknown): string {
  if (e instanceof Error) return e.message;
  return typeof e === "string" ? e : (JSON.stringify(e) ?? String(e));
}

/** The detail message of the CONFLICT a duplicate gets while its command runs on another live instance. */
export const COMMAND_IN_PROGRESS = "in progress";

/**
 * True when `e` says the command is in progress on another live instance (a
 * claim that holds): no fault of the request, which only has to be sent again
 * later. Retrying callers (consumers, the reactions' outbox) count no attempt for it.
 */
export function isCommandInProgress(e: unknown): boolean {
  return isMnemeError(e, "CONFLICT") && e.details?.[0]?.message === COMMAND_IN_PROGRESS;
}
