/**
 * System events: the producer (ids, ring buffer resume, tenant filter, slow
 * subscribers, lifecycle) and every kind the facade publishes, with the
 * payload fields docs/runtime.md lists.
 */
import { afterEach, describe, expect, it } from "vitest";
import { type SystemEvent, createFacade, isMnemeError, registerStorePermissions } from "mneme";
import { type SystemEventGap, SystemEventProducer } from "mneme/runtime";
import { ADMIN, OTHER_TENANT_USER, USER, ofKind, type Rig, startRig } from "./runtime-fixture.js";

/** The sequence part of an id (its low 22 bits): 1, 2, 3 ... within one epoch. */
const seq = (id: number): number => id % 2 ** 22;
/** The id of a producer's n-th event (no epoch rollover in these tests). */
const at = (p: SystemEventProducer, n: number): number => p.epoch * 2 ** 22 + n;

let rig: Rig | undefined;
afterEach(async () => {
  if (rig !== undefined) {
    rig.orders.release();
    await rig.facade.stop();
  }
  rig = undefined;
});

const never = () => new Promise<void>(() => undefined);

function producer(
  opts: ConstructorParameters<typeof SystemEventProducer>[0] = {},
  ids?: ConstructorParameters<typeof SystemEventProducer>[1],
): SystemEventProducer {
  const p = new SystemEventProducer(opts, ids);
  p.start();
  return p;
}

/** Subscribes from `lastEventId`, recording the gap notice (if any) and the events in the order they came. */
function resume(
  p: SystemEventProducer,
  lastEventId: number,
): { log: (SystemEventGap | number)[]; ids: number[]; gap: SystemEventGap | undefined } {
  const log: (SystemEventGap | number)[] = [];
  p.subscribe((e) => void log.push(e.id), { lastEventId, onGap: (g) => void log.push(g) });
  const gaps = log.filter((x): x is SystemEventGap => typeof x !== "number");
  expect(gaps.length).toBeLessThanOrEqual(1);
  if (gaps.length === 1) expect(log[0]).toBe(gaps[0]); // the notice comes before any event
  return { log, ids: log.filter((x): x is number => typeof x === "number"), gap: gaps[0] };
}

