import { defineDomain, type Domain } from "../model/domain.js";
import { MnemeError } from "../model/errors.js";
import type { JsonSchema } from "../model/types.js";
import type { PermissionFunc } from "../model/permission.js";
import type { StoreAction } from "../permissions/store-permissions.js";
import type { Runtime } from "./runtime.js";

const S2020 = "https://json-schema.org/draft/2020-12/schema";
const STORE = { type: "string", enum: ["event", "command", "data", "cache", "log"] };

function objectSchema(properties: Record<string, unknown>, required: string[] = []): JsonSchema {
  return { $schema: S2020, type: "object", properties, required, additionalProperties: false };
}

/**
 * Defines the `Runtime` domain over a Runtime: every runtime operation as a
 * command or query, with its permission and schema. Lists need `authorized`;
 * control, the system-event stream and store access are granted only by the
 * authorizer (system administrators).
 */
export function defineRuntimeDomain(runtime: Runtime): Domain {
  const Runtime = defineDomain("Runtime", { description: "The application's view of itself: introspection, control, monitoring, schemas, stores" });
  const empty = objectSchema({});

  const list = <R>(name: string, description: string, fn: () => R) => {
    const q = Runtime.query<Record<string, never>, R>(name, { description, schema: empty });
    Runtime.handleQuery(q, () => fn());
    return q;
  };
  list("ListCommands", "List every registered command with its permission", () => runtime.listCommands());
  list("ListQueries", "List every registered query with its permission", () => runtime.listQueries());
  list("ListEvents", "List every registered domain event", () => runtime.listEvents());
  list("ListCommandHandlers", "List command handlers grouped by domain", () => runtime.listCommandHandlers());
  list("ListQueryHandlers", "List query handlers grouped by domain", () => runtime.listQueryHandlers());
  list("ListEventHandlers", "List event handlers and readmodels with their state", () => runtime.listEventHandlers());
  list("GetSystemInfo", "Application name, version, instance, uptime, stores and counts", () => runtime.systemInfo());

  const ListPermissions = Runtime.query<{ domain?: string }, unknown>("ListPermissions", {
    description: "List the permission registry (optionally of one domain)",
    schema: objectSchema({ domain: { type: "string" } }),
  });
  Runtime.handleQuery(ListPermissions, (_ctx, _q, p) =>
    runtime.permissions.list(p.domain === undefined ? {} : { domain: p.domain }).map(({ cmdFunc: _f, ...rest }) => rest));

  const GetMetrics = Runtime.query<{ eventHandlerName?: string }, unknown>("GetMetrics", {
    description: "Metrics of event handlers that are state restorers",
    schema: objectSchema({ eventHandlerName: { type: "string", minLength: 1 } }),
  });
  Runtime.handleQuery(GetMetrics, (_ctx, _q, p) => (p.eventHandlerName === undefined ? runtime.getMetrics() : runtime.getMetrics(p.eventHandlerName)));

  const GetSchema = Runtime.query<{ domain: string; type: string }, JsonSchema>("GetSchema", {
    description: "The JSON Schema 2020-12 of a command, query or event type",
    schema: objectSchema({ domain: { type: "string", minLength: 1 }, type: { type: "string", minLength: 1 } }, ["domain", "type"]),
  });
  Runtime.handleQuery(GetSchema, (_ctx, _q, p) => runtime.getSchema(p));

  const ControlEventHandler = Runtime.command<{ action: "restore" | "start" | "stop"; eventHandlerName: string; restoreFromZero?: boolean }, unknown>("ControlEventHandler", {
    description: "Restore (optionally from zero), start or stop an event handler (system administrators)",
    // `action` is checked by runtime.controlEventHandler, not by the schema: an unknown action is
    // INVALID_ACTION whichever way it comes (direct call, dispatch, HTTP), never VALIDATION_FAILED.
    schema: objectSchema({
      action: { description: "\"restore\", \"start\" or \"stop\"; anything else is INVALID_ACTION", examples: ["restore", "start", "stop"] },
      eventHandlerName: { type: "string", minLength: 1 },
      restoreFromZero: { type: "boolean" },
    }, ["eventHandlerName"]),
  });
  Runtime.handleCommand(ControlEventHandler, async (_ctx, _c, p) => ({ result: await runtime.controlEventHandler(p) }));

  Runtime.query<Record<string, never>, unknown>("StreamSystemEvents", {
    description: "Subscribe to the real-time system-event stream (SSE; system administrators)",
    schema: empty,
  });

  // Store access: each operation is gated by the store's own <Store>.<Action> permission.
  const gate = (action: StoreAction): PermissionFunc => async (reqCtx, env) => {
    await runtime.stores.authorize((env.payload as { store?: unknown } | undefined)?.store, action, reqCtx, env.payload);
  };
  const StoreInfo = Runtime.query<{ store: string }, unknown>("StoreInfo", {
    description: "Information about a store (needs <Store>.Info)", permission: gate("Info"), schema: objectSchema({ store: STORE }, ["store"]),
  });
  Runtime.handleQuery(StoreInfo, (ctx, _q, p) => runtime.stores.info(p.store as never, ctx.reqCtx));
  const StoreRead = Runtime.query<{ store: string; cursor?: string; limit?: number }, unknown>("StoreRead", {
    description: "Read a page of store entries (needs <Store>.Read)", permission: gate("Read"),
    schema: objectSchema({ store: STORE, cursor: { type: "string" }, limit: { type: "integer", minimum: 1, maximum: 1000 } }, ["store"]),
  });
  Runtime.handleQuery(StoreRead, (ctx, _q, p) => runtime.stores.read(p.store as never, ctx.reqCtx, {
    ...(p.cursor === undefined ? {} : { cursor: p.cursor }), ...(p.limit === undefined ? {} : { limit: p.limit }),
  }));
  const StoreUpdate = Runtime.command<{ store: string; key: string; value: unknown }, unknown>("StoreUpdate", {
    description: "Write a store entry (needs <Store>.Update)", permission: gate("Update"),
    schema: objectSchema({ store: STORE, key: { type: "string", minLength: 1 }, value: {} }, ["store", "key", "value"]),
  });
  Runtime.handleCommand(StoreUpdate, async (ctx, _c, p) => ({ result: await runtime.stores.update(p.store as never, ctx.reqCtx, p.key, p.value) }));
  const StoreDelete = Runtime.command<{ store: string; key: string }, unknown>("StoreDelete", {
    description: "Delete a store entry (needs <Store>.Delete)", permission: gate("Delete"),
    schema: objectSchema({ store: STORE, key: { type: "string", minLength: 1 } }, ["store", "key"]),
  });
  Runtime.handleCommand(StoreDelete, async (ctx, _c, p) => ({ result: await runtime.stores.delete(p.store as never, ctx.reqCtx, p.key) }));

  // Control and the stream: no level; only the authorizer grants them (system administrators).
  for (const type of ["ControlEventHandler", "StreamSystemEvents"]) {
    const current = Runtime.permissions.get(type);
    if (current === undefined) throw new MnemeError("INVALID_DOMAIN", `Runtime.${type} missing`);
    Runtime.registerPermission({ kind: "administrator", domain: "Runtime", type, description: current.description, funcSet: false });
  }
  return Runtime;
}
