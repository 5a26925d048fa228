import type pg from "pg";
import { PG, requireDriver } from "../store/driver.js";
import { MnemeError } from "../model/errors.js";
import { defineEngine, type EngineCapabilities, type Guarantee } from "../store/backend.js";
import { closeStoresOnce } from "../store/close-stores.js";
import type { CommandStore } from "../store/command-store.js";
import type { EventRepository } from "../store/event-repository.js";
import type { KeyStore } from "../store/key-store.js";
import type { LogStore } from "../store/log-store.js";
import type { ReadmodelStoreBackend } from "../store/readmodel-store-backend.js";
import type { SnapshotStore } from "../store/snapshot-store.js";
import { checkRollingFrom, type RollingFrom } from "../store/store-format.js";
import type { CacheStore } from "../store/cache-store.js";
import type { DataStore } from "../store/data-store.js";
import { PostgresCacheStore } from "./postgres-cache-store.js";
import { PostgresCommandStore } from "./postgres-command-store.js";
import { PostgresDataStore } from "./postgres-data-store.js";
import { PostgresEventRepository } from "./postgres-event-repository.js";
import { PostgresEventArchive } from "./postgres-event-archive.js";
import { withArchivedReads } from "../event-archive/archived-reads.js";
import { PostgresFailoverPool } from "./postgres-failover-pool.js";
import { parsePostgresHosts, redactConnectionString } from "./postgres-hosts.js";
import { PostgresKeyStore } from "./postgres-key-store.js";
import { PostgresLogStore } from "./postgres-log-store.js";
import { describeConnection, guardedClientClass, listenForPoolErrors, type PgPool, type PgStatementHook } from "./postgres-pool.js";
import { PostgresReadmodelStoreBackend } from "./postgres-readmodel-store-backend.js";
import { validateSchemaName } from "./postgres-schema.js";
import { PostgresSnapshotStore } from "./postgres-snapshot-store.js";

/** How long one connection attempt to a server of several may take before it counts as down (libpq's connect_timeout overrides). */
const DEFAULT_CONNECT_TIMEOUT_MS = 5000;

/** Where the stores connect: a connection string (a pool is made and ended by close()) or a pool the caller owns. */
export type PostgresConnection =
  { readonly connectionString: string; readonly pool?: never } | { readonly pool: PgPool; readonly connectionString?: never };

/** Options of {@link createPostgresBackends}. */
export interface PostgresBackendsOptions {
  /** The schema holding every table (an identifier; created by init()). Default "mneme". */
  readonly schema?: string;
  /** Size of the pool made from a connection string (at least 4). Default 10. */
  readonly poolSize?: number;
  /** Polling fallback behind LISTEN/NOTIFY of the event repository. Default 500 ms; 0 turns it off. */
  readonly pollIntervalMs?: number;
  /** Group commit of the event repository: appends per statement and transaction, 1..60 (1: off). Default 50. */
  readonly maxAppendsPerCommit?: number;
  /** How claims of idempotent dispatch commit: "durable" (default) or "async" (see PostgresCommandStoreOptions.claimCommit). */
  readonly claimCommit?: "durable" | "async";
  /**
   * Compatibility mode of a rolling deploy from an earlier release (`"0.1.0"`): entered when the schema has no
   * format record yet, so instances of that release keep working beside this one until
   * `facade.finishRollingUpgrade()`; see {@link PostgresStoreOptions.rollingFrom} and docs/upgrading.md.
   */
  readonly rollingFrom?: RollingFrom;
  /**
   * A testing aid for fault injection: awaited before every statement any of
   * the stores sends, with the session's backend pid (see PgStatementHook).
   * Leave it unset in production.
   */
  readonly onStatement?: PgStatementHook;
  /**
   * Where the archive of old events is now, when its directory was moved after `mneme store archive`
   * (the directory given to `--to`). Default: where the store recorded it. See docs/operations.md.
   */
  readonly archiveDirectory?: string;
}

