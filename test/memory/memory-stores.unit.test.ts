import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { describeCacheStoreContract } from "../../src/testing/cache-store-contract.js";
import { describeCommandStoreContract } from "../../src/testing/command-store-contract.js";
import { describeDataStoreContract } from "../../src/testing/data-store-contract.js";
import { describeEventRepositoryContract } from "../../src/testing/event-repository-contract.js";
import { describeLogStoreContract } from "../../src/testing/log-store-contract.js";
import { describeReadmodelStoreBackendContract } from "../../src/testing/readmodel-store-backend-contract.js";
import { MemoryCacheStore } from "../../src/memory/memory-cache-store.js";
import { MemoryCommandStore } from "../../src/memory/memory-command-store.js";
import { MemoryDataStore } from "../../src/memory/memory-data-store.js";
import { MemoryEventRepository } from "../../src/memory/memory-event-repository.js";
import type { Event, NewEvent } from "../../src/model/types.js";
import type { AppendOptions } from "../../src/store/event-repository.js";
import { MemoryLogStore } from "../../src/memory/memory-log-store.js";
import { MemoryReadmodelStoreBackend } from "../../src/memory/memory-readmodel-store-backend.js";

describeEventRepositoryContract("memory", async () => new MemoryEventRepository());

/** Broken on purpose: it exempts every aggregate from the tenant rule. The suite must catch it. */
class WithoutTenantRule extends MemoryEventRepository {
  override append(events: readonly NewEvent[], opts: AppendOptions = {}): Promise<Event[]> {
    return super.append(events, { ...opts, globalAggregates: events.map((e) => e.aggregateUuid) });
  }
}
describeEventRepositoryContract("memory without the tenant rule (broken on purpose)", async () => new WithoutTenantRule(), {
  expectFailures: [
    {
      reason: "the store omits the tenant rule",
      tests: [
        "an event of another tenant than its aggregate's gives NOT_FOUND and writes nothing",
        "an aggregate belongs to the tenant of its first event, in the same call too; the empty tenant is a tenant",
        "aggregates in globalAggregates take events of any tenant; the others in the same call are still checked",
        "concurrent first appends of one aggregate from two tenants: one tenant's events only",
      ],
    },
  ],
});
/** Broken on purpose: it checks expected versions only of the aggregates it appends to (no read checks). */
class WithoutReadChecks extends MemoryEventRepository {
  override append(events: readonly NewEvent[], opts: AppendOptions = {}): Promise<Event[]> {
    const appended = new Set(events.map((e) => e.aggregateUuid));
    const kept = Object.entries(opts.expectedVersions ?? {}).filter(([agg]) => appended.has(agg));
    return super.append(events, { ...opts, expectedVersions: Object.fromEntries(kept) });
  }
}
describeEventRepositoryContract("memory without read checks (broken on purpose)", async () => new WithoutReadChecks(), {
  expectFailures: [
    {
      reason: "the store ignores expected versions of aggregates the call appends nothing to",
      tests: [
        "expectedVersions of an aggregate without events in the call are checked too",
        "expectedVersions of several aggregates without events (read checks) are each checked; a miss writes nothing and takes no position",
        "concurrent appends checking an aggregate they do not write, racing one write to it: none of them commits after that write",
        // Its expectedVersions key with a lone surrogate is never looked at either.
        "ids with U+0000 or a lone surrogate, or over 512 characters, give INVALID_EVENTS; reads of them INVALID_REQUEST",
      ],
    },
  ],
});
describeCommandStoreContract("memory", async () => new MemoryCommandStore());
describeDataStoreContract("memory", async () => new MemoryDataStore());
describeCacheStoreContract("memory", async () => new MemoryCacheStore());
describeLogStoreContract("memory", async () => new MemoryLogStore());
describeReadmodelStoreBackendContract("memory", async () => new MemoryReadmodelStoreBackend());

// --- Properties of the memory implementations against a reference model ------------------------

type Op =
  | { kind: "put"; col: string; key: string; n: number }
  | { kind: "putMany"; col: string; entries: [string, number][] }
  | { kind: "delete"; col: string; key: string }
  | { kind: "clear"; col: string }
  | { kind: "checkpoint"; handler: string; position: number };

const colArb = fc.constantFrom("a", "b", "c");
const keyArb = fc.constantFrom("k1", "k2", "k3", "k4", "k5");
const opArb: fc.Arbitrary<Op> = fc.oneof(
  fc.record({ kind: fc.constant("put" as const), col: colArb, key: keyArb, n: fc.integer({ min: 0, max: 9 }) }),
  fc.record({
    kind: fc.constant("putMany" as const),
    col: colArb,
    entries: fc.array(fc.tuple(keyArb, fc.integer({ min: 0, max: 9 })), { maxLength: 4 }),
  }),
  fc.record({ kind: fc.constant("delete" as const), col: colArb, key: keyArb }),
  fc.record({ kind: fc.constant("clear" as const), col: colArb }),
  fc.record({ kind: fc.constant("checkpoint" as const), handler: fc.constantFrom("H1", "H2"), position: fc.nat({ max: 100 }) }),
);

async function apply(backend: MemoryReadmodelStoreBackend, op: Op): Promise<void> {
  if (op.kind === "checkpoint") return backend.setCheckpoint(op.handler, op.position);
  const col = backend.collection<{ n: number }>(op.col);
  if (op.kind === "put") return col.put(op.key, { n: op.n });
  if (op.kind === "putMany") return col.putMany(op.entries.map(([k, n]) => [k, { n }] as const));
  if (op.kind === "delete") return void (await col.delete(op.key));
  return col.clear();
}

