import { MnemeError } from "../model/errors.js";
import { defineEngine, type EngineCapabilities, type Guarantee } from "../store/backend.js";
import { closeStoresOnce } from "../store/close-stores.js";
import type { CommandStore } from "../store/command-store.js";
import type { EventRepository } from "../store/event-repository.js";
import type { KeyStore } from "../store/key-store.js";
import type { LogStore } from "../store/log-store.js";
import type { ReadmodelStoreBackend } from "../store/readmodel-store-backend.js";
import type { SnapshotStore } from "../store/snapshot-store.js";
import type { CacheStore } from "../store/cache-store.js";
import type { DataStore } from "../store/data-store.js";
import { SqliteCacheStore } from "./sqlite-cache-store.js";
import { SqliteCommandStore } from "./sqlite-command-store.js";
import { SqliteDataStore } from "./sqlite-data-store.js";
import { SqliteDatabase, type SqliteOpenOptions, validateTablePrefix } from "./sqlite-database.js";
import type { SqliteDatabaseObject } from "./sqlite-driver.js";
import { SqliteEventRepository } from "./sqlite-event-repository.js";
import { SqliteEventArchive } from "./sqlite-event-archive.js";
import { withArchivedReads } from "../event-archive/archived-reads.js";
import { SqliteKeyStore } from "./sqlite-key-store.js";
import { SqliteLogStore } from "./sqlite-log-store.js";
import { SqliteReadmodelStoreBackend } from "./sqlite-readmodel-store-backend.js";
import { SqliteSnapshotStore } from "./sqlite-snapshot-store.js";

/**
 * Options of {@link createSqliteBackends}: a file to open (with `driver`, or
 * the default driver), or a database the caller opened and owns (and closes):
 * a better-sqlite3 `Database`, a node:sqlite `DatabaseSync` or a bun:sqlite `Database`.
 */
export type SqliteBackendsOptions = (
  { readonly filename: string; readonly database?: never } | { readonly database: SqliteDatabaseObject; readonly filename?: never }
) &
  SqliteOpenOptions & {
    /** Prepended to every table name. Default "mneme_". */
    readonly tablePrefix?: string;
    /** How often the event repository looks for appends by other processes on the file (ms). Default 250; 0 turns it off. */
    readonly pollIntervalMs?: number;
    /** Lease of a readmodel's processing lock (ms), renewed every third of it. Default 5000. */
    readonly lockLeaseMs?: number;
    /**
     * Where the archive of old events is now, when its directory was moved after `mneme store archive`
     * (the directory given to `--to`). Default: where the store recorded it. See docs/operations.md.
     */
    readonly archiveDirectory?: string;
  };

/** The SQLite engine: the stores of one database file, for `createFacade({ backend })`. */
export interface SqliteBackends {
  readonly eventRepository: SqliteEventRepository & EventRepository;
  readonly commandStore: SqliteCommandStore & CommandStore;
  readonly logStore: SqliteLogStore & LogStore;
  readonly readmodelStoreBackend: SqliteReadmodelStoreBackend & ReadmodelStoreBackend;
  /** Aggregate snapshots, in the events' file. */
  readonly snapshotStore: SqliteSnapshotStore & SnapshotStore;
  /** The keys of personal data (see docs/privacy.md), in the events' file. */
  readonly keyStore: SqliteKeyStore & KeyStore;
  /** Blobs by key, in the events' file: durable and shared by the instances on it. */
  readonly dataStore: SqliteDataStore & DataStore;
  /** JSON values with a TTL, in the events' file: shared by the instances on it (the failed-login limit holds across them and restarts). */
  readonly cacheStore: SqliteCacheStore & CacheStore;
  /** What the engine offers, declared (see `EngineCapabilities` in mneme/store): every capability, the lease shared by the instances on the database. */
  readonly capabilities: EngineCapabilities;
  /** What these stores guarantee together, from the declared capabilities (see `Guarantee` in mneme/store): all of them. */
  readonly guarantees: readonly Guarantee[];
  /** Closes every store and then the file (when opened from `filename`); idempotent. */
  close(): Promise<void>;
}

