/**
 * The declaration side of indexed collections, on the memory backend:
 * `collection(name, { indexes })` is checked, a later call without
 * `indexes` keeps the declaration, another declaration of the same
 * collection is INVALID_REQUEST, and each collection reached (served
 * generation, then the next one during a rebuild) is handed to the backend's
 * ensureIndexes before its first use, with the tenant leading a
 * tenant-scoped collection's indexes.
 */
import { describe, expect, it } from "vitest";
import { BaseReadmodel, createFacade, type Facade, withReadmodelStoreBackend } from "mneme";
import { MemoryReadmodelStoreBackend } from "mneme/memory";
import type { CollectionIndex, EnsureIndexesOptions, ReadmodelCollection } from "mneme/store";
import { expectRejectsWith } from "../../src/testing/contract-harness.js";
import { Counter, IncrementMany, Incremented } from "../support/counter-domain.js";

/** A memory backend that records every ensureIndexes call. */
class Recording extends MemoryReadmodelStoreBackend {
  calls: { collection: string; indexes: string[][]; tenantFirst: boolean }[] = [];
  override async ensureIndexes(collection: string, indexes: readonly (readonly string[])[], options?: EnsureIndexesOptions): Promise<void> {
    await super.ensureIndexes(collection, indexes, options);
    this.calls.push({ collection, indexes: indexes.map((i) => [...i]), tenantFirst: options?.tenantFirst === true });
  }
}

class Orders extends BaseReadmodel {
  constructor(f: Facade, backend: Recording) {
    super(f, withReadmodelStoreBackend(backend));
    this.domain = "Counter";
    this.name = "Orders";
    this.addDomainEventHandler(Incremented, async (_ctx, e, p) => {
      // Declared where it is first reached (in the handler), as docs/readmodels.md allows.
      await this.orders().put(e.aggregateUuid, { status: p.by % 2 === 1 ? "open" : "closed", at: e.position });
    });
  }
  orders(): ReadmodelCollection<{ status: string; at: number }> {
    return this.collection("orders", { indexes: [["status", "at"], "at", ["at"]] });
  }
  declare(name: string, indexes: unknown, tenancy?: "global" | "tenant"): ReadmodelCollection<unknown> {
    return this.collection(name, { indexes: indexes as CollectionIndex[], ...(tenancy === undefined ? {} : { tenancy }) });
  }
  plain(name: string): ReadmodelCollection<unknown> {
    return this.collection(name);
  }
}

describe("indexed collections: the declaration", () => {
  it("checks it, keeps it for later calls, refuses another one for the same collection", async () => {
    const backend = new Recording();
    const f = createFacade();
    const rm = new Orders(f, backend);
    for (const bad of ["status", [["a.b"]], [[]], [["a", "a"]], [{ unique: true }], [7]])
      expect(() => rm.declare("x", bad)).toThrow(expect.objectContaining({ code: "INVALID_REQUEST" }) as Error);
    rm.declare("kept", [["a", "b"]], "global");
    await rm.plain("kept").count();
    expect(backend.calls).toEqual([{ collection: "Orders:kept", indexes: [["a", "b"]], tenantFirst: false }]);
    rm.declare("kept", [["a", "b"]], "global");
    expect(() => rm.declare("kept", [["a"]], "global")).toThrow(expect.objectContaining({ code: "INVALID_REQUEST" }) as Error);
    expect(() => rm.declare("kept", [["a", "b"]])).toThrow(expect.objectContaining({ code: "INVALID_REQUEST" }) as Error);
    await expectRejectsWith(() => backend.ensureIndexes("x", [["a.b"]]), "INVALID_REQUEST");
    // Not declared: no call.
    await rm.plain("other").count();
    expect(backend.calls.map((c) => c.collection)).toEqual(["Orders:kept"]);
  });

  it("each generation's collection gets the declared indexes before its first use; a tenant-scoped one led by the tenant", async () => {
    const backend = new Recording();
    const f = createFacade();
    f.registerDomain(Counter);
    const rm = new Orders(f, backend);
    f.registerReadmodel(rm);
    await f.start();
    try {
      await f.dispatch(IncrementMany, { counterUuids: ["a", "b", "c"], by: 1 }, { waitToFinish: true });
      const wanted = [["status", "at"], ["at"]];
      expect(backend.calls.length).toBeGreaterThan(0);
      expect(backend.calls.every((c) => c.collection === "Orders:orders" && c.tenantFirst)).toBe(true);
      expect(backend.calls[0]?.indexes).toEqual(wanted);
      backend.calls = [];
      await rm.restoreState(undefined, { fromZero: true }).done;
      expect(backend.calls.some((c) => c.collection === "Orders#rebuild:orders")).toBe(true);
      expect((await rm.orders().list({ where: { status: "open" }, orderBy: "at" })).length).toBe(3);
    } finally {
      await f.stop();
    }
  });
});
