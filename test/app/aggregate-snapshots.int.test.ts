/**
 * Aggregate snapshots through the facade: a load reads the newest snapshot of
 * the type's snapshotVersion plus the events after it, saves one when it
 * folds past a multiple of snapshotEvery, ignores snapshots of another
 * snapshotVersion, and never depends on them for an outcome (deleting them
 * all, or a damaged one, changes nothing). On memory, SQLite and Postgres,
 * with the aggregate cache off so that every load goes to the stores.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { createFacade, defineDomain, type Facade, type FacadeOptions } from "mneme";
import { snapshotDigestMatches, type EventRepository, type SnapshotRecord } from "mneme/store";
import { rejection } from "../support/rejections.js";
import { until } from "../support/until.js";
import { alice, bob, sharedPlaces } from "../support/shared-places.js";

function counterDomain(snapshotEvery: number | undefined, snapshotVersion = 1) {
  const D = defineDomain("Count");
  const Added = D.event<{ n: number }>("Added");
  const Counter = D.aggregate<{ total: number; seen: number[] }>("Counter", {
    initialState: () => ({ total: 0, seen: [] }),
    evolve: { Added: (s, p: { n: number }) => ({ total: s.total + p.n, seen: [...s.seen, p.n].slice(-5) }) },
    ...(snapshotEvery === undefined ? {} : { snapshotEvery, snapshotVersion }),
  });
  /** A state that is not JSON-safe (a Map): snapshots are skipped, loads stay right. */
  const Tally = D.aggregate<Map<number, number>>("Tally", {
    initialState: () => new Map(),
    evolve: { Added: (s, p: { n: number }) => new Map(s).set(p.n, (s.get(p.n) ?? 0) + 1) },
    snapshotEvery: 2,
  });
  const Add = D.command<{ counterUuid: string; n: number }>("Add");
  D.handleCommand(Add, async (ctx, _cmd, p) => {
    await ctx.aggregates.load(Counter, p.counterUuid);
    return [Added.create(p.counterUuid, { n: p.n })];
  });
  return { D, Counter, Tally, Add };
}

/** Waits until the background save of the snapshot at `version` is visible. */
async function snapshotAt(f: Facade, uuid: string, snapshotVersion: number, version: number): Promise<void> {
  for (let i = 0; i < 200; i++) {
    if ((await f.snapshotStore.latest("Count", "Counter", uuid, snapshotVersion))?.version === version) return;
    await new Promise((r) => setTimeout(r, 5));
  }
  throw new Error(`no snapshot of ${uuid} at version ${version}`);
}

/** Records the fromVersion of every loadAggregate call of a repository. */
function spied(repo: EventRepository): { reads: (number | undefined)[] } {
  const seen = { reads: [] as (number | undefined)[] };
  const original = repo.loadAggregate.bind(repo);
  repo.loadAggregate = (uuid, opts) => {
    seen.reads.push(opts?.fromVersion);
    return original(uuid, opts);
  };
  return seen;
}

const places = sharedPlaces("snapshots");

