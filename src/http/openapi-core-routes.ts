/**
 * How the generic routes of mneme/http (routes.ts) appear in the OpenAPI
 * document: their summaries, query parameters, bodies and answers, by
 * `METHOD path`. Kept apart from the routes so adding a route stays one
 * change there; a route missing here is still documented from its method,
 * path and guard.
 */
import type { JsonSchema } from "../model/types.js";
import type { RouteDoc } from "./openapi-types.js";

const T = "/api/tenants/:tenantUuid";

const integer = (minimum: number, maximum?: number): JsonSchema => ({
  type: "integer",
  minimum,
  ...(maximum === undefined ? {} : { maximum }),
});
const PAGE = {
  page: { schema: integer(1), description: "page number, from 1 (default 1)" },
  pageSize: { schema: integer(1), description: "items per page (default 50, at most the handler's maxPageSize)" },
} as const;
const ALL_TENANTS = {
  allTenants: { schema: { type: "string", enum: ["true", "false"] }, description: "every tenant's entries (system administrators)" },
} as const;

/** `{ items, total, page, pageSize }` of every list route. */
export const LIST_BODY: JsonSchema = {
  type: "object",
  properties: {
    items: { type: "array", items: {} },
    total: { type: "integer", minimum: 0 },
    page: { type: "integer", minimum: 1 },
    pageSize: { type: "integer", minimum: 1 },
  },
  required: ["items", "total", "page", "pageSize"],
};

const list = (summary: string): RouteDoc => ({
  summary,
  query: PAGE,
  responses: { "200": { description: "one page of the list", schema: LIST_BODY } },
});
const json = (description: string, schema: JsonSchema = {}) => ({ "200": { description, schema } });

