/**
 * Concurrency of dispatch: in-process serialisation per aggregate, exactly-once
 * across two facades sharing one event repository, expected versions from the
 * request context, and aggregate loading inside a handler that cannot deadlock.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { createFacade, defineDomain, type RequestContext } from "mneme";
import { rejection } from "../support/rejections.js";
import { startedFacades } from "../support/started-facades.js";
import { MemoryEventRepository } from "mneme/memory";

const admin: RequestContext = {
  senderAccountUuid: "acc-1",
  senderSessionUuid: "ses-1",
  senderIdentityUuid: "idn-1",
  senderTenantUuid: "ten-1",
};

function counterDomain() {
  const Counting = defineDomain("Counting");
  const Incremented = Counting.event<{ by: number; seen: number }>("Incremented");
  const Counter = Counting.aggregate<{ value: number }>("Counter", {
    initialState: () => ({ value: 0 }),
    evolve: { Incremented: (s, p: { by: number }) => ({ value: s.value + p.by }) },
  });
  /** Loads, yields to the event loop (so other commands interleave), then appends. */
  const Increment = Counting.command<{ counterUuid: string }>("Increment");
  Counting.handleCommand(Increment, async (ctx, _c, p) => {
    const c = await ctx.aggregates.load(Counter, p.counterUuid);
    await new Promise((r) => setImmediate(r));
    return [Incremented.create(p.counterUuid, { by: 1, seen: c.version })];
  });
  /** Appends without loading: the store assigns the next version. */
  const Blind = Counting.command<{ counterUuid: string; others?: string[] }>("Blind");
  Counting.handleCommand(Blind, (_ctx, _c, p) => [
    Incremented.create(p.counterUuid, { by: 1, seen: -1 }),
    ...(p.others ?? []).map((o) => Incremented.create(o, { by: 1, seen: -1 })),
  ]);
  return { Counting, Incremented, Counter, Increment, Blind };
}

const started = startedFacades();

/** The promise's value, or "deadlock" when it has not settled after 10 s (a hang, not a timing check). */
async function orHang<T>(p: Promise<T>): Promise<T | "deadlock"> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const hang = new Promise<"deadlock">((r) => {
    timer = setTimeout(() => r("deadlock"), 10_000);
  });
  try {
    return await Promise.race([p, hang]);
  } finally {
    clearTimeout(timer);
  }
}

