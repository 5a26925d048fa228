/**
 * The Postgres backend's conformance suites, on the runtime running this file
 * (Bun, Deno or Node) with the `pg` driver, against the built package: every
 * test in a schema of its own (DATABASE_URL, default
 * postgres://postgres@127.0.0.1:5432/test).
 */
import {
  PostgresCacheStore,
  PostgresCommandStore,
  PostgresDataStore,
  PostgresEventRepository,
  PostgresKeyStore,
  PostgresLogStore,
  PostgresReadmodelStoreBackend,
  PostgresSnapshotStore,
} from "mneme/postgres";
import type {
  CacheStore,
  CommandStore,
  DataStore,
  EventRepository,
  KeyStore,
  LogStore,
  ReadmodelStoreBackend,
  SnapshotStore,
} from "mneme/store";
import {
  describeCacheStoreContract,
  describeCommandStoreContract,
  describeDataStoreContract,
  describeEventRepositoryContract,
  describeKeyStoreContract,
  describeLogStoreContract,
  describeReadmodelStoreBackendContract,
  describeSnapshotStoreContract,
  describeSqlTableAccessContract,
} from "mneme/testing";
import { postgresScratch } from "../support/postgres-scratch.js";
import { DENO_JSON_PARSE_SKIP } from "./known-issues.js";

const { pool, newSchema, inSchema } = postgresScratch("mneme_rt");

{
  const c = inSchema<EventRepository>((schema) => new PostgresEventRepository({ pool, schema }));
  describeEventRepositoryContract("PostgresEventRepository", c.factory, { ...c.opts, skip: DENO_JSON_PARSE_SKIP });
}
{
  const c = inSchema<CommandStore>((schema) => new PostgresCommandStore({ pool, schema }));
  describeCommandStoreContract("PostgresCommandStore", c.factory, c.opts);
}
{
  const c = inSchema<LogStore>((schema) => new PostgresLogStore({ pool, schema }));
  describeLogStoreContract("PostgresLogStore", c.factory, c.opts);
}
{
  const c = inSchema<ReadmodelStoreBackend>((schema) => new PostgresReadmodelStoreBackend({ pool, schema }));
  describeReadmodelStoreBackendContract("PostgresReadmodelStoreBackend", c.factory, c.opts);
}
// Its schemas are dropped at the end of the file (the suite closes each store).
describeSqlTableAccessContract(
  "PostgresReadmodelStoreBackend",
  async () => new PostgresReadmodelStoreBackend({ pool, schema: newSchema() }),
);
{
  const c = inSchema<SnapshotStore>((schema) => new PostgresSnapshotStore({ pool, schema }));
  describeSnapshotStoreContract("PostgresSnapshotStore", c.factory, c.opts);
}
{
  const c = inSchema<KeyStore>((schema) => new PostgresKeyStore({ pool, schema }));
  describeKeyStoreContract("PostgresKeyStore", c.factory, c.opts);
}
{
  const c = inSchema<DataStore>((schema) => new PostgresDataStore({ pool, schema }));
  describeDataStoreContract("PostgresDataStore", c.factory, c.opts);
}
{
  const c = inSchema<CacheStore>((schema) => new PostgresCacheStore({ pool, schema }));
  describeCacheStoreContract("PostgresCacheStore", c.factory, c.opts);
}