async function snapshot(backend: MemoryReadmodelStoreBackend): Promise<unknown> {
  const out: Record<string, unknown> = {};
  for (const c of ["a", "b", "c"]) out[c] = await backend.collection(c).list();
  for (const h of ["H1", "H2"]) out[h] = await backend.getCheckpoint(h);
  return out;
}

describe("memory stores: properties", () => {
  it("a rolled-back transaction leaves exactly the state before it", async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(opArb, { maxLength: 15 }), fc.array(opArb, { maxLength: 25 }), async (before, inside) => {
        const backend = new MemoryReadmodelStoreBackend();
        for (const op of before) await apply(backend, op);
        const expected = await snapshot(backend);
        const boom = new Error("rollback");
        await expect(
          backend.transaction(async () => {
            for (const op of inside) await apply(backend, op);
            throw boom;
          }),
        ).rejects.toBe(boom);
        expect(await snapshot(backend)).toEqual(expected);
        // ...and a committed one equals the same ops applied without a transaction.
        const plain = new MemoryReadmodelStoreBackend();
        for (const op of [...before, ...inside]) await apply(plain, op);
        await backend.transaction(async () => {
          for (const op of inside) await apply(backend, op);
        });
        expect(await snapshot(backend)).toEqual(await snapshot(plain));
      }),
      { numRuns: 300 },
    );
  });

  it("collection.list equals filtering and sorting a plain array", async () => {
    const docArb = fc.record({ n: fc.integer({ min: -3, max: 3 }), g: fc.constantFrom("x", "y", "z"), f: fc.boolean() });
    await fc.assert(
      fc.asyncProperty(
        fc.dictionary(fc.stringMatching(/^[a-z]{1,3}$/), docArb, { maxKeys: 30 }),
        fc.record(
          {
            orderBy: fc.constantFrom("n", "g", "f"),
            descending: fc.boolean(),
            offset: fc.nat({ max: 35 }),
            limit: fc.nat({ max: 35 }),
            where: fc.record({ g: fc.constantFrom("x", "y", "z"), f: fc.boolean() }, { requiredKeys: [] }),
          },
          { requiredKeys: [] },
        ),
        async (docs, opts) => {
          const backend = new MemoryReadmodelStoreBackend();
          const col = backend.collection<{ n: number; g: string; f: boolean; key: string }>("c");
          for (const [k, d] of Object.entries(docs)) await col.put(k, { ...d, key: k });
          const cmp = (a: unknown, b: unknown): number => (a === b ? 0 : (a as number) < (b as number) ? -1 : 1);
          let rows = Object.entries(docs).map(([key, d]) => ({ ...d, key }));
          if (opts.where !== undefined)
            rows = rows.filter((r) => Object.entries(opts.where ?? {}).every(([f, v]) => r[f as "g" | "f"] === v));
          rows.sort((a, b) => (opts.orderBy === undefined ? 0 : cmp(a[opts.orderBy], b[opts.orderBy])) || cmp(a.key, b.key));
          if (opts.descending === true) rows.reverse();
          const offset = opts.offset ?? 0;
          const expected = rows.slice(offset, opts.limit === undefined ? undefined : offset + opts.limit).map((r) => r.key);
          expect((await col.list(opts)).map((d) => d.key)).toEqual(expected);
          expect(await col.count(opts.where)).toBe(rows.length);
        },
      ),
      { numRuns: 300 },
    );
  });

  it("readAll returns the filtered events in full pages, whatever the options", async () => {
    const evArb = fc.record({
      agg: fc.constantFrom("a", "b", "c"),
      tenant: fc.constantFrom("", "t1", "t2"),
      name: fc.constantFrom("X", "Y", "Z"),
    });
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.array(evArb, { minLength: 1, maxLength: 5 }), { maxLength: 20 }),
        fc.record(
          {
            afterPosition: fc.nat({ max: 60 }),
            untilPosition: fc.nat({ max: 60 }),
            batchSize: fc.integer({ min: 1, max: 12 }),
            tenantUuid: fc.constantFrom("", "t1", "t2"),
            eventPaths: fc.uniqueArray(fc.constantFrom("D.X", "D.Y", "D.Z", "E.X"), { maxLength: 3 }),
          },
          { requiredKeys: [] },
        ),
        async (batches, opts) => {
          const repo = new MemoryEventRepository();
          const all = [];
          for (const b of batches) {
            all.push(
              ...(await repo.append(
                b.map((e) => ({ domain: "D", name: e.name, aggregateUuid: `${e.tenant}/${e.agg}`, tenantUuid: e.tenant, payload: null })),
              )),
            );
          }
          const expected = all.filter(
            (e) =>
              e.position > (opts.afterPosition ?? 0) &&
              e.position <= (opts.untilPosition ?? Infinity) &&
              (opts.tenantUuid === undefined || e.tenantUuid === opts.tenantUuid) &&
              (opts.eventPaths === undefined || (opts.eventPaths as readonly string[]).includes(`${e.domain}.${e.name}`)),
          );
          const pages = [];
          for await (const p of repo.readAll(opts)) pages.push(p);
          const size = opts.batchSize ?? 1000;
          pages.forEach((p, i) => expect(p.length).toBe(i < pages.length - 1 ? size : p.length));
          for (const p of pages) expect(p.length).toBeGreaterThan(0);
          expect(pages.flat()).toEqual(expected);
        },
      ),
      { numRuns: 300 },
    );
  });
});
