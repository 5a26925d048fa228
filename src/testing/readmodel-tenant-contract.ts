import { expect } from "vitest";
import { readmodelBackendCapabilities } from "../store/backend.js";
import type { ReadmodelCollection, ReadmodelStoreBackend } from "../store/readmodel-store-backend.js";
import type { ContractTest } from "./contract-harness.js";

interface Doc {
  id: string;
  n: number;
}

const doc = (id: string, n: number): Doc => ({ id, n });
const idsOf = (xs: readonly Doc[]): string[] => xs.map((x) => x.id);

/** The tenant views of one collection: A's, B's, a write-only one of A (a handler's), and the unscoped one. */
function views(backend: ReadmodelStoreBackend, name = "docs") {
  return {
    a: backend.collection<Doc>(name, { readTenantUuid: "A", writeTenantUuid: "A" }),
    b: backend.collection<Doc>(name, { readTenantUuid: "B", writeTenantUuid: "B" }),
    writeA: backend.collection<Doc>(name, { writeTenantUuid: "A" }),
    writeB: backend.collection<Doc>(name, { writeTenantUuid: "B" }),
    all: backend.collection<Doc>(name),
  };
}

async function expectSees(col: ReadmodelCollection<Doc>, keys: string[]): Promise<void> {
  expect(idsOf(await col.list())).toEqual(keys);
  expect(await col.count()).toBe(keys.length);
  expect([...(await col.getMany(["a1", "a2", "b1", "n1"])).keys()]).toEqual(["a1", "a2", "b1", "n1"].filter((k) => keys.includes(k)));
  for (const k of ["a1", "b1", "n1"]) expect((await col.get(k))?.id).toBe(keys.includes(k) ? k : undefined);
}

/**
 * The tests of the optional `tenantScopes` capability (a tenant stored with
 * each document), part of the ReadmodelStoreBackend contract; they check
 * nothing of a backend without it.
 * @internal
 */
