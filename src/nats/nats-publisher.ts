import type { Msg, MsgHdrs, Subscription } from "@nats-io/transport-node";
import { isMnemeError, MnemeError } from "../model/errors.js";
import { IntegrationPublisher } from "../integration/integration-publisher.js";
import type { TransportMessage } from "../integration/integration-message.js";
import type { PublishTransport } from "../integration/integration-transport.js";
import type { ReadmodelFacade } from "../readmodel/base-readmodel.js";
import type { OutboxHandlerOptions } from "../reactions/outbox.js";
import { connectionWatch, type NatsConnectionLike, type NatsConnectionWatch, natsError, natsHeaders, natsInbox } from "./nats-driver.js";

/** Configuration of a NATS JetStream publisher. */
export interface NatsPublisherOptions extends OutboxHandlerOptions {
  /** The application's connection (`connect()` of @nats-io/transport-node); it reconnects by itself, mneme never closes it. */
  readonly connection: NatsConnectionLike;
  /** The stream the subjects belong to: a publish stored elsewhere fails (and is listed as the target). */
  readonly stream?: string;
  /** How long a publish waits for the stream's ack before it is tried again. Default 5000 ms. */
  readonly ackTimeoutMs?: number;
}

/**
 * Publishes chosen events to NATS JetStream, through an outbox (see
 * IntegrationPublisher): each with the event uuid as `Nats-Msg-Id`, so the
 * stream drops a repeat within its duplicate window; one aggregate's events
 * in position order; at least once, across server restarts and crashes of the app.
 * @example
 * const publisher = new NatsPublisher(facade, { name: "OrdersOut", domain: "Orders", connection: nc, stream: "ORDERS" })
 *   .on(OrderPlaced, (e) => ({ subject: "orders.placed", body: { orderId: e.payload.orderUuid } }));
 * facade.registerReadmodel(publisher);
 */
export class NatsPublisher extends IntegrationPublisher {
  constructor(facade: ReadmodelFacade, options: NatsPublisherOptions) {
    super(facade, { concurrency: 16, ...options, transport: new NatsPublishTransport(options) });
  }
}

/** Publishes sent in one go: one timer for their acks. */
interface AckBatch {
  open: number;
  timer?: ReturnType<typeof setTimeout>;
}

/** A publish waiting for its ack: settled by the ack, or by its batch's timer. */
interface Awaiting {
  readonly m: TransportMessage;
  readonly resolve: () => void;
  readonly reject: (err: unknown) => void;
  batch?: AckBatch;
}

class NatsPublishTransport implements PublishTransport {
  readonly broker = "nats";
  readonly target: string;
  /** False since a publish found the server away, until one reaches it again. */
  #reached = true;
  readonly #o: NatsPublisherOptions;
  readonly #watch: NatsConnectionWatch;
  readonly #timeoutMs: number;
  #gathered: Awaiting[] = [];
  /** Where the stream's acks come (a reply subject per publish under `inbox`), subscribed on first use. */
  #acks: { inbox: string; sub: Subscription } | undefined;
  #token = 0;
  /** The publishes whose acks are awaited, by the token of their reply subject. */
  readonly #awaiting = new Map<string, Awaiting>();

  constructor(o: NatsPublisherOptions) {
    if (typeof o.connection?.isClosed !== "function")
      throw new MnemeError("INVALID_REQUEST", `${o.name}: connection must be a NATS connection`);
    const t = o.ackTimeoutMs ?? 5000;
    if (!Number.isFinite(t) || t < 1) throw new MnemeError("INVALID_REQUEST", `ackTimeoutMs must be a number >= 1, got ${String(t)}`);
    this.#o = o;
    this.#timeoutMs = t;
    this.target = o.stream ?? "(stream by subject)";
    this.#watch = connectionWatch(o.connection);
  }

  /** Up as far as the connection's status says, and the last publish did not find the server away. */
  get connected(): boolean {
    return this.#reached && this.#watch.down === undefined;
  }

  onConnection(listener: (down: Error | undefined) => void): () => void {
    return this.#watch.listen(listener);
  }