describe.each(places)("snapshots on %s", (_name, placeOf) => {
  async function facadeOn(stores: () => Partial<FacadeOptions>, d: ReturnType<typeof counterDomain>): Promise<Facade> {
    const f = createFacade({ appName: "snapshots", aggregateCache: false, ...stores() }).registerDomain(d.D);
    await f.start();
    return f;
  }

  it("loads from the newest snapshot plus the events after it, and saves one every snapshotEvery versions", async () => {
    const stores = placeOf();
    const d = counterDomain(4);
    const f = await facadeOn(stores, d);
    try {
      // Command 9's load reaches version 8 and saves it in the background, whichever snapshot it started from.
      for (let i = 1; i <= 9; i++) await f.dispatch(d.Add, { counterUuid: "c1", n: i }, { reqCtx: alice });
      // Waited for before command 10: its load would otherwise start from an older one and save at 9 (timing would decide).
      await snapshotAt(f, "c1", 1, 8);
      await f.dispatch(d.Add, { counterUuid: "c1", n: 10 }, { reqCtx: alice });
      // A second facade on the same database (a restart, another instance): nothing cached, the snapshot is there.
      const g = await facadeOn(stores, d);
      try {
        const snap = await g.snapshotStore.latest<{ total: number }>("Count", "Counter", "c1", 1);
        expect(snap).toMatchObject({ version: 8, tenantUuid: "tenant-a", state: { total: 36, seen: [4, 5, 6, 7, 8] } });
        const seen = spied(g.eventRepository);
        expect(await g.loadAggregate(d.Counter, "c1", { tenantUuid: "tenant-a" })).toEqual({
          state: { total: 55, seen: [6, 7, 8, 9, 10] },
          version: 10,
        });
        expect(seen.reads).toEqual([8]);
        // The tenant rule holds on a snapshot too, worded as for an absent aggregate.
        const e = await rejection(g.dispatch(d.Add, { counterUuid: "c1", n: 1 }, { reqCtx: bob }));
        expect([e.code, e.message]).toEqual(["NOT_FOUND", "Count.Counter c1 was not found"]);
      } finally {
        await g.stop();
      }
    } finally {
      await f.stop();
    }
  });

  it("ignores a snapshot of another snapshotVersion, and a damaged one costs a full fold, not an outcome", async () => {
    const stores = placeOf();
    const v1 = counterDomain(2, 1);
    const f = await facadeOn(stores, v1);
    for (let i = 1; i <= 5; i++) await f.dispatch(v1.Add, { counterUuid: "c2", n: i }, { reqCtx: alice });
    await snapshotAt(f, "c2", 1, 4);

    // A new fold (snapshotVersion 2): the version-1 snapshot must not be read.
    const v2 = counterDomain(2, 2);
    const g = await facadeOn(stores, v2);
    try {
      const seen = spied(g.eventRepository);
      expect((await g.loadAggregate(v2.Counter, "c2")).state.total).toBe(15);
      expect(seen.reads).toEqual([undefined]);
      // A snapshot whose state does not fit the fold any more cannot be detected, but one that is damaged in the store is:
      // it reads as absent, and the load folds every event.
      await g.snapshotStore.clear();
      await g.snapshotStore.save({
        domain: "Count",
        aggregate: "Counter",
        aggregateUuid: "c2",
        version: 9,
        snapshotVersion: 2,
        tenantUuid: "tenant-a",
        state: { total: -1, seen: [] },
      });
      // version 9 is ahead of the stream (5 events): not trusted.
      expect(await g.loadAggregate(v2.Counter, "c2")).toEqual({ state: { total: 15, seen: [1, 2, 3, 4, 5] }, version: 5 });
    } finally {
      await g.stop();
      await f.stop();
    }
  });

  it("a snapshot changed after it was saved (version lowered, state null or altered, tenant changed) or saved without a digest is not folded on: the load is right, a warning is logged, a sound snapshot replaces it", async () => {
    const stores = placeOf();
    const d = counterDomain(3);
    const f = await facadeOn(stores, d);
    const g = await facadeOn(stores, d);
    try {
      const changes: [string, Partial<Omit<SnapshotRecord, "digest">> & { digest?: string | undefined }, string][] = [
        ["version-lowered", { version: 4 }, "does not match its digest"],
        ["state-null", { state: null }, "does not match its digest"],
        ["state-altered", { state: { total: 1000, seen: [60] } }, "does not match its digest"],
        ["tenant-changed", { tenantUuid: "tenant-b" }, "does not match its digest"],
        ["no-digest", { digest: undefined }, "has no digest"],
      ];
      for (const [uuid, change, warning] of changes) {
        for (let i = 1; i <= 6; i++) await f.dispatch(d.Add, { counterUuid: uuid, n: i * 10 }, { reqCtx: alice });
        await f.loadAggregate(d.Counter, uuid);
        await snapshotAt(f, uuid, 1, 6);
        // The row rewritten as a hand edit or a faulty copy would leave it: readable, the digest of what was saved.
        const sound = (await f.snapshotStore.latest("Count", "Counter", uuid, 1))!;
        expect(snapshotDigestMatches(sound), uuid).toBe(true);
        await f.snapshotStore.delete("Count", "Counter", uuid);
        expect(await f.snapshotStore.save({ ...sound, ...change } as SnapshotRecord), uuid).toBe(true);

        const seen = spied(g.eventRepository);
        expect(await g.loadAggregate(d.Counter, uuid, { tenantUuid: "tenant-a" }), uuid).toEqual({
          state: { total: 210, seen: [20, 30, 40, 50, 60] },
          version: 6,
        });
        expect(seen.reads, uuid).toEqual([undefined]); // every event, none twice
        // The warning is written beside the load, not before it returns: wait for it to be there.
        const snapshotWarnings = async () =>
          (await g.logStore.list({ limit: 1000 })).items.filter((e) => e.source === "mneme.snapshots" && e.message.includes(` ${uuid} `));
        await until(async () => (await snapshotWarnings()).length > 0, `the snapshot warning of ${uuid} is logged`);
        const logged = await snapshotWarnings();
        expect(
          logged.map((e) => [e.level, e.message.includes(warning)]),
          uuid,
        ).toEqual([["warn", true]]);
        // The bad snapshot is gone; the fold saved a sound one, which the next load starts from.
        await snapshotAt(g, uuid, 1, 6);
        expect(snapshotDigestMatches((await g.snapshotStore.latest("Count", "Counter", uuid, 1))!), uuid).toBe(true);
        // A command decides on the right state too.
        const again = spied(g.eventRepository);
        await g.dispatch(d.Add, { counterUuid: uuid, n: 1 }, { reqCtx: alice });
        expect((await g.loadAggregate(d.Counter, uuid)).state.total, uuid).toBe(211);
        expect(again.reads, uuid).toEqual([6, 6]);
      }
    } finally {
      await g.stop();
      await f.stop();
    }
  });

  it("keeps no snapshot of a state that is not JSON-safe, says so once in the log, and loads it right", async () => {
    const stores = placeOf();
    const d = counterDomain(undefined);
    const f = await facadeOn(stores, d);
    try {
      for (const n of [1, 2, 1, 3, 1]) await f.dispatch(d.Add, { counterUuid: "c3", n }, { reqCtx: alice });
      for (let i = 0; i < 3; i++)
        expect([...(await f.loadAggregate(d.Tally, "c3")).state]).toEqual([
          [1, 3],
          [2, 1],
          [3, 1],
        ]);
      const tallyWarnings = async () =>
        (await f.logStore.list({ limit: 100 })).items.filter((e) => e.message.includes("no snapshots of Count.Tally"));
      await until(async () => (await tallyWarnings()).length > 0, "the warning about Count.Tally is logged");
      // Later loads add no second warning (each had its chance: three loads above).
      await new Promise((r) => setTimeout(r, 20));
      expect(await f.snapshotStore.latest("Count", "Tally", "c3", 1)).toBeUndefined();
      expect(await tallyWarnings()).toHaveLength(1);
    } finally {
      await f.stop();
    }
  });

  it("gives the same state with snapshots as without, whatever the interval and the appends (property)", async () => {
    let run = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 7 }),
        fc.array(fc.integer({ min: -50, max: 50 }), { minLength: 1, maxLength: 30 }),
        fc.boolean(),
        async (every, ns, wipe) => {
          run++;
          const uuid = `p-${run}`;
          const stores = placeOf();
          const withSnaps = counterDomain(every);
          const f = await facadeOn(stores, withSnaps);
          try {
            for (const [i, n] of ns.entries()) {
              await f.dispatch(withSnaps.Add, { counterUuid: uuid, n }, { reqCtx: alice });
              if (i % 3 === 0) await f.loadAggregate(withSnaps.Counter, uuid);
            }
            if (wipe) await f.snapshotStore.clear();
            const plain = counterDomain(undefined);
            const reference = (await f.eventRepository.loadAggregate(uuid)).reduce(
              (s, e) => plain.Counter.apply(s, e),
              plain.Counter.initialState(),
            );
            expect(await f.loadAggregate(withSnaps.Counter, uuid)).toEqual({ state: reference, version: ns.length });
          } finally {
            await f.stop();
          }
        },
      ),
      { numRuns: 12 },
    );
  });
});
