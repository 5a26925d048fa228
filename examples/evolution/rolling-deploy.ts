/**
 * docs/evolution.md, "Rolling deploys": two releases side by side on one
 * database. Release 2 writes Ticketed at version 2; release 1, still running,
 * cannot read it (UPCAST_FAILED) and refuses rather than misreading it. Once
 * release 1 stops, release 2 handles everything.
 * test/project/evolution-guide.int.test.ts runs it.
 */
import { createFacade, defineDomain, type DomainInstaller, isMnemeError, on, ProjectionReadmodel } from "mneme";
import { createSqliteBackends } from "mneme/sqlite";
import { reqCtx, workspace } from "./workspace.js";

interface TicketedV1 {
  seat: string;
}
interface Ticketed {
  seat: string;
  row: number;
}

function release1() {
  const Venue = defineDomain("Venue");
  const Ticketed = Venue.event<TicketedV1>("Ticketed");
  const Ticket = Venue.aggregate<{ seat: string }>("Ticket", {
    initialState: () => ({ seat: "" }),
    evolve: [on(Ticketed, (_s, p) => ({ seat: p.seat }))],
  });
  const Sell = Venue.command<{ ticketUuid: string; seat: string }>("Sell");
  const install = (d: DomainInstaller): void => {
    d.handleCommand(Sell, async (ctx, _cmd, p) => {
      await ctx.aggregates.load(Ticket, p.ticketUuid);
      return [Ticketed.create(p.ticketUuid, { seat: p.seat })];
    });
  };
  return { Venue, Ticket, Sell, install };
}

function release2() {
  const Venue = defineDomain("Venue");
  const TicketedV2 = Venue.event<Ticketed>("Ticketed", { version: 2, upcasters: { 1: (p: TicketedV1): Ticketed => ({ ...p, row: 0 }) } });
  const Ticket = Venue.aggregate<Ticketed>("Ticket", {
    initialState: () => ({ seat: "", row: 0 }),
    evolve: [on(TicketedV2, (_s, p) => p)],
  });
  const Sell = Venue.command<{ ticketUuid: string; seat: string; row: number }>("Sell");
  const install = (d: DomainInstaller): void => {
    d.handleCommand(Sell, async (ctx, _cmd, p) => {
      await ctx.aggregates.load(Ticket, p.ticketUuid);
      return [TicketedV2.create(p.ticketUuid, { seat: p.seat, row: p.row })];
    });
  };
  return { Venue, Ticket, Sell, install };
}

/** Polls until `check` holds (or gives up after `ms`); for watching another instance take over. */
async function until(check: () => boolean, ms = 20_000): Promise<void> {
  for (const end = Date.now() + ms; !check() && Date.now() < end;) await new Promise((r) => setTimeout(r, 20));
}

const outcome = (p: Promise<unknown>): Promise<string> =>
  p.then(
    () => "ok",
    (e: unknown) => (isMnemeError(e) ? e.code : "not a MnemeError"),
  );

/** Release 1 runs, release 2 joins it on the same file, release 1 leaves; returns what each saw. */
export async function main(): Promise<{
  newReadsOld: Ticketed;
  oldReadsNew: string;
  oldCommand: string;
  oldHandler: string;
  newHandlerMeanwhile: string;
  newHandlerAfter: string;
  model: Ticketed | undefined;
}> {
  const ws = workspace("rolling-deploy");
  try {
    const stores = () => createSqliteBackends({ filename: ws.filename, pollIntervalMs: 20 });
    const r1 = release1();
    const f1 = createFacade({ appName: "venue", ...stores() }).registerDomain(r1.Venue, r1.install);
    f1.registerReadmodel(new ProjectionReadmodel(f1, { aggregate: r1.Ticket, name: "Tickets" }));
    await f1.start(); // the first instance: it holds the processing lock of the Tickets readmodel

    const r2 = release2();
    const f2 = createFacade({ appName: "venue", ...stores() }).registerDomain(r2.Venue, r2.install);
    const tickets = new ProjectionReadmodel(f2, { aggregate: r2.Ticket, name: "Tickets" });
    f2.registerReadmodel(tickets);
    await f2.start(); // Tickets waits in standby: release 1 processes it

    // Release 1 writes version 1: release 2 reads it through its upcaster.
    await f1.dispatch(r1.Sell, { ticketUuid: "t-1", seat: "A1" }, { reqCtx });
    const newReadsOld = (await f2.loadAggregate(r2.Ticket, "t-1")).state; // { seat: "A1", row: 0 }

    // Release 2 writes version 2: release 1 refuses to read it, everywhere.
    await f2.dispatch(r2.Sell, { ticketUuid: "t-2", seat: "B7", row: 2 }, { reqCtx });
    const oldReadsNew = await outcome(f1.loadAggregate(r1.Ticket, "t-2")); // UPCAST_FAILED
    const oldCommand = await outcome(f1.dispatch(r1.Sell, { ticketUuid: "t-2", seat: "C3" }, { reqCtx })); // UPCAST_FAILED
    const tickets1 = () => f1.runtime.listEventHandlers().find((h) => h.eventHandlerName === "Tickets")!;
    const tickets2 = () => f2.runtime.listEventHandlers().find((h) => h.eventHandlerName === "Tickets")!;
    await until(() => tickets1().state === "failed"); // release 1's readmodel stops at the event, its lastError says why
    const oldHandler = `${tickets1().state} at ${tickets1().lastPosition}`;
    const newHandlerMeanwhile = tickets2().state; // standby: the lock is still release 1's

    await f1.stop(); // the last instance of release 1 leaves and releases the lock
    await until(() => tickets2().state === "running" && tickets2().lastPosition === 2);
    const newHandlerAfter = `${tickets2().state} at ${tickets2().lastPosition}`;
    const model = (await tickets.getModel("t-2"))?.model; // { seat: "B7", row: 2 }
    await f2.stop();
    return { newReadsOld, oldReadsNew, oldCommand, oldHandler, newHandlerMeanwhile, newHandlerAfter, model };
  } finally {
    ws.remove();
  }
}

if (import.meta.url === `file://${process.argv[1]}`) console.log(await main());
