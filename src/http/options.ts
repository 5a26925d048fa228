import { MnemeError } from "../model/errors.js";
import { type HealthOptions, resolveHealthOptions } from "../app/health.js";
import type { CredentialResolver } from "./credentials.js";
import { resolveOpenApiOptions } from "./openapi-route.js";
import type { OpenApiServeOptions } from "./openapi-types.js";
import type { ApiViewerOptions } from "./api-viewer.js";
import type { HttpRouteModule } from "./route.js";
import type { RateLimitOptions, ResolvedHttpOptions, SessionCookieOptions, SseOptions } from "./settings.js";

/** Options of createHttpHandler. Every limit has a default; see docs/http.md. */
export interface HttpHandlerOptions {
  /**
   * Route modules served after the generic routes, in order, e.g.
   * `accountRoutes()` of mneme/defaults (login, accounts, sessions). Default none.
   */
  readonly modules?: readonly HttpRouteModule[];
  /**
   * Turns presented credentials into a sender. Default: the first module's
   * `resolveCredentials`; with none, a request that presents credentials is
   * answered 500 INVALID_DOMAIN (a setup mistake, not the client's).
   */
  readonly resolveCredentials?: CredentialResolver;
  /** A prefix every route sits under, e.g. "/mneme" (then `/mneme/api/...`). Default "". */
  readonly basePath?: string;
  /** Largest request body in bytes; then 413 PAYLOAD_TOO_LARGE. Default 1 MiB. */
  readonly maxBodyBytes?: number;
  /** Deepest nesting of a JSON body; then 400. Default 64. */
  readonly maxJsonDepth?: number;
  /** Page size of list endpoints when none is given. Default 50. */
  readonly defaultPageSize?: number;
  /** Largest page size a list endpoint accepts; then 400. Default 1000. */
  readonly maxPageSize?: number;
  readonly sse?: SseOptions;
  /** Store endpoints' rate limit per session, or false for none. Default 120 requests per 60 s. */
  readonly storeRateLimit?: RateLimitOptions | false;
  /** Set a `session` (and, with one identity, `identity`) cookie on login. Default false. */
  readonly sessionCookies?: boolean | SessionCookieOptions;
  /** Prefix of a problem's `type` URI (the code is appended). Default "urn:mneme:error:". */
  readonly problemTypeBase?: string;
  /** Called with every error that became a 5xx, e.g. to log it. */
  readonly onError?: (error: unknown, request: Request) => void;
  /** Clock of the rate limiter (ms). Default Date.now. */
  readonly now?: () => number;
  /**
   * Origins (`"https://app.example"`) besides the request's own from which a
   * state-changing request authenticated by the session cookie alone is
   * accepted; any other gets 403 CSRF. Default none.
   */
  readonly allowedOrigins?: readonly string[];
  /**
   * `GET /health/live` and `GET /health/ready` (under basePath, no credentials):
   * the thresholds of checkLiveness / checkReadiness, or false for no health
   * endpoints. Default: on, with HEALTH_DEFAULTS.
   */
  readonly health?: HealthOptions | false;
  /** Serve the Runtime dashboard at `/dashboard/` (docs/dashboard.md). Default false: `/dashboard/` is a 404. */
  readonly dashboard?: boolean;
  /**
   * `GET <basePath>/api/openapi.json`, the OpenAPI 3.1 document of these
   * routes (docs/clients.md): `true` (the default) serves it to anyone,
   * `{ access: "authenticated" }` to a signed-in caller only, `false` not at all.
   */
  readonly openapi?: boolean | OpenApiServeOptions;
  /**
   * Serve Swagger UI over the OpenAPI document at `<basePath>/api/docs/`
   * (docs/http.md, "API viewer"): `true` with the installed optional package
   * `swagger-ui-dist`, or `{ swaggerUiDir }` with a copy of its files.
   * Default false: `/api/docs` is a 404.
   */
  readonly apiViewer?: boolean | ApiViewerOptions;
}

