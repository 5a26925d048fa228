/**
 * mneme/nats under faults, against real servers and processes. Publishing
 * goes on while a NATS server (a private one, own port and storage, so the
 * machine's server is left alone) is killed with SIGKILL and started again,
 * and while the publishing app is killed with SIGKILL and restarted: every
 * chosen event ends in the stream once (the stream drops repeats by
 * Nats-Msg-Id) and each aggregate's messages are in position order. Consuming
 * goes on while the consuming app is killed mid-batch: each message's command
 * ran once, and the poison message is a dead letter.
 */
import { fileURLToPath } from "node:url";
import { jetstream } from "@nats-io/jetstream";
import type { JsMsg } from "@nats-io/jetstream";
import { describe, expect, it } from "vitest";
import { createFacade, type Event, newUuid } from "mneme";
import { NatsConsumer, NatsPublisher } from "mneme/nats";
import { messageCommandUuid } from "mneme/reactions";
import { createSqliteBackends } from "mneme/sqlite";
import { Counter, Increment, Incremented, incrementEvents } from "../support/counter-domain.js";
import { makeStream, NATS_URL, natsConnection, privateNats, streamCount, streamMessages, streamName } from "../support/nats-broker.js";
import { killedThenFinished as killRounds } from "../support/kill-rounds.js";
import { sqliteScratch } from "../support/sqlite-scratch.js";
import { until } from "../support/until.js";

const scratch = sqliteScratch("nats-faults");
const script = fileURLToPath(new URL("../support/nats-app-process.ts", import.meta.url));
const cwd = fileURLToPath(new URL("../..", import.meta.url));

/** Every event once in the stream, and each aggregate's messages in position order. */
function expectPublishedInOrder(messages: JsMsg[], events: Event[]): void {
  const ids = messages.map((m) => m.headers?.get("Nats-Msg-Id"));
  expect(new Set(ids).size, "no repeat in the stream").toBe(ids.length);
  expect([...ids].sort()).toEqual(events.map((e) => e.eventUuid).sort());
  const byAggregate = new Map<string, number[]>();
  for (const m of messages) {
    const a = m.headers!.get("mneme-aggregate");
    byAggregate.set(a, [...(byAggregate.get(a) ?? []), Number(m.headers!.get("mneme-position"))]);
  }
  for (const [a, positions] of byAggregate) expect(positions, a).toEqual([...positions].sort((x, y) => x - y));
}

describe("publishing through faults", () => {
  it("while the NATS server is killed and started again under load: every event once, in order per aggregate", async () => {
    const server = await privateNats();
    await server.start();
    const nc = await natsConnection(server.url);
    const stream = streamName("restart");
    await makeStream(nc, stream);
    const f = scratch.keep(createFacade({ ...createSqliteBackends({ filename: scratch.newFile() }) }));
    f.registerDomain(Counter);
    const publisher = new NatsPublisher(f, {
      name: "Out",
      domain: "Counter",
      connection: nc,
      stream,
      ackTimeoutMs: 500,
      retry: { initialDelayMs: 20, maxDelayMs: 200 },
    }).on(Incremented, (e) => ({ subject: `${stream}.incremented`, body: e.payload }));
    f.registerReadmodel(publisher);
    await f.start();
    const counters = Array.from({ length: 6 }, () => newUuid());
    const dispatchSome = async (from: number, n: number) => {
      for (let i = from; i < from + n; i++) await f.dispatch(Increment, { counterUuid: counters[i % counters.length]!, by: i });
    };
    await dispatchSome(0, 150);
    await server.kill();
    await dispatchSome(150, 150);
    await server.start();
    await dispatchSome(300, 100);
    await server.kill();
    await server.start();
    await dispatchSome(400, 100);
    await until(async () => (await publisher.outbox.counts()).pending === 0, "the outbox is empty", 60_000, 50);
    expect((await publisher.outbox.counts()).dead).toBe(0);
    expect(await streamCount(nc, stream)).toBe(500);
    expectPublishedInOrder(await streamMessages(nc, stream), await incrementEvents(f));
    const listed = f.runtime.listEventHandlers().find((h) => h.name === "Out")!.integration!;
    expect(listed.connected).toBe(true);
    expect(listed.handled).toBeGreaterThanOrEqual(500);
  }, 120_000);

  it("while the app is killed with SIGKILL and restarted: every event once, in order per aggregate", async () => {
    const nc = await natsConnection();
    const stream = streamName("sigkill");
    await makeStream(nc, stream);
    const file = scratch.newFile();
    await killRounds(script, cwd, ["publish", file, NATS_URL, stream, "400"], 4, 20, 120);
    const f = scratch.keep(createFacade({ ...createSqliteBackends({ filename: file }) }));
    f.registerDomain(Counter);
    const events = await incrementEvents(f);
    expect(events).toHaveLength(400);
    expect(await streamCount(nc, stream)).toBe(400);
    expectPublishedInOrder(await streamMessages(nc, stream), events);
  }, 180_000);
});

