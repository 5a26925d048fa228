/**
 * An engine: the stores of an app in one database as one object that
 * declares its capabilities as flags, and the guarantees that follow from
 * them. `createFacade` compares them with the stores it is given and refuses
 * a mix that would lose one (see docs/architecture.md, "Engines").
 */
import { MnemeError } from "../model/errors.js";
import type { CacheStore } from "./cache-store.js";
import type { CommandStore } from "./command-store.js";
import type { DataStore } from "./data-store.js";
import type { EventRepository } from "./event-repository.js";
import type { KeyStore } from "./key-store.js";
import type { LogStore } from "./log-store.js";
import type { ReadmodelStoreBackend } from "./readmodel-store-backend.js";
import type { SnapshotStore } from "./snapshot-store.js";

/**
 * What a set of stores guarantees beyond the interfaces every store meets:
 * - `atomic-command-record`: a command's record commits in the transaction of
 *   its events (the event repository joined the command store); without it a
 *   crash between the two leaves events without their record;
 * - `replay-with-events`: an idempotent retry of a recorded command gets the
 *   events it appended (`loadEvents`); without it the retry gets none;
 * - `exactly-once-dispatch`: of concurrent duplicates of one commandUuid one
 *   handler runs across the instances sharing the command store (claims);
 *   without it duplicates are serialised in one process only;
 * - `cross-instance-delivery`: appends of other instances or processes are
 *   delivered live (`onExternalAppend`); without it they are seen at the next
 *   catch-up only;
 * - `blue-green-rebuild`: a restore from zero builds beside the live documents
 *   and switches in one transaction (`replaceCollections`); without it the
 *   rebuild happens in place and readers see it half built;
 * - `single-processor`: a handler runs on one instance at a time (`tryLock`);
 *   without it every instance sharing the readmodel backend applies every event;
 * - `fenced-processing`: an instance that lost a handler's lock can commit
 *   nothing more (`fencingToken`, `checkFencingToken`, with `tryLock`);
 * - `tenant-scoped-readmodels`: documents carry their tenant and reads can be
 *   limited to one (`tenantScopes`); without it tenant-scoped reads are refused.
 */
export type Guarantee =
  | "atomic-command-record"
  | "replay-with-events"
  | "exactly-once-dispatch"
  | "cross-instance-delivery"
  | "blue-green-rebuild"
  | "single-processor"
  | "fenced-processing"
  | "tenant-scoped-readmodels";

/** The store of a facade that a guarantee rests on (its option name in `createFacade`). */
export type GuaranteeStore = "eventRepository" | "commandStore" | "readmodelStoreBackend";

/** Every guarantee, with the store that provides it and what happens without it (for error messages and docs). */
export const GUARANTEES: Readonly<Record<Guarantee, { readonly store: GuaranteeStore; readonly without: string }>> = {
  "atomic-command-record": {
    store: "commandStore",
    without: "a command's record is written after its events, not in their transaction (a crash between them loses the record)",
  },
  "replay-with-events": { store: "eventRepository", without: "an idempotent retry of a recorded command returns no events" },
  "exactly-once-dispatch": { store: "commandStore", without: "duplicates of a commandUuid are settled in this process only" },
  "cross-instance-delivery": {
    store: "eventRepository",
    without: "appends by other instances are not delivered live, only at the next catch-up",
  },
  "blue-green-rebuild": { store: "readmodelStoreBackend", without: "a restore from zero rebuilds in place, visible half built" },
  "single-processor": {
    store: "readmodelStoreBackend",
    without: "nothing keeps a handler on one instance: every instance applies every event",
  },
  "fenced-processing": {
    store: "readmodelStoreBackend",
    without: "an instance that lost a handler's lock unnoticed may still commit a batch",
  },
  "tenant-scoped-readmodels": { store: "readmodelStoreBackend", without: "readmodel reads scoped to a tenant are refused" },
};

/** Every guarantee name, in a fixed order. */
export const GUARANTEE_NAMES = Object.keys(GUARANTEES) as readonly Guarantee[];

/** The stores a guarantee can rest on: the three of a facade that have optional capabilities. */
export interface GuaranteeStores {
  readonly eventRepository: EventRepository;
  readonly commandStore: CommandStore;
  readonly readmodelStoreBackend: ReadmodelStoreBackend;
}