/** The defaults, in one place (docs/http.md lists them). */
export const HTTP_DEFAULTS = Object.freeze({
  maxBodyBytes: 1024 * 1024,
  maxJsonDepth: 64,
  defaultPageSize: 50,
  maxPageSize: 1000,
  sse: Object.freeze({ maxConnections: 100, heartbeatMs: 15_000, maxQueuedEvents: 1000, retryMs: 2000 }),
  storeRateLimit: Object.freeze({ requests: 120, windowMs: 60_000 }),
  problemTypeBase: "urn:mneme:error:",
});

/** Merges the options with the defaults and validates them (INVALID_REQUEST on a bad value). */
export function resolveHttpOptions(opts: HttpHandlerOptions): ResolvedHttpOptions & { readonly modules: readonly HttpRouteModule[] } {
  if (typeof opts !== "object" || opts === null) throw new MnemeError("INVALID_REQUEST", "createHttpHandler options must be an object");
  const modules = routeModules(opts.modules);
  const resolveCredentials =
    opts.resolveCredentials ?? modules.find((m) => m.resolveCredentials !== undefined)?.resolveCredentials ?? noResolver;
  if (typeof resolveCredentials !== "function") throw new MnemeError("INVALID_REQUEST", "resolveCredentials must be a function");
  const basePath = opts.basePath ?? "";
  if (typeof basePath !== "string" || (basePath !== "" && (!basePath.startsWith("/") || basePath.endsWith("/")))) {
    throw new MnemeError("INVALID_REQUEST", `basePath must be "" or start with "/" and not end with one (got ${JSON.stringify(basePath)})`);
  }
  const sse = { ...HTTP_DEFAULTS.sse, ...opts.sse };
  const rate = opts.storeRateLimit === undefined ? HTTP_DEFAULTS.storeRateLimit : opts.storeRateLimit;
  if (rate !== false) {
    positiveInt("storeRateLimit.requests", rate.requests);
    positiveInt("storeRateLimit.windowMs", rate.windowMs);
  }
  const cookies =
    opts.sessionCookies === undefined || opts.sessionCookies === false
      ? false
      : { secure: true, sameSite: "Lax" as const, path: "/", ...(opts.sessionCookies === true ? {} : opts.sessionCookies) };
  if (cookies !== false && !["Strict", "Lax", "None"].includes(cookies.sameSite)) {
    throw new MnemeError("INVALID_REQUEST", "sessionCookies.sameSite must be Strict, Lax or None");
  }
  const resolved: ResolvedHttpOptions & { readonly modules: readonly HttpRouteModule[] } = {
    modules,
    resolveCredentials,
    basePath,
    maxBodyBytes: positiveInt("maxBodyBytes", opts.maxBodyBytes ?? HTTP_DEFAULTS.maxBodyBytes),
    maxJsonDepth: positiveInt("maxJsonDepth", opts.maxJsonDepth ?? HTTP_DEFAULTS.maxJsonDepth),
    defaultPageSize: positiveInt("defaultPageSize", opts.defaultPageSize ?? HTTP_DEFAULTS.defaultPageSize),
    maxPageSize: positiveInt("maxPageSize", opts.maxPageSize ?? HTTP_DEFAULTS.maxPageSize),
    sse: {
      maxConnections: positiveInt("sse.maxConnections", sse.maxConnections),
      heartbeatMs: positiveInt("sse.heartbeatMs", sse.heartbeatMs),
      maxQueuedEvents: positiveInt("sse.maxQueuedEvents", sse.maxQueuedEvents),
      retryMs: positiveInt("sse.retryMs", sse.retryMs),
    },
    storeRateLimit: rate,
    sessionCookies: cookies,
    problemTypeBase: opts.problemTypeBase ?? HTTP_DEFAULTS.problemTypeBase,
    onError: opts.onError,
    now: opts.now ?? Date.now,
    allowedOrigins: originSet(opts.allowedOrigins ?? []),
    health: healthOptions(opts.health),
    dashboard: opts.dashboard ?? false,
    openapi: resolveOpenApiOptions(opts.openapi),
    apiViewer: apiViewerOptions(opts.apiViewer),
  };
  if (typeof resolved.dashboard !== "boolean") throw new MnemeError("INVALID_REQUEST", "dashboard must be true or false");
  if (resolved.defaultPageSize > resolved.maxPageSize)
    throw new MnemeError("INVALID_REQUEST", "defaultPageSize must not exceed maxPageSize");
  return resolved;
}

