import { isMnemeError, MnemeError } from "../model/errors.js";
import type { Facade } from "../app/facade.js";
import type { MessageRef } from "../model/facade-handle.js";
import type { RequestContext } from "../model/types.js";
import { resolveCredentials } from "../defaults/credentials.js";
import { STORE_MESSAGES } from "../runtime/runtime-domain.js";
import { checkLiveness, checkReadiness, type HealthOptions } from "../app/health.js";
import { readJsonBody, UnsupportedMediaType } from "./body.js";
import { type Authentication, readCredentials } from "./credentials.js";
import { Dashboard } from "./dashboard.js";
import { ConnectionGauge, TokenBucketLimiter } from "./limits.js";
import { type CredentialResolver, type HttpHandlerOptions, resolveHttpOptions } from "./options.js";
import { fetchInbound, type HeaderReader, type InboundRequest, type Reply, toResponse, withDirectHandler } from "./exchange.js";
import { errorResponse, problemResponse } from "./problem.js";
import { jsonResponse } from "./responses.js";
import { buildRoutes, type Route, type RouteContext } from "./routes.js";
import type { RouteMatch } from "./router.js";
import { cleanTraceState, parseTraceParent } from "../observability/trace-context.js";

/** A Fetch API request handler: mount it in node:http, Express, Fastify, Hono, Deno or Bun. */
export type HttpHandler = (request: Request) => Promise<Response>;

/** The built-in Account domain's resolver; a facade without registerDefaults is a setup mistake (500), not the client's. */
const defaultResolver: CredentialResolver = async (facade, creds) => {
  try {
    return await resolveCredentials(facade, creds);
  } catch (e) {
    if (isMnemeError(e, "INVALID_STATE"))
      throw new MnemeError("INVALID_DOMAIN", `mneme/http: ${e.message}, or pass createHttpHandler(facade, { resolveCredentials })`, {
        cause: e,
      });
    throw e;
  }
};

const HEALTH_LIVE = "/health/live";
const HEALTH_READY = "/health/ready";
const STATE_CHANGING: ReadonlySet<string> = new Set(["POST", "PUT", "PATCH", "DELETE"]);
const TRACEPARENT = /^[\da-f]{2}-([\da-f]{32})-[\da-f]{16}-[\da-f]{2}$/;

/**
 * Serves a facade over HTTP: the Runtime endpoints, generic command and query
 * endpoints, the Account endpoints and the system-event stream. Every route
 * goes through the facade's permission check; errors are problem+json.
 * toNodeListener serves the same routes straight from node:http, without a
 * Fetch Request and Response per request.
 * @example
 * const handler = createHttpHandler(facade);
 * createServer(toNodeListener(handler)).listen(3000);
 */
