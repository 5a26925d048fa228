import type { JetStreamClient } from "@nats-io/jetstream";
import { MnemeError } from "../model/errors.js";
import { IntegrationPublisher } from "../integration/integration-publisher.js";
import type { TransportMessage } from "../integration/integration-message.js";
import type { PublishTransport } from "../integration/integration-transport.js";
import type { ReadmodelFacade } from "../readmodel/base-readmodel.js";
import type { OutboxHandlerOptions } from "../reactions/outbox.js";
import { jetStreamOf, type NatsConnectionLike, natsError, natsHeaders } from "./nats-driver.js";

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

class NatsPublishTransport implements PublishTransport {
  readonly broker = "nats";
  readonly target: string;
  connected = false;
  readonly #o: NatsPublisherOptions;
  #js: JetStreamClient | undefined;
  #gathered: { m: TransportMessage; resolve: () => void; reject: (err: unknown) => void }[] = [];

  constructor(o: NatsPublisherOptions) {
    if (typeof o.connection?.isClosed !== "function")
      throw new MnemeError("INVALID_REQUEST", `${o.name}: connection must be a NATS connection`);
    const t = o.ackTimeoutMs ?? 5000;
    if (!Number.isFinite(t) || t < 1) throw new MnemeError("INVALID_REQUEST", `ackTimeoutMs must be a number >= 1, got ${String(t)}`);
    this.#o = o;
    this.target = o.stream ?? "(stream by subject)";
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

  #publishGathered(): void {
    const gathered = this.#gathered;
    this.#gathered = [];
    for (const { m, resolve, reject } of gathered) this.#publishNow(m).then(resolve, reject);
  }

  async #publishNow(m: TransportMessage): Promise<void> {
    const nc = this.#o.connection;
    if (m.exchange !== undefined)
      throw new MnemeError(
        "INVALID_REQUEST",
        `${this.#o.name}: NATS has no exchanges; the mapping of a NatsPublisher names a subject only`,
      );
    this.#js ??= jetStreamOf(nc);
    try {
      await this.#js.publish(m.subject, m.data, {
        msgID: m.id,
        headers: natsHeaders(m.headers),
        timeout: this.#o.ackTimeoutMs ?? 5000,
        ...(this.#o.stream === undefined ? {} : { expect: { streamName: this.#o.stream } }),
      });
      this.connected = true;
    } catch (err) {
      this.connected = false;
      throw natsError(err, nc, `publishing ${m.subject}`);
    }
  }

  close(): Promise<void> {
    return Promise.resolve();
  }
}
