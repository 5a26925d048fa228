/**
 * The Todo demo on Bun's own server and SQLite (bun:sqlite, no driver package):
 * `bun examples/runtimes/bun-server.ts`. MNEME_DB names the SQLite file
 * (default: in memory), PORT and HOST where to listen (PORT=0: any free port),
 * MNEME_ADMIN_EMAIL / MNEME_ADMIN_PASSWORD the first administrator.
 */
import { createFacade } from "mneme";
import { accountRoutes, registerDefaults } from "mneme/defaults";
import { createHttpHandler } from "mneme/http";
import { createMemoryBackends } from "mneme/memory";
import { createSqliteBackends } from "mneme/sqlite";
import type { Engine } from "mneme/store";
import { registerTodo } from "../todo/todo-domain.js";

/** The part of Bun's global used here (the repository does not install Bun's types). */
declare const Bun: {
  serve(options: { hostname: string; port: number; fetch: (request: Request) => Promise<Response> }): {
    readonly url: URL;
    stop(closeActiveConnections?: boolean): Promise<void>;
  };
};

const db = process.env.MNEME_DB;
const backend: Engine = db ? createSqliteBackends({ filename: db }) : createMemoryBackends(); // bun:sqlite on Bun
const facade = createFacade({ appName: "todo-bun", version: "1.0.0", systemEvents: true, backend });
const admin = {
  email: process.env.MNEME_ADMIN_EMAIL ?? "admin@example.org",
  password: process.env.MNEME_ADMIN_PASSWORD ?? "change-me-demo-password",
};
const { systemTenantUuid } = await registerDefaults(facade, { admin });
registerTodo(facade);
await facade.start();

const handler = createHttpHandler(facade, { modules: [accountRoutes()] });
const server = Bun.serve({ hostname: process.env.HOST ?? "127.0.0.1", port: Number(process.env.PORT ?? 3000), fetch: handler });
console.log(`listening on ${server.url.origin}`);
console.log(`system tenant ${systemTenantUuid}; log in with POST ${server.url.origin}/api/sessions {"email","password"}`);

const stop = async () => {
  await server.stop(true); // true: also ends open event streams
  await facade.stop();
  console.log("stopped");
  process.exit(0);
};
process.once("SIGINT", () => void stop());
process.once("SIGTERM", () => void stop());
