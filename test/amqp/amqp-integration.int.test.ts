/**
 * mneme/amqp against the machine's RabbitMQ: a publisher publishes the chosen
 * events persistent, with the event uuid as message-id, one aggregate's in
 * position order, on a confirm channel, and is listed by the Runtime; a
 * message no queue takes fails and becomes a dead letter; a consumer turns
 * messages into commands once each (a redelivered or repeated message id is a
 * replay), acks them, and makes a poison message a dead letter (acked, or
 * rejected to the queue's dead-letter exchange).
 */
import { describe, expect, it } from "vitest";
import { type Event, type Facade, MnemeError, newUuid } from "mneme";
import { AmqpConsumer, type AmqpConsumerOptions, AmqpPublisher } from "mneme/amqp";
import { messageCommandUuid } from "mneme/reactions";
import { Counter, Increment, Incremented } from "../support/counter-domain.js";
import {
  adminChannel,
  AMQP_URL,
  amqpConnection,
  amqpName,
  drainQueue,
  makeExchange,
  makeQueue,
  queueCount,
} from "../support/amqp-broker.js";
import { startedFacades } from "../support/started-facades.js";
import { until } from "../support/until.js";

const started = startedFacades();
const conn = await amqpConnection();
const admin = await adminChannel();
async function allEvents(f: Facade): Promise<Event[]> {
  const all: Event[] = [];
  for await (const batch of f.eventRepository.readAll({ afterPosition: 0 })) all.push(...batch);
  return all;
}
const bytes = (v: unknown) => Buffer.from(typeof v === "string" ? v : JSON.stringify(v));
/** A started facade whose consumer "In" turns each message of `queue` into an Increment of `counter` by the body's `by`. */
function startedIncrementer(queue: string, counter: string, extra: Partial<AmqpConsumerOptions> = {}): Promise<Facade> {
  return started((f) => {
    f.registerDomain(Counter);
    f.registerReadmodel(
      new AmqpConsumer(f, {
        name: "In",
        domain: "Counter",
        connection: conn,
        queue,
        toCommand: (m) => ({ command: Increment, payload: { counterUuid: counter, by: (m.body as { by: number }).by } }),
        ...extra,
      }),
    );
  });
}

