import { expect, type TestContext } from "vitest";
import { newUuid, nowNs } from "../model/clock.js";
import { commandStoreCapabilities } from "../store/backend.js";
import type { CommandRecord, CommandStore } from "../store/command-store.js";
import type { StorePage } from "../store/store-info.js";
import { defineContract, expectClosedBehaviour, expectNoSecret, expectRejectsWith } from "./contract-harness.js";
import { describeRecordPayloadSealingContract } from "./payload-sealing-contract.js";

const BASE_NS = 1_700_000_000_000_000_000;

function rec(extra: Partial<CommandRecord> = {}): CommandRecord {
  return {
    commandUuid: newUuid(),
    domain: "Todo",
    name: "CreateTodo",
    tenantUuid: "",
    reqCtx: {},
    payload: { title: "x" },
    status: "succeeded",
    eventUuids: [],
    createdAt: nowNs(),
    durationMicros: 12,
    ...extra,
  };
}

/** The store's order: createdAt, then commandUuid. */
function byKey(a: CommandRecord, b: CommandRecord): number {
  return a.createdAt - b.createdAt || (a.commandUuid < b.commandUuid ? -1 : a.commandUuid > b.commandUuid ? 1 : 0);
}

/** Follows nextCursor to the end, checking every page but the last is full and has a cursor. */
async function pageThrough(
  list: (cursor: string | undefined) => Promise<StorePage<CommandRecord>>,
  limit: number,
): Promise<CommandRecord[][]> {
  const pages: CommandRecord[][] = [];
  let cursor: string | undefined;
  for (let guard = 0; guard < 10_000; guard++) {
    const page = await list(cursor);
    pages.push(page.items);
    if (page.nextCursor === undefined) return pages;
    expect(page.items).toHaveLength(limit);
    cursor = page.nextCursor;
  }
  return expect.fail("paging did not end");
}

/**
 * The CommandStore conformance suite (the audit trail): record/get, keyset
 * listing by (createdAt, commandUuid) with cursors and filters, delete, info.
 */
