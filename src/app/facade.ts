import { type BackendChoice, chooseStores } from "./backend-choice.js";
import { MemoryCacheStore } from "../memory/memory-cache-store.js";
import { MemoryCommandStore } from "../memory/memory-command-store.js";
import { MemoryDataStore } from "../memory/memory-data-store.js";
import { MemoryEventRepository } from "../memory/memory-event-repository.js";
import { MemoryLogStore } from "../memory/memory-log-store.js";
import { MemoryReadmodelStoreBackend } from "../memory/memory-readmodel-store-backend.js";
import { type Authorizer, PermissionRegistry } from "../permissions/permission-registry.js";
import { type BaseEventHandler, toBaseEventHandler } from "../readmodel/base-event-handler.js";
import { BaseReadmodel } from "../readmodel/base-readmodel.js";
import { DEFAULT_DELIVERY, type DeliveryOptions, type HandlerHost, type HandlerRunner, runnerOf } from "../readmodel/handler-runner.js";
import { type EventHandler, isReadmodelHandle, type ReadmodelHandle } from "../model/event-handler.js";
import { Runtime } from "../runtime/runtime.js";
import { installRuntimeDomain, RuntimeDomain } from "../runtime/runtime-domain.js";
import { SystemEventProducer, type SystemEventProducerOptions } from "../runtime/system-events.js";
import type { SystemEventKind } from "../model/system-event-kind.js";
import { SchemaRegistry } from "../schema/schema-registry.js";
import type { CacheStore } from "../store/cache-store.js";
import type { CommandRecord, CommandStatus, CommandStore } from "../store/command-store.js";
import type { DataStore } from "../store/data-store.js";
import type { AppendOptions, EventRepository } from "../store/event-repository.js";
import type { LogStore } from "../store/log-store.js";
import { jsonSafeProblem, sealJsonSafe } from "../store/json-safe.js";
import { AggregateCache, type AggregateCacheOptions, type AggregateCacheStats } from "./aggregate-cache.js";
import { AggregateLoading } from "./aggregate-loading.js";
import { CommandAggregates } from "./command-aggregates.js";
import { EventView, Upcasting } from "./event-view.js";
import { MemorySnapshotStore } from "../memory/memory-snapshot-store.js";
import { MemoryKeyStore } from "../memory/memory-key-store.js";
import { PersonalDataProtection } from "../privacy/personal-data-protection.js";
import { forgetAggregateUuidOf, SubjectForgotten } from "../privacy/privacy-domain.js";
import { asErasedIn, CommandPayloads, recordedCommandPayload, withoutPersonalFields } from "../privacy/command-payloads.js";
import { canScrubStorage } from "../store/storage-scrub.js";
import { PERSONAL_DATA_UNDECLARED_WARNING, undeclaredPersonalFields } from "../privacy/undeclared-fields.js";
import { type DispatchTrace, loadTelemetry, type Telemetry } from "../observability/telemetry.js";
import type { KeyStore } from "../store/key-store.js";
import type { SnapshotStore } from "../store/snapshot-store.js";
import type { ReadmodelStoreBackend } from "../store/readmodel-store-backend.js";
import { newUuid, nowNs } from "../model/clock.js";
import {
  type AggregateLoader,
  type CommandContext,
  isTenantScopable,
  type LoadedAggregate,
  type MessageContext,
  type QueryContext,
} from "../model/context.js";
import { type Domain, snapshotOptionsOf } from "../model/domain.js";
import { type DomainInstall, installDomain, type InstalledDomain } from "../model/domain-install.js";
import { errorMessage, isMnemeError, MnemeError } from "../model/errors.js";
import { KeyedLock } from "../model/keyed-lock.js";
import {
  type ClaimingCommandStore,
  claimCommand,
  claimingStore,
  type HeldClaim,
  type IdempotencyOptions,
  idempotencyOptions,
} from "./command-claim.js";
import { isPlainObject } from "../model/redact.js";
import type { AggregateTenancy, AggregateType, CommandType, EventType, PersonalData, QueryType } from "../model/tokens.js";
import type { CommandEnvelope, Event, JsonSchema, NewEvent, QueryEnvelope, RequestContext } from "../model/types.js";
import type { DispatchOptions, DispatchResult, FacadeHandle, HandlerError, MessageRef, QueryOptions } from "../model/facade-handle.js";

/** Options of createFacade. Every store defaults to its in-memory implementation. */
export interface FacadeOptions extends BackendChoice {
  readonly appName?: string;
  readonly version?: string;
  /** The tenant this instance serves, when it serves one (shown in systemInfo). */
  readonly tenant?: string;
  readonly instanceId?: string;
  /** The key cache of personal data: keys held (default 10,000) and how long one is used before the store is asked again (ms, default 5,000). */
  readonly personalData?: { readonly keyCacheSize?: number; readonly keyCacheTtlMs?: number };
  /** Output of `mneme schema build`: the object, or the path of its file. */
  readonly schemas?: JsonSchema | string;
  readonly authorizer?: Authorizer;
  /** true: facade.start() starts the system-event producer. */
  readonly systemEvents?: boolean | SystemEventProducerOptions;
  /** Replay batch size and catch buffer bound of every handler (readmodels may override). */
  readonly delivery?: Partial<DeliveryOptions>;
  /**
   * start(): `waitForStandby` (ms, default 0) lets start() wait up to that long for
   * handlers left in standby (another instance holds their processing lock) to take
   * over and catch up. Handlers still in standby then are reported (a
   * `HandlersInStandby` system event and a `warn` LogStore entry).
   */
  readonly start?: { readonly waitForStandby?: number };
  /**
   * The in-process cache of folded aggregate state (on by default, 10,000
   * aggregates): a load reads and folds only the events after the cached
   * version. `false` turns it off.
   */
  readonly aggregateCache?: AggregateCacheOptions | false;
  /** OpenTelemetry spans and metrics, when @opentelemetry/api is installed (docs/observability.md). `false` turns them off. */
  readonly telemetry?: boolean;
  /**
   * Claims of idempotent dispatch (a command store that offers them): the
   * lease of a running command's claim and how long a duplicate waits for its
   * outcome (docs/reactions.md, "How duplicates are settled: claims").
   */
  readonly idempotency?: IdempotencyOptions;
}

type FacadeState = "new" | "starting" | "started" | "stopping" | "stopped";

/** Anything that can be closed and initialised. */
interface Lifecycle {
  init(): Promise<void>;
  close(): Promise<void>;
}

/**
 * The central access point: registers domains and handlers, executes
 * commands, answers queries, and holds the Runtime.
 */
export class Facade implements FacadeHandle {
  readonly appName: string;
  readonly version: string;
  readonly tenant: string | undefined;
  readonly instanceId: string;
  /**
   * The event store as every read path sees it: events come out in their
   * current version and name (upcast) with personal fields decrypted; `stored`
   * is the repository given in the options, whose reads are as written.
   */
  readonly eventRepository: EventRepository & { readonly stored: EventRepository };
  readonly commandStore: CommandStore;
  readonly dataStore: DataStore;
  readonly cacheStore: CacheStore;
  readonly logStore: LogStore;
  readonly readmodelStoreBackend: ReadmodelStoreBackend;
  /** Where aggregate snapshots are kept (aggregates with `snapshotEvery`). */
  readonly snapshotStore: SnapshotStore;
  /** The keys of personal data, one per data subject. */
  readonly keyStore: KeyStore;
  /** Encryption of personal fields on append, decryption on every read, and the deletion of keys (see `forget`). */
  readonly personalData: PersonalDataProtection;
  /** The personal fields of command payloads, sealed where mneme keeps them (records, outboxes), opened on reads. */
  readonly commandPayloads: CommandPayloads;
  readonly permissions: PermissionRegistry;
  readonly systemEvents: SystemEventProducer;
  readonly schemas: SchemaRegistry;
  readonly runtime: Runtime;
  startedAt = 0;

