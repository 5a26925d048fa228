/** examples/integration: the orders app's orders reach the shipping app through JetStream, and through RabbitMQ, each shipped once. */
import { expect, it } from "vitest";
import { type Event, type Facade, newUuid } from "mneme";
import * as amqpApps from "../../examples/integration/amqp-apps.js";
import { ordersApp, PlaceOrder, shippingApp } from "../../examples/integration/nats-apps.js";
import { adminChannel, AMQP_URL, amqpConnection, amqpName } from "../support/amqp-broker.js";
import { makeStream, natsConnection, streamName } from "../support/nats-broker.js";
import { until } from "../support/until.js";

async function allEvents(f: Facade): Promise<Event[]> {
  const all: Event[] = [];
  for await (const batch of f.eventRepository.readAll({ afterPosition: 0 })) all.push(...batch);
  return all;
}

it("orders placed in one app are shipped once by the other, through NATS JetStream", async () => {
  const nc = await natsConnection();
  const stream = streamName("example");
  await makeStream(nc, stream);
  const orders = ordersApp(nc, stream);
  const shipping = shippingApp(nc, stream);
  await orders.start();
  await shipping.start();
  try {
    const placed = [newUuid(), newUuid(), newUuid()];
    for (const orderUuid of placed) await orders.dispatch(PlaceOrder, { orderUuid, item: "book" });
    const shipments = async () => {
      const all: Event[] = [];
      for await (const batch of shipping.eventRepository.readAll({ afterPosition: 0 })) all.push(...batch);
      return all;
    };
    await until(async () => (await shipments()).length === 3, "three shipments");
    expect((await shipments()).map((e) => e.aggregateUuid).sort()).toEqual([...placed].sort());
  } finally {
    await orders.stop();
    await shipping.stop();
  }
});

it("orders placed in one app are shipped once by the other, through RabbitMQ", async () => {
  const conn = await amqpConnection();
  const admin = await adminChannel();
  const exchange = amqpName("orders");
  const queue = amqpName("shipping");
  // The shipping app's connection is a URL: mneme connects to it.
  const shipping = amqpApps.shippingApp(AMQP_URL, exchange, queue);
  const orders = amqpApps.ordersApp(conn, exchange);
  try {
    await shipping.start();
    // The queue is bound before the first order is published (the publisher's messages are mandatory).
    await until(
      () => shipping.runtime.listEventHandlers().find((h) => h.name === "OrdersIn")!.integration!.connected,
      "shipping is connected",
    );
    await orders.start();
    const placed = [newUuid(), newUuid(), newUuid()];
    for (const orderUuid of placed) await orders.dispatch(amqpApps.PlaceOrder, { orderUuid, item: "book" });
    await until(async () => (await allEvents(shipping)).length === 3, "three shipments");
    expect((await allEvents(shipping)).map((e) => e.aggregateUuid).sort()).toEqual([...placed].sort());
  } finally {
    await orders.stop();
    await shipping.stop();
    await admin.deleteQueue(queue).catch(() => undefined);
    await admin.deleteExchange(exchange).catch(() => undefined);
  }
});
