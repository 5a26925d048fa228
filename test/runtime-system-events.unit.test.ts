/**
 * System events: the producer (ids, ring buffer resume, tenant filter, slow
 * subscribers, lifecycle) and every kind the facade publishes, with the
 * payload fields docs/runtime.md lists.
 */
import { afterEach, describe, expect, it } from "vitest";
import { type SystemEvent, SystemEventProducer, createFacade, isMnemeError, registerStorePermissions } from "mneme";
import { ADMIN, OTHER_TENANT_USER, USER, ofKind, type Rig, startRig } from "./runtime-fixture.js";

let rig: Rig | undefined;
afterEach(async () => {
  if (rig !== undefined) {
    rig.orders.release();
    await rig.facade.stop();
  }
  rig = undefined;
});

const never = () => new Promise<void>(() => undefined);

function producer(opts: ConstructorParameters<typeof SystemEventProducer>[0] = {}): SystemEventProducer {
  const p = new SystemEventProducer(opts);
  p.start();
  return p;
}

describe("producer", () => {
  it("ids are numbers, monotonic from 1; `at` is ns and does not go back", () => {
    const p = producer();
    const seen: SystemEvent[] = [];
    p.subscribe((e) => void seen.push(e));
    for (let i = 0; i < 5; i++) p.publish("CommandExecuted", { i });
    expect(seen.map((e) => e.id)).toEqual([1, 2, 3, 4, 5]);
    for (let i = 1; i < seen.length; i++) expect(seen[i]!.at).toBeGreaterThanOrEqual(seen[i - 1]!.at);
    expect(seen[0]!.at).toBeGreaterThan(1.6e18);
    expect(p.lastEventId).toBe(5);
  });

  it("subscribing while stopped fails with SSE_PRODUCER_NOT_RUNNING (before start and after stop); publishing then is a no-op", () => {
    const p = new SystemEventProducer();
    expect(p.running).toBe(false);
    expect(() => p.subscribe(() => undefined)).toThrow(expect.objectContaining({ code: "SSE_PRODUCER_NOT_RUNNING" }));
    expect(p.publish("CommandExecuted", {})).toBeUndefined();
    p.start();
    const closed: string[] = [];
    p.subscribe(() => undefined, { onClose: (r) => closed.push(r) });
    p.stop();
    expect(closed).toEqual(["stopped"]);
    expect(p.subscriberCount).toBe(0);
    expect(() => p.subscribe(() => undefined)).toThrow(expect.objectContaining({ code: "SSE_PRODUCER_NOT_RUNNING" }));
    p.start();
    expect(p.publish("CommandExecuted", {})!.id).toBe(1); // nothing published while stopped used an id
  });

  it("a subscriber resumes after lastEventId from the ring buffer, then gets live events, without gaps or duplicates", () => {
    const p = producer({ bufferSize: 100 });
    for (let i = 0; i < 10; i++) p.publish("CommandExecuted", { i });
    const seen: number[] = [];
    p.subscribe((e) => void seen.push(e.id), { lastEventId: 7 });
    expect(seen).toEqual([8, 9, 10]);
    p.publish("CommandExecuted", {});
    expect(seen).toEqual([8, 9, 10, 11]);
    expect(p.replay(9).map((e) => e.id)).toEqual([10, 11]);
    const fromZero: number[] = [];
    p.subscribe((e) => void fromZero.push(e.id), { lastEventId: 0 });
    expect(fromZero).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]);
    // the newest id replays nothing
    const none: number[] = [];
    p.subscribe((e) => void none.push(e.id), { lastEventId: 11 });
    expect(none).toEqual([]);
  });

  it("an id this producer never issued (from before a restart: ids begin at 1 again) replays the whole buffer", () => {
    const p = producer({ bufferSize: 100 });
    for (let i = 0; i < 3; i++) p.publish("CommandExecuted", { i });
    const seen: number[] = [];
    p.subscribe((e) => void seen.push(e.id), { lastEventId: 500 });
    expect(seen).toEqual([1, 2, 3]);
    expect(p.replay(500).map((e) => e.id)).toEqual([1, 2, 3]);
  });

  it("the ring buffer is bounded: only the newest bufferSize events can be resumed", () => {
    const p = producer({ bufferSize: 3 });
    for (let i = 0; i < 10; i++) p.publish("CommandExecuted", { i });
    const seen: number[] = [];
    p.subscribe((e) => void seen.push(e.id), { lastEventId: 2 });
    expect(seen).toEqual([8, 9, 10]);
    expect(p.replay().map((e) => e.id)).toEqual([8, 9, 10]);
  });

  it("a subscriber with a tenant sees only that tenant's events; one without sees all", () => {
    const p = producer();
    const a: number[] = [];
    const all: number[] = [];
    p.subscribe((e) => void a.push(e.id), { tenantUuid: "t-a" });
    p.subscribe((e) => void all.push(e.id));
    p.publish("CommandExecuted", {}, "t-a");
    p.publish("CommandExecuted", {}, "t-b");
    p.publish("CommandExecuted", {}); // system-wide
    p.publish("CommandExecuted", {}, "t-a");
    expect(a).toEqual([1, 4]);
    expect(all).toEqual([1, 2, 3, 4]);
    // the filter applies to the replay too
    const resumed: number[] = [];
    p.subscribe((e) => void resumed.push(e.id), { tenantUuid: "t-b", lastEventId: 0 });
    expect(resumed).toEqual([2]);
  });

  it("a slow subscriber is dropped (onClose 'slow', SubscriberDropped); others get every event in id order", async () => {
    const p = producer({ maxQueuePerSubscriber: 5 });
    const closed: string[] = [];
    const fast: SystemEvent[] = [];
    p.subscribe(never, { onClose: (r) => closed.push(r) });
    p.subscribe((e) => void fast.push(e));
    expect(p.subscriberCount).toBe(2);
    // 1 in delivery + 5 queued fit; the 7th overflows
    for (let i = 0; i < 6; i++) p.publish("CommandExecuted", { i });
    expect(closed).toEqual([]);
    p.publish("CommandExecuted", { i: 6 });
    expect(closed).toEqual(["slow"]);
    expect(p.subscriberCount).toBe(1);
    p.publish("CommandExecuted", { i: 7 });
    const ids = fast.map((e) => e.id);
    expect(ids).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9]);
    const dropped = fast.find((e) => e.kind === "SubscriberDropped")!;
    expect(dropped.data).toEqual({ reason: "slow", maxQueue: 5 });
    // the drop is announced after the event that caused it
    expect(fast[fast.indexOf(dropped) - 1]!.data).toEqual({ i: 6 });
  });

  it("an async subscriber within its queue bound gets every event, in order, one at a time", async () => {
    const p = producer({ maxQueuePerSubscriber: 10 });
    const seen: number[] = [];
    let inFlight = 0;
    let maxInFlight = 0;
    let release: (() => void) | undefined;
    p.subscribe(async (e) => {
      inFlight++;
      maxInFlight = Math.max(maxInFlight, inFlight);
      await new Promise<void>((r) => (release = r));
      seen.push(e.id);
      inFlight--;
    });
    for (let i = 0; i < 8; i++) p.publish("CommandExecuted", {});
    while (seen.length < 8) {
      release!();
      await new Promise((r) => setImmediate(r));
    }
    expect(seen).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
    expect(maxInFlight).toBe(1);
    expect(p.subscriberCount).toBe(1);
  });

  it("a subscriber dropped while replaying a long backlog is not left registered", () => {
    const p = producer({ bufferSize: 50, maxQueuePerSubscriber: 3 });
    for (let i = 0; i < 20; i++) p.publish("CommandExecuted", {});
    const closed: string[] = [];
    const off = p.subscribe(never, { lastEventId: 0, onClose: (r) => closed.push(r) });
    expect(closed).toEqual(["slow"]);
    expect(p.subscriberCount).toBe(0);
    off(); // harmless
    p.publish("CommandExecuted", {});
    expect(p.subscriberCount).toBe(0);
  });

  it("unsubscribe stops delivery; a throwing listener does not disturb others", () => {
    const p = producer();
    const seen: number[] = [];
    p.subscribe(() => {
      throw new Error("listener bug");
    });
    const off = p.subscribe((e) => void seen.push(e.id));
    p.publish("CommandExecuted", {});
    off();
    p.publish("CommandExecuted", {});
    expect(seen).toEqual([1]);
    expect(p.subscriberCount).toBe(1);
  });

  it("rejects a bad bufferSize", () => {
    expect(() => new SystemEventProducer({ bufferSize: 0 })).toThrow(expect.objectContaining({ code: "INVALID_REQUEST" }));
  });
});