export function createHttpHandler(facade: Facade, options: HttpHandlerOptions = {}): HttpHandler {
  const opts = resolveHttpOptions(options, defaultResolver);
  const router = buildRoutes();
  const sseGauge = new ConnectionGauge(opts.sse.maxConnections);
  const limiter =
    opts.storeRateLimit === false
      ? undefined
      : new TokenBucketLimiter(opts.storeRateLimit.requests, opts.storeRateLimit.windowMs, opts.now);
  const problems = { typeBase: opts.problemTypeBase, onError: opts.onError };
  const dashboard = opts.dashboard ? new Dashboard({ problemTypeBase: opts.problemTypeBase }) : undefined;

  /** Undefined when no route matches the path (the caller answers 404, or serves it otherwise). */
  const handle = async (request: InboundRequest, method: string, direct: boolean): Promise<Reply | undefined> => {
    let path = request.pathname;
    if (opts.basePath !== "") {
      if (path !== opts.basePath && !path.startsWith(`${opts.basePath}/`)) return undefined;
      path = path.slice(opts.basePath.length) || "/";
    }
    if (opts.health !== false && (path === HEALTH_LIVE || path === HEALTH_READY)) return health(path, method, opts.health);
    let match: RouteMatch<Route>;
    try {
      match = router.match(method, path);
    } catch (e) {
      // A path no route can match (a malformed escape): on node:http the Fetch handler decides, as for any other.
      if (direct) return undefined;
      throw e;
    }
    if (match.kind === "not-found") return undefined;
    if (match.kind === "method-not-allowed") {
      const allow = [...match.allow, "OPTIONS"].join(", ");
      if (method === "OPTIONS") return { status: 204, headers: { allow } };
      return problemResponse(problems, "INVALID_REQUEST", `${method} is not allowed on ${path}; allowed: ${allow}`, {
        status: 405,
        headers: { allow },
      });
    }
    const route = match.value;
    const params = match.params;
    const guard = route.guard(params);
    // Store access is limited the same way whichever route reaches it (the store endpoints or the generic ones).
    const storeAccess = isStoreMessage(guard);
    const auth = await authenticate(request);
    if (auth.state === "valid" && auth.via === "cookie" && STATE_CHANGING.has(method)) checkOrigin(request);
    if (auth.state !== "valid" && (route.session === true || storeAccess || needsSession(guard))) return unauthenticated(auth);
    if (storeAccess && limiter !== undefined) {
      const verdict = limiter.take(auth.reqCtx.senderSessionUuid ?? "");
      if (!verdict.allowed) {
        return problemResponse(
          problems,
          "RATE_LIMITED",
          `too many store requests for this session; retry in ${verdict.retryAfterSeconds} s`,
          {
            headers: { "retry-after": String(verdict.retryAfterSeconds) },
          },
        );
      }
    }
    const reqCtx = requestContext(request.headers, auth.reqCtx, params, route.concurrencyHeaders === true);
    let bodyRead: Promise<unknown> | undefined;
    const rawBody = () => (bodyRead ??= readJsonBody(request, { maxBytes: opts.maxBodyBytes, maxDepth: opts.maxJsonDepth }));
    const ctx: RouteContext = {
      request,
      params,
      facade,
      reqCtx,
      auth,
      options: opts,
      sseGauge,
      rawBody,
      body: async () => (await rawBody()) ?? {},
    };
    try {
      return await route.run(ctx);
    } catch (e) {
      // Without a valid session, a denial means "authenticate first", not "you may not".
      if (auth.state !== "valid" && isMnemeError(e, "PERMISSION_DENIED")) return unauthenticated(auth);
      throw e;
    }
  };

  async function authenticate(request: InboundRequest): Promise<Authentication> {
    const creds = readCredentials(request.headers);
    if (creds === undefined) return { state: "none", reqCtx: {} };
    if (typeof creds === "string") return { state: "invalid", reqCtx: {}, reason: creds };
    const resolved = await opts.resolveCredentials(facade, creds);
    if (resolved === undefined)
      return {
        state: "invalid",
        reqCtx: {},
        reason: "the session is unknown, expired or signed out, or the identity is not the account's",
      };
    // readCredentials takes the token from the Authorization header when there is one, else from the cookie.
    return { state: "valid", reqCtx: resolved, via: request.headers.get("authorization") === null ? "cookie" : "header" };
  }

  /**
   * CSRF: a browser attaches the session cookie to a request another site
   * makes, so a state-changing request authenticated by the cookie alone must
   * come from the request's own origin or an allowed one: its `Origin`, else
   * its `Referer`'s origin; neither is refused too.
   */
  function checkOrigin(request: InboundRequest): void {
    const origin = request.headers.get("origin");
    const referer = origin === null ? request.headers.get("referer") : null;
    const claimed = origin ?? referer;
    if (claimed === null) {
      throw new MnemeError(
        "CSRF",
        "a state-changing request authenticated by the session cookie needs an Origin (or Referer) header; send the token in `Authorization: Bearer` instead, or from a browser",
      );
    }
    let from: string | undefined;
    try {
      const u = new URL(claimed);
      if (u.protocol === "http:" || u.protocol === "https:") from = u.origin;
    } catch {
      from = undefined; // "null" (an opaque origin) or garbage
    }
    if (from === request.origin || (from !== undefined && opts.allowedOrigins.has(from))) return;
    const what = origin !== null ? "Origin" : "Referer";
    throw new MnemeError(
      "CSRF",
      `cross-site request refused: the ${what} ${JSON.stringify(claimed.slice(0, 200))} is neither this server's origin nor one of createHttpHandler's allowedOrigins, and the request is authenticated by the session cookie alone`,
    );
  }

  function needsSession(ref: MessageRef): boolean {
    const p = facade.permissions.get(ref.domain, ref.name);
    // Unknown commands get 401 too, so an anonymous caller learns nothing about what exists.
    if (p === undefined) return true;
    if (p.funcSet) return false;
    return p.level !== "Anonymous";
  }

  function unauthenticated(auth: Authentication): Reply {
    const detail =
      auth.state === "invalid"
        ? `the credentials are not valid: ${auth.reason}`
        : "this route needs a session: send `Authorization: Bearer <sessionUuid>.<sessionKey>` (and X-Identity-Uuid), or the session cookie";
    return problemResponse(problems, "UNAUTHENTICATED", detail, { headers: { "www-authenticate": "Bearer" } });
  }

  /** The health endpoints: no credentials, 200 when every check passes, else 503; the report says which failed. */
  async function health(path: string, method: string, thresholds: HealthOptions): Promise<Reply> {
    const allow = "GET, HEAD, OPTIONS";
    if (method === "OPTIONS") return { status: 204, headers: { allow } };
    if (method !== "GET")
      return problemResponse(problems, "INVALID_REQUEST", `${method} is not allowed on ${path}; allowed: ${allow}`, {
        status: 405,
        headers: { allow },
      });
    const report = path === HEALTH_LIVE ? await checkLiveness(thresholds) : await checkReadiness(facade, thresholds);
    return jsonResponse(report.status === "pass" ? 200 : 503, report);
  }

  function notFound(path: string): Reply {
    return problemResponse(problems, "NOT_FOUND", `no route ${JSON.stringify(path.slice(0, 200))}; docs/http.md lists the routes`);
  }

  /** The reply of a matching route (errors as problems), or undefined when no route matches. */
  const answer = async (request: InboundRequest, direct: boolean): Promise<Reply | undefined> => {
    // HEAD is GET without the body: same status and headers (a stream, such as SSE, is closed at once).
    const head = request.method === "HEAD";
    let reply: Reply | undefined;
    try {
      reply = await handle(request, head ? "GET" : request.method, direct);
    } catch (e) {
      reply =
        e instanceof UnsupportedMediaType
          ? problemResponse(problems, "INVALID_REQUEST", e.message, { status: 415 })
          : errorResponse(problems, e, () => request.toRequest());
    }
    if (!head || reply === undefined) return reply;
    if (typeof reply.body === "object") await reply.body.cancel().catch(() => undefined);
    return { status: reply.status, headers: reply.headers };
  };

  const handler = async (request: Request): Promise<Response> => {
    // Routes served through the Fetch API only belong here, before mneme's own: on node:http,
    // toNodeListener hands every request that none of mneme's routes matches to this function.
    let inbound: InboundRequest;
    try {
      inbound = fetchInbound(request);
    } catch (e) {
      return toResponse(errorResponse(problems, e, () => request));
    }
    const dashboardPath = dashboard === undefined ? undefined : belowBasePath(inbound.pathname, opts.basePath);
    if (dashboardPath !== undefined && Dashboard.owns(dashboardPath)) return dashboard!.respond(request, dashboardPath);
    return toResponse((await answer(inbound, false)) ?? notFound(inbound.pathname));
  };
  return withDirectHandler(handler, { answer: (request) => answer(request, true) });
}

