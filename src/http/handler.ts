import { isMnemeError, MnemeError } from "../model/errors.js";
import type { Facade } from "../app/facade.js";
import type { MessageRef } from "../model/facade-handle.js";
import type { RequestContext } from "../model/types.js";
import { checkLiveness, checkReadiness, type HealthOptions } from "../app/health.js";
import { readJsonBody, UnsupportedMediaType } from "./body.js";
import { type Authentication, readCredentials } from "./credentials.js";
import { ApiViewer } from "./api-viewer.js";
import { Dashboard } from "./dashboard.js";
import { ConnectionGauge, TokenBucketLimiter } from "./limits.js";
import { type HttpHandlerOptions, resolveHttpOptions } from "./options.js";
import { fetchInbound, type InboundRequest, type Reply, toResponse, withDirectHandler } from "./exchange.js";
import { errorResponse, problemResponse } from "./problem.js";
import { checkOrigin, requestContext } from "./request-context.js";
import { jsonResponse } from "./responses.js";
import { OPENAPI_PATH } from "./openapi.js";
import { OpenApiEndpoint } from "./openapi-route.js";
import { buildRoutes, isStoreMessage, type ServedRoute } from "./routes.js";
import type { RouteContext } from "./route.js";
import type { Router } from "./router.js";
import type { ResolvedHttpOptions } from "./settings.js";

/** A Fetch API request handler: mount it in node:http, Express, Fastify, Hono, Deno or Bun. */
export type HttpHandler = (request: Request) => Promise<Response>;

const HEALTH_LIVE = "/health/live";
const HEALTH_READY = "/health/ready";
const STATE_CHANGING: ReadonlySet<string> = new Set(["POST", "PUT", "PATCH", "DELETE"]);

/**
 * Serves a facade over HTTP: the Runtime endpoints, generic command and query
 * endpoints, the system-event stream, and the routes of the `modules` given
 * (the built-in Account domain's come as `accountRoutes()` of mneme/defaults).
 * Every route goes through the facade's permission check; errors are
 * problem+json. toNodeListener serves the same routes straight from
 * node:http, without a Fetch Request and Response per request.
 * @example
 * const handler = createHttpHandler(facade, { modules: [accountRoutes()] });
 * createServer(toNodeListener(handler)).listen(3000);
 */
export function createHttpHandler(facade: Facade, options: HttpHandlerOptions = {}): HttpHandler {
  const core = new HttpCore(facade, options);
  const handler = (request: Request): Promise<Response> => core.fetch(request);
  return withDirectHandler(handler, { answer: (request) => core.answer(request, true) });
}

/** The state of one handler (routes, limits, the dashboard) and the steps of answering a request. */
class HttpCore {
  readonly #facade: Facade;
  readonly #opts: ResolvedHttpOptions;
  readonly #router: Router<ServedRoute>;
  readonly #sseGauge: ConnectionGauge;
  readonly #limiter: TokenBucketLimiter | undefined;
  readonly #problems: { typeBase: string; onError: ResolvedHttpOptions["onError"] };
  readonly #dashboard: Dashboard | undefined;
  readonly #apiViewer: ApiViewer | undefined;
  readonly #openapi: OpenApiEndpoint | undefined;