describe("facade lifecycle", () => {
  it("createFacade({ systemEvents: true }) starts the producer in start() and stop() stops it; otherwise it stays off", async () => {
    const on = createFacade({ systemEvents: true });
    expect(on.runtime.systemEvents.running).toBe(false);
    await on.start();
    expect(on.runtime.systemEvents.running).toBe(true);
    const closed: string[] = [];
    on.runtime.systemEvents.subscribe(() => undefined, { onClose: (r) => closed.push(r) });
    await on.stop();
    expect(on.runtime.systemEvents.running).toBe(false);
    expect(closed).toEqual(["stopped"]);

    const off = createFacade();
    await off.start();
    try {
      off.runtime.systemEvents.subscribe(() => undefined);
      expect.unreachable();
    } catch (e) {
      expect(isMnemeError(e, "SSE_PRODUCER_NOT_RUNNING")).toBe(true);
    }
    off.runtime.systemEvents.start();
    const seen: SystemEvent[] = [];
    off.runtime.systemEvents.subscribe((e) => void seen.push(e));
    await off.dispatch({ domain: "Runtime", name: "ControlEventHandler" }, { action: "stop", eventHandlerName: "x" }, { reqCtx: ADMIN }).catch(() => undefined);
    expect(seen.map((e) => e.kind)).toEqual(["CommandFailed"]);
    await off.stop();
  });
});

