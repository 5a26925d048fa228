import { newUuid } from "../model/clock.js";
import { MnemeError } from "../model/errors.js";
import type { PayloadOf, QueryType } from "../model/tokens.js";
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
  STORE_MESSAGES,
  StoreUpdate,
  StreamSystemEvents,
} from "../runtime/runtime-domain.js";
import type { MessageRef } from "../model/facade-handle.js";
import { commandUuidOfIdempotencyKey } from "./idempotency-key.js";
import { boolParam, intParam, jsonResponse, noContent, paginate, readPage } from "./responses.js";
import {
  bodyAs,
  fixedGuardOf,
  guardBy,
  type HttpRoute,
  type HttpRouteModule,
  objectBody,
  pageQuery,
  type Route,
  type RouteContext,
} from "./route.js";
import { Router } from "./router.js";
import { lastEventIdOf, openSystemEventStream } from "./sse.js";
import { eventStreamRoutes } from "./event-stream.js";
import { liveQueryRoutes } from "./live-queries.js";

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

/**
 * A route as the handler serves it: with what its guard decides, worked out
 * once when the guard names a fixed message (guardBy), not per request.
 */
export interface ServedRoute {
  readonly route: Route;
  readonly fixed: { readonly guard: MessageRef; readonly storeAccess: boolean } | undefined;
}

/** The store messages' names by domain: the generic command and query routes ask on every request. */
const STORE_MESSAGE_NAMES: ReadonlyMap<string, ReadonlySet<string>> = (() => {
  const out = new Map<string, Set<string>>();
  for (const t of STORE_MESSAGES) {
    let names = out.get(t.domain);
    if (names === undefined) out.set(t.domain, (names = new Set()));
    names.add(t.name);
  }
  return out;
})();

/** True when `ref` is one of the Runtime's store messages (the generic routes can reach them too). */
export function isStoreMessage(ref: MessageRef): boolean {
  return STORE_MESSAGE_NAMES.get(ref.domain)?.has(ref.name) === true;
}

function served(route: Route): ServedRoute {
  const guard = fixedGuardOf(route.guard);
  return { route, fixed: guard === undefined ? undefined : { guard, storeAccess: isStoreMessage(guard) } };
}

/**
 * Builds the route table: the generic routes (docs/http.md describes every
 * one) and then the modules' routes, in order; a route defined twice is an
 * INVALID_REQUEST naming the module.
 */
export function buildRoutes(modules: readonly HttpRouteModule[] = []): Router<ServedRoute> {
  const r = new Router<ServedRoute>();
  for (const m of servedModules(modules)) {
    for (const { method, path, ...route } of m.routes) {
      try {
        r.add(method, path, served(route));
      } catch (e) {
        throw new MnemeError("INVALID_REQUEST", `createHttpHandler: route module ${m.name}: ${(e as Error).message}`, { cause: e });
      }
    }
  }
  return r;
}

/** The generic routes as a module (named "mneme/http"), then the application's modules: what buildRoutes serves, in order. */
export function servedModules(modules: readonly HttpRouteModule[] = []): readonly HttpRouteModule[] {
  const core: HttpRouteModule = {
    name: CORE_MODULE,
    routes: [
      ...runtimeRoutes(),
      ...eventHandlerRoutes(),
      ...storeRoutes(),
      ...messageRoutes(),
      ...eventStreamRoutes(T),
      ...liveQueryRoutes(T),
    ],
  };
  return [core, ...modules];
}

/** The name of the generic routes' module (the OpenAPI document describes its routes itself). */
export const CORE_MODULE = "mneme/http";

/** The paths of the generic command and query routes, which serve every registered command and query. */
export const COMMAND_ROUTE = `${T}/commands/:domain/:name`;
export const QUERY_ROUTE = `${T}/queries/:domain/:name`;

/** The runtime lists and the metrics and system info (GET, paged where a list). */
function runtimeRoutes(): HttpRoute[] {
  const lists = RUNTIME_LISTS.map(([path, query]): HttpRoute => ({
    method: "GET",
    path: `${T}/runtime/${path}`,
    guard: guardBy(query),
    // Chained, not awaited: one promise per request (a refused page is thrown at once, and answered as any error).
    run: (c) => {
      const page = readPage(pageQuery(c.request.searchParams), c.options);
      return c.facade.query(query, {}, { reqCtx: c.reqCtx }).then((all) => jsonResponse(200, paginate(all, page)));
    },
  }));
  return [
    ...lists,
    {
      method: "GET",
      path: `${T}/runtime/event-handlers`,
      guard: guardBy(ListEventHandlers),
      run: async (c) => {
        const page = readPage(pageQuery(c.request.searchParams), c.options);
        const all = await c.facade.query(ListEventHandlers, allTenantsOf(c), { reqCtx: c.reqCtx });
        return jsonResponse(200, paginate(all, page));
      },
    },

    {
      method: "GET",
      path: `${T}/runtime/permissions`,
      guard: guardBy(ListPermissions),
      run: async (c) => {
        const page = readPage(pageQuery(c.request.searchParams), c.options);
        const domain = c.request.searchParams.get("domain");
        const all = await c.facade.query(ListPermissions, domain === null ? {} : { domain }, { reqCtx: c.reqCtx });
        return jsonResponse(200, paginate(all, page));
      },
    },

    {
      method: "GET",
      path: `${T}/runtime/metrics`,
      guard: guardBy(GetMetrics),
      run: async (c) => {
        const name = c.request.searchParams.get("eventHandlerName");
        const payload = { ...(name === null ? {} : { eventHandlerName: name }), ...allTenantsOf(c) };
        const metrics = await c.facade.query(GetMetrics, payload, { reqCtx: c.reqCtx });
        return jsonResponse(200, metrics);
      },
    },

    {
      method: "GET",
      path: `${T}/runtime/system-info`,
      guard: guardBy(GetSystemInfo),
      run: async (c) => jsonResponse(200, await c.facade.query(GetSystemInfo, {}, { reqCtx: c.reqCtx })),
    },
  ];
}

