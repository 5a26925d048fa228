import { expect } from "vitest";
import type { DataStore } from "../store/data-store.js";
import {
  defineContract,
  listAllPages,
  expectClosedBehaviour,
  expectNoSecret,
  expectNs,
  expectRejectsWith,
  settle,
} from "./contract-harness.js";

const decoder = new TextDecoder();

function bytesOf(data: Uint8Array | undefined): number[] {
  if (!(data instanceof Uint8Array)) return expect.fail("data is not a Uint8Array");
  return Array.from(data);
}

function codeUnitOrder(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/**
 * The DataStore conformance suite: blobs by key (string or bytes), content
 * types, createdAt/updatedAt on overwrite, listing in key order with prefix
 * and cursors, key validation, info.
 */
export const describeDataStoreContract = defineContract<DataStore>("DataStore contract", (test) => {
  test("a string is stored as UTF-8 with a text content type", async (store) => {
    const text = "héllo — 日本 🎉";
    const info = await store.put("greeting.txt", text);
    const bytes = new TextEncoder().encode(text);
    expect(info).toMatchObject({ key: "greeting.txt", size: bytes.byteLength, contentType: "text/plain; charset=utf-8" });
    const got = await store.get("greeting.txt");
    expect(got).toMatchObject({ key: "greeting.txt", size: bytes.byteLength, contentType: "text/plain; charset=utf-8" });
    expect(bytesOf(got?.data)).toEqual(Array.from(bytes));
    expect(decoder.decode(got?.data)).toBe(text);
  });

  test("bytes are stored exactly with a binary content type", async (store) => {
    const all = new Uint8Array(256).map((_, i) => i);
    const info = await store.put("bin/all-bytes", all);
    expect(info).toMatchObject({ key: "bin/all-bytes", size: 256, contentType: "application/octet-stream" });
    const got = await store.get("bin/all-bytes");
    expect(bytesOf(got?.data)).toEqual(Array.from(all));
    expect(got?.size).toBe(256);
  });

  test("empty data is stored", async (store) => {
    await store.put("empty", new Uint8Array(0));
    await store.put("empty-text", "");
    expect(bytesOf((await store.get("empty"))?.data)).toEqual([]);
    expect((await store.get("empty-text"))?.size).toBe(0);
  });

  test("a given contentType is kept", async (store) => {
    await store.put("img.png", new Uint8Array([137, 80, 78, 71]), { contentType: "image/png" });
    await store.put("doc.json", '{"a":1}', { contentType: "application/json" });
    expect((await store.get("img.png"))?.contentType).toBe("image/png");
    expect((await store.get("doc.json"))?.contentType).toBe("application/json");
    expect((await store.list()).items.map((i) => i.contentType)).toEqual(["application/json", "image/png"]);
  });

  test("put returns the entry's info with createdAt = updatedAt", async (store) => {
    const info = await store.put("a", "abc");
    expectNs(info.createdAt);
    expect(info.updatedAt).toBe(info.createdAt);
    expect(info).toEqual({
      key: "a",
      size: 3,
      contentType: "text/plain; charset=utf-8",
      createdAt: info.createdAt,
      updatedAt: info.updatedAt,
    });
    const got = await store.get("a");
    expect(got).toMatchObject(info);
  });

  test("overwriting keeps createdAt and changes updatedAt, data, size and contentType", async (store) => {
    const first = await store.put("k", "first version");
    await settle(2);
    const second = await store.put("k", new Uint8Array([1, 2, 3]), { contentType: "application/x-test" });
    expect(second.createdAt).toBe(first.createdAt);
    expect(second.updatedAt).toBeGreaterThan(first.updatedAt);
    expect(second).toMatchObject({ key: "k", size: 3, contentType: "application/x-test" });
    const got = await store.get("k");
    expect(got).toMatchObject({ createdAt: first.createdAt, updatedAt: second.updatedAt, size: 3, contentType: "application/x-test" });
    expect(bytesOf(got?.data)).toEqual([1, 2, 3]);
    expect((await store.info()).numItems).toBe(1);
  });

  test("get of an unknown key resolves undefined", async (store) => {
    await store.put("known", "x");
    expect(await store.get("unknown")).toBeUndefined();
    expect(await store.get("know")).toBeUndefined();
  });

  test("delete removes an entry and reports whether it existed", async (store) => {
    await store.put("a", "1");
    await store.put("b", "2");
    expect(await store.delete("a")).toBe(true);
    expect(await store.delete("a")).toBe(false);
    expect(await store.delete("never")).toBe(false);
    expect(await store.get("a")).toBeUndefined();
    expect((await store.list()).items.map((i) => i.key)).toEqual(["b"]);
    // A deleted key can be used again, as a new entry.
    const again = await store.put("a", "3");
    expect(again.updatedAt).toBe(again.createdAt);
  });

  test("keys are case-sensitive and may contain slashes and dots", async (store) => {
    const keys = ["a", "A", "a/b", "a/b/c", "a.b", ".hidden", "dir/", "/leading", "sp ace", "ü/ñ.txt", "%2F"];
    for (const k of keys) await store.put(k, `value of ${k}`);
    for (const k of keys) expect(decoder.decode((await store.get(k))?.data)).toBe(`value of ${k}`);
    expect((await store.list()).items.map((i) => i.key)).toEqual([...keys].sort(codeUnitOrder));
    expect(await store.delete("a")).toBe(true);
    expect(decoder.decode((await store.get("a/b"))?.data)).toBe("value of a/b");
    expect(decoder.decode((await store.get("A"))?.data)).toBe("value of A");
  });

  test("a key of 1024 characters is valid", async (store) => {
    const long = "k".repeat(1000) + "/".repeat(4) + "z".repeat(20);
    expect(long).toHaveLength(1024);
    await store.put(long, "long");
    expect(decoder.decode((await store.get(long))?.data)).toBe("long");
    expect((await store.list()).items.map((i) => i.key)).toEqual([long]);
    expect(await store.delete(long)).toBe(true);
  });

  test("invalid keys give INVALID_REQUEST", async (store) => {
    const bad = ["", "a/../b", "..", "../escape", "a\0b", "\0", "x".repeat(1025)];
    for (const k of bad) {
      await expectRejectsWith(() => store.put(k, "x"), "INVALID_REQUEST");
      await expectRejectsWith(() => store.get(k), "INVALID_REQUEST");
      await expectRejectsWith(() => store.delete(k), "INVALID_REQUEST");
    }
    expect((await store.info()).numItems).toBe(0);
  });

  test("list is in key order and pages with cursors", async (store) => {
    const keys = Array.from({ length: 23 }, (_, i) => `item-${String((i * 7) % 23).padStart(2, "0")}`);
    for (const k of keys) await store.put(k, k);
    const pages = await listAllPages((o) => store.list(o), 5);
    expect(pages.map((p) => p.length)).toEqual([5, 5, 5, 5, 3]);
    expect(pages.flat().map((i) => i.key)).toEqual([...keys].sort(codeUnitOrder));
    const first = pages[0]?.[0];
    expect(first).toEqual({
      key: "item-00",
      size: 7,
      contentType: "text/plain; charset=utf-8",
      createdAt: first?.createdAt,
      updatedAt: first?.updatedAt,
    });
    expectNs(first?.createdAt);
  });

  test("the last page has no nextCursor, also when it is full", async (store) => {
    for (let i = 0; i < 10; i++) await store.put(`k${i}`, "v");
    const p1 = await store.list({ limit: 5 });
    expect(p1.nextCursor).toEqual(expect.any(String));
    const p2 = await store.list({ limit: 5, cursor: p1.nextCursor as string });
    expect(p2.items.map((i) => i.key)).toEqual(["k5", "k6", "k7", "k8", "k9"]);
    expect(p2.nextCursor).toBeUndefined();
    expect(await store.list()).toEqual({ items: expect.any(Array) });
    expect(await store.list({ prefix: "none" })).toEqual({ items: [] });
  });

  test("list by prefix, with cursors", async (store) => {
    const keys = ["img/a.png", "img/b.png", "img/c.png", "imgx", "im", "doc/a", "img/sub/d.png", "a/img/e"];
    for (const k of keys) await store.put(k, k);
    const pages = await listAllPages((o) => store.list(o), 2, "img/");
    expect(pages.flat().map((i) => i.key)).toEqual(["img/a.png", "img/b.png", "img/c.png", "img/sub/d.png"]);
    expect((await store.list({ prefix: "img" })).items.map((i) => i.key)).toEqual([
      "img/a.png",
      "img/b.png",
      "img/c.png",
      "img/sub/d.png",
      "imgx",
    ]);
    expect((await store.list({ prefix: "" })).items).toHaveLength(keys.length);
  });

  test("entries added behind the cursor do not shift later pages", async (store) => {
    for (const k of ["b", "d", "f", "h"]) await store.put(k, k);
    const p1 = await store.list({ limit: 2 });
    expect(p1.items.map((i) => i.key)).toEqual(["b", "d"]);
    await store.put("a", "a");
    await store.put("c", "c");
    await store.put("e", "e");
    const p2 = await store.list({ limit: 2, cursor: p1.nextCursor as string });
    expect(p2.items.map((i) => i.key)).toEqual(["e", "f"]);
  });

  test("list defaults to 100 items and caps limit at 1000", async (store) => {
    for (let i = 0; i < 1050; i++) await store.put(`key-${String(i).padStart(4, "0")}`, "v");
    const def = await store.list();
    expect(def.items).toHaveLength(100);
    const big = await store.list({ limit: 5000 });
    expect(big.items).toHaveLength(1000);
    const rest = await store.list({ limit: 5000, cursor: big.nextCursor as string });
    expect(rest.items).toHaveLength(50);
    expect(rest.nextCursor).toBeUndefined();
  }, 60_000);

  test("list rejects a limit below 1 and a malformed cursor with INVALID_REQUEST", async (store) => {
    await store.put("a", "1");
    await expectRejectsWith(() => store.list({ limit: 0 }), "INVALID_REQUEST");
    await expectRejectsWith(() => store.list({ limit: 1.5 }), "INVALID_REQUEST");
    await expectRejectsWith(() => store.list({ cursor: "not a cursor!" }), "INVALID_REQUEST");
  });

  test("stored data cannot be changed through given or returned arrays", async (store) => {
    const input = new Uint8Array([1, 2, 3]);
    await store.put("k", input);
    input[0] = 99;
    const got = await store.get("k");
    expect(bytesOf(got?.data)).toEqual([1, 2, 3]);
    if (got !== undefined) got.data[1] = 98;
    expect(bytesOf((await store.get("k"))?.data)).toEqual([1, 2, 3]);
  });

  test("info reports numItems and lastItemCreatedAt", async (store) => {
    const empty = await store.info();
    expect(empty).toMatchObject({ numItems: 0, lastItemCreatedAt: 0 });
    expect(empty.storeType.length).toBeGreaterThan(0);
    expectNoSecret(empty.connectionInfo);
    await store.put("a", "1");
    const b = await store.put("b", "2");
    await store.put("a", "overwritten");
    expect(await store.info()).toMatchObject({ numItems: 2, lastItemCreatedAt: b.createdAt });
  });

  test("concurrent puts of one key leave one complete entry", async (store) => {
    const values = Array.from({ length: 10 }, (_, i) => `value-${i}-${"x".repeat(i * 100)}`);
    const infos = await Promise.all(values.map((v) => store.put("same", v)));
    const got = await store.get("same");
    const text = decoder.decode(got?.data);
    expect(values).toContain(text);
    expect(got?.size).toBe(new TextEncoder().encode(text).byteLength);
    // Every put after the first saw the entry or raced it; createdAt is one of theirs and never after updatedAt.
    expect(infos.map((i) => i.createdAt)).toContain(got?.createdAt);
    expect(got?.updatedAt).toBeGreaterThanOrEqual(got?.createdAt as number);
    expect((await store.list()).items).toHaveLength(1);
  });

  test("close is idempotent and later calls reject with STORE_CLOSED", async (store) => {
    await store.put("a", "1");
    await expectClosedBehaviour(store, () => store.put("b", "2"));
    await expectRejectsWith(() => store.get("a"), "STORE_CLOSED");
    await expectRejectsWith(() => store.list(), "STORE_CLOSED");
  });
});