/** What one event repository offers of the optional capabilities. */
export interface EventRepositoryCapabilities {
  /** joinCommandStore: a command's record commits in its events' transaction, with a command store of the same database. */
  readonly joinsCommandStore: boolean;
  /** loadEvents: an idempotent retry gets the events of the recorded command. */
  readonly loadEvents: boolean;
  /** onExternalAppend: appends of other instances or processes are told live. */
  readonly externalAppends: boolean;
  /** onAppend: appends of this repository are told to listeners (live delivery in this process). */
  readonly appendListeners: boolean;
}

/** What one command store offers of the optional capabilities. */
export interface CommandStoreCapabilities {
  /** claim, renewClaim and releaseClaim (a store offering some but not all is refused with INVALID_REQUEST). */
  readonly claims: boolean;
}

/** What one readmodel backend offers of the optional capabilities. */
export interface ReadmodelBackendCapabilities {
  readonly replaceCollections: boolean;
  /** ensureIndexes: declared collection indexes are built (without it reads scan, with the same results). */
  readonly indexes: boolean;
  /** tryLock and unlock (a backend without them gets an in-process lease when composed). */
  readonly locks: boolean;
  /** Where the lock holds: "database" (every instance sharing the database) or "process" (this process only). */
  readonly leaseScope: "database" | "process";
  /** fencingToken and checkFencingToken, with locks. */
  readonly fencing: boolean;
  /** onLockLost, with locks. */
  readonly lockLossNotice: boolean;
  /** lockHolder, with locks. */
  readonly lockHolder: boolean;
  readonly tenantScopes: boolean;
}

/**
 * What an engine declares it offers: the capabilities of its event
 * repository, command store and readmodel backend, written literally in its
 * factory (never derived by looking at which methods its stores have). Its
 * guarantees follow from them ({@link guaranteesDeclared}).
 */
export interface EngineCapabilities extends EventRepositoryCapabilities, CommandStoreCapabilities, ReadmodelBackendCapabilities {}

/** The capabilities stores of an engine (or a view of one, such as the facade's event repository) declared. */
const declared = new WeakMap<object, Partial<EngineCapabilities>>();

/**
 * Records that `store` offers `capabilities` (engines do it for each of their
 * stores; a store that wraps another declares the wrapped one's). Later
 * questions about `store` read this instead of looking at its methods.
 */
export function declareCapabilities(store: object, capabilities: Partial<EngineCapabilities>): void {
  declared.set(store, Object.freeze({ ...capabilities }));
}

/** The capabilities inferred for stores made outside an engine, once per store. */
const inferred = new WeakMap<object, object>();

/**
 * A store made outside an engine (a store of your own, given alone to
 * createFacade) declares nothing: what it offers is read once, here and only
 * here, from the optional methods it has, and kept. Engines declare theirs.
 */
function undeclared<C extends object>(store: object, infer: (has: (method: string) => boolean) => C): C {
  let found = inferred.get(store) as C | undefined;
  if (found === undefined) {
    found = Object.freeze(infer((method) => typeof (store as Record<string, unknown>)[method] === "function"));
    inferred.set(store, found);
  }
  return found;
}

/** The capabilities `repo` offers: declared by its engine, or (a repository made outside one) read from its methods once. */
export function eventRepositoryCapabilities(repo: EventRepository): EventRepositoryCapabilities {
  const d = declared.get(repo);
  if (d !== undefined) {
    return {
      joinsCommandStore: d.joinsCommandStore === true,
      loadEvents: d.loadEvents === true,
      externalAppends: d.externalAppends === true,
      appendListeners: d.appendListeners === true,
    };
  }
  return undeclared(repo, (has) => ({
    joinsCommandStore: has("joinCommandStore"),
    loadEvents: has("loadEvents"),
    externalAppends: has("onExternalAppend"),
    appendListeners: has("onAppend"),
  }));
}

