import { expect } from "vitest";
import type { CacheStore } from "../store/cache-store.js";
import {
  defineContract,
  listAllPages,
  expectClosedBehaviour,
  expectNoSecret,
  expectNs,
  expectRejectsWith,
  settle,
} from "./contract-harness.js";

/**
 * The CacheStore conformance suite: JSON values by key, TTL expiry (an
 * expired entry is never returned), atomic increment, delete, listing in key order, clear, info.
 * The TTL tests wait a few tens of milliseconds; they assert expiry, not speed.
 */
export const describeCacheStoreContract = defineContract<CacheStore>("CacheStore contract", (test) => {
  test("set then get returns the value", async (store) => {
    const values: Record<string, unknown> = {
      object: { a: 1, b: [true, null, "x"], c: { d: "ü 🎉" } },
      string: "text",
      number: 3.5,
      zero: 0,
      bool: false,
      array: [1, [2, [3]]],
      nul: null,
    };
    for (const [k, v] of Object.entries(values)) await store.set(k, v);
    for (const [k, v] of Object.entries(values)) expect(await store.get(k)).toEqual(v);
    expect(await store.get("nul")).toBeNull();
  });

  test("get of an unknown key resolves undefined", async (store) => {
    await store.set("a", 1);
    expect(await store.get("b")).toBeUndefined();
  });

  test("set overwrites a value and its ttl", async (store) => {
    await store.set("k", { v: 1 }, { ttlMs: 30 });
    await store.set("k", { v: 2 });
    await settle(60);
    expect(await store.get("k")).toEqual({ v: 2 });
  });

  test("an entry expires after its ttl; one without ttl stays", async (store) => {
    await store.set("short", "gone soon", { ttlMs: 30 });
    await store.set("forever", "stays");
    await store.set("long", "stays too", { ttlMs: 600_000 });
    await settle(60);
    expect(await store.get("short")).toBeUndefined();
    expect(await store.get("forever")).toBe("stays");
    expect(await store.get("long")).toBe("stays too");
  });

  test("an entry is readable before its ttl ends, with expiresAt in ms", async (store) => {
    const before = Date.now();
    await store.set("k", "v", { ttlMs: 600_000 });
    const after = Date.now();
    expect(await store.get("k")).toBe("v");
    const [entry] = (await store.list()).items;
    expect(entry?.expiresAt).toBeGreaterThanOrEqual(before + 600_000 - 1);
    expect(entry?.expiresAt).toBeLessThanOrEqual(after + 600_000 + 1);
  });

  test("delete removes an entry and reports whether it existed", async (store) => {
    await store.set("a", 1);
    await store.set("b", 2, { ttlMs: 30 });
    expect(await store.delete("a")).toBe(true);
    expect(await store.delete("a")).toBe(false);
    expect(await store.get("a")).toBeUndefined();
    await settle(60);
    expect(await store.delete("b")).toBe(false);
  });

  test("list is in key order with cursors and prefix, and skips expired entries", async (store) => {
    for (let i = 0; i < 12; i++) await store.set(`user:${String((i * 5) % 12).padStart(2, "0")}`, { i });
    await store.set("session:1", "s");
    await store.set("user:expiring", "e", { ttlMs: 30 });
    await settle(60);
    const pages = await listAllPages((o) => store.list(o), 5, "user:");
    expect(pages.map((p) => p.length)).toEqual([5, 5, 2]);
    expect(pages.flat().map((e) => e.key)).toEqual(Array.from({ length: 12 }, (_, i) => `user:${String(i).padStart(2, "0")}`));
    expect((await store.list()).items.map((e) => e.key)).toContain("session:1");
    expect((await store.list()).items.map((e) => e.key)).not.toContain("user:expiring");
    expect(await store.list({ prefix: "nothing:" })).toEqual({ items: [] });
  });

  test("list entries carry key, value, expiresAt and createdAt", async (store) => {
    await store.set("plain", { a: [1] });
    await store.set("timed", "t", { ttlMs: 600_000 });
    const [plain, timed] = (await store.list()).items;
    expect(plain).toMatchObject({ key: "plain", value: { a: [1] } });
    expect(plain?.expiresAt).toBeUndefined();
    expectNs(plain?.createdAt);
    expect(timed).toMatchObject({ key: "timed", value: "t" });
    expect(typeof timed?.expiresAt).toBe("number");
  });

  test("the last page has no nextCursor, also when it is full", async (store) => {
    for (let i = 0; i < 6; i++) await store.set(`k${i}`, i);
    const p1 = await store.list({ limit: 3 });
    expect(p1.nextCursor).toEqual(expect.any(String));
    const p2 = await store.list({ limit: 3, cursor: p1.nextCursor as string });
    expect(p2.items.map((e) => e.value)).toEqual([3, 4, 5]);
    expect(p2.nextCursor).toBeUndefined();
  });

  test("list defaults to 100 items and caps limit at 1000", async (store) => {
    for (let i = 0; i < 1050; i++) await store.set(`key-${String(i).padStart(4, "0")}`, i);
    expect((await store.list()).items).toHaveLength(100);
    const big = await store.list({ limit: 5000 });
    expect(big.items).toHaveLength(1000);
    const rest = await store.list({ limit: 5000, cursor: big.nextCursor as string });
    expect(rest.items.map((e) => e.value)).toEqual(Array.from({ length: 50 }, (_, i) => 1000 + i));
    expect(rest.nextCursor).toBeUndefined();
  }, 60_000);

  test("list rejects a limit below 1 and a malformed cursor with INVALID_REQUEST", async (store) => {
    await store.set("a", 1);
    await expectRejectsWith(() => store.list({ limit: 0 }), "INVALID_REQUEST");
    await expectRejectsWith(() => store.list({ cursor: "not a cursor!" }), "INVALID_REQUEST");
  });

  test("clear removes every entry", async (store) => {
    for (let i = 0; i < 5; i++) await store.set(`k${i}`, i);
    await store.clear();
    expect(await store.get("k0")).toBeUndefined();
    expect(await store.list()).toEqual({ items: [] });
    expect((await store.info()).numItems).toBe(0);
    await store.set("after", 1);
    expect(await store.get("after")).toBe(1);
  });

  test("values are copies: later changes to the given or returned object do not show", async (store) => {
    const value = { list: [1, 2], nested: { x: 1 } };
    await store.set("k", value);
    value.list.push(3);
    value.nested.x = 2;
    const got = await store.get<typeof value>("k");
    expect(got).toEqual({ list: [1, 2], nested: { x: 1 } });
    got?.list.push(4);
    expect(await store.get("k")).toEqual({ list: [1, 2], nested: { x: 1 } });
  });

  test("an invalid key, ttl or value gives INVALID_REQUEST", async (store) => {
    await expectRejectsWith(() => store.set("", 1), "INVALID_REQUEST");
    await expectRejectsWith(() => store.set("k", 1, { ttlMs: 0 }), "INVALID_REQUEST");
    await expectRejectsWith(() => store.set("k", 1, { ttlMs: -5 }), "INVALID_REQUEST");
    await expectRejectsWith(() => store.set("k", undefined), "INVALID_REQUEST");
    await expectRejectsWith(() => store.set("k", 10n), "INVALID_REQUEST");
    expect(await store.get("k")).toBeUndefined();
  });

  test("increment starts an absent entry from 0 and adds to a live integer, keeping its expiry", async (store) => {
    expect(await store.increment("n", 1)).toBe(1);
    expect(await store.increment("n", 5)).toBe(6);
    expect(await store.increment("n", -10)).toBe(-4);
    expect(await store.get("n")).toBe(-4);
    await store.set("set", 40);
    expect(await store.increment("set", 2)).toBe(42);
    await store.increment("timed", 1, { ttlMs: 600_000 });
    const before = (await store.list({ prefix: "timed" })).items[0]?.expiresAt;
    expect(await store.increment("timed", 1, { ttlMs: 5 })).toBe(2);
    expect((await store.list({ prefix: "timed" })).items[0]?.expiresAt).toBe(before);
    expect((await store.list({ prefix: "n" })).items[0]?.expiresAt).toBeUndefined();
  });

  test("increment of an expired entry starts again from 0 with the new ttl", async (store) => {
    await store.increment("k", 7, { ttlMs: 30 });
    await store.set("was-text", "text", { ttlMs: 30 });
    await settle(60);
    expect(await store.get("k")).toBeUndefined();
    expect(await store.increment("k", 2, { ttlMs: 600_000 })).toBe(2);
    expect((await store.list({ prefix: "k" })).items[0]?.expiresAt).toBeGreaterThan(Date.now() + 500_000);
    expect(await store.increment("was-text", 3)).toBe(3);
  });

  test("concurrent increments sum exactly", async (store) => {
    const results = await Promise.all(Array.from({ length: 50 }, () => store.increment("counter", 1, { ttlMs: 600_000 })));
    expect([...results].sort((a, b) => a - b)).toEqual(Array.from({ length: 50 }, (_, i) => i + 1));
    expect(await store.get("counter")).toBe(50);
  });

  test("increment refuses a live value that is not an integer, and a step that is not a safe integer, with INVALID_REQUEST", async (store) => {
    const values: unknown[] = ["3", 1.5, { n: 1 }, [1], true, null];
    for (const [i, v] of values.entries()) {
      await store.set(`v${i}`, v);
      await expectRejectsWith(() => store.increment(`v${i}`, 1), "INVALID_REQUEST");
      expect(await store.get(`v${i}`)).toEqual(v);
    }
    for (const by of [1.5, Number.NaN, Number.MAX_SAFE_INTEGER + 1, "1" as unknown as number]) {
      await expectRejectsWith(() => store.increment("fresh", by), "INVALID_REQUEST");
    }
    await expectRejectsWith(() => store.increment("", 1), "INVALID_REQUEST");
    await expectRejectsWith(() => store.increment("fresh", 1, { ttlMs: 0 }), "INVALID_REQUEST");
    expect(await store.get("fresh")).toBeUndefined();
  });

  test("info counts live entries", async (store) => {
    const empty = await store.info();
    expect(empty).toMatchObject({ numItems: 0, lastItemCreatedAt: 0 });
    expect(empty.storeType.length).toBeGreaterThan(0);
    expectNoSecret(empty.connectionInfo);
    await store.set("a", 1);
    await store.set("b", 2);
    await store.set("c", 3, { ttlMs: 30 });
    await settle(60);
    const info = await store.info();
    expect(info.numItems).toBe(2);
    expectNs(info.lastItemCreatedAt);
  });

  test("close is idempotent and later calls reject with STORE_CLOSED", async (store) => {
    await store.set("a", 1);
    await expectClosedBehaviour(store, () => store.set("b", 2));
    await expectRejectsWith(() => store.get("a"), "STORE_CLOSED");
  });
});