  constructor(facade: Facade, options: HttpHandlerOptions) {
    const opts = resolveHttpOptions(options);
    this.#facade = facade;
    this.#opts = opts;
    this.#router = buildRoutes(opts.modules);
    this.#sseGauge = new ConnectionGauge(opts.sse.maxConnections);
    const rate = opts.storeRateLimit;
    this.#limiter = rate === false ? undefined : new TokenBucketLimiter(rate.requests, rate.windowMs, opts.now);
    this.#problems = { typeBase: opts.problemTypeBase, onError: opts.onError };
    this.#dashboard = opts.dashboard ? new Dashboard({ problemTypeBase: opts.problemTypeBase }) : undefined;
    this.#apiViewer = opts.apiViewer === false ? undefined : new ApiViewer({ ...opts.apiViewer, problemTypeBase: opts.problemTypeBase });
    this.#openapi = opts.openapi === false ? undefined : new OpenApiEndpoint(facade, opts, opts.openapi);
    // The document's path is answered before the routes: a module route there would never be reached.
    if (this.#openapi !== undefined && this.#router.match("GET", OPENAPI_PATH).kind === "found")
      throw new MnemeError(
        "INVALID_REQUEST",
        `createHttpHandler: a route module serves GET ${OPENAPI_PATH}, the OpenAPI document's path; pass openapi: false to serve your own`,
      );
  }

  /** The Fetch API entry point. Chained with `then`, not awaited in an async function: one promise less per request. */
  fetch(request: Request): Promise<Response> {
    // Routes served through the Fetch API only belong here, before mneme's own: on node:http,
    // toNodeListener hands every request that none of mneme's routes matches to this function.
    let inbound: InboundRequest;
    try {
      inbound = fetchInbound(request);
    } catch (e) {
      return Promise.resolve(toResponse(errorResponse(this.#problems, e, () => request)));
    }
    try {
      const dashboard = this.#dashboard;
      const viewer = this.#apiViewer;
      const staticPath = dashboard === undefined && viewer === undefined ? undefined : belowBasePath(inbound.pathname, this.#opts.basePath);
      if (staticPath !== undefined && dashboard !== undefined && Dashboard.owns(staticPath)) return dashboard.respond(request, staticPath);
      if (staticPath !== undefined && viewer !== undefined && ApiViewer.owns(staticPath)) return viewer.respond(request, staticPath);
      return this.answer(inbound, false).then((reply) => toResponse(reply ?? this.#notFound(inbound.pathname)));
    } catch (e) {
      return Promise.reject(e as Error);
    }
  }

  /**
   * The reply of a matching route (errors as problems), or undefined when no
   * route matches. Never rejects. Chained with `then`, not awaited in an
   * async function: every promise costs the AsyncLocalStorage hooks of the
   * process, and each await adds one.
   */
  answer(request: InboundRequest, direct: boolean): Promise<Reply | undefined> {
    // HEAD is GET without the body: same status and headers (a stream, such as SSE, is closed at once).
    const head = request.method === "HEAD";
    let handled: Promise<Reply> | Reply | undefined;
    try {
      handled = this.#handle(request, head ? "GET" : request.method, direct);
    } catch (e) {
      handled = this.#failed(request, e);
    }
    // An unmatched path or a reply made at once costs one settled promise.
    if (!isThenable(handled)) return head ? headOnly(handled) : Promise.resolve(handled);
    const reply = Promise.resolve(handled).then(undefined, (e: unknown) => this.#failed(request, e));
    return head ? reply.then(headOnly) : reply;
  }

  /** The problem reply of a failed request (415 for a body that is not JSON). */
  #failed(request: InboundRequest, e: unknown): Reply {
    return e instanceof UnsupportedMediaType
      ? problemResponse(this.#problems, "INVALID_REQUEST", e.message, { status: 415 })
      : errorResponse(this.#problems, e, () => request.toRequest());
  }

  /** Undefined when no route matches the path (the caller answers 404, or serves it otherwise). */
  #handle(request: InboundRequest, method: string, direct: boolean): Promise<Reply> | Reply | undefined {
    const path = belowBasePath(request.pathname, this.#opts.basePath);
    if (path === undefined) return undefined;
    const health = this.#opts.health;
    if (health !== false && (path === HEALTH_LIVE || path === HEALTH_READY)) return this.#health(path, method, health);
    if (path === OPENAPI_PATH && this.#openapi !== undefined) return this.#openApiDocument(request, method, this.#openapi);
    let match;
    try {
      match = this.#router.match(method, path);
    } catch (e) {
      // A path no route can match (a malformed escape): on node:http the Fetch handler decides, as for any other.
      if (direct) return undefined;
      throw e;
    }
    if (match.kind === "not-found") return undefined;
    if (match.kind === "method-not-allowed") return this.#methodNotAllowed(method, path, match.allow);
    return this.#serve(request, method, match.value, match.params);
  }

  /**
   * A matched route: authentication, CSRF, session and rate-limit checks, then
   * the route's code. Throws (or rejects) what the route throws.
   */
  #serve(request: InboundRequest, method: string, served: ServedRoute, params: Readonly<Record<string, string>>): Promise<Reply> | Reply {
    const creds = readCredentials(request.headers);
    if (creds === undefined || typeof creds === "string") return this.#authenticated(request, method, served, params, unresolved(creds));
    // One promise for the resolver's answer: the steps after it run in its callback, not after an await.
    return Promise.resolve(this.#opts.resolveCredentials(this.#facade, creds)).then((resolved) =>
      this.#authenticated(request, method, served, params, authenticated(request, resolved)),
    );
  }

  #authenticated(
    request: InboundRequest,
    method: string,
    served: ServedRoute,
    params: Readonly<Record<string, string>>,
    auth: Authentication,
  ): Promise<Reply> | Reply {
    const { route, fixed } = served;
    const guard = fixed?.guard ?? route.guard(params);
    // Store access is limited the same way whichever route reaches it (the store endpoints or the generic ones).
    const storeAccess = fixed?.storeAccess ?? isStoreMessage(guard);
    if (auth.state === "valid" && auth.via === "cookie" && STATE_CHANGING.has(method)) checkOrigin(request, this.#opts.allowedOrigins);
    if (auth.state !== "valid" && (route.session === true || storeAccess || this.#needsSession(guard))) return this.#unauthenticated(auth);
    if (storeAccess) {
      const limited = this.#rateLimited(auth);
      if (limited !== undefined) return limited;
    }
    const reqCtx = requestContext(request.headers, auth.reqCtx, params, route.concurrencyHeaders === true);
    const ctx = new RequestRouteContext(this.#facade, this.#opts, this.#sseGauge, request, params, reqCtx, auth);
    if (auth.state === "valid") return route.run(ctx);
    // Without a valid session, a denial means "authenticate first", not "you may not".
    const denied = (e: unknown): Reply => {
      if (isMnemeError(e, "PERMISSION_DENIED")) return this.#unauthenticated(auth);
      throw e;
    };
    let out: Promise<Reply>;
    try {
      out = route.run(ctx);
    } catch (e) {
      return denied(e);
    }
    return Promise.resolve(out).then(undefined, denied);
  }

  #needsSession(ref: MessageRef): boolean {
    const p = this.#facade.permissions.get(ref.domain, ref.name);
    // Unknown commands get 401 too, so an anonymous caller learns nothing about what exists.
    if (p === undefined) return true;
    if (p.funcSet) return false;
    return p.level !== "Anonymous";
  }

  /** 429 when the session has used up its store requests; undefined when it may go on. */
  #rateLimited(auth: Authentication): Reply | undefined {
    const verdict = this.#limiter?.take(auth.reqCtx.senderSessionUuid ?? "");
    if (verdict === undefined || verdict.allowed) return undefined;
    const detail = `too many store requests for this session; retry in ${verdict.retryAfterSeconds} s`;
    return problemResponse(this.#problems, "RATE_LIMITED", detail, { headers: { "retry-after": String(verdict.retryAfterSeconds) } });
  }

  #unauthenticated(auth: Authentication): Reply {
    const detail =
      auth.state === "invalid"
        ? `the credentials are not valid: ${auth.reason}`
        : "this route needs a session: send `Authorization: Bearer <sessionUuid>.<sessionKey>` (and X-Identity-Uuid), or the session cookie";
    return problemResponse(this.#problems, "UNAUTHENTICATED", detail, { headers: { "www-authenticate": "Bearer" } });
  }

  /** 204 with `Allow` for OPTIONS, else 405. */
  #methodNotAllowed(method: string, path: string, allowed: readonly string[]): Reply {
    const allow = [...allowed, "OPTIONS"].join(", ");
    if (method === "OPTIONS") return { status: 204, headers: { allow } };
    return problemResponse(this.#problems, "INVALID_REQUEST", `${method} is not allowed on ${path}; allowed: ${allow}`, {
      status: 405,
      headers: { allow },
    });
  }

  /** The health endpoints: no credentials, 200 when every check passes, else 503; the report says which failed. */
  async #health(path: string, method: string, thresholds: HealthOptions): Promise<Reply> {
    if (method !== "GET") return this.#methodNotAllowed(method, path, ["GET", "HEAD"]);
    const report = path === HEALTH_LIVE ? await checkLiveness(thresholds) : await checkReadiness(this.#facade, thresholds);
    return jsonResponse(report.status === "pass" ? 200 : 503, report);
  }

  /** The OpenAPI document (openapi-route.ts): GET and HEAD only. */
  #openApiDocument(request: InboundRequest, method: string, endpoint: OpenApiEndpoint): Promise<Reply> | Reply {
    if (method !== "GET") return this.#methodNotAllowed(method, OPENAPI_PATH, ["GET", "HEAD"]);
    return endpoint.answer(request, (reason) => this.#unauthenticated(unresolved(reason ?? undefined)));
  }

  #notFound(path: string): Reply {
    return problemResponse(this.#problems, "NOT_FOUND", `no route ${JSON.stringify(path.slice(0, 200))}; docs/http.md lists the routes`);
  }
}

/**
 * What a route's code receives: one object per request, its body read at most
 * once.
 */
class RequestRouteContext implements RouteContext {
  #bodyRead: Promise<unknown> | undefined;
  #rawBody: (() => Promise<unknown>) | undefined;
  #body: (() => Promise<unknown>) | undefined;

  constructor(
    readonly facade: Facade,
    readonly options: ResolvedHttpOptions,
    readonly sseGauge: ConnectionGauge,
    readonly request: InboundRequest,
    readonly params: Readonly<Record<string, string>>,
    readonly reqCtx: RouteContext["reqCtx"],
    readonly auth: Authentication,
  ) {}

  // Bound, so a route may take them off ctx (`const { body } = ctx`); made when first asked for
  // (a GET route never is), not two closures per request.
  get rawBody(): () => Promise<unknown> {
    return (this.#rawBody ??= this.#readRaw.bind(this));
  }

  get body(): () => Promise<unknown> {
    return (this.#body ??= this.#readBody.bind(this));
  }

  #readRaw(): Promise<unknown> {
    const { maxBodyBytes: maxBytes, maxJsonDepth: maxDepth } = this.options;
    return (this.#bodyRead ??= readJsonBody(this.request, { maxBytes, maxDepth }));
  }

  #readBody(): Promise<unknown> {
    return this.#readRaw().then(orEmpty);
  }
}

function isThenable(v: unknown): v is PromiseLike<unknown> {
  return typeof v === "object" && v !== null && typeof (v as { then?: unknown }).then === "function";
}

/** A HEAD answer: the GET's status and headers, its stream (if any) closed. */
async function headOnly(reply: Reply | undefined): Promise<Reply | undefined> {
  if (reply === undefined) return undefined;
  if (typeof reply.body === "object") await reply.body.cancel().catch(() => undefined);
  return { status: reply.status, headers: reply.headers };
}

/** An empty body as the empty payload. */
function orEmpty(body: unknown): unknown {
  return body ?? {};
}

/** No credentials, or credentials that cannot be read (`reason`). */
function unresolved(reason: string | undefined): Authentication {
  return reason === undefined ? { state: "none", reqCtx: {} } : { state: "invalid", reqCtx: {}, reason };
}

/** What the credential resolver answered for readable credentials. */
function authenticated(request: InboundRequest, resolved: RequestContext | undefined): Authentication {
  if (resolved === undefined)
    return {
      state: "invalid",
      reqCtx: {},
      reason: "the session is unknown, expired or signed out, or the identity is not the account's",
    };
  // readCredentials takes the token from the Authorization header when there is one, else from the cookie.
  return { state: "valid", reqCtx: resolved, via: request.headers.get("authorization") === null ? "cookie" : "header" };
}

/** The path below basePath; undefined when it is not below it. */
function belowBasePath(path: string, basePath: string): string | undefined {
  if (basePath === "") return path;
  return path === basePath || path.startsWith(`${basePath}/`) ? path.slice(basePath.length) || "/" : undefined;
}
