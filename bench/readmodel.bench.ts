/**
 * Restore throughput from the in-memory store into an in-memory readmodel
 * (trivial handler, and a ProjectionReadmodel), next to a raw loop over the
 * same repository's readAll; history of a 100-item list.
 */
import { AllEvents, BaseReadmodel, createFacade, defineDomain, type Facade, type NewEvent, ProjectionReadmodel, anonymous } from "mneme";
import type { Bench } from "./harness.js";
import { MemoryEventRepository } from "mneme/memory";

const D = defineDomain("Bench");
D.event<{ n: number }>("Added");
const Agg = D.aggregate<{ sum: number }>("Acc", {
  initialState: () => ({ sum: 0 }),
  evolve: { Added: (s, p: { n: number }) => ({ sum: s.sum + p.n }) },
});
D.query<Record<string, never>, unknown>("Nothing", { permission: anonymous });

class Trivial extends BaseReadmodel {
  count = 0;
  constructor(f: Facade) {
    super(f);
    this.domain = "Bench";
    this.name = "Trivial";
    this.addDomainEventHandler(AllEvents, () => {
      this.count++;
    });
  }
}

/** n events over `aggregates` aggregates: interleaved round-robin (worst case for a projection) or in runs of n/aggregates. */
async function filled(n: number, aggregates: number, interleaved = true): Promise<MemoryEventRepository> {
  const repo = new MemoryEventRepository();
  await repo.init();
  const run = Math.max(1, Math.floor(n / aggregates));
  for (let i = 0; i < n; i += 1000) {
    const batch: NewEvent[] = [];
    for (let j = i; j < Math.min(n, i + 1000); j++) {
      const agg = interleaved ? j % aggregates : Math.floor(j / run);
      batch.push({ domain: "Bench", name: "Added", aggregateUuid: `agg-${agg}`, payload: { n: 1 } });
    }
    await repo.append(batch);
  }
  return repo;
}

export default async function (b: Bench): Promise<void> {
  const n = b.quick ? 200_000 : 1_000_000;
  const repo = await filled(n, 10_000);

  const raw = await b.measure(
    "readmodel",
    `raw readAll loop over ${n} events (memory)`,
    n,
    async () => {
      let c = 0;
      for await (const page of repo.readAll({ batchSize: 1000 })) for (const _e of page) c++;
      if (c !== n) throw new Error("raw count");
    },
    "events/s",
  );

  const facade = createFacade({ eventRepository: repo });
  facade.registerDomain(D);
  const trivial = new Trivial(facade);
  facade.registerReadmodel(trivial);
  const projection = new ProjectionReadmodel(facade, { aggregate: Agg, name: "Sums" });
  facade.registerReadmodel(projection);
  await facade.start();

  trivial.count = 0;
  const t = await b.measure(
    "readmodel",
    `restore fromZero, trivial handler (memory)`,
    n,
    async () => {
      await trivial.restoreState(undefined, { fromZero: true }).done;
      if (trivial.count !== n) throw new Error(`trivial count ${trivial.count}`);
    },
    "events/s",
  );
  b.compare(t, raw);

  const p = await b.measure(
    "readmodel",
    `restore fromZero, ProjectionReadmodel, 10k aggregates interleaved`,
    n,
    async () => {
      await projection.restoreState(undefined, { fromZero: true }).done;
    },
    "events/s",
  );
  b.compare(p, raw);

  const clustered = createFacade({ eventRepository: await filled(n, 10_000, false) });
  clustered.registerDomain(D);
  const projection2 = new ProjectionReadmodel(clustered, { aggregate: Agg, name: "Sums" });
  clustered.registerReadmodel(projection2);
  await clustered.start();
  const p2 = await b.measure(
    "readmodel",
    `restore fromZero, ProjectionReadmodel, 10k aggregates in runs`,
    n,
    async () => {
      await projection2.restoreState(undefined, { fromZero: true }).done;
    },
    "events/s",
  );
  b.compare(p2, raw);
  await clustered.stop();

  // History of a 100-item list: one loadAggregates call.
  let calls = 0;
  const original = repo.loadAggregates.bind(repo);
  repo.loadAggregates = (ids) => {
    calls++;
    return original(ids);
  };
  const rounds = 200;
  const h = await b.measure(
    "readmodel",
    "getModelList(100, includeHistory) over 100-event streams",
    rounds,
    async () => {
      for (let i = 0; i < rounds; i++) await projection.getModelList({ pageSize: 100, includeHistory: true });
    },
    "lists/s",
  );
  void h;
  b.value("readmodel", "repository calls per history list", calls / rounds, "calls");
  await facade.stop();
}
