/**
 * The aggregate cache: a load folds only the events after the cached version,
 * so it must give exactly what a full fold gives, whoever appended (this
 * facade or another one on the same database), whatever a handler or an
 * evolve does to the state it got, and across tenants. Checked on memory,
 * SQLite (two facades on one file) and Postgres (two facades on one schema).
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { createFacade, defineDomain, type Facade, type FacadeOptions } from "mneme";
import { rejection } from "../support/rejections.js";
import { alice, bob, sharedPlaces } from "../support/shared-places.js";

interface Ledger {
  balance: number;
  entries: number[];
  tags: Map<string, number>;
}

function ledgerDomain() {
  const Bank = defineDomain("Bank");
  const Booked = Bank.event<{ amount: number; tag: string }>("Booked");
  // An evolve that mutates its state in place (allowed): the cache must keep its own copy.
  const LedgerAgg = Bank.aggregate<Ledger>("Ledger", {
    initialState: () => ({ balance: 0, entries: [], tags: new Map() }),
    evolve: {
      Booked: (s, p: { amount: number; tag: string }) => {
        s.balance += p.amount;
        s.entries.push(p.amount);
        s.tags.set(p.tag, (s.tags.get(p.tag) ?? 0) + 1);
        return s;
      },
    },
  });
  /** A state the cache cannot copy (a class instance): loads must still be right. */
  class Counter {
    constructor(readonly n: number) {}
    plus(k: number): Counter {
      return new Counter(this.n + k);
    }
  }
  const CounterAgg = Bank.aggregate<Counter>("Counter", {
    initialState: () => new Counter(0),
    evolve: { Booked: (s, p: { amount: number }) => s.plus(p.amount) },
  });
  const Book = Bank.command<{ ledgerUuid: string; amount: number; tag: string; vandalise?: boolean }>("Book");
  Bank.handleCommand(Book, async (ctx, _cmd, p) => {
    const { state } = await ctx.aggregates.load(LedgerAgg, p.ledgerUuid);
    if (p.vandalise === true) {
      // A handler that scribbles on what it loaded and then fails: nothing may stick.
      state.balance = -1_000_000;
      state.entries.length = 0;
      state.tags.clear();
      throw new Error("refused after vandalising the loaded state");
    }
    if (state.balance + p.amount < 0) throw new Error("overdrawn");
    return [Booked.create(p.ledgerUuid, { amount: p.amount, tag: p.tag })];
  });
  const Blind = Bank.command<{ ledgerUuid: string; amount: number }>("Blind");
  Bank.handleCommand(Blind, (_ctx, _cmd, p) => [Booked.create(p.ledgerUuid, { amount: p.amount, tag: "blind" })]);
  return { Bank, LedgerAgg, CounterAgg, Book, Blind };
}

/** The full fold, without any cache: the reference. */
async function reference(
  f: Facade,
  d: ReturnType<typeof ledgerDomain>,
  uuid: string,
): Promise<{ balance: number; entries: number[]; tags: [string, number][]; version: number }> {
  const events = await f.eventRepository.loadAggregate(uuid);
  let s: Ledger = { balance: 0, entries: [], tags: new Map() };
  for (const e of events) s = d.LedgerAgg.apply(s, e);
  return { balance: s.balance, entries: s.entries, tags: [...s.tags], version: events.length };
}

async function viaFacade(f: Facade, d: ReturnType<typeof ledgerDomain>, uuid: string, tenantUuid = "tenant-a") {
  const { state, version } = await f.loadAggregate(d.LedgerAgg, uuid, { tenantUuid });
  return { balance: state.balance, entries: state.entries, tags: [...state.tags], version };
}

const places = sharedPlaces("aggcache");

