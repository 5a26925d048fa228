import { describe, expect, it } from "vitest";
import {
  AllEvents,
  BaseReadmodel,
  createFacade,
  isMnemeError,
  withCatchBufferLimit,
  withReadmodelStoreBackend,
  withRestoreBatchSize,
  type Facade,
} from "mneme";
import { Counter, CounterTotals, EventCounter, Increment, Incremented, Note, Noted } from "../support/counter-domain.js";
import { MemoryReadmodelStoreBackend } from "mneme/memory";

async function started(setup: (f: Facade) => void = () => undefined, opts: Parameters<typeof createFacade>[0] = {}): Promise<Facade> {
  const facade = createFacade({ appName: "rm-test", ...opts });
  facade.registerDomain(Counter);
  setup(facade);
  await facade.start();
  return facade;
}

async function inc(facade: Facade, counterUuid: string, by = 1, waitToFinish = false) {
  return facade.dispatch(Increment, { counterUuid, by }, { waitToFinish });
}

describe("BaseReadmodel handler map", () => {
  it("keys handlers by event path and adds catch-all handlers to every lookup", async () => {
    const facade = createFacade();
    class Rm extends BaseReadmodel {
      constructor(f: Facade) {
        super(f);
        this.domain = "Counter";
        this.name = "Rm";
        this.addDomainEventHandler(Incremented, () => undefined);
        this.addDomainEventHandler(Incremented, () => undefined);
        this.addDomainEventHandler(AllEvents, () => undefined);
      }
    }
    const rm = new Rm(facade);
    expect(rm.getDomainEventHandlers(Incremented).map((h) => h.eventPath)).toEqual(["Counter.Incremented", "Counter.Incremented", "*"]);
    expect(rm.getDomainEventHandlers("Counter.Incremented")).toHaveLength(3);
    expect(rm.getDomainEventHandlers(Noted).map((h) => h.eventPath)).toEqual(["*"]);
    expect(rm.getDomainEventHandlers(Incremented)[0]).toMatchObject({ domain: "Counter", eventName: "Incremented" });
    // unique, AllEvents excluded
    expect(rm.getDomainEvents().map((t) => t.path)).toEqual(["Counter.Incremented"]);
  });

  it("takes the facade's repository and backend, or the backend given as an option", () => {
    const facade = createFacade();
    const own = new MemoryReadmodelStoreBackend();
    const a = new CounterTotals(facade, "A");
    const b = new CounterTotals(facade, "B", withReadmodelStoreBackend(own), withRestoreBatchSize(7), withCatchBufferLimit(3));
    expect(a.eventRepository).toBe(facade.eventRepository);
    expect(a.readmodelStoreBackend).toBe(facade.readmodelStoreBackend);
    expect(b.readmodelStoreBackend).toBe(own);
    expect(b.options).toMatchObject({ restoreBatchSize: 7, catchBufferLimit: 3 });
    expect(a.restorationState).toBe("idle");
    expect(a.catchedEvents).toEqual([]);
  });

  it("rejects a duplicate or unnamed handler", () => {
    const facade = createFacade();
    facade.registerDomain(Counter);
    facade.registerReadmodel(new CounterTotals(facade, "Same"));
    expect(() => facade.registerReadmodel(new CounterTotals(facade, "Same"))).toThrow(
      expect.objectContaining({ code: "INVALID_EVENT_HANDLER" }),
    );
    expect(() => facade.registerReadmodel(new CounterTotals(facade, ""))).toThrow(
      expect.objectContaining({ code: "INVALID_EVENT_HANDLER" }),
    );
  });
});

