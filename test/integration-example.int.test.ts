/** examples/integration: the orders app's orders reach the shipping app through JetStream, each shipped once. */
import { expect, it } from "vitest";
import { type Event, newUuid } from "mneme";
import { ordersApp, PlaceOrder, shippingApp } from "../examples/integration/nats-apps.js";
import { makeStream, natsConnection, streamName } from "./support/nats-broker.js";
import { until } from "./support/until.js";

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