export const describeCommandStoreContract = defineContract<CommandStore>("CommandStore contract", (test) => {
  test("record then get returns the record", async (store) => {
    const full = rec({
      tenantUuid: newUuid(),
      reqCtx: { senderAccountUuid: newUuid(), traceId: "t-1", attributes: { ip: "::1", n: [1, 2] } },
      payload: { title: "Ünïcode ✓", nested: { list: [1, null, "x"], ok: false }, password: "[redacted]" },
      status: "failed",
      error: { code: "CONFLICT", message: "todo exists" },
      eventUuids: [newUuid(), newUuid()],
      durationMicros: 1234,
    });
    await store.record(full);
    expect(await store.get(full.commandUuid)).toEqual(full);
    const minimal = rec();
    await store.record(minimal);
    const got = await store.get(minimal.commandUuid);
    expect(got).toEqual(minimal);
    expect(got?.error).toBeUndefined();
  });

  test("get of an unknown commandUuid resolves undefined", async (store) => {
    await store.record(rec());
    expect(await store.get(newUuid())).toBeUndefined();
  });

  test("recording a commandUuid twice gives CONFLICT and keeps the first", async (store) => {
    const first = rec({ payload: { v: 1 } });
    await store.record(first);
    await expectRejectsWith(() => store.record({ ...first, payload: { v: 2 } }), "CONFLICT");
    expect(await store.get(first.commandUuid)).toEqual(first);
    expect((await store.info()).numItems).toBe(1);
  });

  test("an invalid record gives INVALID_REQUEST", async (store) => {
    await expectRejectsWith(() => store.record(rec({ commandUuid: "" })), "INVALID_REQUEST");
    await expectRejectsWith(() => store.record(rec({ status: "exploded" as CommandRecord["status"] })), "INVALID_REQUEST");
    expect((await store.info()).numItems).toBe(0);
  });

  test("list is ordered by createdAt, then commandUuid", async (store) => {
    const recs = [
      rec({ createdAt: BASE_NS + 3000 }),
      rec({ createdAt: BASE_NS + 1000 }),
      rec({ createdAt: BASE_NS + 2000 }),
      rec({ createdAt: BASE_NS + 2000 }),
      rec({ createdAt: BASE_NS + 2000 }),
      rec({ createdAt: BASE_NS }),
    ];
    for (const r of recs) await store.record(r);
    const page = await store.list();
    expect(page.items).toEqual([...recs].sort(byKey));
    expect(page.nextCursor).toBeUndefined();
  });

  test("cursor paging returns every record once, with ties in createdAt", async (store) => {
    const recs: CommandRecord[] = [];
    // Groups of equal createdAt straddle page boundaries.
    for (let i = 0; i < 23; i++) recs.push(rec({ createdAt: BASE_NS + Math.floor(i / 4) * 1000 }));
    for (const r of [...recs].reverse()) await store.record(r);
    const pages = await pageThrough((cursor) => store.list({ limit: 5, ...(cursor === undefined ? {} : { cursor }) }), 5);
    expect(pages.map((p) => p.length)).toEqual([5, 5, 5, 5, 3]);
    expect(pages.flat()).toEqual([...recs].sort(byKey));
  });

  test("the last page has no nextCursor, also when it is full", async (store) => {
    for (let i = 0; i < 10; i++) await store.record(rec({ createdAt: BASE_NS + i }));
    const p1 = await store.list({ limit: 5 });
    expect(p1.items).toHaveLength(5);
    expect(p1.nextCursor).toEqual(expect.any(String));
    const p2 = await store.list({ limit: 5, cursor: p1.nextCursor as string });
    expect(p2.items).toHaveLength(5);
    expect(p2.nextCursor).toBeUndefined();
    expect((await store.list({ limit: 10 })).nextCursor).toBeUndefined();
    expect(await store.list({ limit: 5, cursor: p1.nextCursor as string })).toEqual(p2);
  });

  test("an empty store lists no items and no cursor", async (store) => {
    expect(await store.list()).toEqual({ items: [] });
  });

  test("cursors are keyset: records added before the cursor do not shift later pages", async (store) => {
    const recs = Array.from({ length: 10 }, (_, i) => rec({ createdAt: BASE_NS + 1000 * (i + 1) }));
    for (const r of recs) await store.record(r);
    const p1 = await store.list({ limit: 5 });
    await store.record(rec({ createdAt: BASE_NS }));
    const late = rec({ createdAt: BASE_NS + 100_000 });
    await store.record(late);
    const p2 = await store.list({ limit: 5, cursor: p1.nextCursor as string });
    expect(p2.items).toEqual(recs.slice(5, 10));
    const p3 = await store.list({ limit: 5, cursor: p2.nextCursor as string });
    expect(p3.items).toEqual([late]);
    expect(p3.nextCursor).toBeUndefined();
  });

  test("list defaults to 100 items and caps limit at 1000", async (store) => {
    for (let i = 0; i < 1050; i++) await store.record(rec({ createdAt: BASE_NS + i }));
    const def = await store.list();
    expect(def.items).toHaveLength(100);
    expect(def.nextCursor).toEqual(expect.any(String));
    const big = await store.list({ limit: 5000 });
    expect(big.items).toHaveLength(1000);
    const rest = await store.list({ limit: 5000, cursor: big.nextCursor as string });
    expect(rest.items).toHaveLength(50);
    expect(rest.nextCursor).toBeUndefined();
    expect(new Set([...big.items, ...rest.items].map((r) => r.commandUuid)).size).toBe(1050);
  }, 60_000);

  test("list rejects a limit below 1 and a malformed cursor with INVALID_REQUEST", async (store) => {
    await store.record(rec());
    await expectRejectsWith(() => store.list({ limit: 0 }), "INVALID_REQUEST");
    await expectRejectsWith(() => store.list({ limit: -1 }), "INVALID_REQUEST");
    await expectRejectsWith(() => store.list({ limit: 2.5 }), "INVALID_REQUEST");
    await expectRejectsWith(() => store.list({ cursor: "not a cursor!" }), "INVALID_REQUEST");
  });

  test("list filters by domain, name, status and tenantUuid, also across pages", async (store) => {
    const t = newUuid();
    const recs: CommandRecord[] = [];
    for (let i = 0; i < 24; i++) {
      recs.push(
        rec({
          createdAt: BASE_NS + i,
          domain: i % 2 === 0 ? "Todo" : "Note",
          name: i % 3 === 0 ? "Create" : "Rename",
          status: (["succeeded", "failed", "denied"] as const)[i % 3] as CommandRecord["status"],
          tenantUuid: i % 4 === 0 ? t : "",
        }),
      );
    }
    for (const r of recs) await store.record(r);
    const all = async (filter: Parameters<CommandStore["list"]>[0]): Promise<CommandRecord[]> =>
      (await pageThrough((cursor) => store.list({ ...filter, limit: 2, ...(cursor === undefined ? {} : { cursor }) }), 2)).flat();
    expect(await all({ domain: "Todo" })).toEqual(recs.filter((r) => r.domain === "Todo"));
    expect(await all({ name: "Create" })).toEqual(recs.filter((r) => r.name === "Create"));
    expect(await all({ status: "denied" })).toEqual(recs.filter((r) => r.status === "denied"));
    expect(await all({ tenantUuid: t })).toEqual(recs.filter((r) => r.tenantUuid === t));
    const combined = await all({ domain: "Todo", status: "succeeded", tenantUuid: t });
    expect(combined).toEqual(recs.filter((r) => r.domain === "Todo" && r.status === "succeeded" && r.tenantUuid === t));
    expect(combined.length).toBeGreaterThan(0);
    expect((await store.list({ domain: "Nothing" })).items).toEqual([]);
  });

  test("delete removes a record and reports whether it existed", async (store) => {
    const a = rec({ createdAt: BASE_NS + 1 });
    const b = rec({ createdAt: BASE_NS + 2 });
    await store.record(a);
    await store.record(b);
    expect(await store.delete(a.commandUuid)).toBe(true);
    expect(await store.delete(a.commandUuid)).toBe(false);
    expect(await store.delete(newUuid())).toBe(false);
    expect(await store.get(a.commandUuid)).toBeUndefined();
    expect((await store.list()).items).toEqual([b]);
    expect((await store.info()).numItems).toBe(1);
  });

  test("info reports numItems and lastItemCreatedAt", async (store) => {
    const empty = await store.info();
    expect(empty).toMatchObject({ numItems: 0, lastItemCreatedAt: 0 });
    expect(empty.storeType.length).toBeGreaterThan(0);
    expectNoSecret(empty.connectionInfo);
    await store.record(rec({ createdAt: BASE_NS + 5 }));
    await store.record(rec({ createdAt: BASE_NS + 9_000 }));
    await store.record(rec({ createdAt: BASE_NS + 7 }));
    expect(await store.info()).toMatchObject({ numItems: 3, lastItemCreatedAt: BASE_NS + 9_000 });
  });

  test("stored records cannot be changed through given or returned objects", async (store) => {
    const r = rec({ payload: { list: [1, 2] }, eventUuids: [newUuid()], reqCtx: { traceId: "t" } });
    const snapshot = structuredClone(r);
    await store.record(r);
    (r.payload as { list: number[] }).list.push(3);
    r.eventUuids.push("x");
    r.reqCtx.traceId = "changed";
    const got = await store.get(r.commandUuid);
    expect(got).toEqual(snapshot);
    if (got !== undefined) {
      try {
        (got.payload as { list: number[] }).list.push(4);
        got.eventUuids.length = 0;
      } catch {
        // frozen results are fine
      }
    }
    expect(await store.get(r.commandUuid)).toEqual(snapshot);
    expect((await store.list()).items).toEqual([snapshot]);
  });

  describeRecordPayloadSealingContract(test);

  /** The store's claims, or the test is skipped: claims are an optional capability. */
  const claimsOf = (store: CommandStore, ctx: TestContext): Required<Pick<CommandStore, "claim" | "renewClaim" | "releaseClaim">> => {
    // A store offering some of the three methods but not all fails here (INVALID_REQUEST).
    if (!commandStoreCapabilities(store).claims) ctx.skip("the store offers no claims (an optional capability)");
    return store as Required<CommandStore>;
  };
  const claimant = (owner: string, leaseMs = 60_000) => ({ owner, leaseMs, domain: "Todo", name: "CreateTodo", tenantUuid: "t" });

  test("claims: a claim is held against other owners, never listed, and resolved by the record", async (store, ctx) => {
    const c = claimsOf(store, ctx);
    const uuid = newUuid();
    const t0 = Date.now();
    expect(await c.claim(uuid, claimant("a"))).toEqual({ outcome: "claimed" });
    const held = await c.claim(uuid, claimant("b"));
    expect(held).toMatchObject({ outcome: "held", owner: "a" });
    if (held.outcome === "held") expect(held.expiresAt).toBeGreaterThan(t0 + 30_000);
    expect(await store.get(uuid)).toBeUndefined();
    expect((await store.list()).items).toEqual([]);
    expect((await store.info()).numItems).toBe(0);
    expect(await store.delete(uuid)).toBe(false);
    const r = rec({ commandUuid: uuid });
    await store.record(r);
    expect(await store.get(uuid)).toEqual(r);
    expect(await c.claim(uuid, claimant("b"))).toEqual({ outcome: "recorded", record: r });
    expect(await c.renewClaim(uuid, "a", 1000)).toBe(false);
    await expectRejectsWith(() => store.record(rec({ commandUuid: uuid })), "CONFLICT");
    expect((await store.list()).items).toEqual([r]);
  });

  test("claims: a failed or denied record is replaced by a claim; the next record counts", async (store, ctx) => {
    const c = claimsOf(store, ctx);
    for (const status of ["failed", "denied"] as const) {
      const uuid = newUuid();
      await store.record(rec({ commandUuid: uuid, status, error: { code: "HANDLER_FAILED", message: "x" } }));
      expect(await c.claim(uuid, claimant("a"))).toEqual({ outcome: "claimed" });
      expect(await store.get(uuid)).toBeUndefined();
      const ok = rec({ commandUuid: uuid });
      await store.record(ok);
      expect(await store.get(uuid)).toEqual(ok);
    }
  });

  test("claims: an expired claim is taken over, renewal keeps one, release frees one", async (store, ctx) => {
    const c = claimsOf(store, ctx);
    const uuid = newUuid();
    expect(await c.claim(uuid, claimant("a", 1))).toEqual({ outcome: "claimed" });
    await new Promise((r) => setTimeout(r, 30));
    expect(await c.claim(uuid, claimant("b"))).toEqual({ outcome: "claimed" });
    expect(await c.renewClaim(uuid, "a", 60_000)).toBe(false);
    expect(await c.renewClaim(uuid, "b", 60_000)).toBe(true);
    await c.releaseClaim(uuid, "a"); // not a's any more: left alone
    expect(await c.claim(uuid, claimant("c"))).toMatchObject({ outcome: "held", owner: "b" });
    await c.releaseClaim(uuid, "b");
    expect(await c.claim(uuid, claimant("c"))).toEqual({ outcome: "claimed" });
    await expectRejectsWith(() => c.claim(uuid, claimant("")), "INVALID_REQUEST");
    await expectRejectsWith(() => c.claim(uuid, claimant("d", 0)), "INVALID_REQUEST");
  });

  test("claims: of concurrent claims of one commandUuid exactly one is claimed", async (store, ctx) => {
    const c = claimsOf(store, ctx);
    const uuid = newUuid();
    const got = await Promise.all(Array.from({ length: 12 }, (_, i) => c.claim(uuid, claimant(`o${i}`))));
    expect(got.filter((g) => g.outcome === "claimed")).toHaveLength(1);
    expect(got.filter((g) => g.outcome === "held")).toHaveLength(11);
    // Also when a failed attempt is recorded (each claim would replace it).
    const failed = newUuid();
    await store.record(rec({ commandUuid: failed, status: "failed", error: { code: "HANDLER_FAILED", message: "x" } }));
    const again = await Promise.all(Array.from({ length: 12 }, (_, i) => c.claim(failed, claimant(`p${i}`))));
    expect(again.filter((g) => g.outcome === "claimed")).toHaveLength(1);
  });

  test("close is idempotent and later calls reject with STORE_CLOSED", async (store) => {
    await store.record(rec());
    await expectClosedBehaviour(store, () => store.record(rec()));
    await expectRejectsWith(() => store.list(), "STORE_CLOSED");
    await expectRejectsWith(() => store.get(newUuid()), "STORE_CLOSED");
  });
});