/** The path below basePath; undefined when it is not below it. */
function belowBasePath(path: string, basePath: string): string | undefined {
  if (basePath === "") return path;
  return path === basePath || path.startsWith(`${basePath}/`) ? path.slice(basePath.length) || "/" : undefined;
}

/** True when `ref` is one of the Runtime's store messages (the generic routes can reach them too). */
function isStoreMessage(ref: MessageRef): boolean {
  return STORE_MESSAGES.some((t) => t.domain === ref.domain && t.name === ref.name);
}

/**
 * The request context of one request: the resolved sender, the path's tenant
 * as target, the W3C trace id, and on command routes the optimistic-concurrency
 * headers X-Target-Aggregate-Uuid / X-Target-Aggregate-Version.
 */
function requestContext(
  headers: HeaderReader,
  sender: RequestContext,
  params: Readonly<Record<string, string>>,
  concurrency: boolean,
): RequestContext {
  const ctx: RequestContext = { ...sender };
  if (params.tenantUuid !== undefined) ctx.targetTenantUuid = params.tenantUuid;
  const traceparent = headers.get("traceparent")?.trim() ?? "";
  const trace = TRACEPARENT.exec(traceparent);
  if (trace !== null) ctx.traceId = trace[1]!;
  // The caller's span: the parent of this request's mneme.dispatch / mneme.query span (docs/observability.md).
  if (parseTraceParent(traceparent) !== undefined) {
    ctx.traceparent = traceparent;
    const state = cleanTraceState(headers.get("tracestate"));
    if (state !== undefined) ctx.tracestate = state;
  }
  if (concurrency) {
    const agg = headers.get("x-target-aggregate-uuid");
    const version = headers.get("x-target-aggregate-version");
    if (agg !== null) {
      if (agg.trim() === "" || agg.length > 200) throw new MnemeError("INVALID_REQUEST", "X-Target-Aggregate-Uuid must be a non-empty id");
      ctx.targetAggregateUuid = agg.trim();
    }
    if (version !== null) {
      const n = Number(version.trim());
      if (!/^\d+$/.test(version.trim()) || !Number.isSafeInteger(n))
        throw new MnemeError("INVALID_REQUEST", "X-Target-Aggregate-Version must be a non-negative integer");
      ctx.targetAggregateVersion = n;
    }
  }
  return ctx;
}