describe("live delivery", () => {
  it("is idle before start, restored and running after, and applies each committed event once in position order", async () => {
    const facade = createFacade();
    facade.registerDomain(Counter);
    const rm = new CounterTotals(facade);
    facade.registerReadmodel(rm);
    expect(rm.restorationState).toBe("idle");
    await facade.start();
    expect(rm.restorationState).toBe("restored");
    expect(rm.state).toBe("running");
    await Promise.all(Array.from({ length: 30 }, (_, i) => inc(facade, `c${i % 3}`, 1)));
    await inc(facade, "c0", 1, true);
    expect(rm.applied).toEqual(Array.from({ length: 31 }, (_, i) => i + 1));
    expect(await rm.total("c0")).toBe(11);
    expect(await facade.readmodelStoreBackend.getCheckpoint("CounterTotals")).toBe(31);
    await facade.stop();
  });

  it("delivers to plain EventHandler objects through the same interface", async () => {
    const seen: string[] = [];
    const plain = {
      domain: "Counter",
      name: "Plain",
      getDomainEvents: () => [Noted],
      getDomainEventHandlers: (t: unknown) =>
        t === "*"
          ? []
          : (typeof t === "string" ? t : (t as { path: string }).path) === Noted.path
            ? [
                {
                  eventPath: Noted.path,
                  domain: "Counter",
                  eventName: "Noted",
                  fn: (_c: unknown, _e: unknown, p: { text: string }) => void seen.push(p.text),
                },
              ]
            : [],
    };
    const facade = await started((f) => f.registerReadmodel(plain));
    await facade.dispatch(Note, { counterUuid: "x", text: "hello" }, { waitToFinish: true });
    await inc(facade, "x", 1, true);
    await facade.dispatch(Note, { counterUuid: "x", text: "world" }, { waitToFinish: true });
    expect(seen).toEqual(["hello", "world"]);
    expect(facade.runtime.listEventHandlers().find((h) => h.eventHandlerName === "Plain")).toMatchObject({
      hasMetrics: false,
      state: "running",
    });
    await facade.stop();
  });

  it("waitToFinish waits for a slow handler", async () => {
    const facade = createFacade();
    facade.registerDomain(Counter);
    const rm = new CounterTotals(facade);
    rm.delayMs = 20;
    facade.registerReadmodel(rm);
    await facade.start();
    await inc(facade, "a", 5, true);
    expect(await rm.total("a")).toBe(5);
    await facade.stop();
  });
});

describe("failure isolation", () => {
  it("a failing handler becomes failed, the command and other handlers go on, start retries from the checkpoint", async () => {
    const facade = createFacade({ systemEvents: true });
    facade.registerDomain(Counter);
    const bad = new CounterTotals(facade, "Bad");
    const good = new CounterTotals(facade, "Good");
    facade.registerReadmodel(bad);
    facade.registerReadmodel(good);
    await facade.start();
    const kinds: string[] = [];
    facade.runtime.systemEvents.subscribe((e) => void kinds.push(e.kind));
    await inc(facade, "a", 1, true);
    bad.failOn = (e) => e.position === 2;
    const r = await inc(facade, "a", 1, true);
    expect(r.events).toHaveLength(1);
    expect(r.handlerErrors.map((h) => h.eventHandlerName)).toEqual(["Bad"]);
    expect(isMnemeError(r.handlerErrors[0]!.error)).toBe(true);
    expect(bad.state).toBe("failed");
    expect(bad.getMetrics()).toMatchObject({ eventsFailed: 1, lastError: "refusing position 2", lastPosition: 1 });
    expect(kinds).toContain("HandlerFailed");
    await inc(facade, "a", 1, true);
    expect(await good.total("a")).toBe(3);
    expect(await bad.total("a")).toBe(1);
    // a command after the failure is not blamed on the failed handler
    expect((await inc(facade, "b", 1, true)).handlerErrors).toEqual([]);
    bad.failOn = undefined;
    await facade.runtime.controlEventHandler({ action: "start", eventHandlerName: "Bad" });
    expect(bad.state).toBe("running");
    expect(await bad.total("a")).toBe(3);
    expect(bad.applied).toEqual([1, 2, 3, 4]);
    await facade.stop();
  });

  it("rolls back the failing event's writes and commits the events before it in the batch", async () => {
    const facade = createFacade();
    facade.registerDomain(Counter);
    const rm = new CounterTotals(facade);
    facade.registerReadmodel(rm);
    await facade.start();
    rm.failOn = (e) => e.aggregateUuid === "c";
    const r = await facade.dispatch(
      { domain: "Counter", name: "IncrementMany" },
      { counterUuids: ["a", "b", "c", "d"], by: 2 },
      { waitToFinish: true },
    );
    expect(r.handlerErrors).toHaveLength(1);
    expect(await rm.total("a")).toBe(2);
    expect(await rm.total("b")).toBe(2);
    expect(await rm.total("c")).toBe(0);
    expect(await rm.total("d")).toBe(0);
    expect(await facade.readmodelStoreBackend.getCheckpoint("CounterTotals")).toBe(2);
    await facade.stop();
  });
});

