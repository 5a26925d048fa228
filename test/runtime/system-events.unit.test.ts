/**
 * The system-event producer: lifecycle, ids, resume from the ring buffer,
 * tenant filter, slow and throwing subscribers, and what dispatch publishes.
 */
import { afterEach, describe, expect, it, vi } from "vitest";
import { createFacade, defineDomain, type Facade, isMnemeError, type RequestContext, type SystemEvent } from "mneme";
import { SystemEventProducer } from "mneme/runtime";

/** The sequence part of an id (its low 22 bits): 1, 2, 3 ... within one epoch. */
const seq = (id: number): number => id % 2 ** 22;
/** The id of a producer's n-th event (no epoch rollover in these tests). */
const at = (p: SystemEventProducer, n: number): number => p.epoch * 2 ** 22 + n;

const admin: RequestContext = {
  senderAccountUuid: "acc-1",
  senderSessionUuid: "ses-1",
  senderIdentityUuid: "idn-1",
  senderTenantUuid: "ten-1",
};

function subscribeError(p: SystemEventProducer): unknown {
  try {
    p.subscribe(() => undefined);
  } catch (e) {
    return e;
  }
  return undefined;
}

async function ticks(n: number): Promise<void> {
  for (let i = 0; i < n; i++) await new Promise((r) => setImmediate(r));
}

describe("SystemEventProducer lifecycle", () => {
  it("subscribe throws SSE_PRODUCER_NOT_RUNNING while stopped (before start and after stop)", () => {
    const p = new SystemEventProducer();
    expect(p.running).toBe(false);
    expect(isMnemeError(subscribeError(p), "SSE_PRODUCER_NOT_RUNNING")).toBe(true);
    p.start();
    expect(p.running).toBe(true);
    expect(subscribeError(p)).toBeUndefined();
    p.stop();
    expect(isMnemeError(subscribeError(p), "SSE_PRODUCER_NOT_RUNNING")).toBe(true);
  });

  it("publish while stopped is dropped (no id used, nothing buffered)", () => {
    const p = new SystemEventProducer();
    expect(p.publish("CommandExecuted", {})).toBeUndefined();
    p.start();
    expect(seq(p.publish("CommandExecuted", {})?.id ?? 0)).toBe(1);
    p.stop();
    expect(p.publish("CommandExecuted", {})).toBeUndefined();
    p.start();
    expect(seq(p.publish("CommandExecuted", {})?.id ?? 0)).toBe(2);
    expect(p.replay(0).map((e) => seq(e.id))).toEqual([1, 2]);
  });

  it('stop closes every subscriber with onClose("stopped") and they get nothing more; stop is idempotent', () => {
    const p = new SystemEventProducer();
    p.start();
    const got: number[] = [];
    const onClose = vi.fn();
    p.subscribe((e) => void got.push(seq(e.id)), { onClose });
    p.publish("CommandExecuted", {});
    p.stop();
    p.stop();
    expect(onClose).toHaveBeenCalledTimes(1);
    expect(onClose).toHaveBeenCalledWith("stopped");
    expect(p.subscriberCount).toBe(0);
    p.start();
    p.publish("CommandExecuted", {});
    expect(got).toEqual([1]);
  });

  it("unsubscribe stops delivery without onClose", () => {
    const p = new SystemEventProducer();
    p.start();
    const got: number[] = [];
    const onClose = vi.fn();
    const off = p.subscribe((e) => void got.push(seq(e.id)), { onClose });
    p.publish("CommandExecuted", {});
    off();
    off();
    p.publish("CommandExecuted", {});
    expect(got).toEqual([1]);
    expect(onClose).not.toHaveBeenCalled();
    expect(p.subscriberCount).toBe(0);
  });

  it("rejects a bad buffer size", () => {
    for (const bufferSize of [0, -1, 1.5]) {
      expect(() => new SystemEventProducer({ bufferSize })).toThrow(expect.objectContaining({ code: "INVALID_REQUEST" }));
    }
  });
});

