/**
 * `mneme/sqlite`: the SQLite backends, the embedded durable default, on
 * better-sqlite3, node:sqlite or bun:sqlite. The only module that loads a
 * SQLite driver.
 */
export { createSqliteBackends } from "./sqlite-backends.js";
export type { SqliteBackends, SqliteBackendsOptions } from "./sqlite-backends.js";
export { SqliteEventRepository } from "./sqlite-event-repository.js";
export type { SqliteEventRepositoryOptions } from "./sqlite-event-repository.js";
export type { SqliteExternalAppendListener } from "./sqlite-append-watcher.js";
export { SqliteCommandStore } from "./sqlite-command-store.js";
export { SqliteLogStore } from "./sqlite-log-store.js";
export { SqliteReadmodelStoreBackend } from "./sqlite-readmodel-store-backend.js";
export { SqliteSnapshotStore } from "./sqlite-snapshot-store.js";
export { SqliteKeyStore } from "./sqlite-key-store.js";
export { SqliteDataStore } from "./sqlite-data-store.js";
export { SqliteCacheStore } from "./sqlite-cache-store.js";
export type { SqliteReadmodelStoreBackendOptions } from "./sqlite-readmodel-store-backend.js";
export type { SqliteLockLostListener } from "./sqlite-lease-locks.js";
export { SqliteDatabase, DEFAULT_TABLE_PREFIX } from "./sqlite-database.js";
export type { SqliteConnectionOption, SqliteOpenOptions, SqliteStoreOptions } from "./sqlite-database.js";
export type {
  BunSqliteDatabaseLike,
  NodeSqliteDatabaseLike,
  SqliteDatabaseObject,
  SqliteDriverDatabase,
  SqliteDriverName,
  SqliteDriverStatement,
  SqliteEngineDriver,
  SqliteEngineStatement,
} from "./sqlite-driver.js";