/**
 * What the SQLite engine offers (see EngineCapabilities): every capability;
 * the processing lease is in the database, shared by every instance on it.
 */
const SQLITE_CAPABILITIES: EngineCapabilities = {
  joinsCommandStore: true,
  loadEvents: true,
  externalAppends: true,
  appendListeners: true,
  claims: true,
  replaceCollections: true,
  indexes: true,
  locks: true,
  leaseScope: "database",
  fencing: true,
  lockLossNotice: true,
  lockHolder: true,
  tenantScopes: true,
};

/**
 * Every SQLite store over one shared connection: one file holds events,
 * commands, logs, readmodels, aggregate snapshots, the keys of personal
 * data, the DataStore's blobs and the CacheStore's entries. The connection closes when the last store is closed (e.g. by
 * `facade.stop()`), or with `close()`.
 *
 * Several processes (or several calls of this in one process) may share the
 * file: each is one instance that sees the others' appends within
 * `pollIntervalMs`, and each SQLite-kept readmodel runs on one instance at a
 * time (a lease of `lockLeaseMs`); see docs/scaling.md.
 *
 * The file is opened by `driver`: "better-sqlite3", "node:sqlite" or
 * "bun:sqlite" (default: bun:sqlite on Bun, else better-sqlite3 where it is
 * installed, else node:sqlite); instances on different drivers share a file.
 *
 * @example
 * const facade = createFacade({ appName: "todo", version: "1.0.0", backend: createSqliteBackends({ filename: "todo.db" }) });
 * const noPackage = createSqliteBackends({ filename: "todo.db", driver: "node:sqlite" });
 */
export function createSqliteBackends(opts: SqliteBackendsOptions): SqliteBackends {
  if (typeof opts !== "object" || opts === null) throw new MnemeError("INVALID_REQUEST", "createSqliteBackends: options are required");
  const tablePrefix = validateTablePrefix(opts.tablePrefix);
  const connection =
    opts.database !== undefined
      ? SqliteDatabase.wrap(opts.database, opts.driver)
      : SqliteDatabase.open(opts.filename, {
          ...(opts.busyTimeoutMs === undefined ? {} : { busyTimeoutMs: opts.busyTimeoutMs }),
          ...(opts.driver === undefined ? {} : { driver: opts.driver }),
        });
  const shared = { connection, tablePrefix };
  let eventRepository: SqliteEventRepository;
  let readmodelStoreBackend: SqliteReadmodelStoreBackend;
  try {
    // Archived events are read from their files by the same methods (see src/event-archive/archived-reads.ts).
    eventRepository = withArchivedReads(
      new SqliteEventRepository(opts.pollIntervalMs === undefined ? shared : { ...shared, pollIntervalMs: opts.pollIntervalMs }),
      new SqliteEventArchive(shared),
      { absentPayload: undefined, ...(opts.archiveDirectory === undefined ? {} : { archiveDirectory: opts.archiveDirectory }) },
    );
    readmodelStoreBackend = new SqliteReadmodelStoreBackend(
      opts.lockLeaseMs === undefined ? shared : { ...shared, lockLeaseMs: opts.lockLeaseMs },
    );
  } catch (e) {
    connection.close();
    throw e;
  }
  const commandStore = new SqliteCommandStore(shared);
  const logStore = new SqliteLogStore(shared);
  const snapshotStore = new SqliteSnapshotStore(shared);
  const keyStore = new SqliteKeyStore(shared);
  const dataStore = new SqliteDataStore(shared);
  const cacheStore = new SqliteCacheStore(shared);
  const stores = { eventRepository, commandStore, logStore, readmodelStoreBackend, snapshotStore, keyStore, dataStore, cacheStore };
  return defineEngine(
    stores,
    SQLITE_CAPABILITIES,
    closeStoresOnce(Object.values(stores), () => connection.close()),
  );
}
