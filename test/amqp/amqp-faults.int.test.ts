/**
 * mneme/amqp under faults, against real brokers and processes. Publishing
 * goes on while a RabbitMQ node (a private one: own node name, ports and data
 * folder, so the machine's broker is left alone) is stopped and started
 * again, and while the publishing app is killed with SIGKILL and restarted:
 * every chosen event ends in the queue (RabbitMQ keeps repeats: deduped by
 * message-id they are exactly the events), and each aggregate's messages are
 * in position order. Consuming goes on while the consuming app is killed
 * mid-batch: each message's command ran once, and the poison message is a
 * dead letter.
 */
import { fileURLToPath } from "node:url";
import type { GetMessage } from "amqplib";
import { describe, expect, it } from "vitest";
import { createFacade, type Event, newUuid } from "mneme";
import { AmqpConsumer, AmqpPublisher } from "mneme/amqp";
import { messageCommandUuid } from "mneme/reactions";
import { createSqliteBackends } from "mneme/sqlite";
import { Counter, Increment, Incremented, incrementEvents } from "../support/counter-domain.js";
import {
  adminChannel,
  AMQP_URL,
  amqpConnection,
  amqpName,
  drainQueue,
  makeExchange,
  makeQueue,
  privateRabbit,
} from "../support/amqp-broker.js";
import { killedThenFinished as killRounds } from "../support/kill-rounds.js";
import { sqliteScratch } from "../support/sqlite-scratch.js";
import { until } from "../support/until.js";

const scratch = sqliteScratch("amqp-faults");
const script = fileURLToPath(new URL("../support/amqp-app-process.ts", import.meta.url));
const cwd = fileURLToPath(new URL("../..", import.meta.url));

/**
 * Deduped by message-id, the queue holds every event exactly; the first
 * copies of each aggregate's messages are in position order, and a repeat
 * only ever repeats a message that came just before in its aggregate's lane.
 */
function expectPublishedInOrder(messages: GetMessage[], events: Event[]): number {
  const ids = messages.map((m) => m.properties.messageId as string);
  expect([...new Set(ids)].sort()).toEqual(events.map((e) => e.eventUuid).sort());
  const byAggregate = new Map<string, number[]>();
  for (const m of messages) {
    const a = String(m.properties.headers!["mneme-aggregate"]);
    byAggregate.set(a, [...(byAggregate.get(a) ?? []), Number(m.properties.headers!["mneme-position"])]);
  }
  for (const [a, positions] of byAggregate) {
    const firsts = positions.filter((p, i) => positions.indexOf(p) === i);
    expect(firsts, a).toEqual([...firsts].sort((x, y) => x - y));
    // A lane republishes from its first unconfirmed entry: never anything older than the one before it.
    positions.forEach((p, i) => {
      if (i > 0 && p < positions[i - 1]!) expect(firsts.indexOf(positions[i - 1]!) - firsts.indexOf(p), a).toBeLessThanOrEqual(1);
    });
  }
  return ids.length - new Set(ids).size;
}

