import { newUuid } from "../model/clock.js";
import { MnemeError } from "../model/errors.js";
import type { Facade } from "../app/facade.js";
import type { MessageRef } from "../model/facade-handle.js";
import { isPlainObject } from "../model/redact.js";
import type { MessageType, PayloadOf, QueryType } from "../model/tokens.js";
import type { RequestContext } from "../model/types.js";
import { GetAccount, ListAccounts, RegisterAccount } from "../defaults/account.js";
import { Login, Logout } from "../defaults/session.js";
import {
  ControlEventHandler,
  GetMetrics,
  GetSchema,
  GetSystemInfo,
  ListCommandHandlers,
  ListCommands,
  ListEventHandlers,
  ListEvents,
  ListPermissions,
  ListQueries,
  ListQueryHandlers,
  type NoPayload,
  StoreDelete,
  StoreInfo,
  StoreRead,
  StoreUpdate,
  StreamSystemEvents,
} from "../runtime/runtime-domain.js";
import type { Authentication } from "./credentials.js";
import { serializeCookie } from "./credentials.js";
import type { InboundRequest, Reply } from "./exchange.js";
import { commandUuidOfIdempotencyKey } from "./idempotency-key.js";
import type { ConnectionGauge } from "./limits.js";
import type { ResolvedHttpOptions } from "./options.js";
import { boolParam, intParam, jsonResponse, noContent, paginate, readPage } from "./responses.js";
import { Router } from "./router.js";
import { lastEventIdOf, openSystemEventStream } from "./sse.js";

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

/** The guard of a route that serves one command or query: its token. */
const guardBy = (type: MessageType<any, any>) => (): MessageRef => type;
const T = "/api/tenants/:tenantUuid";

/** The runtime lists served by `GET /api/tenants/{tenantUuid}/runtime/<path>`. */
const RUNTIME_LISTS: readonly [path: string, query: QueryType<NoPayload, readonly unknown[]>][] = [
  ["commands", ListCommands],
  ["queries", ListQueries],
  ["events", ListEvents],
  ["command-handlers", ListCommandHandlers],
  ["query-handlers", ListQueryHandlers],
];

const LIST_KEYS = new Set(["action", "page", "pageSize", "eventHandlerName", "allTenants"]);

/** `?allTenants=true`: every tenant's entries, not only the path's tenant's (system administrators). */
function allTenantsOf(c: RouteContext): { allTenants?: boolean } {
  const all = boolParam("allTenants", c.request.searchParams.get("allTenants"));
  return all === undefined ? {} : { allTenants: all };
}

