import { expect } from "vitest";
import type { ListOptions, ReadmodelCollection, ReadmodelStoreBackend } from "../store/readmodel-store-backend.js";
import { expectRejectsWith, type ContractTest } from "./contract-harness.js";

type Doc = Record<string, unknown> & { id: string };

/** Values of every JSON type, ties included, so order and typed equality are exercised across types. */
const VALUES: readonly unknown[] = [
  undefined,
  null,
  true,
  false,
  0,
  1,
  1.5,
  -2,
  10,
  "1",
  "open",
  "closed",
  "Open",
  "",
  [1],
  ["a"],
  { x: 1 },
];

/** A deterministic pseudo-random document set: fields status, placedAt and n take values of every type (or are missing). */
function docs(count: number): Doc[] {
  let seed = 12345;
  const next = (): number => {
    seed = (seed * 1103515245 + 12345) % 2147483648;
    return seed;
  };
  const pick = (): unknown => VALUES[next() % VALUES.length];
  const out: Doc[] = [];
  for (let i = 0; i < count; i++) {
    const d: Doc = { id: `k${String(next() % 1000).padStart(3, "0")}-${i}` };
    for (const f of ["status", "placedAt", "n"]) {
      const v = pick();
      if (v !== undefined) d[f] = v;
    }
    // Mostly the typical case: a short status and a numeric time.
    if (i % 3 === 0) {
      d.status = i % 2 === 0 ? "open" : "closed";
      d.placedAt = next() % 50;
    }
    out.push(d);
  }
  return out;
}

const LISTS: readonly ListOptions[] = [
  {},
  { orderBy: "placedAt" },
  { orderBy: "placedAt", descending: true },
  { orderBy: "placedAt", descending: true, limit: 20 },
  { orderBy: "placedAt", offset: 7, limit: 11 },
  { orderBy: "status" },
  { orderBy: "status", descending: true, offset: 3, limit: 9 },
  { orderBy: "n" },
  { where: { status: "open" } },
  { where: { status: "open" }, orderBy: "placedAt", descending: true, limit: 20 },
  { where: { status: "open" }, orderBy: "placedAt", offset: 2, limit: 5 },
  { where: { status: "closed" }, orderBy: "placedAt" },
  { where: { status: "1" }, orderBy: "placedAt" },
  { where: { status: 1 }, orderBy: "placedAt" },
  { where: { status: true }, orderBy: "placedAt", descending: true },
  { where: { status: false } },
  { where: { status: "" } },
  { where: { placedAt: 1.5 } },
  { where: { placedAt: 0 }, orderBy: "status" },
  { where: { status: "open", placedAt: 10 } },
  { where: { n: "open" }, orderBy: "status" },
];

async function expectSame(indexed: ReadmodelCollection<Doc>, plain: ReadmodelCollection<Doc>): Promise<void> {
  for (const opts of LISTS) {
    const ids = (xs: Doc[]): string[] => xs.map((d) => d.id);
    expect(ids(await indexed.list(opts)), JSON.stringify(opts)).toEqual(ids(await plain.list(opts)));
    expect(await indexed.count(opts.where), JSON.stringify(opts.where)).toBe(await plain.count(opts.where));
  }
}

/**
 * The tests of the optional `ensureIndexes` capability (indexed
 * collections), part of the ReadmodelStoreBackend contract; they check
 * nothing of a backend without it. Indexes must never change a result.
 * @internal
 */
