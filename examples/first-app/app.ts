/**
 * The app module: its default export returns the facade, configured and not
 * started. The server starts it; `mneme seed --app app.ts` and the other
 * `mneme` commands start it as one more instance.
 */
import { createFacade, type Facade } from "mneme";
import { registerDefaults } from "mneme/defaults";
import { createPostgresBackends } from "mneme/postgres";
import { registerHelpdesk } from "./helpdesk.js";

export default async function createApp(): Promise<Facade> {
  const facade = createFacade({
    appName: "helpdesk",
    backend: createPostgresBackends({
      connectionString: process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/helpdesk",
      schema: process.env.HELPDESK_SCHEMA ?? "helpdesk",
    }),
  });
  registerHelpdesk(facade);
  await registerDefaults(facade, {
    admin: { email: process.env.ADMIN_EMAIL ?? "admin@example.org", password: requiredEnv("ADMIN_PASSWORD") },
    // One secret for every instance: a session opened on one is valid on the others.
    sessionSecret: requiredEnv("SESSION_SECRET"),
  });
  return facade;
}

function requiredEnv(name: string): string {
  const value = process.env[name];
  if (value === undefined || value === "") throw new Error(`set ${name}`);
  return value;
}