/** Builds mneme's route table (docs/http.md describes every route). */
export function buildRoutes(): Router<Route> {
  const r = new Router<Route>();

  for (const [path, query] of RUNTIME_LISTS) {
    r.add("GET", `${T}/runtime/${path}`, {
      guard: guardBy(query),
      run: async (c) => {
        const page = readPage(pageQuery(c.request.searchParams), c.options);
        const all = await c.facade.query(query, {}, { reqCtx: c.reqCtx });
        return jsonResponse(200, paginate(all, page));
      },
    });
  }

  r.add("GET", `${T}/runtime/event-handlers`, {
    guard: guardBy(ListEventHandlers),
    run: async (c) => {
      const page = readPage(pageQuery(c.request.searchParams), c.options);
      const all = await c.facade.query(ListEventHandlers, allTenantsOf(c), { reqCtx: c.reqCtx });
      return jsonResponse(200, paginate(all, page));
    },
  });

  r.add("GET", `${T}/runtime/permissions`, {
    guard: guardBy(ListPermissions),
    run: async (c) => {
      const page = readPage(pageQuery(c.request.searchParams), c.options);
      const domain = c.request.searchParams.get("domain");
      const all = await c.facade.query(ListPermissions, domain === null ? {} : { domain }, { reqCtx: c.reqCtx });
      return jsonResponse(200, paginate(all, page));
    },
  });

  r.add("GET", `${T}/runtime/metrics`, {
    guard: guardBy(GetMetrics),
    run: async (c) => {
      const name = c.request.searchParams.get("eventHandlerName");
      const payload = { ...(name === null ? {} : { eventHandlerName: name }), ...allTenantsOf(c) };
      const metrics = await c.facade.query(GetMetrics, payload, { reqCtx: c.reqCtx });
      return jsonResponse(200, metrics);
    },
  });

  r.add("GET", `${T}/runtime/system-info`, {
    guard: guardBy(GetSystemInfo),
    run: async (c) => jsonResponse(200, await c.facade.query(GetSystemInfo, {}, { reqCtx: c.reqCtx })),
  });

  r.add("POST", `${T}/runtime/event-handler-list`, {
    guard: guardBy(ListEventHandlers),
    run: async (c) => {
      const body = objectBody(await c.body());
      const action = body.action ?? "list";
      if (action === "list") {
        for (const k of Object.keys(body)) {
          if (!LIST_KEYS.has(k))
            throw new MnemeError(
              "INVALID_REQUEST",
              `unknown field ${JSON.stringify(k)} in a list request (allowed: ${[...LIST_KEYS].join(", ")})`,
            );
        }
        const page = readPage(body, c.options);
        const name = body.eventHandlerName;
        if (name !== undefined && typeof name !== "string") throw new MnemeError("INVALID_REQUEST", "eventHandlerName must be a string");
        const allTenants = body.allTenants;
        if (allTenants !== undefined && typeof allTenants !== "boolean")
          throw new MnemeError("INVALID_REQUEST", "allTenants must be a boolean");
        const all = await c.facade.query(ListEventHandlers, allTenants === undefined ? {} : { allTenants }, { reqCtx: c.reqCtx });
        return jsonResponse(200, paginate(name === undefined ? all : all.filter((h) => h.eventHandlerName === name), page));
      }
      if (action !== "restore" && action !== "start" && action !== "stop") {
        throw new MnemeError("INVALID_ACTION", `action must be one of list, restore, start, stop (got ${JSON.stringify(action)})`);
      }
      const out = await c.facade.dispatch(ControlEventHandler, bodyAs(ControlEventHandler, { ...body, action }), { reqCtx: c.reqCtx });
      return jsonResponse(200, out.result);
    },
  });

  r.add("POST", `${T}/runtime/schema`, {
    guard: guardBy(GetSchema),
    run: async (c) =>
      jsonResponse(200, await c.facade.query(GetSchema, bodyAs(GetSchema, objectBody(await c.body())), { reqCtx: c.reqCtx })),
  });

  r.add("GET", `${T}/runtime/sse`, {
    guard: guardBy(StreamSystemEvents),
    session: true,
    run: async (c) => {
      const allTenants = boolParam("allTenants", c.request.searchParams.get("allTenants")) ?? false;
      const lastEventId = lastEventIdOf(c.request);
      await c.facade.permissions.check(c.reqCtx, {
        queryUuid: newUuid(),
        domain: StreamSystemEvents.domain,
        name: StreamSystemEvents.name,
        payload: { allTenants },
        reqCtx: c.reqCtx,
      });
      return openSystemEventStream(
        c.facade.runtime.systemEvents,
        c.request.signal,
        { tenantUuid: c.params.tenantUuid!, allTenants, lastEventId },
        c.sseGauge,
        c.options.sse,
      );
    },
  });

  // Store endpoints: system administrators (the authorizer grants <Store>.<Action>), an authenticated session, rate limited.
  r.add("GET", `${T}/runtime/stores/:store/info`, {
    guard: guardBy(StoreInfo),
    run: async (c) => jsonResponse(200, await c.facade.query(StoreInfo, { store: storeParam(c) }, { reqCtx: c.reqCtx })),
  });
  r.add("GET", `${T}/runtime/stores/:store/entries`, {
    guard: guardBy(StoreRead),
    run: async (c) => {
      const cursor = c.request.searchParams.get("cursor");
      const limit = intParam("limit", c.request.searchParams.get("limit") ?? undefined, 1, 1000);
      const payload = {
        store: storeParam(c),
        ...(cursor === null ? {} : { cursor }),
        ...(limit === undefined ? {} : { limit }),
        ...allTenantsOf(c),
      };
      return jsonResponse(200, await c.facade.query(StoreRead, payload, { reqCtx: c.reqCtx }));
    },
  });
  r.add("PATCH", `${T}/runtime/stores/:store/entries/:key`, {
    guard: guardBy(StoreUpdate),
    run: async (c) => {
      const raw = await c.rawBody();
      if (raw === undefined) throw new MnemeError("INVALID_REQUEST", "the body is the new value of the entry (JSON)");
      const out = await c.facade.dispatch(StoreUpdate, { store: storeParam(c), key: c.params.key!, value: raw }, { reqCtx: c.reqCtx });
      return jsonResponse(200, out.result);
    },
  });
  r.add("DELETE", `${T}/runtime/stores/:store/entries/:key`, {
    guard: guardBy(StoreDelete),
    run: async (c) => {
      await c.facade.dispatch(StoreDelete, { store: storeParam(c), key: c.params.key! }, { reqCtx: c.reqCtx });
      return noContent();
    },
  });

  r.add("POST", `${T}/commands/:domain/:name`, {
    concurrencyHeaders: true,
    guard: (p) => ({ domain: p.domain!, name: p.name! }),
    run: async (c) => {
      const wait = boolParam("wait", c.request.searchParams.get("wait")) ?? false;
      // The path names the command: dispatch goes through its registered token (UNKNOWN_COMMAND when there is none).
      const type = c.facade.resolveCommand({ domain: c.params.domain!, name: c.params.name! });
      // Idempotency-Key: a retry of the same request (same account, same key) replays the recorded outcome.
      const commandUuid = await commandUuidOfIdempotencyKey(c.request.headers.get("idempotency-key"), c.reqCtx);
      const out = await c.facade.dispatch(type, await c.body(), {
        reqCtx: c.reqCtx,
        waitToFinish: wait,
        ...(commandUuid === undefined ? {} : { commandUuid }),
      });
      const body: Record<string, unknown> = { commandUuid: out.commandUuid, events: out.events };
      if (out.result !== undefined) body.result = out.result;
      if (out.replayed === true) body.replayed = true;
      if (out.handlerErrors.length > 0)
        body.handlerErrors = out.handlerErrors.map((h) => ({ eventHandlerName: h.eventHandlerName, message: h.error.message }));
      return jsonResponse(200, body, out.replayed === true ? { "idempotent-replayed": "true" } : {});
    },
  });

  r.add("POST", `${T}/queries/:domain/:name`, {
    guard: (p) => ({ domain: p.domain!, name: p.name! }),
    run: async (c) => {
      // The path names the query: it is answered through its registered token (UNKNOWN_QUERY when there is none).
      const type = c.facade.resolveQuery({ domain: c.params.domain!, name: c.params.name! });
      return jsonResponse(200, await c.facade.query(type, await c.body(), { reqCtx: c.reqCtx }));
    },
  });

  // The built-in Account domain (registerDefaults).
  r.add("POST", "/api/accounts", {
    guard: guardBy(RegisterAccount),
    run: async (c) => {
      const out = await c.facade.dispatch(RegisterAccount, bodyAs(RegisterAccount, await c.body()), { reqCtx: c.reqCtx });
      return jsonResponse(201, { accountUuid: out.result?.accountUuid });
    },
  });
  r.add("GET", "/api/accounts/:accountUuid", {
    guard: guardBy(GetAccount),
    run: async (c) => {
      const includeHistory = boolParam("includeHistory", c.request.searchParams.get("includeHistory"));
      const payload = { accountUuid: c.params.accountUuid!, ...(includeHistory === undefined ? {} : { includeHistory }) };
      // NOT_FOUND (404) when there is no such account: the query says so itself.
      return jsonResponse(200, await c.facade.query(GetAccount, payload, { reqCtx: c.reqCtx }));
    },
  });
  r.add("GET", "/api/accounts", {
    guard: guardBy(ListAccounts),
    run: async (c) => {
      const includeHistory = boolParam("includeHistory", c.request.searchParams.get("includeHistory"));
      const { page, pageSize } = readPage(pageQuery(c.request.searchParams), c.options);
      const payload = { page, pageSize, ...(includeHistory === undefined ? {} : { includeHistory }) };
      return jsonResponse(200, await c.facade.query(ListAccounts, payload, { reqCtx: c.reqCtx }));
    },
  });
  r.add("POST", "/api/sessions", {
    guard: guardBy(Login),
    run: async (c) => {
      const out = await c.facade.dispatch(Login, bodyAs(Login, await c.body()), { reqCtx: c.reqCtx });
      const session = out.result;
      const setCookie: string[] = [];
      const cookies = c.options.sessionCookies;
      if (cookies !== false && session !== undefined) {
        setCookie.push(serializeCookie("session", session.token, cookies));
        const ids = session.identities;
        if (ids.length === 1) setCookie.push(serializeCookie("identity", ids[0]!.identityUuid, cookies));
      }
      return jsonResponse(201, session, setCookie.length === 0 ? {} : { "set-cookie": setCookie });
    },
  });
  r.add("DELETE", "/api/sessions/current", {
    guard: guardBy(Logout),
    run: async (c) => {
      await c.facade.dispatch(Logout, {}, { reqCtx: c.reqCtx });
      const cookies = c.options.sessionCookies;
      if (cookies === false) return noContent();
      return noContent({
        "set-cookie": [
          serializeCookie("session", "", { ...cookies, maxAgeSeconds: 0 }),
          serializeCookie("identity", "", { ...cookies, maxAgeSeconds: 0 }),
        ],
      });
    },
  });
  return r;
}

function pageQuery(query: URLSearchParams): { page?: string; pageSize?: string } {
  const page = query.get("page");
  const pageSize = query.get("pageSize");
  return { ...(page === null ? {} : { page }), ...(pageSize === null ? {} : { pageSize }) };
}

/**
 * A request body as the payload of `type`. Not checked here: the facade checks
 * it against the message's schema (VALIDATION_FAILED, 400) before any handler runs.
 */
function bodyAs<T extends MessageType<any, any>>(_type: T, body: unknown): PayloadOf<T> {
  return body as PayloadOf<T>;
}

/** The `:store` of a store route, as the store messages take it (their schema checks it is a store's name). */
function storeParam(c: RouteContext): PayloadOf<typeof StoreInfo>["store"] {
  return c.params.store as PayloadOf<typeof StoreInfo>["store"];
}

function objectBody(body: unknown): Record<string, unknown> {
  if (!isPlainObject(body)) throw new MnemeError("INVALID_REQUEST", "the request body must be a JSON object");
  return body;
}
