/**
 * A second process for test/sqlite/sqlite-instances.int.test.ts (run with
 * `node --import tsx`): an app instance on the shared SQLite file, as a CLI or
 * a second server would be. It registers the same readmodel (which must wait
 * in standby: the test process holds its lock), dispatches commands, reports
 * over IPC and exits. Half-way it waits until the test process says it has
 * applied everything so far, which proves it follows live (not at the end).
 */
import { createFacade } from "mneme";
import { createSqliteBackends, type SqliteDriverName } from "mneme/sqlite";
import { Counter, CounterTotals, Increment, IncrementMany } from "./counter-domain.js";

const [filename, commandsArg, driverArg] = process.argv.slice(2);
const driver = driverArg as SqliteDriverName | undefined;
if (filename === undefined || commandsArg === undefined || process.send === undefined) {
  throw new Error("usage: sqlite-instance-process.ts <file> <commands> [driver] (forked with an IPC channel)");
}
const send = (msg: unknown): Promise<void> =>
  new Promise((resolve, reject) => process.send!(msg, undefined, {}, (e) => (e ? reject(e) : resolve())));
const nextMessage = (): Promise<unknown> => new Promise((resolve) => process.once("message", resolve));

const facade = createFacade({
  appName: "sqlite-instances",
  ...createSqliteBackends({ filename, ...(driver === undefined ? {} : { driver }), pollIntervalMs: 20 }),
  delivery: { lockRetryMs: 50 },
});
facade.registerDomain(Counter);
facade.registerReadmodel(new CounterTotals(facade));
await facade.start();
const state = facade.runtime.listEventHandlers()[0]?.state;
let events = 0;
const commands = Number(commandsArg);
for (let i = 0; i < commands; i++) {
  if (i === Math.floor(commands / 2)) {
    const go = nextMessage();
    await send({ half: true, events, state });
    await go;
  }
  // Every third command appends three events in one batch, the others one.
  const r =
    i % 3 === 0
      ? await facade.dispatch(IncrementMany, { counterUuids: [`p-${i}-a`, `p-${i}-b`, "shared"], by: 1 })
      : await facade.dispatch(Increment, { counterUuid: "shared", by: 1 });
  events += r.events.length;
  // Yield now and then, so the other process interleaves its appends with ours.
  if (i % 10 === 0) await new Promise((r) => setTimeout(r, 1));
}
await facade.stop();
await send({ done: true, state, events });
process.exit(0);