describe("AmqpPublisher", () => {
  it("publishes each chosen event once, persistent, the event uuid as message-id, in position order per aggregate, and is listed", async () => {
    const exchange = amqpName("pub");
    const queue = amqpName("pub-q");
    await makeExchange(admin, exchange);
    await makeQueue(admin, queue, exchange, "counter.*");
    let publisher!: AmqpPublisher;
    const f = await started((f) => {
      f.registerDomain(Counter);
      publisher = new AmqpPublisher(f, { name: "CountersOut", domain: "Counter", connection: conn, exchange }).on(Incremented, (e) =>
        e.payload.by < 0 ? undefined : { subject: "counter.incremented", body: { counter: e.aggregateUuid, by: e.payload.by } },
      );
      f.registerReadmodel(publisher);
    });
    const counters = [newUuid(), newUuid(), newUuid()];
    for (let i = 0; i < 30; i++) await f.dispatch(Increment, { counterUuid: counters[i % 3]!, by: i === 7 ? -1 : i });
    await until(async () => (await queueCount(admin, queue)) === 29, "29 messages are in the queue");
    await publisher.outbox.drain();

    const events = (await allEvents(f)).filter((e: Event) => e.name === "Incremented");
    const messages = await drainQueue(admin, queue);
    expect(messages.map((m) => m.properties.messageId as string).sort()).toEqual(
      events
        .filter((e) => (e.payload as { by: number }).by >= 0)
        .map((e) => e.eventUuid)
        .sort(),
    );
    for (const m of messages) expect(m.properties.deliveryMode).toBe(2);
    for (const c of counters) {
      const positions = messages
        .filter((m) => m.properties.headers?.["mneme-aggregate"] === c)
        .map((m) => Number(m.properties.headers?.["mneme-position"]));
      expect(positions).toEqual([...positions].sort((a, b) => a - b));
    }
    const first = messages.find((m) => m.properties.messageId === events[0]!.eventUuid)!;
    expect(JSON.parse(first.content.toString())).toEqual({ counter: counters[0], by: 0 });
    expect(first.properties.contentType).toBe("application/json");
    expect(first.properties.headers?.["mneme-event"]).toBe("Counter.Incremented");
    expect(first.fields.routingKey).toBe("counter.incremented");

    await until(() => f.runtime.listEventHandlers().find((h) => h.name === "CountersOut")?.integration?.lag === 0, "the lag is 0");
    const listed = f.runtime.listEventHandlers().find((h) => h.name === "CountersOut")!;
    expect(listed.state).toBe("running");
    expect(listed.integration).toMatchObject({
      role: "publisher",
      broker: "amqp",
      target: exchange,
      handled: 29,
      failures: 0,
      connected: true,
    });
  });

  it("a message no queue takes, or one to an exchange that does not exist, becomes a dead letter; the aggregate's next events still go", async () => {
    const exchange = amqpName("dead");
    const queue = amqpName("dead-q");
    await makeExchange(admin, exchange);
    await makeQueue(admin, queue, exchange, "bound");
    const f = await started((f) => {
      f.registerDomain(Counter);
      f.registerReadmodel(
        new AmqpPublisher(f, {
          name: "Out",
          domain: "Counter",
          connection: AMQP_URL,
          exchange,
          retry: { maxAttempts: 1, initialDelayMs: 1, maxDelayMs: 5 },
        }).on(Incremented, (e) => ({
          subject: e.payload.by === 2 ? "nobody-listens" : "bound",
          ...(e.payload.by === 3 ? { exchange: amqpName("missing") } : {}),
          body: e.payload,
        })),
      );
    });
    const c = newUuid();
    // Other aggregates' messages in flight on the channel the broker closes for the missing exchange are not to blame
    // (one attempt would make them dead): all lanes start at once, so theirs may be in flight when c's third meets it.
    const others = Array.from({ length: 8 }, () => newUuid());
    await f.runtime.controlEventHandler({ eventHandlerName: "Out", action: "stop" });
    for (let by = 1; by <= 4; by++) {
      await f.dispatch(Increment, { counterUuid: c, by });
      await Promise.all(others.map((o) => f.dispatch(Increment, { counterUuid: o, by: 10 })));
    }
    await Promise.all(others.map((o) => f.dispatch(Increment, { counterUuid: o, by: 10 })));
    await f.runtime.controlEventHandler({ eventHandlerName: "Out", action: "start" });
    await until(async () => (await f.runtime.listDeadLetters({ eventHandlerName: "Out" })).length === 2, "two dead letters");
    await until(async () => (await queueCount(admin, queue)) === 42, "two messages of c and 40 others are in the queue");
    const dead = await f.runtime.listDeadLetters({ eventHandlerName: "Out" });
    expect(dead.map((d) => d.attempts)).toEqual([1, 1]);
    expect(dead.map((d) => d.lastError).join("\n")).toMatch(/no queue is bound for routing key nobody-listens/);
    expect(dead.map((d) => d.lastError).join("\n")).toMatch(/404/);
    expect(
      (await drainQueue(admin, queue)).map((m) => (JSON.parse(m.content.toString()) as { by: number }).by).filter((by) => by !== 10),
    ).toEqual([1, 4]);
    expect(await f.runtime.listDeadLetters({ eventHandlerName: "Out" })).toHaveLength(2);
  });

  it("refuses a connection that is not one, and an exchange type without an exchange", () => {
    const f = { eventRepository: {}, readmodelStoreBackend: {} } as never;
    expect(() => new AmqpPublisher(f, { name: "X", domain: "Counter", connection: {} as never, exchange: "x" })).toThrow(MnemeError);
    expect(() => new AmqpPublisher(f, { name: "X", domain: "Counter", connection: "http://x", exchange: "x" })).toThrow(/amqp:\/\/ URL/);
    expect(() => new AmqpPublisher(f, { name: "X", domain: "Counter", connection: conn, exchange: "", exchangeType: "topic" })).toThrow(
      /exchangeType/,
    );
  });
});

