/**
 * mneme/nats against the machine's NATS server: a publisher publishes the
 * chosen events with the event uuid as Nats-Msg-Id, one aggregate's in
 * position order, and is listed by the Runtime; a consumer turns messages
 * into commands once each, acks them, and makes a poison message a dead
 * letter (acked on the server), which an operator can retry.
 */
import { jetstream, jetstreamManager } from "@nats-io/jetstream";
import { headers } from "@nats-io/transport-node";
import { describe, expect, it } from "vitest";
import { type Event, type Facade, MnemeError, newUuid } from "mneme";
import { NatsConsumer, NatsPublisher } from "mneme/nats";
import { messageCommandUuid } from "mneme/reactions";
import { Counter, Increment, Incremented } from "../support/counter-domain.js";
import { makeStream, natsConnection, streamCount, streamMessages, streamName } from "../support/nats-broker.js";
import { startedFacades } from "../support/started-facades.js";
import { until } from "../support/until.js";

const started = startedFacades();
const nc = await natsConnection();
async function allEvents(f: Facade): Promise<Event[]> {
  const all: Event[] = [];
  for await (const batch of f.eventRepository.readAll({ afterPosition: 0 })) all.push(...batch);
  return all;
}
const encode = (v: unknown) => new TextEncoder().encode(typeof v === "string" ? v : JSON.stringify(v));

describe("NatsPublisher", () => {
  it("publishes each chosen event once, the event uuid as Nats-Msg-Id, in position order per aggregate, and is listed", async () => {
    const stream = streamName("pub");
    await makeStream(nc, stream);
    let publisher!: NatsPublisher;
    const f = await started((f) => {
      f.registerDomain(Counter);
      publisher = new NatsPublisher(f, { name: "CountersOut", domain: "Counter", connection: nc, stream }).on(Incremented, (e) =>
        e.payload.by < 0 ? undefined : { subject: `${stream}.incremented`, body: { counter: e.aggregateUuid, by: e.payload.by } },
      );
      f.registerReadmodel(publisher);
    });
    const counters = [newUuid(), newUuid(), newUuid()];
    for (let i = 0; i < 30; i++) await f.dispatch(Increment, { counterUuid: counters[i % 3]!, by: i === 7 ? -1 : i });
    await until(async () => (await streamCount(nc, stream)) === 29, "29 messages are in the stream");
    await publisher.outbox.drain();

    const events = (await allEvents(f)).filter((e: Event) => e.name === "Incremented");
    const messages = await streamMessages(nc, stream);
    // Aggregates go side by side (concurrency), so only each aggregate's order is kept.
    expect(messages.map((m) => m.headers?.get("Nats-Msg-Id")).sort()).toEqual(
      events
        .filter((e) => (e.payload as { by: number }).by >= 0)
        .map((e) => e.eventUuid)
        .sort(),
    );
    for (const c of counters) {
      const positions = messages
        .filter((m) => m.headers?.get("mneme-aggregate") === c)
        .map((m) => Number(m.headers?.get("mneme-position")));
      expect(positions).toEqual([...positions].sort((a, b) => a - b));
    }
    const first = messages.find((m) => m.headers?.get("Nats-Msg-Id") === events[0]!.eventUuid)!;
    expect(first.json()).toEqual({ counter: counters[0], by: 0 });
    expect(first.headers?.get("mneme-event")).toBe("Counter.Incremented");

    await until(() => f.runtime.listEventHandlers().find((h) => h.name === "CountersOut")?.integration?.lag === 0, "the lag is 0");
    const listed = f.runtime.listEventHandlers().find((h) => h.name === "CountersOut")!;
    expect(listed.state).toBe("running");
    expect(listed.integration).toMatchObject({
      role: "publisher",
      broker: "nats",
      target: stream,
      handled: 29,
      failures: 0,
      connected: true,
    });
  });

  it("a mapping that returns no subject makes a dead letter at once, and the aggregate's next events still go", async () => {
    const stream = streamName("dead");
    await makeStream(nc, stream);
    const f = await started((f) => {
      f.registerDomain(Counter);
      f.registerReadmodel(
        new NatsPublisher(f, { name: "Out", domain: "Counter", connection: nc, stream }).on(Incremented, (e) => ({
          subject: e.payload.by === 2 ? "" : `${stream}.x`,
          body: e.payload,
        })),
      );
    });
    const c = newUuid();
    for (let by = 1; by <= 3; by++) await f.dispatch(Increment, { counterUuid: c, by });
    await until(async () => (await streamCount(nc, stream)) === 2, "two messages are in the stream");
    const dead = await f.runtime.listDeadLetters({ eventHandlerName: "Out" });
    expect(dead).toHaveLength(1);
    expect(dead[0]!.lastError).toContain("non-empty subject");
    expect((await streamMessages(nc, stream)).map((m) => (m.json() as { by: number }).by)).toEqual([1, 3]);
  });

  it("refuses a connection that is not one", () => {
    const f = { eventRepository: {}, readmodelStoreBackend: {} } as never;
    expect(() => new NatsPublisher(f, { name: "X", domain: "Counter", connection: {} as never })).toThrow(MnemeError);
  });
});

