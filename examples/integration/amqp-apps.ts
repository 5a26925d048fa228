/**
 * Two mneme apps talking through RabbitMQ: orders publishes OrderPlaced as
 * the public message `{ orderId, item }` to a topic exchange; shipping
 * consumes it from its own queue and runs ShipOrder once per message (the
 * commandUuid is a uuid v5 of the message-id, so a repeat is a replay).
 * test/integration/integration-example.int.test.ts runs it.
 */
import { type AmqpConnectionLike, AmqpConsumer, AmqpPublisher } from "mneme/amqp";
import { anonymous, createFacade, defineDomain, type Facade } from "mneme";

export const Orders = defineDomain("Orders", { description: "orders placed by customers" });
export const PlaceOrder = Orders.command<{ orderUuid: string; item: string }>("PlaceOrder", { permission: anonymous });
export const OrderPlaced = Orders.event<{ item: string }>("OrderPlaced");

export const Shipping = defineDomain("Shipping", { description: "shipments of orders" });
export const ShipOrder = Shipping.command<{ orderUuid: string; item: string }>("ShipOrder", { permission: anonymous });
export const ShipmentCreated = Shipping.event<{ item: string }>("ShipmentCreated");

/** The orders app: places orders and publishes them to the topic exchange `exchange` as `orders.placed`. */
export function ordersApp(connection: AmqpConnectionLike | string, exchange: string): Facade {
  const f = createFacade({ appName: "orders" });
  f.registerDomain(Orders, (d) => d.handleCommand(PlaceOrder, (_ctx, _c, p) => [OrderPlaced.create(p.orderUuid, { item: p.item })]));
  f.registerReadmodel(
    new AmqpPublisher(f, { name: "OrdersOut", domain: "Orders", connection, exchange, exchangeType: "topic" }).on(OrderPlaced, (e) => ({
      subject: "orders.placed",
      body: { orderId: e.aggregateUuid, item: e.payload.item },
    })),
  );
  return f;
}

/** The shipping app: its queue `queue`, bound to the orders exchange, turns each published order into one ShipOrder. */
export function shippingApp(connection: AmqpConnectionLike | string, exchange: string, queue: string): Facade {
  const f = createFacade({ appName: "shipping" });
  f.registerDomain(Shipping, (d) => d.handleCommand(ShipOrder, (_ctx, _c, p) => [ShipmentCreated.create(p.orderUuid, { item: p.item })]));
  f.registerReadmodel(
    new AmqpConsumer(f, {
      name: "OrdersIn",
      domain: "Shipping",
      connection,
      queue,
      assertQueue: true,
      // Both apps declare the exchange, so either may start first.
      bindings: [{ exchange, routingKey: "orders.*", exchangeType: "topic" }],
      toCommand: (m) => {
        const order = m.body as { orderId: string; item: string };
        return { command: ShipOrder, payload: { orderUuid: order.orderId, item: order.item } };
      },
    }),
  );
  return f;
}
