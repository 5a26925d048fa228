/**
 * mneme/nats and mneme/amqp against the raw clients doing the same work, in one run
 * (machine's NATS on 127.0.0.1:4222, memory stores, a stream of its own deleted at the end):
 * (1) outbound: events appended, then published with the event uuid as
 * Nats-Msg-Id and acked; mneme's NatsPublisher (outbox entries written with
 * the checkpoint, published 64 aggregates side by side, entries deleted)
 * against reading the same events from the store and publishing the same
 * messages (body, mneme's headers, expected stream) in batches of 64 with
 * their acks awaited;
 * (2) inbound: messages published (with the `mneme-aggregate` header), then
 * each turned into a committed command (commandUuid: uuid v5 of the message
 * id) and acked; mneme's NatsConsumer, one message at a time and then 16 at
 * once in lanes per aggregate, against a raw JetStream consume loop (pulls of
 * 64, as mneme's) that dispatches the same commands one after another and acks.
 * Each side runs one untimed round first.
 * The same two duels through RabbitMQ are in integration-amqp.ts (BENCH_BROKERS=nats or amqp runs one broker only).
 */
import { jetstream, jetstreamManager } from "@nats-io/jetstream";
import { connect, headers } from "@nats-io/transport-node";
import { createFacade, type Facade } from "../src/app/facade.js";
import { newUuid } from "../src/model/clock.js";
import { defineDomain } from "../src/model/domain.js";
import type { DomainInstaller } from "../src/model/domain-install.js";
import { anonymous } from "../src/model/permission.js";
import type { Event } from "../src/model/types.js";
import { NatsConsumer, NatsPublisher } from "../src/nats/index.js";
import { messageHeaders } from "../src/integration/integration-message.js";
import { correlationOf, messageCommandUuid } from "../src/reactions/index.js";
import { BENCH_REQ_CTX, BENCH_TENANT, type Bench, duel, type DuelSide } from "./harness.js";
import { amqpDuels } from "./integration-amqp.js";

const NATS_URL = process.env.NATS_URL ?? "127.0.0.1:4222";
const Acc = defineDomain("Acc", { description: "accounts for the integration bench" });
const Credit = Acc.command<{ accountUuid: string; amount: number }>("Credit", { permission: anonymous });
const Credited = Acc.event<{ amount: number }>("Credited");
function installAcc(d: DomainInstaller): void {
  d.handleCommand(Credit, (_ctx, _c, p) => [Credited.create(p.accountUuid, { amount: p.amount })]);
}

const enc = new TextEncoder();
/** The header a mneme publisher sets: the consumer's lane. */
function aggregateHeader(aggregateUuid: string) {
  const h = headers();
  h.set("mneme-aggregate", aggregateUuid);
  return h;
}

export default async function (b: Bench): Promise<void> {
  const brokers = process.env.BENCH_BROKERS ?? "nats,amqp";
  if (brokers.includes("nats")) await natsDuels(b);
  if (brokers.includes("amqp"))
    await amqpDuels(b, { domain: Acc, install: installAcc, credit: Credit, credited: Credited, aggregates, newEvents });
}

async function natsDuels(b: Bench): Promise<void> {
  const nc = await connect({ servers: NATS_URL });
  const jsm = await jetstreamManager(nc);
  const js = jetstream(nc);
  const stream = `BENCH_${newUuid().replace(/-/g, "").slice(-10)}`.toUpperCase();
  await jsm.streams.add({ name: stream, subjects: [`${stream}.>`], storage: "memory" as never });
  try {
    await outbound(b, js, stream, nc);
    await inbound(b, js, stream, nc, 1);
    await inbound(b, js, stream, nc, 16);
  } finally {
    await jsm.streams.delete(stream).catch(() => undefined);
    await nc.close();
  }
}

type Js = ReturnType<typeof jetstream>;
type Nc = Awaited<ReturnType<typeof connect>>;

const aggregates = Array.from({ length: 64 }, () => newUuid());
function newEvents(n: number, round: number) {
  return Array.from({ length: n }, (_, i) => ({
    domain: "Acc",
    name: "Credited",
    aggregateUuid: aggregates[i % aggregates.length]!,
    payload: { amount: round * n + i },
    tenantUuid: BENCH_TENANT,
    reqCtx: BENCH_REQ_CTX,
  }));
}
const toMessage = (stream: string, e: Event<{ amount: number }>) => ({
  subject: `${stream}.m.credited`,
  body: { account: e.aggregateUuid, amount: e.payload.amount },
});

