/**
 * Process managers and reactors on memory, SQLite and Postgres: a restore
 * from zero rebuilds state and sends nothing; the Runtime's scheduled
 * commands (cancel) and dead letters (retry, discard) with their
 * permissions; retries with backoff; refused options and steps write nothing.
 */
import { describe, expect, it } from "vitest";
import { anonymous, defineDomain, isMnemeError, MnemeError, newUuid, type Facade, type RequestContext } from "mneme";
import { CancelScheduledCommand, ControlDeadLetter, ControlEventHandler, ListDeadLetters, ListScheduledCommands } from "mneme/runtime";
import { correlationOf, ProcessManager, reactionCommandUuid, reactionDedupeKey, Reactor } from "mneme/reactions";
import { installOrders } from "../../examples/orders/fulfilment.js";
import { AddStockCmd, OrderPlacedEvt, PlaceOrderCmd } from "../../examples/orders/orders-domain.js";
import { ADMIN, USER, authorizer } from "../runtime/runtime-fixture.js";
import { BACKENDS, FakeClock, RecordingProvider, reactionWorlds, settle } from "../support/reactions-world.js";

const worlds = reactionWorlds();
const TIMEOUT = 60_000;

async function shop(backend: (typeof BACKENDS)[number]) {
  const clock = new FakeClock();
  const provider = new RecordingProvider();
  const facade = worlds(backend).facade("shop", { authorizer });
  const handlers = installOrders(facade, {
    provider,
    paymentTimeoutMs: TIMEOUT,
    clock: clock.now,
    retry: { maxAttempts: 2, initialDelayMs: 1000 },
  });
  await facade.start();
  await facade.dispatch(AddStockCmd, { sku: "book", quantity: 5 }, { reqCtx: USER });
  const settled = () => settle(facade, [handlers.fulfilment, handlers.gateway], clock.now);
  return { facade, clock, provider, ...handlers, settled };
}

async function allEvents(facade: Facade) {
  const out = [];
  for await (const batch of facade.eventRepository.readAll({ afterPosition: 0 })) out.push(...batch);
  return out;
}

const codeOf = (p: Promise<unknown>) =>
  p.then(
    () => "resolved",
    (e: unknown) => (isMnemeError(e) ? e.code : String(e)),
  );

