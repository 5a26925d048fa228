/**
 * The Todo demo on Deno's own server:
 * `deno run --allow-net --allow-env --allow-read --allow-write --allow-sys examples/runtimes/deno-server.ts`
 * (in an app of your own, `npm:mneme` specifiers or a package.json). MNEME_DB
 * names a SQLite file (node:sqlite, built into Deno; default: in memory),
 * DATABASE_URL a Postgres instead, PORT and HOST where to listen (PORT=0: any
 * free port), MNEME_ADMIN_EMAIL / MNEME_ADMIN_PASSWORD the first administrator.
 */
import { createFacade } from "mneme";
import { accountRoutes, registerDefaults } from "mneme/defaults";
import { createHttpHandler } from "mneme/http";
import { createMemoryBackends } from "mneme/memory";
import { createPostgresBackends } from "mneme/postgres";
import { createSqliteBackends } from "mneme/sqlite";
import type { Engine } from "mneme/store";
import { registerTodo } from "../todo/todo-domain.js";

/** The part of Deno's global used here (the repository does not install Deno's types). */
declare const Deno: {
  env: { get(name: string): string | undefined };
  serve(
    options: { hostname: string; port: number; onListen?: (addr: { hostname: string; port: number }) => void },
    handler: (request: Request) => Promise<Response>,
  ): { shutdown(): Promise<void> };
  addSignalListener(signal: "SIGINT" | "SIGTERM", handler: () => void): void;
  exit(code: number): never;
};

function backendOf(): Engine {
  const url = Deno.env.get("DATABASE_URL");
  const db = Deno.env.get("MNEME_DB");
  if (url) return createPostgresBackends({ connectionString: url, schema: Deno.env.get("MNEME_SCHEMA") ?? "todo_deno" });
  return db ? createSqliteBackends({ filename: db, driver: "node:sqlite" }) : createMemoryBackends();
}

const facade = createFacade({ appName: "todo-deno", version: "1.0.0", systemEvents: true, backend: backendOf() });
const admin = {
  email: Deno.env.get("MNEME_ADMIN_EMAIL") ?? "admin@example.org",
  password: Deno.env.get("MNEME_ADMIN_PASSWORD") ?? "change-me-demo-password",
};
const { systemTenantUuid } = await registerDefaults(facade, { admin });
registerTodo(facade);
await facade.start();

const handler = createHttpHandler(facade, { modules: [accountRoutes()] });
const server = Deno.serve(
  {
    hostname: Deno.env.get("HOST") ?? "127.0.0.1",
    port: Number(Deno.env.get("PORT") ?? 3000),
    onListen: ({ hostname, port }) => {
      console.log(`listening on http://${hostname}:${port}`);
      console.log(`system tenant ${systemTenantUuid}; log in with POST http://${hostname}:${port}/api/sessions {"email","password"}`);
    },
  },
  handler,
);

const stop = async () => {
  await server.shutdown();
  await facade.stop();
  console.log("stopped");
  Deno.exit(0);
};
Deno.addSignalListener("SIGINT", () => void stop());
Deno.addSignalListener("SIGTERM", () => void stop());