describe("restoration", () => {
  it("fromZero clears only the readmodel's own collections and checkpoint, then replays", async () => {
    const facade = await started((f) => {
      f.registerReadmodel(new CounterTotals(f, "One"));
      f.registerReadmodel(new CounterTotals(f, "Two"));
    });
    for (let i = 0; i < 10; i++) await inc(facade, `c${i % 2}`, 1);
    const one = facade.readmodel("One", CounterTotals);
    const two = facade.readmodel("Two", CounterTotals);
    await one.idle();
    await two.idle();
    // sabotage One's documents: fromZero must rebuild them
    await facade.readmodelStoreBackend.collection("One:totals").put("c0", { counterUuid: "c0", total: 999 });
    await facade.readmodelStoreBackend.collection("One:junk").put("k", { x: 1 });
    const report = await one.restoreState(undefined, { fromZero: true }).done;
    expect(report).toMatchObject({ eventsReplayed: 10, afterPosition: 0, toPosition: 10 });
    expect(report.eventsPerSecond).toBeGreaterThan(0);
    expect(await one.total("c0")).toBe(5);
    expect(await facade.readmodelStoreBackend.collection("One:junk").count()).toBe(0);
    expect(await two.total("c0")).toBe(5);
    expect(one.applied).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    await facade.stop();
  });

  it("resumes from the checkpoint without replaying what was applied", async () => {
    const backend = new MemoryReadmodelStoreBackend();
    const repoFacade = await started(() => undefined, { readmodelStoreBackend: backend });
    for (let i = 0; i < 5; i++) await inc(repoFacade, "a");
    // a second facade on the same stores, with a readmodel whose checkpoint is at 3
    await backend.setCheckpoint("CounterTotals", 3);
    await backend.collection("CounterTotals:totals").put("a", { counterUuid: "a", total: 3 });
    const facade = createFacade({ eventRepository: repoFacade.eventRepository, readmodelStoreBackend: backend });
    facade.registerDomain(Counter);
    const rm = new CounterTotals(facade);
    facade.registerReadmodel(rm);
    await facade.start();
    expect(rm.applied).toEqual([4, 5]);
    expect(rm.getMetrics().lastRestore).toMatchObject({ eventsReplayed: 2, afterPosition: 3, toPosition: 5 });
    expect(await rm.total("a")).toBe(5);
  });

  it("cancel rejects with RESTORE_CANCELLED, leaves 'cancelled' and the served data; start resumes it; a later restore succeeds", async () => {
    const facade = await started((f) => f.registerReadmodel(new CounterTotals(f, "Slow", withRestoreBatchSize(5))));
    for (let i = 0; i < 50; i++) await inc(facade, "a");
    const rm = facade.readmodel("Slow", CounterTotals);
    await rm.idle();
    rm.delayMs = 2;
    const r = rm.restoreState(undefined, { fromZero: true });
    // cancel once some pages are in, whatever the machine's speed
    while (!(rm.applied.length >= 10 && rm.applied.length < 50)) await new Promise((res) => setTimeout(res, 1));
    r.cancel();
    await expect(r.done).rejects.toMatchObject({ code: "RESTORE_CANCELLED" });
    expect(rm.restorationState).toBe("cancelled");
    expect(rm.state).toBe("stopped");
    // the served generation is untouched, the partial one is gone
    expect(await facade.readmodelStoreBackend.getCheckpoint("Slow")).toBe(50);
    expect(await facade.readmodelStoreBackend.getCheckpoint("Slow#rebuild")).toBe(0);
    expect(await facade.readmodelStoreBackend.collection("Slow#rebuild:totals").count()).toBe(0);
    expect(await rm.total("a")).toBe(50);
    expect(rm.lastPosition).toBe(50);
    rm.delayMs = 0;
    await facade.runtime.controlEventHandler({ action: "start", eventHandlerName: "Slow" });
    await inc(facade, "a", 1, true);
    expect(await rm.total("a")).toBe(51);
    await rm.restoreState(undefined, { fromZero: true }).done;
    expect(await rm.total("a")).toBe(51);
    expect(rm.applied).toEqual(Array.from({ length: 51 }, (_, i) => i + 1));
    await facade.stop();
  });

  it("a second restore while one runs is INVALID_STATE", async () => {
    const facade = await started((f) => f.registerReadmodel(new CounterTotals(f, "R", withRestoreBatchSize(2))));
    for (let i = 0; i < 20; i++) await inc(facade, "a");
    const rm = facade.readmodel("R", CounterTotals);
    rm.delayMs = 1;
    const first = rm.restoreState(undefined, { fromZero: true });
    await expect(rm.restoreState().done).rejects.toMatchObject({ code: "INVALID_STATE" });
    await first.done;
    expect(rm.restorationState).toBe("restored");
    await facade.stop();
  });

  it("records events that arrive while restoring in catchedEvents and applies each exactly once", async () => {
    const facade = await started((f) => f.registerReadmodel(new CounterTotals(f, "R", withRestoreBatchSize(3))));
    for (let i = 0; i < 30; i++) await inc(facade, "a");
    const rm = facade.readmodel("R", CounterTotals);
    await rm.idle();
    rm.delayMs = 5;
    const r = rm.restoreState(undefined, { fromZero: true });
    const live = await Promise.all(Array.from({ length: 10 }, () => inc(facade, "a")));
    const report = await r.done;
    expect(rm.catchedEvents.map((e) => e.position)).toEqual(live.map((d) => d.events[0]!.position));
    expect(report.eventsCaught).toBe(10);
    rm.delayMs = 0;
    await inc(facade, "a", 1, true);
    expect(rm.applied).toEqual(Array.from({ length: 41 }, (_, i) => i + 1));
    expect(await rm.total("a")).toBe(41);
    await facade.stop();
  });

  it("drops an overflowing catch buffer and reads the store instead, losing nothing", async () => {
    const facade = await started((f) => f.registerReadmodel(new CounterTotals(f, "R", withRestoreBatchSize(2), withCatchBufferLimit(3))));
    for (let i = 0; i < 20; i++) await inc(facade, "a");
    const rm = facade.readmodel("R", CounterTotals);
    await rm.idle();
    rm.delayMs = 5;
    const r = rm.restoreState(undefined, { fromZero: true });
    await Promise.all(Array.from({ length: 25 }, () => inc(facade, "a")));
    const report = await r.done;
    expect(report.eventsCaught).toBe(25);
    rm.delayMs = 0;
    await inc(facade, "a", 1, true);
    expect(rm.applied).toEqual(Array.from({ length: 46 }, (_, i) => i + 1));
    await facade.stop();
  });

  it("stop, dispatch, start: nothing is missed", async () => {
    const facade = await started((f) => f.registerReadmodel(new CounterTotals(f)));
    const rm = facade.readmodel("CounterTotals", CounterTotals);
    await inc(facade, "a", 1, true);
    await facade.runtime.controlEventHandler({ action: "stop", eventHandlerName: "CounterTotals" });
    for (let i = 0; i < 7; i++) await inc(facade, "a");
    expect(await rm.total("a")).toBe(1);
    await facade.runtime.controlEventHandler({ action: "start", eventHandlerName: "CounterTotals" });
    expect(await rm.total("a")).toBe(8);
    expect(rm.applied).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
    await facade.stop();
  });

  it("a start racing the batch a stop lets finish does not apply that batch again", async () => {
    /** Stands for a slow checkpoint read: the first armed read returns its value only after the in-flight batch committed. */
    class SlowCheckpointRead extends MemoryReadmodelStoreBackend {
      armed = false;
      override async getCheckpoint(handler: string): Promise<number> {
        const value = await super.getCheckpoint(handler);
        if (!this.armed) return value;
        this.armed = false;
        while ((await super.getCheckpoint(handler)) < 2) await new Promise((r) => setTimeout(r, 1));
        return value;
      }
    }
    const backend = new SlowCheckpointRead();
    let release!: () => void;
    let entered!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const inBatch = new Promise<void>((r) => (entered = r));
    class Gated extends CounterTotals {
      hold = false;
      constructor(f: Facade) {
        super(f, "Gated", withReadmodelStoreBackend(backend));
        this.addDomainEventHandler(Incremented, async () => {
          if (!this.hold) return;
          entered();
          await gate;
        });
      }
    }
    const facade = await started((f) => f.registerReadmodel(new Gated(f)));
    const rm = facade.readmodel("Gated", Gated);
    await inc(facade, "a", 1, true);
    rm.hold = true;
    await inc(facade, "a"); // position 2: its batch waits at the gate, uncommitted
    await inBatch;
    const stopping = facade.runtime.controlEventHandler({ action: "stop", eventHandlerName: "Gated" });
    while (rm.state !== "stopped") await new Promise((r) => setTimeout(r, 1));
    backend.armed = true;
    const starting = facade.runtime.controlEventHandler({ action: "start", eventHandlerName: "Gated" });
    release();
    await Promise.all([stopping, starting]);
    await rm.idle();
    expect(rm.state).toBe("running");
    expect(rm.applied).toEqual([1, 2]);
    expect(await rm.total("a")).toBe(2);
    await facade.stop();
  });

  it("a handler that only handles some events still advances its position over the others", async () => {
    const facade = await started((f) => {
      f.registerReadmodel(new CounterTotals(f));
      f.registerReadmodel(new EventCounter(f));
    });
    await facade.dispatch(Note, { counterUuid: "n", text: "x" });
    await inc(facade, "a", 1, true);
    const rm = facade.readmodel("CounterTotals", CounterTotals);
    expect(rm.lastPosition).toBe(2);
    expect(facade.readmodel("EventCounter", EventCounter).seen).toBe(2);
    // restore from zero with the path filter: catches up past the Noted event too
    await rm.restoreState(undefined, { fromZero: true }).done;
    expect(rm.lastPosition).toBe(2);
    expect(rm.getMetrics().lag).toBe(0);
    await facade.stop();
  });

  it("a restore that fails leaves restorationState failed, state failed and the served data whole", async () => {
    const facade = await started((f) => f.registerReadmodel(new CounterTotals(f)));
    for (let i = 0; i < 5; i++) await inc(facade, "a", 1, true);
    const rm = facade.readmodel("CounterTotals", CounterTotals);
    rm.failOn = (e) => e.position === 3;
    await expect(rm.restoreState(undefined, { fromZero: true }).done).rejects.toMatchObject({ code: "HANDLER_FAILED" });
    expect(rm.restorationState).toBe("failed");
    expect(rm.state).toBe("failed");
    // the rebuild is discarded: queries read the served generation, whole
    expect(await rm.total("a")).toBe(5);
    expect(rm.lastPosition).toBe(5);
    rm.failOn = undefined;
    await facade.runtime.controlEventHandler({ action: "start", eventHandlerName: "CounterTotals" });
    expect(rm.state).toBe("running");
    expect(rm.restorationState).toBe("restored");
    expect(await rm.total("a")).toBe(5);
    await facade.stop();
  });
});

describe("metrics", () => {
  it("counts processed events, mean and p99 handling time, lag and the last restore", async () => {
    const facade = await started((f) => f.registerReadmodel(new CounterTotals(f)));
    for (let i = 0; i < 12; i++) await inc(facade, "a", 1, true);
    const m = facade.readmodel("CounterTotals", CounterTotals).getMetrics();
    expect(m.eventsProcessed).toBe(12);
    expect(m.eventsFailed).toBe(0);
    expect(m.meanHandleMicros).toBeGreaterThan(0);
    expect(m.p99HandleMicros).toBeGreaterThanOrEqual(m.meanHandleMicros * 0.5);
    expect(m.lag).toBe(0);
    expect(m.lastPosition).toBe(12);
    expect(m.lastEventTimestamp).toBeGreaterThan(1.6e18);
    expect(m.lastRestore).toBeDefined();
    await facade.runtime.controlEventHandler({ action: "stop", eventHandlerName: "CounterTotals" });
    await inc(facade, "a");
    await inc(facade, "a");
    expect(facade.readmodel("CounterTotals", CounterTotals).getMetrics().lag).toBe(2);
    await facade.stop();
  });
});
