/**
 * The orders example run on memory, SQLite and Postgres: the chain place
 * order -> reserve stock -> charge -> ship; the payment timeout (a scheduled
 * command) and its compensation (release the stock); the dead-letter list
 * and the Runtime's views and actions; a restore from zero that sends nothing.
 */
import { describe, expect, it } from "vitest";
import { newUuid, type Facade } from "mneme";
import { ListDeadLetters, ListScheduledCommands } from "mneme/runtime";
import { installOrders } from "../../examples/orders/fulfilment.js";
import { AddStockCmd, Order, PlaceOrderCmd, Stock } from "../../examples/orders/orders-domain.js";
import { BACKENDS, FakeClock, RecordingProvider, reactionWorlds, settle } from "../support/reactions-world.js";

const worlds = reactionWorlds();
const reqCtx = { senderAccountUuid: "acc", senderSessionUuid: "ses", senderIdentityUuid: "idn", senderTenantUuid: "t1" };
const TIMEOUT = 15 * 60_000;

async function shop(backend: (typeof BACKENDS)[number], retry = { maxAttempts: 3, initialDelayMs: 1000 }) {
  const clock = new FakeClock();
  const provider = new RecordingProvider();
  const facade = worlds(backend).facade();
  const { fulfilment, gateway } = installOrders(facade, { provider, paymentTimeoutMs: TIMEOUT, clock: clock.now, retry });
  await facade.start();
  await facade.dispatch(AddStockCmd, { sku: "book", quantity: 5 }, { reqCtx });
  const settled = () => settle(facade, [fulfilment, gateway], clock.now);
  return { facade, clock, provider, fulfilment, gateway, settled };
}

async function orderOf(facade: Facade, orderUuid: string) {
  const events = await facade.eventRepository.loadAggregate(orderUuid);
  return { status: events.reduce((st, e) => Order.apply(st, e), Order.initialState()).status, names: events.map((e) => e.name) };
}

async function stockOf(facade: Facade) {
  return (await facade.eventRepository.loadAggregate("book")).reduce((st, e) => Stock.apply(st, e), Stock.initialState());
}

describe.each(BACKENDS)("the orders example on %s", (backend) => {
  it("places, reserves, charges once with a stable key, ships; nothing is left to do", async () => {
    const { facade, provider, fulfilment, gateway, settled } = await shop(backend);
    const orderUuid = newUuid();
    const placed = await facade.dispatch(PlaceOrderCmd, { orderUuid, sku: "book", quantity: 2, amount: 30 }, { reqCtx });
    await settled();
    expect(await orderOf(facade, orderUuid)).toEqual({
      status: "shipped",
      names: ["OrderPlaced", "PaymentRequested", "PaymentCharged", "OrderShipped"],
    });
    expect(await stockOf(facade)).toEqual({ available: 3, reserved: { [orderUuid]: 2 } });
    expect(provider.calls).toHaveLength(1);
    expect(provider.calls[0]).toMatchObject({ orderUuid, amount: 30 });
    // The process completed: its state is gone, its payment timeout was cancelled, nothing is pending.
    expect(await fulfilment.getState(orderUuid)).toBeUndefined();
    expect(await fulfilment.outbox.list()).toEqual([]);
    expect(await gateway.outbox.list()).toEqual([]);
    expect(await facade.query(ListScheduledCommands, {}, { reqCtx })).toEqual([]);
    // Every event of the chain carries the chain's correlation id (the first command's uuid), and each
    // command sent for an event names that event as its cause.
    const all = [];
    for await (const batch of facade.eventRepository.readAll({ afterPosition: 0 })) all.push(...batch);
    const chain = all.filter((e) => e.name !== "StockAdded");
    expect(chain.map((e) => e.name)).toEqual(["OrderPlaced", "StockReserved", "PaymentRequested", "PaymentCharged", "OrderShipped"]);
    for (const e of chain) expect(e.correlationId).toBe(placed.commandUuid);
    for (const e of chain.slice(1)) expect(e.reqCtx.correlationId).toBe(placed.commandUuid);
    expect(chain.slice(1).map((e) => e.reqCtx.causationId)).toEqual(chain.slice(0, -1).map((e) => e.eventUuid));
  });

  it("cancels an order whose payment times out, and releases its stock (the compensating step)", async () => {
    const { facade, clock, provider, fulfilment, gateway, settled } = await shop(backend);
    provider.failNext = 100; // the provider is down
    const orderUuid = newUuid();
    await facade.dispatch(PlaceOrderCmd, { orderUuid, sku: "book", quantity: 2, amount: 30 }, { reqCtx });
    await settled();
    expect(await orderOf(facade, orderUuid)).toMatchObject({ status: "awaiting-payment" });
    expect(await stockOf(facade)).toEqual({ available: 3, reserved: { [orderUuid]: 2 } });
    const scheduled = await facade.query(ListScheduledCommands, {}, { reqCtx });
    expect(scheduled).toHaveLength(1);
    expect(scheduled[0]).toMatchObject({ eventHandlerName: "Fulfilment", domain: "Orders", name: "CancelOrder", attempts: 0 });
    expect(scheduled[0]!.dueAt).toBeGreaterThan(clock.ms + TIMEOUT - 60_000);
    expect(await fulfilment.getState(orderUuid)).toMatchObject({ step: "paying", timeout: scheduled[0]!.commandUuid });
    // The charge is retried with backoff and the same key, then dead.
    for (let i = 0; i < 3; i++) {
      clock.advance(10_000);
      await settled();
    }
    expect(provider.calls.length).toBe(3);
    expect(new Set(provider.calls.map((c) => c.idempotencyKey)).size).toBe(1);
    const dead = await facade.query(ListDeadLetters, {}, { reqCtx });
    expect(dead).toHaveLength(1);
    expect(dead[0]).toMatchObject({ eventHandlerName: "PaymentGateway", kind: "effect", target: "Orders.PaymentRequested", attempts: 3 });
    expect(dead[0]!.lastError).toContain("payment provider unavailable");
    expect(await gateway.outbox.counts()).toEqual({ pending: 0, scheduled: 0, dead: 1 });
    // The timeout fires once, the order is cancelled and the stock released.
    clock.advance(TIMEOUT);
    await settled();
    expect(await orderOf(facade, orderUuid)).toEqual({
      status: "cancelled",
      names: ["OrderPlaced", "PaymentRequested", "OrderCancelled"],
    });
    expect(await stockOf(facade)).toEqual({ available: 5, reserved: {} });
    expect(await fulfilment.getState(orderUuid)).toBeUndefined();
    expect(await facade.query(ListScheduledCommands, {}, { reqCtx })).toEqual([]);
  });

  it("cancels an order that is out of stock without releasing anything", async () => {
    const { facade, provider, fulfilment, settled } = await shop(backend);
    const orderUuid = newUuid();
    await facade.dispatch(PlaceOrderCmd, { orderUuid, sku: "book", quantity: 9, amount: 30 }, { reqCtx });
    await settled();
    expect(await orderOf(facade, orderUuid)).toEqual({ status: "cancelled", names: ["OrderPlaced", "OrderCancelled"] });
    expect(await stockOf(facade)).toEqual({ available: 5, reserved: {} });
    expect(provider.calls).toEqual([]);
    expect(await fulfilment.getState(orderUuid)).toBeUndefined();
  });
});
