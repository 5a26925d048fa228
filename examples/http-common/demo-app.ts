/**
 * The demo app every HTTP example serves: the Todo domain plus the built-in
 * domains (accounts, sessions, tenants), with the system-event stream on.
 * In memory by default; MNEME_DB=<file> keeps the data in SQLite.
 *
 *   MNEME_ADMIN_EMAIL / MNEME_ADMIN_PASSWORD   the first administrator
 *   PORT (default 3000, 0 = any free port), HOST (default 127.0.0.1)
 */
import type { AddressInfo } from "node:net";
import { type Facade, createFacade } from "mneme";
import { accountRoutes, registerDefaults } from "mneme/defaults";
import { type HttpHandler, createHttpHandler } from "mneme/http";
import { createSqliteBackends } from "mneme/sqlite";
import { registerTodo } from "../todo/todo-domain.js";

export interface DemoApp {
  facade: Facade;
  handler: HttpHandler;
  systemTenantUuid: string;
}

/** Builds and starts the demo facade: the Todo domain and the built-in domains, with the first administrator. */
export async function startDemoFacade(appName: string): Promise<{ facade: Facade; systemTenantUuid: string }> {
  const db = process.env.MNEME_DB;
  const facade = createFacade({
    appName,
    version: "1.0.0",
    systemEvents: true,
    ...(db ? createSqliteBackends({ filename: db }) : {}),
  });
  const admin = {
    email: process.env.MNEME_ADMIN_EMAIL ?? "admin@example.org",
    password: process.env.MNEME_ADMIN_PASSWORD ?? "change-me-demo-password",
  };
  const { systemTenantUuid } = await registerDefaults(facade, { admin });
  registerTodo(facade);
  await facade.start();
  return { facade, systemTenantUuid };
}

/** Builds, starts and returns the demo facade and its HTTP handler. */
export async function createDemoApp(): Promise<DemoApp> {
  const { facade, systemTenantUuid } = await startDemoFacade("todo-http");
  return { facade, handler: createHttpHandler(facade, { modules: [accountRoutes()] }), systemTenantUuid };
}

/** Where to listen: PORT and HOST from the environment. */
export function listenOptions(): { port: number; host: string } {
  return { port: Number(process.env.PORT ?? 3000), host: process.env.HOST ?? "127.0.0.1" };
}

/** Prints the line the e2e tests (and people) wait for. */
export function announce(protocol: "http" | "https", address: AddressInfo | string | null, app: DemoApp): void {
  const where = typeof address === "object" && address !== null ? `${protocol}://${address.address}:${address.port}` : String(address);
  console.log(`listening on ${where}`);
  console.log(`system tenant ${app.systemTenantUuid}; log in with POST ${where}/api/sessions {"email","password"}`);
}

/** Stops the server and the facade on SIGINT / SIGTERM. */
export function stopOnSignal(close: () => Promise<void>, app: DemoApp): void {
  const stop = async () => {
    await close();
    await app.facade.stop();
    process.exit(0);
  };
  process.once("SIGINT", () => void stop());
  process.once("SIGTERM", () => void stop());
}