describe("ids, resume and the ring buffer", () => {
  it("events have monotonic ids, ns timestamps, kind, data and the tenant when given", () => {
    const p = new SystemEventProducer();
    p.start();
    const got: SystemEvent[] = [];
    p.subscribe((e) => void got.push(e));
    const before = Date.now() * 1e6;
    p.publish("CommandExecuted", { a: 1 }, "t1");
    p.publish("EventsAppended", { b: 2 });
    p.publish("CommandFailed", { c: 3 }, "");
    expect(got.map((e) => seq(e.id))).toEqual([1, 2, 3]);
    expect(got[0]).toMatchObject({ kind: "CommandExecuted", data: { a: 1 }, tenantUuid: "t1" });
    expect("tenantUuid" in got[1]!).toBe(false);
    expect("tenantUuid" in got[2]!).toBe(false);
    for (const e of got) {
      expect(Number.isInteger(e.at)).toBe(true);
      expect(e.at).toBeGreaterThan(before - 1e9);
    }
    expect(got[1]!.at).toBeGreaterThan(got[0]!.at);
    expect(seq(p.lastEventId)).toBe(3);
  });

  it("resumes after lastEventId from the buffer, then continues live without gaps or duplicates", () => {
    const p = new SystemEventProducer();
    p.start();
    for (let i = 0; i < 5; i++) p.publish("CommandExecuted", { i });
    const got: number[] = [];
    p.subscribe((e) => void got.push(seq(e.id)), { lastEventId: at(p, 2) });
    expect(got).toEqual([3, 4, 5]);
    p.publish("CommandExecuted", {});
    expect(got).toEqual([3, 4, 5, 6]);
    const fromStart: number[] = [];
    p.subscribe((e) => void fromStart.push(seq(e.id)), { lastEventId: 0 });
    expect(fromStart).toEqual([1, 2, 3, 4, 5, 6]);
    // without lastEventId: live only
    const live: number[] = [];
    p.subscribe((e) => void live.push(seq(e.id)));
    expect(live).toEqual([]);
  });

  it("the ring is bounded: only the newest bufferSize events can be resumed", () => {
    const p = new SystemEventProducer({ bufferSize: 3 });
    p.start();
    for (let i = 0; i < 10; i++) p.publish("CommandExecuted", { i });
    expect(p.replay(0).map((e) => seq(e.id))).toEqual([8, 9, 10]);
    const got: (number | string)[] = [];
    p.subscribe((e) => void got.push(seq(e.id)), { lastEventId: at(p, 1), onGap: (g) => void got.push(g.reason) });
    expect(got).toEqual(["buffer-overflow", 8, 9, 10]);
    expect(p.replay(at(p, 9)).map((e) => seq(e.id))).toEqual([10]);
    expect(p.replay(at(p, 10))).toEqual([]);
  });

  it("the tenant filter shows only that tenant's events (system-wide ones excluded), also on resume", () => {
    const p = new SystemEventProducer();
    p.start();
    p.publish("CommandExecuted", {}, "t1"); // 1
    p.publish("CommandExecuted", {}, "t2"); // 2
    p.publish("CommandExecuted", {}); // 3, system-wide
    const t1: number[] = [];
    const all: number[] = [];
    p.subscribe((e) => void t1.push(seq(e.id)), { tenantUuid: "t1", lastEventId: 0 });
    p.subscribe((e) => void all.push(seq(e.id)), { lastEventId: 0 });
    p.publish("CommandExecuted", {}, "t1"); // 4
    p.publish("CommandExecuted", {}, "t2"); // 5
    p.publish("SubscriberDropped", {}); // 6
    expect(t1).toEqual([1, 4]);
    expect(all).toEqual([1, 2, 3, 4, 5, 6]);
  });
});

describe("subscribers that misbehave", () => {
  it("a throwing listener does not break delivery to the others, nor its own later events", () => {
    const p = new SystemEventProducer();
    p.start();
    const a: number[] = [];
    const b: number[] = [];
    let calls = 0;
    p.subscribe((e) => void a.push(seq(e.id)));
    p.subscribe(() => {
      calls++;
      throw new Error("listener bug");
    });
    p.subscribe(async () => {
      throw new Error("async listener bug");
    });
    p.subscribe((e) => void b.push(seq(e.id)));
    expect(() => {
      p.publish("CommandExecuted", {});
      p.publish("CommandExecuted", {});
    }).not.toThrow();
    expect(a).toEqual([1, 2]);
    expect(b).toEqual([1, 2]);
    expect(calls).toBe(2);
  });

  it("a throwing onClose does not affect the producer", () => {
    const p = new SystemEventProducer();
    p.start();
    p.subscribe(() => undefined, {
      onClose: () => {
        throw new Error("cleanup bug");
      },
    });
    expect(() => p.stop()).not.toThrow();
    expect(p.running).toBe(false);
  });

  it('a slow async subscriber is dropped with onClose("slow") while a fast one keeps receiving everything in order', async () => {
    const p = new SystemEventProducer({ maxQueuePerSubscriber: 5 });
    p.start();
    const slowGot: number[] = [];
    const fastGot: number[] = [];
    const onClose = vi.fn();
    let unblock!: () => void;
    const blocked = new Promise<void>((r) => (unblock = r));
    // the slow one subscribes first, so a drop happens in the middle of delivering one event
    p.subscribe(
      async (e) => {
        slowGot.push(seq(e.id));
        await blocked;
      },
      { onClose },
    );
    p.subscribe(async (e) => {
      fastGot.push(seq(e.id));
    });
    for (let i = 0; i < 20; i++) {
      p.publish("CommandExecuted", { i });
      await ticks(1);
    }
    expect(onClose).toHaveBeenCalledTimes(1);
    expect(onClose).toHaveBeenCalledWith("slow");
    expect(p.subscriberCount).toBe(1);
    unblock();
    await ticks(5);
    // the slow one got the first event, queued 5, and was dropped with the 7th: nothing after
    expect(slowGot).toEqual([1]);
    // the fast one got every command event and the SubscriberDropped notice, in id order
    expect(fastGot).toEqual([...fastGot].sort((x, y) => x - y));
    expect(fastGot.length).toBe(21);
    const dropped = p.replay(0).filter((e) => e.kind === "SubscriberDropped");
    expect(dropped).toHaveLength(1);
    expect(dropped[0]!.data).toMatchObject({ reason: "slow" });
  });

  it("events published by a listener while an event is being delivered reach every subscriber in id order", () => {
    const p = new SystemEventProducer();
    p.start();
    const first: number[] = [];
    const second: number[] = [];
    p.subscribe((e) => {
      first.push(seq(e.id));
      if (seq(e.id) === 1) p.publish("HandlerFailed", { nested: true });
    });
    p.subscribe((e) => void second.push(seq(e.id)));
    p.publish("CommandExecuted", {});
    expect(first).toEqual([1, 2]);
    expect(second).toEqual([1, 2]);
  });

  it("an async subscriber gets queued events in order once it catches up", async () => {
    const p = new SystemEventProducer({ maxQueuePerSubscriber: 100 });
    p.start();
    const got: number[] = [];
    p.subscribe(async (e) => {
      await ticks(1);
      got.push(seq(e.id));
    });
    for (let i = 0; i < 10; i++) p.publish("CommandExecuted", {});
    await ticks(30);
    expect(got).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
  });
});

