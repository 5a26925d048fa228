/**
 * The read side's runner: BaseEventHandler / BaseReadmodel show its state
 * read-only and keep its internals out of their namespace; the facade
 * registers handlers with a typed handle and looks them up typed and checked.
 */
import { describe, expect, it } from "vitest";
import { anonymous, BaseReadmodel, createFacade, defineDomain, type Facade, ProjectionReadmodel } from "mneme";
import { Counter, CounterTotals, EventCounter, Increment, Incremented } from "../support/counter-domain.js";
import { BaseEventHandler, type EventHandler } from "mneme/reactions";
import type { RestoreReport } from "mneme/runtime";

async function started(setup: (f: Facade) => void): Promise<Facade> {
  const f = createFacade();
  f.registerDomain(Counter);
  setup(f);
  await f.start();
  return f;
}

describe("the runner's state is read-only", () => {
  it("lastPosition, lastEventTimestamp, catchedEvents and restorationState cannot be written", async () => {
    let rm!: CounterTotals;
    const f = await started((facade) => facade.registerReadmodel((rm = new CounterTotals(facade))));
    await f.dispatch(Increment, { counterUuid: "a", by: 1 }, { waitToFinish: true });
    expect(rm.lastPosition).toBe(1);
    expect(() => {
      // @ts-expect-error a getter only
      rm.lastPosition = 0;
    }).toThrow(TypeError);
    expect(() => {
      // @ts-expect-error a getter only
      rm.lastEventTimestamp = 0;
    }).toThrow(TypeError);
    expect(() => {
      // @ts-expect-error a getter only
      rm.restorationState = "idle";
    }).toThrow(TypeError);
    expect(() => {
      // @ts-expect-error a getter only
      rm.catchedEvents = [];
    }).toThrow(TypeError);
    // the view is a copy: changing it changes nothing
    expect(() => (rm.catchedEvents as unknown as unknown[]).push({})).toThrow(TypeError);
    expect(rm.lastPosition).toBe(1);
    expect(rm.restorationState).toBe("restored");
    await f.dispatch(Increment, { counterUuid: "a", by: 1 }, { waitToFinish: true });
    expect(await rm.total("a")).toBe(2);
    await f.stop();
  });

  it("delivery internals are not members of a handler or readmodel", () => {
    const f = createFacade();
    const rm = new CounterTotals(f);
    class Plain extends BaseEventHandler {}
    for (const h of [rm, new Plain()]) {
      for (const m of [
        "notify",
        "attachHost",
        "goLive",
        "waitFor",
        "standbyError",
        "untilOutOfStandby",
        "info",
        "isStateRestorer",
        "applyEvents",
        "startRestore",
        "checkpointBackend",
        "eventPathFilter",
        "handlesAllEvents",
        "host",
        "delivery",
        "metrics",
      ]) {
        expect(m in h, m).toBe(false);
      }
    }
    // the contract stays
    for (const m of [
      "domain",
      "name",
      "eventRepository",
      "readmodelStoreBackend",
      "options",
      "catchedEvents",
      "restorationState",
      "lastEventTimestamp",
      "lastPosition",
      "addDomainEventHandler",
      "getDomainEventHandlers",
      "getDomainEvents",
      "restoreState",
      "getMetrics",
      "state",
      "start",
      "stop",
      "idle",
    ]) {
      expect(m in rm, m).toBe(true);
    }
  });
});

