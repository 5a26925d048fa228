/**
 * Partitioned handlers (`withPartitions`) on one instance: the routing hash is
 * fixed, partitions share the work, each event is applied once in aggregate
 * order, the listing shows the partitions, and a restore from zero switches
 * every partition together.
 */
import { describe, expect, it } from "vitest";
import { createFacade, isMnemeError, newUuid, withPartitions, withRestoreBatchSize } from "mneme";
import { MemoryEventRepository } from "mneme/memory";
import type { ReadAllOptions } from "mneme/store";
import { partitionOf } from "../../src/readmodel/partition-routing.js";
import { Counter, CounterTotals, Increment, IncrementMany } from "../support/counter-domain.js";

describe("partition routing", () => {
  it("is the 32-bit FNV-1a hash of the aggregate uuid's UTF-8 bytes, modulo n", () => {
    // The FNV-1a test vectors, read through a modulus above every 32-bit hash.
    expect(partitionOf("", 2 ** 32)).toBe(0x811c9dc5);
    expect(partitionOf("a", 2 ** 32)).toBe(0xe40c292c);
    expect(partitionOf("foobar", 2 ** 32)).toBe(0xbf9cf968);
    // Outside ASCII, the UTF-8 bytes: "é" is C3 A9.
    const bytes = [0xc3, 0xa9];
    let h = 0x811c9dc5;
    for (const b of bytes) h = Math.imul(h ^ b, 16777619) >>> 0;
    expect(partitionOf("é", 2 ** 32)).toBe(h);
    // Fixed values for uuids: a release that changed them would move aggregates between partitions.
    expect(partitionOf("0190f3a2-5b7c-7d1e-8f00-123456789abc", 4)).toBe(partitionOf("0190f3a2-5b7c-7d1e-8f00-123456789abc", 4));
    expect([0, 1, 2, 3].map((i) => partitionOf(`00000000-0000-7000-8000-00000000000${i}`, 4))).toEqual(
      [0, 1, 2, 3].map((i) => (Number(fnv(`00000000-0000-7000-8000-00000000000${i}`)) >>> 0) % 4),
    );
  });

  it("spreads uuids evenly", () => {
    const counts = [0, 0, 0, 0];
    for (let i = 0; i < 20_000; i++) counts[partitionOf(newUuid(), 4)]!++;
    for (const c of counts) expect(c).toBeGreaterThan(4_400);
  });

  it("withPartitions takes an integer in 1..256", () => {
    for (const bad of [0, -1, 1.5, 257, Number.NaN]) {
      let err: unknown;
      try {
        withPartitions(bad);
      } catch (e) {
        err = e;
      }
      expect(isMnemeError(err, "INVALID_REQUEST"), String(bad)).toBe(true);
    }
  });
});

function fnv(s: string): number {
  let h = 0x811c9dc5;
  for (const b of new TextEncoder().encode(s)) h = Math.imul(h ^ b, 16777619) >>> 0;
  return h;
}

