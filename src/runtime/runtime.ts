import { hostname } from "node:os";
import { type ChainHead, isChained } from "../store/event-chain.js";
import { isStoreFormatted, type RollingFrom, STORE_FORMAT, type StoreFormatRecord } from "../store/store-format.js";
import { isMnemeError, MnemeError } from "../model/errors.js";
import { nowNs } from "../model/clock.js";
import type { CommandEnvelope, JsonSchema, QueryEnvelope, RequestContext } from "../model/types.js";
import { newUuid } from "../model/clock.js";
import type { PermissionRegistry } from "../permissions/permission-registry.js";
import { type BaseEventHandler, runnerOf } from "../readmodel/base-event-handler.js";
import type { EventHandlerInfo, EventHandlerMetrics } from "../model/event-handler.js";
import type { SchemaRegistry, SchemaTypeRef } from "../schema/schema-registry.js";
import type { InstalledDomain } from "../model/domain-install.js";
import { type Guarantee, guaranteesOf } from "../store/backend.js";
import type { ReadmodelStoreBackend } from "../store/readmodel-store-backend.js";
import {
  cancelScheduledCommand,
  controlDeadLetter,
  listDeadLetters,
  listScheduledCommands,
  type DeadLetterControl,
  type DeadLetterEntry,
  type ReactionListFilter,
  type ScheduledCommandEntry,
} from "../reactions/reaction-listing.js";
import { type GovernedStores, StoreAccess } from "./store-access.js";
import type { FailureEntry, FailureListFilter } from "./failure-history.js";
import type { ClearPersonalData, MigratePersonalDataOptions, PersonalDataMigrationReport } from "../privacy/personal-data-migration.js";
import type { SystemEventProducer } from "./system-events.js";
import type { RetentionOptions, RetentionReport } from "./retention-report.js";
import { ALL_TENANTS, type RuntimeScope, scopedInfo, scopedMetrics } from "./runtime-scope.js";

export interface CommandListEntry {
  domain: string;
  domainCmdName: string;
  description: string;
  permission: string;
}
export interface QueryListEntry {
  domain: string;
  domainQryName: string;
  description: string;
  permission: string;
}
export interface EventListEntry {
  domain: string;
  domainEvtName: string;
  domainEvtPath: string;
  description: string;
  /** The event's current version, when it is above 1 (older stored versions are upcast to it). */
  version?: number;
  /** Former names, when it was renamed (stored events of those names read as this one). */
  renamedFrom?: string[];
  /**
   * True when the type declares tags: its events are stored in the tag index and
   * command queries (`ctx.events`) may name it. (The tags are computed from
   * each payload; they cannot be listed here.)
   */
  tagged?: true;
}
export interface CommandHandlerListEntry {
  commandHandlerDomain: string;
  domainCommandHandlers: { domainCmdName: string }[];
}
export interface QueryHandlerListEntry {
  queryHandlerDomain: string;
  domainQueryHandlers: { domainQryName: string }[];
}

export type ControlAction = "restore" | "start" | "stop";
export interface ControlRequest {
  action: ControlAction;
  eventHandlerName: string;
  restoreFromZero?: boolean;
}