describe("in-process serialisation", () => {
  it("50 concurrent load+append commands on one aggregate all succeed with versions 1..50", async () => {
    const { Counting, Increment, Counter } = counterDomain();
    const f = await started((f) => f.registerDomain(Counting));
    const results = await Promise.allSettled(
      Array.from({ length: 50 }, () => f.dispatch(Increment, { counterUuid: "c" }, { reqCtx: admin })),
    );
    expect(results.filter((r) => r.status === "rejected")).toEqual([]);
    const events = await f.eventRepository.loadAggregate("c");
    expect(events.map((e) => e.version)).toEqual(Array.from({ length: 50 }, (_, i) => i + 1));
    // every handler saw the state its event was appended on
    expect(events.map((e) => (e.payload as { seen: number }).seen)).toEqual(Array.from({ length: 50 }, (_, i) => i));
    expect((await f.loadAggregate(Counter, "c")).state.value).toBe(50);
  });

  it("commands on different aggregates are not serialised with each other", async () => {
    const Gate = defineDomain("Gate");
    const Passed = Gate.event<object>("Passed");
    const Thing = Gate.aggregate("Thing", { initialState: () => 0, evolve: {} });
    const Enter = Gate.command<{ id: string }>("Enter");
    let inside = 0;
    let maxInside = 0;
    let open!: () => void;
    const gate = new Promise<void>((r) => (open = r));
    Gate.handleCommand(Enter, async (ctx, _c, p) => {
      await ctx.aggregates.load(Thing, p.id);
      inside++;
      maxInside = Math.max(maxInside, inside);
      if (inside === 3) open();
      await gate; // deadlocks unless three commands on three aggregates are inside together
      inside--;
      return [Passed.create(p.id, {})];
    });
    const f = await started((f) => f.registerDomain(Gate));
    await Promise.all(["a", "b", "c"].map((id) => f.dispatch(Enter, { id }, { reqCtx: admin })));
    expect(maxInside).toBe(3);
  });

  it("a failing command releases the aggregate lock", async () => {
    const D = defineDomain("D");
    const Happened = D.event<object>("Happened");
    const Thing = D.aggregate("Thing", { initialState: () => 0, evolve: {} });
    const Maybe = D.command<{ fail: boolean }>("Maybe");
    D.handleCommand(Maybe, async (ctx, _c, p) => {
      await ctx.aggregates.load(Thing, "t");
      if (p.fail) throw new Error("no");
      return [Happened.create("t", {})];
    });
    const f = await started((f) => f.registerDomain(D));
    await expect(f.dispatch(Maybe, { fail: true }, { reqCtx: admin })).rejects.toMatchObject({ code: "HANDLER_FAILED" });
    await f.dispatch(Maybe, { fail: false }, { reqCtx: admin });
    expect((await f.eventRepository.loadAggregate("t")).length).toBe(1);
  });

  it("loading aggregates concurrently inside one handler (Promise.all) does not deadlock against another command doing the same in the opposite order", async () => {
    const D = defineDomain("D");
    const Linked = D.event<object>("Linked");
    const Node = D.aggregate("Node", { initialState: () => 0, evolve: {} });
    const Link = D.command<{ a: string; b: string }>("Link");
    D.handleCommand(Link, async (ctx, _c, p) => {
      await Promise.all([ctx.aggregates.load(Node, p.a), ctx.aggregates.load(Node, p.b)]);
      await new Promise((r) => setImmediate(r));
      return [Linked.create(p.a, {}), Linked.create(p.b, {})];
    });
    const f = await started((f) => f.registerDomain(D));
    const outcome = await orHang(
      Promise.allSettled([
        f.dispatch(Link, { a: "x", b: "y" }, { reqCtx: admin }),
        f.dispatch(Link, { a: "y", b: "x" }, { reqCtx: admin }),
      ]),
    );
    expect(outcome).not.toBe("deadlock");
    const settled = outcome as PromiseSettledResult<unknown>[];
    // at least one succeeds; a loser fails only with CONFLICT (the store decided), never a hang
    expect(settled.some((r) => r.status === "fulfilled")).toBe(true);
    for (const r of settled) if (r.status === "rejected") expect(r.reason).toMatchObject({ code: "CONFLICT" });
    // and the aggregates are not left locked
    await f.dispatch(Link, { a: "x", b: "y" }, { reqCtx: admin });
  });

  it("loading the same aggregate twice at once inside one handler does not deadlock", async () => {
    const D = defineDomain("D");
    const Touched = D.event<object>("Touched");
    const Node = D.aggregate("Node", { initialState: () => 0, evolve: {} });
    const Touch = D.command("Touch");
    D.handleCommand(Touch, async (ctx) => {
      const [a, b] = await Promise.all([ctx.aggregates.load(Node, "n"), ctx.aggregates.load(Node, "n")]);
      expect(a.version).toBe(b.version);
      return [Touched.create("n", {})];
    });
    const f = await started((f) => f.registerDomain(D));
    const outcome = await orHang(Promise.all([f.dispatch(Touch, {}, { reqCtx: admin }), f.dispatch(Touch, {}, { reqCtx: admin })]));
    expect(outcome).not.toBe("deadlock");
    expect((await f.eventRepository.loadAggregate("n")).map((e) => e.version)).toEqual([1, 2]);
  });

  it("a handler whose concurrent loads reject early does not leave an aggregate locked", async () => {
    const D = defineDomain("D");
    const Touched = D.event<object>("Touched");
    const Node = D.aggregate("Node", { initialState: () => 0, evolve: {} });
    const Hold = D.command("Hold");
    const Race = D.command("Race");
    const TouchB = D.command("TouchB");
    let releaseHold!: () => void;
    const held = new Promise<void>((r) => (releaseHold = r));
    D.handleCommand(Hold, async (ctx) => {
      await ctx.aggregates.load(Node, "b"); // holds b's lock
      await held;
      return [];
    });
    D.handleCommand(Race, async (ctx) => {
      // "a" is free and taken first; "b" waits behind Hold; "" rejects at once, so the handler fails while waiting for "b"
      await Promise.all([ctx.aggregates.load(Node, "a"), ctx.aggregates.load(Node, "b"), ctx.aggregates.load(Node, "")]);
      return [];
    });
    D.handleCommand(TouchB, async (ctx) => {
      await ctx.aggregates.load(Node, "b");
      return [Touched.create("b", {})];
    });
    const f = await started((f) => f.registerDomain(D));
    const hold = f.dispatch(Hold, {}, { reqCtx: admin });
    await new Promise((r) => setImmediate(r));
    await expect(f.dispatch(Race, {}, { reqCtx: admin })).rejects.toMatchObject({ code: "INVALID_REQUEST" });
    releaseHold();
    await hold;
    const outcome = await orHang(f.dispatch(TouchB, {}, { reqCtx: admin }));
    expect(outcome).not.toBe("deadlock");
  });
});