export function tenantScopeContractTests(test: ContractTest<ReadmodelStoreBackend>): void {
  test("tenantScopes: a read scoped to a tenant sees only the documents written with that tenant", async (backend) => {
    if (backend.tenantScopes !== true) return;
    const v = views(backend);
    await v.writeA.put("a1", doc("a1", 1));
    await v.a.putMany([["a2", doc("a2", 2)]]);
    await v.writeB.put("b1", doc("b1", 3));
    await v.all.put("n1", doc("n1", 4));
    await expectSees(v.a, ["a1", "a2"]);
    await expectSees(v.b, ["b1"]);
    // Unscoped: every document, those without a tenant included.
    await expectSees(v.all, ["a1", "a2", "b1", "n1"]);
    // where, orderBy and paging apply within the tenant.
    expect(idsOf(await v.a.list({ orderBy: "n", offset: 1, limit: 1 }))).toEqual(["a2"]);
    expect(await v.a.count({ n: 3 })).toBe(0);
    expect(idsOf(await v.b.list({ where: { n: 3 } }))).toEqual(["b1"]);
    // Another collection of the same name's tenant stays apart.
    expect(await views(backend, "other").a.count()).toBe(0);
  });

  test("tenantScopes: a write without a tenant keeps the stored tenant; a tenant's write changes it", async (backend) => {
    if (backend.tenantScopes !== true) return;
    const v = views(backend);
    await v.writeA.put("k", doc("k", 1));
    await v.all.put("k", doc("k", 2));
    await v.all.putMany([["k", doc("k", 3)]]);
    expect(await v.a.get("k")).toEqual(doc("k", 3));
    expect(await v.b.get("k")).toBeUndefined();
    await v.writeB.putMany([["k", doc("k", 4)]]);
    expect(await v.a.get("k")).toBeUndefined();
    expect(await v.b.get("k")).toEqual(doc("k", 4));
    // Deleted and written again without a tenant: it has none.
    await v.all.delete("k");
    await v.all.put("k", doc("k", 5));
    expect(await v.b.get("k")).toBeUndefined();
    expect(await v.all.get("k")).toEqual(doc("k", 5));
  });

  test('tenantScopes: a writer without a tenant ("") keeps the tenant of a document it replaces; a new one gets ""', async (backend) => {
    if (backend.tenantScopes !== true) return;
    const v = views(backend);
    // The erasure of a handler of Privacy.SubjectForgotten (an event without a tenant): documents stay in their tenant.
    const none = backend.collection<Doc>("docs", { writeTenantUuid: "" });
    const tenantNone = backend.collection<Doc>("docs", { readTenantUuid: "" });
    await v.writeA.put("a1", doc("a1", 1));
    await v.writeB.put("b1", doc("b1", 2));
    await v.all.put("n1", doc("n1", 3));
    await none.put("a1", doc("a1", 10));
    await none.putMany([
      ["b1", doc("b1", 20)],
      ["n1", doc("n1", 30)],
      ["g1", doc("g1", 40)],
    ]);
    expect(await v.a.get("a1")).toEqual(doc("a1", 10));
    expect(await v.b.get("b1")).toEqual(doc("b1", 20));
    expect(idsOf(await tenantNone.list())).toEqual(["g1"]);
    expect(await v.all.get("n1")).toEqual(doc("n1", 30));
    // Inside a transaction too, for a document put earlier in it.
    await backend.transaction(async () => {
      await v.writeA.put("a2", doc("a2", 5));
      await none.put("a2", doc("a2", 50));
      await none.put("b1", doc("b1", 21));
      expect(await v.a.get("a2")).toEqual(doc("a2", 50));
    });
    await expectSees(v.a, ["a1", "a2"]);
    await expectSees(v.b, ["b1"]);
    expect(await v.b.get("b1")).toEqual(doc("b1", 21));
  });

  test("tenantScopes: inside a transaction scoped reads see its writes with their tenants; a rollback drops them", async (backend) => {
    if (backend.tenantScopes !== true) return;
    const v = views(backend);
    await v.writeA.put("a1", doc("a1", 1));
    await backend.transaction(async () => {
      await v.writeB.put("b1", doc("b1", 2));
      await v.all.put("a1", doc("a1", 10));
      await v.writeA.putMany([["a2", doc("a2", 3)]]);
      expect(idsOf(await v.b.list())).toEqual(["b1"]);
      expect(await v.a.get("a1")).toEqual(doc("a1", 10));
      expect(await v.a.get("b1")).toBeUndefined();
      expect([...(await v.a.getMany(["a1", "a2", "b1"])).keys()]).toEqual(["a1", "a2"]);
      expect(await v.a.count()).toBe(2);
    });
    await expectSees(v.a, ["a1", "a2"]);
    await expectSees(v.b, ["b1"]);
    await expect(
      backend.transaction(async () => {
        await v.writeB.put("a1", doc("a1", 99));
        expect(await v.b.count()).toBe(2);
        throw new Error("roll back");
      }),
    ).rejects.toThrow("roll back");
    await expectSees(v.b, ["b1"]);
    expect(await v.a.get("a1")).toEqual(doc("a1", 10));
  });

  test("tenantScopes: replaceCollections moves each document with its tenant", async (backend) => {
    const can = readmodelBackendCapabilities(backend);
    if (!can.tenantScopes || !can.replaceCollections) return;
    const next = views(backend, "next");
    await next.writeA.put("a1", doc("a1", 1));
    await next.writeB.put("b1", doc("b1", 2));
    await views(backend, "served").writeB.put("old", doc("old", 0));
    await backend.replaceCollections!([["served", "next"]]);
    const served = views(backend, "served");
    expect(idsOf(await served.a.list())).toEqual(["a1"]);
    expect(idsOf(await served.b.list())).toEqual(["b1"]);
    expect(await next.all.count()).toBe(0);
  });
}
