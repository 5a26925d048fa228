import type { Consumer, ConsumerMessages, JetStreamManager, JsMsg } from "@nats-io/jetstream";
import { errorMessage, MnemeError } from "../model/errors.js";
import { IntegrationConsumer } from "../integration/integration-consumer.js";
import type { CommandMapping } from "../integration/integration-message.js";
import type { ConsumeTransport, DeliveredMessage } from "../integration/integration-transport.js";
import type { OutboxHandlerOptions } from "../reactions/outbox.js";
import type { ReactionFacade } from "../reactions/process-manager.js";
import {
  connectionWatch,
  headerRecord,
  jetStreamManagerOf,
  jetStreamOf,
  type NatsConnectionLike,
  type NatsConnectionWatch,
  natsError,
} from "./nats-driver.js";

/** Configuration of a NATS JetStream consumer. */
export interface NatsConsumerOptions extends OutboxHandlerOptions {
  /** The application's connection (`connect()` of @nats-io/transport-node); mneme never closes it. */
  readonly connection: NatsConnectionLike;
  /** The stream to consume from (it must exist). */
  readonly stream: string;
  /** The durable consumer's name; made (explicit acks, unlimited deliveries, `filterSubjects`, `ackWaitMs`) when the stream has none of that name. */
  readonly durable: string;
  /** Subjects the durable consumer takes, when mneme makes it. Default: the whole stream. */
  readonly filterSubjects?: readonly string[];
  /** How long the server waits for an ack before it delivers a message again, when mneme makes the consumer. Default 30,000 ms. */
  readonly ackWaitMs?: number;
  /** Turns a message into its command (see CommandMapping). */
  readonly toCommand: CommandMapping;
  /** The uuid namespace of the commandUuids; default mneme's (see `messageCommandUuid`). */
  readonly namespace?: string;
  /** Deliveries without an outcome after which a message is a dead letter at once (see IntegrationConsumerOptions). Default 100. */
  readonly maxDeliveries?: number;
}

/**
 * Turns the messages of a JetStream durable consumer into commands (see
 * IntegrationConsumer): the command's `commandUuid` is a uuid v5 of the
 * message's `Nats-Msg-Id` (else of stream and sequence), the message is acked
 * once the command committed or replayed, and a poison message becomes a
 * dead letter after `retry.maxAttempts` (or once delivered more than
 * `maxDeliveries` times) and is acked on the server.
 * @example
 * facade.registerReadmodel(new NatsConsumer(facade, {
 *   name: "OrdersIn", domain: "Shipping", connection: nc, stream: "ORDERS", durable: "shipping",
 *   toCommand: (m) => ({ command: ShipOrder, payload: { orderId: (m.body as { orderId: string }).orderId } }),
 * }));
 */
export class NatsConsumer extends IntegrationConsumer {
  constructor(facade: ReactionFacade, options: NatsConsumerOptions) {
    super(facade, { ...options, transport: new NatsConsumeTransport(options) });
  }
}

class NatsConsumeTransport implements ConsumeTransport {
  readonly broker = "nats";
  readonly target: string;
  readonly #o: NatsConsumerOptions;
  #consumer: Consumer | undefined;
  #messages: ConsumerMessages | undefined;
  #loop: Promise<void> | undefined;
  readonly #watch: NatsConnectionWatch;

  constructor(o: NatsConsumerOptions) {
    if (typeof o.connection?.isClosed !== "function")
      throw new MnemeError("INVALID_REQUEST", `${o.name}: connection must be a NATS connection`);
    for (const k of ["stream", "durable"] as const)
      if (typeof o[k] !== "string" || o[k] === "") throw new MnemeError("INVALID_REQUEST", `${o.name}: ${k} must be a non-empty string`);
    const wait = o.ackWaitMs ?? 30_000;
    if (!Number.isFinite(wait) || wait < 100)
      throw new MnemeError("INVALID_REQUEST", `ackWaitMs must be a number >= 100, got ${String(wait)}`);
    this.#o = o;
    this.target = `${o.stream}/${o.durable}`;
    this.#watch = connectionWatch(o.connection);
  }

  get connected(): boolean {
    // The pull loop waits through an outage without a word: the connection's status says it.
    return this.#messages !== undefined && this.#watch.down === undefined;
  }

  onConnection(listener: (down: Error | undefined) => void): () => void {
    return this.#watch.listen(listener);
  }

  async open(handle: (m: DeliveredMessage) => Promise<void>, concurrency: number): Promise<void> {
    const nc = this.#o.connection;
    try {
      await this.#ensureConsumer(await jetStreamManagerOf(nc));
      this.#consumer = await jetStreamOf(nc).consumers.get(this.#o.stream, this.#o.durable);
      // Pulls of 64 or more: fewer pull requests per message (their round trips cost more than the buffer).
      this.#messages = await this.#consumer.consume({ max_messages: Math.max(64, concurrency * 4) });
    } catch (err) {
      throw natsError(err, nc, `consuming ${this.target}`);
    }
    this.#loop = run(this.#messages, (m) => handle(this.#delivered(m)), concurrency);
  }

  async #ensureConsumer(jsm: JetStreamManager): Promise<void> {
    const o = this.#o;
    try {
      await jsm.consumers.info(o.stream, o.durable);
    } catch (err) {
      if (!/consumer not found/i.test(errorMessage(err))) throw err;
      await jsm.consumers.add(o.stream, {
        durable_name: o.durable,
        ack_policy: "explicit" as never,
        // mneme decides when a message is dead; the server delivers it until it is acked.
        max_deliver: -1,
        ack_wait: (o.ackWaitMs ?? 30_000) * 1e6,
        // One subject as filter_subject: servers before 2.10 know no filter_subjects.
        ...(o.filterSubjects === undefined
          ? {}
          : o.filterSubjects.length === 1
            ? { filter_subject: o.filterSubjects[0]! }
            : { filter_subjects: [...o.filterSubjects] }),
      });
    }
  }

  #delivered(m: JsMsg): DeliveredMessage {
    const headers = headerRecord(m.headers);
    return {
      id: headers["Nats-Msg-Id"] ?? `${m.info.stream}:${m.seq}`,
      subject: m.subject,
      headers,
      data: m.data,
      deliveryCount: m.info.deliveryCount,
      pending: m.info.pending,
      ack: () => {
        m.ack();
        return Promise.resolve();
      },
      release: () => m.nak(),
      working: () => m.working(),
    };
  }

  async close(): Promise<void> {
    const messages = this.#messages;
    this.#messages = undefined;
    if (messages !== undefined) await messages.close();
    await this.#loop;
    this.#loop = undefined;
  }

  async lag(): Promise<number | undefined> {
    const info = await this.#consumer?.info(false);
    return info === undefined ? undefined : info.num_pending + info.num_ack_pending;
  }
}

/** Hands the messages to `handle`, at most `concurrency` at once; resolves when the iterator ended and every handler finished. */
async function run(messages: AsyncIterable<JsMsg>, handle: (m: JsMsg) => Promise<void>, concurrency: number): Promise<void> {
  const running = new Set<Promise<void>>();
  // Woken by the next handler that finishes (not Promise.race over all running: that adds a reaction to each, per message).
  let freed: (() => void) | undefined;
  for await (const m of messages) {
    const p: Promise<void> = handle(m).finally(() => {
      running.delete(p);
      const wake = freed;
      freed = undefined;
      wake?.();
    });
    running.add(p);
    if (running.size >= concurrency) await new Promise<void>((resolve) => (freed = resolve));
  }
  await Promise.all(running);
}
