/**
 * The RabbitMQ lines of bench/integration.bench.ts: mneme/amqp against raw
 * amqplib doing the same work, in one run (the machine's RabbitMQ on
 * 127.0.0.1:5672, memory stores, an exchange and queues of its own deleted at the end):
 * (1) outbound: events appended, then published persistent with the event
 * uuid as message-id and confirmed; mneme's AmqpPublisher (outbox entries
 * written with the checkpoint, 64 aggregates side by side, entries deleted)
 * against reading the same events from the store and publishing the same
 * messages (body, properties, mneme's headers) on a confirm channel in
 * batches of 64, each batch's confirms awaited;
 * (2) inbound: messages published, then each turned into a committed command
 * (commandUuid: uuid v5 of the message-id) and acked; mneme's AmqpConsumer
 * against a raw consume loop (same prefetch) that dispatches the same
 * commands one after another and acks.
 */
import amqp, { type Channel, type ConfirmChannel, type ConsumeMessage } from "amqplib";
import { createFacade, type Facade } from "../src/app/facade.js";
import { AmqpConsumer, AmqpPublisher } from "../src/amqp/index.js";
import { newUuid } from "../src/model/clock.js";
import type { CommandType, EventType } from "../src/model/tokens.js";
import type { Event, NewEvent } from "../src/model/types.js";
import type { Domain } from "../src/model/domain.js";
import type { DomainInstaller } from "../src/model/domain-install.js";
import { messageHeaders } from "../src/integration/integration-message.js";
import { correlationOf, messageCommandUuid } from "../src/reactions/index.js";
import { type Bench, duel } from "./harness.js";

const AMQP_URL = process.env.AMQP_URL ?? "amqp://guest:guest@127.0.0.1:5672";

/** The bench domain of integration.bench.ts, handed over so both brokers do the same work. */
export interface BenchWorld {
  readonly domain: Domain;
  readonly install: (d: DomainInstaller) => void;
  readonly credit: CommandType<{ accountUuid: string; amount: number }>;
  readonly credited: EventType<{ amount: number }>;
  readonly aggregates: readonly string[];
  readonly newEvents: (n: number, round: number) => NewEvent[];
}

const body = (e: Event<{ amount: number }>) => ({ account: e.aggregateUuid, amount: e.payload.amount });

export async function amqpDuels(b: Bench, w: BenchWorld): Promise<void> {
  const conn = await amqp.connect(AMQP_URL);
  const admin = await conn.createChannel();
  const tag = newUuid().replace(/-/g, "").slice(-10);
  const exchange = `bench.${tag}`;
  const queues = { out: `bench.${tag}.out`, mneme: `bench.${tag}.in-mneme`, raw: `bench.${tag}.in-raw` };
  await admin.assertExchange(exchange, "topic", { durable: true });
  for (const q of Object.values(queues)) await admin.assertQueue(q, { durable: true });
  await admin.bindQueue(queues.out, exchange, "m.#");
  try {
    await outbound(b, w, conn, exchange, queues.out);
    await inbound(b, w, conn, queues.mneme, queues.raw);
  } finally {
    for (const q of Object.values(queues)) await admin.deleteQueue(q).catch(() => undefined);
    await admin.deleteExchange(exchange).catch(() => undefined);
    await conn.close();
  }
}

async function outbound(b: Bench, w: BenchWorld, conn: amqp.ChannelModel, exchange: string, queue: string): Promise<void> {
  const n = b.quick ? 500 : 2000;
  // BENCH_ROUNDS: more rounds than 4 for a steadier figure on a busy machine.
  const rounds = Number(process.env.BENCH_ROUNDS ?? (b.quick ? 2 : 4));
  const mnemeF = createFacade({ appName: "bench-amqp-out" });
  mnemeF.registerDomain(w.domain, w.install);
  const publisher = new AmqpPublisher(mnemeF, { name: "Out", domain: w.domain.name, connection: conn, exchange, concurrency: 64 }).on(
    w.credited,
    (e) => ({ subject: "m.credited", body: body(e) }),
  );
  mnemeF.registerReadmodel(publisher);
  await mnemeF.start();
  const rawF = createFacade({ appName: "bench-amqp-out-raw" });
  rawF.registerDomain(w.domain, w.install);
  await rawF.start();
  const ch: ConfirmChannel = await conn.createConfirmChannel();
  let rawFrom = 0;
  await duel(
    b,
    "integration",
    "events published to RabbitMQ, confirmed",
    n,
    rounds,
    async (round) => {
      await mnemeF.eventRepository.append(w.newEvents(n, round));
      for (;;) {
        await publisher.idle();
        await publisher.outbox.drain();
        if ((await publisher.outbox.counts()).pending === 0) break;
      }
    },
    [
      {
        name: "raw amqplib (read, publish in batches of 64, confirms)",
        run: async (round) => {
          await rawF.eventRepository.append(w.newEvents(n, round));
          for await (const batch of rawF.eventRepository.readAll({ afterPosition: rawFrom, batchSize: 500 })) {
            for (let i = 0; i < batch.length; i += 64) {
              for (const e of batch.slice(i, i + 64)) {
                // The same message as mneme's: its body, properties and headers (mneme's, with the correlation id).
                const content = Buffer.from(JSON.stringify(body(e as Event<{ amount: number }>)));
                ch.publish(exchange, "m.credited", content, {
                  messageId: e.eventUuid,
                  persistent: true,
                  mandatory: true,
                  contentType: "application/json",
                  timestamp: Math.floor(Date.now() / 1000),
                  headers: messageHeaders(e, undefined, correlationOf(e)),
                });
              }
              await ch.waitForConfirms();
            }
            rawFrom = batch.at(-1)!.position;
          }
        },
      },
    ],
    "events/s",
  );
  await ch.close();
  await admin(conn, (c) => c.purgeQueue(queue));
  await mnemeF.stop();
  await rawF.stop();
}

