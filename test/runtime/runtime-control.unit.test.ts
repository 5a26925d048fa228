/**
 * controlEventHandler: every transition of the state machine in
 * docs/runtime.md, every error, and the system events each action publishes.
 */
import { afterEach, describe, expect, it } from "vitest";
import { createFacade } from "mneme";
import { ADMIN, OrderList, USER, makeDomains, ofKind, type Rig, startRig } from "./runtime-fixture.js";
import { rejection } from "../support/rejections.js";
import type { ControlRequest, EventHandlerInfo } from "mneme/runtime";
import { MemoryReadmodelStoreBackend } from "mneme/memory";

let rig: Rig | undefined;
afterEach(async () => {
  if (rig !== undefined) {
    rig.orders.release();
    await rig.facade.stop();
  }
  rig = undefined;
});

const ctl = (r: Rig, req: ControlRequest) => r.facade.runtime.controlEventHandler(req);
const info = (r: Rig, name: string): EventHandlerInfo => r.facade.runtime.listEventHandlers().find((h) => h.name === name)!;

describe("errors", () => {
  it("INVALID_ACTION for an action that is not restore/start/stop, before anything else", async () => {
    rig = await startRig();
    for (const action of ["list", "RESTORE", "", undefined, 3]) {
      expect((await rejection(ctl(rig, { action, eventHandlerName: "Nope" } as never))).code).toBe("INVALID_ACTION");
    }
  });

  it("INVALID_ACTION for an unknown action through facade.dispatch of Runtime.ControlEventHandler too, not VALIDATION_FAILED", async () => {
    rig = await startRig();
    const dispatch = (payload: Record<string, unknown>) =>
      rig!.facade.dispatch({ domain: "Runtime", name: "ControlEventHandler" }, payload, { reqCtx: ADMIN });
    for (const action of ["explode", "list", "RESTORE", "", 3, null]) {
      const e = await rejection(dispatch({ action, eventHandlerName: "OrderList" }));
      expect(e.code, JSON.stringify(action)).toBe("INVALID_ACTION");
      expect(e.message).toContain("restore, start, stop");
    }
    expect((await rejection(dispatch({ eventHandlerName: "OrderList" }))).code).toBe("INVALID_ACTION");
    expect(info(rig, "OrderList").state).toBe("running");
    // The other fields are still validated by the schema.
    const bad = await rejection(dispatch({ action: "stop", eventHandlerName: "", restoreFromZero: "yes", extra: 1 }));
    expect(bad.code).toBe("VALIDATION_FAILED");
    expect(bad.details?.map((d) => d.pointer).sort()).toEqual(["/eventHandlerName", "/extra", "/restoreFromZero"]);
    expect((await dispatch({ action: "stop", eventHandlerName: "OrderList" })).result).toMatchObject({ state: "stopped" });
  });

  it("UNKNOWN_EVENT_HANDLER for a name no handler has", async () => {
    rig = await startRig();
    for (const action of ["restore", "start", "stop"] as const) {
      const e = await rejection(ctl(rig, { action, eventHandlerName: "Nope" }));
      expect(e.code).toBe("UNKNOWN_EVENT_HANDLER");
      expect(e.message).toContain("Nope");
    }
  });

  it("INVALID_REQUEST for a missing name, a non-boolean restoreFromZero or a non-object request", async () => {
    rig = await startRig();
    expect((await rejection(ctl(rig, { action: "stop" } as never))).code).toBe("INVALID_REQUEST");
    expect((await rejection(ctl(rig, { action: "restore", eventHandlerName: "OrderList", restoreFromZero: "yes" } as never))).code).toBe(
      "INVALID_REQUEST",
    );
    expect((await rejection(rig.facade.runtime.controlEventHandler(null as never))).code).toBe("INVALID_REQUEST");
  });

  it("INVALID_ACTION to restore a handler that is not a state restorer", async () => {
    rig = await startRig();
    const e = await rejection(ctl(rig, { action: "restore", eventHandlerName: "Mailer" }));
    expect(e.code).toBe("INVALID_ACTION");
    expect(info(rig, "Mailer").state).toBe("running");
  });

  it("INVALID_STATE while the facade is not started, and after it stopped", async () => {
    const f = createFacade();
    const { OrderPlaced } = makeDomains();
    f.registerReadmodel(new OrderList(f, OrderPlaced));
    expect((await rejection(f.runtime.controlEventHandler({ action: "start", eventHandlerName: "OrderList" }))).code).toBe("INVALID_STATE");
    await f.start();
    await f.stop();
    expect((await rejection(f.runtime.controlEventHandler({ action: "restore", eventHandlerName: "OrderList" }))).code).toBe(
      "INVALID_STATE",
    );
  });

  it("with a reqCtx, the caller's permission is checked first (before the handler is looked up)", async () => {
    rig = await startRig();
    const e = await rejection(rig.facade.runtime.controlEventHandler({ action: "stop", eventHandlerName: "Nope" }, USER));
    expect(e.code).toBe("PERMISSION_DENIED");
    expect((await rejection(rig.facade.runtime.controlEventHandler({ action: "stop", eventHandlerName: "Nope" }, ADMIN))).code).toBe(
      "UNKNOWN_EVENT_HANDLER",
    );
    const ok = await rig.facade.runtime.controlEventHandler({ action: "stop", eventHandlerName: "OrderList" }, ADMIN);
    expect(ok.state).toBe("stopped");
  });
});