export function indexContractTests(test: ContractTest<ReadmodelStoreBackend>): void {
  test("ensureIndexes: list and count give the same results with and without indexes, documents of every type", async (backend) => {
    if (backend.ensureIndexes === undefined) return;
    await backend.ensureIndexes("indexed", [["status", "placedAt"], ["placedAt"], ["n"], ["status"]]);
    const indexed = backend.collection<Doc>("indexed");
    const plain = backend.collection<Doc>("plain");
    const all = docs(240);
    await indexed.putMany(all.map((d) => [d.id, d] as const));
    await plain.putMany(all.map((d) => [d.id, d] as const));
    await expectSame(indexed, plain);
    // Inside a transaction, with pending writes, and after deletes.
    await backend.transaction(async () => {
      for (const d of all.slice(0, 30)) {
        await indexed.delete(d.id);
        await plain.delete(d.id);
      }
      await indexed.put("late", { id: "late", status: "open", placedAt: 99 });
      await plain.put("late", { id: "late", status: "open", placedAt: 99 });
      await expectSame(indexed, plain);
    });
    await expectSame(indexed, plain);
  });

  test("ensureIndexes: tenant-led indexes give the same results for a tenant's reads and unscoped ones", async (backend) => {
    if (backend.ensureIndexes === undefined || backend.tenantScopes !== true) return;
    await backend.ensureIndexes("indexed", [["status", "placedAt"]], { tenantFirst: true });
    const all = docs(150);
    for (const [i, d] of all.entries()) {
      const tenant = i % 3 === 0 ? "A" : "B";
      await backend.collection<Doc>("indexed", { writeTenantUuid: tenant }).put(d.id, d);
      await backend.collection<Doc>("plain", { writeTenantUuid: tenant }).put(d.id, d);
    }
    for (const t of ["A", "B", "C"]) {
      await expectSame(backend.collection<Doc>("indexed", { readTenantUuid: t }), backend.collection<Doc>("plain", { readTenantUuid: t }));
    }
    await expectSame(backend.collection<Doc>("indexed"), backend.collection<Doc>("plain"));
  });

  test("ensureIndexes: idempotent, reconciles a changed declaration, survives replaceCollections, refuses bad declarations", async (backend) => {
    if (backend.ensureIndexes === undefined) return;
    const col = backend.collection<Doc>("orders");
    await col.put("a", { id: "a", status: "open", placedAt: 2 });
    await backend.ensureIndexes("orders", [["status"], ["placedAt"]]);
    await backend.ensureIndexes("orders", [["status"], ["placedAt"]]);
    await backend.ensureIndexes("orders", [["placedAt"], ["status", "placedAt"]]);
    await backend.ensureIndexes("orders", []);
    await backend.ensureIndexes("orders", [["status", "placedAt"]], { tenantFirst: true });
    await col.put("b", { id: "b", status: "open", placedAt: 1 });
    expect((await col.list({ where: { status: "open" }, orderBy: "placedAt" })).map((d) => d.id)).toEqual(["b", "a"]);
    const replacing = backend as ReadmodelStoreBackend & { replaceCollections?(m: readonly (readonly [string, string])[]): Promise<void> };
    if (replacing.replaceCollections !== undefined) {
      await backend.ensureIndexes("orders#next", [["status", "placedAt"]], { tenantFirst: true });
      await backend.collection<Doc>("orders#next").put("c", { id: "c", status: "open", placedAt: 3 });
      await replacing.replaceCollections([["orders", "orders#next"]]);
      expect((await col.list({ where: { status: "open" }, orderBy: "placedAt" })).map((d) => d.id)).toEqual(["c"]);
    }
    for (const bad of [
      "status",
      [""],
      [["a.b"]],
      [["status", "status"]],
      [[]],
      [[1]],
      [{ fields: ["status"], unique: true }],
      Array.from({ length: 17 }, (_, i) => [`f${i}`]),
      [Array.from({ length: 9 }, (_, i) => `f${i}`)],
    ]) {
      await expectRejectsWith(() => backend.ensureIndexes!("orders", bad as string[][]), "INVALID_REQUEST");
    }
    await expectRejectsWith(() => backend.ensureIndexes!("", [["a"]]), "INVALID_REQUEST");
    await expectRejectsWith(
      () => backend.ensureIndexes!("orders", [["a"]], { tenantFirst: "yes" as unknown as boolean }),
      "INVALID_REQUEST",
    );
  });
}