  /**
   * Publishes `m` with the others asked for in the same turn of the event
   * loop: the client writes what is published in one synchronous run to the
   * socket at once, while lanes that each publish their next message as their
   * last ack comes in would each make a write (and a packet) of their own.
   */
  publish(m: TransportMessage): Promise<void> {
    return new Promise((resolve, reject) => {
      this.#gathered.push({ m, resolve, reject });
      if (this.#gathered.length === 1) setImmediate(() => this.#publishGathered());
    });
  }

  /**
   * Sends the gathered messages as JetStream publishes (the message id and the
   * expected stream as headers, a reply subject the stream acks to) with one
   * timer for their acks: what the client's `publish` does for each, without
   * its timer and error objects per message.
   */
  #publishGathered(): void {
    const gathered = this.#gathered;
    this.#gathered = [];
    const nc = this.#o.connection;
    const batch: AckBatch = { open: 0 };
    for (const g of gathered) {
      try {
        if (g.m.exchange !== undefined)
          throw new MnemeError(
            "INVALID_REQUEST",
            `${this.#o.name}: NATS has no exchanges; the mapping of a NatsPublisher names a subject only`,
          );
        const inbox = this.#ackInbox();
        const token = String(++this.#token);
        nc.publish(g.m.subject, g.m.data, { reply: `${inbox}.${token}`, headers: this.#headersOf(g.m) });
        g.batch = batch;
        batch.open++;
        this.#awaiting.set(token, g);
      } catch (err) {
        g.reject(this.#failure(err, g.m));
      }
    }
    if (batch.open === 0) return;
    batch.timer = setTimeout(() => {
      for (const [token, g] of this.#awaiting)
        if (g.batch === batch) this.#settle(token, new Error(`timeout: no ack from the stream within ${this.#timeoutMs} ms`));
    }, this.#timeoutMs);
  }

  #headersOf(m: TransportMessage): MsgHdrs {
    const h = natsHeaders(m.headers);
    h.set("Nats-Msg-Id", m.id);
    if (this.#o.stream !== undefined) h.set("Nats-Expected-Stream", this.#o.stream);
    return h;
  }

  /** The inbox the acks come to; subscribed again when the subscription has ended (a closed connection). */
  #ackInbox(): string {
    const nc = this.#o.connection;
    if (this.#acks === undefined || this.#acks.sub.isClosed()) {
      const inbox = natsInbox(nc);
      const sub = nc.subscribe(`${inbox}.*`, { callback: (err, msg) => this.#onAck(err, msg, inbox) });
      this.#acks = { inbox, sub };
    }
    return this.#acks.inbox;
  }

  #onAck(err: Error | null, msg: Msg, inbox: string): void {
    if (err !== null) {
      // The subscription ended: every publish it was waiting for fails (UNAVAILABLE: the connection closed).
      for (const token of [...this.#awaiting.keys()]) this.#settle(token, err);
      return;
    }
    const token = msg.subject.slice(inbox.length + 1);
    if (!this.#awaiting.has(token)) return;
    this.#settle(token, ackError(msg));
  }

  /** Settles the publish of `token`: acked when `err` is undefined. */
  #settle(token: string, err: Error | undefined): void {
    const g = this.#awaiting.get(token);
    if (g === undefined) return;
    this.#awaiting.delete(token);
    if (g.batch !== undefined && --g.batch.open === 0) clearTimeout(g.batch.timer);
    if (err === undefined) {
      this.#reached = true;
      g.resolve();
    } else {
      g.reject(this.#failure(err, g.m));
    }
  }

  #failure(err: unknown, m: TransportMessage): unknown {
    const failure = natsError(err, this.#o.connection, `publishing ${m.subject}`);
    if (isMnemeError(failure, "UNAVAILABLE")) this.#reached = false;
    return failure;
  }

  close(): Promise<void> {
    const acks = this.#acks;
    this.#acks = undefined;
    if (acks !== undefined && !acks.sub.isClosed()) acks.sub.unsubscribe();
    for (const token of [...this.#awaiting.keys()]) this.#settle(token, new Error("the publisher closed (connection closed)"));
    return Promise.resolve();
  }
}

/**
 * What the stream's reply to a publish says: undefined for an ack, else the
 * error the client's `publish` throws for it: a refusal (JetStream's
 * description), no stream taking the subject (no responders), a reply that is no ack.
 */
function ackError(msg: Msg): Error | undefined {
  if (msg.data.length === 0 && msg.headers?.code === 503) return namedError("JetStreamNotEnabled", "jetstream is not enabled");
  let ack: { stream?: unknown; error?: { description?: unknown } };
  try {
    ack = msg.json();
  } catch {
    return new Error("invalid ack response");
  }
  if (ack.error !== undefined)
    return namedError("JetStreamApiError", typeof ack.error.description === "string" ? ack.error.description : JSON.stringify(ack.error));
  return typeof ack.stream === "string" && ack.stream !== "" ? undefined : new Error("invalid ack response");
}

function namedError(name: string, message: string): Error {
  const e = new Error(message);
  e.name = name;
  return e;
}
