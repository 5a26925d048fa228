import type { ConfirmChannel, Message } from "amqplib";
import { MnemeError } from "../model/errors.js";
import { IntegrationPublisher } from "../integration/integration-publisher.js";
import type { TransportMessage } from "../integration/integration-message.js";
import type { PublishTransport } from "../integration/integration-transport.js";
import type { ReadmodelFacade } from "../readmodel/base-readmodel.js";
import type { OutboxHandlerOptions } from "../reactions/outbox.js";
import { type AmqpConnectionLike, AmqpChannelLink, amqpError, ChannelReopener, checkConnection, EXCHANGE_TYPES } from "./amqp-driver.js";

/** Configuration of a RabbitMQ (AMQP 0-9-1) publisher. */
export interface AmqpPublisherOptions extends OutboxHandlerOptions {
  /**
   * The application's connection (`connect(url, { recovery: {} })` of amqplib; mneme never closes it), or an
   * `amqp://` URL that mneme connects to (with amqplib's recovery) while the publisher runs.
   */
  readonly connection: AmqpConnectionLike | string;
  /** The exchange messages go to ("" is the default exchange, which routes by queue name); a mapping may name another. */
  readonly exchange: string;
  /** When given, the exchange is declared (durable, of this type) on each new channel; else it must exist. */
  readonly exchangeType?: "direct" | "topic" | "fanout" | "headers";
  /**
   * Publish as `mandatory`: a message no queue takes comes back and the
   * publish fails (retried, then a dead letter) instead of being dropped by
   * the broker. Default true.
   */
  readonly mandatory?: boolean;
  /** How long a publish waits for the broker's confirm (and for a channel) before it is tried again. Default 5000 ms. */
  readonly confirmTimeoutMs?: number;
}

/**
 * Publishes chosen events to RabbitMQ, through an outbox (see
 * IntegrationPublisher): each persistent, with the event uuid as the AMQP
 * `message-id`, on a confirm channel (an entry leaves the outbox only once
 * the broker confirmed it); one aggregate's events in position order; at
 * least once, across broker restarts and crashes of the app. RabbitMQ drops
 * no repeats: consumers dedupe by message-id (AmqpConsumer does).
 * @example
 * const publisher = new AmqpPublisher(facade, { name: "OrdersOut", domain: "Orders", connection: conn, exchange: "orders", exchangeType: "topic" })
 *   .on(OrderPlaced, (e) => ({ subject: "orders.placed", body: { orderId: e.payload.orderUuid } }));
 * facade.registerReadmodel(publisher);
 */
export class AmqpPublisher extends IntegrationPublisher {
  constructor(facade: ReadmodelFacade, options: AmqpPublisherOptions) {
    super(facade, { concurrency: 16, ...options, transport: new AmqpPublishTransport(options) });
  }
}

class AmqpPublishTransport implements PublishTransport {
  readonly broker = "amqp";
  readonly target: string;
  /** A publish reached the broker, and none found it away since. */
  #reached = false;
  /** Closed (the handler stopped): a channel that closes is not opened again until the next publish. */
  #stopped = false;
  readonly #reopen: ChannelReopener;
  readonly #o: AmqpPublisherOptions;
  readonly #timeoutMs: number;
  readonly #link: AmqpChannelLink<ConfirmChannel>;
  /** Message ids the broker returned as unroutable on the current channel; a return comes before its confirm. */
  readonly #returned = new Set<string>();
  #gathered: Gathered[] = [];