describe.each(BACKENDS)("reactions on %s", (backend) => {
  it("a restore from zero rebuilds each process's state and sends no command and runs no effect again", async () => {
    const { facade, provider, fulfilment, gateway, settled } = await shop(backend);
    const done = newUuid();
    const waiting = newUuid();
    await facade.dispatch(PlaceOrderCmd, { orderUuid: done, sku: "book", quantity: 1, amount: 10 }, { reqCtx: USER });
    await settled();
    provider.failNext = 1; // the second order's charge fails once: it waits for its retry
    await facade.dispatch(PlaceOrderCmd, { orderUuid: waiting, sku: "book", quantity: 1, amount: 20 }, { reqCtx: USER });
    await settled();
    const before = await allEvents(facade);
    const stateBefore = await fulfilment.listStates();
    const outboxBefore = (await fulfilment.outbox.list()).map((e) => e.id);
    const gatewayBefore = await gateway.outbox.list();
    expect(stateBefore.map((s) => s.processId)).toEqual([waiting]);
    expect(outboxBefore).toHaveLength(1); // the payment timeout of `waiting`
    expect(gatewayBefore).toHaveLength(1); // the retry of its charge
    const calls = provider.calls.length;
    for (const name of ["Fulfilment", "PaymentGateway"]) {
      await facade.dispatch(ControlEventHandler, { action: "restore", eventHandlerName: name, restoreFromZero: true }, { reqCtx: ADMIN });
    }
    await fulfilment.outbox.drain();
    await gateway.outbox.drain();
    expect(await allEvents(facade)).toEqual(before);
    expect(provider.calls.length).toBe(calls);
    expect(await fulfilment.listStates()).toEqual(stateBefore);
    expect((await fulfilment.outbox.list()).map((e) => e.id)).toEqual(outboxBefore);
    expect(await gateway.outbox.list()).toEqual(gatewayBefore);
  });

  it("a restore from zero under live traffic: every order placed before, during and after it ships once, charged once", async () => {
    const { facade, provider, fulfilment, gateway, settled } = await shop(backend);
    await facade.dispatch(AddStockCmd, { sku: "book", quantity: 100 }, { reqCtx: USER });
    const orders: string[] = [];
    const place = async (count: number) => {
      for (let i = 0; i < count; i++) {
        const orderUuid = newUuid();
        orders.push(orderUuid);
        await facade.dispatch(PlaceOrderCmd, { orderUuid, sku: "book", quantity: 1, amount: 1 }, { reqCtx: USER });
      }
    };
    await place(4);
    await Promise.all([
      facade.dispatch(ControlEventHandler, { action: "restore", eventHandlerName: "Fulfilment", restoreFromZero: true }, { reqCtx: ADMIN }),
      facade.dispatch(
        ControlEventHandler,
        { action: "restore", eventHandlerName: "PaymentGateway", restoreFromZero: true },
        { reqCtx: ADMIN },
      ),
      place(4),
    ]);
    await place(2);
    await settled();
    for (const orderUuid of orders) {
      expect((await facade.eventRepository.loadAggregate(orderUuid)).map((e) => e.name)).toEqual([
        "OrderPlaced",
        "PaymentRequested",
        "PaymentCharged",
        "OrderShipped",
      ]);
    }
    expect(provider.calls.map((c) => c.orderUuid).sort()).toEqual([...orders].sort());
    expect(await fulfilment.listStates()).toEqual([]);
    expect(await gateway.outbox.list()).toEqual([]);
  });

  it("lists and cancels scheduled commands through the Runtime (cancel: administrators only)", async () => {
    const { facade, clock, provider, settled } = await shop(backend);
    provider.failNext = 100;
    const orderUuid = newUuid();
    await facade.dispatch(PlaceOrderCmd, { orderUuid, sku: "book", quantity: 1, amount: 10 }, { reqCtx: USER });
    await settled();
    const [entry, ...rest] = await facade.query(ListScheduledCommands, {}, { reqCtx: USER });
    expect(rest).toEqual([]);
    expect(entry).toMatchObject({ name: "CancelOrder", payload: { orderUuid, reason: "payment timeout" } });
    expect(await facade.query(ListScheduledCommands, { eventHandlerName: "PaymentGateway" }, { reqCtx: USER })).toEqual([]);
    expect(await codeOf(facade.query(ListScheduledCommands, { eventHandlerName: "nope" }, { reqCtx: USER }))).toBe("UNKNOWN_EVENT_HANDLER");
    expect(await codeOf(facade.dispatch(CancelScheduledCommand, { commandUuid: entry!.commandUuid }, { reqCtx: USER }))).toBe(
      "PERMISSION_DENIED",
    );
    expect(await facade.query(ListScheduledCommands, {}, { reqCtx: USER })).toHaveLength(1);
    const r = await facade.dispatch(CancelScheduledCommand, { commandUuid: entry!.commandUuid }, { reqCtx: ADMIN });
    expect(r.result).toMatchObject({ commandUuid: entry!.commandUuid, name: "CancelOrder" });
    expect(await codeOf(facade.dispatch(CancelScheduledCommand, { commandUuid: entry!.commandUuid }, { reqCtx: ADMIN }))).toBe("NOT_FOUND");
    expect(await facade.query(ListScheduledCommands, {}, { reqCtx: USER })).toEqual([]);
    clock.advance(TIMEOUT * 2);
    await settled();
    const names = (await facade.eventRepository.loadAggregate(orderUuid)).map((e) => e.name);
    expect(names).toEqual(["OrderPlaced", "PaymentRequested"]); // the cancelled timeout never fired
  });

  it("retries a dead letter (pending again, attempts reset) or discards it (never run again)", async () => {
    const { facade, clock, provider, gateway, settled } = await shop(backend);
    provider.failNext = 4;
    const a = newUuid();
    const b = newUuid();
    await facade.dispatch(PlaceOrderCmd, { orderUuid: a, sku: "book", quantity: 1, amount: 10 }, { reqCtx: USER });
    await facade.dispatch(PlaceOrderCmd, { orderUuid: b, sku: "book", quantity: 1, amount: 20 }, { reqCtx: USER });
    await settled();
    clock.advance(1000);
    await settled();
    const dead = await facade.query(ListDeadLetters, {}, { reqCtx: USER });
    expect(dead.map((d) => [d.kind, d.attempts])).toEqual([
      ["effect", 2],
      ["effect", 2],
    ]);
    const keyOf = async (orderUuid: string) => {
      const requested = (await facade.eventRepository.loadAggregate(orderUuid)).find((e) => e.name === "PaymentRequested")!;
      return reactionDedupeKey("PaymentGateway", requested.eventUuid);
    };
    const [ka, kb] = [await keyOf(a), await keyOf(b)];
    expect(dead.map((d) => d.id).sort()).toEqual([ka, kb].sort());
    expect(await codeOf(facade.dispatch(ControlDeadLetter, { action: "retry", id: ka }, { reqCtx: USER }))).toBe("PERMISSION_DENIED");
    expect(await codeOf(facade.dispatch(ControlDeadLetter, { action: "again" as "retry", id: ka }, { reqCtx: ADMIN }))).toBe(
      "INVALID_ACTION",
    );
    const retried = await facade.dispatch(ControlDeadLetter, { action: "retry", id: ka }, { reqCtx: ADMIN });
    expect(retried.result).toMatchObject({ id: ka, attempts: 0 });
    await facade.dispatch(ControlDeadLetter, { action: "discard", id: kb, eventHandlerName: "PaymentGateway" }, { reqCtx: ADMIN });
    expect(await codeOf(facade.dispatch(ControlDeadLetter, { action: "discard", id: kb }, { reqCtx: ADMIN }))).toBe("NOT_FOUND");
    await settled();
    expect((await facade.eventRepository.loadAggregate(a)).map((e) => e.name)).toEqual([
      "OrderPlaced",
      "PaymentRequested",
      "PaymentCharged",
      "OrderShipped",
    ]);
    expect(await gateway.outbox.list()).toEqual([]);
    expect(provider.calls.filter((c) => c.idempotencyKey === kb)).toHaveLength(2); // never again after the discard
    expect(provider.calls.filter((c) => c.idempotencyKey === ka)).toHaveLength(3);
  });

  it("backs off exponentially between attempts, by the handler's clock", async () => {
    const clock = new FakeClock();
    const facade = worlds(backend).facade();
    const D = defineDomain("Ping", { description: "pings" });
    const Ping = D.event<{ n: number }>("Pinged");
    const attempts: number[] = [];
    const reactor = new Reactor(facade, {
      name: "Flaky",
      domain: "Ping",
      clock: clock.now,
      retry: { maxAttempts: 4, initialDelayMs: 100 },
    }).on(Ping, (_e, info) => {
      attempts.push(info.attempt);
      throw new Error(`try ${info.attempt}`);
    });
    facade.registerDomain(D);
    facade.registerReadmodel(reactor);
    await facade.start();
    await facade.eventRepository.append([{ domain: "Ping", name: "Pinged", aggregateUuid: newUuid(), payload: { n: 1 }, tenantUuid: "" }]);
    await settle(facade, [reactor], clock.now);
    const dueOf = async () => (await reactor.outbox.list())[0]!;
    for (const wait of [100, 200, 400]) {
      const e = await dueOf();
      expect(e.dueAt - clock.ms).toBe(wait);
      clock.advance(wait - 1);
      await reactor.outbox.drain();
      expect((await dueOf()).attempts).toBe(e.attempts); // not due yet
      clock.advance(1);
      await reactor.outbox.drain();
    }
    expect(attempts).toEqual([1, 2, 3, 4]);
    expect(await dueOf()).toMatchObject({ status: "dead", attempts: 4, lastError: "try 4" });
  });
});