/** The `apiViewer` option, checked: a boolean or `{ swaggerUiDir? }`. */
function apiViewerOptions(option: boolean | ApiViewerOptions | undefined): ApiViewerOptions | false {
  if (option === undefined || option === false) return false;
  if (option === true) return {};
  const dir: unknown = typeof option === "object" && option !== null ? option.swaggerUiDir : undefined;
  const keys = typeof option === "object" && option !== null ? Object.keys(option) : ["?"];
  if (keys.some((k) => k !== "swaggerUiDir") || (dir !== undefined && typeof dir !== "string" && !(dir instanceof URL)))
    throw new MnemeError("INVALID_REQUEST", "apiViewer must be true, false or { swaggerUiDir?: string | URL }");
  return dir === undefined ? {} : { swaggerUiDir: dir };
}

/** The `modules` option, checked: an array of `{ name, routes }`. */
function routeModules(modules: readonly HttpRouteModule[] | undefined): readonly HttpRouteModule[] {
  if (modules === undefined) return [];
  const ok = (m: unknown) =>
    typeof m === "object" && m !== null && typeof (m as HttpRouteModule).name === "string" && Array.isArray((m as HttpRouteModule).routes);
  if (!Array.isArray(modules) || !modules.every(ok))
    throw new MnemeError(
      "INVALID_REQUEST",
      "modules must be an array of route modules ({ name, routes }), e.g. [accountRoutes()] of mneme/defaults",
    );
  return modules;
}

/** The resolver when neither the options nor a module give one: presented credentials are a setup mistake. */
const noResolver: CredentialResolver = () =>
  Promise.reject(
    new MnemeError(
      "INVALID_DOMAIN",
      "mneme/http: credentials were presented but nothing resolves them: pass createHttpHandler(facade, { resolveCredentials }) or a route module that has one, such as accountRoutes() of mneme/defaults",
    ),
  );

/** `false`, or the health thresholds (HEALTH_DEFAULTS fill the gaps). */
function healthOptions(health: HealthOptions | false | undefined): Required<HealthOptions> | false {
  if (health === false) return false;
  if (health !== undefined && (typeof health !== "object" || health === null))
    throw new MnemeError("INVALID_REQUEST", "health must be false or an object of thresholds ({ maxLag, timeoutMs, maxEventLoopDelayMs })");
  return resolveHealthOptions(health);
}

/** Each entry must be an http(s) origin: scheme, host and optional port, nothing after (a trailing "/" is tolerated). */
function originSet(list: readonly string[]): ReadonlySet<string> {
  if (!Array.isArray(list))
    throw new MnemeError("INVALID_REQUEST", 'allowedOrigins must be an array of origins such as "https://app.example"');
  const out = new Set<string>();
  for (const o of list as unknown[]) {
    const origin = bareOrigin(o);
    if (origin === undefined)
      throw new MnemeError("INVALID_REQUEST", `allowedOrigins: ${JSON.stringify(o)} is not an origin such as "https://app.example"`);
    out.add(origin);
  }
  return out;
}

function bareOrigin(o: unknown): string | undefined {
  if (typeof o !== "string") return undefined;
  let u: URL;
  try {
    u = new URL(o);
  } catch {
    return undefined;
  }
  const bare = u.pathname === "/" && !/[?#]/.test(o) && u.username === "" && u.password === "";
  return bare && (u.protocol === "http:" || u.protocol === "https:") ? u.origin : undefined;
}

function positiveInt(name: string, v: unknown): number {
  if (typeof v !== "number" || !Number.isSafeInteger(v) || v < 1)
    throw new MnemeError("INVALID_REQUEST", `${name} must be a positive integer (got ${JSON.stringify(v)})`);
  return v;
}
