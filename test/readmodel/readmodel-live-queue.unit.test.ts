/**
 * The live queue of a handler's runner: first in, first out through long
 * bursts (a pump behind thousands of commands), and a readmodel behind such a
 * burst applies every event once, in order.
 */
import { describe, expect, it } from "vitest";
import { createFacade } from "mneme";
import { LiveQueue } from "../../src/readmodel/runner-state.js";
import { Counter, CounterTotals, Increment } from "../support/counter-domain.js";
import type { Event } from "mneme";

const item = (n: number): readonly Event[] => [{ position: n } as Event];

describe("LiveQueue", () => {
  it("gives items back in the order pushed, across the compaction of taken slots", () => {
    const q = new LiveQueue();
    const taken: number[] = [];
    let pushed = 0;
    // Two pushes per take: the queue grows past the compaction threshold while it is taken from.
    for (let i = 0; i < 5000; i++) {
      q.push(item(++pushed));
      q.push(i % 100 === 0 ? null : item(++pushed));
      const t = q.take();
      if (t !== null && t !== undefined) taken.push(t[0]!.position);
    }
    expect(q.length).toBeGreaterThan(4000);
    const next = q.peek();
    expect(next === undefined ? undefined : next?.[0]?.position).toBe(taken[taken.length - 1]! + 1);
    for (let t = q.take(); t !== undefined; t = q.take()) if (t !== null) taken.push(t[0]!.position);
    expect(q.length).toBe(0);
    expect(taken).toEqual(Array.from({ length: pushed }, (_, i) => i + 1));
  });

  it("is empty after clear, and takes nothing when empty", () => {
    const q = new LiveQueue();
    expect(q.take()).toBeUndefined();
    for (let i = 1; i <= 2000; i++) q.push(item(i));
    for (let i = 0; i < 1500; i++) q.take();
    q.clear();
    expect(q.length).toBe(0);
    expect(q.peek()).toBeUndefined();
    q.push(null);
    expect(q.take()).toBeNull();
    expect(q.length).toBe(0);
  });
});

describe("a readmodel behind a burst of commands", () => {
  it("applies every event of thousands of commands dispatched without waiting, once and in order", async () => {
    const f = createFacade();
    f.registerDomain(Counter);
    const rm = new CounterTotals(f);
    f.registerReadmodel(rm);
    await f.start();
    const n = 3000;
    for (let i = 0; i < n; i++) await f.dispatch(Increment, { counterUuid: `c${i % 7}`, by: 1 });
    await f.dispatch(Increment, { counterUuid: "c0", by: 1 }, { waitToFinish: true });
    expect(rm.lastPosition).toBe(n + 1);
    const totals = await rm.allTotals();
    expect(Object.values(totals).reduce((a, b) => a + b, 0)).toBe(n + 1);
    expect(totals.c1).toBe(Math.ceil((n - 1) / 7));
    await f.stop();
  });
});
