import { MnemeError } from "../model/errors.js";
import type { Facade } from "../app/facade.js";
import type { MessageRef } from "../model/facade-handle.js";
import { isPlainObject } from "../model/redact.js";
import type { MessageType, PayloadOf } from "../model/tokens.js";
import type { RequestContext } from "../model/types.js";
import type { Authentication, CredentialResolver } from "./credentials.js";
import type { InboundRequest, Reply } from "./exchange.js";
import type { RouteDoc } from "./openapi-types.js";
import type { ConnectionGauge } from "./limits.js";
import type { ResolvedHttpOptions } from "./settings.js";

/** What a route's code receives. */
export interface RouteContext {
  readonly request: InboundRequest;
  readonly params: Readonly<Record<string, string>>;
  readonly facade: Facade;
  /** The sender (from the credentials) plus the target tenant of the path. */
  readonly reqCtx: RequestContext;
  readonly auth: Authentication;
  readonly options: ResolvedHttpOptions;
  readonly sseGauge: ConnectionGauge;
  /** The JSON body; `{}` when empty. */
  body(): Promise<unknown>;
  /** The JSON body; `undefined` when empty. */
  rawBody(): Promise<unknown>;
}

/** One endpoint. */
export interface Route {
  /**
   * The command or query whose permission guards the route: a request without
   * valid credentials gets 401 before its body is read unless that permission
   * is anonymous (or a custom function, which then decides).
   */
  readonly guard: (params: Readonly<Record<string, string>>) => MessageRef;
  /**
   * Needs an authenticated session whatever the permission says (SSE). Routes
   * whose guard is a Runtime store message need one too and are rate limited.
   */
  readonly session?: boolean;
  /** Reads X-Target-Aggregate-Uuid / -Version into the request context (optimistic concurrency). */
  readonly concurrencyHeaders?: boolean;
  readonly run: (ctx: RouteContext) => Promise<Reply>;
}

/** One endpoint with its method and path pattern (`/api/things/:thingUuid`, below `basePath`). */
export interface HttpRoute extends Route {
  readonly method: "GET" | "POST" | "PUT" | "PATCH" | "DELETE";
  readonly path: string;
  /** How the route appears in the OpenAPI document (`GET /api/openapi.json`, `mneme openapi`); optional. */
  readonly openapi?: RouteDoc;
}

/**
 * Routes an application adds to createHttpHandler's generic ones (`modules`),
 * like hono's middleware: the HTTP core knows no domain, so the login,
 * account and session routes of the built-in domains come this way
 * (`accountRoutes()` of mneme/defaults).
 */
export interface HttpRouteModule {
  /** Names the module in errors (a route defined twice). */
  readonly name: string;
  readonly routes: readonly HttpRoute[];
  /**
   * How this module's sessions become a sender. createHttpHandler takes the
   * `resolveCredentials` option first, else the first module that has one.
   */
  readonly resolveCredentials?: CredentialResolver;
}

const FIXED_GUARD: unique symbol = Symbol("mneme.http.fixedGuard");

/** The guard of a route that serves one command or query: its token (known when the routes are built). */
export function guardBy(type: MessageType<any, any>): () => MessageRef {
  const guard = (): MessageRef => type;
  return Object.defineProperty(guard, FIXED_GUARD, { value: type });
}

/** The message a guardBy guard always names; undefined for a guard that reads the path. */
export function fixedGuardOf(guard: Route["guard"]): MessageRef | undefined {
  return (guard as { [FIXED_GUARD]?: MessageRef })[FIXED_GUARD];
}

/** `?page&pageSize` of a query string, for readPage. */
export function pageQuery(query: URLSearchParams): { page?: string; pageSize?: string } {
  const page = query.get("page");
  const pageSize = query.get("pageSize");
  return { ...(page === null ? {} : { page }), ...(pageSize === null ? {} : { pageSize }) };
}

/**
 * A request body as the payload of `type`. Not checked here: the facade checks
 * it against the message's schema (VALIDATION_FAILED, 400) before any handler runs.
 */
export function bodyAs<T extends MessageType<any, any>>(_type: T, body: unknown): PayloadOf<T> {
  return body as PayloadOf<T>;
}

/** The body as a JSON object; INVALID_REQUEST when it is anything else. */
export function objectBody(body: unknown): Record<string, unknown> {
  if (!isPlainObject(body)) throw new MnemeError("INVALID_REQUEST", "the request body must be a JSON object");
  return body;
}
