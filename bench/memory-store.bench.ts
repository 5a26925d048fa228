/**
 * The in-memory event repository against a bare JS array doing the same work
 * by hand (fill uuid/time/version/position, push, page through slices), in the
 * same run: append of 1,000,000 events in batches of 100 (BENCH_QUICK=1:
 * 100,000), readAll of all of them in pages of 1000, one-event appends, and
 * loadAggregate. Run with `npx tsx --expose-gc bench/run.ts memory-store` for steadier figures.
 */
import { newUuid, nowNs } from "../src/model/clock.js";
import type { Event, NewEvent } from "../src/model/types.js";
import { MemoryEventRepository } from "../src/memory/memory-event-repository.js";
import { BENCH_REQ_CTX, BENCH_TENANT, type Bench } from "./harness.js";

const AGGREGATES = 10_000;
const aggregateUuids = Array.from({ length: AGGREGATES }, () => newUuid());

/** Batch r: 100 events, each of a different aggregate (a mix like many small commands). */
function batchOf100(r: number): NewEvent[] {
  const out: NewEvent[] = [];
  for (let j = 0; j < 100; j++) {
    const i = r * 100 + j;
    out.push({
      domain: "Todo",
      name: "TodoCreated",
      aggregateUuid: aggregateUuids[i % AGGREGATES] as string,
      payload: { title: `todo number ${i}`, done: i % 2 === 0, n: i },
      tenantUuid: BENCH_TENANT,
      reqCtx: BENCH_REQ_CTX,
    });
  }
  return out;
}

/** The baseline: what a hand-written array store does, without validation, atomicity or freezing. */
class RawArrayStore {
  readonly events: Event[] = [];
  private readonly versions = new Map<string, number>();

  append(batch: readonly NewEvent[]): Event[] {
    const out: Event[] = [];
    for (const e of batch) {
      const version = (this.versions.get(e.aggregateUuid) ?? 0) + 1;
      this.versions.set(e.aggregateUuid, version);
      const ev: Event = {
        eventUuid: newUuid(),
        position: this.events.length + 1,
        tenantUuid: e.tenantUuid ?? "",
        domain: e.domain,
        name: e.name,
        aggregateUuid: e.aggregateUuid,
        version,
        createdAt: nowNs(),
        reqCtx: e.reqCtx ?? {},
        payload: e.payload,
      };
      this.events.push(ev);
      out.push(ev);
    }
    return out;
  }

  async *readAll(batchSize: number): AsyncGenerator<Event[]> {
    for (let i = 0; i < this.events.length; i += batchSize) yield this.events.slice(i, i + batchSize);
  }
}

export default async function memoryStoreBench(b: Bench): Promise<void> {
  const total = b.quick ? 100_000 : 1_000_000;
  const batches = total / 100;

  // Input batches are built outside the timed section: both sides get the same objects.
  const prebuilt = Array.from({ length: batches }, (_, r) => batchOf100(r));
  // Run with `npx tsx --expose-gc bench/run.ts` to collect between phases, so neither side pays for the other's garbage.
  const gc = (): void => (globalThis as { gc?: () => void }).gc?.();

  // An unmeasured full-size round first: JIT warm-up, and the heap grows to its working size
  // once, so whichever side is measured first is not charged for that growth.
  {
    const warmM = new MemoryEventRepository();
    const warmR = new RawArrayStore();
    for (const batch of prebuilt) {
      await warmM.append(batch);
      warmR.append(batch);
    }
    for await (const _ of warmM.readAll()) void _;
    for await (const _ of warmR.readAll(1000)) void _;
  }
  gc();

  let raw: RawArrayStore | undefined = new RawArrayStore();
  const rawAppend = await b.measure(
    "memory",
    "raw array: append, batches of 100",
    total,
    () => {
      for (const batch of prebuilt) (raw as RawArrayStore).append(batch);
    },
    "events/s",
  );
  const rawRead = await b.measure(
    "memory",
    "raw array: readAll, pages of 1000",
    total,
    async () => {
      let n = 0;
      for await (const page of (raw as RawArrayStore).readAll(1000)) n += page.length;
      if (n !== total) throw new Error(`raw read ${n} events`);
    },
    "events/s",
  );
  raw = undefined; // let the baseline's million events go before mneme's are made
  gc();

  const repo = new MemoryEventRepository();
  await repo.init();
  const mnemeAppend = await b.measure(
    "memory",
    "mneme: append, batches of 100",
    total,
    async () => {
      for (const batch of prebuilt) await repo.append(batch);
    },
    "events/s",
  );
  b.compare(mnemeAppend, rawAppend);

  const mnemeRead = await b.measure(
    "memory",
    "mneme: readAll, pages of 1000",
    total,
    async () => {
      let n = 0;
      for await (const page of repo.readAll({ batchSize: 1000 })) n += page.length;
      if (n !== total) throw new Error(`mneme read ${n} events`);
    },
    "events/s",
  );
  b.compare(mnemeRead, rawRead);

  const filtered = await b.measure(
    "memory",
    "mneme: readAll, tenant + eventPaths filter",
    total,
    async () => {
      let n = 0;
      const pages = repo.readAll({ batchSize: 1000, tenantUuid: "0190a7a2-7d3c-7b5e-9f00-1234567890ae", eventPaths: ["Todo.TodoCreated"] });
      for await (const page of pages) n += page.length;
      if (n !== total) throw new Error(`mneme filtered read ${n} events`);
    },
    "events scanned/s",
  );
  void filtered;

  // Commands append a few events each: one event per call is the facade's common case.
  const singles = b.quick ? 20_000 : 100_000;
  const single = new MemoryEventRepository();
  const singleEvents = prebuilt.slice(0, singles / 100).flat();
  await b.measure(
    "memory",
    "mneme: append, one event per call",
    singles,
    async () => {
      for (const e of singleEvents) await single.append([e]);
    },
    "events/s",
  );
  await b.measure(
    "memory",
    "mneme: append, one event, expectedVersions",
    singles,
    async () => {
      const s = new MemoryEventRepository();
      for (const e of singleEvents) {
        const current = (await s.loadAggregate(e.aggregateUuid)).length;
        await s.append([e], { expectedVersions: { [e.aggregateUuid]: current } });
      }
    },
    "commands/s",
  );

  const loads = b.quick ? 20_000 : 100_000;
  await b.measure(
    "memory",
    `mneme: loadAggregate (${total / AGGREGATES} events each)`,
    loads,
    async () => {
      let n = 0;
      for (let i = 0; i < loads; i++) n += (await repo.loadAggregate(aggregateUuids[i % AGGREGATES] as string)).length;
      if (n !== loads * (total / AGGREGATES)) throw new Error(`loaded ${n} events`);
    },
    "loads/s",
  );

  b.value("memory", `heap used (store of ${total} events + inputs)`, process.memoryUsage().heapUsed / 1e6, "MB");
  await repo.close();
  await single.close();
}
