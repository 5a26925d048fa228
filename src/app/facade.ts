import { ReadmodelCommits } from "../readmodel/readmodel-commits.js";
import { chooseStores } from "./backend-choice.js";
import { MemoryCacheStore } from "../memory/memory-cache-store.js";
import { MemoryCommandStore } from "../memory/memory-command-store.js";
import { MemoryDataStore } from "../memory/memory-data-store.js";
import { MemoryEventRepository } from "../memory/memory-event-repository.js";
import { MemoryLogStore } from "../memory/memory-log-store.js";
import { MemoryReadmodelStoreBackend } from "../memory/memory-readmodel-store-backend.js";
import { MemorySnapshotStore } from "../memory/memory-snapshot-store.js";
import { MemoryKeyStore } from "../memory/memory-key-store.js";
import { PermissionRegistry } from "../permissions/permission-registry.js";
import type { BaseEventHandler } from "../readmodel/base-event-handler.js";
import { DEFAULT_DELIVERY, type DeliveryOptions, type HandlerHost } from "../readmodel/handler-runner.js";
import type { EventHandler, ReadmodelHandle, ReadmodelRef } from "../model/event-handler.js";
import { FAILURE_KINDS } from "../runtime/failure-history.js";
import { type RollingUpgradeReport, Runtime } from "../runtime/runtime.js";
import type { RollingFrom } from "../store/store-format.js";
import { installRuntimeDomain, RuntimeDomain } from "../runtime/runtime-domain.js";
import { SystemEventProducer } from "../runtime/system-events.js";
import type { SystemEventKind } from "../model/system-event-kind.js";
import { SchemaRegistry } from "../schema/schema-registry.js";
import type { CacheStore } from "../store/cache-store.js";
import type { CommandStore } from "../store/command-store.js";
import type { DataStore } from "../store/data-store.js";
import type { LogStore } from "../store/log-store.js";
import type { KeyStore } from "../store/key-store.js";
import type { SnapshotStore } from "../store/snapshot-store.js";
import type { ReadmodelStoreBackend } from "../store/readmodel-store-backend.js";
import { PersonalDataProtection } from "../privacy/personal-data-protection.js";
import { CommandPayloads } from "../privacy/command-payloads.js";
import { newUuid } from "../model/clock.js";
import type { LoadedAggregate } from "../model/context.js";
import type { Domain } from "../model/domain.js";
import { type DomainInstall, installDomain, type InstalledDomain } from "../model/domain-install.js";
import { MnemeError } from "../model/errors.js";
import { KeyedLock } from "../model/keyed-lock.js";
import type { AggregateType, CommandType, EventType, QueryType } from "../model/tokens.js";
import type { DispatchOptions, DispatchResult, FacadeHandle, MessageRef, QueryOptions } from "../model/facade-handle.js";
import { AggregateCache, type AggregateCacheStats } from "./aggregate-cache.js";
import { EventQueryCache, type EventQueryCacheStats } from "./event-query-cache.js";
import { AggregateLoading } from "./aggregate-loading.js";
import { claimingStore, idempotencyOptions } from "./command-claim.js";
import type { CommandContextHost } from "./command-context.js";
import { Dispatcher } from "./dispatch.js";
import { DomainRegistry } from "./domain-registry.js";
import { EventView, Upcasting, type FacadeEventRepository } from "./event-view.js";
import { applyRetention, type RetentionCaller } from "./retention.js";
import { retentionMs } from "../model/retention-period.js";
import type { RetentionOptions, RetentionReport } from "../runtime/retention-report.js";
import type { FacadeOptions } from "./facade-options.js";
import { CommandRecords } from "./idempotency.js";
import { FacadeLifecycle, type FacadeState, type Lifecycle } from "./lifecycle.js";
import { type FinishRollingUpgradeOptions, RollingUpgrade } from "./rolling-upgrade.js";
import {
  dropFoldedCopies,
  type ForgetOptions,
  forgetSubject,
  scrubStorage,
  tenantsOfSubject,
  warnUndeclaredPersonalData,
  WritePathPrivacy,
} from "./privacy-write.js";
import type {
  ClearPersonalData,
  MigratePersonalDataOptions,
  PersonalDataMigrationHost,
  PersonalDataMigrationReport,
} from "../privacy/personal-data-migration.js";
import { checkAtStart, runMigration, startupCheckLimit } from "./personal-data-upgrade.js";
import { type QueryHost, runQuery } from "./query.js";
import { indexEventTags, type IndexEventTagsOptions, type IndexEventTagsReport } from "./tag-index.js";
import { type ReadmodelClass, ReadmodelRegistry } from "./readmodel-registry.js";
import { checkTimerMs, messageUuid, normaliseReqCtx } from "./request-input.js";
import { aggregateNotFound } from "./tenancy.js";

