/**
 * `mneme/memory`: the stores that need no database: the in-memory stores
 * (what createFacade uses for any store it is not given; one process, gone on
 * exit) and the filesystem DataStore (files in a directory, with any backend).
 */
export { createMemoryBackends, type MemoryBackends } from "./memory-backends.js";
export { MemoryEventRepository } from "./memory-event-repository.js";
export { MemoryCommandStore } from "./memory-command-store.js";
export { MemoryDataStore } from "./memory-data-store.js";
export { MemoryCacheStore } from "./memory-cache-store.js";
export { MemoryLogStore } from "./memory-log-store.js";
export { MemoryReadmodelStoreBackend } from "./memory-readmodel-store-backend.js";
export { MemorySnapshotStore } from "./memory-snapshot-store.js";
export { FilesystemDataStore, type FilesystemDataStoreOptions } from "../store-fs/filesystem-data-store.js";
