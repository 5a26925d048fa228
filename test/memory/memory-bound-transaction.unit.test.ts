/**
 * The memory backend's transaction handed over explicitly (BoundTransaction):
 * what is written through it commits together or is undone together, with no
 * async context; a write from outside waits for it; a write through it after
 * it ended is refused; its fence refuses the commit once the lease was taken
 * again. And the ProjectionReadmodel that runs its batches so: a subclass, or
 * a projection given a handler function of its own, is applied the usual way
 * (its writes through its collections commit, nothing waits forever).
 */
import { AsyncLocalStorage } from "node:async_hooks";
import { describe, expect, it, vi } from "vitest";
import { createFacade, defineDomain, type Facade, ProjectionReadmodel } from "mneme";
import { MemoryReadmodelStoreBackend } from "mneme/memory";
import type { ReadmodelCollection } from "mneme/store";
import { type BoundTransaction, boundTransactionsOf } from "../../src/store/bound-transaction.js";
import { isLockLostError } from "../../src/store/lock-fencing.js";
import { alice } from "../support/shared-places.js";

function bound(backend: MemoryReadmodelStoreBackend) {
  const run = boundTransactionsOf(backend);
  if (run === undefined) throw new Error("the memory backend declares bound transactions");
  return run;
}

describe("MemoryReadmodelStoreBackend's bound transactions", () => {
  it("commits its writes and checkpoint together; a throw undoes them all", async () => {
    const backend = new MemoryReadmodelStoreBackend();
    await bound(backend)(async (tx) => {
      await tx.collection<{ n: number }>("c").put("a", { n: 1 });
      await tx.setCheckpoint("h", 5);
    });
    expect(await backend.collection("c").get("a")).toEqual({ n: 1 });
    expect(await backend.getCheckpoint("h")).toBe(5);
    await expect(
      bound(backend)(async (tx) => {
        await tx.collection<{ n: number }>("c").put("a", { n: 2 });
        await tx.collection<{ n: number }>("c").put("b", { n: 2 });
        await tx.setCheckpoint("h", 9);
        throw new Error("boom");
      }),
    ).rejects.toThrow("boom");
    expect(await backend.collection("c").get("a")).toEqual({ n: 1 });
    expect(await backend.collection("c").get("b")).toBeUndefined();
    expect(await backend.getCheckpoint("h")).toBe(5);
  });

  it("a write from outside waits for it; a write through it after its end is refused", async () => {
    const backend = new MemoryReadmodelStoreBackend();
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    let kept: BoundTransaction | undefined;
    const order: string[] = [];
    const tx = bound(backend)(async (t) => {
      kept = t;
      await t.collection("c").put("k", { by: "tx" });
      await held;
      order.push("tx end");
    });
    await new Promise((r) => setTimeout(r, 0));
    const outside = backend
      .collection("c")
      .put("k", { by: "outside" })
      .then(() => order.push("outside"));
    await new Promise((r) => setTimeout(r, 5));
    expect(order).toEqual([]);
    release();
    await tx;
    await outside;
    expect(order).toEqual(["tx end", "outside"]);
    expect(await backend.collection("c").get("k")).toEqual({ by: "outside" });
    await expect(kept!.collection("c").put("late", {})).rejects.toMatchObject({ code: "INVALID_STATE" });
    await expect(kept!.setCheckpoint("h", 1)).rejects.toMatchObject({ code: "INVALID_STATE" });
    expect(await backend.collection("c").get("late")).toBeUndefined();
  });

  it("inside a running transaction(fn) it joins it", async () => {
    const backend = new MemoryReadmodelStoreBackend();
    await expect(
      backend.transaction(async () => {
        await bound(backend)((tx) => tx.collection("c").put("j", { n: 1 }));
        expect(await backend.collection("c").get("j")).toEqual({ n: 1 });
        throw new Error("undo");
      }),
    ).rejects.toThrow("undo");
    expect(await backend.collection("c").get("j")).toBeUndefined();
  });

  it("its fence refuses the commit (lock lost, nothing written) once the lease was taken again", async () => {
    const backend = new MemoryReadmodelStoreBackend();
    expect(await backend.tryLock("h")).toBe(true);
    const token = backend.fencingToken("h")!;
    const err = await bound(backend)(async (tx) => {
      await tx.checkFencingToken("h", token);
      await tx.collection("c").put("f", { n: 1 });
      await backend.unlock("h");
      expect(await backend.tryLock("h")).toBe(true);
    }).catch((e: unknown) => e);
    expect(isLockLostError(err)).toBe(true);
    expect(await backend.collection("c").get("f")).toBeUndefined();
  });
});