  readonly #options: FacadeOptions;
  readonly #domains = new Map<string, InstalledDomain>();
  readonly #eventTypes = new Map<string, EventType>();
  /** Event path -> "global" when only global aggregates evolve it (its aggregates are exempt from the tenant rule). */
  readonly #eventTenancy = new Map<string, AggregateTenancy>();
  /** Evolve keys naming another domain's events, checked once every domain is registered (at start). */
  readonly #pendingEvolveKeys: { aggregate: AggregateType<any>; key: string }[] = [];
  /** True when the event repository writes the command record in the append's transaction. */
  readonly #recordsWithAppend: boolean;
  /** The command store when it offers claims (exactly one run of duplicates across instances), else undefined. */
  readonly #claims: ClaimingCommandStore | undefined;
  readonly #idempotency: Required<IdempotencyOptions>;
  readonly #handlers = new Map<string, BaseEventHandler>();
  /** Per registered name: the object given, its runner, its handle. */
  readonly #registered = new Map<string, Registration>();
  readonly #locks = new KeyedLock();
  readonly #aggregateCache: AggregateCache | undefined;
  readonly #loading: AggregateLoading;
  /** The event store as every read path sees it (upcast, ...): `eventRepository` is this view. */
  readonly #events: EventView;
  readonly #upcasting = new Upcasting();
  readonly #delivery: DeliveryOptions;
  readonly #startHooks: ((facade: Facade) => Promise<void> | void)[] = [];
  readonly #host: HandlerHost;
  /** What a command context needs of the facade, made once (not per command). */
  readonly #ctxHost: CommandContextHost;
  #state: FacadeState = "new";
  #head = 0;
  #unsubscribe: (() => void)[] = [];
  #pushesLocally = false;
  #startPromise: Promise<void> | undefined;
  /** Loaded at start when @opentelemetry/api is installed: undefined is the whole cost otherwise. */
  #telemetry: Telemetry | undefined;
  #stopPromise: Promise<void> | undefined;

