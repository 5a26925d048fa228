/**
 * `mneme/postgres`: the Postgres backends (pg), the scale-out engine for many
 * app instances on one database. The only module that loads pg.
 */
export { createPostgresBackends } from "./postgres-backends.js";
export type { PostgresBackends, PostgresBackendsOptions, PostgresConnection } from "./postgres-backends.js";
export { PostgresEventRepository } from "./postgres-event-repository.js";
export type { PostgresEventRepositoryOptions } from "./postgres-event-repository.js";
export { PostgresCommandStore, type PostgresCommandStoreOptions } from "./postgres-command-store.js";
export { PostgresLogStore } from "./postgres-log-store.js";
export { PostgresReadmodelStoreBackend } from "./postgres-readmodel-store-backend.js";
export { PostgresSnapshotStore } from "./postgres-snapshot-store.js";
export { PostgresKeyStore } from "./postgres-key-store.js";
export { PostgresDataStore } from "./postgres-data-store.js";
export { PostgresCacheStore } from "./postgres-cache-store.js";
export type { ExternalAppendListener } from "./postgres-append-watcher.js";
export type { LockLostListener } from "./postgres-readmodel-locks.js";
export type { PostgresStoreOptions } from "./postgres-store-base.js";
export { DEFAULT_POSTGRES_SCHEMA } from "./postgres-schema.js";
export type { PgPool, PgClient, PgClientKind, PgStatement, PgStatementHook } from "./postgres-pool.js";