const Shop = defineDomain("Shop");
const Place = Shop.command<{ id: string }>("Place");
const Placed = Shop.event<{ id: string }>("Placed");
const Order = Shop.aggregate<{ n: number }>("Order", { initialState: () => ({ n: 0 }), evolve: { Placed: (s) => ({ n: s.n + 1 }) } });
Shop.handleCommand(Place, (_ctx, _c, p) => [Placed.create(p.id, p)]);

/** A subclass writing to a collection of its own in its handler functions: applied the usual way. */
class CountedOrders extends ProjectionReadmodel<{ n: number }> {
  readonly counts: ReadmodelCollection<{ n: number }>;
  constructor(f: Facade) {
    super(f, { aggregate: Order, name: "CountedOrders" });
    this.counts = this.collection("counts");
    this.addDomainEventHandler(Placed, async (_ctx, e) => {
      const n = (await this.counts.get("all"))?.n ?? 0;
      await this.counts.put("all", { n: n + 1 });
      await this.counts.put(e.aggregateUuid, { n: 1 });
    });
  }
}

describe("a ProjectionReadmodel on the memory backend", () => {
  it("applies its batches in bound transactions; a subclass writing its own collections is applied the usual way", async () => {
    const f = createFacade({ appName: "bound-projection" });
    f.registerDomain(Shop);
    const plain = new ProjectionReadmodel(f, { aggregate: Order });
    const counted = new CountedOrders(f);
    f.registerReadmodel(plain);
    f.registerReadmodel(counted);
    await f.start();
    try {
      for (let i = 0; i < 5; i++)
        await f.dispatch(Place, { id: `0190a7a2-0000-7000-8000-00000000000${i % 2}` }, { reqCtx: alice, waitToFinish: true });
      const one = "0190a7a2-0000-7000-8000-000000000000";
      expect((await plain.getModel(one))?.version).toBe(3);
      expect(await counted.counts.get(one)).toEqual({ n: 1 });
      expect(await counted.counts.get("all")).toEqual({ n: 5 });
      expect((await plain.getModelList()).total).toBe(2);
      await f.runtime.controlEventHandler({ action: "restore", eventHandlerName: plain.name, restoreFromZero: true });
      expect((await plain.getModel(one))?.version).toBe(3);
    } finally {
      await f.stop();
    }
  });

  it("applies a command's event with no AsyncLocalStorage entered (the transaction is an argument)", async () => {
    const f = createFacade({ appName: "bound-projection-als" });
    f.registerDomain(Shop);
    const plain = new ProjectionReadmodel(f, { aggregate: Order });
    f.registerReadmodel(plain);
    await f.start();
    const run = vi.spyOn(AsyncLocalStorage.prototype, "run");
    try {
      for (let i = 0; i < 3; i++)
        await f.dispatch(Place, { id: "0190a7a2-0000-7000-8000-000000000007" }, { reqCtx: alice, waitToFinish: true });
      expect(run).not.toHaveBeenCalled();
      expect((await plain.getModel("0190a7a2-0000-7000-8000-000000000007"))?.version).toBe(3);
    } finally {
      run.mockRestore();
      await f.stop();
    }
  });
});