async function admin(conn: amqp.ChannelModel, f: (c: Channel) => Promise<unknown>): Promise<void> {
  const c = await conn.createChannel();
  await f(c);
  await c.close();
}

async function inbound(b: Bench, w: BenchWorld, conn: amqp.ChannelModel, mnemeQueue: string, rawQueue: string): Promise<void> {
  const n = b.quick ? 300 : 1000;
  const rounds = Number(process.env.BENCH_ROUNDS ?? (b.quick ? 2 : 4));
  const pub = await conn.createConfirmChannel();
  const publishAll = async (queue: string) => {
    for (let i = 0; i < n; i++) {
      const content = Buffer.from(JSON.stringify({ account: w.aggregates[i % w.aggregates.length], amount: i }));
      pub.sendToQueue(queue, content, { messageId: newUuid(), persistent: true });
    }
    await pub.waitForConfirms();
  };
  const counting = (f: Facade) => {
    let appended = 0;
    f.eventRepository.onAppend?.((events) => (appended += events.length));
    return () => appended;
  };
  const toPayload = (m: unknown) => {
    const p = m as { account: string; amount: number };
    return { accountUuid: p.account, amount: p.amount };
  };
  const mnemeF = createFacade({ appName: "bench-amqp-in" });
  mnemeF.registerDomain(w.domain, w.install);
  mnemeF.registerReadmodel(
    new AmqpConsumer(mnemeF, {
      name: "In",
      domain: w.domain.name,
      connection: conn,
      queue: mnemeQueue,
      prefetch: 32,
      toCommand: (m) => ({ command: w.credit, payload: toPayload(m.body) }),
    }),
  );
  await mnemeF.start();
  const mnemeDone = counting(mnemeF);
  const rawF = createFacade({ appName: "bench-amqp-in-raw" });
  rawF.registerDomain(w.domain, w.install);
  await rawF.start();
  const raw = await rawConsumer(conn, rawQueue);
  await duel(
    b,
    "integration",
    "messages from RabbitMQ -> committed commands, acked",
    n,
    rounds,
    async (round) => {
      await publishAll(mnemeQueue);
      while (mnemeDone() < (round + 1) * n) await new Promise((r) => setTimeout(r, 1));
    },
    [
      {
        name: "raw amqplib (consume, dispatch, ack)",
        run: async () => {
          await publishAll(rawQueue);
          for (let done = 0; done < n; done++) {
            const m = await raw.next();
            const id = (m.properties.messageId as string | undefined) ?? String(m.fields.deliveryTag);
            await rawF.dispatch(w.credit, toPayload(JSON.parse(m.content.toString())), { commandUuid: messageCommandUuid(id) });
            raw.channel.ack(m);
          }
        },
      },
    ],
    "messages/s",
  );
  await raw.channel.close();
  await pub.close();
  await mnemeF.stop();
  await rawF.stop();
}

/** A consume loop with the same prefetch as mneme's consumer: `next()` resolves with the next delivered message. */
async function rawConsumer(conn: amqp.ChannelModel, queue: string): Promise<{ channel: Channel; next: () => Promise<ConsumeMessage> }> {
  const channel = await conn.createChannel();
  await channel.prefetch(32);
  const ready: ConsumeMessage[] = [];
  let waiter: ((m: ConsumeMessage) => void) | undefined;
  await channel.consume(queue, (m) => {
    if (m === null) return;
    if (waiter !== undefined) {
      const w = waiter;
      waiter = undefined;
      w(m);
    } else ready.push(m);
  });
  return {
    channel,
    next: () => {
      const m = ready.shift();
      return m !== undefined ? Promise.resolve(m) : new Promise((resolve) => (waiter = resolve));
    },
  };
}