async function outbound(b: Bench, js: Js, stream: string, nc: Nc): Promise<void> {
  const n = b.quick ? 500 : 2000;
  // BENCH_ROUNDS: more rounds than 4 for a steadier figure on a busy machine.
  const rounds = Number(process.env.BENCH_ROUNDS ?? (b.quick ? 2 : 4));
  const mnemeF = createFacade({ appName: "bench-out" });
  mnemeF.registerDomain(Acc, installAcc);
  const publisher = new NatsPublisher(mnemeF, { name: "Out", domain: "Acc", connection: nc, stream, concurrency: 64, pollMs: 1000 }).on(
    Credited,
    (e) => toMessage(stream, e),
  );
  mnemeF.registerReadmodel(publisher);
  await mnemeF.start();
  const rawF = createFacade({ appName: "bench-out-raw" });
  rawF.registerDomain(Acc, installAcc);
  await rawF.start();
  let rawFrom = 0;
  const mneme = async (round: number): Promise<void> => {
    await mnemeF.eventRepository.append(newEvents(n, round));
    for (;;) {
      await publisher.idle();
      await publisher.outbox.drain();
      if ((await publisher.outbox.counts()).pending === 0) break;
    }
  };
  const raw: DuelSide = {
    name: "raw client (read, publish in batches of 64, acks)",
    run: async (round) => {
      await rawF.eventRepository.append(newEvents(n, round));
      for await (const batch of rawF.eventRepository.readAll({ afterPosition: rawFrom, batchSize: 500 })) {
        for (let i = 0; i < batch.length; i += 64) {
          await Promise.all(
            batch.slice(i, i + 64).map((e) => {
              const m = toMessage(stream, e as Event<{ amount: number }>);
              // The same message as mneme's: its body, mneme's headers, the stream expected.
              const h = headers();
              for (const [k, v] of Object.entries(messageHeaders(e, undefined, correlationOf(e)))) h.set(k, v);
              return js.publish(m.subject, enc.encode(JSON.stringify(m.body)), {
                msgID: e.eventUuid,
                headers: h,
                expect: { streamName: stream },
              });
            }),
          );
        }
        rawFrom = batch.at(-1)!.position;
      }
    },
  };
  // An untimed round of each first: neither side's figure pays for compiling its code.
  await mneme(rounds);
  await raw.run(rounds);
  await duel(b, "integration", "events published to JetStream, acked", n, rounds, mneme, [raw], "events/s");
  await mnemeF.stop();
  await rawF.stop();
}

/** `concurrency` 1: one message after another; more: lanes per aggregate (the `mneme-aggregate` header) side by side. */
async function inbound(b: Bench, js: Js, stream: string, nc: Nc, concurrency: number): Promise<void> {
  const n = b.quick ? 300 : 1000;
  const rounds = Number(process.env.BENCH_ROUNDS ?? (b.quick ? 2 : 4));
  const publishAll = async (subject: string) => {
    for (let i = 0; i < n; i += 64)
      await Promise.all(
        Array.from({ length: Math.min(64, n - i) }, (_, k) =>
          js.publish(subject, enc.encode(JSON.stringify({ account: aggregates[(i + k) % 64], amount: i + k })), {
            msgID: newUuid(),
            headers: aggregateHeader(aggregates[(i + k) % 64]!),
          }),
        ),
      );
  };
  /** Resolves once `f` has appended `count` events in all. */
  const counting = (f: Facade) => {
    let appended = 0;
    let waiting: { count: number; resolve: () => void } | undefined;
    f.eventRepository.onAppend?.((events) => {
      appended += events.length;
      if (waiting !== undefined && appended >= waiting.count) waiting.resolve();
    });
    return (count: number) => (appended >= count ? Promise.resolve() : new Promise<void>((resolve) => (waiting = { count, resolve })));
  };
  const toCommand = (body: unknown) => {
    const p = body as { account: string; amount: number };
    return { accountUuid: p.account, amount: p.amount };
  };
  const mnemeF = createFacade({ appName: "bench-in" });
  mnemeF.registerDomain(Acc, installAcc);
  mnemeF.registerReadmodel(
    new NatsConsumer(mnemeF, {
      name: "In",
      domain: "Acc",
      connection: nc,
      stream,
      durable: `bench-in-${concurrency}`,
      filterSubjects: [`${stream}.in${concurrency}.mneme`],
      concurrency,
      toCommand: (m) => ({ command: Credit, payload: toCommand(m.body) }),
    }),
  );
  await mnemeF.start();
  const mnemeDone = counting(mnemeF);
  const rawF = createFacade({ appName: "bench-in-raw" });
  rawF.registerDomain(Acc, installAcc);
  await rawF.start();
  await jetstreamManager(nc).then((jsm) =>
    jsm.consumers.add(stream, {
      durable_name: `bench-raw-${concurrency}`,
      ack_policy: "explicit" as never,
      filter_subject: `${stream}.in${concurrency}.raw`,
    }),
  );
  // Pulls of 64, as mneme's consumer makes them.
  const rawMessages = await (await js.consumers.get(stream, `bench-raw-${concurrency}`)).consume({ max_messages: 64 });
  const rawIt = rawMessages[Symbol.asyncIterator]();
  const dec = new TextDecoder();
  let expected = 0;
  const mneme = async (): Promise<void> => {
    expected += n;
    await publishAll(`${stream}.in${concurrency}.mneme`);
    await mnemeDone(expected);
  };
  const raw: DuelSide = {
    name: "raw client (consume, dispatch, ack)",
    run: async () => {
      // Consuming while the messages are published, as mneme's consumer does.
      const consumed = (async () => {
        for (let done = 0; done < n; done++) {
          const next = await rawIt.next();
          if (next.done === true) throw new Error("the raw consumer ended");
          const m = next.value;
          const id = m.headers?.get("Nats-Msg-Id") ?? String(m.seq);
          await rawF.dispatch(Credit, toCommand(JSON.parse(dec.decode(m.data))), { commandUuid: messageCommandUuid(id) });
          m.ack();
        }
      })();
      await publishAll(`${stream}.in${concurrency}.raw`);
      await consumed;
    },
  };
  // An untimed round of each first: neither side's figure pays for compiling its code.
  await mneme();
  await raw.run(rounds);
  const what = concurrency === 1 ? "one at a time" : `${concurrency} at once, in lanes per aggregate`;
  await duel(b, "integration", `messages -> committed commands, acked (mneme ${what})`, n, rounds, mneme, [raw], "messages/s");
  // close() resolves once the iterator has ended: read it to its end.
  const closed = rawMessages.close();
  while ((await rawIt.next()).done !== true);
  await closed;
  await mnemeF.stop();
  await rawF.stop();
}
