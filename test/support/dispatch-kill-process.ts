/**
 * A process for test/app/command-record-atomic.int.test.ts (run with
 * `node --import tsx`): dispatches commands on a SQLite file as fast as it can
 * until the test kills it with SIGKILL. Prints "ready" once started.
 */
import { createFacade } from "mneme";
import { createSqliteBackends } from "mneme/sqlite";
import { Counter, IncrementMany } from "./counter-domain.js";

const [filename, round] = process.argv.slice(2);
if (filename === undefined || round === undefined) throw new Error("usage: dispatch-kill-process.ts <file> <round>");
const facade = createFacade({ appName: "record-kill", ...createSqliteBackends({ filename }) });
facade.registerDomain(Counter);
await facade.start();
process.stdout.write("ready\n");
// Bounded: the test kills the process long before this ends.
for (let i = 0; i < 1_000_000; i++) {
  await facade.dispatch(IncrementMany, { counterUuids: [`r${round}-a${i % 7}`, `r${round}-b${i % 5}`], by: 1 });
}
process.exit(3);