/** The Postgres engine: the stores of one schema, for `createFacade({ backend })`. */
export interface PostgresBackends {
  readonly eventRepository: PostgresEventRepository & EventRepository;
  readonly commandStore: PostgresCommandStore & CommandStore;
  readonly logStore: PostgresLogStore & LogStore;
  readonly readmodelStoreBackend: PostgresReadmodelStoreBackend & ReadmodelStoreBackend;
  /** Aggregate snapshots, in the events' schema. */
  readonly snapshotStore: PostgresSnapshotStore & SnapshotStore;
  /** The keys of personal data (see docs/privacy.md), in the events' schema. */
  readonly keyStore: PostgresKeyStore & KeyStore;
  /** Blobs by key, in the events' schema: durable and shared by the instances on it. */
  readonly dataStore: PostgresDataStore & DataStore;
  /** JSON values with a TTL, in the events' schema (UNLOGGED): shared by the instances on it (the failed-login limit holds across them). */
  readonly cacheStore: PostgresCacheStore & CacheStore;
  /** What the engine offers, declared (see `EngineCapabilities` in mneme/store): every capability, the lease shared by the instances on the database. */
  readonly capabilities: EngineCapabilities;
  /** What these stores guarantee together, from the declared capabilities (see `Guarantee` in mneme/store): all of them. */
  readonly guarantees: readonly Guarantee[];
  /** Closes every store, then ends the pool when it was made here; idempotent. */
  close(): Promise<void>;
}

/**
 * What the Postgres engine offers (see EngineCapabilities): every capability;
 * the processing lease is in the database, shared by every instance on it.
 */
