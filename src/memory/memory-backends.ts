import { defineBackend, type Backend } from "../store/backend.js";
import { closeStoresOnce } from "../store/close-stores.js";
import { MemoryCacheStore } from "./memory-cache-store.js";
import { MemoryCommandStore } from "./memory-command-store.js";
import { MemoryDataStore } from "./memory-data-store.js";
import { MemoryEventRepository } from "./memory-event-repository.js";
import { MemoryKeyStore } from "./memory-key-store.js";
import { MemoryLogStore } from "./memory-log-store.js";
import { MemoryReadmodelStoreBackend } from "./memory-readmodel-store-backend.js";
import { MemorySnapshotStore } from "./memory-snapshot-store.js";

/** The in-memory stores of one process, as one backend (what `createFacade` uses for every store it is not given). */
export type MemoryBackends = Backend<{
  readonly eventRepository: MemoryEventRepository;
  readonly commandStore: MemoryCommandStore;
  readonly readmodelStoreBackend: MemoryReadmodelStoreBackend;
  readonly logStore: MemoryLogStore;
  readonly snapshotStore: MemorySnapshotStore;
  readonly keyStore: MemoryKeyStore;
  readonly dataStore: MemoryDataStore;
  readonly cacheStore: MemoryCacheStore;
}>;

/**
 * Every in-memory store, as one backend: nothing outlives the process, and
 * only facades of this process (given the same backend) share it. Its
 * guarantees are those of one process (no locks, no fencing, no appends from
 * elsewhere); tests and examples use it, or pass nothing to `createFacade`.
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
  return defineBackend(
    stores,
    closeStoresOnce(Object.values(stores), () => undefined),
  );
}