describe("publishing through faults", () => {
  it("while the RabbitMQ node is stopped and started again under load: every event, in order per aggregate", async () => {
    const node = await privateRabbit();
    await node.start();
    const conn = await amqpConnection(node.url);
    const admin = await adminChannel(node.url);
    const exchange = amqpName("restart");
    const queue = amqpName("restart-q");
    await makeExchange(admin, exchange);
    await makeQueue(admin, queue, exchange);
    const f = scratch.keep(createFacade({ ...createSqliteBackends({ filename: scratch.newFile() }) }));
    f.registerDomain(Counter);
    const publisher = new AmqpPublisher(f, {
      name: "Out",
      domain: "Counter",
      connection: conn,
      exchange,
      confirmTimeoutMs: 1000,
      retry: { initialDelayMs: 20, maxDelayMs: 200 },
    }).on(Incremented, (e) => ({ subject: "counter.incremented", body: e.payload }));
    f.registerReadmodel(publisher);
    await f.start();
    const counters = Array.from({ length: 6 }, () => newUuid());
    const dispatchSome = async (from: number, n: number) => {
      for (let i = from; i < from + n; i++) await f.dispatch(Increment, { counterUuid: counters[i % counters.length]!, by: i });
    };
    await dispatchSome(0, 150);
    await node.stop();
    await dispatchSome(150, 150);
    await node.start();
    await dispatchSome(300, 100);
    await node.stop();
    await node.start();
    await dispatchSome(400, 100);
    await until(async () => (await publisher.outbox.counts()).pending === 0, "the outbox is empty", 90_000, 50);
    expect((await publisher.outbox.counts()).dead).toBe(0);
    const check = await adminChannel(node.url);
    const messages = await drainQueue(check, queue);
    expectPublishedInOrder(messages, await incrementEvents(f));
    const listed = f.runtime.listEventHandlers().find((h) => h.name === "Out")!.integration!;
    expect(listed.connected).toBe(true);
    expect(listed.handled).toBeGreaterThanOrEqual(500);
    // The outages were felt (publishes with no broker, none counted as an attempt: no dead letter).
    expect(listed.failures).toBeGreaterThan(0);
  }, 180_000);

  it("while the app is killed with SIGKILL and restarted: every event, in order per aggregate", async () => {
    const admin = await adminChannel();
    const exchange = amqpName("sigkill");
    const queue = amqpName("sigkill-q");
    await makeExchange(admin, exchange);
    await makeQueue(admin, queue, exchange);
    const file = scratch.newFile();
    await killRounds(script, cwd, ["publish", file, AMQP_URL, exchange, "400"], 4, 20, 120);
    const f = scratch.keep(createFacade({ ...createSqliteBackends({ filename: file }) }));
    f.registerDomain(Counter);
    const events = await incrementEvents(f);
    expect(events).toHaveLength(400);
    expectPublishedInOrder(await drainQueue(admin, queue), events);
  }, 180_000);
});

describe("consuming through faults", () => {
  it("while the RabbitMQ node is stopped and started again: the consumer opens again, each message's command runs once", async () => {
    const node = await privateRabbit();
    await node.start();
    const queue = amqpName("consume-restart");
    const send = async (from: number, n: number) => {
      const admin = await adminChannel(node.url);
      for (let i = from; i < from + n; i++)
        admin.sendToQueue(queue, Buffer.from(JSON.stringify({ counter, by: i })), { messageId: `m-${i}`, persistent: true });
      await admin.close();
    };
    const counter = newUuid();
    const f = scratch.keep(createFacade({ ...createSqliteBackends({ filename: scratch.newFile() }) }));
    f.registerDomain(Counter);
    f.registerReadmodel(
      new AmqpConsumer(f, {
        name: "In",
        domain: "Counter",
        connection: await amqpConnection(node.url),
        queue,
        assertQueue: true,
        concurrency: 4,
        toCommand: (m) => ({ command: Increment, payload: { counterUuid: counter, by: (m.body as { by: number }).by } }),
      }),
    );
    await f.start();
    const connected = () => f.runtime.listEventHandlers().find((h) => h.name === "In")!.integration!.connected;
    await until(connected, "the consumer is connected");
    await send(0, 200);
    await node.stop();
    await until(() => !connected(), "the consumer saw the broker go");
    await node.start();
    await send(200, 100);
    await until(async () => (await incrementEvents(f)).length >= 300, "300 commands ran", 60_000, 50);
    const events = await incrementEvents(f);
    expect(events).toHaveLength(300);
    expect(new Set(events.map((e) => e.commandUuid))).toEqual(new Set(Array.from({ length: 300 }, (_, i) => messageCommandUuid(`m-${i}`))));
    await until(connected, "the consumer is connected again");
    const check = await adminChannel(node.url);
    await until(async () => (await check.checkQueue(queue)).messageCount === 0, "every message is acked");
  }, 180_000);

  it("with the consumer killed mid-batch: each message's command runs once, the poison message is a dead letter", async () => {
    const admin = await adminChannel();
    const queue = amqpName("consume");
    await makeQueue(admin, queue);
    const counter = "00000000-0000-4000-8000-000000000001";
    const ids = Array.from({ length: 300 }, () => newUuid());
    ids.forEach((id, i) => admin.sendToQueue(queue, Buffer.from(JSON.stringify({ counter, by: i })), { messageId: id, persistent: true }));
    admin.sendToQueue(queue, Buffer.from(JSON.stringify({ poison: true })), { messageId: "the-poison", persistent: true });
    const file = scratch.newFile();
    const out = await killRounds(script, cwd, ["consume", file, AMQP_URL, queue, "300"], 3, 10, 100);
    const dead = JSON.parse(out.split("\n").find((l) => l.startsWith("["))!) as { eventUuid: string; lastError: string }[];
    expect(dead.map((d) => d.eventUuid)).toEqual(["the-poison"]);
    expect(dead[0]!.lastError).toBe("poison");

    const f = scratch.keep(createFacade({ ...createSqliteBackends({ filename: file }) }));
    f.registerDomain(Counter);
    const events = await incrementEvents(f);
    expect(events).toHaveLength(300);
    expect(new Set(events.map((e) => e.commandUuid))).toEqual(new Set(ids.map((id) => messageCommandUuid(id))));
    expect(events.map((e) => (e.payload as { by: number }).by).sort((a, b) => a - b)).toEqual(ids.map((_, i) => i));
    // The last app stopped: every message it held unacked would be back in the queue.
    await until(async () => (await admin.checkQueue(queue)).messageCount === 0, "every message is acked (the poison one too)");
  }, 180_000);
});