const POSTGRES_CAPABILITIES: EngineCapabilities = {
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
 * Every Postgres store in one schema over one pool: events, commands, logs,
 * readmodels, aggregate snapshots, the keys of personal data, the DataStore's
 * blobs and the CacheStore's entries; many app
 * instances may share the database. Options may be given in the first argument or the second.
 *
 * @example
 * const facade = createFacade({ appName: "todo", version: "1.0.0",
 *   backend: createPostgresBackends({ connectionString: process.env.DATABASE_URL!, schema: "todo" }) });
 */
export function createPostgresBackends(
  connection: PostgresConnection & PostgresBackendsOptions,
  options: PostgresBackendsOptions = {},
): PostgresBackends {
  if (typeof connection !== "object" || connection === null) {
    throw new MnemeError("INVALID_REQUEST", "createPostgresBackends: needs { connectionString } or { pool }");
  }
  const opts = { ...pick(connection), ...pick(options) };
  const schema = validateSchemaName(opts.schema);
  const poolSize = opts.poolSize ?? 10;
  if (!Number.isInteger(poolSize) || poolSize < 4) {
    // Up to three connections are held for long (the LISTEN client, the readmodel lock client, a
    // readmodel transaction), and a restore reads events while its transaction is open.
    throw new MnemeError("INVALID_REQUEST", `createPostgresBackends: poolSize must be an integer >= 4, got ${String(poolSize)}`);
  }
  let pool: PgPool;
  let ownPool: (PgPool & { end(): Promise<void> }) | undefined;
  let connectionInfo: string;
  if (connection.pool !== undefined) {
    if (connection.connectionString !== undefined)
      throw new MnemeError("INVALID_REQUEST", "createPostgresBackends: give connectionString or pool, not both");
    pool = connection.pool;
    connectionInfo = describeConnection(pool, schema);
  } else if (typeof connection.connectionString === "string" && connection.connectionString !== "") {
    ownPool = poolFor(connection.connectionString, poolSize);
    pool = ownPool;
    connectionInfo = describeConnection(connection.connectionString, schema);
  } else {
    throw new MnemeError("INVALID_REQUEST", "createPostgresBackends: needs { connectionString } or { pool }");
  }
  // An idle client that loses its connection emits 'error' on the pool; without a listener that would end the process.
  listenForPoolErrors(pool);
  const shared = {
    pool,
    schema,
    connectionInfo,
    ...(opts.onStatement === undefined ? {} : { onStatement: opts.onStatement }),
    ...(opts.rollingFrom === undefined ? {} : { rollingFrom: checkRollingFrom(opts.rollingFrom, "createPostgresBackends") as RollingFrom }),
  };
  // Archived events are read from their files by the same methods (see src/event-archive/archived-reads.ts).
  const eventRepository = withArchivedReads(
    new PostgresEventRepository({
      ...shared,
      ...(opts.pollIntervalMs === undefined ? {} : { pollIntervalMs: opts.pollIntervalMs }),
      ...(opts.maxAppendsPerCommit === undefined ? {} : { maxAppendsPerCommit: opts.maxAppendsPerCommit }),
    }),
    new PostgresEventArchive(shared),
    { absentPayload: null, ...(opts.archiveDirectory === undefined ? {} : { archiveDirectory: opts.archiveDirectory }) },
  );
  const commandStore = new PostgresCommandStore(opts.claimCommit === undefined ? shared : { ...shared, claimCommit: opts.claimCommit });
  const logStore = new PostgresLogStore(shared);
  const readmodelStoreBackend = new PostgresReadmodelStoreBackend(shared);
  const snapshotStore = new PostgresSnapshotStore(shared);
  const keyStore = new PostgresKeyStore(shared);
  const dataStore = new PostgresDataStore(shared);
  const cacheStore = new PostgresCacheStore(shared);
  const stores = { eventRepository, commandStore, logStore, readmodelStoreBackend, snapshotStore, keyStore, dataStore, cacheStore };
  return defineEngine(
    stores,
    POSTGRES_CAPABILITIES,
    closeStoresOnce(Object.values(stores), () => ownPool?.end()),
  );
}

/**
 * The pool made from a connection string: a plain pg.Pool for one host, a
 * {@link PostgresFailoverPool} (works against the writable server, follows a
 * promotion) for several hosts or `target_session_attrs=read-write`.
 */
function poolFor(connectionString: string, max: number): PgPool & { end(): Promise<void> } {
  const driver = requireDriver<typeof pg>(PG);
  const parsed = parsePostgresHosts(connectionString);
  const connectTimeoutMs = parsed.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS;
  const [only] = parsed.hosts;
  if (!parsed.chooseWritable && only !== undefined) {
    // One host: node-postgres reads the string as it always did (connect_timeout, when given, now bounds the connect).
    const timeout = parsed.connectTimeoutMs === undefined ? {} : { connectionTimeoutMillis: connectTimeoutMs };
    return new driver.Pool({ connectionString: only.connectionString, max, ...timeout, Client: guardedClientClass(driver.Client) });
  }
  const failover = new PostgresFailoverPool({
    hosts: parsed.hosts,
    max,
    connectTimeoutMs,
    driver,
    description: redactConnectionString(connectionString),
  });
  // Structurally a pool: the promise forms of connect() and query() are all mneme calls.
  return failover as unknown as PgPool & { end(): Promise<void> };
}

function pick(o: PostgresBackendsOptions): PostgresBackendsOptions {
  const out: { -readonly [K in keyof PostgresBackendsOptions]: PostgresBackendsOptions[K] } = {};
  if (o.schema !== undefined) out.schema = o.schema;
  if (o.poolSize !== undefined) out.poolSize = o.poolSize;
  if (o.pollIntervalMs !== undefined) out.pollIntervalMs = o.pollIntervalMs;
  if (o.maxAppendsPerCommit !== undefined) out.maxAppendsPerCommit = o.maxAppendsPerCommit;
  if (o.onStatement !== undefined) out.onStatement = o.onStatement;
  if (o.claimCommit !== undefined) out.claimCommit = o.claimCommit;
  if (o.rollingFrom !== undefined) out.rollingFrom = o.rollingFrom;
  if (o.archiveDirectory !== undefined) out.archiveDirectory = o.archiveDirectory;
  return out;
}