describe("every kind the facade publishes", () => {
  it("CommandExecuted and EventsAppended for a command, tagged with the sender's tenant", async () => {
    rig = await startRig();
    await rig.place("o1");
    const ce = ofKind(rig.events, "CommandExecuted");
    expect(ce).toHaveLength(1);
    expect(ce[0]!.tenantUuid).toBe("tenant-a");
    expect(Object.keys(ce[0]!.data).sort()).toEqual(["commandUuid", "domain", "durationMicros", "events", "name"]);
    expect(ce[0]!.data).toMatchObject({ domain: "Shop", name: "PlaceOrder", events: 1 });
    const ea = ofKind(rig.events, "EventsAppended");
    expect(ea).toHaveLength(1);
    expect(ea[0]!.tenantUuid).toBe("tenant-a");
    expect(ea[0]!.data.commandUuid).toBe(ce[0]!.data.commandUuid);
    const [appended] = ea[0]!.data.events as Record<string, unknown>[];
    expect(Object.keys(appended!).sort()).toEqual(["aggregateUuid", "eventUuid", "path", "position", "version"]);
    expect(appended).toMatchObject({ path: "Shop.OrderPlaced", aggregateUuid: "o1", version: 1, position: 1 });
    // EventsAppended only when something was appended
    await rig.facade.dispatch({ domain: "Billing", name: "Invoice" }, { orderUuid: "o1" }, { reqCtx: USER });
    expect(ofKind(rig.events, "CommandExecuted")).toHaveLength(2);
    expect(ofKind(rig.events, "EventsAppended")).toHaveLength(1);
  });

  it("CommandFailed for a denied and for a failing command, with status and code", async () => {
    rig = await startRig();
    await rig.facade.dispatch({ domain: "Shop", name: "PlaceOrder" }, { orderUuid: "o1", item: "x", qty: 1 }, { reqCtx: {} }).catch(() => undefined);
    await rig.facade.dispatch({ domain: "Shop", name: "PlaceOrder" }, { orderUuid: "o1", item: "x", qty: 0 }, { reqCtx: USER }).catch(() => undefined);
    const cf = ofKind(rig.events, "CommandFailed");
    expect(cf.map((e) => [e.data.status, e.data.code])).toEqual([["denied", "PERMISSION_DENIED"], ["failed", "VALIDATION_FAILED"]]);
    expect(Object.keys(cf[1]!.data).sort()).toEqual(["code", "commandUuid", "domain", "error", "name", "status"]);
    expect(cf[0]!.tenantUuid).toBeUndefined();
    expect(cf[1]!.tenantUuid).toBe("tenant-a");
  });

  it("a tenant's subscriber through the facade sees its own commands only", async () => {
    rig = await startRig();
    const mine: SystemEvent[] = [];
    rig.facade.runtime.systemEvents.subscribe((e) => void mine.push(e), { tenantUuid: "tenant-a" });
    await rig.place("o1", "book", USER);
    await rig.place("o2", "book", OTHER_TENANT_USER);
    expect(mine.map((e) => e.kind)).toEqual(["CommandExecuted", "EventsAppended"]);
    expect(mine.every((e) => e.tenantUuid === "tenant-a")).toBe(true);
    expect(ofKind(rig.events, "CommandExecuted").map((e) => e.tenantUuid)).toEqual(["tenant-a", "tenant-b"]);
  });

  it("EventHandlerStateChanged on stop/start", async () => {
    rig = await startRig();
    await rig.facade.runtime.controlEventHandler({ action: "stop", eventHandlerName: "Mailer" });
    const sc = ofKind(rig.events, "EventHandlerStateChanged", "Mailer");
    expect(sc.at(-1)!.data).toEqual({ eventHandlerName: "Mailer", from: "running", to: "stopped", restorationState: "idle" });
  });

  it("RestoreStarted, RestoreProgress (progressEvery 10) and RestoreCompleted", async () => {
    rig = await startRig({ delivery: { progressEvery: 10, restoreBatchSize: 5 } });
    for (let i = 0; i < 25; i++) await rig.place(`o${i}`);
    rig.events.length = 0;
    await rig.facade.runtime.controlEventHandler({ action: "restore", eventHandlerName: "OrderList", restoreFromZero: true });
    const kinds = rig.events.filter((e) => e.data.eventHandlerName === "OrderList").map((e) => e.kind);
    expect(kinds).toEqual(["RestoreStarted", "RestoreProgress", "RestoreProgress", "RestoreCompleted"]);
    expect(ofKind(rig.events, "RestoreStarted")[0]!.data).toEqual({ eventHandlerName: "OrderList", fromZero: true, afterPosition: 0 });
    const progress = ofKind(rig.events, "RestoreProgress").map((e) => e.data);
    expect(progress).toEqual([
      { eventHandlerName: "OrderList", eventsReplayed: 10, position: 10, head: 25 },
      { eventHandlerName: "OrderList", eventsReplayed: 20, position: 20, head: 25 },
    ]);
    const done = ofKind(rig.events, "RestoreCompleted")[0]!.data;
    expect(Object.keys(done).sort()).toEqual(["afterPosition", "durationMs", "eventHandlerName", "eventsCaught", "eventsPerSecond", "eventsReplayed", "toPosition"]);
    expect(done).toMatchObject({ eventHandlerName: "OrderList", eventsReplayed: 25, eventsCaught: 0, afterPosition: 0, toPosition: 25 });
  });

  it("RestoreFailed (failed and cancelled) and HandlerFailed", async () => {
    rig = await startRig();
    await rig.place("o1", "bomb");
    rig.orders.failOnItem = "bomb";
    await rig.facade.runtime.controlEventHandler({ action: "restore", eventHandlerName: "OrderList", restoreFromZero: true }).catch(() => undefined);
    const rf = ofKind(rig.events, "RestoreFailed", "OrderList");
    expect(rf).toHaveLength(1);
    expect(rf[0]!.data).toEqual({ eventHandlerName: "OrderList", cancelled: false, error: "cannot list bomb", position: 0 });
    const hf = ofKind(rig.events, "HandlerFailed", "OrderList");
    expect(hf).toHaveLength(1);
    expect(Object.keys(hf[0]!.data).sort()).toEqual(["error", "eventHandlerName", "eventPath", "eventUuid", "position"]);
    expect(hf[0]!.tenantUuid).toBe("tenant-a");

    rig.orders.failOnItem = undefined;
    rig.orders.hold();
    const restoring = rig.facade.runtime.controlEventHandler({ action: "restore", eventHandlerName: "OrderList", restoreFromZero: true });
    restoring.catch(() => undefined);
    await rig.orders.entered;
    const stopping = rig.facade.runtime.controlEventHandler({ action: "stop", eventHandlerName: "OrderList" });
    rig.orders.release();
    await stopping;
    const cancelled = ofKind(rig.events, "RestoreFailed", "OrderList").at(-1)!;
    expect(cancelled.data).toEqual({ eventHandlerName: "OrderList", cancelled: true, position: expect.any(Number) });
  });

  it("StoreEntryChanged for store updates and deletes", async () => {
    rig = await startRig();
    registerStorePermissions(rig.facade);
    await rig.facade.runtime.stores.update("cache", ADMIN, "k", { value: 1 });
    await rig.facade.runtime.stores.delete("cache", ADMIN, "k");
    const sc = ofKind(rig.events, "StoreEntryChanged").map((e) => e.data);
    expect(sc).toEqual([
      { store: "cache", action: "Update", key: "k", senderAccountUuid: "acc-admin", senderIdentityUuid: "idn-admin" },
      { store: "cache", action: "Delete", key: "k", senderAccountUuid: "acc-admin", senderIdentityUuid: "idn-admin" },
    ]);
  });

  it("SubscriberDropped when a facade subscriber is too slow", async () => {
    rig = await startRig({ systemEvents: { maxQueuePerSubscriber: 2 } });
    rig.facade.runtime.systemEvents.subscribe(never);
    for (let i = 0; i < 3; i++) await rig.place(`o${i}`);
    expect(ofKind(rig.events, "SubscriberDropped")).toHaveLength(1);
    // the fast recorder saw strictly increasing ids throughout
    const ids = rig.events.map((e) => e.id);
    expect(ids).toEqual([...ids].sort((a, b) => a - b));
    expect(new Set(ids).size).toBe(ids.length);
  });

  it("covers every SystemEventKind", async () => {
    // a compile-time list: adding a kind without a test here fails the type check of this array
    const kinds: Record<SystemEvent["kind"], true> = {
      CommandExecuted: true, CommandFailed: true, EventsAppended: true, EventHandlerStateChanged: true, RestoreStarted: true,
      RestoreProgress: true, RestoreCompleted: true, RestoreFailed: true, HandlerFailed: true, StoreEntryChanged: true, SubscriberDropped: true,
    };
    expect(Object.keys(kinds)).toHaveLength(11);
  });
});