describe.each(places)("aggregate cache on %s", (_name, placeOf) => {
  async function pair(opts: Partial<FacadeOptions> = {}) {
    const d = ledgerDomain();
    const stores = placeOf();
    const [a, b] = [stores(), stores()];
    const f1 = createFacade({ appName: "cache-1", ...a, ...opts }).registerDomain(d.Bank);
    const f2 = createFacade({ appName: "cache-2", ...b, ...opts }).registerDomain(d.Bank);
    await f1.start();
    await f2.start();
    const stop = async () => {
      await f2.stop();
      await f1.stop();
    };
    return { d, f1, f2, stop };
  }

  it("reads what another facade appended since the cached version, and its CONFLICT leaves the cache right", async () => {
    const { d, f1, f2, stop } = await pair();
    try {
      await f1.dispatch(d.Book, { ledgerUuid: "L1", amount: 10, tag: "a" }, { reqCtx: alice });
      await f1.dispatch(d.Book, { ledgerUuid: "L1", amount: 5, tag: "b" }, { reqCtx: alice });
      expect(await viaFacade(f1, d, "L1")).toEqual(await reference(f1, d, "L1"));
      // f2 appends twice behind f1's back.
      await f2.dispatch(d.Book, { ledgerUuid: "L1", amount: -3, tag: "a" }, { reqCtx: alice });
      await f2.dispatch(d.Blind, { ledgerUuid: "L1", amount: 100 }, { reqCtx: alice });
      expect(await viaFacade(f1, d, "L1")).toEqual({
        balance: 112,
        entries: [10, 5, -3, 100],
        tags: [
          ["a", 2],
          ["b", 1],
          ["blind", 1],
        ],
        version: 4,
      });
      expect(f1.aggregateCacheStats()!.hits).toBeGreaterThan(0);
      // A stale expected version through the cache is still refused by the store.
      const stale = await rejection(
        f1.dispatch(
          d.Book,
          { ledgerUuid: "L1", amount: 1, tag: "x" },
          { reqCtx: { ...alice, targetAggregateUuid: "L1", targetAggregateVersion: 3 } },
        ),
      );
      expect(stale.code).toBe("CONFLICT");
      await f1.dispatch(d.Book, { ledgerUuid: "L1", amount: 1, tag: "x" }, { reqCtx: alice });
      expect(await viaFacade(f1, d, "L1")).toEqual(await reference(f1, d, "L1"));
      expect(await viaFacade(f2, d, "L1")).toEqual(await reference(f2, d, "L1"));
    } finally {
      await stop();
    }
  });

  it("hands out copies: a handler that mutates its loaded state and fails, or a caller that mutates a load, changes nothing", async () => {
    const { d, f1, stop } = await pair();
    try {
      await f1.dispatch(d.Book, { ledgerUuid: "L2", amount: 7, tag: "a" }, { reqCtx: alice });
      const loaded = await f1.loadAggregate(d.LedgerAgg, "L2");
      loaded.state.balance = 999;
      loaded.state.entries.push(999);
      loaded.state.tags.set("evil", 1);
      const e = await rejection(f1.dispatch(d.Book, { ledgerUuid: "L2", amount: 1, tag: "a", vandalise: true }, { reqCtx: alice }));
      expect(e.code).toBe("HANDLER_FAILED");
      // The overdraft check sees the true balance (7), not a vandalised one.
      expect((await rejection(f1.dispatch(d.Book, { ledgerUuid: "L2", amount: -8, tag: "a" }, { reqCtx: alice }))).code).toBe(
        "HANDLER_FAILED",
      );
      await f1.dispatch(d.Book, { ledgerUuid: "L2", amount: -7, tag: "a" }, { reqCtx: alice });
      expect(await viaFacade(f1, d, "L2")).toEqual({ balance: 0, entries: [7, -7], tags: [["a", 2]], version: 2 });
    } finally {
      await stop();
    }
  });

  it("keeps the tenant rule on a cached aggregate: NOT_FOUND for another tenant, worded as for an absent one", async () => {
    const { d, f1, stop } = await pair();
    try {
      await f1.dispatch(d.Book, { ledgerUuid: "L3", amount: 1, tag: "a" }, { reqCtx: alice });
      await f1.loadAggregate(d.LedgerAgg, "L3", { tenantUuid: "tenant-a" });
      const hits = f1.aggregateCacheStats()!.hits;
      const other = await rejection(f1.dispatch(d.Book, { ledgerUuid: "L3", amount: 1, tag: "b" }, { reqCtx: bob }));
      expect(f1.aggregateCacheStats()!.hits).toBeGreaterThan(hits);
      expect(other.code).toBe("NOT_FOUND");
      expect(other.message).toBe("Bank.Ledger L3 was not found");
      expect((await rejection(f1.loadAggregate(d.LedgerAgg, "L3", { tenantUuid: "tenant-b" }))).code).toBe("NOT_FOUND");
      expect(await viaFacade(f1, d, "L3")).toEqual({ balance: 1, entries: [1], tags: [["a", 1]], version: 1 });
    } finally {
      await stop();
    }
  });

  it("folds a state it cannot copy (a class instance) in full every time, with the same outcome", async () => {
    const { d, f1, f2, stop } = await pair();
    try {
      for (const amount of [1, 2, 3]) await f1.dispatch(d.Blind, { ledgerUuid: "L4", amount }, { reqCtx: alice });
      const first = await f1.loadAggregate(d.CounterAgg, "L4");
      expect(first.state.n).toBe(6);
      expect(first.state.plus(1).n).toBe(7);
      await f2.dispatch(d.Blind, { ledgerUuid: "L4", amount: 10 }, { reqCtx: alice });
      const second = await f1.loadAggregate(d.CounterAgg, "L4");
      expect([second.state.n, second.version]).toEqual([16, 4]);
      expect(second.state.plus(0)).toBeInstanceOf(first.state.constructor);
      expect(f1.aggregateCacheStats()!.uncacheableTypes).toEqual(["Bank.Counter"]);
    } finally {
      await stop();
    }
  });

  it("stays within maxAggregates, least recently used out first", async () => {
    const { d, f1, stop } = await pair({ aggregateCache: { maxAggregates: 3 } });
    try {
      for (const id of ["A", "B", "C", "D", "E"]) await f1.dispatch(d.Book, { ledgerUuid: id, amount: 1, tag: id }, { reqCtx: alice });
      for (const id of ["A", "B", "C", "D", "E"]) await f1.loadAggregate(d.LedgerAgg, id);
      expect(f1.aggregateCacheStats()!.size).toBe(3);
      const before = f1.aggregateCacheStats()!;
      await f1.loadAggregate(d.LedgerAgg, "E"); // cached
      await f1.loadAggregate(d.LedgerAgg, "A"); // evicted long ago
      const after = f1.aggregateCacheStats()!;
      expect([after.hits - before.hits, after.misses - before.misses]).toEqual([1, 1]);
      for (const id of ["A", "B", "C", "D", "E"]) expect(await viaFacade(f1, d, id)).toEqual(await reference(f1, d, id));
    } finally {
      await stop();
    }
  });

  it("gives what a full fold gives, under random interleavings of two facades (property)", async () => {
    const { d, f1, f2, stop } = await pair({ aggregateCache: { maxAggregates: 2 } });
    let run = 0;
    try {
      await fc.assert(
        fc.asyncProperty(
          fc.array(
            fc.record({
              by: fc.constantFrom(0, 1),
              agg: fc.constantFrom("P", "Q", "R"),
              amount: fc.integer({ min: -5, max: 9 }),
              blind: fc.boolean(),
            }),
            {
              minLength: 1,
              maxLength: 12,
            },
          ),
          async (steps) => {
            run++;
            for (const s of steps) {
              const f = s.by === 0 ? f1 : f2;
              const ledgerUuid = `${s.agg}-${run}`;
              if (s.blind) await f.dispatch(d.Blind, { ledgerUuid, amount: s.amount }, { reqCtx: alice });
              else
                await f
                  .dispatch(d.Book, { ledgerUuid, amount: s.amount, tag: "t" }, { reqCtx: alice })
                  .catch((e: Error) => expect(e.message).toMatch(/overdrawn/));
              for (const g of [f1, f2]) expect(await viaFacade(g, d, ledgerUuid)).toEqual(await reference(g, d, ledgerUuid));
            }
          },
        ),
        { numRuns: 15 },
      );
    } finally {
      await stop();
    }
  });
});

