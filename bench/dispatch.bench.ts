/**
 * Commands per second through `facade.dispatch` on the in-memory stores, for a
 * command whose handler returns one event: without waitToFinish (no readmodel),
 * with waitToFinish and one ProjectionReadmodel, and load+append. The baseline
 * of the same run is `MemoryEventRepository.append` of the same events, one per
 * call, directly. A run with a CommandStore that discards its records shows
 * what the audit trail costs. Plus ns per permission check (`check` awaited,
 * `evaluate` synchronous) for anonymous, authorized, and authorized with an
 * authorizer. Each figure is also given per CPU second of this process, which a
 * busy machine disturbs less than wall time.
 */
import { createFacade, type Facade } from "../src/app/facade.js";
import { defineDomain } from "../src/model/domain.js";
import type { DomainInstall } from "../src/model/domain-install.js";
import type { CommandEnvelope, NewEvent } from "../src/model/types.js";
import { MemoryCommandStore } from "../src/memory/memory-command-store.js";
import { MemoryEventRepository } from "../src/memory/memory-event-repository.js";
import { anonymous, authorized, newPermission } from "../src/model/permission.js";
import { PermissionRegistry } from "../src/permissions/permission-registry.js";
import { ProjectionReadmodel } from "../src/readmodel/projection-readmodel.js";
import { BENCH_REQ_CTX as reqCtx, BENCH_TENANT as TENANT, type Bench, type BenchRow } from "./harness.js";

const AGGREGATES = 10_000;

interface CreateItem {
  itemUuid: string;
  title: string;
}
interface ItemCreated {
  title: string;
}

function itemDomain() {
  const Items = defineDomain("Items");
  const ItemCreated = Items.event<ItemCreated>("ItemCreated");
  const Item = Items.aggregate<{ title: string; n: number }>("Item", {
    initialState: () => ({ title: "", n: 0 }),
    evolve: { ItemCreated: (s, p: ItemCreated) => ({ title: p.title, n: s.n + 1 }) },
  });
  const CreateItem = Items.command<CreateItem>("CreateItem");
  const TouchItem = Items.command<CreateItem>("TouchItem");
  const install: DomainInstall = (i) => {
    i.handleCommand(CreateItem, (_ctx, _cmd, p) => [ItemCreated.create(p.itemUuid, { title: p.title })]);
    i.handleCommand(TouchItem, async (ctx, _cmd, p) => {
      await ctx.aggregates.load(Item, p.itemUuid);
      return [ItemCreated.create(p.itemUuid, { title: p.title })];
    });
  };
  return { Items, ItemCreated, Item, CreateItem, TouchItem, install };
}

const ids = Array.from({ length: AGGREGATES }, (_, i) => `0190a7a2-0000-7000-8000-${String(i).padStart(12, "0")}`);
const payloadOf = (i: number): CreateItem => ({ itemUuid: ids[i % AGGREGATES]!, title: `item number ${i}` });

/** A CommandStore that keeps nothing: isolates the facade and the event store from the audit trail's cost. */
class DiscardingCommandStore extends MemoryCommandStore {
  override async record(): Promise<void> {
    /* discarded */
  }
}

async function facadeWith(setup?: (f: Facade, d: ReturnType<typeof itemDomain>) => void) {
  const d = itemDomain();
  const f = createFacade().registerDomain(d.Items, d.install);
  setup?.(f, d);
  await f.start();
  return { f, ...d };
}

/**
 * Runs fn and records its throughput by wall time (the harness's row) and by this
 * process's CPU time: on a shared machine the wall time includes other processes' work.
 */
async function timed(
  b: Bench,
  name: string,
  ops: number,
  unit: string,
  fn: () => Promise<void>,
): Promise<{ wall: BenchRow; cpuRate: number }> {
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  await fn();
  const seconds = (performance.now() - t0) / 1000;
  const c = process.cpuUsage(c0);
  const cpuRate = ops / ((c.user + c.system) / 1e6);
  const wall = b.record("dispatch", name, ops, seconds, unit);
  b.value("dispatch", "  same, per CPU second of this process", cpuRate, unit);
  return { wall, cpuRate };
}

function compareBoth(b: Bench, row: { wall: BenchRow; cpuRate: number }, base: { wall: BenchRow; cpuRate: number }): void {
  b.compare(row.wall, base.wall);
  b.value("dispatch", "  ratio by CPU time", row.cpuRate / base.cpuRate, "x");
}

