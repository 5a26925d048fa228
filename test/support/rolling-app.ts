/**
 * The `--app` module test/store/store-rolling-mode.int.test.ts gives `mneme upgrade
 * status|finish`: an app on the Postgres schema named by ROLLING_SCHEMA,
 * started in compatibility mode for 0.1.0 (which only a schema without a
 * format record enters).
 */
import { createFacade, type Facade } from "mneme";
import { createPostgresBackends } from "mneme/postgres";

export default function createApp(): Facade {
  const schema = process.env.ROLLING_SCHEMA;
  if (schema === undefined) throw new Error("ROLLING_SCHEMA is not set");
  const connectionString = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test";
  return createFacade({ appName: "rolling-cli", ...createPostgresBackends({ connectionString, schema, rollingFrom: "0.1.0" }) });
}
