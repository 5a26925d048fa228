/**
 * The `Runtime` domain: every runtime operation as a command or query, with its
 * permission and schema. The definition and its tokens are module-level (one
 * for every facade); the handlers are attached by `installRuntimeDomain`, which
 * each facade's constructor runs with its own Runtime. Lists need `authorized`;
 * control, the system-event stream and store access are granted only by the
 * authorizer (system administrators).
 */
import { defineDomain } from "../model/domain.js";
import type { DomainInstaller } from "../model/domain-install.js";
import type { EventHandlerInfo, EventHandlerMetrics } from "../model/event-handler.js";
import { authenticated, newPermission, newPermissionCmdFunc, type Permission, type PermissionFunc } from "../model/permission.js";
import type { JsonSchema, QueryEnvelope } from "../model/types.js";
import type { QueryContext } from "../model/context.js";
import type { EventHandlerListing } from "../readmodel/handler-runner.js";
import type { StoreAction, StoreName } from "../permissions/store-permissions.js";
import type { DeadLetterControl, DeadLetterEntry, ReactionListFilter, ScheduledCommandEntry } from "../reactions/reaction-listing.js";
import type { StoreInfo as StoreInfoOfStore, StorePage } from "../store/store-info.js";
import type { ClearPersonalData, MigratePersonalDataOptions, PersonalDataMigrationReport } from "../privacy/personal-data-migration.js";
import type {
  CommandHandlerListEntry,
  CommandListEntry,
  ControlRequest,
  EventListEntry,
  QueryHandlerListEntry,
  QueryListEntry,
  RollingUpgradeReport,
  Runtime,
  SystemInfo,
} from "./runtime.js";
import type { FailureEntry, FailureListFilter } from "./failure-history.js";
import type { RetentionOptions, RetentionReport } from "./retention-report.js";
import { scopeOfRequest, type RuntimeScope, type TenantSelection } from "./runtime-scope.js";

const S2020 = "https://json-schema.org/draft/2020-12/schema";
const STORE = { type: "string", enum: ["event", "command", "data", "cache", "log"] };

function objectSchema(properties: Record<string, unknown>, required: string[] = []): JsonSchema {
  return { $schema: S2020, type: "object", properties, required, additionalProperties: false };
}

/** The payload of the Runtime queries that take none. */
export type NoPayload = Record<string, never>;

/** A permission as `Runtime.ListPermissions` answers it: without its function. */
export type PermissionListEntry = Permission extends infer P ? (P extends unknown ? Omit<P, "cmdFunc"> : never) : never;

/** What `Runtime.StoreInfo` answers: the store's own report. */
export type StoreInfo = StoreInfoOfStore;

/** The `Runtime` domain's definition (its name is `Runtime`; the class `Runtime` is the facade's view of itself). */
export const RuntimeDomain = defineDomain("Runtime", {
  description: "The application's view of itself: introspection, control, monitoring, schemas, stores",
});

const empty = objectSchema({});
const list = <R>(name: string, description: string) => RuntimeDomain.query<NoPayload, R>(name, { description, schema: empty });

/**
 * How the Runtime's live queries run again (the dashboard subscribes to them
 * instead of polling). Their results describe the instance, not one tenant's
 * data: a batch of any tenant's events moves a handler's position, so
 * `allTenants`; the system events name the changes no batch makes (a handler
 * stopped, a restore, an append); `everyMs` covers what neither announces (a
 * handler another instance applies while this one stands by, a reactor's
 * effect the outbox worker settles); `minIntervalMs` bounds the cost under
 * load (at most one run per group per interval). The timers run every two
 * seconds, the period the dashboard polled at before, now once per group on
 * the server and sent only when the result changed. `share` stays "sender": the
 * answer depends on who asks (the tenant scope, `allTenants`).
 */
