/**
 * A process for test/readmodel/readmodel-blue-green.int.test.ts (run with
 * `node --import tsx`): opens the SQLite file, starts, then restores
 * CounterTotals from zero in pages of 5 events and kills itself with SIGKILL
 * while applying the 21st replayed event, so four pages (positions 1..20) of
 * the new generation are committed and the switch never happened.
 * It exits with code 3 if it got past the kill point (the test then fails).
 */
import { createFacade, type Facade, withRestoreBatchSize } from "mneme";
import { createSqliteBackends } from "mneme/sqlite";
import { Counter, CounterTotals, Incremented } from "./counter-domain.js";

const [filename] = process.argv.slice(2);
if (filename === undefined) throw new Error("usage: rebuild-crash-process.ts <file>");

let armed = false;

class CrashingTotals extends CounterTotals {
  constructor(facade: Facade) {
    super(facade, "CounterTotals", withRestoreBatchSize(5));
    this.addDomainEventHandler(Incremented, async (ctx, event) => {
      if (armed && ctx.restoring && event.position === 21) {
        process.kill(process.pid, "SIGKILL");
        await new Promise<never>(() => undefined); // nothing after the kill point runs
      }
    });
  }
}

const facade = createFacade({ appName: "rebuild-crash", ...createSqliteBackends({ filename }) });
facade.registerDomain(Counter);
const totals = new CrashingTotals(facade);
facade.registerReadmodel(totals);
await facade.start();
armed = true;
await totals.restoreState(undefined, { fromZero: true }).done;
process.exit(3);
