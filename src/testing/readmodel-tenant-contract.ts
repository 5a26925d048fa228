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

/** The collection's deleteMany, or (optional) its delete one by one. */
async function deleteMany(c: ReadmodelCollection<Doc>, keys: string[]): Promise<number> {
  if (c.deleteMany !== undefined) return c.deleteMany(keys);
  let n = 0;
  for (const k of keys) if (await c.delete(k)) n++;
  return n;
}

async function expectConflict(p: Promise<unknown>): Promise<void> {
  await expect(p).rejects.toMatchObject({ code: "CONFLICT", message: expect.stringContaining("another tenant") as unknown });
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

  test("tenantScopes: a write without a tenant keeps the stored tenant; a tenant's write takes a tenantless document", async (backend) => {
    if (backend.tenantScopes !== true) return;
    const v = views(backend);
    await v.writeA.put("k", doc("k", 1));
    await v.all.put("k", doc("k", 2));
    await v.all.putMany([["k", doc("k", 3)]]);
    expect(await v.a.get("k")).toEqual(doc("k", 3));
    expect(await v.b.get("k")).toBeUndefined();
    // Deleted and written again without a tenant: it has none, and a tenant's write gives it that tenant.
    await v.all.delete("k");
    await v.all.put("k", doc("k", 5));
    expect(await v.b.get("k")).toBeUndefined();
    expect(await v.all.get("k")).toEqual(doc("k", 5));
    await v.writeB.putMany([["k", doc("k", 6)]]);
    expect(await v.b.get("k")).toEqual(doc("k", 6));
    expect(await v.a.get("k")).toBeUndefined();
  });

  test("tenantScopes: a tenant's put or putMany on a key holding another tenant's document is CONFLICT, nothing written", async (backend) => {
    if (backend.tenantScopes !== true) return;
    const v = views(backend);
    await v.writeA.put("a1", doc("a1", 1));
    await v.writeA.put("a2", doc("a2", 2));
    // A handler of B's event (write-only) and B's view alike.
    for (const b of [v.writeB, v.b]) {
      await expectConflict(b.put("a1", doc("a1", 99)));
      // One refused key: none of the batch is written, the fresh key neither.
      await expectConflict(
        b.putMany([
          ["fresh", doc("fresh", 9)],
          ["a2", doc("a2", 99)],
        ]),
      );
    }
    expect(await v.all.get("fresh")).toBeUndefined();
    await expectSees(v.a, ["a1", "a2"]);
    expect(await v.a.get("a1")).toEqual(doc("a1", 1));
    expect(await v.a.get("a2")).toEqual(doc("a2", 2));
    await expectSees(v.b, []);
    // A's own writes, trusted (unscoped) ones and those without a tenant ("") still replace it.
    await v.a.put("a1", doc("a1", 3));
    await v.all.put("a1", doc("a1", 4));
    await backend.collection<Doc>("docs", { writeTenantUuid: "" }).put("a1", doc("a1", 5));
    expect(await v.a.get("a1")).toEqual(doc("a1", 5));
  });

  test("tenantScopes: inside a transaction the refusal fails the transaction and nothing of it is committed", async (backend) => {
    if (backend.tenantScopes !== true) return;
    const v = views(backend);
    await v.writeA.put("a1", doc("a1", 1));
    await backend.setCheckpoint("h", 1);
    // On a committed document of A (a backend may report it at the put or at the commit).
    await expectConflict(
      backend.transaction(async () => {
        await v.writeB.put("b1", doc("b1", 2));
        await backend.setCheckpoint("h", 2);
        await v.writeB.putMany([["a1", doc("a1", 99)]]);
      }),
    );
    // On a document A put earlier in the same transaction.
    await expectConflict(
      backend.transaction(async () => {
        await v.writeA.put("a3", doc("a3", 3));
        await v.writeB.put("a3", doc("a3", 99));
      }),
    );
    expect(await backend.getCheckpoint("h")).toBe(1);
    await expectSees(v.a, ["a1"]);
    expect(await v.a.get("a1")).toEqual(doc("a1", 1));
    expect(await v.all.count()).toBe(1);
  });

  test("tenantScopes: a tenant's delete, deleteMany and clear leave other tenants' documents alone", async (backend) => {
    if (backend.tenantScopes !== true) return;
    const v = views(backend);
    const seed = async () => {
      await v.all.clear();
      await v.writeA.putMany([
        ["a1", doc("a1", 1)],
        ["a2", doc("a2", 2)],
      ]);
      await v.writeB.put("b1", doc("b1", 3));
      await v.all.put("n1", doc("n1", 4));
    };
    for (const inTx of [false, true]) {
      const run = <R>(fn: () => Promise<R>): Promise<R> => (inTx ? backend.transaction(fn) : fn());
      for (const b of [v.writeB, v.b]) {
        await seed();
        // Another tenant's document counts as absent: false, 0, and it stays; B's own and a tenantless one go.
        expect(await run(() => b.delete("a1"))).toBe(false);
        expect(await run(() => deleteMany(b, ["a1", "a2", "b1"]))).toBe(1);
        expect(await run(() => b.delete("n1"))).toBe(true);
        await expectSees(v.all, ["a1", "a2"]);
        await seed();
        // clear empties the writer's tenant only.
        await run(() => b.clear());
        await expectSees(v.all, ["a1", "a2", "n1"]);
        await expectSees(v.a, ["a1", "a2"]);
      }
    }
    // In one transaction: a document A put earlier in it stays too.
    await backend.transaction(async () => {
      await v.writeA.put("a3", doc("a3", 5));
      expect(await v.writeB.delete("a3")).toBe(false);
      await v.writeB.clear();
    });
    expect(idsOf(await v.a.list())).toEqual(["a1", "a2", "a3"]);
    expect(await v.a.get("a3")).toEqual(doc("a3", 5));
    // Trusted code deletes and clears everything, as before.
    expect(await deleteMany(v.all, ["a1", "a3"])).toBe(2);
    await v.all.clear();
    expect(await v.all.count()).toBe(0);
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
        await v.writeB.put("b2", doc("b2", 99));
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
