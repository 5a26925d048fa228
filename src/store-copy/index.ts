/**
 * `mneme/store-copy`: copies a whole store between SQLite and Postgres and
 * verifies it (counts and a digest per table): the way from the embedded
 * default to Postgres, and the library behind `mneme store copy`. Loads
 * better-sqlite3 and pg only for the sides a copy names.
 */
export { copyStore } from "./copy-store.js";
export type { CopyProgress, CopyStoreOptions, CopyStoreReport, CopyTableReport, StoreLocation } from "./copy-store.js";
export type { TableDigest } from "./copy-digest.js";
export type { SqliteCopyLocation } from "./sqlite-copy-endpoint.js";
export type { PostgresCopyLocation } from "./postgres-copy-endpoint.js";
export { verifyStore } from "./store-verify.js";
export type { VerifyStoreOptions, VerifyStoreReport } from "./store-verify.js";
export { archiveStore, restoreStoreArchive } from "./store-archive.js";
export type {
  ArchiveEventsOptions,
  ArchiveEventsReport,
  RestoreEventsOptions,
  RestoreEventsReport,
} from "../event-archive/archive-events.js";