/** The event handlers' list and control, the schema, and the system-event stream. */
function eventHandlerRoutes(): HttpRoute[] {
  return [
    {
      method: "POST",
      path: `${T}/runtime/event-handler-list`,
      guard: guardBy(ListEventHandlers),
      run: async (c) => {
        const body = objectBody(await c.body());
        const action = body.action ?? "list";
        if (action === "list") return jsonResponse(200, await listEventHandlers(c, body));
        if (action !== "restore" && action !== "start" && action !== "stop") {
          throw new MnemeError("INVALID_ACTION", `action must be one of list, restore, start, stop (got ${JSON.stringify(action)})`);
        }
        const out = await c.facade.dispatch(ControlEventHandler, bodyAs(ControlEventHandler, { ...body, action }), { reqCtx: c.reqCtx });
        return jsonResponse(200, out.result);
      },
    },
    {
      method: "POST",
      path: `${T}/runtime/schema`,
      guard: guardBy(GetSchema),
      run: async (c) =>
        jsonResponse(200, await c.facade.query(GetSchema, bodyAs(GetSchema, objectBody(await c.body())), { reqCtx: c.reqCtx })),
    },

    {
      method: "GET",
      path: `${T}/runtime/sse`,
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
    },
  ];
}

/** The store endpoints: system administrators (the authorizer grants <Store>.<Action>), an authenticated session, rate limited. */
function storeRoutes(): HttpRoute[] {
  return [
    {
      method: "GET",
      path: `${T}/runtime/stores/:store/info`,
      guard: guardBy(StoreInfo),
      run: async (c) => jsonResponse(200, await c.facade.query(StoreInfo, { store: storeParam(c) }, { reqCtx: c.reqCtx })),
    },
    {
      method: "GET",
      path: `${T}/runtime/stores/:store/entries`,
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
    },
    {
      method: "PATCH",
      path: `${T}/runtime/stores/:store/entries/:key`,
      guard: guardBy(StoreUpdate),
      run: async (c) => {
        const raw = await c.rawBody();
        if (raw === undefined) throw new MnemeError("INVALID_REQUEST", "the body is the new value of the entry (JSON)");
        const out = await c.facade.dispatch(StoreUpdate, { store: storeParam(c), key: c.params.key!, value: raw }, { reqCtx: c.reqCtx });
        return jsonResponse(200, out.result);
      },
    },
    {
      method: "DELETE",
      path: `${T}/runtime/stores/:store/entries/:key`,
      guard: guardBy(StoreDelete),
      run: async (c) => {
        await c.facade.dispatch(StoreDelete, { store: storeParam(c), key: c.params.key! }, { reqCtx: c.reqCtx });
        return noContent();
      },
    },
  ];
}

/** The generic command and query endpoints: any registered message by its domain and name. */
function messageRoutes(): HttpRoute[] {
  return [
    {
      method: "POST",
      path: COMMAND_ROUTE,
      concurrencyHeaders: true,
      guard: (p) => ({ domain: p.domain!, name: p.name! }),
      run: async (c) => {
        const wait = boolParam("wait", c.request.searchParams.get("wait")) ?? false;
        // The path names the command: dispatch goes through its registered token (UNKNOWN_COMMAND when there is none).
        const type = c.facade.resolveCommand({ domain: c.params.domain!, name: c.params.name! });
        // Idempotency-Key: a retry of the same request (same account, same key) replays the recorded outcome.
        const key = c.request.headers.get("idempotency-key");
        const commandUuid = key === null ? undefined : await commandUuidOfIdempotencyKey(key, c.reqCtx);
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
        return jsonResponse(200, body, out.replayed === true ? { "idempotent-replayed": "true" } : undefined);
      },
    },

    {
      method: "POST",
      path: QUERY_ROUTE,
      guard: (p) => ({ domain: p.domain!, name: p.name! }),
      run: async (c) => {
        // The path names the query: it is answered through its registered token (UNKNOWN_QUERY when there is none).
        const type = c.facade.resolveQuery({ domain: c.params.domain!, name: c.params.name! });
        return jsonResponse(200, await c.facade.query(type, await c.body(), { reqCtx: c.reqCtx }));
      },
    },
  ];
}

/** `{ action: "list" }` of the event-handler-list route: one page, optionally of one handler. */
async function listEventHandlers(c: RouteContext, body: Record<string, unknown>) {
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
  if (allTenants !== undefined && typeof allTenants !== "boolean") throw new MnemeError("INVALID_REQUEST", "allTenants must be a boolean");
  const all = await c.facade.query(ListEventHandlers, allTenants === undefined ? {} : { allTenants }, { reqCtx: c.reqCtx });
  return paginate(name === undefined ? all : all.filter((h) => h.eventHandlerName === name), page);
}

/** The `:store` of a store route, as the store messages take it (their schema checks it is a store's name). */
function storeParam(c: RouteContext): PayloadOf<typeof StoreInfo>["store"] {
  return c.params.store as PayloadOf<typeof StoreInfo>["store"];
}
