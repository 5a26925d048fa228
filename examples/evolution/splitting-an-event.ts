/**
 * docs/evolution.md, "Splitting an event": release 1 has AddressChanged
 * { street, city }; release 2 records StreetChanged and CityChanged instead.
 * An upcaster maps one stored event to one event, so it cannot split; release 2
 * keeps AddressChanged registered and folds it next to the new events. For a
 * clean break, a copy-and-transform writes a new event store in which every
 * AddressChanged has become the two new events (release 3 knows only those).
 * test/project/evolution-guide.int.test.ts runs it.
 */
import { createFacade, defineDomain, type DomainInstaller, type Event, type NewEvent, on, ProjectionReadmodel } from "mneme";
import { createSqliteBackends } from "mneme/sqlite";
import type { EventRepository } from "mneme/store";
import { reqCtx, workspace } from "./workspace.js";

interface Address {
  street: string;
  city: string;
}

function release1() {
  const Crm = defineDomain("Crm");
  const AddressChanged = Crm.event<Address>("AddressChanged");
  const ChangeAddress = Crm.command<Address & { customerUuid: string }>("ChangeAddress");
  const install = (d: DomainInstaller): void => {
    d.handleCommand(ChangeAddress, (_ctx, _cmd, p) => [AddressChanged.create(p.customerUuid, { street: p.street, city: p.city })]);
  };
  return { Crm, ChangeAddress, install };
}

function release2() {
  const Crm = defineDomain("Crm");
  const AddressChanged = Crm.event<Address>("AddressChanged", { description: "Before release 2; no command records it now" });
  const StreetChanged = Crm.event<{ street: string }>("StreetChanged");
  const CityChanged = Crm.event<{ city: string }>("CityChanged");
  const Customer = Crm.aggregate<Address>("Customer", {
    initialState: () => ({ street: "", city: "" }),
    evolve: [
      on(AddressChanged, (_s, p) => ({ street: p.street, city: p.city })), // history keeps the old event
      on(StreetChanged, (s, p) => ({ ...s, street: p.street })),
      on(CityChanged, (s, p) => ({ ...s, city: p.city })),
    ],
  });
  const Move = Crm.command<{ customerUuid: string; city: string }>("Move");
  const install = (d: DomainInstaller): void => {
    d.handleCommand(Move, (_ctx, _cmd, p) => [CityChanged.create(p.customerUuid, { city: p.city })]);
  };
  return { Crm, Customer, Move, install };
}

function release3() {
  const Crm = defineDomain("Crm");
  const StreetChanged = Crm.event<{ street: string }>("StreetChanged");
  const CityChanged = Crm.event<{ city: string }>("CityChanged");
  const Customer = Crm.aggregate<Address>("Customer", {
    initialState: () => ({ street: "", city: "" }),
    evolve: [on(StreetChanged, (s, p) => ({ ...s, street: p.street })), on(CityChanged, (s, p) => ({ ...s, city: p.city }))],
  });
  return { Crm, Customer };
}

/**
 * Copies every event of `from` (as a facade reads it: current names and
 * versions) into the empty store `to`, an AddressChanged as a StreetChanged
 * and a CityChanged. `to` is a facade's `eventRepository`, so its write steps
 * apply. Aggregate versions and positions are numbered afresh in `to`.
 */
export async function copySplittingAddresses(from: EventRepository, to: EventRepository): Promise<number> {
  let copied = 0;
  for await (const page of from.readAll()) {
    for (const e of page) {
      const keep = { aggregateUuid: e.aggregateUuid, tenantUuid: e.tenantUuid, reqCtx: e.reqCtx, createdAt: e.createdAt };
      const out: NewEvent[] = [];
      if (e.domain === "Crm" && e.name === "AddressChanged") {
        const { street, city } = e.payload as Address;
        out.push({ ...keep, domain: "Crm", name: "StreetChanged", payload: { street } });
        out.push({ ...keep, domain: "Crm", name: "CityChanged", payload: { city } });
      } else {
        out.push({ ...keep, domain: e.domain, name: e.name, payload: e.payload, eventUuid: e.eventUuid, ...versionOf(e) });
      }
      await to.append(out); // one source event's output at a time, in position order
      copied += out.length;
    }
  }
  return copied;
}

const versionOf = (e: Event): { eventVersion?: number } => (e.eventVersion === undefined ? {} : { eventVersion: e.eventVersion });

/** Release 1 writes, release 2 reads both kinds, release 3 reads the copied store; returns the three views of one customer. */
export async function main(): Promise<{ release2: Address; projection: Address | undefined; release3: Address; copied: string[] }> {
  const old = workspace("splitting-an-event");
  const next = workspace("splitting-an-event-copy");
  try {
    const r1 = release1();
    const f1 = createFacade({ appName: "crm", ...createSqliteBackends({ filename: old.filename }) }).registerDomain(r1.Crm, r1.install);
    await f1.start();
    await f1.dispatch(r1.ChangeAddress, { customerUuid: "c-1", street: "1 Main St", city: "Springfield" }, { reqCtx });
    await f1.stop();

    const r2 = release2();
    const f2 = createFacade({ appName: "crm", ...createSqliteBackends({ filename: old.filename }) }).registerDomain(r2.Crm, r2.install);
    const customers = new ProjectionReadmodel(f2, { aggregate: r2.Customer }); // folds with the same evolve
    f2.registerReadmodel(customers);
    await f2.start();
    await f2.dispatch(r2.Move, { customerUuid: "c-1", city: "Shelbyville" }, { reqCtx, waitToFinish: true });
    const release2State = (await f2.loadAggregate(r2.Customer, "c-1")).state;
    const projection = (await customers.getModel("c-1"))?.model;

    // The clean break: a new store, written once while no instance writes to the old one. The copy goes
    // through release 3's facade, so its write steps (personal data sealing) apply as to any new event.
    const r3 = release3();
    const f3 = createFacade({ appName: "crm", ...createSqliteBackends({ filename: next.filename }) }).registerDomain(r3.Crm);
    await f3.start();
    await copySplittingAddresses(f2.eventRepository, f3.eventRepository);
    await f2.stop();
    const release3State = (await f3.loadAggregate(r3.Customer, "c-1")).state;
    const copied: string[] = [];
    for await (const page of f3.eventRepository.readAll()) copied.push(...page.map((e) => `${e.version}:${e.name}`));
    await f3.stop();
    return { release2: release2State, projection, release3: release3State, copied };
  } finally {
    old.remove();
    next.remove();
  }
}

if (import.meta.url === `file://${process.argv[1]}`) console.log(await main());
