import { createHash } from "node:crypto";
import type { Channel, ConsumeMessage, Options } from "amqplib";
import { MnemeError } from "../model/errors.js";
import { IntegrationConsumer } from "../integration/integration-consumer.js";
import type { CommandMapping } from "../integration/integration-message.js";
import type { ConsumeTransport, DeliveredMessage } from "../integration/integration-transport.js";
import type { OutboxHandlerOptions } from "../reactions/outbox.js";
import type { ReactionFacade } from "../reactions/process-manager.js";
import {
  type AmqpConnectionLike,
  AmqpChannelLink,
  amqpError,
  ChannelReopener,
  checkConnection,
  EXCHANGE_TYPES,
  headerRecord,
} from "./amqp-driver.js";

/** A binding of a consumer's queue to an exchange. */
export interface AmqpBinding {
  readonly exchange: string;
  readonly routingKey: string;
  /** Declare the exchange (durable) with this type before binding; default: it must exist. */
  readonly exchangeType?: "direct" | "topic" | "fanout" | "headers";
}

/** Configuration of a RabbitMQ (AMQP 0-9-1) consumer. */
export interface AmqpConsumerOptions extends OutboxHandlerOptions {
  /** The application's connection (amqplib, best a recovering one; mneme never closes it), or an `amqp://` URL mneme connects to while it runs. */
  readonly connection: AmqpConnectionLike | string;
  /** The queue to consume from. */
  readonly queue: string;
  /**
   * Declare the queue on each new channel: `true` (durable), or amqplib's
   * assertQueue options (a quorum queue: `{ durable: true, arguments: { "x-queue-type": "quorum" } }`,
   * a dead-letter exchange: `deadLetterExchange`). Default: the queue must exist.
   */
  readonly assertQueue?: boolean | Options.AssertQueue;
  /**
   * Bindings of the queue made on each new channel. An exchange with an
   * `exchangeType` is declared (durable, of that type) first; else it must exist.
   */
  readonly bindings?: readonly AmqpBinding[];
  /** How many unacknowledged messages the broker hands over at once (basic.qos). Default: max(16, 2 x concurrency). */
  readonly prefetch?: number;
  /**
   * A message that became a dead letter of the consumer is rejected (not
   * requeued) instead of acked, so a queue with a dead-letter exchange routes
   * it there as well. Default false.
   */
  readonly rejectDeadLetters?: boolean;
  /** Turns a message into its command (see CommandMapping). */
  readonly toCommand: CommandMapping;
  /** The uuid namespace of the commandUuids; default mneme's (see `messageCommandUuid`). */
  readonly namespace?: string;
  /** Deliveries without an outcome after which a message is a dead letter at once (counted by quorum queues only). Default 100. */
  readonly maxDeliveries?: number;
}

/**
 * Turns the messages of a RabbitMQ queue into commands (see
 * IntegrationConsumer): the command's `commandUuid` is a uuid v5 of the
 * message's `message-id` (else of a sha-256 of its routing key, the
 * publisher's headers and body), so
 * a redelivered message runs nothing twice; the message is acked once the
 * command committed or replayed, and a poison message becomes a dead letter
 * after `retry.maxAttempts` and is acked (or rejected to the queue's
 * dead-letter exchange with `rejectDeadLetters`).
 * @example
 * facade.registerReadmodel(new AmqpConsumer(facade, {
 *   name: "OrdersIn", domain: "Shipping", connection: conn, queue: "shipping.orders", assertQueue: true,
 *   bindings: [{ exchange: "orders", routingKey: "orders.placed" }],
 *   toCommand: (m) => ({ command: ShipOrder, payload: { orderId: (m.body as { orderId: string }).orderId } }),
 * }));
 */
export class AmqpConsumer extends IntegrationConsumer {
  constructor(facade: ReactionFacade, options: AmqpConsumerOptions) {
    super(facade, { ...options, transport: new AmqpConsumeTransport(options) });
  }
}

/** How long opening the channel and the subscription may take before the consumer tries again. */
const OPEN_TIMEOUT_MS = 10_000;