describe("the outbox worker's concurrency", () => {
  it.each(BACKENDS)("delivers different processes side by side and one process's entries in order on %s", async (backend) => {
    const clock = new FakeClock();
    const f = worlds(backend).facade();
    const D = defineDomain("Lanes", { description: "events of three chains" });
    const Ticked = D.event<{ n: number }>("Ticked");
    let inFlight = 0;
    let most = 0;
    const seen: string[] = [];
    // The first effect of each chain waits until all three have started (with a bound, so that a
    // worker delivering fewer at once fails the test instead of hanging it).
    let arrived = 0;
    let allThere!: () => void;
    const barrier = new Promise<void>((r) => (allThere = r));
    const reactor = new Reactor(f, { name: "Lanes", domain: "Lanes", clock: clock.now, concurrency: 4 }).on(Ticked, async (e) => {
      inFlight++;
      most = Math.max(most, inFlight);
      if (e.payload.n === 0) {
        if (++arrived === 3) allThere();
        await Promise.race([barrier, new Promise((r) => setTimeout(r, 5000))]);
      }
      seen.push(`${correlationOf(e)}:${e.payload.n}`);
      inFlight--;
    });
    f.registerDomain(D);
    f.registerReadmodel(reactor);
    await f.start();
    await reactor.stop(); // collect the entries first, then deliver them in one round
    for (let n = 0; n < 3; n++) {
      for (const chain of ["a", "b", "c"]) {
        await f.eventRepository.append([
          {
            domain: "Lanes",
            name: "Ticked",
            aggregateUuid: chain,
            payload: { n },
            tenantUuid: "",
            reqCtx: { correlationId: chain } as never,
          },
        ]);
      }
    }
    await reactor.start();
    await settle(f, [reactor], clock.now);
    expect(most).toBe(3);
    for (const chain of ["a", "b", "c"]) expect(seen.filter((x) => x.startsWith(chain))).toEqual([0, 1, 2].map((n) => `${chain}:${n}`));
  });
});