describe("consuming through faults", () => {
  it("with the consumer killed mid-batch: each message's command runs once, the poison message is a dead letter", async () => {
    const nc = await natsConnection();
    const stream = streamName("consume");
    await makeStream(nc, stream);
    const js = jetstream(nc);
    const counter = "00000000-0000-4000-8000-000000000001";
    const ids = Array.from({ length: 300 }, () => newUuid());
    await Promise.all(
      ids.map((id, i) => js.publish(`${stream}.add`, new TextEncoder().encode(JSON.stringify({ counter, by: i })), { msgID: id })),
    );
    await js.publish(`${stream}.add`, new TextEncoder().encode(JSON.stringify({ poison: true })), { msgID: "the-poison" });
    const file = scratch.newFile();
    const out = await killRounds(script, cwd, ["consume", file, NATS_URL, stream, "300"], 3, 10, 100);
    const dead = JSON.parse(out.split("\n").find((l) => l.startsWith("["))!) as { eventUuid: string; lastError: string }[];
    expect(dead.map((d) => d.eventUuid)).toEqual(["the-poison"]);
    expect(dead[0]!.lastError).toBe("poison");

    const f = scratch.keep(createFacade({ ...createSqliteBackends({ filename: file }) }));
    f.registerDomain(Counter);
    const events = await incrementEvents(f);
    expect(events).toHaveLength(300);
    expect(new Set(events.map((e) => e.commandUuid))).toEqual(new Set(ids.map((id) => messageCommandUuid(id))));
    expect(events.map((e) => (e.payload as { by: number }).by).sort((a, b) => a - b)).toEqual(ids.map((_, i) => i));
    await until(async () => {
      const info = await (await (await import("@nats-io/jetstream")).jetstreamManager(nc)).consumers.info(stream, "app");
      return info.num_pending + info.num_ack_pending === 0;
    }, "every message is acked (the poison one too)");
  }, 180_000);
});

describe("the listing through an outage", () => {
  it("publisher and consumer say connected: false with lastError within 5 s of the server going away, and connected again after", async () => {
    const server = await privateNats();
    await server.start();
    const nc = await natsConnection(server.url);
    const stream = streamName("status");
    await makeStream(nc, stream);
    const f = scratch.keep(createFacade({ ...createSqliteBackends({ filename: scratch.newFile() }) }));
    f.registerDomain(Counter);
    const counter = newUuid();
    f.registerReadmodel(
      new NatsPublisher(f, { name: "Out", domain: "Counter", connection: nc, stream, ackTimeoutMs: 500 }).on(Incremented, (e) => ({
        subject: `${stream}.out`,
        body: e.payload,
      })),
    );
    f.registerReadmodel(
      new NatsConsumer(f, {
        name: "In",
        domain: "Counter",
        connection: nc,
        stream,
        durable: "status",
        filterSubjects: [`${stream}.in`],
        toCommand: (m) => ({ command: Increment, payload: { counterUuid: counter, by: (m.body as { by: number }).by } }),
      }),
    );
    await f.start();
    const js = jetstream(nc);
    const info = (name: string) => f.runtime.listEventHandlers().find((h) => h.name === name)!.integration!;
    await f.dispatch(Increment, { counterUuid: newUuid(), by: 1 });
    await js.publish(`${stream}.in`, JSON.stringify({ by: 1 }), { msgID: "before" });
    // The publisher publishes the consumer's event too: two.
    await until(() => info("Out").handled === 2 && info("In").handled === 1, "a message each way");
    expect(info("Out")).toMatchObject({ connected: true });
    expect(info("In")).toMatchObject({ connected: true });
    expect(info("In").lastError).toBeUndefined();

    // Nothing is published or consumed during the outage: only the connection can tell.
    await server.kill();
    await until(() => ["Out", "In"].every((n) => !info(n).connected && info(n).lastError !== undefined), "both list the outage", 5000);
    expect(info("In").lastError).toMatch(/disconnected|reconnect|closed/);

    await server.start();
    await until(() => info("Out").connected && info("In").connected, "both are connected again", 30_000);
    await js.publish(`${stream}.in`, JSON.stringify({ by: 2 }), { msgID: "after" });
    await f.dispatch(Increment, { counterUuid: newUuid(), by: 1 });
    await until(() => info("Out").handled === 4 && info("In").handled === 2, "a message each way after the outage", 30_000);
  }, 120_000);
});
