/**
 * The Runtime's failure history (`Runtime.ListFailures`, `runtime.listFailures`):
 * the latest failed commands, handler failures and failed restores of this
 * instance, newest first, kept whether or not the system-event stream runs,
 * and scoped to the caller's tenant through the Runtime domain.
 */
import { afterEach, describe, expect, it } from "vitest";
import { ListFailures } from "mneme/runtime";
import { FailureHistory } from "../../src/runtime/failure-history.js";
import { ADMIN, OTHER_TENANT_USER, type Rig, startRig, USER } from "./runtime-fixture.js";
import { rejection } from "../support/rejections.js";

describe("FailureHistory", () => {
  it("keeps the last entries of its capacity, newest first, and filters by tenant and handler", () => {
    const h = new FailureHistory(3);
    h.add("CommandFailed", { n: 1 }, "t-a");
    h.add("HandlerFailed", { n: 2, eventHandlerName: "H" }, "t-b");
    h.add("RestoreFailed", { n: 3, eventHandlerName: "H" });
    h.add("CommandFailed", { n: 4 }, "t-a");
    expect(h.list().map((e) => e.data.n)).toEqual([4, 3, 2]);
    expect(h.list({ tenantUuid: "t-a" }).map((e) => e.data.n)).toEqual([4]);
    expect(h.list({ eventHandlerName: "H" }).map((e) => e.data.n)).toEqual([3, 2]);
    expect(h.list({ limit: 1 }).map((e) => e.data.n)).toEqual([4]);
    expect(h.list()[1]).not.toHaveProperty("tenantUuid");
  });

  it("refuses a bad limit or tenant, and a bad capacity", () => {
    const h = new FailureHistory();
    for (const limit of [0, 1001, 1.5]) expect(() => h.list({ limit })).toThrow(expect.objectContaining({ code: "INVALID_REQUEST" }));
    expect(() => h.list({ tenantUuid: 7 as unknown as string })).toThrow(expect.objectContaining({ code: "INVALID_REQUEST" }));
    expect(() => new FailureHistory(0)).toThrow(expect.objectContaining({ code: "INVALID_REQUEST" }));
  });
});

describe("runtime.listFailures", () => {
  let rig: Rig | undefined;
  afterEach(async () => {
    await rig?.facade.stop();
    rig = undefined;
  });

  it("records failed commands and handler failures while the system-event stream is off", async () => {
    rig = await startRig({ systemEvents: false });
    expect(rig.facade.runtime.systemEvents.running).toBe(false);
    rig.orders.failOnItem = "bomb";
    await rig.place("o-1", "bomb");
    await rejection(rig.facade.dispatch({ domain: "Shop", name: "PlaceOrder" }, { orderUuid: "o-2" }, { reqCtx: USER }));
    const failures = rig.facade.runtime.listFailures();
    expect(failures.map((e) => e.kind)).toEqual(["CommandFailed", "HandlerFailed"]);
    expect(failures[0]).toMatchObject({ tenantUuid: "tenant-a", data: { domain: "Shop", name: "PlaceOrder", code: "VALIDATION_FAILED" } });
    expect(failures[1]).toMatchObject({ tenantUuid: "tenant-a", data: { eventHandlerName: "OrderList" } });
    expect(String(failures[1]!.data.error)).toContain("cannot list bomb");
  });

  it("through the Runtime domain: the caller's tenant only; every tenant for an administrator asking for it", async () => {
    rig = await startRig();
    await rejection(rig.facade.dispatch({ domain: "Shop", name: "PlaceOrder" }, { orderUuid: "a" }, { reqCtx: USER }));
    await rejection(rig.facade.dispatch({ domain: "Shop", name: "PlaceOrder" }, { orderUuid: "b" }, { reqCtx: OTHER_TENANT_USER }));
    const mine = await rig.facade.query(ListFailures, {}, { reqCtx: USER });
    expect(mine.map((e) => e.tenantUuid)).toEqual(["tenant-a"]);
    expect((await rejection(rig.facade.query(ListFailures, { allTenants: true }, { reqCtx: USER }))).code).toBe("PERMISSION_DENIED");
    const all = await rig.facade.query(ListFailures, { allTenants: true }, { reqCtx: ADMIN });
    expect(all.map((e) => e.tenantUuid)).toEqual(["tenant-b", "tenant-a"]);
  });
});