describe("an event handled late", () => {
  it.each(BACKENDS)("sends what its step dispatched before what it scheduled, both being due, on %s", async (backend) => {
    const clock = new FakeClock();
    const f = worlds(backend).facade();
    const D = defineDomain("Late", { description: "a step that dispatches and schedules" });
    const Placed = D.event<{ n: number }>("Placed");
    const Act = D.command<{ what: string }>("Act", { permission: anonymous });
    const Acted = D.event<{ what: string }>("Acted");
    D.handleCommand(Act, (_ctx, _c, p) => [Acted.create("log", p)]);
    const pm = new ProcessManager<object>(f, { name: "Late", domain: "Late", initialState: () => ({}), clock: clock.now }).on(
      Placed,
      (ctx, s, _p, e) => {
        ctx.schedule(Act, { what: "timeout" }, { at: e.createdAt / 1e6 + 10 });
        ctx.dispatch(Act, { what: "now" });
        return s;
      },
    );
    f.registerDomain(D);
    f.registerReadmodel(pm);
    await f.start();
    await pm.stop();
    await f.eventRepository.append([{ domain: "Late", name: "Placed", aggregateUuid: "p", payload: { n: 1 }, tenantUuid: "" }]);
    clock.advance(3_600_000); // handled an hour after it happened: both are due
    await pm.start();
    await settle(f, [pm], clock.now);
    expect((await f.eventRepository.loadAggregate("log")).map((e) => (e.payload as { what: string }).what)).toEqual(["now", "timeout"]);
  });
});