  constructor(o: AmqpPublisherOptions) {
    const source = checkConnection(o.connection, o.name);
    if (typeof o.exchange !== "string")
      throw new MnemeError("INVALID_REQUEST", `${o.name}: exchange must be a string ("" for the default exchange)`);
    if (o.exchangeType !== undefined && (!EXCHANGE_TYPES.has(o.exchangeType) || o.exchange === ""))
      throw new MnemeError("INVALID_REQUEST", `${o.name}: exchangeType must be direct, topic, fanout or headers, and the exchange named`);
    const t = o.confirmTimeoutMs ?? 5000;
    if (!Number.isFinite(t) || t < 1) throw new MnemeError("INVALID_REQUEST", `confirmTimeoutMs must be a number >= 1, got ${String(t)}`);
    this.#o = o;
    this.#timeoutMs = t;
    this.target = o.exchange === "" ? "(default exchange)" : o.exchange;
    this.#link = new AmqpChannelLink<ConfirmChannel>(
      source,
      true,
      (ch) => this.#setup(ch),
      // The channel closed under a running publisher: open it again, so the listing follows the broker.
      () => this.#reopen.schedule(),
    );
    this.#reopen = new ChannelReopener(
      () => this.#link.channel(this.#timeoutMs, "publishing to RabbitMQ"),
      () => !this.#stopped,
    );
  }

  /** Up while its channel is open (it closes when the broker goes away) and publishes reach the broker. */
  get connected(): boolean {
    return this.#reached && this.#link.current !== undefined;
  }

  onConnection(listener: (down: Error | undefined) => void): () => void {
    return this.#link.listen(listener);
  }

  async #setup(ch: ConfirmChannel): Promise<void> {
    this.#returned.clear();
    ch.on("return", (m: Message) => {
      const id = m.properties.messageId as unknown;
      if (typeof id === "string") this.#returned.add(id);
    });
    if (this.#o.exchangeType !== undefined) await ch.assertExchange(this.#o.exchange, this.#o.exchangeType, { durable: true });
  }

  /**
   * Publishes `m` with the others asked for in the same turn of the event
   * loop: one channel look-up and one confirm timer for them all, and the
   * client writes them to the socket together; each still settles on its own
   * confirm (or nack, return, or the channel's close).
   */
  publish(m: TransportMessage): Promise<void> {
    this.#stopped = false;
    return new Promise((resolve, reject) => {
      this.#gathered.push({ m, resolve, reject });
      if (this.#gathered.length === 1) setImmediate(() => void this.#publishGathered());
    });
  }

  async #publishGathered(): Promise<void> {
    const gathered = this.#gathered;
    this.#gathered = [];
    let ch: ConfirmChannel | undefined;
    try {
      ch = await this.#link.channel(this.#timeoutMs, "publishing to RabbitMQ");
    } catch (err) {
      for (const g of gathered) this.#fail(g, undefined, err);
      return;
    }
    let open = gathered.length;
    const settled = (): void => {
      if (--open === 0) clearTimeout(timer);
    };
    const timer = setTimeout(() => {
      for (const g of gathered)
        if (!g.done) this.#fail(g, ch, new MnemeError("UNAVAILABLE", `no answer from the AMQP broker within ${this.#timeoutMs} ms`));
    }, this.#timeoutMs);
    const socket = socketOf(ch);
    socket?.cork();
    try {
      for (const g of gathered) this.#publishOn(ch, g, settled);
    } finally {
      // The client hands a channel's frames to the socket in a later turn (its muxer runs on setImmediate, scheduled when
      // the channel's buffer becomes readable, on the next tick): uncork after it, so they go out in one write, not one each.
      if (socket !== undefined) process.nextTick(() => setImmediate(() => socket.uncork()));
    }
  }

  #publishOn(ch: ConfirmChannel, g: Gathered, settled: () => void): void {
    const { m } = g;
    const exchange = m.exchange ?? this.#o.exchange;
    const options = {
      messageId: m.id,
      persistent: true,
      mandatory: this.#o.mandatory ?? true,
      contentType: "application/json",
      timestamp: Math.floor(Date.now() / 1000),
      headers: m.headers,
    };
    const content = Buffer.from(m.data.buffer, m.data.byteOffset, m.data.byteLength);
    try {
      ch.publish(exchange, m.subject, content, options, (err: unknown) => {
        settled();
        if (g.done) return;
        if (err !== null && err !== undefined)
          return void this.#fail(g, ch, err instanceof Error ? err : new Error("the broker refused the message (a nack)"));
        g.done = true;
        this.#reached = true;
        if (!this.#returned.delete(m.id)) return void g.resolve();
        const what = whatOf(m, exchange);
        g.reject(
          new MnemeError("INVALID_STATE", `${what}: no queue is bound for routing key ${m.subject} (the broker returned the message)`),
        );
      });
    } catch (err) {
      settled();
      this.#fail(g, ch, err);
    }
  }

  #fail(g: Gathered, ch: ConfirmChannel | undefined, err: unknown): void {
    if (g.done) return;
    g.done = true;
    const exchange = g.m.exchange ?? this.#o.exchange;
    const reason = this.#link.reasonOf(ch);
    this.#reached = reason !== undefined;
    g.reject(amqpError(blames(reason, exchange) ? reason : err, whatOf(g.m, exchange)));
  }

  close(): Promise<void> {
    this.#stopped = true;
    this.#reached = false;
    this.#reopen.cancel();
    return this.#link.close();
  }
}

/**
 * Whether the server's reason for closing the channel is this publish's
 * fault (it counts an attempt): a missing exchange (404) only for a publish
 * to that exchange, since every publish in flight on the channel fails with
 * it and the others are no more to blame than for a lost connection; any
 * other refusal (a declaration that does not match, access refused) always.
 */
function blames(reason: unknown, exchange: string): boolean {
  if (reason === undefined) return false;
  const { code, message } = reason as { code?: unknown; message?: unknown };
  return code !== 404 || (typeof message === "string" && message.includes(`'${exchange}'`));
}

/** The socket under an amqplib channel, when the client shows it (`connection.stream`); undefined otherwise. */
function socketOf(ch: ConfirmChannel): { cork(): void; uncork(): void } | undefined {
  const stream = (ch as { connection?: { stream?: { cork?: unknown; uncork?: unknown } } }).connection?.stream;
  return typeof stream?.cork === "function" && typeof stream.uncork === "function"
    ? (stream as { cork(): void; uncork(): void })
    : undefined;
}

interface Gathered {
  readonly m: TransportMessage;
  readonly resolve: () => void;
  readonly reject: (err: unknown) => void;
  done?: boolean;
}

function whatOf(m: TransportMessage, exchange: string): string {
  return `publishing ${m.subject} to ${exchange === "" ? "the default exchange" : exchange}`;
}
