/**
 * `mneme store retention --app <module> [--dry-run] [--batch-size <n>]`: a
 * retention run (`facade.applyRetention`, docs/operations.md "Retention")
 * from a shell. The module is the application's own: its default export
 * returns its facade, configured and not started. The command starts it as
 * one more instance of the app, runs retention (or, with --dry-run, lists
 * what would go), prints the report as JSON and stops it. The run records
 * the tool and the OS user as who ran it.
 */
import { userInfo } from "node:os";
import type { RetentionReport } from "../runtime/retention-report.js";
import { withStartedApp } from "./load-app.js";

/** What `mneme store retention` was asked. */
export interface StoreRetentionCommand {
  /** The app module (a path; relative to the working directory). */
  readonly app: string;
  readonly dryRun?: boolean;
  readonly batchSize?: number;
}

/** Runs the command; resolves the report. */
export function runStoreRetention(cmd: StoreRetentionCommand): Promise<RetentionReport> {
  return withStartedApp(cmd.app, (facade) =>
    facade.applyRetention(
      {
        ...(cmd.dryRun === true ? { dryRun: true } : {}),
        ...(cmd.batchSize === undefined ? {} : { batchSize: cmd.batchSize }),
      },
      { reqCtx: { attributes: { ranBy: `mneme store retention (OS user ${osUser()})` } } },
    ),
  );
}

/** The OS user running the command ("unknown" when the system cannot tell). */
function osUser(): string {
  try {
    return userInfo().username;
  } catch {
    return "unknown";
  }
}
