/**
 * A backend as one object that declares what it guarantees. The guarantees
 * are derived from what its stores really implement (their optional methods
 * and flags), never asserted beside them, so a backend cannot claim what it
 * does not do; `createFacade` compares them with the stores it is given and
 * refuses a mix that would lose one (see docs/architecture.md, "Backends and
 * their guarantees").
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

/** What one event repository implements of the optional methods. */
export interface EventRepositoryCapabilities {
  readonly joinsCommandStore: boolean;
  readonly loadEvents: boolean;
  readonly externalAppends: boolean;
  readonly appendListeners: boolean;
}

/** What one command store implements of the optional methods. */
export interface CommandStoreCapabilities {
  /** claim, renewClaim and releaseClaim (a store offering some but not all is refused with INVALID_REQUEST). */
  readonly claims: boolean;
}

/** What one readmodel backend implements of the optional methods. */
export interface ReadmodelBackendCapabilities {
  readonly replaceCollections: boolean;
  /** tryLock and unlock. */
  readonly locks: boolean;
  /** fencingToken and checkFencingToken, with locks. */
  readonly fencing: boolean;
  /** onLockLost, with locks. */
  readonly lockLossNotice: boolean;
  /** lockHolder, with locks. */
  readonly lockHolder: boolean;
  readonly tenantScopes: boolean;
}

function has(o: object, method: string): boolean {
  return typeof (o as Record<string, unknown>)[method] === "function";
}

/** The optional methods `repo` implements. */
export function eventRepositoryCapabilities(repo: EventRepository): EventRepositoryCapabilities {
  return {
    joinsCommandStore: has(repo, "joinCommandStore"),
    loadEvents: has(repo, "loadEvents"),
    externalAppends: has(repo, "onExternalAppend"),
    appendListeners: has(repo, "onAppend"),
  };
}

/** Whether `store` offers claims; INVALID_REQUEST when it offers some of the three methods but not all. */
export function commandStoreCapabilities(store: CommandStore): CommandStoreCapabilities {
  const offered = ["claim", "renewClaim", "releaseClaim"].filter((m) => has(store, m)).length;
  if (offered !== 0 && offered !== 3) {
    throw new MnemeError(
      "INVALID_REQUEST",
      "the command store offers some of claim, renewClaim and releaseClaim but not all three: offer all (exactly-once dispatch across instances) or none",
    );
  }
  return { claims: offered === 3 };
}

/** The optional methods and flags `backend` implements. */
export function readmodelBackendCapabilities(backend: ReadmodelStoreBackend): ReadmodelBackendCapabilities {
  const locks = has(backend, "tryLock") && has(backend, "unlock");
  return {
    replaceCollections: has(backend, "replaceCollections"),
    locks,
    fencing: locks && has(backend, "fencingToken") && has(backend, "checkFencingToken"),
    lockLossNotice: locks && has(backend, "onLockLost"),
    lockHolder: locks && has(backend, "lockHolder"),
    tenantScopes: backend.tenantScopes === true,
  };
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
    if (c.locks) offered.add("single-processor");
    if (c.fencing) offered.add("fenced-processing");
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

/** The stores a backend bundles: the three that guarantees rest on, and any of the others. */
export interface BackendStores extends GuaranteeStores {
  readonly logStore?: LogStore;
  readonly snapshotStore?: SnapshotStore;
  readonly keyStore?: KeyStore;
  readonly dataStore?: DataStore;
  readonly cacheStore?: CacheStore;
}

/**
 * A backend: stores that belong together (one file, one schema, one process)
 * and the guarantees they give together, derived from what they implement.
 * Spread it into `createFacade` or pass it as `backend`; `close()` closes
 * every store and what the backend owns (a file, a pool).
 */
export type Backend<S extends BackendStores = BackendStores> = S & {
  /** What the stores guarantee together (derived by {@link guaranteesOf}), e.g. for `createFacade` and the Runtime's systemInfo. */
  readonly guarantees: readonly Guarantee[];
  /** Closes every store, then what the backend owns; idempotent. */
  close(): Promise<void>;
};

/** The backend each store was made by (a store given alone to createFacade is compared with its backend). */
const backendOfStore = new WeakMap<object, Backend>();

/**
 * Makes a backend of `stores`: derives its guarantees from them and
 * remembers, for each store, the backend it belongs to. Backend factories
 * (createSqliteBackends, createPostgresBackends, createMemoryBackends, or one
 * of your own) end with it.
 */
export function defineBackend<S extends BackendStores>(stores: S, close: () => Promise<void>): Backend<S> {
  const backend: Backend<S> = { ...stores, guarantees: Object.freeze(guaranteesOf(stores)), close };
  for (const store of Object.values(stores)) {
    if (typeof store === "object" && store !== null) backendOfStore.set(store, backend as Backend);
  }
  return backend;
}

/** The backend `store` was made by with {@link defineBackend}, or undefined. */
export function backendOf(store: object): Backend | undefined {
  return backendOfStore.get(store);
}