describe("producer", () => {
  it("ids are safe integers: the producer's epoch, then a sequence from 1; `at` is ns and does not go back", () => {
    const p = producer();
    const seen: SystemEvent[] = [];
    p.subscribe((e) => void seen.push(e));
    for (let i = 0; i < 5; i++) p.publish("CommandExecuted", { i });
    expect(seen.map((e) => seq(e.id))).toEqual([1, 2, 3, 4, 5]);
    for (const e of seen) {
      expect(Number.isSafeInteger(e.id)).toBe(true);
      expect(Math.floor(e.id / 2 ** 22)).toBe(p.epoch);
    }
    for (let i = 1; i < seen.length; i++) expect(seen[i]!.at).toBeGreaterThanOrEqual(seen[i - 1]!.at);
    expect(seen[0]!.at).toBeGreaterThan(1.6e18);
    expect(seq(p.lastEventId)).toBe(5);
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
    expect(seq(p.publish("CommandExecuted", {})!.id)).toBe(1); // nothing published while stopped used an id
  });

  it("a subscriber resumes after lastEventId from the ring buffer, then gets live events, without gaps or duplicates", () => {
    const p = producer({ bufferSize: 100 });
    for (let i = 0; i < 10; i++) p.publish("CommandExecuted", { i });
    const seen: number[] = [];
    p.subscribe((e) => void seen.push(seq(e.id)), { lastEventId: at(p, 7) });
    expect(seen).toEqual([8, 9, 10]);
    p.publish("CommandExecuted", {});
    expect(seen).toEqual([8, 9, 10, 11]);
    expect(p.replay(at(p, 9)).map((e) => seq(e.id))).toEqual([10, 11]);
    const fromZero: number[] = [];
    p.subscribe((e) => void fromZero.push(seq(e.id)), { lastEventId: 0 });
    expect(fromZero).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]);
    // the newest id replays nothing
    const none: number[] = [];
    p.subscribe((e) => void none.push(seq(e.id)), { lastEventId: at(p, 11) });
    expect(none).toEqual([]);
  });

  it('after a restart (a new producer) an id of the previous run is a gap, "unknown-epoch", then everything buffered follows', () => {
    // The defect: ids began at 1 in every process, so an id of the previous run looked like one of this run and was continued.
    const before = producer();
    for (let i = 0; i < 82; i++) before.publish("CommandExecuted", { i });
    const lastSeen = before.lastEventId;
    before.stop();
    const after = producer();
    for (let i = 0; i < 114; i++) after.publish("CommandExecuted", { i });
    expect(after.epoch).not.toBe(before.epoch);
    const r = resume(after, lastSeen);
    expect(r.gap).toEqual({ lastEventId: lastSeen, reason: "unknown-epoch", continuesAfter: at(after, 0) });
    expect(r.ids.map(seq)).toEqual(Array.from({ length: 114 }, (_, i) => i + 1));
    expect(after.gapFor(lastSeen)?.reason).toBe("unknown-epoch");
    expect(after.replay(lastSeen)).toHaveLength(114);
    // Resuming from the gap's id continues exactly: no second notice.
    expect(resume(after, r.gap!.continuesAfter)).toMatchObject({ gap: undefined, ids: r.ids });
  });

  it('an id of another instance running at the same time is a gap, "unknown-epoch", whichever is ahead', () => {
    const a = producer();
    const b = producer();
    expect(a.epoch).not.toBe(b.epoch);
    for (let i = 0; i < 5; i++) a.publish("CommandExecuted", { i });
    for (let i = 0; i < 3; i++) b.publish("CommandExecuted", { i });
    for (const [from, to] of [
      [a, b],
      [b, a],
    ] as const) {
      for (const n of [1, 3]) {
        const r = resume(to, at(from, n));
        expect(r.gap?.reason).toBe("unknown-epoch");
        expect(r.ids).toEqual(to.replay(0).map((e) => e.id));
      }
    }
  });

  it('an id older than the ring buffer is a gap, "buffer-overflow"; the oldest id still continuable is the last one evicted', () => {
    const p = producer({ bufferSize: 3 });
    for (let i = 0; i < 10; i++) p.publish("CommandExecuted", { i });
    for (const n of [1, 2, 6]) {
      const r = resume(p, at(p, n));
      expect(r.gap).toEqual({ lastEventId: at(p, n), reason: "buffer-overflow", continuesAfter: at(p, 7) });
      expect(r.ids.map(seq)).toEqual([8, 9, 10]);
    }
    // 7 was evicted last: whoever saw it misses nothing.
    expect(resume(p, at(p, 7))).toMatchObject({ gap: undefined, ids: [at(p, 8), at(p, 9), at(p, 10)] });
    expect(p.replay().map((e) => seq(e.id))).toEqual([8, 9, 10]);
    // 0 means "from the first event": a gap once anything has left the buffer.
    expect(resume(p, 0).gap).toEqual({ lastEventId: 0, reason: "buffer-overflow", continuesAfter: at(p, 7) });
    const fresh = producer({ bufferSize: 3 });
    fresh.publish("CommandExecuted", {});
    expect(resume(fresh, 0)).toMatchObject({ gap: undefined, ids: [at(fresh, 1)] });
  });

  it('an id of this epoch that was never issued is a gap, "unknown-id"; a bad id is INVALID_REQUEST', () => {
    const p = producer();
    for (let i = 0; i < 3; i++) p.publish("CommandExecuted", { i });
    const r = resume(p, at(p, 500));
    expect(r.gap?.reason).toBe("unknown-id");
    expect(r.ids.map(seq)).toEqual([1, 2, 3]);
    for (const bad of [-1, 1.5, Number.NaN, 2 ** 53]) {
      expect(() => p.subscribe(() => undefined, { lastEventId: bad })).toThrow(expect.objectContaining({ code: "INVALID_REQUEST" }));
    }
  });

  it("the origin (lastEventId before any event) resumes exactly; a listener-free subscriber still gets onGap", () => {
    const p = producer();
    const origin = p.lastEventId;
    expect(origin).toBe(at(p, 0));
    p.publish("CommandExecuted", {});
    p.publish("CommandExecuted", {});
    expect(resume(p, origin)).toMatchObject({ gap: undefined, ids: [at(p, 1), at(p, 2)] });
    // A throwing onGap is ignored like a throwing listener.
    const seen: number[] = [];
    p.subscribe((e) => void seen.push(seq(e.id)), {
      lastEventId: 7,
      onGap: () => {
        throw new Error("bug");
      },
    });
    expect(seen).toEqual([1, 2]);
  });

  it("when an epoch's sequence is used up the next epoch follows: ids keep increasing and a resume across it is exact", () => {
    const p = producer({ bufferSize: 10 }, { sequenceBits: 2 }); // 3 ids per epoch
    const first = p.epoch;
    const ids: number[] = [];
    for (let i = 0; i < 7; i++) ids.push(p.publish("CommandExecuted", { i })!.id);
    expect(ids).toEqual([...ids].sort((x, y) => x - y));
    expect(ids.map((id) => [Math.floor(id / 4), id % 4])).toEqual([
      [first, 1],
      [first, 2],
      [first, 3],
      [first + 1, 1],
      [first + 1, 2],
      [first + 1, 3],
      [first + 2, 1],
    ]);
    expect(resume(p, ids[2]!)).toMatchObject({ gap: undefined, ids: ids.slice(3) });
    expect(resume(p, 0)).toMatchObject({ gap: undefined, ids });
    expect(resume(p, (first + 3) * 4 + 1).gap?.reason).toBe("unknown-epoch");
  });

  it("a subscriber with a tenant sees only that tenant's events; one without sees all", () => {
    const p = producer();
    const a: number[] = [];
    const all: number[] = [];
    p.subscribe((e) => void a.push(seq(e.id)), { tenantUuid: "t-a" });
    p.subscribe((e) => void all.push(seq(e.id)));
    p.publish("CommandExecuted", {}, "t-a");
    p.publish("CommandExecuted", {}, "t-b");
    p.publish("CommandExecuted", {}); // system-wide
    p.publish("CommandExecuted", {}, "t-a");
    expect(a).toEqual([1, 4]);
    expect(all).toEqual([1, 2, 3, 4]);
    // the filter applies to the replay too
    const resumed: number[] = [];
    p.subscribe((e) => void resumed.push(seq(e.id)), { tenantUuid: "t-b", lastEventId: 0 });
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
    const ids = fast.map((e) => seq(e.id));
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
      seen.push(seq(e.id));
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
    const off = p.subscribe((e) => void seen.push(seq(e.id)));
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
    await off
      .dispatch({ domain: "Runtime", name: "ControlEventHandler" }, { action: "stop", eventHandlerName: "x" }, { reqCtx: ADMIN })
      .catch(() => undefined);
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
    await rig.facade
      .dispatch({ domain: "Shop", name: "PlaceOrder" }, { orderUuid: "o1", item: "x", qty: 1 }, { reqCtx: {} })
      .catch(() => undefined);
    await rig.facade
      .dispatch({ domain: "Shop", name: "PlaceOrder" }, { orderUuid: "o1", item: "x", qty: 0 }, { reqCtx: USER })
      .catch(() => undefined);
    const cf = ofKind(rig.events, "CommandFailed");
    expect(cf.map((e) => [e.data.status, e.data.code])).toEqual([
      ["denied", "PERMISSION_DENIED"],
      ["failed", "VALIDATION_FAILED"],
    ]);
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
    expect(Object.keys(done).sort()).toEqual([
      "afterPosition",
      "durationMs",
      "eventHandlerName",
      "eventsCaught",
      "eventsPerSecond",
      "eventsReplayed",
      "toPosition",
    ]);
    expect(done).toMatchObject({ eventHandlerName: "OrderList", eventsReplayed: 25, eventsCaught: 0, afterPosition: 0, toPosition: 25 });
  });

  it("RestoreFailed (failed and cancelled) and HandlerFailed", async () => {
    rig = await startRig();
    await rig.place("o1", "bomb");
    rig.orders.failOnItem = "bomb";
    await rig.facade.runtime
      .controlEventHandler({ action: "restore", eventHandlerName: "OrderList", restoreFromZero: true })
      .catch(() => undefined);
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
    const ids = rig.events.map((e) => seq(e.id));
    expect(ids).toEqual([...ids].sort((a, b) => a - b));
    expect(new Set(ids).size).toBe(ids.length);
  });

  it("covers every SystemEventKind", async () => {
    // a compile-time list: adding a kind without a test here fails the type check of this array
    const kinds: Record<SystemEvent["kind"], true> = {
      CommandExecuted: true,
      CommandFailed: true,
      EventsAppended: true,
      EventHandlerStateChanged: true,
      RestoreStarted: true,
      RestoreProgress: true,
      RestoreCompleted: true,
      RestoreFailed: true,
      HandlerFailed: true,
      StoreEntryChanged: true,
      SubscriberDropped: true,
      HandlersInStandby: true, // test/sqlite/sqlite-instances.int.test.ts
    };
    expect(Object.keys(kinds)).toHaveLength(12);
  });
});
