import { describe, expect, it } from "vitest";
import { createFacade, newUuid, withReadmodelStoreBackend, type Facade, type ReadmodelOption } from "mneme";
import { MemoryReadmodelStoreBackend } from "mneme/memory";
import type { ReadmodelCollection } from "mneme/store";
import { Counter, CounterTotals, Increment } from "../support/counter-domain.js";

/** CounterTotals that can drop counters' totals through its own collection (a readmodel's GenerationalCollection). */
class PurgeableTotals extends CounterTotals {
  constructor(facade: Facade, ...options: ReadmodelOption[]) {
    super(facade, "PurgeableTotals", ...options);
  }

  purge(keys: readonly string[]): Promise<number> {
    const totals = this.collection<{ total: number }>("totals");
    return totals.deleteMany!(keys);
  }
}

/** A memory backend whose collections have no deleteMany (as a backend written before it may). */
class BackendWithoutDeleteMany extends MemoryReadmodelStoreBackend {
  deletes = 0;

  override collection<T>(...args: Parameters<MemoryReadmodelStoreBackend["collection"]>): ReadmodelCollection<T> {
    const col = super.collection<T>(...args);
    const delete1 = (key: string) => {
      this.deletes++;
      return col.delete(key);
    };
    return new Proxy(col, {
      get: (target, prop) => {
        if (prop === "deleteMany") return undefined;
        if (prop === "delete") return delete1;
        const v = Reflect.get(target, prop) as unknown;
        return typeof v === "function" ? (v as (...a: unknown[]) => unknown).bind(target) : v;
      },
    });
  }
}

async function withTotals(backend?: MemoryReadmodelStoreBackend): Promise<{ facade: Facade; rm: PurgeableTotals; uuids: string[] }> {
  const facade = createFacade({ appName: "delete-many" });
  facade.registerDomain(Counter);
  const rm = new PurgeableTotals(facade, ...(backend === undefined ? [] : [withReadmodelStoreBackend(backend)]));
  facade.registerReadmodel(rm);
  await facade.start();
  const uuids = [newUuid(), newUuid(), newUuid()];
  for (const counterUuid of uuids) await facade.dispatch(Increment, { counterUuid, by: 2 }, { waitToFinish: true });
  return { facade, rm, uuids };
}

describe("a readmodel's collection: deleteMany", () => {
  it("deletes through the backend's deleteMany and counts the documents that were there", async () => {
    const { facade, rm, uuids } = await withTotals();
    const [a, b, c] = uuids as [string, string, string];
    expect(await rm.purge([a, "never", c])).toBe(2);
    expect(await rm.allTotals()).toEqual({ [b]: 2 });
    expect(await rm.purge([])).toBe(0);
    await facade.stop();
  });

  it("on a backend without deleteMany, checks every key first and then deletes them one by one", async () => {
    const backend = new BackendWithoutDeleteMany();
    const { facade, rm, uuids } = await withTotals(backend);
    const [a, b, c] = uuids as [string, string, string];
    await expect(rm.purge([a, 7 as unknown as string])).rejects.toMatchObject({ code: "INVALID_REQUEST" });
    await expect(rm.purge(a as unknown as string[])).rejects.toMatchObject({ code: "INVALID_REQUEST" });
    expect(backend.deletes).toBe(0);
    expect(await rm.allTotals()).toEqual({ [a]: 2, [b]: 2, [c]: 2 });
    expect(await rm.purge([a, "never", c, a])).toBe(2);
    expect(backend.deletes).toBe(4);
    expect(await rm.allTotals()).toEqual({ [b]: 2 });
    await facade.stop();
  });
});