describe("AmqpConsumer", () => {
  it("turns each message into one command (commandUuid: uuid v5 of the message-id), acks it, and dead-letters poison messages", async () => {
    const queue = amqpName("in");
    await makeQueue(admin, queue);
    const counter = newUuid();
    const ids = Array.from({ length: 20 }, () => newUuid());
    for (const id of ids) admin.sendToQueue(queue, bytes({ counter, by: 1 }), { messageId: id, persistent: true });
    // The same message id again: RabbitMQ keeps it, the consumer's command is a replay.
    admin.sendToQueue(queue, bytes({ counter, by: 1 }), { messageId: ids[0]! });
    admin.sendToQueue(queue, bytes("not json"), { messageId: "poison-json" });
    admin.sendToQueue(queue, bytes({ counter, by: 100 }), { messageId: "poison-throws", headers: { fail: "always" } });
    let consumer!: AmqpConsumer;
    const f = await started((f) => {
      f.registerDomain(Counter);
      consumer = new AmqpConsumer(f, {
        name: "CountersIn",
        domain: "Counter",
        connection: conn,
        queue,
        concurrency: 4,
        retry: { maxAttempts: 3, initialDelayMs: 1, maxDelayMs: 5 },
        toCommand: (m) => {
          if (m.headers.fail === "always") throw new Error("cannot take this one");
          const b = m.body as { counter: string; by: number };
          return { command: Increment, payload: { counterUuid: b.counter, by: b.by } };
        },
      });
      f.registerReadmodel(consumer);
    });
    await until(async () => (await f.runtime.listDeadLetters({ eventHandlerName: "CountersIn" })).length === 2, "two dead letters");
    await until(async () => (await admin.checkQueue(queue)).messageCount === 0, "every message is taken");
    await until(() => f.runtime.listEventHandlers().find((x) => x.name === "CountersIn")!.integration!.handled === 21, "21 handled");
    const events = (await allEvents(f)).filter((e: Event) => e.aggregateUuid === counter);
    expect(events).toHaveLength(20);
    expect(new Set(events.map((e) => e.commandUuid))).toEqual(new Set(ids.map((id) => messageCommandUuid(id))));

    const dead = await f.runtime.listDeadLetters({ eventHandlerName: "CountersIn" });
    const byId = new Map(dead.map((d) => [d.eventUuid, d]));
    expect(byId.get("poison-json")).toMatchObject({ attempts: 1, kind: "command", eventPath: `amqp:${queue}` });
    expect(byId.get("poison-json")!.lastError).toContain("not JSON");
    expect(byId.get("poison-throws")).toMatchObject({ attempts: 3, lastError: "cannot take this one" });

    await until(() => f.runtime.listEventHandlers().find((x) => x.name === "CountersIn")!.integration!.lag === 0, "the lag is 0");
    const listed = f.runtime.listEventHandlers().find((x) => x.name === "CountersIn")!;
    expect(listed.integration).toMatchObject({
      role: "consumer",
      broker: "amqp",
      target: queue,
      handled: 21,
      connected: true,
      deadLetters: 2,
    });

    // Stop and start: the queue keeps what came meanwhile; nothing runs again.
    await f.runtime.controlEventHandler({ eventHandlerName: "CountersIn", action: "stop" });
    expect(f.runtime.listEventHandlers().find((x) => x.name === "CountersIn")!.integration!.connected).toBe(false);
    admin.sendToQueue(queue, bytes({ counter, by: 1 }), { messageId: "after-restart" });
    admin.sendToQueue(queue, bytes({ counter, by: 1 }), { messageId: ids[1]! });
    await f.runtime.controlEventHandler({ eventHandlerName: "CountersIn", action: "start" });
    await until(async () => (await allEvents(f)).filter((e: Event) => e.aggregateUuid === counter).length === 21, "21 events");
    await until(async () => (await admin.checkQueue(queue)).messageCount === 0, "both are taken");
    expect((await allEvents(f)).filter((e: Event) => e.aggregateUuid === counter)).toHaveLength(21);
    expect(consumer.state).toBe("running");
  });

  it("declares and binds its queue, and rejects a dead letter to the queue's dead-letter exchange", async () => {
    const exchange = amqpName("in-x");
    const dlx = amqpName("dlx");
    const queue = amqpName("in-declared");
    const parked = amqpName("parked");
    await makeExchange(admin, exchange);
    await makeExchange(admin, dlx, "fanout");
    await makeQueue(admin, parked, dlx);
    await admin.deleteQueue(queue).catch(() => undefined);
    const f = await started((f) => {
      f.registerDomain(Counter);
      f.registerReadmodel(
        new AmqpConsumer(f, {
          name: "In",
          domain: "Counter",
          connection: AMQP_URL,
          queue,
          assertQueue: { durable: true, deadLetterExchange: dlx, arguments: { "x-queue-type": "quorum" } },
          bindings: [{ exchange, routingKey: "add.*" }],
          rejectDeadLetters: true,
          toCommand: (m) => {
            const b = m.body as { counter: string; by: number };
            return { command: Increment, payload: { counterUuid: b.counter, by: b.by } };
          },
        }),
      );
    });
    await until(() => f.runtime.listEventHandlers().find((x) => x.name === "In")!.integration!.connected, "the consumer is connected");
    const counter = newUuid();
    admin.publish(exchange, "add.one", bytes({ counter, by: 1 }), { messageId: newUuid() });
    admin.publish(exchange, "add.bad", bytes("{"), { messageId: "bad" });
    admin.publish(exchange, "other", bytes({ counter, by: 1 }), { messageId: newUuid() });
    await until(async () => (await queueCount(admin, parked)) === 1, "the poison message is in the dead-letter queue");
    await until(async () => (await allEvents(f)).length === 1, "one command ran");
    expect((await f.runtime.listDeadLetters({ eventHandlerName: "In" })).map((d) => d.eventUuid)).toEqual(["bad"]);
    const [parkedMessage] = await drainQueue(admin, parked);
    expect(parkedMessage!.properties.messageId).toBe("bad");
    await admin.deleteQueue(queue);
  });

  it("a message without message-id is identified by its routing key and body, so its redelivery is a replay", async () => {
    const queue = amqpName("no-id");
    await makeQueue(admin, queue);
    const counter = newUuid();
    admin.sendToQueue(queue, bytes({ counter, by: 5 }));
    admin.sendToQueue(queue, bytes({ counter, by: 5 }));
    const f = await startedIncrementer(queue, counter);
    await until(() => f.runtime.listEventHandlers().find((x) => x.name === "In")!.integration!.handled === 2, "both handled");
    const events = await allEvents(f);
    expect(events).toHaveLength(1);
  });

  it("messages without message-id that differ only in a header are two commands, not a dead letter", async () => {
    const queue = amqpName("no-id-headers");
    await makeQueue(admin, queue);
    // Each tenant's own counter (an aggregate belongs to one tenant).
    const counters: Record<string, string> = { T1: newUuid(), T2: newUuid() };
    admin.sendToQueue(queue, bytes({ by: 2 }), { headers: { tenant: "T1" } });
    admin.sendToQueue(queue, bytes({ by: 2 }), { headers: { tenant: "T2" } });
    admin.sendToQueue(queue, bytes({ by: 2 }), { headers: { tenant: "T1" } });
    const f = await startedIncrementer(queue, "", {
      retry: { maxAttempts: 2, initialDelayMs: 1, maxDelayMs: 5 },
      toCommand: (m) => ({
        command: Increment,
        payload: { counterUuid: counters[m.headers.tenant!]!, by: (m.body as { by: number }).by },
        reqCtx: { senderTenantUuid: m.headers.tenant!, targetTenantUuid: m.headers.tenant! },
      }),
    });
    const info = () => f.runtime.listEventHandlers().find((x) => x.name === "In")!.integration!;
    await until(() => info().handled + info().deadLetters === 3, "all three taken");
    // The repeat of T1's message is a replay; T2's is its own command.
    expect(await f.runtime.listDeadLetters({ eventHandlerName: "In" })).toEqual([]);
    expect((await allEvents(f)).map((e) => e.tenantUuid).sort()).toEqual(["T1", "T2"]);
  });

  it("a consumer whose queue does not exist yet lists the failure, and consumes once the queue is there", async () => {
    const queue = amqpName("later");
    const counter = newUuid();
    const f = await startedIncrementer(queue, counter, { pollMs: 50 });
    const info = () => f.runtime.listEventHandlers().find((x) => x.name === "In")!.integration!;
    await until(() => info().failures > 0, "the missing queue is a failure");
    expect(info()).toMatchObject({ connected: false });
    expect(info().lastError).toMatch(/404|NOT.FOUND/);
    await makeQueue(admin, queue);
    admin.sendToQueue(queue, bytes({ by: 3 }), { messageId: newUuid() });
    await until(async () => (await allEvents(f)).length === 1, "the message's command ran");
    expect(info().connected).toBe(true);
  });

  it("refuses bad options", () => {
    const f = { eventRepository: {}, readmodelStoreBackend: {}, dispatch: () => undefined } as never;
    const toCommand = () => undefined;
    expect(() => new AmqpConsumer(f, { name: "X", domain: "Counter", connection: conn, queue: "", toCommand })).toThrow(/queue/);
    expect(() => new AmqpConsumer(f, { name: "X", domain: "Counter", connection: conn, queue: "q", prefetch: 0, toCommand })).toThrow(
      /prefetch/,
    );
  });
});
