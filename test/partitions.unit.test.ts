/**
 * Partitioned handlers (`withPartitions`) on one instance: the routing hash is
 * fixed, partitions share the work, each event is applied once in aggregate
 * order, the listing shows the partitions, and a restore from zero switches
 * every partition together.
 */
import { describe, expect, it } from "vitest";
import { createFacade, isMnemeError, newUuid, withPartitions } from "mneme";
import { partitionOf } from "../src/readmodel/partition-routing.js";
import { Counter, CounterTotals, Increment, IncrementMany } from "./support/counter-domain.js";

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
