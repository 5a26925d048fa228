import { defineEngine, type Engine, type EngineCapabilities } from "../store/backend.js";
import { closeStoresOnce } from "../store/close-stores.js";
import { MemoryCacheStore } from "./memory-cache-store.js";
import { MemoryCommandStore } from "./memory-command-store.js";
import { MemoryDataStore } from "./memory-data-store.js";
import { MemoryEventRepository } from "./memory-event-repository.js";
import { MemoryKeyStore } from "./memory-key-store.js";
import { MemoryLogStore } from "./memory-log-store.js";
import { MemoryReadmodelStoreBackend } from "./memory-readmodel-store-backend.js";
import { MemorySnapshotStore } from "./memory-snapshot-store.js";

/** The in-memory engine: the stores of one process (what `createFacade` uses for every store it is not given). */
export type MemoryBackends = Engine<{
  readonly eventRepository: MemoryEventRepository;
  readonly commandStore: MemoryCommandStore;
  readonly readmodelStoreBackend: MemoryReadmodelStoreBackend;
  readonly logStore: MemoryLogStore;
  readonly snapshotStore: MemorySnapshotStore;
  readonly keyStore: MemoryKeyStore;
  readonly dataStore: MemoryDataStore;
  readonly cacheStore: MemoryCacheStore;
}>;

/** What the in-memory engine offers (see EngineCapabilities). */
const MEMORY_CAPABILITIES: EngineCapabilities = {
  joinsCommandStore: false,
  loadEvents: true,
  externalAppends: false,
  appendListeners: true,
  claims: true,
  replaceCollections: true,
  indexes: true,
  locks: true,
  leaseScope: "process",
  fencing: true,
  lockLossNotice: true,
  lockHolder: true,
  tenantScopes: true,
};

/**
 * The in-memory engine: every store in this process. Nothing outlives the
 * process, and only facades of this process (given the same engine) share
 * it. It declares what one process can keep: claims, an in-process
 * processing lease with fencing tokens, blue-green rebuilds and tenant
 * scopes, but no appends from elsewhere and no lease across processes (so
 * not the single-processor guarantee); tests and examples use it, or pass
 * nothing to `createFacade`.
 *
 * @example
 * const backend = createMemoryBackends();
 * const writer = createFacade({ backend });
 * const reader = createFacade({ backend }); // sees the writer's events
 */
export function createMemoryBackends(): MemoryBackends {
  const stores = {
    eventRepository: new MemoryEventRepository(),
    commandStore: new MemoryCommandStore(),
    readmodelStoreBackend: new MemoryReadmodelStoreBackend(),
    logStore: new MemoryLogStore(),
    snapshotStore: new MemorySnapshotStore(),
    keyStore: new MemoryKeyStore(),
    dataStore: new MemoryDataStore(),
    cacheStore: new MemoryCacheStore(),
  };
  return defineEngine(
    stores,
    MEMORY_CAPABILITIES,
    closeStoresOnce(Object.values(stores), () => undefined),
  );
}
