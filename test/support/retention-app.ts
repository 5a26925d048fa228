/**
 * The Shop domain of test/app/retention.int.test.ts (page visits and orders that
 * expire after 30 days, notes that never do), and, as the default export, its
 * app on the SQLite file named by RETENTION_FILE: the `--app` module the test
 * gives `mneme store retention`.
 */
import { createFacade, defineDomain, type Facade } from "mneme";
import { createSqliteBackends } from "mneme/sqlite";

export function shop() {
  const D = defineDomain("Shop");
  const Visited = D.event<{ visitor: string; note: string }>("PageVisited", {
    retainFor: "30d",
    tags: (p) => [`visitor:${p.visitor}`],
  });
  const Placed = D.event<{ orderId: string; note: string }>("OrderPlaced", { retainFor: "P30D" });
  const Noted = D.event<{ note: string }>("Noted");
  const Order = D.aggregate<{ count: number }>("Order", {
    initialState: () => ({ count: 0 }),
    evolve: { OrderPlaced: (s) => ({ count: s.count + 1 }) },
    snapshotEvery: 1,
  });
  const Visit = D.command<{ visitor: string }>("Visit");
  D.handleCommand(Visit, async (ctx, _c, p) => {
    const seen = await ctx.events.read({ items: [{ types: [Visited], tags: [`visitor:${p.visitor}`] }] });
    return [Visited.create(`visit-${p.visitor}-new-${seen.events.length}`, { visitor: p.visitor, note: `seen ${seen.events.length}` })];
  });
  return { D, Visited, Placed, Noted, Order, Visit };
}

export default function createApp(): Facade {
  const filename = process.env.RETENTION_FILE;
  if (filename === undefined) throw new Error("RETENTION_FILE is not set");
  // Log entries older than 1 ms go: every entry the test wrote before the run.
  const facade = createFacade({ appName: "retention-cli", ...createSqliteBackends({ filename }), retention: { logs: 1 } });
  facade.registerDomain(shop().D);
  return facade;
}
