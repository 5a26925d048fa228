/**
 * A process for test/readmodel/readmodel-restore-crash.int.test.ts (run with
 * `node --import tsx`): opens the SQLite file, starts, then restores
 * CounterTotals from zero and kills itself with SIGKILL at `killAt`:
 * - "after-clear": the new generation's collections are cleared, its checkpoint
 *   is not reset yet (inside the transaction that starts a restore from zero);
 * - "first-replayed": the first replayed event is being applied.
 * It exits with code 3 if it got past the kill point (the test then fails).
 */
import { createFacade, type Facade } from "mneme";
import { createSqliteBackends } from "mneme/sqlite";
import { Counter, CounterTotals, Incremented } from "./counter-domain.js";

const [filename, killAt] = process.argv.slice(2);
if (filename === undefined || (killAt !== "after-clear" && killAt !== "first-replayed")) {
  throw new Error("usage: restore-crash-process.ts <file> after-clear|first-replayed");
}

let armed = false;
async function die(): Promise<never> {
  process.kill(process.pid, "SIGKILL");
  return new Promise<never>(() => undefined); // nothing after the kill point runs
}

class CrashingTotals extends CounterTotals {
  constructor(facade: Facade) {
    super(facade);
    this.addDomainEventHandler(Incremented, async (ctx) => {
      if (armed && killAt === "first-replayed" && ctx.restoring) await die();
    });
  }

  protected override async resetState(): Promise<void> {
    await super.resetState();
    if (armed && killAt === "after-clear") await die();
  }
}

const facade = createFacade({ appName: "restore-crash", ...createSqliteBackends({ filename }) });
facade.registerDomain(Counter);
const totals = new CrashingTotals(facade);
facade.registerReadmodel(totals);
await facade.start();
armed = true;
await totals.restoreState(undefined, { fromZero: true }).done;
process.exit(3);