const HANDLER_EVENTS = [
  "EventsAppended",
  "EventHandlerStateChanged",
  "RestoreStarted",
  "RestoreProgress",
  "RestoreCompleted",
  "RestoreFailed",
  "HandlerFailed",
  "HandlersInStandby",
] as const;
const LIVE_HANDLERS = { allTenants: true, systemEvents: HANDLER_EVENTS, everyMs: 2000, minIntervalMs: 500 } as const;
/** System info: its head moves with appends and batches; no timer (its `uptimeMs` would change every run: clients count it from `startedAt`). */
const LIVE_SYSTEM_INFO = {
  allTenants: true,
  systemEvents: ["EventsAppended", "EventHandlerStateChanged", "HandlersInStandby"],
  minIntervalMs: 1000,
} as const;
/** The failure history is fed by the failure events alone: no batch changes it. */
const LIVE_FAILURES = { readmodels: [], allTenants: true, systemEvents: ["CommandFailed", "HandlerFailed", "RestoreFailed"] } as const;
/** Outbox entries: written by process-manager and reactor batches, settled by commands and the outbox worker (announced by nothing: everyMs). */
const LIVE_OUTBOX = {
  allTenants: true,
  systemEvents: ["CommandExecuted", "CommandFailed", "HandlerFailed"],
  everyMs: 2000,
  minIntervalMs: 1000,
} as const;

/** `Runtime.ListCommands`: every registered command with its permission (`authorized`). */
export const ListCommands = list<CommandListEntry[]>("ListCommands", "List every registered command with its permission");
/** `Runtime.ListQueries`: every registered query with its permission (`authorized`). */
export const ListQueries = list<QueryListEntry[]>("ListQueries", "List every registered query with its permission");
/** `Runtime.ListEvents`: every registered domain event (`authorized`). */
export const ListEvents = list<EventListEntry[]>("ListEvents", "List every registered domain event");
/** `Runtime.ListCommandHandlers`: command handlers grouped by domain (`authorized`). */
export const ListCommandHandlers = list<CommandHandlerListEntry[]>("ListCommandHandlers", "List command handlers grouped by domain");
/** `Runtime.ListQueryHandlers`: query handlers grouped by domain (`authorized`). */
export const ListQueryHandlers = list<QueryHandlerListEntry[]>("ListQueryHandlers", "List query handlers grouped by domain");
const ALL_TENANTS_FIELD = {
  type: "boolean",
  description: "Every tenant's entries, not only the effective tenant's (system administrators)",
};

/**
 * `Runtime.ListEventHandlers`: event handlers and readmodels with their state, and a rebuild's progress (`authorized`).
 * A `lastError` of another tenant's event is left out unless `allTenants` (system administrators).
 */
export const ListEventHandlers = RuntimeDomain.query<{ allTenants?: boolean }, EventHandlerListing[]>("ListEventHandlers", {
  description: "List event handlers and readmodels with their state",
  live: LIVE_HANDLERS,
  schema: objectSchema({ allTenants: ALL_TENANTS_FIELD }),
});
/** `Runtime.GetSystemInfo`: application name, version, instance, uptime, stores and counts (`authorized`). */
export const GetSystemInfo = RuntimeDomain.query<NoPayload, SystemInfo>("GetSystemInfo", {
  description: "Application name, version, instance, uptime, stores and counts",
  schema: empty,
  live: LIVE_SYSTEM_INFO,
});

/** `Runtime.ListPermissions`: the permission registry, optionally of one domain (`authorized`). */
export const ListPermissions = RuntimeDomain.query<{ domain?: string }, PermissionListEntry[]>("ListPermissions", {
  description: "List the permission registry (optionally of one domain)",
  schema: objectSchema({ domain: { type: "string" } }),
});

/**
 * `Runtime.GetMetrics`: metrics of one handler, or a record by handler name of every state restorer (`authorized`).
 * A `lastError` of another tenant's event is left out unless `allTenants` (system administrators).
 */
export const GetMetrics = RuntimeDomain.query<
  { eventHandlerName?: string; allTenants?: boolean },
  EventHandlerMetrics | Record<string, EventHandlerMetrics>
>("GetMetrics", {
  description: "Metrics of event handlers that are state restorers",
  live: LIVE_HANDLERS,
  schema: objectSchema({ eventHandlerName: { type: "string", minLength: 1 }, allTenants: ALL_TENANTS_FIELD }),
});

/** `Runtime.GetSchema`: the JSON Schema 2020-12 of a command, query or event type (`authorized`). */
export const GetSchema = RuntimeDomain.query<{ domain: string; type: string }, JsonSchema>("GetSchema", {
  description: "The JSON Schema 2020-12 of a command, query or event type",
  schema: objectSchema({ domain: { type: "string", minLength: 1 }, type: { type: "string", minLength: 1 } }, ["domain", "type"]),
});