describe("aggregate cache options", () => {
  it("is off with aggregateCache: false and refuses a bad bound", async () => {
    const d = ledgerDomain();
    const f = createFacade({ aggregateCache: false }).registerDomain(d.Bank);
    await f.start();
    try {
      await f.dispatch(d.Book, { ledgerUuid: "Z", amount: 1, tag: "a" }, { reqCtx: alice });
      expect(f.aggregateCacheStats()).toBeUndefined();
      expect((await f.loadAggregate(d.LedgerAgg, "Z")).state.balance).toBe(1);
    } finally {
      await f.stop();
    }
    expect(() => createFacade({ aggregateCache: { maxAggregates: 0 } })).toThrow(/maxAggregates/);
  });
});

describe("aggregates that fold personal data", () => {
  it("are neither cached nor snapshotted: a folded copy of personal fields would outlive forget()", async () => {
    const D = defineDomain("People");
    const Named = D.event<{ personUuid: string; name: string }>("Named", {
      personalData: { subject: (p) => p.personUuid, fields: ["name"] },
    });
    const Person = D.aggregate<{ name: string }>("Person", {
      initialState: () => ({ name: "" }),
      evolve: { Named: (_s, p: { name: string }) => ({ name: p.name }) },
      snapshotEvery: 1,
    });
    const Name = D.command<{ personUuid: string; name: string }>("Name");
    D.handleCommand(Name, async (ctx, _cmd, p) => {
      await ctx.aggregates.load(Person, p.personUuid);
      return [Named.create(p.personUuid, { personUuid: p.personUuid, name: p.name })];
    });
    const f = createFacade().registerDomain(D);
    await f.start();
    try {
      for (const name of ["Ada", "Ada L.", "Ada Lovelace"]) await f.dispatch(Name, { personUuid: "p1", name }, { reqCtx: alice });
      expect((await f.loadAggregate(Person, "p1")).state.name).toBe("Ada Lovelace");
      expect(f.aggregateCacheStats()).toMatchObject({ size: 0, hits: 0 });
      await new Promise((r) => setTimeout(r, 20));
      expect(await f.snapshotStore.latest("People", "Person", "p1", 1)).toBeUndefined();
      await f.forget("p1");
      expect((await f.loadAggregate(Person, "p1")).state.name).toBe("[erased]");
    } finally {
      await f.stop();
    }
  });
});