/** Whether `store` offers claims; INVALID_REQUEST when a store made outside an engine has some of the three methods but not all. */
export function commandStoreCapabilities(store: CommandStore): CommandStoreCapabilities {
  const d = declared.get(store);
  if (d !== undefined) return { claims: d.claims === true };
  const { offered } = undeclared(store, (has) => ({ offered: ["claim", "renewClaim", "releaseClaim"].filter(has).length }));
  if (offered !== 0 && offered !== 3) {
    throw new MnemeError(
      "INVALID_REQUEST",
      "the command store offers some of claim, renewClaim and releaseClaim but not all three: offer all (exactly-once dispatch across instances) or none",
    );
  }
  return { claims: offered === 3 };
}

/** The capabilities `backend` offers: declared by its engine, or (a backend made outside one) read from its methods and flags once. */
export function readmodelBackendCapabilities(backend: ReadmodelStoreBackend): ReadmodelBackendCapabilities {
  const d = declared.get(backend);
  if (d !== undefined) {
    const locks = d.locks === true;
    return {
      replaceCollections: d.replaceCollections === true,
      indexes: d.indexes === true,
      locks,
      leaseScope: d.leaseScope ?? "database",
      fencing: locks && d.fencing === true,
      lockLossNotice: locks && d.lockLossNotice === true,
      lockHolder: locks && d.lockHolder === true,
      tenantScopes: d.tenantScopes === true,
    };
  }
  return undeclared(backend, (has) => {
    const locks = has("tryLock") && has("unlock");
    return {
      replaceCollections: has("replaceCollections"),
      indexes: has("ensureIndexes"),
      locks,
      leaseScope: backend.leaseScope === "process" ? "process" : "database",
      fencing: locks && has("fencingToken") && has("checkFencingToken"),
      lockLossNotice: locks && has("onLockLost"),
      lockHolder: locks && has("lockHolder"),
      tenantScopes: backend.tenantScopes === true,
    };
  });
}

/**
 * The guarantees declared capabilities give (a whole engine's, its event
 * repository joined with its own command store), in the order of
 * {@link GUARANTEE_NAMES}.
 */
export function guaranteesDeclared(c: EngineCapabilities): Guarantee[] {
  const shared = c.locks && c.leaseScope === "database";
  const held: Record<Guarantee, boolean> = {
    "atomic-command-record": c.joinsCommandStore,
    "replay-with-events": c.loadEvents,
    "exactly-once-dispatch": c.claims,
    "cross-instance-delivery": c.externalAppends,
    "blue-green-rebuild": c.replaceCollections,
    "single-processor": shared,
    "fenced-processing": shared && c.fencing,
    "tenant-scoped-readmodels": c.tenantScopes,
  };
  return GUARANTEE_NAMES.filter((g) => held[g]);
}

/**
 * The guarantees one store offers on its own side, as if joined with stores
 * of its own kind: what an application that picked it may expect of it.
 */
export function guaranteesOffered(role: GuaranteeStore, store: object): Guarantee[] {
  const offered = new Set<Guarantee>();
  if (role === "eventRepository") {
    const c = eventRepositoryCapabilities(store as EventRepository);
    if (c.joinsCommandStore) offered.add("atomic-command-record");
    if (c.loadEvents) offered.add("replay-with-events");
    if (c.externalAppends) offered.add("cross-instance-delivery");
  } else if (role === "commandStore") {
    if (commandStoreCapabilities(store as CommandStore).claims) offered.add("exactly-once-dispatch");
  } else {
    const c = readmodelBackendCapabilities(store as ReadmodelStoreBackend);
    if (c.replaceCollections) offered.add("blue-green-rebuild");
    if (c.locks && c.leaseScope === "database") offered.add("single-processor");
    if (c.locks && c.leaseScope === "database" && c.fencing) offered.add("fenced-processing");
    if (c.tenantScopes) offered.add("tenant-scoped-readmodels");
  }
  return GUARANTEE_NAMES.filter((g) => offered.has(g));
}

/**
 * The guarantees `stores` give together, in the order of {@link GUARANTEE_NAMES}:
 * what each offers on its side, `atomic-command-record` only when the event
 * repository joins this command store. Asks the repository to join it
 * (`joinCommandStore`), as the facade does: joining the same pair again changes nothing.
 */
