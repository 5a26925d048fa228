/**
 * The delivery pump under notifications that arrive late or out of order, as
 * they do on Postgres: another commit's NOTIFY can make a handler read the
 * store (and apply this process's own events) before this process's own
 * commit callback has delivered them. Such a late notification holds only
 * events the handler applied already; the pump it starts ends without awaiting
 * anything. It must never be left behind looking like a running pump: that
 * kept every later event queued with no pump to apply it (the handler stayed
 * `running`) and made stop() spin.
 */
import { describe, expect, it } from "vitest";
import { createFacade, type Event } from "mneme";
import type { AppendListener } from "mneme/store";
import { Counter, CounterTotals, Increment } from "../support/counter-domain.js";
import { until } from "../support/until.js";
import { MemoryEventRepository } from "mneme/memory";

/** The in-memory repository, with its append notifications held until the test releases them, and a "read the store" signal. */
class LateNotifyingRepository extends MemoryEventRepository {
  readonly held: (() => void)[] = [];
  hold = true;
  readonly #external = new Set<() => void>();

  override onAppend(listener: AppendListener): () => void {
    return super.onAppend((events: readonly Event[]) => {
      if (this.hold) this.held.push(() => listener(events));
      else listener(events);
    });
  }

  onExternalAppend(listener: () => void): () => void {
    this.#external.add(listener);
    return () => this.#external.delete(listener);
  }

  /** What another instance's commit does: the facade is told to read the store. */
  signalExternal(): void {
    for (const l of this.#external) l();
  }

  releaseHeld(): void {
    for (const deliver of this.held.splice(0)) deliver();
  }
}

/** Resolves "timed out" after `ms` unless `p` settles first (timers still run: nothing here spins). */
function within<T>(p: Promise<T>, ms: number): Promise<T | "timed out"> {
  return Promise.race([p, new Promise<"timed out">((r) => setTimeout(() => r("timed out"), ms))]);
}

describe("the delivery pump", () => {
  it("a late notification of events already applied leaves no settled pump behind: later events are applied and stop() resolves", async () => {
    const repo = new LateNotifyingRepository();
    const f = createFacade({ eventRepository: repo });
    f.registerDomain(Counter);
    const totals = new CounterTotals(f);
    f.registerReadmodel(totals);
    await f.start();

    // Position 1 commits; its own notification is late. Another commit's signal makes the handler read the store first.
    await f.dispatch(Increment, { counterUuid: "c", by: 1 });
    repo.signalExternal();
    await until(() => totals.applied.length === 1, "the read of the store applied position 1");
    // The late notification arrives: everything in it is applied already.
    repo.releaseHeld();

    repo.hold = false;
    const next = await within(
      f.dispatch(Increment, { counterUuid: "c", by: 2 }, { waitToFinish: true }).then((r) => r.handlerErrors),
      5000,
    );
    expect(next).toEqual([]);
    expect(totals.applied).toEqual([1, 2]);
    expect(await totals.total("c")).toBe(3);
    expect(f.runtime.listEventHandlers()[0]!.state).toBe("running");
    expect(await within(f.stop(), 5000)).toBeUndefined();
  });

  it("concurrent dispatches whose notifications arrive late, reordered and duplicated by reads of the store: every event applied once, every wait resolves", async () => {
    const repo = new LateNotifyingRepository();
    const f = createFacade({ eventRepository: repo });
    f.registerDomain(Counter);
    const totals = new CounterTotals(f);
    f.registerReadmodel(totals);
    await f.start();

    const n = 60;
    const waits: Promise<unknown>[] = [];
    for (let round = 0; round < n / 6; round++) {
      for (let i = 0; i < 6; i++) {
        waits.push(f.dispatch(Increment, { counterUuid: `c${i % 3}`, by: 1 }, { waitToFinish: true }).then((r) => r.handlerErrors));
      }
      await new Promise((r) => setTimeout(r, 1));
      // Another instance's signal first (the handler reads the store), then this round's own notifications, newest first.
      if (round % 2 === 0) repo.signalExternal();
      const held = repo.held.splice(0).reverse();
      for (const deliver of held) {
        deliver();
        await Promise.resolve();
      }
    }
    repo.hold = false;
    repo.releaseHeld();
    const results = await within(Promise.all(waits), 10_000);
    expect(results).toEqual(Array.from({ length: n }, () => []));
    expect(totals.applied).toEqual(Array.from({ length: n }, (_, i) => i + 1));
    expect(await totals.allTotals()).toEqual({ c0: 20, c1: 20, c2: 20 });
    expect(await within(f.stop(), 5000)).toBeUndefined();
  });
});
