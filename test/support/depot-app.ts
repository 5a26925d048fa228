/**
 * The app of test/store-copy/store-copy.int.test.ts: a store that uses every part mneme
 * keeps. The built-in domains (accounts, sessions, two tenants), the Depot
 * domain with a snapshotted aggregate, a ProjectionReadmodel, a BaseReadmodel
 * whose handler calls are counted (a replay would show), a process manager
 * that schedules a command, personal data (an owner's e-mail), idempotent
 * commands; logs.
 */
import {
  BaseReadmodel,
  createFacade,
  defineDomain,
  type Facade,
  type FacadeOptions,
  ProjectionReadmodel,
  type RequestContext,
} from "mneme";
import { registerDefaults } from "mneme/defaults";
import { ProcessManager } from "mneme/reactions";
import { ADMIN_EMAIL, ADMIN_PASSWORD, FAST_HASHING, FakeClock, World } from "./defaults-world.js";

export const Depot = defineDomain("Depot");
export const Stocked = Depot.event<{ binUuid: string; n: number }>("Stocked");
export const OwnerRegistered = Depot.event<{ ownerUuid: string; email: string }>("OwnerRegistered", {
  personalData: { subject: (p) => p.ownerUuid, fields: ["email"] },
});
export const Reminded = Depot.event<{ binUuid: string }>("Reminded");
export const Stock = Depot.command<{ binUuid: string; n: number }>("Stock");
export const RegisterOwner = Depot.command<{ ownerUuid: string; email: string }>("RegisterOwner", {
  personalData: { subject: (p) => p.ownerUuid, fields: ["email"] },
});
export const Remind = Depot.command<{ binUuid: string }>("Remind");
export const ListBins = Depot.query<Record<string, never>, { binUuid: string; n: number }[]>("ListBins");
export const Bin = Depot.aggregate<{ n: number }>("Bin", {
  initialState: () => ({ n: 0 }),
  evolve: { Stocked: (s, p: { n: number }) => ({ n: s.n + p.n }) },
  snapshotEvery: 2,
});
export const Owner = Depot.aggregate<{ email: string }>("Owner", {
  initialState: () => ({ email: "" }),
  evolve: { OwnerRegistered: (_s, p: { email: string }) => ({ email: p.email }) },
});

/** Counts the events it handled: a readmodel that resumes from its checkpoint handles only new ones. */
export class BinTotals extends BaseReadmodel {
  override readonly name = "BinTotals";
  override readonly domain = "Depot";
  handled = 0;
  readonly totals = this.collection<{ binUuid: string; n: number }>("totals");
  constructor(f: Facade) {
    super(f);
    this.addDomainEventHandler(Stocked, async (_c, _e, p) => {
      this.handled++;
      const before = await this.totals.get(p.binUuid);
      await this.totals.put(p.binUuid, { binUuid: p.binUuid, n: (before?.n ?? 0) + p.n });
    });
  }
}

export interface DepotApp {
  readonly world: World;
  readonly facade: Facade;
  readonly totals: BinTotals;
  readonly bins: ProjectionReadmodel<{ n: number }>;
}

/** The app on the given stores, started, with the admin logged in (the admin is created only in an empty store). */
export async function startDepot(stores: Partial<FacadeOptions>): Promise<DepotApp> {
  const clock = new FakeClock();
  const facade = createFacade({ appName: "depot", ...stores });
  const ids = await registerDefaults(facade, {
    admin: { email: ADMIN_EMAIL, password: ADMIN_PASSWORD, name: "Ada Admin" },
    passwordHashing: FAST_HASHING,
    clock: clock.fn,
  });
  const totals = new BinTotals(facade);
  const bins = new ProjectionReadmodel(facade, { aggregate: Bin, name: "Bins" });
  facade.registerDomain(Depot, (d) => {
    d.handleCommand(Stock, (_c, _e, p) => [Stocked.create(p.binUuid, p)]);
    d.handleCommand(RegisterOwner, (_c, _e, p) => [OwnerRegistered.create(p.ownerUuid, p)]);
    d.handleCommand(Remind, (_c, _e, p) => [Reminded.create(p.binUuid, p)]);
    d.handleQuery(ListBins, async (ctx) => {
      const view = ctx.readmodel(totals);
      return await view.totals.list({ orderBy: "binUuid" });
    });
  });
  facade.registerReadmodel(totals);
  facade.registerReadmodel(bins);
  const reminders = new ProcessManager<{ stocked: number }>(facade, {
    name: "Reminders",
    domain: "Depot",
    initialState: () => ({ stocked: 0 }),
    correlate: (e) => (e.payload as { binUuid: string }).binUuid,
    pollMs: 20,
  }).on(Stocked, (ctx, s, p) => {
    // A day later: stays scheduled (due long after the test), copied as a document.
    if (s.stocked === 0) ctx.schedule(Remind, { binUuid: p.binUuid }, { at: Date.now() + 86_400_000 });
    return { stocked: s.stocked + 1 };
  });
  facade.registerReadmodel(reminders);
  await facade.start();
  const anonymousWorld = new World(facade, ids, clock, {});
  const admin = await anonymousWorld.login(ADMIN_EMAIL, ADMIN_PASSWORD, ids.adminIdentityUuid);
  return { world: new World(facade, ids, clock, admin.reqCtx), facade, totals, bins };
}

/** What a tenant's member asks of the app: the answers a copy must give the same. */
export async function depotAnswers(app: DepotApp, reqCtx: RequestContext, binUuids: readonly string[]): Promise<unknown> {
  const states = [];
  for (const b of binUuids) states.push((await app.facade.loadAggregate(Bin, b)).state);
  const models = [];
  for (const b of binUuids) models.push((await app.bins.getModel(b))?.model);
  return { list: await app.facade.query(ListBins, {}, { reqCtx }), states, models };
}
