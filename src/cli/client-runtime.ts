/**
 * The part of a generated client (client.ts) that is the same for every app:
 * its types and `send`, which makes the request (credentials, tenant,
 * `wait`, Idempotency-Key, expected version), retries what is safe to
 * retry, and turns the answer into a `Result`. Emitted as source text; it
 * uses fetch and nothing else.
 */
export const CLIENT_RUNTIME = String.raw`
/** An RFC 9457 problem document as mneme/http answers it; code is the MnemeError code. */
export interface Problem {
  readonly type: string;
  readonly title: string;
  readonly status: number;
  readonly detail: string;
  readonly code: string;
  /** Validation failures: one per failing JSON pointer of the payload. */
  readonly errors?: readonly { readonly pointer: string; readonly message: string }[];
}

/** What every call answers: the value, or the problem the server answered with. */
export type Result<T> =
  | { readonly ok: true; readonly status: number; readonly value: T }
  | { readonly ok: false; readonly status: number; readonly problem: Problem };

/** The answer to a command. */
export interface CommandResponse<R = unknown> {
  readonly commandUuid: string;
  /** The events the command appended. */
  readonly events: readonly { readonly name: string; readonly version?: number; readonly aggregateUuid?: string; readonly payload?: unknown }[];
  /** What the command handler returned, when it returned something (never on a replay). */
  readonly result?: R;
  /** True when an earlier call with the same idempotency key ran it: nothing ran again. */
  readonly replayed?: true;
  /** With wait: the event handlers that failed on the command's events. */
  readonly handlerErrors?: readonly { readonly eventHandlerName: string; readonly message: string }[];
}

/** How the client reaches the app and who it is. */
export interface ClientOptions {
  /** Where the app is served, e.g. "https://todo.example" (the paths already hold the app's basePath). */
  readonly baseUrl: string;
  /** The tenant of every call that names none. */
  readonly tenantUuid?: string;
  /** The session token of a login ("<sessionUuid>.<sessionKey>"), or a function that gives the current one. */
  readonly token?: string | (() => string | undefined | Promise<string | undefined>);
  /** The identity the caller acts as (X-Identity-Uuid); authorized permissions need one. */
  readonly identityUuid?: string;
  /** fetch's credentials mode: "include" sends the session cookie of a browser (then cookies authenticate). */
  readonly credentials?: "omit" | "same-origin" | "include";
  /** Another fetch (a test's, one with a proxy); default globalThis.fetch. */
  readonly fetch?: (input: string, init: RequestInit) => Promise<Response>;
  /** Headers sent with every call. */
  readonly headers?: Readonly<Record<string, string>>;
  /** How often a call that may be repeated is retried when the server cannot be reached or answers 503. Default 2. */
  readonly retries?: number;
}

/** Options of one call. */
export interface CallOptions {
  /** The tenant of this call (default: the client's). */
  readonly tenantUuid?: string;
  readonly signal?: AbortSignal;
  /** Headers of this call. */
  readonly headers?: Readonly<Record<string, string>>;
  /** Overrides the client's retries for this call. */
  readonly retries?: number;
}

/** Options of one command. */
export interface CommandCallOptions extends CallOptions {
  /** Answer once the event handlers have applied the command's events (?wait=true). */
  readonly wait?: boolean;
  /**
   * The Idempotency-Key: a retry with the same key replays the first outcome instead of running again.
   * Default: a fresh key per call when the client has credentials and the command is not anonymous
   * (keys are kept per signed-in account), so the client's own retries never run a command twice.
   * false: no key (and then no retry either).
   */
  readonly idempotencyKey?: string | false;
  /** Optimistic concurrency: the version the target aggregate must have (else 409 CONFLICT). */
  readonly expectedVersion?: { readonly version: number; readonly aggregateUuid?: string };
}

interface Operation {
  readonly kind: "command" | "query";
  /** Domain.Name */
  readonly name: string;
  readonly path: string;
  /** Anonymous permission: no idempotency key by default (the server keeps keys per account). */
  readonly anonymous: boolean;
}

async function send<T>(options: ClientOptions, op: Operation, payload: unknown, call: CommandCallOptions = {}): Promise<Result<T>> {
  const tenantUuid = call.tenantUuid ?? options.tenantUuid;
  if (tenantUuid === undefined || tenantUuid === "") throw new TypeError(op.name + ": no tenantUuid: give one to createClient or to the call");
  let url = options.baseUrl.replace(/\/+$/, "") + op.path.replace("{tenantUuid}", encodeURIComponent(tenantUuid));
  if (op.kind === "command" && call.wait === true) url += "?wait=true";
  const headers: Record<string, string> = { accept: "application/json", "content-type": "application/json", ...options.headers, ...call.headers };
  const token = typeof options.token === "function" ? await options.token() : options.token;
  if (token !== undefined) headers["authorization"] = "Bearer " + token;
  if (options.identityUuid !== undefined) headers["x-identity-uuid"] = options.identityUuid;
  let retries = call.retries ?? options.retries ?? 2;
  if (op.kind === "command") {
    const signedIn = token !== undefined || options.credentials === "include";
    const key = call.idempotencyKey ?? (op.anonymous || !signedIn ? false : newKey());
    if (key === false) retries = 0; // without a key a repeated command could run twice
    else headers["idempotency-key"] = key;
    if (call.expectedVersion !== undefined) {
      headers["x-target-aggregate-version"] = String(call.expectedVersion.version);
      if (call.expectedVersion.aggregateUuid !== undefined) headers["x-target-aggregate-uuid"] = call.expectedVersion.aggregateUuid;
    }
  }
  const init: RequestInit = { method: "POST", headers, body: JSON.stringify(payload ?? {}) };
  if (options.credentials !== undefined) init.credentials = options.credentials;
  if (call.signal !== undefined) init.signal = call.signal;
  const fetchFn = options.fetch ?? ((input: string, i: RequestInit) => globalThis.fetch(input, i));
  for (let attempt = 0; ; attempt++) {
    let response: Response;
    try {
      response = await fetchFn(url, init);
    } catch (e) {
      if (attempt >= retries || call.signal?.aborted === true) throw e;
      await pause(attempt);
      continue;
    }
    if (response.status === 503 && attempt < retries) {
      await response.body?.cancel();
      await pause(attempt);
      continue;
    }
    return answer<T>(response);
  }
}

async function answer<T>(response: Response): Promise<Result<T>> {
  const text = await response.text();
  let body: unknown = undefined;
  try {
    body = text === "" ? undefined : JSON.parse(text);
  } catch {
    body = undefined;
  }
  if (response.ok) return { ok: true, status: response.status, value: body as T };
  const problem: Problem = isProblem(body)
    ? body
    : { type: "about:blank", title: response.statusText, status: response.status, detail: text.slice(0, 500), code: "HTTP_" + response.status };
  return { ok: false, status: response.status, problem };
}

function isProblem(v: unknown): v is Problem {
  return typeof v === "object" && v !== null && typeof (v as Problem).code === "string" && typeof (v as Problem).status === "number";
}

/** A fresh idempotency key: a random UUID. */
function newKey(): string {
  return globalThis.crypto.randomUUID();
}

/** 100 ms, 200 ms, 400 ms, ... up to 2 s between attempts. */
function pause(attempt: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, Math.min(2000, 100 * 2 ** attempt)));
}
`;