export function guaranteesOf(stores: GuaranteeStores): Guarantee[] {
  const held = new Set([
    ...guaranteesOffered("eventRepository", stores.eventRepository),
    ...guaranteesOffered("commandStore", stores.commandStore),
    ...guaranteesOffered("readmodelStoreBackend", stores.readmodelStoreBackend),
  ]);
  if (held.has("atomic-command-record") && !stores.eventRepository.joinCommandStore!(stores.commandStore)) {
    held.delete("atomic-command-record");
  }
  return GUARANTEE_NAMES.filter((g) => held.has(g));
}

/** The stores an engine owns: the three that guarantees rest on, and any of the others. */
export interface EngineStores extends GuaranteeStores {
  readonly logStore?: LogStore;
  readonly snapshotStore?: SnapshotStore;
  readonly keyStore?: KeyStore;
  readonly dataStore?: DataStore;
  readonly cacheStore?: CacheStore;
}

/**
 * An engine: every store of an app in one database (one file, one schema,
 * one process), what it declares it offers (`capabilities`) and the
 * guarantees that follow. Pass it whole: `createFacade({ backend: engine })`;
 * `close()` closes every store and what the engine owns (a file, a pool).
 * Spreading it into createFacade (`...engine`) still works for one release,
 * deprecated.
 */
export type Engine<S extends EngineStores = EngineStores> = S & {
  /** What the engine offers, declared by its factory. */
  readonly capabilities: EngineCapabilities;
  /** What its stores guarantee together, from {@link capabilities} (see {@link guaranteesDeclared}); listed in the Runtime's systemInfo. */
  readonly guarantees: readonly Guarantee[];
  /** Closes every store, then what the engine owns; idempotent. */
  close(): Promise<void>;
};

/** @deprecated The former name of {@link EngineStores}. */
export type BackendStores = EngineStores;
/** @deprecated The former name of {@link Engine}. */
export type Backend<S extends EngineStores = EngineStores> = Engine<S>;

/** The engine each store was made by (a store given alone to createFacade is compared with its engine). */
const engineOfStore = new WeakMap<object, Engine>();

function remember<S extends EngineStores>(engine: Engine<S>, stores: S): Engine<S> {
  for (const store of Object.values(stores)) {
    if (typeof store === "object" && store !== null) engineOfStore.set(store, engine as Engine);
  }
  return engine;
}

/**
 * Makes an engine of `stores` that offers what `capabilities` declares (the
 * engine factories, createSqliteBackends, createPostgresBackends and
 * createMemoryBackends, end with it; so does an engine of your own, in a
 * folder shaped like theirs). Each of the three stores is declared with its
 * part of the capabilities, so nothing asks later which methods it has; the
 * guarantees follow from the declaration.
 */
export function defineEngine<S extends EngineStores>(stores: S, capabilities: EngineCapabilities, close: () => Promise<void>): Engine<S> {
  const c = Object.freeze({ ...capabilities });
  declareCapabilities(stores.eventRepository, c);
  declareCapabilities(stores.commandStore, c);
  declareCapabilities(stores.readmodelStoreBackend, c);
  return remember({ ...stores, capabilities: c, guarantees: Object.freeze(guaranteesDeclared(c)), close }, stores);
}

/**
 * Makes an engine of stores that declare nothing (stores of your own): their
 * capabilities are read once from the optional methods they have, and the
 * guarantees are those they give together ({@link guaranteesOf}). Prefer
 * {@link defineEngine}, which declares them.
 */
export function defineBackend<S extends EngineStores>(stores: S, close: () => Promise<void>): Engine<S> {
  const capabilities: EngineCapabilities = Object.freeze({
    ...eventRepositoryCapabilities(stores.eventRepository),
    ...commandStoreCapabilities(stores.commandStore),
    ...readmodelBackendCapabilities(stores.readmodelStoreBackend),
  });
  return remember({ ...stores, capabilities, guarantees: Object.freeze(guaranteesOf(stores)), close }, stores);
}

/** The engine `store` was made by ({@link defineEngine}, {@link defineBackend}), or undefined. */
export function engineOf(store: object): Engine | undefined {
  return engineOfStore.get(store);
}

/** @deprecated The former name of {@link engineOf}. */
export const backendOf = engineOf;
