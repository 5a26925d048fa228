/**
 * Two mneme apps talking through NATS JetStream: orders publishes
 * OrderPlaced as the public message `{ orderId, item }`; shipping consumes it
 * and runs ShipOrder once per message. test/integration/integration-example.int.test.ts runs it.
 */
import type { NatsConnection } from "@nats-io/transport-node";
import { anonymous, createFacade, defineDomain, type Facade } from "mneme";
import { NatsConsumer, NatsPublisher } from "mneme/nats";

export const Orders = defineDomain("Orders", { description: "orders placed by customers" });
export const PlaceOrder = Orders.command<{ orderUuid: string; item: string }>("PlaceOrder", { permission: anonymous });
export const OrderPlaced = Orders.event<{ item: string }>("OrderPlaced");

export const Shipping = defineDomain("Shipping", { description: "shipments of orders" });
export const ShipOrder = Shipping.command<{ orderUuid: string; item: string }>("ShipOrder", { permission: anonymous });
export const ShipmentCreated = Shipping.event<{ item: string }>("ShipmentCreated");

/** The orders app: places orders and publishes them to `<stream>.placed`. */
export function ordersApp(nc: NatsConnection, stream: string): Facade {
  const f = createFacade({ appName: "orders" });
  f.registerDomain(Orders, (d) => d.handleCommand(PlaceOrder, (_ctx, _c, p) => [OrderPlaced.create(p.orderUuid, { item: p.item })]));
  f.registerReadmodel(
    new NatsPublisher(f, { name: "OrdersOut", domain: "Orders", connection: nc, stream }).on(OrderPlaced, (e) => ({
      subject: `${stream}.placed`,
      body: { orderId: e.aggregateUuid, item: e.payload.item },
    })),
  );
  return f;
}

/** The shipping app: turns each published order into one ShipOrder. */
export function shippingApp(nc: NatsConnection, stream: string): Facade {
  const f = createFacade({ appName: "shipping" });
  f.registerDomain(Shipping, (d) => d.handleCommand(ShipOrder, (_ctx, _c, p) => [ShipmentCreated.create(p.orderUuid, { item: p.item })]));
  f.registerReadmodel(
    new NatsConsumer(f, {
      name: "OrdersIn",
      domain: "Shipping",
      connection: nc,
      stream,
      durable: "shipping",
      toCommand: (m) => {
        const order = m.body as { orderId: string; item: string };
        return { command: ShipOrder, payload: { orderUuid: order.orderId, item: order.item } };
      },
    }),
  );
  return f;
}
