import { expect } from "vitest";
import type { LogEntry, LogLevel, LogStore, NewLogEntry } from "../store/log-store.js";
import { defineContract, expectClosedBehaviour, expectNoSecret, expectNs, expectRejectsWith } from "./contract-harness.js";

type ListOpts = NonNullable<Parameters<LogStore["list"]>[0]>;

/** Follows nextCursor to the end; every page but the last must be full. */
async function listAll(store: LogStore, limit: number, filter: Omit<ListOpts, "cursor" | "limit"> = {}): Promise<LogEntry[][]> {
  const pages: LogEntry[][] = [];
  let cursor: string | undefined;
  for (let guard = 0; guard < 10_000; guard++) {
    const page = await store.list({ ...filter, limit, ...(cursor === undefined ? {} : { cursor }) });
    pages.push(page.items);
    if (page.nextCursor === undefined) return pages;
    expect(page.items).toHaveLength(limit);
    cursor = page.nextCursor;
  }
  return expect.fail("paging did not end");
}

function expectIncreasing(xs: readonly number[]): void {
  for (let i = 1; i < xs.length; i++) {
    if (!((xs[i] as number) > (xs[i - 1] as number))) expect.fail(`ids not increasing at ${i}: ${xs[i - 1]} then ${xs[i]}`);
  }
}

/**
 * The LogStore conformance suite: append assigns increasing ids and createdAt;
 * listing in id order with cursors and exact filters (level, source,
 * tenantUuid); delete; info.
 */
