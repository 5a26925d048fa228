/**
 * A process for test/sqlite/sqlite-instances.int.test.ts (run with `node --import
 * tsx`): an app instance on the shared SQLite file that takes the lease of
 * CounterTotals (lockLeaseMs 60 s: only its death can free it early), appends
 * `<events>` increments of counter "shared" and waits until its readmodel has
 * applied them, reports `{ pid, head }` over IPC, and then holds the lease
 * until it is killed. Told "stop", it stops its facade (releasing the lease)
 * and exits.
 */
import { createFacade } from "mneme";
import { createSqliteBackends, type SqliteDriverName } from "mneme/sqlite";
import { Counter, CounterTotals, Increment } from "./counter-domain.js";

const [filename, eventsArg, driverArg] = process.argv.slice(2);
const driver = driverArg as SqliteDriverName | undefined;
if (filename === undefined || eventsArg === undefined || process.send === undefined) {
  throw new Error("usage: sqlite-lease-holder-process.ts <file> <events> [driver] (forked with an IPC channel)");
}
const facade = createFacade({
  appName: "sqlite-instances",
  ...createSqliteBackends({ filename, ...(driver === undefined ? {} : { driver }), lockLeaseMs: 60_000 }),
});
facade.registerDomain(Counter);
const totals = new CounterTotals(facade);
facade.registerReadmodel(totals);
await facade.start();
if (totals.state !== "running") throw new Error(`the lease holder could not take the lease: ${totals.state}`);
for (let i = 0; i < Number(eventsArg); i++) await facade.dispatch(Increment, { counterUuid: "shared", by: 1 }, { waitToFinish: true });
process.on("message", (m) => {
  if (m === "stop") void facade.stop().then(() => process.exit(0));
});
process.send({ pid: process.pid, head: await facade.eventRepository.headPosition() });