describe("handles and typed lookups", () => {
  it("registerReadmodel returns a handle; one lookup by handle, object or name, with a class typed and checked", async () => {
    const f = createFacade();
    f.registerDomain(Counter);
    const totals = f.registerReadmodel(new CounterTotals(f));
    const counter = new EventCounter(f);
    f.registerReadmodel(counter);
    f.registerReadmodel(new CounterTotals(f, "Other"));
    await f.start();
    await f.dispatch(Increment, { counterUuid: "a", by: 3 }, { waitToFinish: true });

    expect(totals).toMatchObject({ kind: "readmodelHandle", name: "CounterTotals" });
    const byHandle: CounterTotals = f.readmodel(totals);
    expect(byHandle).toBe(totals.readmodel);
    expect(await byHandle.total("a")).toBe(3);
    const byObject: EventCounter = f.readmodel(counter);
    expect(byObject.seen).toBe(1);
    const byName: CounterTotals = f.readmodel("Other", CounterTotals);
    expect(await byName.total("a")).toBe(3);
    expect(f.readmodel("Other", BaseReadmodel)).toBe(byName);
    // checked: another class, another object of the same name, another facade's handle, an unknown name
    expect(() => f.readmodel("EventCounter", CounterTotals)).toThrow(
      expect.objectContaining({ code: "UNKNOWN_EVENT_HANDLER", message: expect.stringContaining("EventCounter, not a CounterTotals") }),
    );
    expect(() => f.readmodel(new CounterTotals(f))).toThrow(expect.objectContaining({ code: "UNKNOWN_EVENT_HANDLER" }));
    const other = createFacade();
    other.registerDomain(Counter);
    const foreign = other.registerReadmodel(new CounterTotals(other));
    expect(() => f.readmodel(foreign)).toThrow(expect.objectContaining({ code: "UNKNOWN_EVENT_HANDLER" }));
    expect(() => f.readmodel("Nope", CounterTotals)).toThrow(expect.objectContaining({ code: "UNKNOWN_EVENT_HANDLER" }));
    // the class is checked whatever names the readmodel: a handle or the object too
    expect(f.readmodel(totals, BaseReadmodel)).toBe(byHandle);
    expect(() => f.readmodel(counter as EventHandler, CounterTotals)).toThrow(
      expect.objectContaining({ code: "UNKNOWN_EVENT_HANDLER", message: expect.stringContaining("EventCounter, not a CounterTotals") }),
    );
    expect(() => f.readmodel("Other", "CounterTotals" as never)).toThrow(expect.objectContaining({ code: "INVALID_REQUEST" }));
    // the name alone: the type is the caller's word
    expect(f.readmodel<CounterTotals>("CounterTotals")).toBe(byHandle);
    await f.stop();
  });

  it("a plain EventHandler object registers with a handle and is looked up as itself", async () => {
    const seen: number[] = [];
    const plain: EventHandler = {
      domain: "Counter",
      name: "Plain",
      getDomainEvents: () => [Incremented],
      getDomainEventHandlers: (t) =>
        t === Incremented || t === "Counter.Incremented"
          ? [{ eventPath: "Counter.Incremented", domain: "Counter", eventName: "Incremented", fn: (_c, e) => void seen.push(e.position) }]
          : [],
    };
    const f = createFacade();
    f.registerDomain(Counter);
    const handle = f.registerReadmodel(plain);
    await f.start();
    await f.dispatch(Increment, { counterUuid: "a", by: 1 }, { waitToFinish: true });
    expect(seen).toEqual([1]);
    expect(f.readmodel(handle)).toBe(plain);
    expect(f.readmodel(plain)).toBe(plain);
    expect(f.readmodel("Plain")).toBe(plain);
    expect(f.runtime.listEventHandlers().find((h) => h.name === "Plain")).toMatchObject({
      state: "running",
      lastPosition: 1,
      isStateRestorer: false,
    });
    await f.stop();
  });

  it("ctx.readmodel takes a handle or a name with its class, and gives the tenant's view", async () => {
    const D = defineDomain("Shelf");
    const Placed = D.event<{ title: string }>("Placed");
    const Book = D.aggregate<{ title: string }>("Book", {
      initialState: () => ({ title: "" }),
      evolve: { Placed: (_s, p: { title: string }) => ({ title: p.title }) },
    });
    const Place = D.command<{ bookUuid: string; title: string }>("Place", { permission: anonymous });
    D.handleCommand(Place, (_c, _m, p) => [Placed.create(p.bookUuid, { title: p.title })]);
    const Get = D.query<{ bookUuid: string; how: string }, unknown>("Get", { permission: anonymous });
    D.handleQuery(Get, async (ctx, _q, p) => {
      const view = p.how === "handle" ? ctx.readmodel(books) : ctx.readmodel("BookProjection", ProjectionReadmodel);
      return (await view.getModel(p.bookUuid))?.model ?? null;
    });
    const f = createFacade();
    f.registerDomain(D);
    const books = f.registerReadmodel(new ProjectionReadmodel(f, { aggregate: Book }));
    await f.start();
    const mine = { senderTenantUuid: "t1", senderAccountUuid: "a", senderSessionUuid: "s", senderIdentityUuid: "i" };
    const theirs = { ...mine, senderTenantUuid: "t2" };
    await f.dispatch(Place, { bookUuid: "b", title: "Dune" }, { reqCtx: mine, waitToFinish: true });
    for (const how of ["handle", "class"]) {
      expect(await f.query(Get, { bookUuid: "b", how }, { reqCtx: mine })).toEqual({ title: "Dune" });
      expect(await f.query(Get, { bookUuid: "b", how }, { reqCtx: theirs })).toBeNull();
    }
    await f.stop();
  });
});

describe("the runner goes through the readmodel's own restoreState", () => {
  it("at start and for the Runtime's restore, an overridden restoreState runs", async () => {
    const calls: { fromZero?: boolean }[] = [];
    class Tracked extends CounterTotals {
      override restoreState(
        ctx?: unknown,
        opts: { fromZero?: boolean; signal?: AbortSignal } = {},
      ): { done: Promise<RestoreReport>; cancel(): void } {
        calls.push({ ...(opts.fromZero === undefined ? {} : { fromZero: opts.fromZero }) });
        return super.restoreState(ctx, opts);
      }
    }
    const f = await started((facade) => facade.registerReadmodel(new Tracked(facade, "Tracked")));
    expect(calls).toEqual([{}]);
    await f.dispatch(Increment, { counterUuid: "a", by: 2 }, { waitToFinish: true });
    await f.runtime.controlEventHandler({ action: "restore", eventHandlerName: "Tracked", restoreFromZero: true });
    expect(calls).toEqual([{}, { fromZero: true }]);
    expect(await f.readmodel("Tracked", Tracked).total("a")).toBe(2);
    await f.stop();
  });
});
