/**
 * The Postgres backend's conformance suites for events, commands, logs and
 * readmodels, on the runtime running this file (Bun, Deno or Node) with the
 * `pg` driver, against the built package: every test in a schema of its own
 * (DATABASE_URL, default postgres://postgres@127.0.0.1:5432/test). The other
 * stores' suites are in postgres-store-contracts.test.ts (the two files run
 * in parallel).
 */
import {
  PostgresCommandStore,
  PostgresEventRepository,
  PostgresLogStore,
  PostgresReadmodelStoreBackend,
  createPostgresBackends,
} from "mneme/postgres";
import type { CommandStore, EventRepository, LogStore, ReadmodelStoreBackend } from "mneme/store";
import {
  describeCommandStoreContract,
  describeEventRepositoryContract,
  describeLogStoreContract,
  describeReadmodelStoreBackendContract,
  describeSqlTableAccessContract,
} from "mneme/testing";
import { postgresScratch } from "../support/postgres-scratch.js";
import { JSON_PARSE_KEY_SKIP } from "./known-issues.js";

const { pool, newSchema, inSchema } = postgresScratch("mneme_rt");

{
  const c = inSchema<EventRepository>((schema) => new PostgresEventRepository({ pool, schema }));
  describeEventRepositoryContract("PostgresEventRepository", c.factory, { ...c.opts, skip: JSON_PARSE_KEY_SKIP });
}
{
  // Through createPostgresBackends, whose stores share one pool and schema; the others are closed at once.
  const c = inSchema<EventRepository>((schema) => {
    const b = createPostgresBackends({ pool, schema });
    for (const s of [b.commandStore, b.logStore, b.readmodelStoreBackend, b.snapshotStore, b.keyStore, b.dataStore, b.cacheStore])
      void s.close();
    return b.eventRepository;
  });
  describeEventRepositoryContract("createPostgresBackends().eventRepository", c.factory, { ...c.opts, skip: JSON_PARSE_KEY_SKIP });
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
