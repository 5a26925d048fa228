/**
 * `mneme privacy check|migrate --app <module>`: the personal-data migration
 * (docs/upgrading.md, "Personal data written before it was declared") run
 * from a shell; `mneme privacy forget --app <module> <subject>`: a subject
 * erased (`facade.forget`, docs/privacy.md). The module is the application's own: its default export is a
 * function that returns its facade, configured (backends, domains,
 * readmodels) and not started. The command starts it as one more instance of
 * the app (its handlers catch up or wait in standby like any instance's),
 * checks or migrates, prints the result as JSON and stops it.
 */
import { userInfo } from "node:os";
import { withStartedApp } from "./load-app.js";

/** What `mneme privacy ...` was asked. */
export interface PrivacyCommand {
  readonly action: "check" | "migrate" | "forget";
  /** The app module (a path; relative to the working directory). */
  readonly app: string;
  readonly dryRun?: boolean;
  readonly batchSize?: number;
  /** forget: the data subject. */
  readonly subject?: string;
}

/** Runs the command; resolves what to print (JSON). */
export function runPrivacyCommand(cmd: PrivacyCommand): Promise<unknown> {
  return withStartedApp(cmd.app, async (facade) => {
    if (cmd.action === "check") return facade.clearPersonalData ?? null;
    // The operator who holds the store erases: the SubjectForgotten event records the tool and the OS user as its actor.
    if (cmd.action === "forget")
      return facade.forget(cmd.subject ?? "", { reqCtx: { attributes: { erasedBy: "mneme privacy forget", osUser: osUser() } } });
    return facade.migratePersonalData({
      ...(cmd.dryRun === true ? { dryRun: true } : {}),
      ...(cmd.batchSize === undefined ? {} : { batchSize: cmd.batchSize }),
    });
  });
}

/** The OS user running the command ("" when the system cannot tell). */
function osUser(): string {
  try {
    return userInfo().username;
  } catch {
    return "";
  }
}