describe("aggregate cache copies", () => {
  it("hand out private copies that keep shared references, cycles, Map, Set, Date, null prototypes and a __proto__ key", async () => {
    const { AggregateCache } = await import("../../src/app/aggregate-cache.js");
    const cache = new AggregateCache();
    const type = { domain: "Copy", name: "State" } as never;
    const shared = { n: 1 };
    const state: Record<string, unknown> = {
      a: shared,
      b: shared,
      list: [shared, [1, 2]],
      map: new Map([["k", shared]]),
      set: new Set([1]),
      at: new Date(5),
      bare: Object.assign(Object.create(null) as object, { x: 1 }),
    };
    Object.defineProperty(state, "__proto__", { value: { p: 1 }, enumerable: true, writable: true, configurable: true });
    state.self = state;
    cache.set(type, "agg-1", state, 1, "t");
    for (let i = 0; i < 2; i++) {
      const got = cache.get<Record<string, any>>(type, "agg-1")!.state;
      expect(got).not.toBe(state);
      expect(got.self).toBe(got);
      expect(got.a).toBe(got.b);
      expect(got.a).not.toBe(shared);
      expect(got.list[0]).toBe(got.a);
      expect(got.map.get("k")).toBe(got.a);
      expect(got.at).toBeInstanceOf(Date);
      expect(got.at.getTime()).toBe(5);
      expect(got.set.has(1)).toBe(true);
      expect(Object.getPrototypeOf(got.bare)).toBe(null);
      expect(Object.getPrototypeOf(got)).toBe(Object.prototype);
      expect(Object.getOwnPropertyDescriptor(got, "__proto__")?.value).toEqual({ p: 1 });
      // A mutation of a handed-out copy changes nothing cached.
      got.a.n = 99;
      got.list.push(3);
    }
    expect(cache.get<Record<string, any>>(type, "agg-1")!.state.a.n).toBe(1);
  });
});