describe("two facades on one shared MemoryEventRepository", () => {
  it("racing on one aggregate: exactly one command wins, the other gets CONFLICT, one event is stored", async () => {
    const { Counting, Counter, Incremented } = counterDomain();
    const Claim = Counting.command<{ counterUuid: string }>("Claim");
    let arrived = 0;
    let both!: () => void;
    const barrier = new Promise<void>((r) => (both = r));
    Counting.handleCommand(Claim, async (ctx, _c, p) => {
      const c = await ctx.aggregates.load(Counter, p.counterUuid);
      if (c.version !== 0) throw new Error("claimed already");
      if (++arrived === 2) both();
      await barrier; // both facades have loaded version 0 before either appends
      return [Incremented.create(p.counterUuid, { by: 1, seen: c.version })];
    });
    const repo = new MemoryEventRepository();
    const f1 = await started((f) => f.registerDomain(Counting), { eventRepository: repo });
    const f2 = await started((f) => f.registerDomain(Counting), { eventRepository: repo });
    const results = await Promise.allSettled([
      f1.dispatch(Claim, { counterUuid: "prize" }, { reqCtx: admin }),
      f2.dispatch(Claim, { counterUuid: "prize" }, { reqCtx: admin }),
    ]);
    expect(results.filter((r) => r.status === "fulfilled")).toHaveLength(1);
    const lost = results.find((r) => r.status === "rejected") as PromiseRejectedResult;
    expect(lost.reason).toMatchObject({ code: "CONFLICT" });
    expect((await repo.loadAggregate("prize")).map((e) => e.version)).toEqual([1]);
    // the loser's audit record says failed with CONFLICT
    const loser = results[0].status === "rejected" ? f1 : f2;
    const recs = (await loser.commandStore.list()).items;
    expect(recs.map((r) => [r.status, r.error?.code])).toEqual([["failed", "CONFLICT"]]);
  });

  it("property: any interleaving of load+append commands from two facades keeps versions dense and each success at its seen version", async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(fc.tuple(fc.boolean(), fc.constantFrom("a", "b")), { minLength: 1, maxLength: 12 }), async (plan) => {
        const { Counting, Increment } = counterDomain();
        const repo = new MemoryEventRepository();
        const f1 = createFacade({ eventRepository: repo }).registerDomain(Counting);
        const f2 = createFacade({ eventRepository: repo }).registerDomain(Counting);
        await f1.start();
        await f2.start();
        try {
          const results = await Promise.allSettled(
            plan.map(([first, agg]) => (first ? f1 : f2).dispatch(Increment, { counterUuid: agg }, { reqCtx: admin })),
          );
          for (const r of results) if (r.status === "rejected") expect(r.reason).toMatchObject({ code: "CONFLICT" });
          const ok = results.filter((r) => r.status === "fulfilled").length;
          let stored = 0;
          for (const agg of ["a", "b"]) {
            const events = await repo.loadAggregate(agg);
            stored += events.length;
            expect(events.map((e) => e.version)).toEqual(events.map((_, i) => i + 1));
            expect(events.map((e) => (e.payload as { seen: number }).seen)).toEqual(events.map((_, i) => i));
          }
          expect(stored).toBe(ok);
        } finally {
          await f1.stop();
          await f2.stop();
        }
      }),
      { numRuns: 40 },
    );
  });
});