describe("running", () => {
  it("stop -> stopped: live events are no longer applied, the checkpoint is kept; start catches up and goes live", async () => {
    rig = await startRig();
    await rig.place("o1");
    const stopped = await ctl(rig, { action: "stop", eventHandlerName: "OrderList" });
    expect(stopped).toMatchObject({ state: "stopped", restorationState: "restored", lastPosition: 1 });
    await rig.place("o2");
    await rig.place("o3");
    expect(rig.orders.applied).toEqual(["o1"]);
    expect(info(rig, "OrderList").lastPosition).toBe(1);
    const started = await ctl(rig, { action: "start", eventHandlerName: "OrderList" });
    // start resolves when it has caught up
    expect(started).toMatchObject({ state: "running", lastPosition: 3 });
    expect(rig.orders.applied).toEqual(["o1", "o2", "o3"]);
    await rig.place("o4");
    expect(rig.orders.applied).toEqual(["o1", "o2", "o3", "o4"]);
    const changes = ofKind(rig.events, "EventHandlerStateChanged", "OrderList").map((e) => [e.data.from, e.data.to]);
    expect(changes).toEqual([
      ["stopped", "running"],
      ["running", "stopped"],
      ["stopped", "running"],
    ]);
  });

  it("start while running and stop while stopped: INVALID_STATE, nothing changes", async () => {
    rig = await startRig();
    expect((await rejection(ctl(rig, { action: "start", eventHandlerName: "OrderList" }))).code).toBe("INVALID_STATE");
    await ctl(rig, { action: "stop", eventHandlerName: "Mailer" });
    const e = await rejection(ctl(rig, { action: "stop", eventHandlerName: "Mailer" }));
    expect(e.code).toBe("INVALID_STATE");
    expect(e.message).toContain("stopped already");
    expect(info(rig, "Mailer").state).toBe("stopped");
  });

  it("restore of a running readmodel (from its checkpoint): replays nothing new, stays running", async () => {
    rig = await startRig();
    await rig.place("o1");
    const r = await ctl(rig, { action: "restore", eventHandlerName: "OrderList" });
    expect(r).toMatchObject({ state: "running", restorationState: "restored", lastPosition: 1 });
    expect(rig.orders.applied).toEqual(["o1"]);
    expect(rig.facade.runtime.getMetrics("OrderList").lastRestore).toMatchObject({ eventsReplayed: 0, afterPosition: 1, toPosition: 1 });
    const started = ofKind(rig.events, "RestoreStarted", "OrderList");
    expect(started.at(-1)?.data).toEqual({ eventHandlerName: "OrderList", fromZero: false, afterPosition: 1 });
  });

  it("restore from zero: clears the readmodel, replays everything, catches live events meanwhile, each applied once", async () => {
    rig = await startRig();
    for (const id of ["o1", "o2", "o3"]) await rig.place(id);
    rig.orders.applied = [];
    rig.orders.hold();
    const restoring = ctl(rig, { action: "restore", eventHandlerName: "OrderList", restoreFromZero: true });
    await rig.orders.entered;
    expect(info(rig, "OrderList")).toMatchObject({ state: "running", restorationState: "restoring" });
    // live traffic while the replay is held: caught, applied after the replay
    await rig.facade.dispatch({ domain: "Shop", name: "PlaceOrder" }, { orderUuid: "o4", item: "pen", qty: 1 }, { reqCtx: USER });
    rig.orders.release();
    const done = await restoring;
    expect(done).toMatchObject({ state: "running", restorationState: "restored", lastPosition: 4 });
    expect(rig.orders.applied).toEqual(["o1", "o2", "o3", "o4"]);
    expect(await rig.orders.count()).toBe(4);
    const report = rig.facade.runtime.getMetrics("OrderList").lastRestore!;
    expect(report).toMatchObject({ afterPosition: 0, toPosition: 4 });
    expect(report.eventsReplayed + report.eventsCaught).toBeGreaterThanOrEqual(4);
    const kinds = rig.events.filter((e) => e.data.eventHandlerName === "OrderList" && e.kind.startsWith("Restore")).map((e) => e.kind);
    expect(kinds.slice(-2)).toEqual(["RestoreStarted", "RestoreCompleted"]);
  });
});

