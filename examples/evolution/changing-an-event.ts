/**
 * docs/evolution.md, "Changing an event": release 1 stores prices in euros;
 * release 3 stores cents and a currency. The event's `version` goes up, one
 * upcaster per older version turns a stored payload into the next version's,
 * and every read hands out the current version. The stored rows never change.
 * test/project/evolution-guide.int.test.ts runs it.
 */
import { createFacade, defineDomain, type DomainInstaller, type Event, on } from "mneme";
import { createSqliteBackends } from "mneme/sqlite";
import { reqCtx, workspace } from "./workspace.js";

// Release 1 -----------------------------------------------------------------
interface PriceSetV1 {
  amount: number; // euros, 9.99
}

function release1() {
  const Shop = defineDomain("Shop");
  const PriceSet = Shop.event<PriceSetV1>("PriceSet");
  const SetPrice = Shop.command<{ productUuid: string; amount: number }>("SetPrice");
  const install = (d: DomainInstaller): void => {
    d.handleCommand(SetPrice, (_ctx, _cmd, p) => [PriceSet.create(p.productUuid, { amount: p.amount })]);
  };
  return { Shop, SetPrice, install };
}

// Release 3 -----------------------------------------------------------------
interface PriceSetV2 {
  amount: number;
  currency: string; // version 2 added a field
}
export interface PriceSet {
  cents: number; // version 3 changed a field's type and meaning: integer cents
  currency: string;
}

function release3() {
  const Shop = defineDomain("Shop");
  const PriceSet = Shop.event<PriceSet>("PriceSet", {
    version: 3,
    upcasters: {
      1: (p: PriceSetV1): PriceSetV2 => ({ ...p, currency: "EUR" }), // the default for events written before the field
      2: (p: PriceSetV2): PriceSet => ({ cents: Math.round(p.amount * 100), currency: p.currency }),
    },
  });
  const Product = Shop.aggregate<PriceSet>("Product", {
    initialState: () => ({ cents: 0, currency: "EUR" }),
    evolve: [on(PriceSet, (_s, p) => ({ cents: p.cents, currency: p.currency }))], // only the current shape
  });
  const SetPrice = Shop.command<{ productUuid: string; cents: number; currency: string }>("SetPrice");
  const install = (d: DomainInstaller): void => {
    d.handleCommand(SetPrice, (_ctx, _cmd, p) => [PriceSet.create(p.productUuid, { cents: p.cents, currency: p.currency })]);
  };
  return { Shop, Product, SetPrice, install };
}

/** Runs both releases on one SQLite file; returns what release 3 reads and what is stored. */
export async function main(): Promise<{
  read: [string, unknown, number | undefined][];
  stored: [string, unknown, number | undefined][];
  product: PriceSet;
}> {
  const ws = workspace("changing-an-event");
  try {
    const r1 = release1();
    const f1 = createFacade({ appName: "shop", ...createSqliteBackends({ filename: ws.filename }) }).registerDomain(r1.Shop, r1.install);
    await f1.start();
    await f1.dispatch(r1.SetPrice, { productUuid: "p-1", amount: 9.99 }, { reqCtx });
    await f1.stop();

    const r3 = release3();
    const f3 = createFacade({ appName: "shop", ...createSqliteBackends({ filename: ws.filename }) }).registerDomain(r3.Shop, r3.install);
    await f3.start();
    await f3.dispatch(r3.SetPrice, { productUuid: "p-2", cents: 1250, currency: "CHF" }, { reqCtx });
    // Every read path of the facade hands out version 3: readAll, aggregate loads, handlers, history, the Runtime.
    const read: Event[] = [];
    for await (const page of f3.eventRepository.readAll()) read.push(...page);
    const product = (await f3.loadAggregate(r3.Product, "p-1")).state; // { cents: 999, currency: "EUR" }
    await f3.stop();

    // The stored form, read without the facade: release 1's event is still version 1 (eventVersion absent).
    const raw = createSqliteBackends({ filename: ws.filename }).eventRepository;
    await raw.init();
    const stored: Event[] = [];
    for await (const page of raw.readAll()) stored.push(...page);
    await raw.close();

    const rows = (events: Event[]) => events.map((e): [string, unknown, number | undefined] => [e.name, e.payload, e.eventVersion]);
    return { read: rows(read), stored: rows(stored), product };
  } finally {
    ws.remove();
  }
}

if (import.meta.url === `file://${process.argv[1]}`) console.log(await main());