export interface SystemInfo {
  appName: string;
  version: string;
  instanceId: string;
  /** ns since the epoch; 0 before start. */
  startedAt: number;
  uptimeMs: number;
  nodeVersion: string;
  /** The host this instance runs on (its hostname; "" where the runtime has none). */
  host: string;
  /** The process id of this instance (0 where the runtime has none). */
  pid: number;
  /** The names of the registered domains, so a client asks only for queries that exist (e.g. `Shards` of a sharded app). */
  domains: string[];
  tenant?: string;
  /** Store type per store. */
  stores: Record<"event" | "command" | "data" | "cache" | "log" | "readmodel", string>;
  /** What the stores guarantee together (see `Guarantee` in mneme/store), e.g. "blue-green-rebuild", "single-processor". */
  guarantees: Guarantee[];
  counts: {
    domains: number;
    commands: number;
    queries: number;
    events: number;
    commandHandlers: number;
    queryHandlers: number;
    eventHandlers: number;
    permissions: number;
  };
  headPosition: number;
  state: string;
  /** Commands and queries without a payload schema (`Domain.Name`): their payloads are not validated. */
  unvalidated: string[];
  /**
   * Personal data stored in clear (written before its type declared it), as the start-up check or the last
   * migration found it: how many subjects `forget` cannot erase until `MigratePersonalData` ran (their ids:
   * `GetClearPersonalData`, system administrators). Absent when not checked.
   */
  personalDataInClear?: { subjects: number; events: number; complete: boolean };
  /**
   * The store format this release writes (`release`) and the format record of
   * each store that keeps one (SQLite, Postgres), as its `init()` left it
   * (see docs/upgrading.md).
   */
  storeFormat: { release: number; stores: Partial<Record<keyof SystemInfo["stores"], StoreFormatRecord>> };
  /**
   * The release whose instances the store still admits beside this one: a rolling deploy in compatibility mode
   * (`rollingFrom`), until `FinishRollingUpgrade`. Absent otherwise (see docs/upgrading.md).
   */
  rollingFrom?: RollingFrom;
  /**
   * The head of the events' hash chain (tamper evidence): the highest position and its hash, to write down
   * and compare with a later `mneme store verify` (see docs/operations.md). Absent when the event store keeps no chain.
   */
  eventChain?: ChainHead;
}

/** What `facade.finishRollingUpgrade` (the Runtime command `FinishRollingUpgrade`) did. */
export interface RollingUpgradeReport {
  /** The release whose writers the store admitted until now (null: it admitted none; the call only migrated). */
  finishedFrom: RollingFrom | null;
  /** The event store's format record now (its `lowestWriterFormat` refuses the old release's writers). */
  storeFormat: StoreFormatRecord | null;
  /**
   * Readmodel documents the old release wrote whose tenant could not be derived (their key names no
   * aggregate), by collection: only unscoped reads see them; restore their readmodel from zero.
   */
  unscopedDocuments: { collection: string; documents: number }[];
  /** The personal-data migration that sealed what was written in clear meanwhile. */
  migration: PersonalDataMigrationReport;
}

/**
 * What the Runtime reads of the facade it serves: the registered parts, the
 * stores, the lifecycle. The Facade implements it; the Runtime never needs
 * the Facade class.
 */
export interface RuntimeHost extends GovernedStores {
  readonly appName: string;
  readonly version: string;
  readonly instanceId: string;
  readonly tenant: string | undefined;
  /** ns since the epoch; 0 before start. */
  readonly startedAt: number;
  readonly headPosition: number;
  readonly state: string;
  readonly readmodelStoreBackend: ReadmodelStoreBackend;
  /** Each with the handlers installed in this facade. */
  readonly domains: ReadonlyMap<string, InstalledDomain>;
  readonly eventHandlers: ReadonlyMap<string, BaseEventHandler>;
  readonly schemas: SchemaRegistry;
  /** What the start-up check (or the last migration) found of personal data stored in clear. */
  readonly clearPersonalData?: ClearPersonalData | undefined;
  migratePersonalData?(opts?: MigratePersonalDataOptions): Promise<PersonalDataMigrationReport>;
  /** Erases a data subject (`facade.forget`), recording who asked on its SubjectForgotten event. */
  forget?(subject: string, opts?: { reqCtx?: RequestContext; commandUuid?: string }): Promise<{ keysDeleted: number }>;
  /** The tenants whose events carry the subject's personal data. */
  subjectTenants?(subject: string): Promise<ReadonlySet<string>>;
  /** A retention run (`facade.applyRetention`): see docs/operations.md, "Retention". */
  applyRetention?(opts?: RetentionOptions, by?: { reqCtx?: RequestContext; commandUuid?: string }): Promise<RetentionReport>;
  /** See {@link RollingUpgradeReport}. */
  finishRollingUpgrade?(opts?: MigratePersonalDataOptions & { settleMs?: number }): Promise<RollingUpgradeReport>;
  /** The release whose writers the store admits (compatibility mode of a rolling deploy), undefined otherwise. */
  readonly rollingFrom?: RollingFrom | undefined;
}