/** `Runtime.ControlEventHandler`: restore, start or stop an event handler; `result` is its info (authorizer only). */
export const ControlEventHandler = RuntimeDomain.command<ControlRequest, EventHandlerInfo>("ControlEventHandler", {
  description: "Restore (optionally from zero), start or stop an event handler (system administrators)",
  // `action` is checked by runtime.controlEventHandler, not by the schema: an unknown action is
  // INVALID_ACTION whichever way it comes (direct call, dispatch, HTTP), never VALIDATION_FAILED.
  schema: objectSchema(
    {
      action: { description: '"restore", "start" or "stop"; anything else is INVALID_ACTION', examples: ["restore", "start", "stop"] },
      eventHandlerName: { type: "string", minLength: 1 },
      restoreFromZero: { type: "boolean" },
    },
    ["eventHandlerName"],
  ),
});

const reactionList = objectSchema({
  eventHandlerName: { type: "string", minLength: 1 },
  tenantUuid: { type: "string" },
  allTenants: ALL_TENANTS_FIELD,
  limit: { type: "integer", minimum: 1, maximum: 1000 },
});

/** `Runtime.ListScheduledCommands`: pending scheduled commands of the process managers, due first, of the effective tenant unless `allTenants` (`authorized`). */
export const ListScheduledCommands = RuntimeDomain.query<ReactionListFilter, ScheduledCommandEntry[]>("ListScheduledCommands", {
  description: "List the scheduled commands of process managers that have not fired",
  schema: reactionList,
  live: LIVE_OUTBOX,
});

/** `Runtime.CancelScheduledCommand`: cancels a scheduled command that has not fired; `result` is what was cancelled (authorizer only). */
export const CancelScheduledCommand = RuntimeDomain.command<{ commandUuid: string; eventHandlerName?: string }, ScheduledCommandEntry>(
  "CancelScheduledCommand",
  {
    description: "Cancel a scheduled command that has not fired (system administrators)",
    schema: objectSchema({ commandUuid: { type: "string", minLength: 1 }, eventHandlerName: { type: "string", minLength: 1 } }, [
      "commandUuid",
    ]),
  },
);

/** `Runtime.ListDeadLetters`: dispatches and effects of process managers and reactors that failed their last attempt, of the effective tenant unless `allTenants` (`authorized`). */
export const ListDeadLetters = RuntimeDomain.query<ReactionListFilter, DeadLetterEntry[]>("ListDeadLetters", {
  description: "List the dead letters of process managers and reactors",
  schema: reactionList,
  live: LIVE_OUTBOX,
});

/** `Runtime.ControlDeadLetter`: `retry` a dead letter (pending again, attempts reset) or `discard` it; `result` is the entry (authorizer only). */
export const ControlDeadLetter = RuntimeDomain.command<DeadLetterControl, DeadLetterEntry>("ControlDeadLetter", {
  description: "Retry or discard a dead letter of a process manager or reactor (system administrators)",
  // `action` is checked by the Runtime, as for ControlEventHandler: an unknown action is INVALID_ACTION.
  schema: objectSchema(
    {
      action: { description: '"retry" or "discard"; anything else is INVALID_ACTION', examples: ["retry", "discard"] },
      id: { type: "string", minLength: 1 },
      eventHandlerName: { type: "string", minLength: 1 },
    },
    ["id"],
  ),
});

/** `Runtime.ListFailures`: the latest failures this instance saw (failed commands, handler failures, failed restores), newest first, of the effective tenant unless `allTenants` (`authorized`). */
export const ListFailures = RuntimeDomain.query<FailureListFilter, FailureEntry[]>("ListFailures", {
  description: "List the latest failures this instance saw: failed commands, handler failures, failed restores",
  schema: reactionList,
  live: LIVE_FAILURES,
});

/**
 * `Runtime.StreamSystemEvents`: no handler; the permission the SSE route of
 * mneme/http checks (authorizer only).
 */
export const StreamSystemEvents = RuntimeDomain.query<NoPayload, never>("StreamSystemEvents", {
  description: "Subscribe to the real-time system-event stream (SSE; system administrators)",
  schema: empty,
});

