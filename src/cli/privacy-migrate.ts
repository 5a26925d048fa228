/**
 * `mneme privacy check|migrate --app <module>`: the personal-data migration
 * (docs/upgrading.md, "Personal data written before it was declared") run
 * from a shell. The module is the application's own: its default export is a
 * function that returns its facade, configured (backends, domains,
 * readmodels) and not started. The command starts it as one more instance of
 * the app (its handlers catch up or wait in standby like any instance's),
 * checks or migrates, prints the result as JSON and stops it.
 */
import { resolve } from "node:path";
import { pathToFileURL } from "node:url";
import type { Facade } from "../app/facade.js";
import { MnemeError } from "../model/errors.js";

/** What `mneme privacy ...` was asked. */
export interface PrivacyCommand {
  readonly action: "check" | "migrate";
  /** The app module (a path; relative to the working directory). */
  readonly app: string;
  readonly dryRun?: boolean;
  readonly batchSize?: number;
}

/** The facade the app module makes: its default export (or `createApp`), called with no argument. */
async function loadApp(app: string): Promise<Facade> {
  const mod = (await import(pathToFileURL(resolve(app)).href)) as { default?: unknown; createApp?: unknown };
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

/** Runs the command; resolves what to print (JSON). */
export async function runPrivacyCommand(cmd: PrivacyCommand): Promise<unknown> {
  const facade = await loadApp(cmd.app);
  await facade.start();
  try {
    if (cmd.action === "check") return facade.clearPersonalData ?? null;
    return await facade.migratePersonalData({
      ...(cmd.dryRun === true ? { dryRun: true } : {}),
      ...(cmd.batchSize === undefined ? {} : { batchSize: cmd.batchSize }),
    });
  } finally {
    await facade.stop();
  }
}