describe("the listing through an outage", () => {
  it("publisher and consumer say connected: false with lastError within 5 s of the node going away, and connected again after", async () => {
    const node = await privateRabbit();
    await node.start();
    const queue = amqpName("status-in");
    const out = amqpName("status-out");
    const conn = await amqpConnection(node.url);
    const f = scratch.keep(createFacade({ ...createSqliteBackends({ filename: scratch.newFile() }) }));
    f.registerDomain(Counter);
    const counter = newUuid();
    f.registerReadmodel(
      new AmqpPublisher(f, { name: "Out", domain: "Counter", connection: conn, exchange: "" }).on(Incremented, (e) => ({
        subject: out,
        body: e.payload,
      })),
    );
    f.registerReadmodel(
      new AmqpConsumer(f, {
        name: "In",
        domain: "Counter",
        connection: conn,
        queue,
        assertQueue: true,
        toCommand: (m) => ({ command: Increment, payload: { counterUuid: counter, by: (m.body as { by: number }).by } }),
      }),
    );
    await f.start();
    const send = async (id: string) => {
      const admin = await adminChannel(node.url);
      await admin.assertQueue(out, { durable: true });
      admin.sendToQueue(queue, Buffer.from(JSON.stringify({ by: 1 })), { messageId: id, persistent: true });
      await admin.close();
    };
    const info = (name: string) => f.runtime.listEventHandlers().find((h) => h.name === name)!.integration!;
    await until(() => info("In").connected, "the consumer is connected");
    await send("before");
    // The publisher publishes the consumer's event.
    await until(() => info("Out").handled === 1 && info("In").handled === 1, "a message each way", 30_000);
    expect(info("Out").connected).toBe(true);
    expect(info("In").lastError).toBeUndefined();

    // Nothing is published or consumed during the outage: only the connection can tell.
    await node.stop();
    await until(() => ["Out", "In"].every((n) => !info(n).connected && info(n).lastError !== undefined), "both list the outage", 5000);

    await node.start();
    await until(() => info("Out").connected && info("In").connected, "both are connected again", 60_000);
    await send("after");
    await until(() => info("Out").handled === 2 && info("In").handled === 2, "a message each way after the outage", 30_000);
  }, 180_000);
});