/**
 * `Runtime.SubscribeEvents`: no handler; the first permission the event
 * subscription route of mneme/http checks (`authenticated`), before each event
 * type's own `<Domain>.Subscribe.<Event>` (see `allowEventSubscriptions`).
 */
export const SubscribeEvents = RuntimeDomain.query<{ types: string[]; allTenants: boolean }, never>("SubscribeEvents", {
  description: "Subscribe to stored events over HTTP (SSE); each event type's Subscribe permission decides too",
  permission: authenticated,
  schema: objectSchema(
    { types: { type: "array", items: { type: "string" }, minItems: 1, maxItems: 100 }, allTenants: { type: "boolean" } },
    ["types", "allTenants"],
  ),
});

/** `Runtime.StoreInfo`: information about a store (needs `<Store>.Info`). */
export const StoreInfo = RuntimeDomain.query<{ store: StoreName }, StoreInfo>("StoreInfo", {
  description: "Information about a store (needs <Store>.Info)",
  schema: objectSchema({ store: STORE }, ["store"]),
});
/**
 * `Runtime.StoreRead`: a page of store entries, `cursor` from the previous page's `nextCursor` (needs `<Store>.Read`).
 * The event, command and log stores give the effective tenant's entries, every tenant's with `allTenants`.
 */
export const StoreRead = RuntimeDomain.query<
  { store: StoreName; cursor?: string; limit?: number; allTenants?: boolean },
  StorePage<unknown>
>("StoreRead", {
  description: "Read a page of store entries (needs <Store>.Read)",
  schema: objectSchema(
    { store: STORE, cursor: { type: "string" }, limit: { type: "integer", minimum: 1, maximum: 1000 }, allTenants: ALL_TENANTS_FIELD },
    ["store"],
  ),
});
/** `Runtime.StoreUpdate`: write a store entry; `result` is `{ key }` (needs `<Store>.Update`). */
export const StoreUpdate = RuntimeDomain.command<{ store: StoreName; key: string; value: unknown }, { key: string }>("StoreUpdate", {
  description: "Write a store entry (needs <Store>.Update)",
  schema: objectSchema({ store: STORE, key: { type: "string", minLength: 1 }, value: {} }, ["store", "key", "value"]),
});
/** `Runtime.StoreDelete`: delete a store entry; `result` is `{ deleted: true }` (needs `<Store>.Delete`). */
export const StoreDelete = RuntimeDomain.command<{ store: StoreName; key: string }, { deleted: boolean }>("StoreDelete", {
  description: "Delete a store entry (needs <Store>.Delete)",
  schema: objectSchema({ store: STORE, key: { type: "string", minLength: 1 } }, ["store", "key"]),
});

/**
 * `Runtime.MigratePersonalData`: seals the declared personal fields stored in clear (events written before
 * their type declared them, command records), so `forget` erases them; `result` is the report (authorizer only).
 */
export const MigratePersonalData = RuntimeDomain.command<MigratePersonalDataOptions, PersonalDataMigrationReport>("MigratePersonalData", {
  description: "Seal personal data stored before it was declared, so forget erases it (system administrators)",
  schema: objectSchema({ dryRun: { type: "boolean" }, batchSize: { type: "integer", minimum: 1, maximum: 10000 } }),
});

/**
 * `Runtime.FinishRollingUpgrade`: ends compatibility mode of a rolling deploy once every instance of the older
 * release is gone (the store refuses their writes again), then seals the personal data written in clear
 * meanwhile; `result` is the report (authorizer only). See docs/upgrading.md.
 */
export const FinishRollingUpgrade = RuntimeDomain.command<MigratePersonalDataOptions & { settleMs?: number }, RollingUpgradeReport>(
  "FinishRollingUpgrade",
  {
    description:
      "End a rolling deploy's compatibility mode once the older instances are gone, then seal personal data (system administrators)",
    schema: objectSchema({
      batchSize: { type: "integer", minimum: 1, maximum: 10000 },
      settleMs: { type: "integer", minimum: 0, maximum: 600000 },
    }),
  },
);

/**
 * `Runtime.GetClearPersonalData`: what the start-up check (or the last migration) found of personal data stored
 * in clear: the count of subjects `forget` cannot erase yet and the first ids (authorizer only); null when not checked.
 */
