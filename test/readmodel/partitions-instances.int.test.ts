/**
 * A 4-partition readmodel on two and three app instances (facades on one
 * SQLite file, and on one Postgres schema): the partitions spread to each
 * instance's fair share, the partitions of an instance that stops are taken
 * over, and every event is applied once, each aggregate's in order, the
 * documents ending equal to a replay from zero.
 */
import { describe, expect, it } from "vitest";
import { createFacade, type Facade, withPartitions } from "mneme";
import { createPostgresBackends } from "mneme/postgres";
import { createSqliteBackends } from "mneme/sqlite";
import { partitionOf } from "../../src/readmodel/partition-routing.js";
import { Counter, Increment, IncrementMany } from "../support/counter-domain.js";
import { expectedDocs, PartitionedLog } from "../support/partitioned-log.js";
import { DATABASE_URL, postgresScratch } from "../support/postgres-scratch.js";
import { sqliteScratch } from "../support/sqlite-scratch.js";
import { until } from "../support/until.js";

const files = sqliteScratch("partitions");
const pg = postgresScratch("mneme_part");

type Where = () => Parameters<typeof createFacade>[0];

function places(kind: "sqlite" | "postgres"): Where {
  if (kind === "sqlite") {
    const filename = files.newFile();
    return () => ({ ...createSqliteBackends({ filename, pollIntervalMs: 20 }) });
  }
  const schema = pg.newSchema();
  return () => ({ ...createPostgresBackends({ connectionString: DATABASE_URL, schema, poolSize: 4, pollIntervalMs: 20 }) });
}

interface Instance {
  readonly f: Facade;
  readonly rm: PartitionedLog;
}

function instance(where: Where): Instance {
  const f = createFacade({ appName: "partitions", ...where(), delivery: { lockRetryMs: 50 } });
  files.keep(f);
  f.registerDomain(Counter);
  const rm = new PartitionedLog(f, "PartitionedLog", withPartitions(4));
  f.registerReadmodel(rm);
  return { f, rm };
}

/** The partitions `i` runs (its listing). */
function running(i: Instance): number[] {
  const info = i.f.runtime.listEventHandlers().find((h) => h.eventHandlerName === "PartitionedLog")!;
  return info.partitions!.filter((p) => p.state === "running").map((p) => p.partition);
}

async function traffic(f: Facade, round: number, n = 10): Promise<void> {
  for (let i = 0; i < n; i++) {
    const counterUuids = Array.from({ length: 4 }, (_, k) => `c-${(round * 7 + i * 3 + k) % 24}`);
    await f.dispatch(IncrementMany, { counterUuids: [...new Set(counterUuids)], by: 1 });
  }
}

async function converged(i: Instance): Promise<void> {
  const want = await expectedDocs(i.f);
  await until(async () => {
    const docs = await i.rm.docs();
    return [...want.values()].every((d) => (docs.get(d.counterUuid)?.positions.length ?? 0) >= d.positions.length);
  }, "every event applied");
  const docs = await i.rm.docs();
  expect(docs).toEqual(want);
}

describe.each(["sqlite", "postgres"] as const)("a 4-partition readmodel on several instances (%s)", (kind) => {
  it("spreads to each instance's fair share, takes over a stopped instance's partitions, applies each event once", async () => {
    const where = places(kind);
    const a = instance(where);
    await a.f.start();
    expect(running(a)).toEqual([0, 1, 2, 3]);
    await traffic(a.f, 0);
    const b = instance(where);
    await b.f.start();
    const fill = Promise.all([traffic(a.f, 1, 20), traffic(b.f, 2, 20)]);
    await until(() => running(a).length === 2 && running(b).length === 2, "two partitions each");
    await fill;
    // b lists a as the holder of the partitions it does not run.
    const aId = a.f.runtime.systemInfo().instanceId;
    await until(() => {
      const info = b.f.runtime.listEventHandlers()[0]!;
      return info.partitions!.filter((p) => p.state === "standby").every((p) => p.holder === aId);
    }, "b lists a as the holder");

    const c = instance(where);
    await c.f.start();
    const more = Promise.all([traffic(b.f, 3, 15), traffic(c.f, 4, 15)]);
    await until(() => {
      const counts = [a, b, c].map((i) => running(i).length);
      return counts.every((n) => n <= 2) && counts.reduce((x, y) => x + y, 0) === 4;
    }, "at most two partitions each on three instances, all four running");
    await more;
    // waitToFinish considers every partition, wherever it runs.
    const r = await c.f.dispatch(
      IncrementMany,
      { counterUuids: ["w-0", "w-1", "w-2", "w-3", "w-4", "w-5"], by: 1 },
      { waitToFinish: true },
    );
    expect(r.handlerErrors).toEqual([]);
    const seen = await c.rm.docs();
    for (const e of r.events) expect(seen.get(e.aggregateUuid)?.positions).toContain(e.position);

    await a.f.stop();
    await b.f.stop();
    await until(() => running(c).length === 4, "c takes every partition over");
    await traffic(c.f, 5);
    await converged(c);
    await c.f.stop();
  });
});

/** Each partition's listing as an instance shows it: holder, state and position. */
function listing(i: Instance): { partition: number; holder?: string; state: string; lastPosition: number }[] {
  return i.f.runtime.listEventHandlers().find((h) => h.eventHandlerName === "PartitionedLog")!.partitions!;
}

describe.each(["sqlite", "postgres"] as const)("partition listings across instances (%s)", (kind) => {
  it("show each partition's holder and the position the holder applied, also after the last events all fell in one partition", async () => {
    const where = places(kind);
    const a = instance(where);
    await a.f.start();
    const b = instance(where);
    await b.f.start();
    await until(() => running(a).length === 2 && running(b).length === 2, "two partitions each");
    await traffic(a.f, 0, 45); // 180 events over every partition
    // The last 20 events all fall in one partition.
    const counter = Array.from({ length: 100 }, (_, k) => `last-${k}`).find((u) => partitionOf(u, 4) === running(a)[0])!;
    for (let k = 0; k < 20; k++) await b.f.dispatch(Increment, { counterUuid: counter, by: 1 });
    const head = await a.f.eventRepository.headPosition();
    expect(head).toBe(200);
    await converged(a);

    // The holder's truth: the instance running the partition lists itself and its own position, the head.
    // The other instance lists the same holder and reads the position from the shared checkpoint.
    const instances = [a, b];
    const truth = () =>
      [0, 1, 2, 3].map((partition) => {
        const holder = instances.find((i) => running(i).includes(partition))!;
        const own = listing(holder)[partition]!;
        return { partition, holder: own.holder, lastPosition: own.lastPosition };
      });
    await until(
      () =>
        instances.every(
          (i) =>
            JSON.stringify(listing(i).map(({ partition, holder, lastPosition }) => ({ partition, holder, lastPosition }))) ===
            JSON.stringify(truth()),
        ),
      "every instance lists each partition's holder at the holder's position",
      30_000, // only a bound on a hang: a standby reads the shared checkpoint on its own poll, slower on a loaded machine
      20,
    );
    for (const p of truth()) expect(p.lastPosition).toBe(head);
    for (const i of instances) {
      for (const p of listing(i)) expect(p.state).toBe(running(i).includes(p.partition) ? "running" : "standby");
    }
  });
});