describe("cancelling a scheduled command while it fires", () => {
  it("is refused with INVALID_STATE in the instance sending it, and the command runs once", async () => {
    const clock = new FakeClock();
    const f = worlds("memory").facade();
    const D = defineDomain("Gate", { description: "a command that waits for a gate" });
    const Opened = D.event<{ n: number }>("Opened");
    const Ring = D.command<{ n: number }>("Ring", { permission: anonymous });
    const Rang = D.event<{ n: number }>("Rang");
    let open!: () => void;
    const gate = new Promise<void>((r) => (open = r));
    let entered!: () => void;
    const inHandler = new Promise<void>((r) => (entered = r));
    D.handleCommand(Ring, async (_ctx, _c, p) => {
      entered();
      await gate;
      return [Rang.create("bell", p)];
    });
    let scheduled = "";
    const pm = new ProcessManager<object>(f, { name: "Bell", domain: "Gate", initialState: () => ({}), clock: clock.now }).on(
      Opened,
      (ctx, s, p) => {
        scheduled = ctx.schedule(Ring, p, { at: clock.ms + 10 });
        return s;
      },
    );
    f.registerDomain(D);
    f.registerReadmodel(pm);
    await f.start();
    await f.eventRepository.append([{ domain: "Gate", name: "Opened", aggregateUuid: "door", payload: { n: 1 }, tenantUuid: "" }]);
    await settle(f, [pm], clock.now);
    expect((await pm.outbox.list()).map((e) => e.id)).toEqual([scheduled]);
    clock.advance(10);
    const firing = pm.outbox.drain();
    await inHandler;
    expect(await codeOf(f.runtime.cancelScheduledCommand({ commandUuid: scheduled }))).toBe("INVALID_STATE");
    open();
    await firing;
    expect(await codeOf(f.runtime.cancelScheduledCommand({ commandUuid: scheduled }))).toBe("NOT_FOUND");
    expect((await f.eventRepository.loadAggregate("bell")).map((e) => [e.name, e.commandUuid])).toEqual([["Rang", scheduled]]);
  });
});

describe("process manager and reactor input", () => {
  const facade = worlds("memory").facade();
  it("refuses bad options with a code", () => {
    const base = { domain: "Orders", initialState: () => ({}) };
    const codeOfNew = (f: () => unknown) => {
      try {
        f();
        return "made";
      } catch (e) {
        return e instanceof MnemeError ? e.code : String(e);
      }
    };
    expect(codeOfNew(() => new ProcessManager(facade, { ...base, name: "" }))).toBe("INVALID_EVENT_HANDLER");
    expect(codeOfNew(() => new ProcessManager(facade, { ...base, name: "a~b" }))).toBe("INVALID_EVENT_HANDLER");
    expect(codeOfNew(() => new ProcessManager(facade, { ...base, name: "P", domain: "" }))).toBe("INVALID_EVENT_HANDLER");
    expect(codeOfNew(() => new ProcessManager(facade, { ...base, name: "P", initialState: 1 as never }))).toBe("INVALID_EVENT_HANDLER");
    expect(codeOfNew(() => new ProcessManager(facade, { ...base, name: "P", retry: { maxAttempts: 0 } }))).toBe("INVALID_REQUEST");
    expect(codeOfNew(() => new ProcessManager(facade, { ...base, name: "P", retry: { initialDelayMs: -1 } }))).toBe("INVALID_REQUEST");
    expect(codeOfNew(() => new ProcessManager(facade, { ...base, name: "P", retry: { initialDelayMs: 10, maxDelayMs: 5 } }))).toBe(
      "INVALID_REQUEST",
    );
    expect(codeOfNew(() => new Reactor(facade, { name: "R", domain: "Orders", pollMs: 0 }))).toBe("INVALID_REQUEST");
    expect(codeOfNew(() => new Reactor(facade, { name: "R", domain: "Orders", concurrency: 0 }))).toBe("INVALID_REQUEST");
    expect(codeOfNew(() => new Reactor(facade, { name: "R", domain: "Orders", concurrency: 1.5 }))).toBe("INVALID_REQUEST");
    const pm = new ProcessManager(facade, { ...base, name: "P" }).on(OrderPlacedEvt, (_c, s) => s);
    expect(codeOfNew(() => pm.on(OrderPlacedEvt, (_c, s) => s))).toBe("INVALID_EVENT_HANDLER");
    expect(codeOfNew(() => pm.on(PlaceOrderCmd as never, (_c, s) => s))).toBe("INVALID_EVENT_HANDLER");
  });

  it("derives the same commandUuid from the same (handler, event, index), and different ones otherwise", () => {
    const e = newUuid();
    expect(reactionCommandUuid("P", e, 0)).toBe(reactionCommandUuid("P", e, 0));
    const ids = new Set([
      reactionCommandUuid("P", e, 0),
      reactionCommandUuid("P", e, 1),
      reactionCommandUuid("Q", e, 0),
      reactionDedupeKey("P", e),
    ]);
    expect(ids.size).toBe(4);
    expect(reactionCommandUuid("P", e, 0)).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  });

  it.each(BACKENDS)("a step that schedules at a bad time fails the handler on %s and writes nothing", async (backend) => {
    const f = worlds(backend).facade();
    const D = defineDomain("Bad", { description: "bad steps" });
    const Happened = D.event<{ at: number }>("Happened");
    const Do = D.command<{ n: number }>("Do");
    const reqCtx: RequestContext = { senderTenantUuid: "t" };
    const pm = new ProcessManager<{ n: number }>(f, { name: "BadSteps", domain: "Bad", initialState: () => ({ n: 0 }) }).on(
      Happened,
      (ctx, s, p) => {
        ctx.dispatch(Do, { n: 1 });
        ctx.schedule(Do, { n: 2 }, { at: p.at });
        return { n: s.n + 1 };
      },
    );
    f.registerDomain(D);
    f.registerReadmodel(pm);
    await f.start();
    await f.eventRepository.append([{ domain: "Bad", name: "Happened", aggregateUuid: "x", payload: { at: -5 }, tenantUuid: "t", reqCtx }]);
    for (let i = 0; pm.state !== "failed" && i < 400; i++) await new Promise((r) => setTimeout(r, 5));
    expect(pm.state).toBe("failed");
    expect(f.runtime.listEventHandlers().find((h) => h.name === "BadSteps")?.lastError).toContain('"at" must be a valid Date');
    expect(await pm.outbox.list()).toEqual([]);
    expect(await pm.listStates()).toEqual([]);
    expect(pm.lastPosition).toBe(0);
  });
});

