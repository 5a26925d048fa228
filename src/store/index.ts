/**
 * `mneme/store`: the stores one by one: their interfaces and record types, for
 * writing a backend of your own (run it through the conformance suites of
 * `mneme/testing`) or typing code that talks to a store directly. The stores
 * themselves come from `mneme/memory` (in memory, and the filesystem
 * DataStore), `mneme/sqlite` and `mneme/postgres`.
 */
export {
  defineEngine,
  defineBackend,
  engineOf,
  declareCapabilities,
  guaranteesDeclared,
  guaranteesOf,
  guaranteesOffered,
  eventRepositoryCapabilities,
  commandStoreCapabilities,
  readmodelBackendCapabilities,
  GUARANTEES,
  type Engine,
  type EngineStores,
  type EngineCapabilities,
  // The former names, kept for one release.
  // eslint-disable-next-line @typescript-eslint/no-deprecated
  type Backend,
  // eslint-disable-next-line @typescript-eslint/no-deprecated
  type BackendStores,
  type Guarantee,
  type GuaranteeStore,
  type GuaranteeStores,
  type EventRepositoryCapabilities,
  type CommandStoreCapabilities,
  type ReadmodelBackendCapabilities,
} from "./backend.js";
export type { StoreInfo, StorePage, PageRequest } from "./store-info.js";
export type { EventRepository, AppendOptions, ReadAllOptions, AppendListener } from "./event-repository.js";
export type { AppendCondition, TagQueryItem, TaggedRead } from "./event-tags.js";
export type { CommandStore, CommandRecord, CommandStatus, CommandListOptions, CommandClaim, CommandClaimant } from "./command-store.js";
export type { DataStore, DataEntry, DataEntryInfo } from "./data-store.js";
export type { CacheStore, CacheEntry } from "./cache-store.js";
export type { LogStore, LogEntry, NewLogEntry, LogLevel } from "./log-store.js";
export type { ReadmodelStoreBackend, ReadmodelCollection, ListOptions, CollectionScope } from "./readmodel-store-backend.js";
export { supportsSqlTables, type SqlTableAccess, type SqlTableCapable, type SqlDialect, type SqlResult } from "./sql-table-access.js";
export type { CollectionIndex, EnsureIndexesOptions } from "./readmodel-indexes.js";
export { normalizeIndexes, collectionIndexName, collectionIndexPrefix } from "./readmodel-indexes.js";
export type { SnapshotStore, SnapshotRecord, NewSnapshotRecord, SnapshotDigestParts } from "./snapshot-store.js";
export { snapshotDigest, snapshotDigestMatches } from "./snapshot-store.js";
export type { KeyStore, SubjectKey, NewSubjectKey } from "./key-store.js";
export type { StorageScrub } from "./storage-scrub.js";
export { jsonSafeProblem, JSON_SAFE_MAX_DEPTH, type JsonSafeProblem } from "./json-safe.js";
export { lockLostError, isLockLostError } from "./lock-fencing.js";
export { checkPayloadSealing, isSealedEnvelope, jsonEqual, type PayloadSealing } from "./payload-sealing.js";
export {
  STORE_FORMAT,
  STORE_RELEASE,
  LOWEST_WRITER_FORMAT,
  checkStoreFormat,
  releaseOfFormat,
  ROLLING_FROM,
  type RollingFrom,
  type StoreFormatRecord,
  type StoreFormatted,
} from "./store-format.js";
export {
  verifyEventChain,
  chainHash,
  chainText,
  isChained,
  GENESIS_HASH,
  type ChainRow,
  type ChainHead,
  type ChainVerification,
  type ChainedEvents,
  type VerifyChainOptions,
} from "./event-chain.js";
