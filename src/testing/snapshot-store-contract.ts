import { expect } from "vitest";
import type { NewSnapshotRecord, SnapshotRecord, SnapshotStore } from "../store/snapshot-store.js";
import { snapshotDigest, snapshotDigestMatches } from "../store/snapshot-store.js";
import { defineContract, expectClosedBehaviour, expectNoSecret, expectNs, expectRejectsWith } from "./contract-harness.js";

/** A snapshot of Todo.Todo `uuid` at `version` (snapshotVersion 1 unless given), its state naming the version. */
function snap(uuid: string, version: number, more: Partial<NewSnapshotRecord> = {}): NewSnapshotRecord {
  return { domain: "Todo", aggregate: "Todo", aggregateUuid: uuid, version, snapshotVersion: 1, state: { at: version }, ...more };
}

/** The snapshot of Todo.Todo `uuid` (snapshotVersion 1 unless given). */
function latest(store: SnapshotStore, uuid: string, snapshotVersion = 1): Promise<SnapshotRecord | undefined> {
  return store.latest("Todo", "Todo", uuid, snapshotVersion);
}

/** The integers 1..n in an order that is not sorted (a fixed shuffle: the test reads the same every run). */
function shuffled(n: number, seed: number): number[] {
  const out = Array.from({ length: n }, (_, i) => i + 1);
  let s = seed;
  for (let i = n - 1; i > 0; i--) {
    s = (s * 1103515245 + 12345) % 2147483648;
    const j = s % (i + 1);
    [out[i], out[j]] = [out[j] as number, out[i] as number];
  }
  return out;
}

/**
 * The SnapshotStore conformance suite: save and latest, the highest version
 * wins (also between concurrent saves), snapshotVersions kept apart, the three
 * deletes, the JSON-safe state rule and input checks with nothing written,
 * copies in and out, info, and STORE_CLOSED after close. A damaged stored row
 * cannot be made through the interface: test that with your backend's own
 * access to its storage (mneme's backends do, in their integration tests).
 */