describe.each(BACKENDS)("a process manager's command in progress on another live instance (%s)", (backend) => {
  it(
    "costs its outbox entry no attempt: it waits, then sends the command once the claim is gone",
    async () => {
      const clock = new FakeClock();
      // Duplicates give up waiting after 20 ms: each delivery meets the command in progress.
      const f = worlds(backend).facade("relay", { idempotency: { waitMs: 20 } });
      const D = defineDomain("Relay", { description: "a command whose uuid another instance holds" });
      const Opened = D.event<{ n: number }>("Opened");
      const Ring = D.command<{ n: number }>("Ring", { permission: anonymous });
      const Rang = D.event<{ n: number }>("Rang");
      D.handleCommand(Ring, (_ctx, _c, p) => [Rang.create("bell", p)]);
      const pm = new ProcessManager<object>(f, {
        name: "Relay",
        domain: "Relay",
        initialState: () => ({}),
        clock: clock.now,
        retry: { maxAttempts: 2, initialDelayMs: 10, maxDelayMs: 10 },
      }).on(Opened, (ctx, s, p) => {
        ctx.dispatch(Ring, p);
        return s;
      });
      f.registerDomain(D);
      f.registerReadmodel(pm);
      await f.start();
      const eventUuid = newUuid();
      const commandUuid = reactionCommandUuid("Relay", eventUuid, 0);
      // Another instance, alive, holds the command's claim (its lease far away).
      const claimant = { owner: "elsewhere/1", leaseMs: 600_000, domain: "Relay", name: "Ring", tenantUuid: "" };
      expect((await f.commandStore.claim!(commandUuid, claimant)).outcome).toBe("claimed");
      await f.eventRepository.append([
        { eventUuid, domain: "Relay", name: "Opened", aggregateUuid: "door", payload: { n: 1 }, tenantUuid: "" },
      ]);
      await settle(f, [pm], clock.now);
      for (let i = 0; i < 4; i++) {
        clock.advance(1000);
        await pm.outbox.drain();
      }
      const [entry] = await pm.outbox.list();
      expect(entry).toMatchObject({ id: commandUuid, status: "pending", attempts: 0 });
      expect(entry!.lastError).toMatch(/in progress/);
      expect(await f.runtime.listDeadLetters({ eventHandlerName: "Relay" })).toEqual([]);

      await f.commandStore.releaseClaim!(commandUuid, claimant.owner);
      clock.advance(1000);
      await settle(f, [pm], clock.now);
      expect(await pm.outbox.list()).toEqual([]);
      expect((await f.eventRepository.loadAggregate("bell")).map((e) => [e.name, e.commandUuid])).toEqual([["Rang", commandUuid]]);
    },
    TIMEOUT,
  );
});
