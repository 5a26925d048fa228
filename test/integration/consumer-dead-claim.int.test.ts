/**
 * A claim held by a consumer app that died costs its message nothing: a child
 * process consumes a message and is killed with SIGKILL while the message's
 * command holds its claim (a lease of ten minutes); an instance started on
 * the same store takes the claim over at once (SQLite: the holder's process
 * is gone; Postgres: its session ended), and the message succeeds with
 * `retry.maxAttempts: 2`, its command run once, no dead letter. On RabbitMQ
 * and NATS, SQLite and Postgres.
 */
import { fileURLToPath } from "node:url";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { createFacade, type Event, type Facade } from "mneme";
import { createPostgresBackends } from "mneme/postgres";
import { createSqliteBackends } from "mneme/sqlite";
import { adminChannel, AMQP_URL, amqpName, makeQueue } from "../support/amqp-broker.js";
import { CONSUMER, claimConsumer } from "../support/claim-consumer.js";
import { Charge, Claims, hooks } from "../support/claims-domain.js";
import { holdAndKill } from "../support/hold-and-kill.js";
import { makeStream, NATS_URL, natsConnection, streamName } from "../support/nats-broker.js";
import { DATABASE_URL, postgresScratch } from "../support/postgres-scratch.js";
import { sqliteScratch } from "../support/sqlite-scratch.js";
import { until } from "../support/until.js";

const pg = postgresScratch("mneme_consumer_claim");
const scratch = sqliteScratch("consumer-claim");
const admin = await adminChannel();
const nc = await natsConnection();
afterEach(() => {
  hooks.beforeEffect = () => undefined;
});
afterAll(async () => {
  await admin.close();
  await nc.close();
});

/** The consumer app, run until its handler holds the message's claim, then killed with SIGKILL. */
const consumerApp = fileURLToPath(new URL("../support/claim-consumer-process.ts", import.meta.url));

async function charges(f: Facade): Promise<Event[]> {
  const all: Event[] = [];
  for await (const batch of f.eventRepository.readAll({ afterPosition: 0 })) all.push(...batch.filter((e) => e.name === "Charged"));
  return all;
}

describe.each(["amqp", "nats"] as const)("a consumer on %s killed while its message's command holds the claim", (broker) => {
  it.each(["sqlite", "postgres"] as const)(
    "on %s: the restarted app takes the claim over at once, the message succeeds with maxAttempts 2, its command runs once",
    async (backend) => {
      const filename = scratch.newFile();
      const schema = pg.newSchema();
      let source: string;
      const message = { accountUuid: "K", amount: 7 };
      if (broker === "amqp") {
        source = amqpName("dead-claim");
        await makeQueue(admin, source);
        admin.sendToQueue(source, Buffer.from(JSON.stringify(message)), { messageId: `m-${source}`, persistent: true });
      } else {
        source = streamName("DEADCLAIM");
        await makeStream(nc, source);
        const h = (await import("@nats-io/transport-node")).headers();
        h.set("Nats-Msg-Id", `m-${source}`);
        await (await import("@nats-io/jetstream")).jetstream(nc).publish(`${source}.charge`, JSON.stringify(message), { headers: h });
      }
      const where = backend === "sqlite" ? filename : DATABASE_URL;
      await holdAndKill(consumerApp, [broker, backend, where, schema, source, broker === "amqp" ? AMQP_URL : NATS_URL]);

      const stores = backend === "sqlite" ? createSqliteBackends({ filename }) : createPostgresBackends({ pool: pg.pool, schema });
      const f = createFacade({ appName: "claim-consumer-again", ...stores }).registerDomain(Claims);
      f.registerReadmodel(claimConsumer(f, broker, broker === "amqp" ? AMQP_URL : nc, source));
      await f.start();
      try {
        const info = () => f.runtime.listEventHandlers().find((h) => h.name === CONSUMER)!.integration!;
        // The dead app's claim lease runs ten minutes: a message handled within 30 s was taken over, not waited for.
        await until(() => info().handled + info().deadLetters > 0, "the message is handled", 30_000);
        expect(await f.runtime.listDeadLetters({ eventHandlerName: CONSUMER })).toEqual([]);
        expect(info()).toMatchObject({ handled: 1, deadLetters: 0 });
        expect((await charges(f)).map((e) => e.payload)).toEqual([{ amount: 7 }]);
      } finally {
        await f.stop();
      }
    },
    120_000,
  );
});

describe("a consumer whose message's command runs on another live instance", () => {
  it.each(["sqlite", "postgres"] as const)(
    "on %s: the in-progress answers cost no attempt; the message replays the outcome once it is known",
    async (backend) => {
      const filename = scratch.newFile();
      const schema = pg.newSchema();
      const stores = () => (backend === "sqlite" ? createSqliteBackends({ filename }) : createPostgresBackends({ pool: pg.pool, schema }));
      const queue = amqpName("live-claim");
      await makeQueue(admin, queue);
      // The other instance: runs the message's command (same commandUuid) and holds it until the gate opens.
      const other = createFacade({ appName: "other", ...stores() }).registerDomain(Claims);
      await other.start();
      // This one gives up waiting after 50 ms each time: several in-progress answers before the outcome.
      const f = createFacade({ appName: "consumer", ...stores(), idempotency: { waitMs: 50 } }).registerDomain(Claims);
      const consumer = claimConsumer(f, "amqp", AMQP_URL, queue);
      f.registerReadmodel(consumer);
      let open!: () => void;
      const gate = new Promise<void>((r) => (open = r));
      let running!: () => void;
      const started = new Promise<void>((r) => (running = r));
      hooks.beforeEffect = async () => {
        running();
        await gate;
      };
      const reqCtx = { senderAccountUuid: "acc-k", senderSessionUuid: "s-k", senderIdentityUuid: "i-k", senderTenantUuid: "tenant-k" };
      const message = { accountUuid: "K", amount: 3 };
      const held = other.dispatch(Charge, message, { reqCtx, commandUuid: consumer.commandUuidOf(`m-${queue}`) });
      await started;
      await f.start();
      try {
        admin.sendToQueue(queue, Buffer.from(JSON.stringify(message)), { messageId: `m-${queue}` });
        const info = () => f.runtime.listEventHandlers().find((h) => h.name === CONSUMER)!.integration!;
        // Well past maxAttempts (2) in-progress answers.
        await until(() => info().failures >= 4, "the consumer met the command in progress four times");
        expect(info()).toMatchObject({ handled: 0, deadLetters: 0 });
        expect(info().lastError).toMatch(/in progress/);
        open();
        await held;
        await until(() => info().handled === 1, "the message replays the outcome");
        expect(await f.runtime.listDeadLetters({ eventHandlerName: CONSUMER })).toEqual([]);
        expect((await charges(f)).map((e) => e.payload)).toEqual([{ amount: 3 }]);
      } finally {
        open();
        await f.stop();
        await other.stop();
      }
    },
    60_000,
  );
});