export const describeSnapshotStoreContract = defineContract<SnapshotStore>("SnapshotStore contract", (test) => {
  test("save then latest returns the snapshot; tenantUuid defaults to '' and createdAt to now (ns)", async (store) => {
    expect(await store.save(snap("a", 3, { state: { title: "x", tags: ["a", "b"], done: false, n: 1.5 } }))).toBe(true);
    const got = await latest(store, "a");
    expect(got).toEqual({
      tenantUuid: "",
      domain: "Todo",
      aggregate: "Todo",
      aggregateUuid: "a",
      version: 3,
      snapshotVersion: 1,
      state: { title: "x", tags: ["a", "b"], done: false, n: 1.5 },
      createdAt: expect.any(Number) as number,
    });
    expectNs(got?.createdAt);
    await store.save(snap("b", 1, { tenantUuid: "t1", createdAt: 1_700_000_000_000_000_000 }));
    expect(await latest(store, "b")).toMatchObject({ tenantUuid: "t1", createdAt: 1_700_000_000_000_000_000 });
  });

  test("latest of an unknown aggregate, type, domain or snapshotVersion resolves undefined", async (store) => {
    await store.save(snap("a", 2));
    expect(await latest(store, "b")).toBeUndefined();
    expect(await store.latest("Todo", "Other", "a", 1)).toBeUndefined();
    expect(await store.latest("Other", "Todo", "a", 1)).toBeUndefined();
    expect(await latest(store, "a", 2)).toBeUndefined();
    expect((await latest(store, "a"))?.version).toBe(2);
  });

  test("states of every JSON-safe shape read back unchanged (-0 as 0)", async (store) => {
    const states: unknown[] = [
      null,
      true,
      0,
      -0,
      -12.25,
      Number.MAX_SAFE_INTEGER,
      1e300,
      "",
      "ü 🎉 \u2028 \\ \" '",
      [],
      {},
      [1, [2, [3, { four: null }]]],
      { "": 1, "a/b": { "~c": [true, false] }, nested: { deeper: { deepest: "x".repeat(10_000) } } },
    ];
    for (const [i, state] of states.entries()) await store.save(snap(`s${i}`, 1, { state }));
    for (const [i, state] of states.entries()) {
      const got = (await latest(store, `s${i}`))?.state;
      // -0 reads back as 0: JSON has no negative zero.
      expect(got).toEqual(Object.is(state, -0) ? 0 : state);
      if (Object.is(state, -0)) expect(Object.is(got, 0)).toBe(true);
    }
  });

  test("the digest is kept as saved and given back (it matches the state read back, whatever order the keys come in); absent when saved without; replaced with the snapshot; a malformed one is INVALID_REQUEST and nothing is written", async (store) => {
    const parts = { tenantUuid: "t", domain: "Todo", aggregate: "Todo", aggregateUuid: "d", version: 2, snapshotVersion: 1 };
    const state = { z: 1, a: { y: [3, { q: null, b: "x" }], b: true }, m: "ü" };
    const digest = snapshotDigest({ ...parts, state });
    expect(digest).toMatch(/^[0-9a-f]{64}$/);
    expect(await store.save({ ...parts, state, digest })).toBe(true);
    const got = await latest(store, "d");
    expect(got?.digest).toBe(digest);
    expect(snapshotDigestMatches(got!)).toBe(true);
    // Any part changed no longer matches.
    expect(snapshotDigestMatches({ ...got!, version: 1 })).toBe(false);
    expect(snapshotDigestMatches({ ...got!, tenantUuid: "other" })).toBe(false);
    expect(snapshotDigestMatches({ ...got!, state: { ...state, z: 2 } })).toBe(false);
    expect(snapshotDigestMatches({ ...got!, state: null })).toBe(false);

    await store.save(snap("e", 1));
    const without = await latest(store, "e");
    expect(without).toBeDefined();
    expect("digest" in without!).toBe(false);
    expect(snapshotDigestMatches(without!)).toBe(false);
    // A higher version replaces the digest with the rest (here: none).
    expect(await store.save({ ...parts, version: 3, state })).toBe(true);
    expect("digest" in (await latest(store, "d"))!).toBe(false);

    for (const bad of ["", "abc", digest.toUpperCase(), `${digest}0`, 42]) {
      await expectRejectsWith(() => store.save({ ...snap("f", 1), digest: bad } as NewSnapshotRecord), "INVALID_REQUEST");
    }
    expect(await latest(store, "f")).toBeUndefined();
  });

  test("a higher version replaces the snapshot; an equal or lower one is dropped and save resolves false", async (store) => {
    expect(await store.save(snap("a", 5, { tenantUuid: "t", state: { v: "five" } }))).toBe(true);
    expect(await store.save(snap("a", 3, { state: { v: "three" } }))).toBe(false);
    expect(await store.save(snap("a", 5, { state: { v: "five again" } }))).toBe(false);
    expect(await latest(store, "a")).toMatchObject({ version: 5, state: { v: "five" }, tenantUuid: "t" });
    expect(await store.save(snap("a", 9, { tenantUuid: "t", state: { v: "nine" }, createdAt: 2e18 }))).toBe(true);
    expect(await latest(store, "a")).toMatchObject({ version: 9, state: { v: "nine" }, createdAt: 2e18 });
    expect((await store.info()).numItems).toBe(1);
  });

  test("concurrent saves of different versions: the highest version wins, whatever the order", async (store) => {
    for (let round = 0; round < 5; round++) {
      const uuid = `agg${round}`;
      const order = shuffled(25, round + 1);
      const results = await Promise.all(order.map((v) => store.save(snap(uuid, v, { state: { at: v, round } }))));
      expect(await latest(store, uuid)).toMatchObject({ version: 25, state: { at: 25, round } });
      // The save of version 25 always stores; no save stores after it.
      expect(results[order.indexOf(25)]).toBe(true);
    }
    expect((await store.info()).numItems).toBe(5);
  });

  test("concurrent saves of one version and a higher one from many callers leave the higher one", async (store) => {
    const saves: Promise<boolean>[] = [];
    for (let i = 0; i < 30; i++) saves.push(store.save(snap("a", i % 2 === 0 ? 11 : 10, { state: { i } })));
    await Promise.all(saves);
    const got = await latest(store, "a");
    expect(got?.version).toBe(11);
    expect((got?.state as { i: number }).i % 2).toBe(0);
  });

  test("snapshotVersions are kept apart: each has its own newest snapshot, and latest reads only its own", async (store) => {
    await store.save(snap("a", 10, { snapshotVersion: 1, state: { shape: 1 } }));
    expect(await store.save(snap("a", 4, { snapshotVersion: 2, state: { shape: 2 } }))).toBe(true);
    expect(await latest(store, "a", 1)).toMatchObject({ version: 10, snapshotVersion: 1, state: { shape: 1 } });
    expect(await latest(store, "a", 2)).toMatchObject({ version: 4, snapshotVersion: 2, state: { shape: 2 } });
    expect(await latest(store, "a", 3)).toBeUndefined();
    expect(await store.save(snap("a", 3, { snapshotVersion: 2 }))).toBe(false);
    expect(await store.save(snap("a", 12, { snapshotVersion: 2, state: { shape: 2.1 } }))).toBe(true);
    expect(await latest(store, "a", 1)).toMatchObject({ version: 10, state: { shape: 1 } });
    expect(await latest(store, "a", 2)).toMatchObject({ version: 12, state: { shape: 2.1 } });
  });

  test("delete removes one aggregate's snapshots of every snapshotVersion and nothing else", async (store) => {
    await store.save(snap("a", 2, { snapshotVersion: 1 }));
    await store.save(snap("a", 2, { snapshotVersion: 2 }));
    await store.save(snap("b", 2));
    await store.save({ ...snap("a", 2), aggregate: "Other" });
    expect(await store.delete("Todo", "Todo", "a")).toBe(2);
    expect(await store.delete("Todo", "Todo", "a")).toBe(0);
    expect(await latest(store, "a", 1)).toBeUndefined();
    expect(await latest(store, "a", 2)).toBeUndefined();
    expect((await latest(store, "b"))?.version).toBe(2);
    expect((await store.latest("Todo", "Other", "a", 1))?.version).toBe(2);
    // Deleting is always safe: a later save of any version is kept.
    expect(await store.save(snap("a", 1))).toBe(true);
    expect((await latest(store, "a"))?.version).toBe(1);
  });

  test("deleteAggregateType removes one type's snapshots, or all but one snapshotVersion's", async (store) => {
    for (const uuid of ["a", "b", "c"]) {
      await store.save(snap(uuid, 3, { snapshotVersion: 1 }));
      await store.save(snap(uuid, 3, { snapshotVersion: 2 }));
    }
    await store.save({ ...snap("a", 3), aggregate: "List" });
    await store.save({ ...snap("a", 3), domain: "Shop" });
    expect(await store.deleteAggregateType("Todo", "Todo", { exceptSnapshotVersion: 2 })).toBe(3);
    for (const uuid of ["a", "b", "c"]) {
      expect(await latest(store, uuid, 1)).toBeUndefined();
      expect((await latest(store, uuid, 2))?.version).toBe(3);
    }
    expect(await store.deleteAggregateType("Todo", "Todo")).toBe(3);
    expect(await latest(store, "a", 2)).toBeUndefined();
    expect(await store.deleteAggregateType("Todo", "Todo")).toBe(0);
    expect((await store.latest("Todo", "List", "a", 1))?.version).toBe(3);
    expect((await store.latest("Shop", "Todo", "a", 1))?.version).toBe(3);
    expect((await store.info()).numItems).toBe(2);
  });

  test("clear removes every snapshot and resolves how many", async (store) => {
    await store.save(snap("a", 1));
    await store.save(snap("b", 7));
    await store.save({ ...snap("c", 1), domain: "Shop" });
    expect(await store.clear()).toBe(3);
    expect(await store.clear()).toBe(0);
    expect(await latest(store, "b")).toBeUndefined();
    expect(await store.info()).toMatchObject({ numItems: 0, lastItemCreatedAt: 0 });
    expect(await store.save(snap("b", 2))).toBe(true);
  });

  test("a state that is not JSON-safe gives INVALID_REQUEST with a pointer, and nothing is written", async (store) => {
    const cyclic: Record<string, unknown> = { a: 1 };
    cyclic.self = cyclic;
    class Money {
      amount = 1;
    }
    const bad: [unknown, string][] = [
      [undefined, ""],
      [{ total: Number.NaN }, "/total"],
      [{ items: [{ n: 1 }, { n: Infinity }] }, "/items/1/n"],
      [{ when: new Date(0) }, "/when"],
      [{ big: 1n }, "/big"],
      [{ price: new Money() }, "/price"],
      [{ gone: undefined }, "/gone"],
      [{ s: "a\u0000b" }, "/s"],
      [{ s: "\uD800" }, "/s"],
      [cyclic, "/self"],
      [[1, , 3], "/1"],
    ];
    for (const [state, pointer] of bad) {
      const e = await expectRejectsWith(() => store.save(snap("a", 1, { state })), "INVALID_REQUEST");
      expect((e as { details?: { pointer: string }[] }).details?.[0]?.pointer, `state ${String(pointer)}`).toBe(pointer);
    }
    expect(await latest(store, "a")).toBeUndefined();
    await store.save(snap("a", 1));
    await expectRejectsWith(() => store.save(snap("a", 2, { state: { bad: Number.NaN } })), "INVALID_REQUEST");
    expect(await latest(store, "a")).toMatchObject({ version: 1, state: { at: 1 } });
    expect((await store.info()).numItems).toBe(1);
  });

  test("a bad name, version, snapshotVersion, tenantUuid or createdAt gives INVALID_REQUEST, and nothing is written", async (store) => {
    const bad: Partial<Record<keyof NewSnapshotRecord, unknown>>[] = [
      { domain: "" },
      { aggregate: "" },
      { aggregateUuid: "" },
      { aggregateUuid: 7 },
      { aggregateUuid: "a\u0000" },
      { version: 0 },
      { version: -1 },
      { version: 1.5 },
      { version: "2" },
      { version: 2 ** 53 },
      { snapshotVersion: 0 },
      { snapshotVersion: 2.5 },
      { snapshotVersion: undefined },
      { tenantUuid: 5 },
      { createdAt: -1 },
      { createdAt: 1.5 },
      { createdAt: Number.NaN },
    ];
    for (const b of bad) {
      await expectRejectsWith(() => store.save({ ...snap("a", 1), ...b } as NewSnapshotRecord), "INVALID_REQUEST");
    }
    await expectRejectsWith(() => store.save(null as unknown as NewSnapshotRecord), "INVALID_REQUEST");
    const { state: _, ...withoutState } = snap("a", 1);
    await expectRejectsWith(() => store.save(withoutState as NewSnapshotRecord), "INVALID_REQUEST");
    expect(await store.info()).toMatchObject({ numItems: 0 });
    await expectRejectsWith(() => store.latest("", "Todo", "a", 1), "INVALID_REQUEST");
    await expectRejectsWith(() => store.latest("Todo", "Todo", "a", 0), "INVALID_REQUEST");
    await expectRejectsWith(() => store.latest("Todo", "Todo", "", 1), "INVALID_REQUEST");
    await expectRejectsWith(() => store.delete("Todo", "", "a"), "INVALID_REQUEST");
    await expectRejectsWith(() => store.deleteAggregateType("Todo", "Todo", { exceptSnapshotVersion: 0 }), "INVALID_REQUEST");
  });

  test("the largest safe version round-trips exactly", async (store) => {
    await store.save(snap("a", Number.MAX_SAFE_INTEGER, { snapshotVersion: Number.MAX_SAFE_INTEGER }));
    const got = await latest(store, "a", Number.MAX_SAFE_INTEGER);
    expect(got?.version).toBe(Number.MAX_SAFE_INTEGER);
    expect(got?.snapshotVersion).toBe(Number.MAX_SAFE_INTEGER);
  });

  test("stored snapshots cannot be changed through given or returned objects, nor while a save runs", async (store) => {
    const state = { items: [1, 2], meta: { title: "t" } };
    await store.save(snap("a", 1, { state }));
    state.items.push(3);
    state.meta.title = "changed";
    const got = await latest(store, "a");
    try {
      (got?.state as { items: number[] }).items.push(4);
      (got as { version: number }).version = 99;
    } catch {
      // frozen results are fine
    }
    expect(await latest(store, "a")).toMatchObject({ version: 1, state: { items: [1, 2], meta: { title: "t" } } });
    // The state is read before save returns: a change made while the save runs is not stored.
    const next = { items: [5] };
    const saving = store.save(snap("a", 2, { state: next }));
    next.items.push(6);
    await saving;
    expect(await latest(store, "a")).toMatchObject({ version: 2, state: { items: [5] } });
  });

  test("info reports numItems and the newest createdAt", async (store) => {
    const empty = await store.info();
    expect(empty).toMatchObject({ numItems: 0, lastItemCreatedAt: 0 });
    expect(empty.storeType.length).toBeGreaterThan(0);
    expectNoSecret(empty.connectionInfo);
    await store.save(snap("a", 1, { createdAt: 1_800_000_000_000_000_000 }));
    await store.save(snap("b", 1, { createdAt: 1_700_000_000_000_000_000 }));
    await store.save(snap("a", 1, { snapshotVersion: 2, createdAt: 1_750_000_000_000_000_000 }));
    expect(await store.info()).toMatchObject({ numItems: 3, lastItemCreatedAt: 1_800_000_000_000_000_000 });
  });

  test("close is idempotent and later calls reject with STORE_CLOSED", async (store) => {
    await store.save(snap("a", 1));
    await expectClosedBehaviour(store, () => store.save(snap("a", 2)));
    await expectRejectsWith(() => latest(store, "a"), "STORE_CLOSED");
    await expectRejectsWith(() => store.delete("Todo", "Todo", "a"), "STORE_CLOSED");
    await expectRejectsWith(() => store.deleteAggregateType("Todo", "Todo"), "STORE_CLOSED");
    await expectRejectsWith(() => store.clear(), "STORE_CLOSED");
    await expectRejectsWith(() => store.info(), "STORE_CLOSED");
  });
});