export const GetClearPersonalData = RuntimeDomain.query<NoPayload, ClearPersonalData | null>("GetClearPersonalData", {
  description: "Subjects whose personal data is stored in clear, not erasable until MigratePersonalData ran (system administrators)",
  schema: empty,
});

/**
 * `Runtime.ForgetSubject`: erases a data subject (`facade.forget`: its keys deleted, its personal fields read
 * "[erased]" from then on); `result` is `{ keysDeleted }`. System administrators erase any subject, a tenant's
 * administrator (a group of the tenant holds `Runtime.ForgetSubject`) a subject whose events are all in its
 * tenant. The SubjectForgotten event records the caller and the command.
 */
export const ForgetSubject = RuntimeDomain.command<{ subjectUuid: string }, { keysDeleted: number }>("ForgetSubject", {
  description:
    "Erase a data subject's personal data (system administrators, or a tenant's administrator for subjects whose events are all in its tenant)",
  schema: objectSchema(
    { subjectUuid: { type: "string", minLength: 1, maxLength: 512, description: "The data subject, as `personalData.subject` names it" } },
    ["subjectUuid"],
  ),
});

/**
 * `Runtime.ApplyRetention`: removes the events older than their type's `retainFor` (never what a live
 * aggregate's state depends on without a snapshot) and the LogStore entries older than its retention, and
 * records the run in the event chain; `dryRun` lists what would go. `result` is the report (system administrators).
 * See docs/operations.md, "Retention".
 */
export const ApplyRetention = RuntimeDomain.command<RetentionOptions, RetentionReport>("ApplyRetention", {
  description: "Remove expired events and log entries, recorded in the event chain; dryRun lists what would go (system administrators)",
  schema: objectSchema({ dryRun: { type: "boolean" }, batchSize: { type: "integer", minimum: 1, maximum: 10000 } }),
});

/** The store messages, each gated by the store's own `<Store>.<Action>` permission once installed. */
export const STORE_MESSAGES = Object.freeze([StoreInfo, StoreRead, StoreUpdate, StoreDelete]);

// No level: only the authorizer grants these (system administrators). The store messages are too until
// installed, where their permission becomes the gate of the store's own permission (it needs the Runtime).
for (const t of [
  ControlEventHandler,
  CancelScheduledCommand,
  ControlDeadLetter,
  MigratePersonalData,
  FinishRollingUpgrade,
  GetClearPersonalData,
  ForgetSubject,
  ApplyRetention,
  StreamSystemEvents,
  ...STORE_MESSAGES,
]) {
  RuntimeDomain.registerPermission(newPermission("Runtime", t.name, t.description));
}

/**
 * The install step of the Runtime domain: attaches its handlers, and the store
 * messages' permissions, over one facade's Runtime. Run by the facade's
 * constructor: `facade.registerDomain(RuntimeDomain, (d) => installRuntimeDomain(d, runtime))`.
 */
