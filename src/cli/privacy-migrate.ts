/**
 * `mneme privacy check|migrate --app <module>`: the personal-data migration
 * (docs/upgrading.md, "Personal data written before it was declared") run
 * from a shell. The module is the application's own: its default export is a
 * function that returns its facade, configured (backends, domains,
 * readmodels) and not started. The command starts it as one more instance of
 * the app (its handlers catch up or wait in standby like any instance's),
 * checks or migrates, prints the result as JSON and stops it.
 */
import { withStartedApp } from "./load-app.js";

/** What `mneme privacy ...` was asked. */
export interface PrivacyCommand {
  readonly action: "check" | "migrate";
  /** The app module (a path; relative to the working directory). */
  readonly app: string;
  readonly dryRun?: boolean;
  readonly batchSize?: number;
}

/** Runs the command; resolves what to print (JSON). */
export function runPrivacyCommand(cmd: PrivacyCommand): Promise<unknown> {
  return withStartedApp(cmd.app, async (facade) => {
    if (cmd.action === "check") return facade.clearPersonalData ?? null;
    return facade.migratePersonalData({
      ...(cmd.dryRun === true ? { dryRun: true } : {}),
      ...(cmd.batchSize === undefined ? {} : { batchSize: cmd.batchSize }),
    });
  });
}
