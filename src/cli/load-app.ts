/**
 * The application module a CLI command runs (`--app <module>`): its default
 * export (or `createApp`) is a function that returns the app's facade,
 * configured (backends, domains, readmodels) and not started.
 */
import { resolve } from "node:path";
import { pathToFileURL } from "node:url";
import type { Facade } from "../app/facade.js";
import { MnemeError } from "../model/errors.js";

/** The facade the app module makes: its default export (or `createApp`), called with no argument. */
export async function loadApp(app: string): Promise<Facade> {
  return (await loadAppModule(app)).facade;
}

/** The app module's exports, and the facade its default export (or `createApp`) makes. */
export async function loadAppModule(app: string): Promise<{ facade: Facade; exports: Readonly<Record<string, unknown>> }> {
  const mod = (await import(pathToFileURL(resolve(app)).href)) as { default?: unknown; createApp?: unknown };
  return { facade: await makeFacade(app, mod), exports: mod as Record<string, unknown> };
}

async function makeFacade(app: string, mod: { default?: unknown; createApp?: unknown }): Promise<Facade> {
  const make = mod.default ?? mod.createApp;
  if (typeof make !== "function") {
    throw new MnemeError("INVALID_REQUEST", `${app}: its default export must be a function that returns the app's facade (not started)`);
  }
  const facade = (await (make as () => unknown)()) as Facade;
  if (typeof facade?.migratePersonalData !== "function" || typeof facade.start !== "function") {
    throw new MnemeError("INVALID_REQUEST", `${app}: its default export did not return a facade`);
  }
  return facade;
}

/** Starts the app as one more instance, runs `work` on it, and stops it whatever happens. */
export async function withStartedApp<T>(app: string, work: (facade: Facade) => Promise<T>): Promise<T> {
  const facade = await loadApp(app);
  await facade.start();
  try {
    return await work(facade);
  } finally {
    await facade.stop();
  }
}