describe("restoring", () => {
  // Returns the pending restore in an object: an async function returning the promise itself would wait for it.
  async function holdRestore(r: Rig): Promise<{ restoring: Promise<EventHandlerInfo> }> {
    for (const id of ["o1", "o2"]) await r.place(id);
    r.orders.hold();
    const p = ctl(r, { action: "restore", eventHandlerName: "OrderList", restoreFromZero: true });
    p.catch(() => undefined);
    await r.orders.entered;
    return { restoring: p };
  }

  it("restore and start while restoring: INVALID_STATE; the restoration goes on", async () => {
    rig = await startRig();
    const { restoring } = await holdRestore(rig);
    expect((await rejection(ctl(rig, { action: "restore", eventHandlerName: "OrderList" }))).code).toBe("INVALID_STATE");
    expect((await rejection(ctl(rig, { action: "start", eventHandlerName: "OrderList" }))).code).toBe("INVALID_STATE");
    rig.orders.release();
    expect(await restoring).toMatchObject({ state: "running", restorationState: "restored" });
  });

  it("stop while restoring cancels: the restore rejects RESTORE_CANCELLED, the handler is stopped/cancelled, start resumes", async () => {
    rig = await startRig();
    const { restoring } = await holdRestore(rig);
    const stopping = ctl(rig, { action: "stop", eventHandlerName: "OrderList" });
    rig.orders.release();
    const stopped = await stopping;
    expect(stopped).toMatchObject({ state: "stopped", restorationState: "cancelled" });
    expect((await rejection(restoring)).code).toBe("RESTORE_CANCELLED");
    const failed = ofKind(rig.events, "RestoreFailed", "OrderList");
    expect(failed).toHaveLength(1);
    expect(failed[0]!.data).toMatchObject({ eventHandlerName: "OrderList", cancelled: true });
    expect(typeof failed[0]!.data.position).toBe("number");
    // resume from the checkpoint the cancelled restore persisted
    const started = await ctl(rig, { action: "start", eventHandlerName: "OrderList" });
    expect(started).toMatchObject({ state: "running", lastPosition: 2 });
    expect(await rig.orders.count()).toBe(2);
  });
});