describe("a partitioned readmodel on one instance", () => {
  const make = () => {
    const f = createFacade();
    f.registerDomain(Counter);
    const rm = new CounterTotals(f, "Totals", withPartitions(4));
    f.registerReadmodel(rm);
    return { f, rm };
  };

  it("applies every event once, each aggregate's in order, and lists its partitions", async () => {
    const { f, rm } = make();
    await f.start();
    const counters = Array.from({ length: 12 }, (_, i) => `c-${i}`);
    const seen = new Map<string, number[]>();
    for (let round = 0; round < 5; round++) {
      const r = await f.dispatch(IncrementMany, { counterUuids: counters, by: round + 1 }, { waitToFinish: true });
      expect(r.handlerErrors).toEqual([]);
      for (const e of r.events) seen.set(e.aggregateUuid, [...(seen.get(e.aggregateUuid) ?? []), e.position]);
    }
    for (const c of counters) expect(await rm.total(c)).toBe(15);
    expect([...rm.applied].sort((a, b) => a - b)).toEqual([...seen.values()].flat().sort((a, b) => a - b));
    // Per aggregate, in position order.
    for (const positions of seen.values()) expect(rm.applied.filter((p) => positions.includes(p))).toEqual(positions);
    const info = f.runtime.listEventHandlers().find((h) => h.eventHandlerName === "Totals")!;
    const id = f.runtime.systemInfo().instanceId;
    expect(info.state).toBe("running");
    expect(info.holder).toBe(id);
    expect(info.partitions).toEqual([0, 1, 2, 3].map((partition) => ({ partition, holder: id, state: "running", lastPosition: 60 })));
    expect(info.lastPosition).toBe(60);
    await f.stop();
  });

  it("restores from zero every partition together, blue-green", async () => {
    const { f, rm } = make();
    await f.start();
    for (let i = 0; i < 40; i++) await f.dispatch(Increment, { counterUuid: `c-${i % 8}`, by: 1 });
    await rm.idle();
    const before = await rm.allTotals();
    const r = await f.runtime.controlEventHandler({ action: "restore", eventHandlerName: "Totals", restoreFromZero: true });
    expect(r.state).toBe("running");
    expect(await rm.allTotals()).toEqual(before);
    expect(rm.applied.length).toBe(40);
    const w = await f.dispatch(Increment, { counterUuid: "c-0", by: 1 }, { waitToFinish: true });
    expect(w.handlerErrors).toEqual([]);
    expect(await rm.total("c-0")).toBe(6);
    await f.stop();
  });

  it("catches up with one read of the store between its partitions, each event applied once", async () => {
    // The store counts the events its readAll hands out (the facade reads through it).
    const stored = new MemoryEventRepository();
    let read = 0;
    const counting = new Proxy(stored, {
      get(target, key) {
        if (key === "readAll")
          return async function* (opts?: ReadAllOptions) {
            for await (const page of target.readAll(opts)) {
              read += page.length;
              yield page;
            }
          };
        const v: unknown = Reflect.get(target, key);
        return typeof v === "function" ? (v as (...a: unknown[]) => unknown).bind(target) : v;
      },
    });
    const f = createFacade({ eventRepository: counting });
    f.registerDomain(Counter);
    const counters = Array.from({ length: 64 }, () => newUuid());
    const n = 5_000;
    await f.start();
    await f.eventRepository.append(
      Array.from({ length: n }, (_, i) => ({
        domain: "Counter",
        name: "Incremented",
        aggregateUuid: counters[i % 64]!,
        payload: { by: 1 },
      })),
    );
    const rm = new CounterTotals(f, "Totals", withPartitions(4), withRestoreBatchSize(500));
    read = 0;
    f.registerReadmodel(rm);
    while (rm.state !== "running" || rm.lastPosition < n) await new Promise((r) => setTimeout(r, 5));
    // Four lanes reading on their own would read 20,000 (each every event); the timestamps of the checkpoints read a few.
    expect(read).toBeGreaterThanOrEqual(n);
    expect(read).toBeLessThan(n + 100);
    expect([...rm.applied].sort((a, b) => a - b)).toEqual(Array.from({ length: n }, (_, i) => i + 1));
    for (const c of counters) expect(await rm.total(c)).toBe(Math.floor(n / 64) + (counters.indexOf(c) < n % 64 ? 1 : 0));
    await f.stop();
  });

  it("stops and starts as one handler", async () => {
    const { f, rm } = make();
    await f.start();
    await f.runtime.controlEventHandler({ action: "stop", eventHandlerName: "Totals" });
    expect(rm.state).toBe("stopped");
    for (let i = 0; i < 10; i++) await f.dispatch(Increment, { counterUuid: `c-${i}`, by: 2 });
    await f.runtime.controlEventHandler({ action: "start", eventHandlerName: "Totals" });
    expect(rm.state).toBe("running");
    for (let i = 0; i < 10; i++) expect(await rm.total(`c-${i}`)).toBe(2);
    await f.stop();
  });
});

describe("a handler's name never reaches the keys of another handler", () => {
  // The framework keys a handler's state by its name: the checkpoints and locks of its partitions (`<name>#p<i>`,
  // `<name>#partitions`, `<name>#member<k>`), its rebuild (`<name>#rebuild`) and its collections (`<name>:<collection>`).
  // A readmodel named "Totals#p0" took partition 0's checkpoint of "Totals", whose aggregates then silently stayed
  // at 0; one named "Totals:Audit" had its documents replaced (emptied) by a restore from zero of "Totals".
  it("refuses a name with '#' or ':' at registration, whatever the other handlers are", async () => {
    for (const name of ["Totals#p0", "Totals#partitions", "Totals#member0", "Totals#rebuild", "Totals:Audit", "a:b", "#"]) {
      const f = createFacade();
      f.registerDomain(Counter);
      f.registerReadmodel(new CounterTotals(f, "Totals", withPartitions(2)));
      let err: unknown;
      try {
        f.registerReadmodel(new CounterTotals(f, name));
      } catch (e) {
        err = e;
      }
      expect(isMnemeError(err, "INVALID_EVENT_HANDLER"), name).toBe(true);
      expect((err as Error).message).toContain(JSON.stringify(name));
      // A plain event handler too: every handler is registered through the same check.
      let plain: unknown;
      try {
        f.registerReadmodel({ domain: "Counter", name, getDomainEvents: () => [], getDomainEventHandlers: () => [] });
      } catch (e) {
        plain = e;
      }
      expect(isMnemeError(plain, "INVALID_EVENT_HANDLER"), name).toBe(true);
      await f.start();
      // The partitioned readmodel is untouched: its partitions apply every event.
      const counters = Array.from({ length: 8 }, (_, i) => `c-${i}`);
      await f.dispatch(IncrementMany, { counterUuids: counters, by: 1 }, { waitToFinish: true });
      const totals = f.readmodel<CounterTotals>("Totals");
      for (const c of counters) expect(await totals.total(c), `${name} ${c}`).toBe(1);
      await f.stop();
    }
  });
});