export type { FacadeOptions } from "./facade-options.js";

/**
 * The central access point: registers domains and handlers, executes
 * commands, answers queries, and holds the Runtime. A composition root: each
 * flow lives in a file of its own under src/app (dispatch.ts, query.ts,
 * lifecycle.ts, readmodel-registry.ts, domain-registry.ts, privacy-write.ts,
 * idempotency.ts, append.ts, tenancy.ts); this class makes them and wires them.
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
  readonly eventRepository: FacadeEventRepository;
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
  /** Told after every batch a readmodel of this facade commits (live queries listen: `readmodelCommits.listen(fn)`). */
  readonly readmodelCommits = new ReadmodelCommits();

  readonly #registry = new DomainRegistry();
  readonly #readmodels = new ReadmodelRegistry();
  readonly #privacy: WritePathPrivacy;
  readonly #aggregateCache: AggregateCache | undefined;
  /** The cache of `ctx.events` reads; undefined when off. */
  readonly #queryCache: EventQueryCache | undefined;
  readonly #loading: AggregateLoading;
  readonly #upcasting = new Upcasting();
  readonly #delivery: DeliveryOptions;
  readonly #host: HandlerHost;
  readonly #lifecycle: FacadeLifecycle<Facade>;
  readonly #dispatcher: Dispatcher;
  /** What a command context (and a query's) needs of the facade, made once (not per command). */
  readonly #contexts: CommandContextHost;
  readonly #queries: QueryHost;

  #clearPersonalData: ClearPersonalData | undefined;
  readonly #rolling: RollingUpgrade;
  readonly #startupCheckLimit: number;
  /** The LogStore's retention (ms, from `retention.logs`). */
  readonly #logRetainForMs: number | undefined;

  constructor(options: FacadeOptions = {}) {
    options = chooseStores(options);
    this.appName = options.appName ?? "mneme-app";
    this.version = options.version ?? "0.0.0";
    this.tenant = options.tenant;
    this.instanceId = options.instanceId ?? newUuid();
    const events = new EventView(options.eventRepository ?? new MemoryEventRepository());
    this.eventRepository = events;
    this.keyStore = options.keyStore ?? new MemoryKeyStore();
    this.commandStore = options.commandStore ?? new MemoryCommandStore();
    this.dataStore = options.dataStore ?? new MemoryDataStore();
    this.cacheStore = options.cacheStore ?? new MemoryCacheStore();
    this.logStore = options.logStore ?? new MemoryLogStore();
    const logs = options.retention?.logs;
    this.#logRetainForMs = logs === undefined ? undefined : retentionMs(logs, "createFacade: retention.logs", "INVALID_REQUEST");
    this.readmodelStoreBackend = options.readmodelStoreBackend ?? new MemoryReadmodelStoreBackend();
    this.snapshotStore = options.snapshotStore ?? new MemorySnapshotStore();
    // Keys kept in memory only must not seal events a durable repository keeps.
    const keysOnlyInMemory =
      options.keyStore === undefined && options.eventRepository !== undefined && !(events.stored instanceof MemoryEventRepository);
    const privacy = (this.#privacy = new WritePathPrivacy(this.#registry.eventTypes, keysOnlyInMemory));
    this.personalData = new PersonalDataProtection({
      keyStore: this.keyStore,
      personalDataOf: (domain, name) => privacy.personalDataAt(`${domain}.${name}`),
      ...options.personalData,
    });
    this.commandPayloads = new CommandPayloads(
      this.personalData,
      (domain, name) => this.#registry.domains.get(domain)?.commands.get(name),
      (domain, name) => privacy.personalDataAt(`${domain}.${name}`),
    );
    // Decryption first: upcasters see the clear payload (or "[erased]"), in the shape it was stored in.
    events.addReadStep({ read: (e) => this.personalData.decrypt(e), active: () => privacy.hasPersonalData() });
    events.addReadStep(this.#upcasting);
    const rolling = (this.#rolling = new RollingUpgrade({
      eventStore: events.stored,
      stores: () => this.#stores(),
      migrate: (opts) => this.migratePersonalData(opts),
    }));
    events.addWriteStep(
      privacy.writeStep(this.personalData, { maybe: () => rolling.from !== undefined, confirm: () => rolling.writesForOldReaders() }),
    );
    events.setStoredPaths((paths) => this.#upcasting.storedPaths(paths));
    this.#aggregateCache = options.aggregateCache === false ? undefined : new AggregateCache(options.aggregateCache);
    const queryCache = options.eventQueryCache ?? (options.aggregateCache === false ? false : undefined);
    this.#queryCache = queryCache === false ? undefined : new EventQueryCache(queryCache);
    // An aggregate that folds personal data is neither cached nor snapshotted: a folded copy would outlive forget().
    this.#loading = new AggregateLoading(this.eventRepository, this.snapshotStore, this.#aggregateCache, this.logStore, (a) =>
      privacy.foldsPersonalData(a),
    );
    this.permissions = new PermissionRegistry(options.authorizer, { facade: this });
    const se = options.systemEvents;
    this.systemEvents = new SystemEventProducer(typeof se === "object" ? se : {});
    this.schemas = new SchemaRegistry(options.schemas);
    this.#delivery = { ...DEFAULT_DELIVERY, ...options.delivery };
    this.#startupCheckLimit = startupCheckLimit(options.personalData?.startupCheckLimit);
    this.#lifecycle = this.#makeLifecycle(options);
    this.#host = this.#handlerHost();
    this.#contexts = this.#contextHost();
    this.#queries = this.#queryHost();
    this.#dispatcher = this.#makeDispatcher(options);
    this.runtime = new Runtime(this);
    const runtime = this.runtime;
    this.registerDomain(RuntimeDomain, (d) => installRuntimeDomain(d, runtime));
  }

  #publish(kind: SystemEventKind, data: Record<string, unknown>, tenantUuid?: string): void {
    // Failures are kept in the Runtime's failure history also while the stream is stopped.
    if (this.systemEvents.running || FAILURE_KINDS.has(kind)) this.systemEvents.publish(kind, data, tenantUuid);
  }

  #makeLifecycle(options: FacadeOptions): FacadeLifecycle<Facade> {
    return new FacadeLifecycle<Facade>({
      self: this,
      options,
      domains: this.#registry,
      readmodels: this.#readmodels,
      eventRepository: this.eventRepository,
      systemEvents: this.systemEvents,
      logStore: this.logStore,
      stores: () => this.#stores(),
      storeInfo: () => this.runtime.storeInfo(),
      checkStoredPersonalData: async () => {
        this.#clearPersonalData = await checkAtStart(this.#migrationHost(), this.#startupCheckLimit, this.logStore);
      },
      drainLoads: () => this.#loading.drain(),
      publish: (kind, data) => this.#publish(kind, data),
    });
  }

  /** What a registered handler gets of the facade. */
  #handlerHost(): HandlerHost {
    const readmodels = this.#readmodels;
    return {
      eventRepository: this.eventRepository,
      readmodelStoreBackend: this.readmodelStoreBackend,
      instanceId: this.instanceId,
      publish: (kind, data, tenantUuid) => this.#publish(kind, data, tenantUuid),
      knownHead: () => readmodels.head,
      noteHead: (p: number) => readmodels.noteHead(p),
      eventType: (path: string) => this.#registry.eventTypes.get(path),
      telemetry: () => this.#lifecycle.telemetry,
      commits: this.readmodelCommits,
    };
  }

  #contextHost(): CommandContextHost {
    return {
      facade: this,
      locks: new KeyedLock(),
      load: (aggregate, aggregateUuid, tenantUuid) => this.loadAggregate(aggregate, aggregateUuid, { tenantUuid }),
      runQuery: (t, p, reqCtx) => runQuery(this.#queries, t, p, reqCtx, newUuid(), false),
      readmodels: (tenantUuid) => this.#readmodels.scoped(tenantUuid),
      taggedEvents: {
        repository: this.eventRepository,
        eventType: (path) => this.#registry.eventTypes.get(path),
        storedPaths: (paths) => this.#upcasting.storedPaths(paths),
        cache: this.#queryCache,
      },
    };
  }

  #queryHost(): QueryHost {
    return { ...this.#contexts, domains: this.#registry, permissions: this.permissions, schemas: this.schemas };
  }

  #makeDispatcher(options: FacadeOptions): Dispatcher {
    const lifecycle = this.#lifecycle;
    const claims = claimingStore(this.commandStore);
    const idempotency = idempotencyOptions(options.idempotency);
    return new Dispatcher({
      eventRepository: this.eventRepository,
      eventTypes: this.#registry.eventTypes,
      tenancy: this.#registry.tenancy,
      recordsWithAppend: this.eventRepository.joinCommandStore(this.commandStore),
      domains: this.#registry,
      readmodels: this.#readmodels,
      records: new CommandRecords(
        this.commandStore,
        this.eventRepository,
        this.personalData,
        this.logStore,
        claims,
        idempotency,
        this.instanceId,
      ),
      permissions: this.permissions,
      schemas: this.schemas,
      personalData: this.personalData,
      systemEvents: this.systemEvents,
      aggregateCache: this.#aggregateCache,
      contexts: this.#contexts,
      assertStarted: () => lifecycle.assertStarted(),
      telemetry: () => lifecycle.telemetry,
      pushesLocally: () => lifecycle.pushesLocally,
    });
  }

  /** Every store once: the facade's and those the registered readmodels chose. */
  #stores(): Lifecycle[] {
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
    return [...new Set([...all, ...this.#readmodels.backends()])];
  }

  /** What the start-up check (or the last migration) found of personal data stored in clear; undefined before start or when not checked. */
  get clearPersonalData(): ClearPersonalData | undefined {
    return this.#clearPersonalData;
  }

  /**
   * Seals the declared personal fields stored in clear (events written before
   * their type declared them, command records), so `forget` erases them too;
   * resumable, see docs/upgrading.md.
   * @example
   * const report = await facade.migratePersonalData();
   */
  async migratePersonalData(opts?: MigratePersonalDataOptions): Promise<PersonalDataMigrationReport> {
    this.#lifecycle.assertStarted();
    const { report, after } = await runMigration(this.#migrationHost(), opts, this.#startupCheckLimit);
    this.#clearPersonalData = after;
    return report;
  }

  /**
   * Runs retention: the events older than their type's `retainFor` become
   * tombstones (never one a live aggregate's state depends on without a
   * snapshot at or past its version), the log entries older than
   * `retention.logs` are deleted, and the run is recorded in the event chain
   * (`Runtime.RetentionApplied`) and the LogStore. `by` names who asked
   * (the Runtime command `ApplyRetention` passes its caller). See
   * docs/operations.md, "Retention".
   * @example
   * const report = await facade.applyRetention({ dryRun: true });
   */
  async applyRetention(opts?: RetentionOptions, by?: RetentionCaller): Promise<RetentionReport> {
    this.#lifecycle.assertStarted();
    return applyRetention(
      {
        events: this.eventRepository,
        stored: this.eventRepository.stored,
        domains: this.#registry.domains,
        eventTypes: this.#registry.eventTypes,
        snapshotStore: this.snapshotStore,
        commandStore: this.commandStore,
        logStore: this.logStore,
        logRetainForMs: this.#logRetainForMs,
        stores: () => this.#stores(),
        forgetCachedEvents: () => this.#queryCache?.clear(),
      },
      opts,
      by,
    );
  }

  /**
   * Adds the tag index rows of events stored before their type declared `tags`
   * (docs/dcb.md, "Limits"), so `ctx.events` queries find them; idempotent,
   * resumable, safe beside live appends. Run it before commands read those types.
   * @example
   * const { rowsAdded } = await facade.indexEventTags();
   */
  async indexEventTags(opts?: IndexEventTagsOptions): Promise<IndexEventTagsReport> {
    this.#lifecycle.assertStarted();
    // Tag rows of stored events are matches below positions the query cache read at: it starts over.
    this.#queryCache?.clear();
    return indexEventTags({ events: this.eventRepository, eventType: (path) => this.#registry.eventTypes.get(path) }, opts);
  }

  /**
   * The release whose instances the store still admits beside this one (a rolling deploy in compatibility mode,
   * entered with the backends' `rollingFrom`), as this instance last read the store's format record; undefined
   * otherwise. Meanwhile personal data is written in clear, for them. See docs/upgrading.md.
   */
  get rollingFrom(): RollingFrom | undefined {
    return this.#rolling.from;
  }

  /**
   * Ends a rolling deploy's compatibility mode, once every instance of the older release is gone: every store
   * refuses their writes again (an old instance started later fails to write, naming both releases), then,
   * after `settleMs`, the personal-data migration seals what was written in clear meanwhile. Safe to run from
   * several instances (each step is idempotent); see docs/upgrading.md.
   * @example
   * const report = await facade.finishRollingUpgrade();
   */
  async finishRollingUpgrade(opts?: FinishRollingUpgradeOptions): Promise<RollingUpgradeReport> {
    this.#lifecycle.assertStarted();
    return this.#rolling.finish(opts);
  }

  /** What the personal-data migration and the start-up check read and write (src/app/personal-data-upgrade.ts). */
  #migrationHost(): PersonalDataMigrationHost {
    return {
      stored: this.eventRepository.stored,
      commandStore: this.commandStore,
      protection: this.personalData,
      eventTypes: () => this.#registry.eventTypes.values(),
      commandTypes: () => [...this.#registry.domains.values()].flatMap((d) => [...d.commands.values()]),
      append: (events, globalAggregates) => this.eventRepository.append(events, { globalAggregates }),
      dropFoldedCopies: () =>
        dropFoldedCopies({
          privacy: this.#privacy,
          aggregateCache: this.#aggregateCache,
          domains: this.#registry.domains,
          snapshotStore: this.snapshotStore,
        }),
    };
  }

  /** When start() finished (ns since the epoch), 0 before. */
  get startedAt(): number {
    return this.#lifecycle.startedAt;
  }

  /**
   * Erases a data subject: deletes its encryption keys, so every field sealed
   * with them reads as "[erased]" on every read path from now on (other
   * instances within `personalData.keyCacheTtlMs`), and appends
   * `Privacy.SubjectForgotten` so readmodels that keep copies of personal
   * fields drop them. This instance's aggregate cache is cleared and the
   * snapshots of aggregates that evolve personal-data events are deleted, so
   * no folded copy survives here. Idempotent; see docs/privacy.md.
   * `opts.reqCtx` (and `commandUuid`) are recorded on the SubjectForgotten
   * event: who erased the subject (the Runtime command `ForgetSubject` passes its caller's).
   * @example
   * await facade.forget(accountUuid);
   */
  async forget(subject: string, opts?: ForgetOptions): Promise<{ keysDeleted: number }> {
    // Also while starting: a handler catching up inside start() may erase (the built-in AccountEraser does).
    if (this.#lifecycle.state !== "starting") this.#lifecycle.assertStarted();
    return forgetSubject(
      {
        personalData: this.personalData,
        privacy: this.#privacy,
        aggregateCache: this.#aggregateCache,
        domains: this.#registry.domains,
        snapshotStore: this.snapshotStore,
        eventRepository: this.eventRepository,
      },
      subject,
      opts,
    );
  }

  /**
   * The tenants whose events carry `subject`'s personal data (a scan of the
   * events of the types that declare personal data): a tenant's
   * administrator may erase the subject through `Runtime.ForgetSubject` when
   * this is its tenant alone.
   */
  async subjectTenants(subject: string): Promise<Set<string>> {
    this.#lifecycle.assertStarted();
    return tenantsOfSubject({ privacy: this.#privacy, eventRepository: this.eventRepository }, subject);
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
    this.#lifecycle.assertStarted();
    const waitMs = checkTimerMs(opts.waitMs ?? 30_000, "scrubStorage: waitMs");
    return scrubStorage({ eventRepository: this.eventRepository, readmodels: this.#readmodels, stores: () => this.#stores() }, waitMs);
  }

  /** "new" | "starting" | "started" | "stopping" | "stopped" */
  get state(): FacadeState {
    return this.#lifecycle.state;
  }

  /** The registered domains by name (the Runtime included), each with the handlers installed in this facade. */
  get domains(): ReadonlyMap<string, InstalledDomain> {
    return this.#registry.domains;
  }

  /** The registered event handlers by name. */
  get eventHandlers(): ReadonlyMap<string, BaseEventHandler> {
    return this.#readmodels.handlers;
  }

  /** Size, bounds and hit counts of the aggregate cache; undefined when it is off. */
  aggregateCacheStats(): AggregateCacheStats | undefined {
    return this.#aggregateCache?.stats();
  }

  /** Size, bound, hits and misses of the cache of `ctx.events` reads; undefined when it is off. */
  eventQueryCacheStats(): EventQueryCacheStats | undefined {
    return this.#queryCache?.stats();
  }

  /** The highest event position this facade has seen. */
  get headPosition(): number {
    return this.#readmodels.head;
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
    this.#registry.assertNew(definition?.name);
    if (this.#lifecycle.stopped) throw new MnemeError("INVALID_STATE", "the facade is stopped");
    const domain = installDomain(definition, install);
    for (const p of domain.permissions.values()) {
      if (this.permissions.has(p.domain, p.type))
        throw new MnemeError("INVALID_DOMAIN", `permission ${p.domain}.${p.type} is registered already`);
    }
    const deferredKeys = this.#registry.checkEvolveKeys(domain);
    // Compile payload validators now, so a bad schema fails at registration and the first request pays nothing;
    // a command or query without a schema is INVALID_DOMAIN when schemas are required, else warned about.
    this.schemas.checkDomain(domain.name, [...domain.commands.values(), ...domain.queries.values()]);
    this.schemas.checkEvents(domain.events.values());
    const warning = warnUndeclaredPersonalData(domain, this.schemas);
    if (warning !== undefined) this.#lifecycle.startWarnings.push(warning);
    for (const p of domain.permissions.values()) this.permissions.register(p);
    for (const t of domain.events.values()) this.#upcasting.register(t);
    this.#registry.add(domain, deferredKeys);
    return this;
  }

  /**
   * Registers a readmodel or any event handler and returns its handle:
   * `facade.readmodel(handle)` and `ctx.readmodel(handle)` give it back with
   * its type. Names are unique per facade (INVALID_EVENT_HANDLER). After
   * start() it is restored and goes live at once.
   * @example
   * const todos = facade.registerReadmodel(new ProjectionReadmodel(facade, { aggregate: TodoAggregate }));
   * await facade.readmodel(todos).getModel(todoUuid);
   */
  registerReadmodel<T extends EventHandler>(handler: T): ReadmodelHandle<T> {
    if (this.#lifecycle.stopped) throw new MnemeError("INVALID_STATE", "the facade is stopped");
    return this.#readmodels.register(handler, this.#host, this.#delivery, this.#lifecycle.state === "started");
  }

  /** Runs `hook` inside start(), after stores are initialised and handlers are live (e.g. a bootstrap). */
  onStart(hook: (facade: Facade) => Promise<void> | void): this {
    this.#lifecycle.onStart(hook);
    return this;
  }

  /** Initialises stores, restores readmodels from their checkpoints, goes live. Idempotent; INVALID_STATE once stopped. */
  start(): Promise<void> {
    return this.#lifecycle.start();
  }

  /** Stops delivery and the system-event producer, closes every store. Idempotent. */
  stop(): Promise<void> {
    return this.#lifecycle.stop();
  }

  /** The command type registered under (domain, name). UNKNOWN_COMMAND otherwise. */
  resolveCommand(ref: CommandType<any, any> | MessageRef): CommandType<any, any> {
    return this.#registry.resolveCommand(ref);
  }

  /** The query type registered under (domain, name). UNKNOWN_QUERY otherwise. */
  resolveQuery(ref: QueryType<any, any> | MessageRef): QueryType<any, any> {
    return this.#registry.resolveQuery(ref);
  }

  /**
   * A registered readmodel or event handler (the object given to
   * `registerReadmodel`), unscoped. `ref` names it: its handle (typed), the
   * object itself (checked to be the one registered here), or its name;
   * `type`, when given, is checked with `instanceof` and types the result.
   * UNKNOWN_EVENT_HANDLER when nothing (or another kind of object) is
   * registered so. By a name without `type`, `T` is the caller's word.
   * @example
   * const todos = facade.readmodel(todoHandle);                          // ProjectionReadmodel<TodoState>
   * const open = facade.readmodel("OpenTodos", OpenTodos);               // OpenTodos, or UNKNOWN_EVENT_HANDLER
   */
  readmodel<T extends { readonly name: string } = EventHandler>(ref: ReadmodelRef<T>, type?: abstract new (...args: any[]) => T): T {
    return this.#readmodels.lookup(ref, type as ReadmodelClass | undefined) as unknown as T;
  }

  /** The event type of a path "Domain.Name", if registered. */
  eventType(path: string): EventType | undefined {
    return this.#registry.eventTypes.get(path);
  }

  /**
   * Executes a command: permission check, schema validation, handler, atomic
   * append, audit record, live delivery (the pipeline is src/app/dispatch.ts).
   * @example
   * const { events } = await facade.dispatch(CreateTodo, { todoUuid, title }, { reqCtx, waitToFinish: true });
   */
  dispatch<P, R = unknown>(
    type: CommandType<P, R> | MessageRef,
    payload: NoInfer<P>,
    opts: DispatchOptions = {},
  ): Promise<DispatchResult<R>> {
    return this.#dispatcher.dispatch(type, payload, opts);
  }

  /**
   * Answers a query after its permission check (and schema validation, when a schema is known).
   * @example
   * const todo = await facade.query(GetTodo, { todoUuid, includeHistory: true }, { reqCtx });
   */
  query<P, R>(type: QueryType<P, R> | MessageRef, payload: NoInfer<P>, opts: QueryOptions = {}): Promise<R> {
    // Not async: runQuery's promise is returned as it is (no wrapping promise); a check that throws here rejects.
    try {
      this.#lifecycle.assertStarted();
      const qt = this.resolveQuery(type as QueryType<any, any>) as QueryType<P, R>;
      const telemetry = this.#lifecycle.telemetry;
      if (telemetry?.active === true)
        return telemetry.query(qt.domain, qt.name, opts.reqCtx, async () => this.#runQuery(qt, payload, opts));
      return this.#runQuery(qt, payload, opts);
    } catch (e) {
      return Promise.reject(e as Error);
    }
  }

  #runQuery<P, R>(qt: QueryType<P, R>, payload: P, opts: QueryOptions): Promise<R> {
    return runQuery(this.#queries, qt, payload, normaliseReqCtx(opts.reqCtx), messageUuid(opts.queryUuid, "queryUuid"), true);
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

/**
 * Creates a facade. Every store defaults to in-memory; pass an engine,
 * `backend: createSqliteBackends(...)` or `backend: createPostgresBackends(...)`, for durability.
 * @example
 * const facade = createFacade({ appName: "todo", backend: createSqliteBackends({ filename: "todo.db" }) });
 * facade.registerDomain(Todo);
 * await facade.start();
 */
export function createFacade(options: FacadeOptions = {}): Facade {
  return new Facade(options);
}