export function installRuntimeDomain(d: DomainInstaller, runtime: Runtime): void {
  // Reads that hold tenant data: the caller's effective tenant, or every tenant for a system administrator.
  const scope = (ctx: QueryContext, q: QueryEnvelope, p: TenantSelection): Promise<RuntimeScope> =>
    scopeOfRequest(runtime.permissions, ctx.reqCtx, q, ctx.tenantUuid, p);
  const scopedFilter = async (ctx: QueryContext, q: QueryEnvelope, p: ReactionListFilter): Promise<ReactionListFilter> => {
    const { allTenants: _a, tenantUuid: _t, ...rest } = p;
    const s = await scope(ctx, q, p);
    return s.tenantUuid === undefined ? rest : { ...rest, tenantUuid: s.tenantUuid };
  };
  d.handleQuery(ListCommands, () => runtime.listCommands());
  d.handleQuery(ListQueries, () => runtime.listQueries());
  d.handleQuery(ListEvents, () => runtime.listEvents());
  d.handleQuery(ListCommandHandlers, () => runtime.listCommandHandlers());
  d.handleQuery(ListQueryHandlers, () => runtime.listQueryHandlers());
  d.handleQuery(ListEventHandlers, async (ctx, q, p) => runtime.listEventHandlers(await scope(ctx, q, p)));
  d.handleQuery(GetSystemInfo, () => runtime.systemInfoWithChain());
  d.handleQuery(ListPermissions, (_ctx, _q, p) =>
    runtime.permissions.list(p.domain === undefined ? {} : { domain: p.domain }).map(({ cmdFunc: _f, ...rest }) => rest),
  );
  d.handleQuery(GetMetrics, async (ctx, q, p) => {
    const s = await scope(ctx, q, { ...(p.allTenants === undefined ? {} : { allTenants: p.allTenants }) });
    return p.eventHandlerName === undefined ? runtime.getMetrics(undefined, s) : runtime.getMetrics(p.eventHandlerName, s);
  });
  d.handleQuery(GetSchema, (_ctx, _q, p) => runtime.getSchema(p));
  d.handleCommand(ControlEventHandler, async (_ctx, _c, p) => ({ result: await runtime.controlEventHandler(p) }));
  d.handleQuery(ListScheduledCommands, async (ctx, q, p) => runtime.listScheduledCommands(await scopedFilter(ctx, q, p)));
  d.handleCommand(CancelScheduledCommand, async (_ctx, _c, p) => ({ result: await runtime.cancelScheduledCommand(p) }));
  d.handleQuery(ListDeadLetters, async (ctx, q, p) => runtime.listDeadLetters(await scopedFilter(ctx, q, p)));
  d.handleCommand(ControlDeadLetter, async (_ctx, _c, p) => ({ result: await runtime.controlDeadLetter(p) }));
  d.handleQuery(ListFailures, async (ctx, q, p) => runtime.listFailures(await scopedFilter(ctx, q, p)));
  d.handleQuery(GetClearPersonalData, () => runtime.clearPersonalData() ?? null);
  d.handleCommand(MigratePersonalData, async (_ctx, _c, p) => ({ result: await runtime.migratePersonalData(p) }));
  d.handleCommand(FinishRollingUpgrade, async (_ctx, _c, p) => ({ result: await runtime.finishRollingUpgrade(p) }));
  // Administrators of the system, or of the one tenant that holds the subject's events: decided by the Runtime.
  d.registerPermission(
    newPermissionCmdFunc("Runtime", ForgetSubject.name, (reqCtx, env) => runtime.authorizeForget(reqCtx, env), ForgetSubject.description),
  );
  d.handleCommand(ForgetSubject, async (ctx, c, p) => ({
    result: await runtime.forgetSubject(p.subjectUuid, { reqCtx: ctx.reqCtx, commandUuid: c.commandUuid }),
  }));

  d.handleCommand(ApplyRetention, async (ctx, c, p) => ({
    result: await runtime.applyRetention(p, { reqCtx: ctx.reqCtx, commandUuid: c.commandUuid }),
  }));

  // Store access: each operation is gated by the store's own <Store>.<Action> permission.
  const gate =
    (action: StoreAction): PermissionFunc =>
    async (reqCtx, env) => {
      await runtime.stores.authorize((env.payload as { store?: unknown } | undefined)?.store, action, reqCtx, env.payload);
    };
  const actions = [
    [StoreInfo, "Info"],
    [StoreRead, "Read"],
    [StoreUpdate, "Update"],
    [StoreDelete, "Delete"],
  ] as const;
  for (const [t, action] of actions) d.registerPermission(newPermissionCmdFunc("Runtime", t.name, gate(action), t.description));
  d.handleQuery(StoreInfo, (ctx, _q, p) => runtime.stores.info(p.store, ctx.reqCtx));
  // The store permission is granted to system administrators only already: allTenants asks nothing more of them.
  d.handleQuery(StoreRead, (ctx, _q, p) =>
    runtime.stores.read(p.store, ctx.reqCtx, {
      ...(p.cursor === undefined ? {} : { cursor: p.cursor }),
      ...(p.limit === undefined ? {} : { limit: p.limit }),
      ...(p.allTenants === true ? {} : { tenantUuid: ctx.tenantUuid }),
    }),
  );
  d.handleCommand(StoreUpdate, async (ctx, _c, p) => ({ result: await runtime.stores.update(p.store, ctx.reqCtx, p.key, p.value) }));
  d.handleCommand(StoreDelete, async (ctx, _c, p) => ({ result: await runtime.stores.delete(p.store, ctx.reqCtx, p.key) }));
}