describe("expected versions from the request context", () => {
  async function withCounter(version: number) {
    const d = counterDomain();
    const f = await started((f) => f.registerDomain(d.Counting));
    for (let i = 0; i < version; i++) await f.dispatch(d.Blind, { counterUuid: "c" }, { reqCtx: admin });
    return { ...d, f };
  }

  it("targetAggregateVersion with targetAggregateUuid: CONFLICT when moved, success when current", async () => {
    const { f, Blind } = await withCounter(2);
    const e = await rejection(
      f.dispatch(Blind, { counterUuid: "c" }, { reqCtx: { ...admin, targetAggregateUuid: "c", targetAggregateVersion: 1 } }),
    );
    expect(e.code).toBe("CONFLICT");
    expect(await f.eventRepository.headPosition()).toBe(2);
    const ok = await f.dispatch(Blind, { counterUuid: "c" }, { reqCtx: { ...admin, targetAggregateUuid: "c", targetAggregateVersion: 2 } });
    expect(ok.events[0]!.version).toBe(3);
  });

  it("targetAggregateVersion without targetAggregateUuid applies to the command's single aggregate", async () => {
    const { f, Blind } = await withCounter(2);
    const e = await rejection(f.dispatch(Blind, { counterUuid: "c" }, { reqCtx: { ...admin, targetAggregateVersion: 1 } }));
    expect(e.code).toBe("CONFLICT");
    const ok = await f.dispatch(Blind, { counterUuid: "c" }, { reqCtx: { ...admin, targetAggregateVersion: 2 } });
    expect(ok.events[0]!.version).toBe(3);
  });

  it("expected version 0 means the aggregate must not exist", async () => {
    const { f, Blind } = await withCounter(1);
    const e = await rejection(f.dispatch(Blind, { counterUuid: "c" }, { reqCtx: { ...admin, targetAggregateVersion: 0 } }));
    expect(e.code).toBe("CONFLICT");
    const ok = await f.dispatch(Blind, { counterUuid: "new" }, { reqCtx: { ...admin, targetAggregateVersion: 0 } });
    expect(ok.events[0]!.version).toBe(1);
  });

  it("targetAggregateUuid applies only to its aggregate in a multi-aggregate command", async () => {
    const { f, Blind } = await withCounter(2);
    const e = await rejection(
      f.dispatch(
        Blind,
        { counterUuid: "other", others: ["c"] },
        { reqCtx: { ...admin, targetAggregateUuid: "c", targetAggregateVersion: 1 } },
      ),
    );
    expect(e.code).toBe("CONFLICT");
    expect(await f.eventRepository.loadAggregate("other")).toEqual([]);
    // without targetAggregateUuid, a multi-aggregate command has no single aggregate: ambiguous, refused (not ignored)
    const ambiguous = await rejection(
      f.dispatch(Blind, { counterUuid: "other", others: ["c"] }, { reqCtx: { ...admin, targetAggregateVersion: 1 } }),
    );
    expect(ambiguous.code).toBe("INVALID_REQUEST");
    expect(await f.eventRepository.loadAggregate("other")).toEqual([]);
    // a targetAggregateUuid the command neither loads nor appends to: refused too, whatever the version
    const elsewhere = await rejection(
      f.dispatch(Blind, { counterUuid: "other" }, { reqCtx: { ...admin, targetAggregateUuid: "c", targetAggregateVersion: 7 } }),
    );
    expect(elsewhere.code).toBe("INVALID_REQUEST");
    expect(await f.eventRepository.loadAggregate("other")).toEqual([]);
    const ok = await f.dispatch(
      Blind,
      { counterUuid: "other", others: ["c"] },
      { reqCtx: { ...admin, targetAggregateUuid: "c", targetAggregateVersion: 2 } },
    );
    expect(ok.events.map((x) => x.version)).toEqual([1, 3]);
  });

  it("a handler that loads the targeted aggregate: CONFLICT when the request's version is stale (with or without targetAggregateUuid)", async () => {
    const { f, Increment } = await withCounter(2);
    for (const reqCtx of [
      { ...admin, targetAggregateUuid: "c", targetAggregateVersion: 1 },
      { ...admin, targetAggregateVersion: 1 },
    ]) {
      const e = await rejection(f.dispatch(Increment, { counterUuid: "c" }, { reqCtx }));
      expect(e.code).toBe("CONFLICT");
      expect(await f.eventRepository.headPosition()).toBe(2);
    }
    const ok = await f.dispatch(Increment, { counterUuid: "c" }, { reqCtx: { ...admin, targetAggregateVersion: 2 } });
    expect(ok.events[0]!.version).toBe(3);
  });

  it("the loaded version wins as the expected version: a concurrent writer between load and append gives CONFLICT", async () => {
    const d = counterDomain();
    const repo = new MemoryEventRepository();
    const Slow = d.Counting.command<{ counterUuid: string }>("Slow");
    d.Counting.handleCommand(Slow, async (ctx, _c, p) => {
      const c = await ctx.aggregates.load(d.Counter, p.counterUuid);
      await repo.append([d.Incremented.create(p.counterUuid, { by: 1, seen: -1 }, { tenantUuid: admin.senderTenantUuid! })]); // another process
      return [d.Incremented.create(p.counterUuid, { by: 1, seen: c.version })];
    });
    const f = await started((f) => f.registerDomain(d.Counting), { eventRepository: repo });
    const e = await rejection(f.dispatch(Slow, { counterUuid: "c" }, { reqCtx: admin }));
    expect(e.code).toBe("CONFLICT");
    expect((await repo.loadAggregate("c")).length).toBe(1);
  });
});