describe("failed", () => {
  it("a handler that throws becomes failed (HandlerFailed); start retries and rejects HANDLER_FAILED while it still fails; start after the fix resumes", async () => {
    rig = await startRig();
    await rig.place("o1");
    rig.orders.failOnItem = "bomb";
    const res = await rig.facade.dispatch(
      { domain: "Shop", name: "PlaceOrder" },
      { orderUuid: "o2", item: "bomb", qty: 1 },
      { reqCtx: USER, waitToFinish: true },
    );
    expect(res.handlerErrors.map((h) => h.eventHandlerName)).toEqual(["OrderList"]);
    expect(info(rig, "OrderList")).toMatchObject({ state: "failed", lastPosition: 1, lastError: "cannot list bomb" });
    expect(ofKind(rig.events, "HandlerFailed", "OrderList")[0]!.data).toMatchObject({
      eventHandlerName: "OrderList",
      position: 2,
      eventPath: "Shop.OrderPlaced",
      error: "cannot list bomb",
    });
    // other handlers go on
    expect(info(rig, "Mailer")).toMatchObject({ state: "running", lastPosition: 2 });

    const again = await rejection(ctl(rig, { action: "start", eventHandlerName: "OrderList" }));
    expect(again.code).toBe("HANDLER_FAILED");
    expect(again.message).toContain("cannot list bomb");
    expect(info(rig, "OrderList").state).toBe("failed");

    rig.orders.failOnItem = undefined;
    expect(await ctl(rig, { action: "start", eventHandlerName: "OrderList" })).toMatchObject({ state: "running", lastPosition: 2 });
    expect(rig.orders.applied).toEqual(["o1", "o2"]);
  });

  it("stop of a failed handler -> stopped; restore of a failed handler -> running/restored", async () => {
    rig = await startRig();
    rig.orders.failOnItem = "bomb";
    await rig.place("o1", "bomb");
    expect(info(rig, "OrderList").state).toBe("failed");
    expect(await ctl(rig, { action: "stop", eventHandlerName: "OrderList" })).toMatchObject({ state: "stopped" });

    await ctl(rig, { action: "start", eventHandlerName: "OrderList" }).catch(() => undefined);
    expect(info(rig, "OrderList").state).toBe("failed");
    rig.orders.failOnItem = undefined;
    expect(await ctl(rig, { action: "restore", eventHandlerName: "OrderList", restoreFromZero: true })).toMatchObject({
      state: "running",
      restorationState: "restored",
      lastPosition: 1,
    });
    expect(await rig.orders.count()).toBe(1);
  });

  it("a restore that fails rejects with the handler's error; the handler is failed/failed; RestoreFailed is published", async () => {
    rig = await startRig();
    await rig.place("o1");
    await rig.place("o2", "bomb");
    rig.orders.failOnItem = "bomb";
    const e = await rejection(ctl(rig, { action: "restore", eventHandlerName: "OrderList", restoreFromZero: true }));
    expect(e.code).toBe("HANDLER_FAILED");
    expect(info(rig, "OrderList")).toMatchObject({ state: "failed", restorationState: "failed", lastError: "cannot list bomb" });
    const rf = ofKind(rig.events, "RestoreFailed", "OrderList");
    expect(rf.at(-1)!.data).toMatchObject({ eventHandlerName: "OrderList", cancelled: false, error: "cannot list bomb", position: 1 });
  });
});

describe("concurrency", () => {
  it("a second start while the first is catching up is INVALID_STATE, as is a restore", async () => {
    rig = await startRig();
    await ctl(rig, { action: "stop", eventHandlerName: "OrderList" });
    await rig.place("o1");
    rig.orders.hold();
    const first = ctl(rig, { action: "start", eventHandlerName: "OrderList" });
    await rig.orders.entered;
    expect((await rejection(ctl(rig, { action: "start", eventHandlerName: "OrderList" }))).code).toBe("INVALID_STATE");
    expect((await rejection(ctl(rig, { action: "restore", eventHandlerName: "OrderList", restoreFromZero: true }))).code).toBe(
      "INVALID_STATE",
    );
    rig.orders.release();
    expect(await first).toMatchObject({ state: "running", lastPosition: 1 });
    expect(rig.orders.applied).toEqual(["o1"]);
  });

  it("stop while a start is catching up: resolves stopped, nothing is applied twice", async () => {
    rig = await startRig();
    await ctl(rig, { action: "stop", eventHandlerName: "OrderList" });
    for (const id of ["o1", "o2"]) await rig.place(id);
    rig.orders.hold();
    const starting = ctl(rig, { action: "start", eventHandlerName: "OrderList" });
    await rig.orders.entered;
    const stopping = ctl(rig, { action: "stop", eventHandlerName: "OrderList" });
    rig.orders.release();
    expect(await stopping).toMatchObject({ state: "stopped" });
    await starting;
    const after = info(rig, "OrderList");
    expect(after.state).toBe("stopped");
    await ctl(rig, { action: "start", eventHandlerName: "OrderList" });
    expect(rig.orders.applied).toEqual(["o1", "o2"]);
  });
});

