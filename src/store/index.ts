/**
 * `mneme/store`: the store interfaces and their record types, for writing a
 * backend of your own (run it through the conformance suites of
 * `mneme/testing`) or typing code that talks to a store directly. Applications
 * pick backends from `mneme` (memory), `mneme/sqlite` and `mneme/postgres`.
 */
export type { StoreInfo, StorePage, PageRequest } from "./store-info.js";
export type { EventRepository, AppendOptions, ReadAllOptions, AppendListener } from "./event-repository.js";
export type { CommandStore, CommandRecord, CommandStatus, CommandListOptions, CommandClaim, CommandClaimant } from "./command-store.js";
export type { DataStore, DataEntry, DataEntryInfo } from "./data-store.js";
export type { CacheStore, CacheEntry } from "./cache-store.js";
export type { LogStore, LogEntry, NewLogEntry, LogLevel } from "./log-store.js";
export type { ReadmodelStoreBackend, ReadmodelCollection, ListOptions, CollectionScope } from "./readmodel-store-backend.js";
export type { CollectionIndex, EnsureIndexesOptions } from "./readmodel-indexes.js";
export { normalizeIndexes, collectionIndexName, collectionIndexPrefix } from "./readmodel-indexes.js";
export type { SnapshotStore, SnapshotRecord, NewSnapshotRecord, SnapshotDigestParts } from "./snapshot-store.js";
export { snapshotDigest, snapshotDigestMatches } from "./snapshot-store.js";
export type { KeyStore, SubjectKey, NewSubjectKey } from "./key-store.js";
export type { StorageScrub } from "./storage-scrub.js";
export { jsonSafeProblem, JSON_SAFE_MAX_DEPTH, type JsonSafeProblem } from "./json-safe.js";
export { lockLostError, isLockLostError } from "./lock-fencing.js";
