/**
 * What a tenant's view of a BaseReadmodel costs: a query handler reading one
 * tenant's documents through `ctx.readmodel` (the tenant column, its index and
 * the view's proxy) next to the same query filtering by a `tenantUuid` field
 * of the documents through the unscoped readmodel (how an application scoped
 * its own readmodels before), on a SQLite file with 20 tenants.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { anonymous, BaseReadmodel, createFacade, defineDomain, type Facade } from "mneme";
import type { ReadmodelCollection } from "mneme/store";
import { createSqliteBackends } from "mneme/sqlite";
import { type Bench, duel } from "./harness.js";

interface Item {
  tenantUuid: string;
  n: number;
}

const D = defineDomain("TenBench");
const Added = D.event<{ n: number }>("Added");
const Scoped = D.query<Record<string, never>, number>("Scoped", { permission: anonymous });
const ByField = D.query<Record<string, never>, number>("ByField", { permission: anonymous });

class Items extends BaseReadmodel {
  readonly items: ReadmodelCollection<Item>;
  constructor(f: Facade) {
    super(f);
    this.domain = "TenBench";
    this.name = "Items";
    this.items = this.collection("items");
    this.addDomainEventHandler(Added, (_ctx, e, p) => this.items.put(e.aggregateUuid, { tenantUuid: e.tenantUuid, n: p.n }));
  }
  /** One page of the tenant's documents and how many there are. */
  async page(where: Record<string, string> = {}): Promise<number> {
    const list = await this.items.list({ where, orderBy: "n", limit: 20 });
    return list.length + (await this.items.count(where));
  }
}

export default async function (b: Bench): Promise<void> {
  const tenants = 20;
  const docs = b.quick ? 10_000 : 50_000;
  const rounds = b.quick ? 100 : 200;
  const dir = mkdtempSync(join(tmpdir(), "mneme-bench-tenancy-"));
  try {
    const facade = createFacade({ ...createSqliteBackends({ filename: join(dir, "bench.db") }) });
    facade.registerDomain(D, (d) => {
      d.handleQuery(Scoped, (ctx) => ctx.readmodel<Items>("Items").page());
      d.handleQuery(ByField, (ctx) => facade.readmodel<Items>("Items").page({ tenantUuid: ctx.tenantUuid }));
    });
    const items = new Items(facade);
    facade.registerReadmodel(items);
    await facade.start();
    for (let i = 0; i < docs; i += 1000) {
      const batch = [];
      for (let j = i; j < i + 1000; j++)
        batch.push({
          domain: "TenBench",
          name: "Added",
          aggregateUuid: `item-${j}`,
          payload: { n: j },
          tenantUuid: `tenant-${j % tenants}`,
        });
      await facade.eventRepository.append(batch);
    }
    // Caught up from the checkpoint: every document written before the queries run.
    await facade.runtime.controlEventHandler({ action: "restore", eventHandlerName: "Items" });
    const reqCtx = (r: number) => ({ senderTenantUuid: `tenant-${r % tenants}` });
    const expected = docs / tenants + 20;
    await duel(
      b,
      "readmodel-ten",
      `query a page + count of 1 of ${tenants} tenants (${docs} docs, SQLite)`,
      1,
      rounds,
      async (r) => {
        if ((await facade.query(Scoped, {}, { reqCtx: reqCtx(r) })) !== expected) throw new Error("scoped count");
      },
      [
        {
          name: "by document field",
          run: async (r) => {
            if ((await facade.query(ByField, {}, { reqCtx: reqCtx(r) })) !== expected) throw new Error("field count");
          },
        },
      ],
      "queries/s",
    );
    await facade.stop();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
