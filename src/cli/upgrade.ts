/**
 * `mneme upgrade status|finish --app <module>`: the rolling deploy's state and
 * its finish step (docs/upgrading.md, "Rolling deploys") from a shell, once
 * every instance of the older release is replaced. The app module is the
 * application's own (see load-app.ts); the command starts it as one more
 * instance, prints the result as JSON and stops it.
 */
import { withStartedApp } from "./load-app.js";

/** What `mneme upgrade ...` was asked. */
export interface UpgradeCommand {
  readonly action: "status" | "finish";
  /** The app module (a path; relative to the working directory). */
  readonly app: string;
  /** finish: how long to wait after the stores refuse the old writers before the migration reads (default 1000 ms). */
  readonly settleMs?: number;
  /** finish: events per page of the personal-data migration. */
  readonly batchSize?: number;
}

/** Runs the command; resolves what to print (JSON). */
export function runUpgradeCommand(cmd: UpgradeCommand): Promise<unknown> {
  return withStartedApp(cmd.app, async (facade) => {
    if (cmd.action === "status") {
      return { rollingFrom: facade.rollingFrom ?? null, storeFormat: facade.runtime.systemInfo().storeFormat };
    }
    return facade.finishRollingUpgrade({
      ...(cmd.settleMs === undefined ? {} : { settleMs: cmd.settleMs }),
      ...(cmd.batchSize === undefined ? {} : { batchSize: cmd.batchSize }),
    });
  });
}
