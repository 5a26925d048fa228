/**
 * The Postgres backend's conformance suites for snapshots, keys, data and the
 * cache, on the runtime running this file (Bun, Deno or Node) with the `pg`
 * driver, against the built package: every test in a schema of its own.
 */
import { PostgresCacheStore, PostgresDataStore, PostgresKeyStore, PostgresSnapshotStore } from "mneme/postgres";
import type { CacheStore, DataStore, KeyStore, SnapshotStore } from "mneme/store";
import {
  describeCacheStoreContract,
  describeDataStoreContract,
  describeKeyStoreContract,
  describeSnapshotStoreContract,
} from "mneme/testing";
import { postgresScratch } from "../support/postgres-scratch.js";

const { pool, inSchema } = postgresScratch("mneme_rt_stores");

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