describe("NatsConsumer", () => {
  it("turns each message into one command (commandUuid: uuid v5 of the message id), acks it, and dead-letters a poison message", async () => {
    const stream = streamName("in");
    await makeStream(nc, stream);
    const js = jetstream(nc);
    const counter = newUuid();
    const ids = Array.from({ length: 20 }, () => newUuid());
    for (const id of ids) await js.publish(`${stream}.add`, encode({ counter, by: 1 }), { msgID: id });
    // The same message id again: the stream drops it.
    await js.publish(`${stream}.add`, encode({ counter, by: 1 }), { msgID: ids[0]! });
    await js.publish(`${stream}.add`, encode("not json"), { msgID: "poison-json" });
    const h = headers();
    h.set("fail", "always");
    await js.publish(`${stream}.add`, encode({ counter, by: 100 }), { msgID: "poison-throws", headers: h });
    let consumer!: NatsConsumer;
    const f = await started((f) => {
      f.registerDomain(Counter);
      consumer = new NatsConsumer(f, {
        name: "CountersIn",
        domain: "Counter",
        connection: nc,
        stream,
        durable: "counters",
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
    await until(async () => {
      const info = await (await jetstreamManager(nc)).consumers.info(stream, "counters");
      return info.num_pending + info.num_ack_pending === 0;
    }, "every message is acked");
    const events = (await allEvents(f)).filter((e: Event) => e.aggregateUuid === counter);
    expect(events).toHaveLength(20);
    expect(new Set(events.map((e) => e.commandUuid))).toEqual(new Set(ids.map((id) => messageCommandUuid(id))));

    const dead = await f.runtime.listDeadLetters({ eventHandlerName: "CountersIn" });
    const byId = new Map(dead.map((d) => [d.eventUuid, d]));
    expect(byId.get("poison-json")).toMatchObject({ attempts: 1, kind: "command", eventPath: `nats:${stream}.add` });
    expect(byId.get("poison-json")!.lastError).toContain("not JSON");
    expect(byId.get("poison-throws")).toMatchObject({ attempts: 3, lastError: "cannot take this one" });

    const listed = f.runtime.listEventHandlers().find((x) => x.name === "CountersIn")!;
    expect(listed.integration).toMatchObject({
      role: "consumer",
      broker: "nats",
      target: `${stream}/counters`,
      handled: 20,
      connected: true,
    });
    expect(listed.integration!.deadLetters).toBe(2);

    // Stop and start: the durable consumer resumes; nothing runs again.
    await f.runtime.controlEventHandler({ eventHandlerName: "CountersIn", action: "stop" });
    await js.publish(`${stream}.add`, encode({ counter, by: 1 }), { msgID: "after-restart" });
    await f.runtime.controlEventHandler({ eventHandlerName: "CountersIn", action: "start" });
    await until(async () => (await allEvents(f)).filter((e: Event) => e.aggregateUuid === counter).length === 21, "21 events");
    expect(consumer.state).toBe("running");
  });
  it("with concurrency, handles lanes side by side and each lane's messages one after another in stream order", async () => {
    const stream = streamName("lanes");
    await makeStream(nc, stream);
    const js = jetstream(nc);
    const counters = [newUuid(), newUuid(), newUuid(), newUuid()];
    // 40 messages: 10 per aggregate, interleaved; the header a mneme publisher sets names the lane.
    for (let i = 0; i < 40; i++) {
      const h = headers();
      h.set("mneme-aggregate", counters[i % 4]!);
      await js.publish(`${stream}.add`, encode({ counter: counters[i % 4], by: 1, n: Math.floor(i / 4) }), {
        msgID: newUuid(),
        headers: h,
      });
    }
    const seen = new Map<string, number[]>();
    let running = 0;
    let mostAtOnce = 0;
    const f = await started((f) => {
      f.registerDomain(Counter);
      f.registerReadmodel(
        new NatsConsumer(f, {
          name: "LanesIn",
          domain: "Counter",
          connection: nc,
          stream,
          durable: "lanes",
          concurrency: 8,
          toCommand: async (m) => {
            const b = m.body as { counter: string; by: number; n: number };
            running++;
            mostAtOnce = Math.max(mostAtOnce, running);
            // Holds the message a while: a lane that did not wait for it would overtake it.
            await new Promise((r) => setTimeout(r, 3 + (b.n % 3)));
            seen.set(b.counter, [...(seen.get(b.counter) ?? []), b.n]);
            running--;
            return { command: Increment, payload: { counterUuid: b.counter, by: b.by } };
          },
        }),
      );
    });
    await until(async () => (await allEvents(f)).length === 40, "40 commands ran");
    for (const c of counters) expect(seen.get(c)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    // The four lanes ran side by side, never two messages of one lane at once.
    expect(mostAtOnce).toBeGreaterThan(1);
    expect(mostAtOnce).toBeLessThanOrEqual(4);
  });
});
