import { expect } from "vitest";
import { readmodelBackendCapabilities } from "../store/backend.js";
import { isLockLostError } from "../store/lock-fencing.js";
import type { ReadmodelCollection, ReadmodelStoreBackend } from "../store/readmodel-store-backend.js";
import { deferred, defineContract, expectClosedBehaviour, expectNoSecret, expectRejectsWith, settle } from "./contract-harness.js";
import { indexContractTests } from "./readmodel-index-contract.js";
import { tenantScopeContractTests } from "./readmodel-tenant-contract.js";

/** The optional capability of a backend whose readmodels switch generations on a restore from zero. */
interface Replacing {
  replaceCollections(moves: readonly (readonly [target: string, source: string])[]): Promise<void>;
}

interface Item {
  id: string;
  name: string;
  n: number;
  flag?: boolean | number | string;
  group?: string;
  tags?: string[];
}

function item(id: string, n: number, extra: Partial<Item> = {}): Item {
  return { id, name: `name-${id}`, n, ...extra };
}

async function fill(col: ReadmodelCollection<Item>, items: readonly Item[]): Promise<void> {
  for (const it of items) await col.put(it.id, it);
}

const ids = (xs: readonly Item[]): string[] => xs.map((x) => x.id);

/**
 * The ReadmodelStoreBackend conformance suite: documents by collection and
 * key (get/put/delete/getMany/putMany, list with offset/limit/orderBy/
 * descending/where, count, clear), checkpoints, and transactions (commit,
 * rollback, nesting, serialisation against outside writes, and the atomic
 * clear + checkpoint reset of a restore from zero), and, for a backend that
 * has it, `replaceCollections` (the switch of a blue-green restore from zero),
 * `tenantScopes` (reads limited to a tenant, writes tagged with one),
 * `ensureIndexes` (indexed collections: the same results with and without) and
 * fencing tokens (`fencingToken`, `checkFencingToken`).
 */