export default async function dispatchBench(b: Bench): Promise<void> {
  const n = b.quick ? 20_000 : 200_000;
  const nWait = b.quick ? 10_000 : 50_000;
  const payloads = Array.from({ length: n }, (_, i) => payloadOf(i));

  // Permission checks first, while the heap is small (the dispatch runs below keep their events and records).
  await permissionChecks(b);

  // Warm-up of both paths on throwaway instances.
  {
    const w = await facadeWith();
    for (let i = 0; i < 20_000; i++) await w.f.dispatch(w.CreateItem, payloads[i % n]!, { reqCtx });
    await w.f.stop();
    const r = new MemoryEventRepository();
    for (let i = 0; i < 20_000; i++)
      await r.append([w.ItemCreated.create(ids[i % AGGREGATES]!, { title: "w" }, { tenantUuid: TENANT, reqCtx })]);
  }

  // Baseline: the same one-event appends straight into the repository (it fills uuid, time, version, position).
  const d0 = itemDomain();
  const rawEvents: NewEvent[] = payloads.map((p) => ({
    ...d0.ItemCreated.create(p.itemUuid, { title: p.title }, { tenantUuid: TENANT, reqCtx }),
    commandUuid: "c",
  }));
  const repo = new MemoryEventRepository();
  const raw = await timed(b, "raw: MemoryEventRepository.append, 1 event/call", n, "events/s", async () => {
    for (let i = 0; i < n; i++) await repo.append([rawEvents[i]!]);
  });
  await repo.close();

  {
    const { f, CreateItem } = await facadeWith();
    compareBoth(
      b,
      await timed(b, "dispatch 1-event command, no readmodel", n, "commands/s", async () => {
        for (let i = 0; i < n; i++) await f.dispatch(CreateItem, payloads[i]!, { reqCtx });
      }),
      raw,
    );
    await f.stop();
  }

  {
    // Where the time goes: the same run with an audit trail that keeps nothing.
    const d = itemDomain();
    const f = createFacade({ commandStore: new DiscardingCommandStore() }).registerDomain(d.Items, d.install);
    await f.start();
    compareBoth(
      b,
      await timed(b, "dispatch 1-event command, CommandStore discarding", n, "commands/s", async () => {
        for (let i = 0; i < n; i++) await f.dispatch(d.CreateItem, payloads[i]!, { reqCtx });
      }),
      raw,
    );
    await f.stop();
  }

  {
    const { f, CreateItem } = await facadeWith();
    const inFlight = 100;
    compareBoth(
      b,
      await timed(b, `dispatch 1-event command, ${inFlight} in flight`, n, "commands/s", async () => {
        for (let i = 0; i < n; i += inFlight) {
          const batch: Promise<unknown>[] = [];
          for (let j = i; j < i + inFlight && j < n; j++) batch.push(f.dispatch(CreateItem, payloads[j]!, { reqCtx }));
          await Promise.all(batch);
        }
      }),
      raw,
    );
    await f.stop();
  }

  {
    const { f, TouchItem } = await facadeWith();
    compareBoth(
      b,
      await timed(b, "dispatch load+append (lock, fold, expected version)", n, "commands/s", async () => {
        for (let i = 0; i < n; i++) await f.dispatch(TouchItem, payloads[i]!, { reqCtx });
      }),
      raw,
    );
    await f.stop();
  }

  {
    let projection: ProjectionReadmodel<{ title: string; n: number }> | undefined;
    const { f, CreateItem } = await facadeWith((f, d) => {
      projection = new ProjectionReadmodel(f, { aggregate: d.Item });
      f.registerReadmodel(projection);
    });
    compareBoth(
      b,
      await timed(b, "dispatch + waitToFinish, one ProjectionReadmodel", nWait, "commands/s", async () => {
        for (let i = 0; i < nWait; i++) await f.dispatch(CreateItem, payloads[i]!, { reqCtx, waitToFinish: true });
      }),
      raw,
    );
    const m = await projection!.getModel(ids[0]!);
    if (m === undefined || m.version !== Math.ceil(nWait / AGGREGATES)) throw new Error(`projection is at ${String(m?.version)}`);
    await f.stop();
  }
}

async function permissionChecks(b: Bench): Promise<void> {
  const n = b.quick ? 200_000 : 2_000_000;
  const plain = new PermissionRegistry();
  const withAuthorizer = new PermissionRegistry((ctx) => (ctx.senderAccountUuid === undefined ? new Error("no") : undefined));
  for (const reg of [plain, withAuthorizer]) {
    reg.register(newPermission("P", "Anon", "anonymous", anonymous));
    reg.register(newPermission("P", "Authz", "authorized", authorized));
  }
  const env = (name: string): CommandEnvelope => ({ commandUuid: "c", domain: "P", name, payload: {}, reqCtx });
  const cases: [string, PermissionRegistry, CommandEnvelope][] = [
    ["anonymous", plain, env("Anon")],
    ["authorized", plain, env("Authz")],
    ["authorized + authorizer", withAuthorizer, env("Authz")],
  ];
  let denied = 0;
  for (const [name, reg, e] of cases) {
    for (let i = 0; i < 100_000; i++) if (reg.evaluate(reqCtx, e) !== undefined) denied++; // warm-up
    let t0 = performance.now();
    let c0 = process.cpuUsage();
    for (let i = 0; i < n; i++) if (reg.evaluate(reqCtx, e) !== undefined) denied++;
    b.value("permissions", `evaluate (sync): ${name}`, ((performance.now() - t0) * 1e6) / n, "ns/check", `${cpuNs(c0, n)} ns CPU`);
    t0 = performance.now();
    c0 = process.cpuUsage();
    for (let i = 0; i < n; i++) await reg.check(reqCtx, e);
    b.value("permissions", `check (awaited): ${name}`, ((performance.now() - t0) * 1e6) / n, "ns/check", `${cpuNs(c0, n)} ns CPU`);
  }
  if (denied !== 0) throw new Error("a check that should pass was denied");
}

function cpuNs(since: NodeJS.CpuUsage, n: number): string {
  const c = process.cpuUsage(since);
  return (((c.user + c.system) * 1000) / n).toFixed(0);
}