  constructor(options: FacadeOptions = {}) {
    options = chooseStores(options);
    this.#options = options;
    this.appName = options.appName ?? "mneme-app";
    this.version = options.version ?? "0.0.0";
    this.tenant = options.tenant;
    this.instanceId = options.instanceId ?? newUuid();
    this.#events = new EventView(options.eventRepository ?? new MemoryEventRepository());
    this.eventRepository = this.#events;
    this.keyStore = options.keyStore ?? new MemoryKeyStore();
    this.personalData = new PersonalDataProtection({
      keyStore: this.keyStore,
      personalDataOf: (domain, name) => this.#personalDataAt(`${domain}.${name}`),
      ...options.personalData,
    });
    this.commandPayloads = new CommandPayloads(
      this.personalData,
      (domain, name) => this.#domains.get(domain)?.commands.get(name),
      (domain, name) => this.#personalDataAt(`${domain}.${name}`),
    );
    // Decryption first: upcasters see the clear payload (or "[erased]"), in the shape it was stored in.
    this.#events.addReadStep({ read: (events) => this.personalData.decrypt(events) });
    this.#events.addReadStep(this.#upcasting);
    this.#events.addWriteStep({
      write: (events) => this.#encrypt(events),
      active: () => this.#hasPersonalData(),
    });
    this.#events.setStoredPaths((paths) => this.#upcasting.storedPaths(paths));
    this.commandStore = options.commandStore ?? new MemoryCommandStore();
    this.dataStore = options.dataStore ?? new MemoryDataStore();
    this.cacheStore = options.cacheStore ?? new MemoryCacheStore();
    this.logStore = options.logStore ?? new MemoryLogStore();
    this.readmodelStoreBackend = options.readmodelStoreBackend ?? new MemoryReadmodelStoreBackend();
    this.#recordsWithAppend = this.eventRepository.joinCommandStore?.(this.commandStore) === true;
    this.#claims = claimingStore(this.commandStore);
    this.#idempotency = idempotencyOptions(options.idempotency);
    this.snapshotStore = options.snapshotStore ?? new MemorySnapshotStore();
    this.#aggregateCache = options.aggregateCache === false ? undefined : new AggregateCache(options.aggregateCache);
    // An aggregate that folds personal data is neither cached nor snapshotted: a folded copy would outlive forget().
    this.#loading = new AggregateLoading(this.eventRepository, this.snapshotStore, this.#aggregateCache, this.logStore, (a) =>
      this.#foldsPersonalData(a),
    );
    this.permissions = new PermissionRegistry(options.authorizer, { facade: this });
    const se = options.systemEvents;
    this.systemEvents = new SystemEventProducer(typeof se === "object" ? se : {});
    this.schemas = new SchemaRegistry(options.schemas);
    this.#delivery = { ...DEFAULT_DELIVERY, ...options.delivery };
    const publish = (kind: SystemEventKind, data: Record<string, unknown>, tenantUuid?: string) => {
      if (this.systemEvents.running) this.systemEvents.publish(kind, data, tenantUuid);
    };
    this.#host = {
      eventRepository: this.eventRepository,
      readmodelStoreBackend: this.readmodelStoreBackend,
      instanceId: this.instanceId,
      publish,
      knownHead: () => this.#head,
      noteHead: (p: number) => {
        if (p > this.#head) this.#head = p;
      },
      eventType: (path: string) => this.#eventTypes.get(path),
      telemetry: () => this.#telemetry,
    };
    this.#ctxHost = {
      facade: this,
      locks: this.#locks,
      runQuery: (t, p, reqCtx) => this.#runQuery(t, p, reqCtx, newUuid(), false),
    };
    this.runtime = new Runtime(this);
    const runtime = this.runtime;
    this.registerDomain(RuntimeDomain, (d) => installRuntimeDomain(d, runtime));
  }

  /** Personal data settings by stored event path (a current name or a former one), rebuilt when a domain was registered since. */
  #personalDataAt(path: string): PersonalData | undefined {
    if (this.#personalPaths === undefined || this.#personalPathsFor !== this.#eventTypes.size) {
      const byPath = new Map<string, PersonalData>();
      for (const t of this.#eventTypes.values()) {
        if (t.personalData === undefined) continue;
        byPath.set(t.path, t.personalData);
        for (const former of t.renamedFrom) byPath.set(`${t.domain}.${former}`, t.personalData);
      }
      this.#personalPaths = byPath;
      this.#personalPathsFor = this.#eventTypes.size;
    }
    return this.#personalPaths.get(path);
  }

  /** True when the aggregate evolves an event type with personal data. */
  #foldsPersonalData(a: AggregateType<any>): boolean {
    // Asked on every load: kept per type until a domain is registered.
    if (this.#foldsPersonalFor !== this.#eventTypes.size) {
      this.#foldsPersonal = new WeakMap();
      this.#foldsPersonalFor = this.#eventTypes.size;
    }
    let answer = this.#foldsPersonal.get(a);
    if (answer === undefined) {
      answer = Object.keys(a.evolve).some(
        (key) => this.#eventTypes.get(key.includes(".") ? key : `${a.domain}.${key}`)?.personalData !== undefined,
      );
      this.#foldsPersonal.set(a, answer);
    }
    return answer;
  }

  #foldsPersonal = new WeakMap<AggregateType<any>, boolean>();
  #foldsPersonalFor = -1;

  /** True when a registered event type has personal data (else appends skip the encryption step). */
  #hasPersonalData(): boolean {
    this.#personalDataAt("");
    return this.#personalPaths!.size > 0;
  }

  #personalPaths: Map<string, PersonalData> | undefined;
  #personalPathsFor = -1;

  /** The write step of personal data: keys kept in memory only must not seal events a durable repository keeps. */
  #encrypt(events: readonly NewEvent[]): Promise<NewEvent[]> | readonly NewEvent[] {
    if (
      this.#options.keyStore === undefined &&
      this.#options.eventRepository !== undefined &&
      !(this.#events.stored instanceof MemoryEventRepository)
    ) {
      if (events.some((e) => this.#personalDataAt(`${e.domain}.${e.name}`) !== undefined)) {
        throw new MnemeError(
          "INVALID_STATE",
          "events with personalData need a durable keyStore beside a durable event repository (createSqliteBackends / createPostgresBackends give one): keys kept in memory would erase them at the next start",
        );
      }
      return events;
    }
    return this.personalData.encrypt(events);
  }

  /**
   * Erases a data subject: deletes its encryption keys, so every field sealed
   * with them reads as "[erased]" on every read path from now on (other
   * instances within `personalData.keyCacheTtlMs`), and appends
   * `Privacy.SubjectForgotten` so readmodels that keep copies of personal
   * fields drop them. This instance's aggregate cache is cleared and the
   * snapshots of aggregates that evolve personal-data events are deleted, so
   * no folded copy survives here. Idempotent; see docs/privacy.md.
   * @example
   * await facade.forget(accountUuid);
   */
  async forget(subject: string): Promise<{ keysDeleted: number }> {
    // Also while starting: a handler catching up inside start() may erase (the built-in AccountEraser does).
    if (this.#state !== "starting") this.#assertStarted();
    const keysDeleted = await this.personalData.forget(subject);
    this.#aggregateCache?.clear();
    for (const domain of this.#domains.values()) {
      for (const a of domain.aggregates.values()) {
        if (snapshotOptionsOf(a).snapshotEvery === undefined) continue;
        // Snapshots of such aggregates are not taken any more; this removes those of an earlier release.
        if (this.#foldsPersonalData(a)) await this.snapshotStore.deleteAggregateType(a.domain, a.name);
      }
    }
    const aggregateUuid = forgetAggregateUuidOf(subject);
    await this.eventRepository.append([SubjectForgotten.create(aggregateUuid, { subject, keysDeleted }, { tenantUuid: "" })], {
      globalAggregates: [aggregateUuid],
    });
    return { keysDeleted };
  }

  /**
   * The clean-up after `forget`: waits until this instance's running event
   * handlers have handled every event up to the head known now (so readmodels
   * have dropped or rebuilt their copies on `SubjectForgotten`), at most
   * `waitMs` (default 30,000), then has every store that can scrub its
   * storage overwrite what deleted rows left behind, once per file or schema
   * (SQLite: secure_delete and a TRUNCATE checkpoint of the write-ahead log;
   * Postgres: VACUUM). Resolves the handlers that had not caught up (their
   * copies may still be there). See docs/privacy.md.
   * @example
   * await facade.forget(memberUuid);
   * await facade.scrubStorage();
   */
  async scrubStorage(opts: { readonly waitMs?: number } = {}): Promise<{ behind: string[] }> {
    this.#assertStarted();
    const waitMs = opts.waitMs ?? 30_000;
    if (typeof waitMs !== "number" || !(waitMs >= 0) || waitMs > 2_147_483_647)
      throw new MnemeError("INVALID_REQUEST", `scrubStorage: waitMs must be a number of ms in 0..2147483647, got ${String(waitMs)}`);
    const head = Math.max(this.#head, await this.eventRepository.headPosition());
    const behind: string[] = [];
    let timer: ReturnType<typeof setTimeout> | undefined;
    const timeout = new Promise<"timeout">((resolve) => {
      timer = setTimeout(() => resolve("timeout"), waitMs);
    });
    try {
      await Promise.all(
        [...this.#registered.values()].map(async ({ handler: h, runner }) => {
          if (h.state !== "running") return;
          const r = await Promise.race([runner.waitFor(head, head), timeout]);
          if (r !== undefined) behind.push(h.name);
        }),
      );
    } finally {
      clearTimeout(timer);
    }
    const scopes = new Set<string>();
    for (const store of this.#lifecycles()) {
      if (!canScrubStorage(store)) continue;
      const scope = store.storageScope();
      if (scopes.has(scope)) continue;
      scopes.add(scope);
      await store.scrubStorage();
    }
    return { behind: behind.sort() };
  }

  /** "new" | "starting" | "started" | "stopping" | "stopped" */
  get state(): FacadeState {
    return this.#state;
  }

  /** The registered domains by name (the Runtime included), each with the handlers installed in this facade. */
  get domains(): ReadonlyMap<string, InstalledDomain> {
    return this.#domains;
  }

  /** The registered event handlers by name. */
  get eventHandlers(): ReadonlyMap<string, BaseEventHandler> {
    return this.#handlers;
  }

  /** Size, bounds and hit counts of the aggregate cache; undefined when it is off. */
  aggregateCacheStats(): AggregateCacheStats | undefined {
    return this.#aggregateCache?.stats();
  }

  /** The highest event position this facade has seen. */
  get headPosition(): number {
    return this.#head;
  }

  /**
   * Installs a domain: its commands, queries, events and handlers, a runtime
   * permission per command and query, and its schemas. `install`, the domain's
   * install step, attaches handlers (and permissions) in this facade only, with
   * whatever they need in its closure; the definition is not changed, so it
   * installs in any number of facades. INVALID_DOMAIN for a second domain of
   * the same name; nothing is registered when the install step throws.
   * @example
   * facade.registerDomain(Todo, (d) => installTodo(d, todos));
   */
  registerDomain(definition: Domain<any>, install?: DomainInstall): this {
    if (this.#domains.has(definition?.name))
      throw new MnemeError("INVALID_DOMAIN", `a domain named ${definition.name} is registered already`);
    if (this.#state === "stopping" || this.#state === "stopped") throw new MnemeError("INVALID_STATE", "the facade is stopped");
    const domain = installDomain(definition, install);
    for (const p of domain.permissions.values()) {
      if (this.permissions.has(p.domain, p.type))
        throw new MnemeError("INVALID_DOMAIN", `permission ${p.domain}.${p.type} is registered already`);
    }
    const deferredKeys = this.#checkEvolveKeys(domain);
    // Compile payload validators now, so a bad schema fails at registration and the first request pays nothing;
    // a command or query without a schema is INVALID_DOMAIN when schemas are required, else warned about.
    this.schemas.checkDomain(domain.name, [...domain.commands.values(), ...domain.queries.values()]);
    this.#warnUndeclaredPersonalData(domain);
    for (const p of domain.permissions.values()) this.permissions.register(p);
    for (const t of domain.events.values()) {
      this.#eventTypes.set(t.path, t);
      this.#upcasting.register(t);
    }
    for (const a of domain.aggregates.values()) {
      for (const key of Object.keys(a.evolve)) {
        const path = key.includes(".") ? key : `${a.domain}.${key}`;
        // One tenant-scoped aggregate evolving an event keeps the rule on for it.
        if (a.tenancy === "tenant") this.#eventTenancy.set(path, "tenant");
        else if (!this.#eventTenancy.has(path)) this.#eventTenancy.set(path, "global");
      }
    }
    this.#pendingEvolveKeys.push(...deferredKeys);
    this.#domains.set(domain.name, domain);
    return this;
  }

  /**
   * A command field named like a personal field of one of the domain's events
   * but not declared would be stored in clear: one process warning
   * `MNEME_PERSONAL_DATA_UNDECLARED` per domain, written to the log store at start too.
   */
  #warnUndeclaredPersonalData(domain: InstalledDomain): void {
    const found = undeclaredPersonalFields(domain.commands.values(), domain.events.values(), (c) => this.schemas.documentFor(c));
    if (found.length === 0) return;
    const named = found.map((f) => `${f.command} (${f.fields.join(", ")})`).join(", ");
    const message =
      `domain ${domain.name}: command fields named like personal fields of its events are not declared as personal data, ` +
      `so they are stored in clear wherever the command is kept (record, outbox, scheduled commands): ${named}. ` +
      `Declare them with command(name, { personalData: { subject, fields } }) (see docs/privacy.md)`;
    if (typeof process !== "undefined" && typeof process.emitWarning === "function") {
      process.emitWarning(message, { code: PERSONAL_DATA_UNDECLARED_WARNING, detail: `undeclared: ${named}` });
    }
    this.#startWarnings.push({ message, data: { code: PERSONAL_DATA_UNDECLARED_WARNING, commands: found } });
  }

  /** Warnings of registration, written to the log store once it is open. */
  readonly #startWarnings: { message: string; data: Record<string, unknown> }[] = [];

  /**
   * Rejects evolve keys that name no event (a typo such as `Opend` would
   * otherwise never fire). Keys of this domain are checked now; keys naming
   * a domain not registered yet are returned, to be checked at start().
   */
  #checkEvolveKeys(domain: InstalledDomain): { aggregate: AggregateType<any>; key: string }[] {
    const deferred: { aggregate: AggregateType<any>; key: string }[] = [];
    for (const a of domain.aggregates.values()) {
      for (const key of Object.keys(a.evolve)) {
        const dot = key.indexOf(".");
        const owner = dot < 0 ? domain.name : key.slice(0, dot);
        const name = dot < 0 ? key : key.slice(dot + 1);
        const events = owner === domain.name ? domain.events : this.#domains.get(owner)?.events;
        if (events === undefined) deferred.push({ aggregate: a, key });
        else if (!events.has(name)) throw unknownEvolveKey(a, key, owner, events);
      }
    }
    return deferred;
  }

  /**
   * Registers a readmodel or any event handler. Names are unique per facade
   * (INVALID_EVENT_HANDLER). After start() it is restored and goes live at once.
   */
  registerReadmodel(handler: EventHandler): this {
    this.register(handler);
    return this;
  }

  /**
   * Registers a readmodel or any event handler as `registerReadmodel` does, and
   * returns its handle: `facade.readmodel(handle)` and `ctx.readmodel(handle)`
   * give it back with its type.
   * @example
   * const todos = facade.register(new ProjectionReadmodel(facade, { aggregate: TodoAggregate }));
   * await facade.readmodel(todos).getModel(todoUuid);
   */
  register<T extends EventHandler>(handler: T): ReadmodelHandle<T> {
    if (this.#state === "stopping" || this.#state === "stopped") throw new MnemeError("INVALID_STATE", "the facade is stopped");
    const name = handler?.name;
    if (typeof name !== "string" || name.trim() === "")
      throw new MnemeError("INVALID_EVENT_HANDLER", "an event handler needs a non-empty name");
    if (typeof handler.domain !== "string" || handler.domain === "")
      throw new MnemeError("INVALID_EVENT_HANDLER", `event handler ${name} needs a domain`);
    if (this.#handlers.has(name)) throw new MnemeError("INVALID_EVENT_HANDLER", `an event handler named ${name} is registered already`);
    const h = toBaseEventHandler(handler);
    const runner = runnerOf(h);
    runner.attach(this.#host, this.#delivery);
    const handle: ReadmodelHandle<T> = Object.freeze({ kind: "readmodelHandle", name, readmodel: handler });
    this.#handlers.set(name, h);
    this.#registered.set(name, { object: handler, handler: h, runner, handle });
    if (this.#state === "started") void runner.goLive().catch(() => undefined);
    return handle;
  }

  /** Runs `hook` inside start(), after stores are initialised and handlers are live (e.g. a bootstrap). */
  onStart(hook: (facade: Facade) => Promise<void> | void): this {
    this.#startHooks.push(hook);
    return this;
  }

  /** Initialises stores, restores readmodels from their checkpoints, goes live. Idempotent; INVALID_STATE once stopped. */
  start(): Promise<void> {
    if (this.#state === "stopping" || this.#state === "stopped")
      return Promise.reject(new MnemeError("INVALID_STATE", "a stopped facade cannot start again: create a new one"));
    if (this.#startPromise !== undefined) return this.#startPromise;
    if (this.#state !== "new") return Promise.reject(new MnemeError("INVALID_STATE", `the facade cannot start when ${this.#state}`));
    this.#startPromise = this.#start();
    return this.#startPromise;
  }

  async #start(): Promise<void> {
    this.#state = "starting";
    const waitForStandby = this.#options.start?.waitForStandby ?? 0;
    try {
      if (typeof waitForStandby !== "number" || !(waitForStandby >= 0) || waitForStandby > 2_147_483_647) {
        throw new MnemeError(
          "INVALID_REQUEST",
          `start.waitForStandby must be a number of ms in 0..2147483647, got ${String(waitForStandby)}`,
        );
      }
      for (const { aggregate, key } of this.#pendingEvolveKeys) {
        const dot = key.indexOf(".");
        const owner = key.slice(0, dot);
        const events = this.#domains.get(owner)?.events;
        if (events === undefined || !events.has(key.slice(dot + 1))) throw unknownEvolveKey(aggregate, key, owner, events);
      }
      for (const s of this.#lifecycles()) await s.init();
      if (this.#options.systemEvents) this.systemEvents.start();
      this.#head = await this.eventRepository.headPosition();
      this.#telemetry ??= await loadTelemetry(this.#options.telemetry !== false);
      // Handlers in standby are processed by another instance: their position here says nothing.
      this.#telemetry?.observeLag(() =>
        [...this.#handlers.values()]
          .filter((h) => h.state !== "standby")
          .map((h) => ({ handler: h.name, lag: Math.max(0, this.#head - h.lastPosition) })),
      );
      await this.runtime.storeInfo();
      for (const w of this.#startWarnings.splice(0)) {
        await this.logStore.append({ level: "warn", source: "mneme.privacy", message: w.message, data: w.data }).catch(() => undefined);
      }
      const repo = this.eventRepository;
      if (repo.onAppend !== undefined) {
        this.#pushesLocally = true;
        this.#unsubscribe.push(repo.onAppend((events) => this.#deliver(events)));
      }
      if (repo.onExternalAppend !== undefined) this.#unsubscribe.push(repo.onExternalAppend(() => this.#deliver(null)));
      this.startedAt = nowNs();
      this.#state = "started";
      for (const r of this.#registered.values()) await r.runner.goLive();
      // Handlers left in standby (another instance holds their lock): wait for them when asked, report the rest.
      if (waitForStandby > 0) await Promise.all([...this.#registered.values()].map((r) => r.runner.untilOutOfStandby(waitForStandby)));
      const standby = [...this.#handlers.values()].filter((h) => h.state === "standby").map((h) => h.name);
      if (standby.length > 0) {
        this.#host.publish("HandlersInStandby", { eventHandlerNames: standby, waitedMs: waitForStandby });
        await this.logStore
          .append({
            level: "warn",
            source: "mneme.start",
            message: `started with event handlers in standby (another instance holds their processing lock; this one takes over when it frees): ${standby.join(", ")}`,
            data: { eventHandlerNames: standby, waitedMs: waitForStandby },
          })
          .catch(() => undefined);
      }
      for (const hook of this.#startHooks) await hook(this);
    } catch (err) {
      this.#state = "new";
      this.#startPromise = undefined;
      for (const u of this.#unsubscribe.splice(0)) u();
      throw err;
    }
  }

  #deliver(events: readonly Event[] | null): void {
    if (events !== null) {
      const last = events[events.length - 1];
      if (last !== undefined && last.position > this.#head) this.#head = last.position;
    }
    for (const r of this.#registered.values()) r.runner.notify(events);
  }

  /** Stops delivery and the system-event producer, closes every store. Idempotent. */
  stop(): Promise<void> {
    if (this.#stopPromise !== undefined) return this.#stopPromise;
    this.#stopPromise = this.#stop();
    return this.#stopPromise;
  }

  async #stop(): Promise<void> {
    if (this.#startPromise !== undefined) await this.#startPromise.catch(() => undefined);
    const wasStarted = this.#state === "started";
    this.#state = "stopping";
    for (const u of this.#unsubscribe.splice(0)) u();
    this.#telemetry?.close();
    if (wasStarted) {
      for (const h of this.#handlers.values()) {
        if (h.state !== "stopped" || h.restoring) await h.stop().catch(() => undefined);
      }
    }
    this.systemEvents.stop();
    await this.#loading.drain();
    const errors: unknown[] = [];
    for (const s of this.#lifecycles()) {
      try {
        await s.close();
      } catch (e) {
        errors.push(e);
      }
    }
    try {
      await this.#options.close?.();
    } catch (e) {
      errors.push(e);
    }
    this.#state = "stopped";
    if (errors.length > 0)
      throw new MnemeError("STORE_ERROR", `stopping the facade: ${errors.map(errorMessage).join("; ")}`, { cause: errors[0] });
  }

  #lifecycles(): Lifecycle[] {
    const all: Lifecycle[] = [
      this.eventRepository,
      this.commandStore,
      this.dataStore,
      this.cacheStore,
      this.logStore,
      this.readmodelStoreBackend,
      this.snapshotStore,
      this.keyStore,
    ];
    for (const h of this.#handlers.values()) {
      const b = (h as { readmodelStoreBackend?: ReadmodelStoreBackend }).readmodelStoreBackend;
      if (b !== undefined) all.push(b);
    }
    return [...new Set(all)];
  }

  #assertStarted(): void {
    if (this.#state !== "started") {
      throw new MnemeError(
        "NOT_STARTED",
        this.#state === "new" || this.#state === "starting"
          ? "the facade is not started: await facade.start() first"
          : "the facade is stopped",
      );
    }
  }

  /** The command type registered under (domain, name). UNKNOWN_COMMAND otherwise. */
  resolveCommand(ref: CommandType<any, any> | MessageRef): CommandType<any, any> {
    const t = this.#domains.get(ref?.domain)?.commands.get(ref?.name);
    if (t === undefined) throw new MnemeError("UNKNOWN_COMMAND", `unknown command ${String(ref?.domain)}.${String(ref?.name)}`);
    return t;
  }

  /** The query type registered under (domain, name). UNKNOWN_QUERY otherwise. */
  resolveQuery(ref: QueryType<any, any> | MessageRef): QueryType<any, any> {
    const t = this.#domains.get(ref?.domain)?.queries.get(ref?.name);
    if (t === undefined) throw new MnemeError("UNKNOWN_QUERY", `unknown query ${String(ref?.domain)}.${String(ref?.name)}`);
    return t;
  }

  /**
   * A registered readmodel or event handler (the object given to `register` /
   * `registerReadmodel`), typed by what identifies it: its handle, the object
   * itself (checked to be the one registered here), or its name with its class
   * (checked with `instanceof`). UNKNOWN_EVENT_HANDLER when nothing (or another
   * kind of object) is registered so.
   * @example
   * const todos = facade.readmodel(todoHandle);                          // ProjectionReadmodel<TodoState>
   * const open = facade.readmodel("OpenTodos", OpenTodos);               // OpenTodos, or UNKNOWN_EVENT_HANDLER
   */
  readmodel<T extends EventHandler>(handle: ReadmodelHandle<T>): T;
  readmodel<T extends EventHandler>(handler: T): T;
  readmodel<C extends abstract new (...args: any[]) => EventHandler>(name: string, type: C): InstanceType<C>;
  /** By name alone the type is the caller's word (`T`, unchecked): prefer a handle, the object, or the name with its class. */
  readmodel<T extends { readonly name: string } = EventHandler>(name: string): T;
  readmodel(ref: string | EventHandler | ReadmodelHandle<EventHandler>, type?: abstract new (...args: any[]) => EventHandler): unknown {
    return lookupReadmodel(this.#registered, ref, type);
  }

  /** The event type of a path "Domain.Name", if registered. */
  eventType(path: string): EventType | undefined {
    return this.#eventTypes.get(path);
  }

  /**
   * Executes a command: permission check, schema validation, handler, atomic
   * append, audit record, live delivery.
   * @example
   * const { events } = await facade.dispatch(CreateTodo, { todoUuid, title }, { reqCtx, waitToFinish: true });
   */
  async dispatch<P, R = unknown>(
    type: CommandType<P, R> | MessageRef,
    payload: NoInfer<P>,
    opts: DispatchOptions = {},
  ): Promise<DispatchResult<R>> {
    const telemetry = this.#telemetry;
    if (telemetry?.active !== true) return this.#dispatchSerialised(type, payload, opts, undefined);
    const t = this.resolveCommand(type as CommandType<any, any>);
    return telemetry.dispatch(t.domain, t.name, opts.reqCtx, (trace) => this.#dispatchSerialised(type, payload, opts, trace));
  }

  async #dispatchSerialised<P, R = unknown>(
    type: CommandType<P, R> | MessageRef,
    payload: NoInfer<P>,
    opts: DispatchOptions,
    trace: DispatchTrace | undefined,
  ): Promise<DispatchResult<R>> {
    // With claims, the store decides between duplicates, in this process as across instances (one bound on waiting).
    if (opts.commandUuid === undefined || this.#claims !== undefined) return this.#dispatch(type, payload, opts, false, trace);
    // Without: duplicates of one commandUuid run one after the other here (and in every facade sharing the command
    // store): the second finds the first's record and replays it.
    const release = await commandLocks(this.commandStore).acquire(messageUuid(opts.commandUuid, "commandUuid"));
    try {
      return await this.#dispatch(type, payload, opts, false, trace);
    } finally {
      release();
    }
  }

  async #dispatch<P, R = unknown>(
    type: CommandType<P, R> | MessageRef,
    payload: NoInfer<P>,
    opts: DispatchOptions,
    retried: boolean,
    trace?: DispatchTrace,
  ): Promise<DispatchResult<R>> {
    this.#assertStarted();
    const t0 = performance.now();
    const cmdType = this.resolveCommand(type as CommandType<any, any>);
    const domain = this.#domains.get(cmdType.domain)!;
    const reqCtx = normaliseReqCtx(opts.reqCtx);
    // What the events and the record keep: a deeply frozen copy taken now (the handler sees the caller's object).
    const storedCtx = sealJsonSafe(trace === undefined ? reqCtx : trace.stamp(reqCtx));
    const envelope: CommandEnvelope<P> = {
      commandUuid: messageUuid(opts.commandUuid, "commandUuid"),
      domain: cmdType.domain,
      name: cmdType.name,
      payload,
      reqCtx,
    };
    trace?.began(envelope.commandUuid);
    let stage: CommandStatus = "denied";
    let claim: HeldClaim | undefined;
    /** True while claiming or replaying: a failure there (in progress elsewhere, another request) records nothing. */
    let claiming = false;
    let ctx: DispatchContext | undefined;
    let appended: Event[] | undefined;
    let result: unknown;
    /** The payload its record keeps (personal fields sealed); until it is made, a record keeps them "[redacted]". */
    let recordPayload: unknown;
    try {
      if (!isPlainObject(payload)) {
        stage = "failed";
        throw new MnemeError("VALIDATION_FAILED", `the payload of ${cmdType.domain}.${cmdType.name} must be a JSON object`, {
          details: [{ pointer: "", message: "must be object" }],
        });
      }
      checkPayload(cmdType, payload);
      const verdict = this.permissions.evaluate(reqCtx, envelope);
      const denied = verdict instanceof Promise ? await verdict : verdict;
      if (denied !== undefined) throw denied;
      stage = "failed";
      if (opts.commandUuid !== undefined && !retried) {
        if (this.#claims !== undefined) {
          // Claimed before the handler runs: of duplicates on every instance sharing the store, one runs; the others
          // wait for its record and replay it.
          const claimant = {
            // The instance, and the attempt: two duplicates in one instance are two claimants too.
            owner: `${this.instanceId}/${newUuid()}`,
            leaseMs: this.#idempotency.leaseMs,
            domain: cmdType.domain,
            name: cmdType.name,
            tenantUuid: tenantOf(reqCtx),
          };
          claiming = true;
          const got = await claimCommand(this.#claims, envelope.commandUuid, claimant, this.#idempotency.waitMs, (message) =>
            this.#logClaim(message),
          );
          if ("record" in got) return await this.#replay<R>(cmdType, envelope, got.record);
          claim = got.claim;
          claiming = false;
        } else {
          // Without claims: a command recorded as succeeded does not run again. (Where the record commits with the
          // events, a duplicate racing this one past the look is still refused by the append, below.)
          const seen = await this.#recorded<R>(cmdType, envelope);
          if (seen !== undefined && seen !== "cleared") return seen;
        }
      }
      this.schemas.validate(cmdType, payload);
      if (cmdType.personalData !== undefined || opts.storedPayload !== undefined)
        recordPayload = await recordedCommandPayload(this.personalData, cmdType, payload, reqCtx, opts.storedPayload ?? payload);
      const handler = domain.commandHandlers.get(cmdType.name);
      if (handler === undefined) throw new MnemeError("UNKNOWN_COMMAND", `command ${cmdType.domain}.${cmdType.name} has no handler`);
      ctx = new DispatchContext(this.#ctxHost, envelope.commandUuid, reqCtx);
      try {
        let out = handler(ctx, envelope, payload);
        if (out instanceof Promise) out = await out;
        let events: readonly NewEvent[];
        if (Array.isArray(out)) {
          events = out;
        } else {
          const normalised = normaliseHandlerResult(out, cmdType);
          events = normalised.events;
          result = normalised.result;
        }
        if (events.length > 0) appended = await this.#append(events, envelope, storedCtx, ctx.loader, cmdType, t0, trace, recordPayload);
      } finally {
        ctx.release();
      }
    } catch (err) {
      if (claiming) throw err;
      const error = isMnemeError(err)
        ? err
        : new MnemeError("HANDLER_FAILED", `command ${cmdType.domain}.${cmdType.name} failed: ${errorMessage(err)}`, { cause: err });
      // Another writer moved an aggregate this command loaded: its cached state is not worth keeping.
      if (error.code === "CONFLICT" && this.#aggregateCache !== undefined)
        ctx?.loader?.forEachLoaded((uuid) => this.#aggregateCache!.invalidate(uuid));
      if (error.code === "CONFLICT" && opts.commandUuid !== undefined && stage === "failed" && this.#recordsWithAppend && !retried) {
        // The append met this commandUuid's record: a success (another instance, an earlier call) is replayed;
        // a failed or denied earlier attempt is cleared and the command runs once more.
        const seen = await this.#recorded<R>(cmdType, envelope);
        await claim?.end();
        if (seen === "cleared") return this.#dispatch(type, payload, opts, true, trace);
        if (seen !== undefined) return seen;
      }
      // The failed record resolves the claim: a retry runs the command again.
      if (await this.#record(cmdType, envelope, storedCtx, stage, [], error, t0, recordPayload)) claim?.resolved();
      await claim?.end();
      const tenant = tenantOf(reqCtx);
      if (this.systemEvents.running) {
        this.systemEvents.publish(
          "CommandFailed",
          {
            commandUuid: envelope.commandUuid,
            domain: cmdType.domain,
            name: cmdType.name,
            status: stage,
            code: error.code,
            error: error.message,
          },
          tenant || undefined,
        );
      }
      throw error;
    }
    if (appended === undefined) appended = [];
    else if (!this.#pushesLocally) this.#deliver(appended);
    // With events, a joined repository committed the record with them already (replacing the claim).
    if (appended.length > 0 && this.#recordsWithAppend) claim?.resolved();
    else if (await this.#record(cmdType, envelope, storedCtx, "succeeded", appended, undefined, t0, recordPayload)) claim?.resolved();
    await claim?.end();
    if (this.systemEvents.running) {
      const tenant = tenantOf(reqCtx) || undefined;
      this.systemEvents.publish(
        "CommandExecuted",
        {
          commandUuid: envelope.commandUuid,
          domain: cmdType.domain,
          name: cmdType.name,
          events: appended.length,
          durationMicros: Math.round((performance.now() - t0) * 1000),
        },
        tenant,
      );
      if (appended.length > 0) {
        this.systemEvents.publish(
          "EventsAppended",
          {
            commandUuid: envelope.commandUuid,
            events: appended.map((e) => ({
              eventUuid: e.eventUuid,
              path: `${e.domain}.${e.name}`,
              aggregateUuid: e.aggregateUuid,
              version: e.version,
              position: e.position,
            })),
          },
          tenant,
        );
      }
    }
    const handlerErrors = opts.waitToFinish === true && appended.length > 0 ? await this.#waitHandlers(appended) : [];
    const res: DispatchResult<R> = { commandUuid: envelope.commandUuid, events: appended, handlerErrors };
    if (result !== undefined) res.result = result as R;
    return res;
  }

  /**
   * What the command store holds under the envelope's commandUuid: undefined
   * when nothing; the recorded outcome (`replayed`) when it succeeded;
   * "cleared" when an earlier attempt failed or was denied (its record is
   * deleted so that this attempt records its own). A succeeded record of
   * another command, tenant or payload is CONFLICT: one commandUuid names one request.
   */
  async #recorded<R>(type: CommandType<any, any>, envelope: CommandEnvelope): Promise<DispatchResult<R> | "cleared" | undefined> {
    const uuid = envelope.commandUuid;
    const rec = await this.commandStore.get(uuid);
    if (rec === undefined) return undefined;
    if (rec.status !== "succeeded") {
      // A failed or denied attempt produced nothing: this one runs and records its own outcome.
      await this.commandStore.delete(uuid);
      return "cleared";
    }
    return this.#replay(type, envelope, rec);
  }

  /**
   * The outcome of a succeeded record (`replayed`, its events read back). A
   * record of another command, tenant or payload is CONFLICT: one commandUuid
   * names one request.
   */
  async #replay<R>(type: CommandType<any, any>, envelope: CommandEnvelope, rec: CommandRecord): Promise<DispatchResult<R>> {
    const uuid = envelope.commandUuid;
    // Personal fields are sealed with a fresh IV each time: compared opened, and a field erased since counts as equal.
    // (Also without a declaration: a process manager's command is recorded with the values its outbox sealed.)
    const recorded = (await this.personalData.openPayload(rec.payload)).payload;
    const sameRequest =
      rec.domain === envelope.domain &&
      rec.name === envelope.name &&
      rec.tenantUuid === tenantOf(envelope.reqCtx) &&
      canonicalJson(recorded) === canonicalJson(asErasedIn(type, recorded, envelope.payload));
    if (!sameRequest) {
      throw new MnemeError(
        "CONFLICT",
        `commandUuid ${uuid} is recorded for another request (command, tenant or payload differ): one commandUuid names one command`,
      );
    }
    const events = rec.eventUuids.length === 0 ? [] : ((await this.eventRepository.loadEvents?.(rec.eventUuids)) ?? []);
    return { commandUuid: uuid, events, handlerErrors: [], replayed: true };
  }

  async #waitHandlers(events: readonly Event[]): Promise<HandlerError[]> {
    const from = events[0]!.position;
    const to = events[events.length - 1]!.position;
    const waits: Promise<HandlerError | undefined>[] = [];
    // A handler in standby applies the events on the instance holding its lock: waited for through
    // its shared checkpoint, up to the last of these events it handles.
    const handledBy = (h: BaseEventHandler): readonly Event[] =>
      events.filter((e) => h.getDomainEventHandlers(`${e.domain}.${e.name}`).length > 0);
    const waitForHolder = (h: BaseEventHandler, runner: HandlerRunner): Promise<HandlerError | undefined> | undefined => {
      const mine = handledBy(h);
      if (mine.length === 0) return undefined;
      return runner
        .waitForHolder(mine[0]!.position, mine[mine.length - 1]!.position)
        .then((error) => (error === undefined ? undefined : { eventHandlerName: h.name, error }));
    };
    for (const { handler: h, runner } of this.#registered.values()) {
      if (h.state === "standby") {
        const w = waitForHolder(h, runner);
        if (w !== undefined) waits.push(w);
        continue;
      }
      if (h.state !== "running") continue;
      waits.push(
        runner.waitFor(from, to).then((error) => {
          if (error === undefined) return undefined;
          // The lock went to another instance before these events were applied here: that one applies them.
          if (h.state === "standby") return waitForHolder(h, runner);
          return { eventHandlerName: h.name, error };
        }),
      );
    }
    const out: HandlerError[] = [];
    for (const r of await Promise.all(waits)) if (r !== undefined) out.push(r);
    return out;
  }

  /**
   * Completes the command's events (uuid, time, commandUuid, reqCtx copy,
   * tenant) and appends them with their expected versions, the aggregates
   * exempt from the tenant rule and, where the repository joins the command
   * store, the command's record.
   */
  #append(
    events: readonly NewEvent[],
    envelope: CommandEnvelope,
    storedCtx: RequestContext,
    loader: CommandAggregates | undefined,
    type: CommandType<any, any>,
    t0: number,
    trace: DispatchTrace | undefined,
    recordPayload: unknown,
  ): Promise<Event[]> {
    const reqCtx = storedCtx;
    const tenantUuid = tenantOf(reqCtx);
    const createdAt = nowNs();
    const out: NewEvent[] = new Array(events.length);
    // Most commands touch one aggregate: a Set only when there are more.
    let first: string | undefined;
    let more: Set<string> | undefined;
    // Aggregates some event of which is evolved by a tenant-scoped aggregate (or by none).
    let scopedByEvent: Set<string> | undefined;
    for (let i = 0; i < events.length; i++) {
      const e = events[i]!;
      if (!isNewEvent(e)) {
        throw new MnemeError(
          "INVALID_EVENTS",
          `command ${envelope.domain}.${envelope.name} returned something that is not an event at index ${i}: use EventType.create(aggregateUuid, payload)`,
        );
      }
      const path = `${e.domain}.${e.name}`;
      const eventType = this.#eventTypes.get(path);
      if (eventType === undefined) {
        throw new MnemeError(
          "INVALID_EVENTS",
          `command ${envelope.domain}.${envelope.name} returned event ${path}, which no registered domain defines`,
        );
      }
      const agg = e.aggregateUuid;
      if (agg === "") throw new MnemeError("INVALID_EVENTS", `event ${path} has an empty aggregateUuid`);
      if (first === undefined) first = agg;
      else if (agg !== first) (more ??= new Set([first])).add(agg);
      if (this.#eventTenancy.get(path) !== "global") (scopedByEvent ??= new Set()).add(agg);
      const ne: NewEvent = {
        domain: e.domain,
        name: e.name,
        aggregateUuid: agg,
        payload: e.payload,
        eventUuid: newUuid(),
        createdAt,
        commandUuid: envelope.commandUuid,
        tenantUuid: e.tenantUuid ?? tenantUuid,
        reqCtx,
      };
      if (e.version !== undefined) ne.version = e.version;
      // Stored with the version it is written in: reads of older versions are upcast to it.
      if (eventType.version !== 1) ne.eventVersion = eventType.version;
      out[i] = ne;
    }
    const aggregates = more ?? [first!];
    const opts: AppendOptions = {};
    // Global: loaded as a global aggregate in this command, or (not loaded) every event of it is evolved by global aggregates only.
    let globals: string[] | undefined;
    for (const agg of aggregates) {
      const loadedTenancy = loader?.loadedTenancy(agg);
      if (loadedTenancy === "global" || (loadedTenancy === undefined && scopedByEvent?.has(agg) !== true)) (globals ??= []).push(agg);
    }
    if (globals !== undefined) opts.globalAggregates = globals;
    const target = reqCtx.targetAggregateVersion;
    if (target !== undefined) this.#checkTarget(reqCtx, aggregates, more !== undefined, loader);
    if (loader !== undefined || target !== undefined) {
      // Without a prototype: an aggregate uuid such as "__proto__" must stay a plain key.
      const expectedVersions = Object.create(null) as Record<string, number>;
      for (const agg of aggregates) {
        const targeted =
          target !== undefined && (reqCtx.targetAggregateUuid === agg || (reqCtx.targetAggregateUuid === undefined && more === undefined));
        const loaded = loader?.loadedVersion(agg);
        if (loaded !== undefined) {
          // The loaded version is what the handler decided on; a stale version the client sent must not be ignored silently.
          if (targeted && loaded !== target) {
            throw new MnemeError("CONFLICT", `aggregate ${agg} is at version ${loaded}, the request expected ${target}`);
          }
          expectedVersions[agg] = loaded;
        } else if (targeted) {
          expectedVersions[agg] = target;
        }
      }
      // What the handler read is what it decided on: the aggregates it loaded and appends nothing to are checked too.
      loader?.addReadChecks(expectedVersions);
      opts.expectedVersions = expectedVersions;
    }
    if (this.#recordsWithAppend) {
      opts.commandRecord = this.#commandRecord(
        type,
        envelope,
        storedCtx,
        "succeeded",
        out.map((e) => e.eventUuid!),
        undefined,
        t0,
        recordPayload,
      );
    }
    if (trace !== undefined) return trace.append(out.length, () => this.eventRepository.append(out, opts));
    return this.eventRepository.append(out, opts);
  }

  /**
   * A `targetAggregateVersion` must name what it guards: with
   * `targetAggregateUuid`, an aggregate the command loaded or appends to;
   * without it, the command's only aggregate. Anything else is ambiguous and
   * refused (INVALID_REQUEST) rather than ignored.
   */
  #checkTarget(reqCtx: RequestContext, aggregates: Iterable<string>, several: boolean, loader: CommandAggregates | undefined): void {
    const uuid = reqCtx.targetAggregateUuid;
    if (uuid === undefined) {
      if (several) {
        throw new MnemeError(
          "INVALID_REQUEST",
          "targetAggregateVersion without targetAggregateUuid is ambiguous: the command appends to several aggregates",
        );
      }
      return;
    }
    if (loader?.loadedVersion(uuid) !== undefined) return;
    for (const agg of aggregates) if (agg === uuid) return;
    throw new MnemeError(
      "INVALID_REQUEST",
      `targetAggregateVersion guards aggregate ${uuid}, which the command neither loaded nor appends to`,
    );
  }

  #commandRecord(
    type: CommandType<any, any>,
    envelope: CommandEnvelope,
    storedCtx: RequestContext,
    status: CommandStatus,
    eventUuids: string[],
    error: MnemeError | undefined,
    t0: number,
    recordPayload: unknown,
  ): CommandRecord {
    const rec: CommandRecord = {
      commandUuid: envelope.commandUuid,
      domain: envelope.domain,
      name: envelope.name,
      tenantUuid: tenantOf(storedCtx),
      reqCtx: storedCtx,
      payload: recordPayload ?? withoutPersonalFields(type, envelope.payload),
      status,
      eventUuids,
      createdAt: nowNs(),
      durationMicros: Math.round((performance.now() - t0) * 1000),
    };
    if (error !== undefined) rec.error = { code: error.code, message: error.message };
    return rec;
  }

  async #record(
    type: CommandType<any, any>,
    envelope: CommandEnvelope,
    storedCtx: RequestContext,
    status: CommandStatus,
    events: readonly Event[],
    error: MnemeError | undefined,
    t0: number,
    recordPayload: unknown,
  ): Promise<boolean> {
    try {
      await this.commandStore.record(
        this.#commandRecord(
          type,
          envelope,
          storedCtx,
          status,
          events.map((e) => e.eventUuid),
          error,
          t0,
          recordPayload,
        ),
      );
    } catch (e) {
      // The events are committed: an audit failure must not turn success into an error. It is logged instead.
      await this.logStore
        .append({
          level: "error",
          message: `recording command ${envelope.commandUuid} failed: ${errorMessage(e)}`,
          source: "mneme.dispatch",
        })
        .catch(() => undefined);
      return false;
    }
    return true;
  }

  /** A claim that could not be renewed: logged (the record's primary key still keeps one outcome). */
  #logClaim(message: string): void {
    void this.logStore.append({ level: "warn", message, source: "mneme.dispatch" }).catch(() => undefined);
  }

  /**
   * Answers a query after its permission check (and schema validation, when a schema is known).
   * @example
   * const todo = await facade.query(GetTodo, { todoUuid, includeHistory: true }, { reqCtx });
   */
  async query<P, R>(type: QueryType<P, R> | MessageRef, payload: NoInfer<P>, opts: QueryOptions = {}): Promise<R> {
    this.#assertStarted();
    const qt = this.resolveQuery(type as QueryType<any, any>) as QueryType<P, R>;
    const run = () => this.#runQuery(qt, payload, normaliseReqCtx(opts.reqCtx), messageUuid(opts.queryUuid, "queryUuid"), true);
    return this.#telemetry?.active === true ? this.#telemetry.query(qt.domain, qt.name, opts.reqCtx, run) : run();
  }

  async #runQuery<P, R>(type: QueryType<P, R>, payload: P, reqCtx: RequestContext, queryUuid: string, check: boolean): Promise<R> {
    const qt = this.resolveQuery(type);
    const domain = this.#domains.get(qt.domain)!;
    if (!isPlainObject(payload)) {
      throw new MnemeError("VALIDATION_FAILED", `the payload of ${qt.domain}.${qt.name} must be a JSON object`, {
        details: [{ pointer: "", message: "must be object" }],
      });
    }
    checkPayload(qt, payload);
    const envelope: QueryEnvelope<P> = { queryUuid, domain: qt.domain, name: qt.name, payload, reqCtx };
    if (check) {
      const verdict = this.permissions.evaluate(reqCtx, envelope);
      const denied = verdict instanceof Promise ? await verdict : verdict;
      if (denied !== undefined) throw denied;
    }
    this.schemas.validate(qt, payload);
    const handler = domain.queryHandlers.get(qt.name);
    if (handler === undefined) throw new MnemeError("UNKNOWN_QUERY", `query ${qt.domain}.${qt.name} has no handler`);
    const tenantUuid = tenantOf(reqCtx);
    const ctx: QueryContext = {
      queryUuid,
      reqCtx,
      tenantUuid,
      aggregates: new QueryAggregates(this, tenantUuid),
      query: (t, p) => this.#runQuery(t, p, reqCtx, newUuid(), false),
      facade: this,
      readmodel: scopedReadmodels(this, tenantUuid),
    };
    return (await handler(ctx, envelope, payload)) as R;
  }

  /**
   * Folds an aggregate's events (no lock). Trusted code: unscoped unless
   * `tenantUuid` is given; then a tenant-scoped aggregate of another tenant
   * is NOT_FOUND, as inside a handler.
   */
  async loadAggregate<S>(
    aggregate: AggregateType<S>,
    aggregateUuid: string,
    opts: { tenantUuid?: string } = {},
  ): Promise<LoadedAggregate<S>> {
    if (aggregate?.kind !== "aggregate") throw new MnemeError("INVALID_REQUEST", "load takes an aggregate type");
    if (typeof aggregateUuid !== "string" || aggregateUuid === "")
      throw new MnemeError("INVALID_REQUEST", `${aggregate.domain}.${aggregate.name}: aggregateUuid must be a non-empty string`);
    return this.#loading.load(aggregate, aggregateUuid, opts.tenantUuid, () => aggregateNotFound(aggregate, aggregateUuid));
  }
}

/** What every command context of one facade shares. */
interface CommandContextHost {
  readonly facade: Facade;
  readonly locks: KeyedLock;
  runQuery<P, R>(type: QueryType<P, R>, payload: P, reqCtx: RequestContext): Promise<R>;
}

/**
 * The context a command handler gets. Its loader and functions are made on first
 * use (most handlers use few of them), and stay the same objects afterwards, so
 * `const { aggregates, query } = ctx` works.
 */
class DispatchContext implements CommandContext {
  #loader: CommandAggregates | undefined;
  #query: CommandContext["query"] | undefined;
  #readmodel: CommandContext["readmodel"] | undefined;
  readonly tenantUuid: string;

  constructor(
    readonly host: CommandContextHost,
    readonly commandUuid: string,
    readonly reqCtx: RequestContext,
  ) {
    this.tenantUuid = tenantOf(reqCtx);
  }

  get facade(): Facade {
    return this.host.facade;
  }

  get aggregates(): CommandAggregates {
    return (this.#loader ??= new CommandAggregates(
      (aggregate, aggregateUuid) => this.host.facade.loadAggregate(aggregate, aggregateUuid, { tenantUuid: this.tenantUuid }),
      this.host.locks,
      this.reqCtx,
    ));
  }

  get query(): CommandContext["query"] {
    return (this.#query ??= (type, payload) => this.host.runQuery(type, payload, this.reqCtx));
  }

  get readmodel(): CommandContext["readmodel"] {
    return (this.#readmodel ??= scopedReadmodels(this.host.facade, this.tenantUuid));
  }

  /** The loader, if the handler used one. */
  get loader(): CommandAggregates | undefined {
    return this.#loader;
  }

  /** Releases the aggregate locks the handler took. */
  release(): void {
    this.#loader?.releaseAll();
  }
}

class QueryAggregates implements AggregateLoader {
  constructor(
    readonly facade: Facade,
    readonly tenantUuid: string,
  ) {}
  load<S>(aggregate: AggregateType<S>, aggregateUuid: string): Promise<LoadedAggregate<S>> {
    return this.facade.loadAggregate(aggregate, aggregateUuid, { tenantUuid: this.tenantUuid });
  }
}

/**
 * `ctx.readmodel` of a handler: the readmodel (by name or the object itself)
 * as the effective tenant may see it — `forTenant(tenantUuid)` of a
 * readmodel that offers it (a ProjectionReadmodel does), else for a
 * BaseReadmodel `asTenant(tenantUuid)` (its tenant-scoped collections hold
 * only that tenant's documents), else the handler object itself.
 */
function scopedReadmodels(facade: Facade, tenantUuid: string): MessageContext["readmodel"] {
  return (ref: string | EventHandler | ReadmodelHandle<EventHandler>, type?: ReadmodelClass) => {
    const h: EventHandler =
      typeof ref === "string"
        ? type === undefined
          ? facade.readmodel(ref)
          : facade.readmodel(ref, type)
        : isReadmodelHandle(ref)
          ? facade.readmodel(ref)
          : facade.readmodel(ref);
    if (isTenantScopable(h)) return h.forTenant(tenantUuid);
    return h instanceof BaseReadmodel ? h.asTenant(tenantUuid) : h;
  };
}

/** A class of readmodels or handlers, as a lookup by name takes it. */
type ReadmodelClass = abstract new (...args: any[]) => EventHandler;

/** What the facade keeps of a registered handler. */
interface Registration {
  /** The object given to register / registerReadmodel (a plain EventHandler or a BaseEventHandler). */
  readonly object: EventHandler;
  /** The BaseEventHandler that runs it: the object itself, or the adapter of a plain one. */
  readonly handler: BaseEventHandler;
  readonly runner: HandlerRunner;
  readonly handle: ReadmodelHandle<EventHandler>;
}

/**
 * The registered object that `ref` names: by name (with `type`, checked with
 * instanceof), by this facade's handle, or the object itself when it is the
 * one registered under its name. UNKNOWN_EVENT_HANDLER otherwise.
 */
function lookupReadmodel(registered: ReadonlyMap<string, Registration>, ref: unknown, type: ReadmodelClass | undefined): EventHandler {
  if (typeof ref === "string") {
    const r = registered.get(ref);
    if (r === undefined) throw new MnemeError("UNKNOWN_EVENT_HANDLER", `no event handler named ${JSON.stringify(ref)} is registered`);
    if (type === undefined) return r.object;
    if (typeof type !== "function")
      throw new MnemeError("INVALID_REQUEST", `readmodel(${JSON.stringify(ref)}, type): type must be a class`);
    const found: object = r.object;
    if (!(found instanceof type)) {
      throw new MnemeError(
        "UNKNOWN_EVENT_HANDLER",
        `the event handler named ${JSON.stringify(ref)} is a ${found.constructor?.name || "plain object"}, not a ${type.name || "instance of the class given"}`,
      );
    }
    return r.object;
  }
  if (isReadmodelHandle(ref)) {
    const r = registered.get(ref.name);
    if (r === undefined || r.handle !== ref)
      throw new MnemeError("UNKNOWN_EVENT_HANDLER", `the handle of ${JSON.stringify(ref.name)} is not one of this facade`);
    return r.object;
  }
  const name = (ref as { name?: unknown } | null | undefined)?.name;
  const r = typeof name === "string" ? registered.get(name) : undefined;
  if (r === undefined || r.object !== ref)
    throw new MnemeError("UNKNOWN_EVENT_HANDLER", `event handler ${JSON.stringify(name)} is not registered with this facade`);
  return r.object;
}

/**
 * The JSON-safe payload rule (before the permission check, so nothing runs on
 * a payload no backend could store faithfully): VALIDATION_FAILED with a pointer.
 */
function checkPayload(type: { domain: string; name: string }, payload: unknown): void {
  const problem = jsonSafeProblem(payload);
  if (problem !== undefined) {
    throw new MnemeError(
      "VALIDATION_FAILED",
      `the payload of ${type.domain}.${type.name} is not JSON-safe at ${problem.pointer}: ${problem.message}`,
      {
        details: [{ pointer: problem.pointer, message: problem.message }],
      },
    );
  }
}

function normaliseReqCtx(reqCtx: RequestContext | undefined): RequestContext {
  if (reqCtx === undefined) return {};
  if (!isPlainObject(reqCtx)) throw new MnemeError("INVALID_REQUEST", "reqCtx must be an object");
  // Every event of the command stores a copy of it: it must read back unchanged too.
  const problem = jsonSafeProblem(reqCtx);
  if (problem !== undefined)
    throw new MnemeError("INVALID_REQUEST", `reqCtx is not JSON-safe at ${problem.pointer}: ${problem.message}`, {
      details: [{ pointer: problem.pointer, message: problem.message }],
    });
  const v: unknown = reqCtx.targetAggregateVersion;
  if (v !== undefined && (typeof v !== "number" || !Number.isSafeInteger(v) || v < 0)) {
    throw new MnemeError(
      "INVALID_REQUEST",
      `reqCtx.targetAggregateVersion must be an integer >= 0, got ${typeof v === "number" ? String(v) : JSON.stringify(v)}`,
    );
  }
  return reqCtx;
}

/** Per command store (so facades sharing one serialise too): one dispatch at a time per given commandUuid. */
const COMMAND_LOCKS = new WeakMap<CommandStore, KeyedLock>();
function commandLocks(store: CommandStore): KeyedLock {
  let locks = COMMAND_LOCKS.get(store);
  if (locks === undefined) COMMAND_LOCKS.set(store, (locks = new KeyedLock()));
  return locks;
}

/** JSON with object keys sorted: a payload read back from Postgres jsonb compares equal to the one sent. */
function canonicalJson(v: unknown): string {
  return JSON.stringify(v, (_k, x: unknown) =>
    x !== null && typeof x === "object" && !Array.isArray(x)
      ? Object.fromEntries(Object.entries(x as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
      : x,
  );
}

/** The caller's command/query uuid, or a fresh uuid v7. */
function messageUuid(given: string | undefined, what: string): string {
  if (given === undefined) return newUuid();
  if (typeof given !== "string" || given === "") throw new MnemeError("INVALID_REQUEST", `${what} must be a non-empty string`);
  return given;
}

function tenantOf(reqCtx: RequestContext): string {
  return reqCtx.targetTenantUuid ?? reqCtx.senderTenantUuid ?? "";
}

function aggregateNotFound(aggregate: AggregateType<any>, aggregateUuid: string): MnemeError {
  // The same words whether the aggregate is absent or lives in another tenant: no existence oracle.
  return new MnemeError("NOT_FOUND", `${aggregate.domain}.${aggregate.name} ${aggregateUuid} was not found`);
}

function unknownEvolveKey(
  aggregate: AggregateType<any>,
  key: string,
  owner: string,
  events: ReadonlyMap<string, EventType> | undefined,
): MnemeError {
  const known =
    events === undefined ? `no domain ${owner} is registered` : `known events of ${owner}: ${[...events.keys()].join(", ") || "none"}`;
  return new MnemeError(
    "INVALID_DOMAIN",
    `aggregate ${aggregate.domain}.${aggregate.name}: evolve key ${JSON.stringify(key)} names no event (${known})`,
  );
}

function isNewEvent(e: unknown): e is NewEvent {
  if (typeof e !== "object" || e === null) return false;
  const r = e as Record<string, unknown>;
  return typeof r.domain === "string" && typeof r.name === "string" && typeof r.aggregateUuid === "string" && "payload" in r;
}

function normaliseHandlerResult(out: unknown, type: CommandType<any, any>): { events: readonly NewEvent[]; result: unknown } {
  if (out === undefined || out === null) return { events: [], result: undefined };
  if (Array.isArray(out)) return { events: out as NewEvent[], result: undefined };
  if (typeof out === "object" && !isNewEvent(out)) {
    const o = out as { events?: unknown; result?: unknown };
    if (o.events !== undefined && !Array.isArray(o.events)) {
      throw new MnemeError("INVALID_EVENTS", `command ${type.domain}.${type.name}: events must be an array`);
    }
    if ("events" in o || "result" in o) return { events: (o.events as NewEvent[] | undefined) ?? [], result: o.result };
  }
  throw new MnemeError(
    "INVALID_EVENTS",
    `command ${type.domain}.${type.name} returned ${describe(out)}; a handler returns an array of events, nothing, or { events, result }`,
  );
}

function describe(v: unknown): string {
  if (Array.isArray(v)) return "an array";
  return v === null ? "null" : `a ${typeof v}`;
}

/**
 * Creates a facade. Every store defaults to in-memory; spread
 * `createSqliteBackends(...)` or `createPostgresBackends(...)` in for durability.
 * @example
 * const facade = createFacade({ appName: "todo", ...createSqliteBackends({ filename: "todo.db" }) });
 * facade.registerDomain(Todo);
 * await facade.start();
 */
export function createFacade(options: FacadeOptions = {}): Facade {
  return new Facade(options);
}