export const describeReadmodelStoreBackendContract = defineContract<ReadmodelStoreBackend>("ReadmodelStoreBackend contract", (test) => {
  // --- documents ---------------------------------------------------------------------

  test("put then get returns the document", async (backend) => {
    const col = backend.collection<Record<string, unknown>>("docs");
    const doc = {
      a: 1,
      s: 'ü 🎉 "q"',
      f: 0.25,
      neg: -3,
      b: false,
      nul: null,
      list: [1, "x", null, { y: [] }],
      nested: { deep: { er: true } },
      empty: {},
    };
    await col.put("k1", doc);
    expect(await col.get("k1")).toEqual(doc);
    await col.put("arr", { wrapped: [[1], [2]] });
    expect(await col.get("arr")).toEqual({ wrapped: [[1], [2]] });
  });

  test("a key with a lone surrogate or U+0000 is INVALID_REQUEST on every method; U+FFFD and pairs are keys like any other", async (backend) => {
    const col = backend.collection<Item>("items");
    for (const bad of ["\ud800", "a\udc00", "x\u0000y"]) {
      await expectRejectsWith(() => col.put(bad, item(bad, 1)), "INVALID_REQUEST");
      await expectRejectsWith(
        () =>
          col.putMany([
            ["ok", item("ok", 1)],
            [bad, item(bad, 1)],
          ]),
        "INVALID_REQUEST",
      );
      await expectRejectsWith(() => col.get(bad), "INVALID_REQUEST");
      await expectRejectsWith(() => col.getMany(["ok", bad]), "INVALID_REQUEST");
      await expectRejectsWith(() => col.delete(bad), "INVALID_REQUEST");
    }
    expect(await col.count()).toBe(0);
    for (const good of ["\ufffd", "\ud83d\ude00", "\uffff"]) await col.put(good, item(good, 1));
    for (const good of ["\ufffd", "\ud83d\ude00", "\uffff"]) expect((await col.get(good))?.id).toBe(good);
    expect(await col.count()).toBe(3);
  });

  test("get of an unknown key resolves undefined", async (backend) => {
    const col = backend.collection<Item>("items");
    expect(await col.get("nope")).toBeUndefined();
    await col.put("a", item("a", 1));
    expect(await col.get("b")).toBeUndefined();
    expect(await backend.collection<Item>("other").get("a")).toBeUndefined();
  });

  test("put overwrites; delete removes and reports whether it existed", async (backend) => {
    const col = backend.collection<Item>("items");
    await col.put("a", item("a", 1));
    await col.put("a", item("a", 2, { name: "second" }));
    expect(await col.get("a")).toEqual(item("a", 2, { name: "second" }));
    expect(await col.count()).toBe(1);
    expect(await col.delete("a")).toBe(true);
    expect(await col.delete("a")).toBe(false);
    expect(await col.delete("never")).toBe(false);
    expect(await col.get("a")).toBeUndefined();
    expect(await col.count()).toBe(0);
  });

  test("deleteMany (where the backend has it) removes the keys given, counts the ones that were there, and leaves the rest", async (backend) => {
    const col = backend.collection<Item>("items");
    if (col.deleteMany === undefined) return;
    await fill(col, [item("a", 1), item("b", 2), item("c", 3)]);
    expect(await backend.collection<Item>("other").deleteMany!(["a"])).toBe(0);
    expect(await col.deleteMany(["a", "never", "c"])).toBe(2);
    expect(await col.deleteMany([])).toBe(0);
    expect(await col.list()).toEqual([item("b", 2)]);
    await expect(col.deleteMany([1 as unknown as string])).rejects.toMatchObject({ code: "INVALID_REQUEST" });
    await expect(col.deleteMany("b" as unknown as string[])).rejects.toMatchObject({ code: "INVALID_REQUEST" });
    expect(await col.count()).toBe(1);
  });

  test("deleteMany inside a transaction counts what the transaction wrote and deleted, sees its own deletes, and is undone by a rollback", async (backend) => {
    const col = backend.collection<Item>("items");
    if (col.deleteMany === undefined) return;
    await fill(col, [item("a", 1), item("b", 2)]);
    const boom = new Error("boom");
    let caught: unknown;
    try {
      await backend.transaction(async () => {
        await col.put("new", item("new", 3));
        await col.delete("a");
        expect(await col.deleteMany!(["a", "b", "new", "b", "never"])).toBe(2);
        expect(await col.count()).toBe(0);
        throw boom;
      });
    } catch (e) {
      caught = e;
    }
    expect(caught).toBe(boom);
    expect(await col.list()).toEqual([item("a", 1), item("b", 2)]);
    await backend.transaction(async () => {
      expect(await col.deleteMany!(["b", "never"])).toBe(1);
    });
    expect(await col.list()).toEqual([item("a", 1)]);
  });

  test("getMany returns the found documents only", async (backend) => {
    const col = backend.collection<Item>("items");
    await fill(col, [item("a", 1), item("b", 2), item("c", 3)]);
    const m = await col.getMany(["c", "missing", "a"]);
    expect(m.size).toBe(2);
    expect(m.get("a")).toEqual(item("a", 1));
    expect(m.get("c")).toEqual(item("c", 3));
    expect(m.has("missing")).toBe(false);
    expect((await col.getMany([])).size).toBe(0);
    expect((await backend.collection<Item>("empty").getMany(["a"])).size).toBe(0);
  });

  test("putMany writes every entry", async (backend) => {
    const col = backend.collection<Item>("items");
    await col.put("b", item("b", 0));
    const entries = Array.from(
      { length: 50 },
      (_, i) => [`k${String(i).padStart(2, "0")}`, item(`k${String(i).padStart(2, "0")}`, i)] as const,
    );
    await col.putMany([...entries, ["b", item("b", 99)]]);
    expect(await col.count()).toBe(51);
    expect(await col.get("k42")).toEqual(item("k42", 42));
    expect(await col.get("b")).toEqual(item("b", 99));
    await col.putMany([]);
    expect(await col.count()).toBe(51);
  });

  test("collections are independent; clear empties only its own", async (backend) => {
    const a = backend.collection<Item>("alpha");
    const b = backend.collection<Item>("beta");
    await a.put("same", item("same", 1));
    await b.put("same", item("same", 2));
    await b.put("other", item("other", 3));
    expect((await a.get("same"))?.n).toBe(1);
    expect((await b.get("same"))?.n).toBe(2);
    await a.clear();
    expect(await a.get("same")).toBeUndefined();
    expect(await a.count()).toBe(0);
    expect(await a.list()).toEqual([]);
    expect(await b.count()).toBe(2);
    expect((await b.get("same"))?.n).toBe(2);
    await a.put("again", item("again", 4));
    expect(await a.count()).toBe(1);
  });

  test("listCollections names the collections that hold documents", async (backend) => {
    expect(await backend.listCollections()).toEqual([]);
    await backend.collection<Item>("zeta").put("a", item("a", 1));
    await backend.collection<Item>("alpha").put("a", item("a", 1));
    backend.collection<Item>("never-written");
    const names = await backend.listCollections();
    expect([...names].sort()).toEqual(["alpha", "zeta"]);
  });

  test("stored documents cannot be changed through given or returned objects", async (backend) => {
    const col = backend.collection<Item>("items");
    const doc = item("a", 1, { tags: ["x"] });
    await col.put("a", doc);
    doc.tags?.push("given");
    doc.n = 100;
    const got = await col.get("a");
    expect(got).toEqual(item("a", 1, { tags: ["x"] }));
    try {
      got?.tags?.push("returned");
      if (got !== undefined) got.n = 200;
      const [listed] = await col.list();
      listed?.tags?.push("listed");
      (await col.getMany(["a"])).get("a")?.tags?.push("many");
    } catch {
      // frozen results are fine
    }
    expect(await col.get("a")).toEqual(item("a", 1, { tags: ["x"] }));
    expect(await col.list()).toEqual([item("a", 1, { tags: ["x"] })]);
  });

  // --- list -------------------------------------------------------------------------------

  test("list orders by key by default", async (backend) => {
    const col = backend.collection<Item>("items");
    const keys = ["k07", "k02", "k10", "k01", "k05"];
    for (const [i, k] of keys.entries()) await col.put(k, item(k, 100 - i));
    expect(ids(await col.list())).toEqual(["k01", "k02", "k05", "k07", "k10"]);
    expect(ids(await col.list({ descending: true }))).toEqual(["k10", "k07", "k05", "k02", "k01"]);
    expect(await backend.collection<Item>("empty").list()).toEqual([]);
  });

  test("list with offset and limit", async (backend) => {
    const col = backend.collection<Item>("items");
    await fill(
      col,
      Array.from({ length: 10 }, (_, i) => item(`k${i}`, i)),
    );
    expect(ids(await col.list({ limit: 3 }))).toEqual(["k0", "k1", "k2"]);
    expect(ids(await col.list({ offset: 3, limit: 3 }))).toEqual(["k3", "k4", "k5"]);
    expect(ids(await col.list({ offset: 8 }))).toEqual(["k8", "k9"]);
    expect(ids(await col.list({ offset: 8, limit: 5 }))).toEqual(["k8", "k9"]);
    expect(await col.list({ offset: 10 })).toEqual([]);
    expect(await col.list({ offset: 50, limit: 5 })).toEqual([]);
    expect(await col.list({ limit: 0 })).toEqual([]);
  });

  test("list orderBy a number field sorts numerically, ties broken by key", async (backend) => {
    const col = backend.collection<Item>("items");
    await fill(col, [item("e", 10), item("a", 2), item("d", -1.5), item("c", 2), item("b", 100), item("f", 0.5), item("g", 2)]);
    expect(ids(await col.list({ orderBy: "n" }))).toEqual(["d", "f", "a", "c", "g", "e", "b"]);
  });

  test("list orderBy a string field; descending is the exact reverse", async (backend) => {
    const col = backend.collection<Item>("items");
    await fill(col, [
      item("k1", 0, { group: "pear" }),
      item("k2", 0, { group: "apple" }),
      item("k3", 0, { group: "fig" }),
      item("k4", 0, { group: "apple" }),
      item("k5", 0, { group: "banana" }),
      item("k6", 0, { group: "fig" }),
    ]);
    const asc = ids(await col.list({ orderBy: "group" }));
    expect(asc).toEqual(["k2", "k4", "k5", "k3", "k6", "k1"]);
    expect(ids(await col.list({ orderBy: "group", descending: true }))).toEqual([...asc].reverse());
    expect(ids(await col.list({ orderBy: "group", descending: true, offset: 1, limit: 2 }))).toEqual(["k6", "k3"]);
  });

  test("paging with orderBy is stable: no duplicates, no gaps", async (backend) => {
    const col = backend.collection<Item>("items");
    // Many ties: n takes only three values.
    const items = Array.from({ length: 37 }, (_, i) => item(`k${String((i * 11) % 37).padStart(2, "0")}`, i % 3));
    await fill(col, items);
    for (const descending of [false, true]) {
      const full = ids(await col.list({ orderBy: "n", descending }));
      const paged: string[] = [];
      for (let offset = 0; offset < 37; offset += 5) paged.push(...ids(await col.list({ orderBy: "n", descending, offset, limit: 5 })));
      expect(paged).toEqual(full);
      expect(new Set(paged).size).toBe(37);
      // Within equal n, keys ascend (descending: descend).
      const sorted = [...items].sort((x, y) => x.n - y.n || (x.id < y.id ? -1 : 1)).map((x) => x.id);
      expect(full).toEqual(descending ? [...sorted].reverse() : sorted);
    }
  });

  test("where filters by equality on several fields", async (backend) => {
    const col = backend.collection<Item>("items");
    const items = Array.from({ length: 12 }, (_, i) =>
      item(`k${String(i).padStart(2, "0")}`, i % 3, { group: i % 2 === 0 ? "even" : "odd", flag: i % 4 === 0 }),
    );
    await fill(col, items);
    expect(ids(await col.list({ where: { group: "even" } }))).toEqual(ids(items.filter((x) => x.group === "even")));
    expect(ids(await col.list({ where: { n: 1 } }))).toEqual(ids(items.filter((x) => x.n === 1)));
    expect(ids(await col.list({ where: { flag: true } }))).toEqual(ids(items.filter((x) => x.flag === true)));
    expect(ids(await col.list({ where: { flag: false, group: "even" } }))).toEqual(
      ids(items.filter((x) => x.flag === false && x.group === "even")),
    );
    expect(ids(await col.list({ where: { group: "odd", n: 0 } }))).toEqual(ids(items.filter((x) => x.group === "odd" && x.n === 0)));
    expect(await col.list({ where: { group: "none" } })).toEqual([]);
    expect(await col.list({ where: { missingField: "x" } })).toEqual([]);
    expect(await col.list({ where: {} })).toHaveLength(12);
  });

  test("where matches types exactly", async (backend) => {
    const col = backend.collection<Item>("items");
    await fill(col, [
      item("num", 1, { flag: 1 }),
      item("str", 1, { flag: "1" }),
      item("bool", 1, { flag: true }),
      item("strTrue", 1, { flag: "true" }),
      item("zero", 1, { flag: 0 }),
      item("boolFalse", 1, { flag: false }),
    ]);
    expect(ids(await col.list({ where: { flag: 1 } }))).toEqual(["num"]);
    expect(ids(await col.list({ where: { flag: "1" } }))).toEqual(["str"]);
    expect(ids(await col.list({ where: { flag: true } }))).toEqual(["bool"]);
    expect(ids(await col.list({ where: { flag: "true" } }))).toEqual(["strTrue"]);
    expect(ids(await col.list({ where: { flag: false } }))).toEqual(["boolFalse"]);
    expect(ids(await col.list({ where: { flag: 0 } }))).toEqual(["zero"]);
    expect(await col.count({ flag: true })).toBe(1);
  });

  test("where combines with orderBy, offset and limit", async (backend) => {
    const col = backend.collection<Item>("items");
    const items = Array.from({ length: 20 }, (_, i) => item(`k${String(i).padStart(2, "0")}`, 20 - i, { group: i % 2 === 0 ? "a" : "b" }));
    await fill(col, items);
    const expected = items.filter((x) => x.group === "a").sort((x, y) => x.n - y.n);
    expect(ids(await col.list({ where: { group: "a" }, orderBy: "n", offset: 2, limit: 3 }))).toEqual(ids(expected.slice(2, 5)));
    expect(ids(await col.list({ where: { group: "a" }, orderBy: "n", descending: true, limit: 2 }))).toEqual(
      ids([...expected].reverse().slice(0, 2)),
    );
  });

  test("count with and without where", async (backend) => {
    const col = backend.collection<Item>("items");
    expect(await col.count()).toBe(0);
    await fill(
      col,
      Array.from({ length: 9 }, (_, i) => item(`k${i}`, i % 3, { group: i < 4 ? "x" : "y" })),
    );
    expect(await col.count()).toBe(9);
    expect(await col.count({ n: 0 })).toBe(3);
    expect(await col.count({ group: "x", n: 1 })).toBe(1);
    expect(await col.count({ group: "none" })).toBe(0);
    expect(await backend.collection<Item>("other").count()).toBe(0);
  });

  test("invalid orderBy or where field names give INVALID_REQUEST", async (backend) => {
    const col = backend.collection<Item>("items");
    await fill(col, [item("a", 1), item("b", 2)]);
    const bad = ["name; DROP TABLE x", "n) --", "a.b", "", "x'y", "$.n", "n desc", 'n"'];
    for (const f of bad) {
      await expectRejectsWith(() => col.list({ orderBy: f }), "INVALID_REQUEST");
      await expectRejectsWith(() => col.list({ where: { [f]: 1 } }), "INVALID_REQUEST");
      await expectRejectsWith(() => col.count({ [f]: "x" }), "INVALID_REQUEST");
    }
    await expectRejectsWith(() => col.list({ where: { n: { $gt: 1 } } as unknown as Record<string, number> }), "INVALID_REQUEST");
    expect(ids(await col.list({ orderBy: "n" }))).toEqual(["a", "b"]);
    expect(await col.count()).toBe(2);
    expect(await backend.listCollections()).toContain("items");
  });

  test("a negative offset or limit gives INVALID_REQUEST", async (backend) => {
    const col = backend.collection<Item>("items");
    await col.put("a", item("a", 1));
    await expectRejectsWith(() => col.list({ offset: -1 }), "INVALID_REQUEST");
    await expectRejectsWith(() => col.list({ limit: -1 }), "INVALID_REQUEST");
    await expectRejectsWith(() => col.list({ limit: 1.5 }), "INVALID_REQUEST");
  });

  // --- checkpoints -----------------------------------------------------------------------------

  test("checkpoints default to 0 and are kept per handler", async (backend) => {
    expect(await backend.getCheckpoint("A")).toBe(0);
    await backend.setCheckpoint("A", 42);
    await backend.setCheckpoint("B", 7);
    expect(await backend.getCheckpoint("A")).toBe(42);
    expect(await backend.getCheckpoint("B")).toBe(7);
    expect(await backend.getCheckpoint("C")).toBe(0);
    await backend.setCheckpoint("A", 0);
    expect(await backend.getCheckpoint("A")).toBe(0);
    await backend.setCheckpoint("A", 9_007_199_254_740_000);
    expect(await backend.getCheckpoint("A")).toBe(9_007_199_254_740_000);
  });

  // --- transactions -------------------------------------------------------------------------------

  test("a transaction commits every write, checkpoints included, and returns fn's value", async (backend) => {
    const a = backend.collection<Item>("a");
    const b = backend.collection<Item>("b");
    await a.put("old", item("old", 0));
    const result = await backend.transaction(async () => {
      await a.put("x", item("x", 1));
      await b.putMany([
        ["y", item("y", 2)],
        ["z", item("z", 3)],
      ]);
      await a.delete("old");
      await backend.setCheckpoint("H", 17);
      return "done";
    });
    expect(result).toBe("done");
    expect(ids(await a.list())).toEqual(["x"]);
    expect(ids(await b.list())).toEqual(["y", "z"]);
    expect(await backend.getCheckpoint("H")).toBe(17);
  });

  test("a transaction rolls back every write when fn throws, and rethrows the error", async (backend) => {
    const a = backend.collection<Item>("a");
    const b = backend.collection<Item>("b");
    await fill(a, [item("keep", 1), item("change", 2), item("remove", 3)]);
    await fill(b, [item("b1", 1), item("b2", 2)]);
    await backend.setCheckpoint("H", 5);
    const boom = new Error("boom");
    let caught: unknown;
    try {
      await backend.transaction(async () => {
        await a.put("change", item("change", 200));
        await a.put("new", item("new", 4));
        await a.delete("remove");
        await b.clear();
        await b.put("b3", item("b3", 3));
        await backend.collection<Item>("fresh").putMany([["f", item("f", 1)]]);
        await backend.setCheckpoint("H", 99);
        await backend.setCheckpoint("NEW", 1);
        throw boom;
      });
    } catch (e) {
      caught = e;
    }
    expect(caught).toBe(boom);
    expect(await a.list()).toEqual([item("change", 2), item("keep", 1), item("remove", 3)]);
    expect(await b.list()).toEqual([item("b1", 1), item("b2", 2)]);
    expect(await backend.collection<Item>("fresh").count()).toBe(0);
    expect(await backend.getCheckpoint("H")).toBe(5);
    expect(await backend.getCheckpoint("NEW")).toBe(0);
    // The backend works normally afterwards.
    await a.put("later", item("later", 5));
    expect(await backend.transaction(async () => (await a.get("later"))?.n)).toBe(5);
  });

  test("clearing a readmodel for a restore from zero and resetting its checkpoint are atomic", async (backend) => {
    // What BaseReadmodel does in one transaction: clear every collection of the readmodel ("RM:"), then set its checkpoint to 0.
    // An error at any point leaves documents and checkpoint as they were: never emptied documents at the old checkpoint.
    const a = backend.collection<Item>("RM:a");
    const b = backend.collection<Item>("RM:b");
    const other = backend.collection<Item>("Other:a");
    await fill(a, [item("a1", 1), item("a2", 2)]);
    await fill(b, [item("b1", 1)]);
    await fill(other, [item("o1", 1)]);
    await backend.setCheckpoint("RM", 7);
    await backend.setCheckpoint("Other", 3);
    const clearRm = async (): Promise<void> => {
      for (const c of await backend.listCollections()) if (c.startsWith("RM:")) await backend.collection(c).clear();
    };
    const boom = new Error("injected");
    for (const failAfter of ["first clear", "every clear", "the checkpoint"]) {
      await expect(
        backend.transaction(async () => {
          if (failAfter === "first clear") {
            await a.clear();
            throw boom;
          }
          await clearRm();
          if (failAfter === "the checkpoint") await backend.setCheckpoint("RM", 0);
          throw boom;
        }),
      ).rejects.toBe(boom);
      expect(ids(await a.list()), `after an error after ${failAfter}`).toEqual(["a1", "a2"]);
      expect(ids(await b.list())).toEqual(["b1"]);
      expect(await backend.getCheckpoint("RM")).toBe(7);
    }
    await backend.transaction(async () => {
      await clearRm();
      await backend.setCheckpoint("RM", 0);
    });
    expect(await a.count()).toBe(0);
    expect(await b.count()).toBe(0);
    expect(await backend.getCheckpoint("RM")).toBe(0);
    // only its own collections and checkpoint
    expect(ids(await other.list())).toEqual(["o1"]);
    expect(await backend.getCheckpoint("Other")).toBe(3);
    // the replay writes again
    await backend.transaction(async () => {
      await a.put("a1", item("a1", 10));
      await backend.setCheckpoint("RM", 1);
    });
    expect(ids(await a.list())).toEqual(["a1"]);
    expect(await backend.getCheckpoint("RM")).toBe(1);
  });

  // --- replaceCollections (optional: the switch of a readmodel's restore from zero) ------------------

  /** The backend's replaceCollections, or undefined when it has none (the tests below then check nothing else). */
  const replacing = (backend: ReadmodelStoreBackend): Replacing["replaceCollections"] | undefined => {
    const fn = (backend as Partial<Replacing>).replaceCollections;
    return typeof fn === "function" ? fn.bind(backend) : undefined;
  };

  test("replaceCollections gives each target exactly its source's documents and empties the sources", async (backend) => {
    const replace = replacing(backend);
    if (replace === undefined) return;
    const served = backend.collection<Item>("RM:a");
    const next = backend.collection<Item>("RM#rebuild:a");
    const servedOnly = backend.collection<Item>("RM:gone");
    const other = backend.collection<Item>("Other:a");
    await fill(served, [item("old1", 1), item("old2", 2), item("shared", 3)]);
    await fill(next, [item("shared", 30), item("new1", 10)]);
    await fill(servedOnly, [item("g", 1)]);
    await fill(other, [item("o", 1)]);
    await replace([
      ["RM:a", "RM#rebuild:a"],
      ["RM:gone", "RM#rebuild:gone"],
    ]);
    expect(ids(await served.list())).toEqual(["new1", "shared"]);
    expect((await served.get("shared"))?.n).toBe(30);
    expect(await served.get("old1")).toBeUndefined();
    expect(await served.count()).toBe(2);
    expect(await next.count()).toBe(0);
    expect(await next.list()).toEqual([]);
    expect(await servedOnly.count()).toBe(0);
    expect(ids(await other.list())).toEqual(["o"]);
    expect(await backend.listCollections()).toContain("RM:a");
    // the moved documents are ordinary documents of their new collection
    await served.put("new2", item("new2", 5));
    expect(ids(await served.list({ orderBy: "n" }))).toEqual(["new2", "new1", "shared"]);
    expect(await served.count({ n: 10 })).toBe(1);
  });

  test("replaceCollections in a transaction commits with its checkpoints, or not at all", async (backend) => {
    const replace = replacing(backend);
    if (replace === undefined) return;
    const served = backend.collection<Item>("RM:a");
    const next = backend.collection<Item>("RM#rebuild:a");
    await fill(served, [item("old", 1)]);
    await fill(next, [item("new", 2)]);
    await backend.setCheckpoint("RM", 5);
    const boom = new Error("injected");
    await expect(
      backend.transaction(async () => {
        await replace([["RM:a", "RM#rebuild:a"]]);
        await backend.setCheckpoint("RM", 9);
        throw boom;
      }),
    ).rejects.toBe(boom);
    expect(ids(await served.list())).toEqual(["old"]);
    expect(ids(await next.list())).toEqual(["new"]);
    expect(await backend.getCheckpoint("RM")).toBe(5);
    await backend.transaction(async () => {
      await replace([["RM:a", "RM#rebuild:a"]]);
      await backend.setCheckpoint("RM", 9);
    });
    expect(ids(await served.list())).toEqual(["new"]);
    expect(await next.count()).toBe(0);
    expect(await backend.getCheckpoint("RM")).toBe(9);
  });

  test("replaceCollections with bad input gives INVALID_REQUEST and moves nothing", async (backend) => {
    const replace = replacing(backend);
    if (replace === undefined) return;
    await fill(backend.collection<Item>("RM#rebuild:a"), [item("new", 2)]);
    await fill(backend.collection<Item>("RM:a"), [item("old", 1)]);
    for (const bad of [
      [
        ["RM:a", "RM#rebuild:a"],
        ["RM:b", ""],
      ],
      [
        ["RM:a", "RM#rebuild:a"],
        ["RM:b", "RM:b"],
      ],
      "RM:a",
    ]) {
      await expectRejectsWith(() => replace(bad as never), "INVALID_REQUEST");
    }
    expect(ids(await backend.collection<Item>("RM:a").list())).toEqual(["old"]);
    expect(ids(await backend.collection<Item>("RM#rebuild:a").list())).toEqual(["new"]);
  });

  test("reads inside a transaction see its writes", async (backend) => {
    const col = backend.collection<Item>("items");
    await col.put("a", item("a", 1));
    await backend.transaction(async () => {
      await col.put("a", item("a", 2));
      await col.put("b", item("b", 3));
      expect(await col.get("a")).toEqual(item("a", 2));
      expect(ids(await col.list({ orderBy: "n" }))).toEqual(["a", "b"]);
      expect(await col.count()).toBe(2);
      await col.delete("b");
      expect(await col.get("b")).toBeUndefined();
      await backend.setCheckpoint("H", 3);
      expect(await backend.getCheckpoint("H")).toBe(3);
    });
  });

  test("a nested transaction joins the outer one", async (backend) => {
    const col = backend.collection<Item>("items");
    const inner = await backend.transaction(async () => {
      await col.put("outer", item("outer", 1));
      return backend.transaction(async () => {
        await col.put("inner", item("inner", 2));
        expect(await col.get("outer")).toEqual(item("outer", 1));
        return "inner-result";
      });
    });
    expect(inner).toBe("inner-result");
    expect(ids(await col.list())).toEqual(["inner", "outer"]);
    // When the outer one fails after the inner one finished, both roll back.
    const boom = new Error("outer fails");
    await expect(
      backend.transaction(async () => {
        await col.put("o2", item("o2", 3));
        await backend.transaction(async () => {
          await col.put("i2", item("i2", 4));
          await backend.setCheckpoint("H", 8);
        });
        throw boom;
      }),
    ).rejects.toBe(boom);
    expect(ids(await col.list())).toEqual(["inner", "outer"]);
    expect(await backend.getCheckpoint("H")).toBe(0);
  });

  test("writes from outside wait for a running transaction", async (backend) => {
    const col = backend.collection<Item>("items");
    const entered = deferred();
    const gate = deferred();
    const order: string[] = [];
    const tx = backend.transaction(async () => {
      await col.put("inside", item("inside", 1));
      entered.resolve();
      await gate.promise;
      // The outside writes were issued before this point; they must not have happened yet.
      const seen = { b: await col.get("outside"), cp: await backend.getCheckpoint("H"), n: await col.count() };
      await col.put("inside-2", item("inside-2", 2));
      return seen;
    });
    void tx.then(() => order.push("tx"));
    await entered.promise;
    const outsidePut = col.put("outside", item("outside", 3)).then(() => order.push("put"));
    const outsideCp = backend.setCheckpoint("H", 4).then(() => order.push("checkpoint"));
    // Give a wrongly non-waiting write every chance to land before the gate opens.
    await settle(20);
    expect(order).toEqual([]);
    gate.resolve();
    const seen = await tx;
    await Promise.all([outsidePut, outsideCp]);
    expect(seen).toEqual({ b: undefined, cp: 0, n: 1 });
    expect([...order].sort()).toEqual(["checkpoint", "put", "tx"]);
    expect(ids(await col.list())).toEqual(["inside", "inside-2", "outside"]);
    expect(await backend.getCheckpoint("H")).toBe(4);
  });

  test("an outside write waiting for a rolled-back transaction still happens", async (backend) => {
    const col = backend.collection<Item>("items");
    const entered = deferred();
    const gate = deferred();
    const tx = backend.transaction(async () => {
      await col.put("inside", item("inside", 1));
      entered.resolve();
      await gate.promise;
      throw new Error("rollback");
    });
    const settled = tx.catch((e: unknown) => e);
    await entered.promise;
    const outside = col.put("outside", item("outside", 2));
    gate.resolve();
    expect(await settled).toBeInstanceOf(Error);
    await outside;
    expect(ids(await col.list())).toEqual(["outside"]);
  });

  test("transactions run one after another", async (backend) => {
    const col = backend.collection<Item>("items");
    const events: string[] = [];
    const gate = deferred();
    const entered = deferred();
    const t1 = backend.transaction(async () => {
      events.push("t1 start");
      entered.resolve();
      await gate.promise;
      await col.put("t1", item("t1", 1));
      events.push("t1 end");
    });
    await entered.promise;
    const t2 = backend.transaction(async () => {
      events.push("t2 start");
      expect(await col.get("t1")).toEqual(item("t1", 1));
      await col.put("t2", item("t2", 2));
      events.push("t2 end");
    });
    await settle(20);
    expect(events).toEqual(["t1 start"]);
    gate.resolve();
    await Promise.all([t1, t2]);
    expect(events).toEqual(["t1 start", "t1 end", "t2 start", "t2 end"]);
  });

  test("many concurrent transactions and writes all land", async (backend) => {
    const col = backend.collection<{ v: number }>("counter");
    await col.put("c", { v: 0 });
    // Read-modify-write inside transactions: serialisation makes every increment count.
    const increments = Array.from({ length: 25 }, () =>
      backend.transaction(async () => {
        const cur = (await col.get("c"))?.v ?? 0;
        await settle();
        await col.put("c", { v: cur + 1 });
      }),
    );
    const plain = Array.from({ length: 25 }, (_, i) => col.put(`p${i}`, { v: i }));
    await Promise.all([...increments, ...plain]);
    expect((await col.get("c"))?.v).toBe(25);
    expect(await col.count()).toBe(26);
  });

  // --- fencing (a backend with fencingToken) -------------------------------------------------------

  test("fencing: each take of a lock gives a greater token; a transaction fenced by an older one writes nothing", async (backend) => {
    const can = readmodelBackendCapabilities(backend);
    if (!can.fencing) return;
    expect(backend.fencingToken!("F")).toBeUndefined();
    expect(await backend.tryLock!("F", "instance-1")).toBe(true);
    const first = backend.fencingToken!("F")!;
    expect(typeof first).toBe("number");
    if (can.lockHolder) expect(await backend.lockHolder!("F")).toBe("instance-1");
    await backend.unlock!("F");
    expect(backend.fencingToken!("F")).toBeUndefined();
    expect(await backend.tryLock!("F", "instance-2")).toBe(true);
    const second = backend.fencingToken!("F")!;
    expect(second).toBeGreaterThan(first);
    if (can.lockHolder) expect(await backend.lockHolder!("F")).toBe("instance-2");

    const col = backend.collection<Item>("fenced");
    const stale = backend.transaction(async () => {
      await backend.checkFencingToken!("F", first);
      await col.put("a", item("a", 1));
      await backend.setCheckpoint("F", 5);
    });
    await expect(stale).rejects.toSatisfy((e: unknown) => isLockLostError(e));
    expect(await col.get("a")).toBeUndefined();
    expect(await backend.getCheckpoint("F")).toBe(0);
    // Without a checkpoint write too.
    await expect(
      backend.transaction(async () => {
        await backend.checkFencingToken!("F", first);
        await col.put("b", item("b", 1));
      }),
    ).rejects.toSatisfy((e: unknown) => isLockLostError(e));
    expect(await col.get("b")).toBeUndefined();

    await backend.transaction(async () => {
      await backend.checkFencingToken!("F", second);
      await col.put("a", item("a", 1));
      await backend.setCheckpoint("F", 5);
    });
    expect(await col.get("a")).toEqual(item("a", 1));
    expect(await backend.getCheckpoint("F")).toBe(5);
    await backend.unlock?.("F");
  });

  // --- info, close -----------------------------------------------------------------------------------

  test("info reports the number of documents", async (backend) => {
    const empty = await backend.info();
    expect(empty.numItems).toBe(0);
    expect(empty.storeType.length).toBeGreaterThan(0);
    expectNoSecret(empty.connectionInfo);
    await fill(backend.collection<Item>("a"), [item("x", 1), item("y", 2)]);
    await backend.collection<Item>("b").put("x", item("x", 1));
    const info = await backend.info();
    expect(info.numItems).toBe(3);
    expect(typeof info.lastItemCreatedAt).toBe("number");
  });

  test("close is idempotent and later calls reject with STORE_CLOSED", async (backend) => {
    const col = backend.collection<Item>("items");
    await col.put("a", item("a", 1));
    await expectClosedBehaviour(backend, () => col.put("b", item("b", 2)));
    await expectRejectsWith(() => col.get("a"), "STORE_CLOSED");
    await expectRejectsWith(() => backend.getCheckpoint("H"), "STORE_CLOSED");
  });

  // --- tenantScopes (optional: a tenant stored with each document) --------------------------------
  tenantScopeContractTests(test);

  // --- ensureIndexes (optional: indexed collections) ----------------------------------------------
  indexContractTests(test);
});