/** The documentation of the generic routes, by `METHOD path` as routes.ts declares them. */
export const CORE_ROUTE_DOCS: Readonly<Record<string, RouteDoc>> = {
  [`GET ${T}/runtime/commands`]: list("Every registered command with its permission"),
  [`GET ${T}/runtime/queries`]: list("Every registered query with its permission"),
  [`GET ${T}/runtime/events`]: list("Every registered event type"),
  [`GET ${T}/runtime/command-handlers`]: list("Command handlers grouped by domain"),
  [`GET ${T}/runtime/query-handlers`]: list("Query handlers grouped by domain"),
  [`GET ${T}/runtime/event-handlers`]: {
    summary: "Event handlers and readmodels with their state",
    query: { ...PAGE, ...ALL_TENANTS },
    responses: { "200": { description: "one page of EventHandlerInfo", schema: LIST_BODY } },
  },
  [`GET ${T}/runtime/permissions`]: {
    summary: "The permission registry (without the functions)",
    query: { ...PAGE, domain: { schema: { type: "string" }, description: "only this domain's permissions" } },
    responses: { "200": { description: "one page of permissions", schema: LIST_BODY } },
  },
  [`GET ${T}/runtime/metrics`]: {
    summary: "Metrics of one event handler, or a record by handler name",
    query: { eventHandlerName: { schema: { type: "string" }, description: "one handler's metrics" }, ...ALL_TENANTS },
    responses: json("the metrics", { type: "object" }),
  },
  [`GET ${T}/runtime/system-info`]: {
    summary: "Application name, version, instance, uptime, stores and counts",
    responses: json("SystemInfo", { type: "object" }),
  },
  [`POST ${T}/runtime/event-handler-list`]: {
    summary: "List event handlers (action list), or restore, start or stop one",
    description:
      '`action: "list"` (the default) needs Runtime.ListEventHandlers; `restore`, `start` and `stop` need Runtime.ControlEventHandler (administrators).',
    body: {
      type: "object",
      properties: {
        action: { type: "string", enum: ["list", "restore", "start", "stop"] },
        page: { type: "integer", minimum: 1 },
        pageSize: { type: "integer", minimum: 1 },
        eventHandlerName: { type: "string" },
        allTenants: { type: "boolean" },
        restoreFromZero: { type: "boolean" },
      },
    },
    responses: json("a page of EventHandlerInfo (list), or the handler's EventHandlerInfo after the action", { type: "object" }),
  },
  [`POST ${T}/runtime/schema`]: {
    summary: "The JSON Schema 2020-12 document of a command, query or event type",
    body: "payload",
    responses: json("the type's JSON Schema 2020-12 document", { type: "object" }),
  },
  [`GET ${T}/runtime/sse`]: {
    summary: "The system-event stream (server-sent events)",
    description:
      "Resumes after `Last-Event-ID` (header) or `?lastEventId`; an id that cannot be continued starts with an `event: gap`. Needs a session.",
    query: {
      lastEventId: { schema: { type: "string" }, description: "resume after this system event id (first connection)" },
      ...ALL_TENANTS,
    },
    responses: {
      "200": { description: "a text/event-stream of system events", contentType: "text/event-stream", schema: { type: "string" } },
    },
  },
  [`GET ${T}/events/stream`]: {
    summary: "The stored events of chosen types (server-sent events)",
    description:
      "Each `id:` is the event's position. Resumes after `Last-Event-ID` (header) or `?after`; an id that is no position or lies past the head starts with an `event: gap`. Needs a session, `Runtime.SubscribeEvents` and each type's `<Domain>.Subscribe.<Event>` permission (`allowEventSubscriptions`).",
    query: {
      types: { schema: { type: "string" }, description: "comma-separated event types, `Domain.Event`" },
      after: { schema: integer(0), description: "every event after this position, then live (first connection)" },
      ...ALL_TENANTS,
    },
    responses: {
      "200": { description: "a text/event-stream of stored events", contentType: "text/event-stream", schema: { type: "string" } },
    },
  },
  [`GET ${T}/queries/:domain/:name/live`]: {
    summary: "A live query's result, again after each readmodel batch that may change it (server-sent events)",
    description:
      "Only for queries declared `live`. The query's own permission, checked again before each evaluation; the payload is the JSON of `?payload`.",
    query: { payload: { schema: { type: "string" }, description: "the query's payload as JSON (default `{}`)" } },
    responses: {
      "200": { description: "a text/event-stream of results", contentType: "text/event-stream", schema: { type: "string" } },
    },
  },
  [`GET ${T}/live-queries`]: {
    summary: "Several live queries on one stream (server-sent events)",
    description:
      'Up to 32 queries declared `live`, each with its own permission, tenant scope and evaluation, as on their own route. A result comes as `data: {"id", "result"}`; a refusal or failure as `event: error` with `{ id, code, message }`, ending that query only. Needs a session.',
    query: {
      queries: {
        schema: { type: "string" },
        description: "a JSON array of `{ id, domain, name, payload? }` (ids unique: letters, digits, `_`, `.`, `-`)",
      },
    },
    responses: {
      "200": { description: "a text/event-stream of results by id", contentType: "text/event-stream", schema: { type: "string" } },
    },
  },
  [`GET ${T}/runtime/stores/:store/info`]: {
    summary: "A store's information (administrators; rate limited per session)",
    responses: json("StoreInfo", { type: "object" }),
  },
  [`GET ${T}/runtime/stores/:store/entries`]: {
    summary: "A page of a store's entries (administrators; rate limited per session)",
    query: {
      cursor: { schema: { type: "string" }, description: "the nextCursor of the previous page" },
      limit: { schema: integer(1, 1000), description: "entries per page (default 100)" },
      ...ALL_TENANTS,
    },
    responses: json("`{ items, nextCursor? }`", {
      type: "object",
      properties: { items: { type: "array" }, nextCursor: { type: "string" } },
      required: ["items"],
    }),
  },
  [`PATCH ${T}/runtime/stores/:store/entries/:key`]: {
    summary: "Write a store entry (data and cache stores; administrators; rate limited)",
    body: {},
    responses: json("`{ key }`", { type: "object", properties: { key: { type: "string" } }, required: ["key"] }),
  },
  [`DELETE ${T}/runtime/stores/:store/entries/:key`]: {
    summary: "Delete a store entry (administrators; rate limited)",
    body: false,
    responses: { "204": { description: "deleted" } },
  },
};

/** The `{store}` path parameter of the store routes. */
export const STORE_PARAM: JsonSchema = { type: "string", enum: ["event", "command", "data", "cache", "log"] };