const CONTROL_ACTIONS: readonly ControlAction[] = ["restore", "start", "stop"];

/**
 * The Runtime meta-domain: introspection, event-handler control, monitoring,
 * schema discovery and store access. Every operation is also a command or
 * query of the domain `Runtime` (permission-checked through dispatch/query).
 */
export class Runtime {
  readonly permissions: PermissionRegistry;
  readonly systemEvents: SystemEventProducer;
  readonly stores: StoreAccess;
  #storeTypes: SystemInfo["stores"] | undefined;
  /** Derived once: the stores of a facade never change. */
  #guarantees: readonly Guarantee[] | undefined;
  // Handlers whose `start` is catching up: a second start or a restore then would race it on lastPosition.
  readonly #starting = new Set<string>();

  constructor(readonly facade: RuntimeHost) {
    this.permissions = facade.permissions;
    this.systemEvents = facade.systemEvents;
    this.stores = new StoreAccess(facade);
  }

  /** Every registered command with its permission: the level name, "Custom", or "Administrator" (granted only by the authorizer). */
  listCommands(): CommandListEntry[] {
    const out: CommandListEntry[] = [];
    for (const d of this.facade.domains.values()) {
      for (const c of d.commands.values())
        out.push({ domain: d.name, domainCmdName: c.name, description: c.description, permission: this.#permissionName(d.name, c.name) });
    }
    return out;
  }

  listQueries(): QueryListEntry[] {
    const out: QueryListEntry[] = [];
    for (const d of this.facade.domains.values()) {
      for (const q of d.queries.values())
        out.push({ domain: d.name, domainQryName: q.name, description: q.description, permission: this.#permissionName(d.name, q.name) });
    }
    return out;
  }

  listEvents(): EventListEntry[] {
    const out: EventListEntry[] = [];
    for (const d of this.facade.domains.values()) {
      for (const e of d.events.values()) {
        const entry: EventListEntry = { domain: d.name, domainEvtName: e.name, domainEvtPath: e.path, description: e.description };
        if (e.version > 1) entry.version = e.version;
        if (e.renamedFrom.length > 0) entry.renamedFrom = [...e.renamedFrom];
        if (e.tags !== undefined) entry.tagged = true;
        out.push(entry);
      }
    }
    return out;
  }

  /** Command handlers grouped by domain (domains without handlers are left out). */
  listCommandHandlers(): CommandHandlerListEntry[] {
    const out: CommandHandlerListEntry[] = [];
    for (const d of this.facade.domains.values()) {
      if (d.commandHandlers.size === 0) continue;
      out.push({
        commandHandlerDomain: d.name,
        domainCommandHandlers: [...d.commandHandlers.keys()].map((domainCmdName) => ({ domainCmdName })),
      });
    }
    return out;
  }

  listQueryHandlers(): QueryHandlerListEntry[] {
    const out: QueryHandlerListEntry[] = [];
    for (const d of this.facade.domains.values()) {
      if (d.queryHandlers.size === 0) continue;
      out.push({
        queryHandlerDomain: d.name,
        domainQueryHandlers: [...d.queryHandlers.keys()].map((domainQryName) => ({ domainQryName })),
      });
    }
    return out;
  }

  /**
   * Every event handler with its state. With a tenant's `scope`, a `lastError`
   * from an event of another tenant is left out (error texts carry payload data).
   */
  listEventHandlers(scope: RuntimeScope = ALL_TENANTS): EventHandlerInfo[] {
    return [...this.facade.eventHandlers.values()].map((h) => scopedInfo(runnerOf(h).info(), scope));
  }

  /**
   * Metrics of one handler, or of every handler that has metrics (a record by
   * name). Only state restorers (readmodels) have metrics. With a tenant's
   * `scope`, a `lastError` from an event of another tenant is left out.
   */
  getMetrics(eventHandlerName?: undefined, scope?: RuntimeScope): Record<string, EventHandlerMetrics>;
  getMetrics(eventHandlerName: string, scope?: RuntimeScope): EventHandlerMetrics;
  getMetrics(eventHandlerName?: string, scope: RuntimeScope = ALL_TENANTS): EventHandlerMetrics | Record<string, EventHandlerMetrics> {
    if (eventHandlerName !== undefined) {
      const h = this.#handler(eventHandlerName);
      const runner = runnerOf(h);
      if (!runner.isStateRestorer)
        throw new MnemeError("NOT_FOUND", `event handler ${eventHandlerName} is not a state restorer and has no metrics`);
      return scopedMetrics(runner.getMetrics(), scope);
    }
    const out: Record<string, EventHandlerMetrics> = {};
    for (const h of this.facade.eventHandlers.values()) {
      const runner = runnerOf(h);
      if (runner.isStateRestorer) out[h.name] = scopedMetrics(runner.getMetrics(), scope);
    }
    return out;
  }

  systemInfo(): SystemInfo {
    const f = this.facade;
    let commands = 0,
      queries = 0,
      events = 0,
      commandHandlers = 0,
      queryHandlers = 0;
    const unvalidated: string[] = [];
    for (const d of f.domains.values()) {
      commands += d.commands.size;
      queries += d.queries.size;
      events += d.events.size;
      commandHandlers += d.commandHandlers.size;
      queryHandlers += d.queryHandlers.size;
      unvalidated.push(...f.schemas.missing(d.commands.values()), ...f.schemas.missing(d.queries.values()));
    }
    const info: SystemInfo = {
      appName: f.appName,
      version: f.version,
      instanceId: f.instanceId,
      startedAt: f.startedAt,
      uptimeMs: f.startedAt === 0 ? 0 : Math.max(0, Math.round((nowNs() - f.startedAt) / 1e6)),
      nodeVersion: typeof process === "undefined" ? "" : process.version,
      host: hostName(),
      pid: typeof process === "undefined" ? 0 : process.pid,
      domains: [...f.domains.keys()],
      stores: this.#storeTypes ?? storeTypesOf(f),
      guarantees: [...(this.#guarantees ??= guaranteesOf(f))],
      counts: {
        domains: f.domains.size,
        commands,
        queries,
        events,
        commandHandlers,
        queryHandlers,
        eventHandlers: f.eventHandlers.size,
        permissions: f.permissions.list().length,
      },
      headPosition: f.headPosition,
      state: f.state,
      unvalidated,
      storeFormat: storeFormatsOf(f),
    };
    if (f.tenant !== undefined) info.tenant = f.tenant;
    if (f.rollingFrom !== undefined) info.rollingFrom = f.rollingFrom;
    const clear = f.clearPersonalData;
    if (clear !== undefined) info.personalDataInClear = { subjects: clear.subjects, events: clear.events, complete: clear.complete };
    return info;
  }

  /** {@link systemInfo} with the head of the events' hash chain, read now (the Runtime query `GetSystemInfo`). */
  async systemInfoWithChain(): Promise<SystemInfo> {
    const info = this.systemInfo();
    const f = this.facade;
    const events = (f.eventRepository as { readonly stored?: unknown }).stored ?? f.eventRepository;
    if (isChained(events)) info.eventChain = await events.chainHead();
    return info;
  }

  /** Fresh StoreInfo of every store (counts, newest item). */
  async storeInfo(): Promise<Record<string, unknown>> {
    const f = this.facade;
    const [event, command, data, cache, log, readmodel] = await Promise.all([
      f.eventRepository.info(),
      f.commandStore.info(),
      f.dataStore.info(),
      f.cacheStore.info(),
      f.logStore.info(),
      f.readmodelStoreBackend.info(),
    ]);
    this.#storeTypes = {
      event: event.storeType,
      command: command.storeType,
      data: data.storeType,
      cache: cache.storeType,
      log: log.storeType,
      readmodel: readmodel.storeType,
    };
    return { event, command, data, cache, log, readmodel };
  }

  /** The JSON Schema 2020-12 document of a command, query or event type. UNKNOWN_SCHEMA_TYPE when there is none. */
  getSchema(req: { domain: string; type: string }): JsonSchema {
    const types: SchemaTypeRef[] = [];
    const d = this.facade.domains.get(req?.domain);
    if (d !== undefined) {
      for (const c of d.commands.values()) types.push(c);
      for (const q of d.queries.values()) types.push(q);
      for (const e of d.events.values()) types.push(e);
    }
    const document = this.facade.schemas.requireDocument(types, req ?? {});
    // An event type with tags says so (`x-mneme-tagged`): queries may name it (docs/dcb.md).
    const event = d?.events.get(req.type);
    return event?.tags === undefined ? document : { ...document, "x-mneme-tagged": true };
  }

  /**
   * restore / start / stop of an event handler; resolves when the action is
   * complete with the handler's info. With `reqCtx`, the caller's permission
   * for Runtime.ControlEventHandler is checked first.
   */
  /** What the start-up check (or the last migration) found of personal data stored in clear, with the first subject ids. */
  clearPersonalData(): ClearPersonalData | undefined {
    return this.facade.clearPersonalData;
  }

  /**
   * Runs retention (`facade.applyRetention`): expired events become tombstones, expired log entries go, the
   * run is recorded in the chain; INVALID_STATE when the host cannot. `by` is who asked (recorded).
   */
  async applyRetention(opts: RetentionOptions = {}, by: { reqCtx?: RequestContext; commandUuid?: string } = {}): Promise<RetentionReport> {
    if (this.facade.applyRetention === undefined) throw new MnemeError("INVALID_STATE", "this host cannot apply retention");
    return this.facade.applyRetention(opts, by);
  }

  /** Seals personal data stored before it was declared (see `facade.migratePersonalData`); INVALID_STATE when the host cannot. */
  async migratePersonalData(opts: MigratePersonalDataOptions = {}): Promise<PersonalDataMigrationReport> {
    if (this.facade.migratePersonalData === undefined) throw new MnemeError("INVALID_STATE", "this host cannot migrate personal data");
    return this.facade.migratePersonalData(opts);
  }

  /**
   * Erases a data subject as `facade.forget` does, recording `opts.reqCtx` (who asked) and `commandUuid` on its
   * SubjectForgotten event; INVALID_STATE when the host cannot. A direct call is trusted code: the permission of
   * `Runtime.ForgetSubject` ({@link authorizeForget}) is asked by dispatch.
   */
  async forgetSubject(subjectUuid: string, opts: { reqCtx?: RequestContext; commandUuid?: string } = {}): Promise<{ keysDeleted: number }> {
    if (this.facade.forget === undefined) throw new MnemeError("INVALID_STATE", "this host cannot forget subjects");
    return this.facade.forget(subjectUuid, opts);
  }

  /**
   * The permission of `Runtime.ForgetSubject`: a system administrator (the
   * authorizer grants it as an administrator permission) may erase any
   * subject; a tenant's administrator (the authorizer grants it in the
   * tenant: with the default authorizer, a group of the tenant holds
   * `Runtime.ForgetSubject`) only a subject whose events are all in that
   * tenant (at least one). Nobody without an authorizer. PERMISSION_DENIED otherwise.
   */
  async authorizeForget(
    reqCtx: RequestContext,
    envelope: CommandEnvelope | QueryEnvelope,
    /** Where the subject's events are (default: this facade's store; a sharded app asks every shard). */
    subjectTenants: ((subject: string) => Promise<ReadonlySet<string>>) | undefined = this.facade.subjectTenants?.bind(this.facade),
  ): Promise<void> {
    try {
      await this.permissions.checkAdministrator(reqCtx, envelope);
      return;
    } catch (e) {
      if (!isMnemeError(e, "PERMISSION_DENIED")) throw e;
    }
    await this.permissions.checkGranted(reqCtx, envelope);
    const subject = (envelope.payload as { subjectUuid?: unknown } | undefined)?.subjectUuid;
    // The schema refuses other payloads first; a direct check of a malformed envelope is denied, never widened.
    if (typeof subject !== "string" || subject === "") throw new MnemeError("PERMISSION_DENIED", "ForgetSubject: no subjectUuid given");
    const tenant = reqCtx.targetTenantUuid ?? reqCtx.senderTenantUuid;
    if (subjectTenants === undefined || tenant === undefined || tenant === "")
      throw new MnemeError("PERMISSION_DENIED", "ForgetSubject: a tenant's administrator erases subjects of its tenant only");
    const tenants = await subjectTenants(subject);
    if (!tenants.has(tenant))
      throw new MnemeError("PERMISSION_DENIED", `ForgetSubject: subject ${JSON.stringify(subject)} has no events in tenant ${tenant}`);
    if (tenants.size > 1)
      throw new MnemeError(
        "PERMISSION_DENIED",
        `ForgetSubject: subject ${JSON.stringify(subject)} has events in other tenants than ${tenant}: only a system administrator may erase it`,
      );
  }

  /** Ends compatibility mode of a rolling deploy (see `facade.finishRollingUpgrade`); INVALID_STATE when the host cannot. */
  async finishRollingUpgrade(opts: MigratePersonalDataOptions & { settleMs?: number } = {}): Promise<RollingUpgradeReport> {
    if (this.facade.finishRollingUpgrade === undefined) throw new MnemeError("INVALID_STATE", "this host cannot finish a rolling upgrade");
    return this.facade.finishRollingUpgrade(opts);
  }

  async controlEventHandler(req: ControlRequest, reqCtx?: RequestContext): Promise<EventHandlerInfo> {
    if (typeof req !== "object" || req === null) throw new MnemeError("INVALID_REQUEST", "the control request must be an object");
    if (!CONTROL_ACTIONS.includes(req.action)) {
      throw new MnemeError("INVALID_ACTION", `action must be one of ${CONTROL_ACTIONS.join(", ")} (got ${JSON.stringify(req.action)})`);
    }
    if (typeof req.eventHandlerName !== "string" || req.eventHandlerName === "")
      throw new MnemeError("INVALID_REQUEST", "eventHandlerName is required");
    if (req.restoreFromZero !== undefined && typeof req.restoreFromZero !== "boolean")
      throw new MnemeError("INVALID_REQUEST", "restoreFromZero must be a boolean");
    if (reqCtx !== undefined) {
      await this.permissions.check(reqCtx, {
        commandUuid: newUuid(),
        domain: "Runtime",
        name: "ControlEventHandler",
        payload: req,
        reqCtx,
      });
    }
    const h = this.#handler(req.eventHandlerName);
    const runner = runnerOf(h);
    if (this.facade.state !== "started")
      throw new MnemeError("INVALID_STATE", `the facade is ${this.facade.state}: event handlers are controlled while it runs`);
    switch (req.action) {
      case "restore": {
        if (!runner.isStateRestorer)
          throw new MnemeError(
            "INVALID_ACTION",
            `event handler ${h.name} is not a state restorer: it can be started and stopped, not restored`,
          );
        // The handler's own catch-up from its checkpoint (its start, or a takeover of another instance's lock) is
        // no restore asked for: the one asked for follows it.
        await runner.catchingUp;
        if (h.restoring) throw new MnemeError("INVALID_STATE", `event handler ${h.name} is restoring already`);
        if (this.#starting.has(h.name))
          throw new MnemeError("INVALID_STATE", `event handler ${h.name} is starting: restore it when the start is done`);
        // Through the readmodel's own (possibly overridden) restoreState.
        await runner.restoreThroughHandler({ fromZero: req.restoreFromZero === true }).done;
        break;
      }
      case "start":
        if (h.restoring) throw new MnemeError("INVALID_STATE", `event handler ${h.name} is restoring: it starts by itself when done`);
        if (h.state === "running" || this.#starting.has(h.name))
          throw new MnemeError("INVALID_STATE", `event handler ${h.name} is running already`);
        this.#starting.add(h.name);
        try {
          await h.start();
        } finally {
          this.#starting.delete(h.name);
        }
        // Catching up failed again (e.g. on the event it failed on before): report it like a failed restore does.
        if (h.state === "failed") {
          throw new MnemeError(
            "HANDLER_FAILED",
            `event handler ${h.name} failed again while catching up: ${runner.info().lastError ?? "unknown error"}`,
          );
        }
        break;
      case "stop":
        if (h.state === "stopped" && !h.restoring) throw new MnemeError("INVALID_STATE", `event handler ${h.name} is stopped already`);
        await h.stop();
        break;
    }
    return runner.info();
  }

  /** Pending scheduled commands of the process managers (mneme/reactions), due first. */
  listScheduledCommands(filter: ReactionListFilter = {}): Promise<ScheduledCommandEntry[]> {
    return listScheduledCommands(this.facade.eventHandlers, filter);
  }

  /** Cancels a scheduled command that has not fired; NOT_FOUND otherwise. Resolves with what was cancelled. */
  cancelScheduledCommand(req: { commandUuid: string; eventHandlerName?: string }): Promise<ScheduledCommandEntry> {
    return cancelScheduledCommand(this.facade.eventHandlers, req);
  }

  /** Dead letters of the process managers and reactors: dispatches and effects that failed their last attempt. */
  listDeadLetters(filter: ReactionListFilter = {}): Promise<DeadLetterEntry[]> {
    return listDeadLetters(this.facade.eventHandlers, filter);
  }

  /**
   * The latest failures this instance saw (failed commands, handler failures,
   * failed restores; the last 200), newest first, recorded whether or not the
   * system-event stream runs. Unscoped unless the filter names a tenant.
   */
  listFailures(filter: FailureListFilter = {}): FailureEntry[] {
    return this.systemEvents.failures.list(filter);
  }

  /** `retry` makes a dead letter pending again (attempts reset), `discard` deletes it; NOT_FOUND when there is none. */
  controlDeadLetter(req: DeadLetterControl): Promise<DeadLetterEntry> {
    return controlDeadLetter(this.facade.eventHandlers, req);
  }

  #handler(name: string): BaseEventHandler {
    const h = this.facade.eventHandlers.get(name);
    if (h === undefined) throw new MnemeError("UNKNOWN_EVENT_HANDLER", `unknown event handler ${JSON.stringify(name)}`);
    return h;
  }

  #permissionName(domain: string, type: string): string {
    const p = this.permissions.get(domain, type);
    if (p === undefined) return "None";
    switch (p.kind) {
      case "level":
        return p.level;
      case "custom":
        return "Custom";
      case "administrator":
        return "Administrator";
    }
  }
}

/** The format record of each store that keeps one; the facade's event store is a view over the stored one. */
function storeFormatsOf(f: RuntimeHost): SystemInfo["storeFormat"] {
  const events = (f.eventRepository as { readonly stored?: unknown }).stored ?? f.eventRepository;
  const candidates: [keyof SystemInfo["stores"], unknown][] = [
    ["event", events],
    ["command", f.commandStore],
    ["data", f.dataStore],
    ["cache", f.cacheStore],
    ["log", f.logStore],
    ["readmodel", f.readmodelStoreBackend],
  ];
  const stores: SystemInfo["storeFormat"]["stores"] = {};
  for (const [name, store] of candidates) {
    const record = isStoreFormatted(store) ? store.storeFormat() : undefined;
    if (record !== undefined) stores[name] = record;
  }
  return { release: STORE_FORMAT, stores };
}

function storeTypesOf(f: RuntimeHost): SystemInfo["stores"] {
  const t = (s: object) =>
    s.constructor.name.replace(/(EventRepository|CommandStore|DataStore|CacheStore|LogStore|ReadmodelStoreBackend)$/, "").toLowerCase() ||
    "custom";
  return {
    event: t(f.eventRepository),
    command: t(f.commandStore),
    data: t(f.dataStore),
    cache: t(f.cacheStore),
    log: t(f.logStore),
    readmodel: t(f.readmodelStoreBackend),
  };
}

/** The hostname, or "" where the runtime cannot tell (a sandbox that refuses it). */
function hostName(): string {
  try {
    return hostname();
  } catch {
    return "";
  }
}