/** A memory backend with the optional single-processor lock; `elsewhere` holds handlers' locks for "another instance". */
class LockingBackend extends MemoryReadmodelStoreBackend {
  readonly elsewhere = new Set<string>();
  readonly mine = new Set<string>();
  override async tryLock(handler: string): Promise<boolean> {
    if (this.elsewhere.has(handler)) return false;
    this.mine.add(handler);
    return true;
  }
  override async unlock(handler: string): Promise<void> {
    this.mine.delete(handler);
  }
}

describe("standby (another instance holds the handler's lock)", () => {
  it("start and restore are INVALID_STATE; stop -> stopped; start while still locked -> standby; start once free -> running", async () => {
    const backend = new LockingBackend();
    backend.elsewhere.add("OrderList");
    rig = await startRig({ readmodelStoreBackend: backend, delivery: { lockRetryMs: 3_600_000 } });
    await rig.place("o1");
    expect(info(rig, "OrderList")).toMatchObject({ state: "standby", lastPosition: 0 });
    expect(rig.orders.applied).toEqual([]);
    expect(info(rig, "Mailer").state).toBe("running");
    expect((await rejection(ctl(rig, { action: "start", eventHandlerName: "OrderList" }))).code).toBe("INVALID_STATE");
    expect((await rejection(ctl(rig, { action: "restore", eventHandlerName: "OrderList" }))).code).toBe("INVALID_STATE");
    expect(info(rig, "OrderList").state).toBe("standby");
    expect(await ctl(rig, { action: "stop", eventHandlerName: "OrderList" })).toMatchObject({ state: "stopped" });
    // still held elsewhere: start waits in standby again instead of processing beside the other instance
    expect(await ctl(rig, { action: "start", eventHandlerName: "OrderList" })).toMatchObject({ state: "standby" });
    await ctl(rig, { action: "stop", eventHandlerName: "OrderList" });
    // a restore of a stopped handler whose lock is held elsewhere is refused too
    expect((await rejection(ctl(rig, { action: "restore", eventHandlerName: "OrderList", restoreFromZero: true }))).code).toBe(
      "INVALID_STATE",
    );
    expect(info(rig, "OrderList").state).toBe("stopped");
    expect(rig.orders.applied).toEqual([]);
    backend.elsewhere.delete("OrderList");
    expect(await ctl(rig, { action: "start", eventHandlerName: "OrderList" })).toMatchObject({ state: "running", lastPosition: 1 });
    expect(rig.orders.applied).toEqual(["o1"]);
    expect(backend.mine.has("OrderList")).toBe(true);
    await ctl(rig, { action: "stop", eventHandlerName: "OrderList" });
    expect(backend.mine.has("OrderList")).toBe(false);
  });
});

describe("through dispatch", () => {
  it("ControlEventHandler returns the handler info as result and publishes CommandExecuted", async () => {
    rig = await startRig();
    const r = await rig.facade.dispatch(
      { domain: "Runtime", name: "ControlEventHandler" },
      { action: "restore", eventHandlerName: "OrderList", restoreFromZero: true },
      { reqCtx: ADMIN },
    );
    expect(r.events).toEqual([]);
    expect(r.result).toMatchObject({ eventHandlerName: "OrderList", state: "running", restorationState: "restored" });
    expect(ofKind(rig.events, "CommandExecuted").at(-1)!.data).toMatchObject({ domain: "Runtime", name: "ControlEventHandler", events: 0 });
    const e = await rejection(
      rig.facade.dispatch(
        { domain: "Runtime", name: "ControlEventHandler" },
        { action: "restore", eventHandlerName: "Mailer" },
        { reqCtx: ADMIN },
      ),
    );
    expect(e.code).toBe("INVALID_ACTION");
    expect(ofKind(rig.events, "CommandFailed").at(-1)!.data).toMatchObject({
      name: "ControlEventHandler",
      code: "INVALID_ACTION",
      status: "failed",
    });
    const u = await rejection(
      rig.facade.dispatch(
        { domain: "Runtime", name: "ControlEventHandler" },
        { action: "stop", eventHandlerName: "Nope" },
        { reqCtx: ADMIN },
      ),
    );
    expect(u.code).toBe("UNKNOWN_EVENT_HANDLER");
  });
});