export const describeLogStoreContract = defineContract<LogStore>("LogStore contract", (test) => {
  test("append assigns increasing ids and createdAt", async (store) => {
    const entries: LogEntry[] = [];
    for (let i = 0; i < 10; i++) entries.push(await store.append({ level: "info", message: `m${i}` }));
    for (const e of entries) {
      expect(Number.isInteger(e.id)).toBe(true);
      expect(e.id).toBeGreaterThan(0);
      expectNs(e.createdAt);
    }
    expectIncreasing(entries.map((e) => e.id));
    for (let i = 1; i < entries.length; i++) expect(entries[i]?.createdAt).toBeGreaterThanOrEqual(entries[i - 1]?.createdAt as number);
  });

  test("entries keep every field", async (store) => {
    const full: NewLogEntry = {
      level: "warn",
      message: "disk almost full — ü 🎉",
      source: "runtime.metrics",
      tenantUuid: "0190a1b2-0000-7000-8000-000000000001",
      data: { pct: 97.5, mounts: ["/", "/var"], nested: { ok: false, none: null } },
    };
    const e = await store.append(full);
    expect(e).toEqual({ ...full, id: e.id, createdAt: e.createdAt });
    const minimal = await store.append({ level: "debug", message: "" });
    expect(minimal.source).toBeUndefined();
    expect(minimal.tenantUuid).toBeUndefined();
    expect(minimal.data).toBeUndefined();
    const { items } = await store.list();
    expect(items).toEqual([e, minimal]);
    expect(items[1]?.source).toBeUndefined();
    expect(items[1]?.data).toBeUndefined();
  });

  test("list is in id order and pages with cursors", async (store) => {
    const entries: LogEntry[] = [];
    for (let i = 0; i < 23; i++) entries.push(await store.append({ level: "info", message: `m${i}` }));
    const pages = await listAll(store, 5);
    expect(pages.map((p) => p.length)).toEqual([5, 5, 5, 5, 3]);
    expect(pages.flat()).toEqual(entries);
  });

  test("the last page has no nextCursor, also when it is full", async (store) => {
    for (let i = 0; i < 6; i++) await store.append({ level: "info", message: `m${i}` });
    const p1 = await store.list({ limit: 3 });
    expect(p1.nextCursor).toEqual(expect.any(String));
    const p2 = await store.list({ limit: 3, cursor: p1.nextCursor as string });
    expect(p2.items.map((e) => e.message)).toEqual(["m3", "m4", "m5"]);
    expect(p2.nextCursor).toBeUndefined();
    // Entries appended after the last page show up from its cursor on: ids only grow.
    const p2Cursor = (await store.list({ limit: 2, cursor: p1.nextCursor as string })).nextCursor as string;
    await store.append({ level: "info", message: "late" });
    expect((await store.list({ cursor: p2Cursor })).items.map((e) => e.message)).toEqual(["m5", "late"]);
  });

  test("an empty store lists no items and no cursor", async (store) => {
    expect(await store.list()).toEqual({ items: [] });
  });

  test("list filters by exact level, source and tenantUuid, also across pages", async (store) => {
    const levels: LogLevel[] = ["debug", "info", "warn", "error"];
    const entries: LogEntry[] = [];
    for (let i = 0; i < 24; i++) {
      const e: NewLogEntry = { level: levels[i % 4] as LogLevel, message: `m${i}`, source: i % 3 === 0 ? "http" : "core" };
      if (i % 2 === 0) e.tenantUuid = "tenant-a";
      entries.push(await store.append(e));
    }
    expect((await listAll(store, 2, { level: "warn" })).flat()).toEqual(entries.filter((e) => e.level === "warn"));
    expect((await listAll(store, 2, { level: "error" })).flat()).toHaveLength(6);
    expect((await listAll(store, 2, { source: "http" })).flat()).toEqual(entries.filter((e) => e.source === "http"));
    expect((await listAll(store, 2, { tenantUuid: "tenant-a" })).flat()).toEqual(entries.filter((e) => e.tenantUuid === "tenant-a"));
    const combined = (await listAll(store, 2, { level: "debug", source: "http", tenantUuid: "tenant-a" })).flat();
    expect(combined).toEqual(entries.filter((e) => e.level === "debug" && e.source === "http" && e.tenantUuid === "tenant-a"));
    expect(combined.length).toBeGreaterThan(0);
    expect(await store.list({ source: "nowhere" })).toEqual({ items: [] });
  });

  test("list defaults to 100 items and caps limit at 1000", async (store) => {
    for (let i = 0; i < 1050; i++) await store.append({ level: "debug", message: `m${i}` });
    expect((await store.list()).items).toHaveLength(100);
    const big = await store.list({ limit: 5000 });
    expect(big.items).toHaveLength(1000);
    const rest = await store.list({ limit: 5000, cursor: big.nextCursor as string });
    expect(rest.items.map((e) => e.message)).toEqual(Array.from({ length: 50 }, (_, i) => `m${1000 + i}`));
    expect(rest.nextCursor).toBeUndefined();
  }, 60_000);

  test("list rejects a limit below 1 and a malformed cursor with INVALID_REQUEST", async (store) => {
    await store.append({ level: "info", message: "x" });
    await expectRejectsWith(() => store.list({ limit: 0 }), "INVALID_REQUEST");
    await expectRejectsWith(() => store.list({ limit: 2.5 }), "INVALID_REQUEST");
    await expectRejectsWith(() => store.list({ cursor: "not a cursor!" }), "INVALID_REQUEST");
  });

  test("an invalid entry gives INVALID_REQUEST", async (store) => {
    await expectRejectsWith(() => store.append({ level: "fatal" as LogLevel, message: "x" }), "INVALID_REQUEST");
    await expectRejectsWith(() => store.append({ level: "info", message: 42 as unknown as string }), "INVALID_REQUEST");
    expect((await store.info()).numItems).toBe(0);
  });

  test("delete removes an entry and reports whether it existed", async (store) => {
    const a = await store.append({ level: "info", message: "a" });
    const b = await store.append({ level: "info", message: "b" });
    expect(await store.delete(a.id)).toBe(true);
    expect(await store.delete(a.id)).toBe(false);
    expect(await store.delete(b.id + 1000)).toBe(false);
    expect((await store.list()).items).toEqual([b]);
    expect((await store.info()).numItems).toBe(1);
  });

  test("ids are not reused after a delete", async (store) => {
    await store.append({ level: "info", message: "a" });
    const b = await store.append({ level: "info", message: "b" });
    await store.delete(b.id);
    const c = await store.append({ level: "info", message: "c" });
    expect(c.id).toBeGreaterThan(b.id);
  });

  test("concurrent appends get unique ids", async (store) => {
    const entries = await Promise.all(Array.from({ length: 50 }, (_, i) => store.append({ level: "info", message: `m${i}` })));
    expect(new Set(entries.map((e) => e.id)).size).toBe(50);
    const listed = (await listAll(store, 1000)).flat();
    expect(listed).toHaveLength(50);
    expectIncreasing(listed.map((e) => e.id));
  });

  test("stored entries cannot be changed through given or returned objects", async (store) => {
    const data = { list: [1, 2] };
    const e = await store.append({ level: "info", message: "m", data });
    data.list.push(3);
    try {
      (e.data as { list: number[] }).list.push(4);
      e.message = "changed";
    } catch {
      // frozen results are fine
    }
    const [stored] = (await store.list()).items;
    expect(stored?.data).toEqual({ list: [1, 2] });
    expect(stored?.message).toBe("m");
  });

  test("info reports numItems and lastItemCreatedAt", async (store) => {
    const empty = await store.info();
    expect(empty).toMatchObject({ numItems: 0, lastItemCreatedAt: 0 });
    expect(empty.storeType.length).toBeGreaterThan(0);
    expectNoSecret(empty.connectionInfo);
    await store.append({ level: "info", message: "a" });
    const b = await store.append({ level: "info", message: "b" });
    expect(await store.info()).toMatchObject({ numItems: 2, lastItemCreatedAt: b.createdAt });
  });

  test("close is idempotent and later calls reject with STORE_CLOSED", async (store) => {
    await store.append({ level: "info", message: "a" });
    await expectClosedBehaviour(store, () => store.append({ level: "info", message: "b" }));
    await expectRejectsWith(() => store.list(), "STORE_CLOSED");
  });
});