describe("what dispatch publishes", () => {
  let facade: Facade | undefined;
  afterEach(async () => {
    await facade?.stop();
    facade = undefined;
  });

  async function setup(systemEvents: boolean) {
    const Shop = defineDomain("Shop");
    const Sold = Shop.event<{ n: number }>("Sold");
    const Sell = Shop.command<{ itemUuid: string; fail?: boolean }>("Sell");
    Shop.handleCommand(Sell, (_c, _m, p) => {
      if (p.fail) throw new Error("out of stock");
      return [Sold.create(p.itemUuid, { n: 1 }), Sold.create(p.itemUuid, { n: 2 })];
    });
    facade = createFacade({ systemEvents }).registerDomain(Shop);
    await facade.start();
    return { f: facade, Sell };
  }

  it("CommandExecuted and EventsAppended on success, CommandFailed on failure, with the tenant", async () => {
    const { f, Sell } = await setup(true);
    const got: SystemEvent[] = [];
    const t2: SystemEvent[] = [];
    f.runtime.systemEvents.subscribe((e) => void got.push(e));
    f.runtime.systemEvents.subscribe((e) => void t2.push(e), { tenantUuid: "other" });
    const r = await f.dispatch(Sell, { itemUuid: "i" }, { reqCtx: admin });
    await expect(f.dispatch(Sell, { itemUuid: "i", fail: true }, { reqCtx: admin })).rejects.toMatchObject({ code: "HANDLER_FAILED" });
    await expect(f.dispatch(Sell, { itemUuid: "i" }, { reqCtx: {} })).rejects.toMatchObject({ code: "PERMISSION_DENIED" });
    const mine = got.filter((e) => ["CommandExecuted", "EventsAppended", "CommandFailed"].includes(e.kind));
    expect(mine.map((e) => e.kind)).toEqual(["CommandExecuted", "EventsAppended", "CommandFailed", "CommandFailed"]);
    expect(mine[0]).toMatchObject({ tenantUuid: "ten-1", data: { commandUuid: r.commandUuid, domain: "Shop", name: "Sell", events: 2 } });
    expect(mine[1]).toMatchObject({ tenantUuid: "ten-1", data: { commandUuid: r.commandUuid } });
    expect(
      (mine[1]!.data["events"] as { path: string; version: number; position: number }[]).map((e) => [e.path, e.version, e.position]),
    ).toEqual([
      ["Shop.Sold", 1, 1],
      ["Shop.Sold", 2, 2],
    ]);
    expect(mine[2]).toMatchObject({ tenantUuid: "ten-1", data: { status: "failed", code: "HANDLER_FAILED" } });
    expect(mine[3]).toMatchObject({ data: { status: "denied", code: "PERMISSION_DENIED" } });
    expect("tenantUuid" in mine[3]!).toBe(false);
    const ids = got.map((e) => seq(e.id));
    expect(ids).toEqual([...ids].sort((a, b) => a - b));
    expect(t2).toEqual([]);
  });

  it("without systemEvents: true the producer is not started, and runtime.systemEvents.start() starts it", async () => {
    const { f, Sell } = await setup(false);
    expect(f.runtime.systemEvents.running).toBe(false);
    expect(isMnemeError(subscribeError(f.runtime.systemEvents), "SSE_PRODUCER_NOT_RUNNING")).toBe(true);
    await f.dispatch(Sell, { itemUuid: "i" }, { reqCtx: admin });
    f.runtime.systemEvents.start();
    const got: string[] = [];
    f.runtime.systemEvents.subscribe((e) => void got.push(e.kind), { lastEventId: 0 });
    expect(got).toEqual([]); // nothing was published while stopped
    await f.dispatch(Sell, { itemUuid: "i" }, { reqCtx: admin });
    expect(got).toEqual(["CommandExecuted", "EventsAppended"]);
  });
});