class AmqpConsumeTransport implements ConsumeTransport {
  readonly broker = "amqp";
  readonly target: string;
  readonly #o: AmqpConsumerOptions;
  readonly #link: AmqpChannelLink<Channel>;
  #handle: ((m: DeliveredMessage) => Promise<void>) | undefined;
  #concurrency = 1;
  #live = false;
  #consumerTag: string | undefined;
  readonly #reopen: ChannelReopener;
  /** Delivered, waiting for a free slot; with their channel, since an ack goes on the channel that delivered. */
  readonly #waiting: { ch: Channel; msg: ConsumeMessage }[] = [];
  readonly #running = new Set<Promise<void>>();
  /** Channels that closed: their undelivered messages are the broker's again (it redelivers them). */
  readonly #closedChannels = new WeakSet<Channel>();

  constructor(o: AmqpConsumerOptions) {
    const source = checkConnection(o.connection, o.name);
    if (typeof o.queue !== "string" || o.queue === "")
      throw new MnemeError("INVALID_REQUEST", `${o.name}: queue must be a non-empty string`);
    for (const b of o.bindings ?? [])
      if (
        typeof b?.exchange !== "string" ||
        typeof b.routingKey !== "string" ||
        (b.exchangeType !== undefined && !EXCHANGE_TYPES.has(b.exchangeType))
      )
        throw new MnemeError(
          "INVALID_REQUEST",
          `${o.name}: each binding must be { exchange, routingKey, exchangeType? } (direct, topic, fanout or headers)`,
        );
    if (o.prefetch !== undefined && (!Number.isInteger(o.prefetch) || o.prefetch < 1 || o.prefetch > 65535))
      throw new MnemeError("INVALID_REQUEST", `prefetch must be an integer in 1..65535, got ${String(o.prefetch)}`);
    this.#o = o;
    this.target = o.queue;
    this.#link = new AmqpChannelLink<Channel>(
      source,
      false,
      (ch) => this.#subscribe(ch),
      () => this.#scheduleReopen(),
    );
    this.#reopen = new ChannelReopener(
      () => this.#link.channel(OPEN_TIMEOUT_MS, `consuming ${this.target}`),
      () => this.#live,
    );
  }

  get connected(): boolean {
    return this.#live && this.#link.current !== undefined;
  }

  onConnection(listener: (down: Error | undefined) => void): () => void {
    return this.#link.listen(listener);
  }

  async open(handle: (m: DeliveredMessage) => Promise<void>, concurrency: number): Promise<void> {
    this.#handle = handle;
    this.#concurrency = concurrency;
    this.#live = true;
    try {
      await this.#link.channel(OPEN_TIMEOUT_MS, `consuming ${this.target}`);
    } catch (err) {
      this.#live = false;
      // A channel still coming is closed when it comes, unless the consumer opens again first: nothing else would close it.
      await this.#link.close();
      throw amqpError(err, `consuming ${this.target}`);
    }
    // A channel that came after an earlier open gave up may hold deliveries already.
    this.#pump();
  }

  /** Declares and binds the queue as configured, sets the prefetch and subscribes: run on every new channel. */
  async #subscribe(ch: Channel): Promise<void> {
    const o = this.#o;
    ch.once("close", () => this.#closedChannels.add(ch));
    if (o.assertQueue === undefined || o.assertQueue === false) await ch.checkQueue(o.queue);
    else await ch.assertQueue(o.queue, o.assertQueue === true ? { durable: true } : o.assertQueue);
    for (const b of o.bindings ?? []) {
      if (b.exchangeType !== undefined) await ch.assertExchange(b.exchange, b.exchangeType, { durable: true });
      await ch.bindQueue(o.queue, b.exchange, b.routingKey);
    }
    await ch.prefetch(o.prefetch ?? Math.max(16, 2 * this.#concurrency));
    const { consumerTag } = await ch.consume(o.queue, (msg) => {
      // null: the broker cancelled the subscription (the queue was deleted); open again while running.
      if (msg === null) void ch.close().catch(() => undefined);
      else this.#deliver(ch, msg);
    });
    this.#consumerTag = consumerTag;
  }

  /** The channel closed under a running consumer (broker restart, lost connection): open again until it works. */
  #scheduleReopen(): void {
    // Messages not yet handed over are the closed channel's: the broker delivers them again.
    this.#waiting.length = 0;
    this.#reopen.schedule();
  }

  #deliver(ch: Channel, msg: ConsumeMessage): void {
    this.#waiting.push({ ch, msg });
    this.#pump();
  }

  /** Hands waiting messages over, at most `concurrency` at once, in the order the broker delivered them. */
  #pump(): void {
    while (this.#running.size < this.#concurrency && this.#waiting.length > 0 && this.#live) {
      const { ch, msg } = this.#waiting.shift()!;
      if (this.#closedChannels.has(ch)) continue;
      const p: Promise<void> = this.#handle!(this.#delivered(ch, msg)).finally(() => {
        this.#running.delete(p);
        this.#pump();
      });
      this.#running.add(p);
    }
  }

  #delivered(ch: Channel, msg: ConsumeMessage): DeliveredMessage {
    const headers = headerRecord(msg.properties.headers as Record<string, unknown> | undefined);
    const quorumCount = Number(headers["x-delivery-count"]);
    const settle = async (f: () => void, what: string): Promise<void> => {
      try {
        f();
      } catch (err) {
        // The channel closed: the broker delivers the message again, and its command is then a replay.
        throw amqpError(err, `${what} ${this.target}`);
      }
    };
    return {
      id: messageId(msg),
      subject: msg.fields.routingKey,
      headers,
      data: msg.content,
      deliveryCount: Number.isInteger(quorumCount) ? quorumCount + 1 : msg.fields.redelivered ? 2 : 1,
      ack: () => settle(() => ch.ack(msg), "acking on"),
      deadLettered: () =>
        this.#o.rejectDeadLetters === true ? settle(() => ch.reject(msg, false), "rejecting on") : settle(() => ch.ack(msg), "acking on"),
      release: () => {
        try {
          ch.nack(msg, false, true);
        } catch {
          // The channel is closed: the broker requeued the message already.
        }
      },
      // RabbitMQ has no ack deadline to extend (only consumer_timeout, 30 min by default).
      working: () => undefined,
    };
  }

  async close(): Promise<void> {
    this.#live = false;
    this.#reopen.cancel();
    const ch = this.#link.current;
    const tag = this.#consumerTag;
    this.#consumerTag = undefined;
    if (ch !== undefined && tag !== undefined) await ch.cancel(tag).catch(() => undefined);
    this.#waiting.length = 0;
    // The messages being handled settle on the channel that delivered them; it closes after them (and requeues the waiting ones).
    await Promise.all(this.#running);
    await this.#link.close();
  }

  async lag(): Promise<number | undefined> {
    const ch = this.#link.current;
    if (ch === undefined) return undefined;
    const q = await ch.checkQueue(this.#o.queue);
    return q.messageCount + this.#running.size + this.#waiting.length;
  }
}

/**
 * Headers RabbitMQ itself adds to a message on its way (a quorum queue's
 * delivery count, dead-lettering, shovels and federation): they change
 * between deliveries of one message, so the id derived without a message-id
 * leaves them out. Every other header is the publisher's, and reaches toCommand.
 */
const BROKER_HEADERS = /^x-(delivery-count|death|received-from|shovelled|shovelled-timestamp)$|^x-(first|last)-death-/;

/**
 * The message-id; without one, an id derived from everything the consumer
 * hands toCommand (routing key, the publisher's headers, body), so a
 * redelivery is still the same command, two identical messages are one, and
 * two messages that differ in anything toCommand sees are two.
 */
export function messageId(msg: Pick<ConsumeMessage, "fields" | "properties" | "content">): string {
  const id = msg.properties.messageId as unknown;
  if (typeof id === "string" && id !== "") return id;
  return derivedMessageId(msg.fields.routingKey, headerRecord(msg.properties.headers as Record<string, unknown> | undefined), msg.content);
}

/** The id of a message without message-id (see messageId). */
export function derivedMessageId(routingKey: string, headers: Readonly<Record<string, string>>, body: Uint8Array): string {
  const own = Object.entries(headers)
    .filter(([k]) => !BROKER_HEADERS.test(k))
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  // Without headers, the form of earlier releases (a message in flight across an upgrade keeps its id);
  // a routing key with a line break takes the other form, where it cannot run into the body.
  if (own.length === 0 && !routingKey.includes("\n"))
    return `sha256:${createHash("sha256").update(routingKey).update("\n").update(body).digest("hex")}`;
  // JSON has no raw line break: the first one ends the routing key and headers.
  const head = JSON.stringify([routingKey, own]);
  return `sha256h:${createHash("sha256").update(head).update("\n").update(body).digest("hex")}`;
}
