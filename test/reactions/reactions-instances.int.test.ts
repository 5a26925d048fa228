/**
 * Two app instances on one Postgres schema run the same process manager and
 * reactor: one holds each handler's processing lock and handles every event
 * (its outbox worker alone dispatches and charges), the other stands by; when
 * the first stops, the second takes over from the checkpoint and the outbox
 * as they are, and nothing is sent twice.
 */
import { describe, expect, it } from "vitest";
import { newUuid, type Facade } from "mneme";
import { installOrders } from "../../examples/orders/fulfilment.js";
import { AddStockCmd, PlaceOrderCmd } from "../../examples/orders/orders-domain.js";
import { FakeClock, RecordingProvider, reactionWorlds, settle } from "../support/reactions-world.js";

const worlds = reactionWorlds();
const reqCtx = { senderAccountUuid: "acc", senderTenantUuid: "t1" };

describe("two instances on Postgres", () => {
  it("each event is handled by one instance; the other takes over when it stops, sending nothing twice", async () => {
    const world = worlds("postgres");
    const clock = new FakeClock();
    const instance = (provider: RecordingProvider) => {
      const f = world.facade("shop", { delivery: { lockRetryMs: 50 } });
      return { f, provider, ...installOrders(f, { provider, paymentTimeoutMs: 600_000, clock: clock.now, pollMs: 20 }) };
    };
    const a = instance(new RecordingProvider());
    const b = instance(new RecordingProvider());
    await a.f.start();
    await b.f.start();
    expect([a.fulfilment.state, a.gateway.state]).toEqual(["running", "running"]);
    expect([b.fulfilment.state, b.gateway.state]).toEqual(["standby", "standby"]);
    await a.f.dispatch(AddStockCmd, { sku: "book", quantity: 1000 }, { reqCtx });
    const orders: string[] = [];
    const place = async (f: Facade, n: number) => {
      for (let i = 0; i < n; i++) {
        const orderUuid = newUuid();
        orders.push(orderUuid);
        await f.dispatch(PlaceOrderCmd, { orderUuid, sku: "book", quantity: 1, amount: 5 }, { reqCtx });
      }
    };
    await Promise.all([place(a.f, 8), place(b.f, 8)]);
    await settle(a.f, [a.fulfilment, a.gateway], clock.now);
    expect(a.provider.calls).toHaveLength(16);
    expect(b.provider.calls).toEqual([]);
    expect(b.fulfilment.state).toBe("standby");

    // a goes away with orders in flight; b takes over.
    await place(a.f, 4);
    await a.f.stop();
    for (let i = 0; b.fulfilment.state !== "running" || b.gateway.state !== "running"; i++) {
      if (i > 400) throw new Error(`b did not take over: ${b.fulfilment.state}, ${b.gateway.state}`);
      await new Promise((r) => setTimeout(r, 10));
    }
    await place(b.f, 4);
    await settle(b.f, [b.fulfilment, b.gateway], clock.now);

    const calls = [...a.provider.calls, ...b.provider.calls];
    expect(new Set(calls.map((c) => c.orderUuid))).toEqual(new Set(orders));
    // Each payment was asked for once per order, by whichever instance ran the reactor then.
    expect(calls).toHaveLength(orders.length);
    for (const orderUuid of orders) {
      const names = (await b.f.eventRepository.loadAggregate(orderUuid)).map((e) => e.name);
      expect(names, orderUuid).toEqual(["OrderPlaced", "PaymentRequested", "PaymentCharged", "OrderShipped"]);
    }
    expect(await b.fulfilment.outbox.list()).toEqual([]);
    expect(await b.gateway.outbox.list()).toEqual([]);
  });
});
