import { MnemeError } from "../model/errors.js";
import type { IntegrationInfo } from "../model/event-handler.js";
import type { EventType } from "../model/tokens.js";
import type { Event } from "../model/types.js";
import { BaseReadmodel, type ReadmodelFacade } from "../readmodel/base-readmodel.js";
import { Outbox, type OutboxHandlerOptions, reactionOptions } from "../reactions/outbox.js";
import type { OutboxEntry } from "../reactions/outbox-entry.js";
import { effectEntryOf, eventOfEntry } from "../reactions/reactor.js";
import { encodeBody, messageHeaders, type MessageMapping, type OutboundMessage } from "./integration-message.js";
import { IntegrationStats, type PublishTransport } from "./integration-transport.js";

/** Configuration of a publisher: an outbox handler's, with the broker's transport. */
export interface IntegrationPublisherOptions extends OutboxHandlerOptions {
  readonly transport: PublishTransport;
}

/** How often the listing counts the outbox again, at most. */
const COUNT_EVERY_MS = 250;
/** A page's events are read in one range read unless the range holds more than this many positions per entry. */
const READ_AHEAD_SPREAD = 8;

/**
 * Publishes chosen events to a message broker as integration messages,
 * through an outbox: an event handler (listed, measured, started, stopped
 * and restored like a readmodel) that records each chosen event in its
 * outbox in the transaction of its checkpoint; the outbox's worker publishes
 * it afterwards with the event uuid as the message id (the broker drops a
 * repeat), at least once, with backoff and dead letters. The entries of one
 * aggregate go strictly in position order: a failed one holds the ones behind
 * it. mneme/nats and mneme/amqp make it with their transports.
 */
export class IntegrationPublisher extends BaseReadmodel {
  /** The outbox part: the events still to publish, with their retries and dead letters (see Outbox). */
  readonly outbox: Outbox;
  readonly #mappings = new Map<string, MessageMapping<unknown>>();
  readonly #transport: PublishTransport;
  readonly #stats: IntegrationStats;
  #countedAt = 0;
  /** The events of the page being published, read in one go (see #readAhead). */
  #readAheadEvents = new Map<string, Event>();

  constructor(facade: ReadmodelFacade, options: IntegrationPublisherOptions) {
    super(facade, ...reactionOptions(options));
    this.name = options.name;
    this.domain = options.domain;
    const transport = options.transport;
    if (typeof transport?.publish !== "function") throw new MnemeError("INVALID_REQUEST", `${options.name}: a publisher needs a transport`);
    this.#transport = transport;
    this.#stats = new IntegrationStats("publisher", transport.broker, transport.target);
    this.outbox = new Outbox(this, options, (entry) => this.#publish(entry), undefined, {
      ordered: true,
      prepare: (entries) => this.#readAhead(entries),
    });
    this.addPart(this.outbox);
    let unwatch: (() => void) | undefined;
    this.addPart({
      describe: () => this.#describe(),
      starting: () => {
        unwatch ??= this.#transport.onConnection?.((why) => this.#stats.wentAway(why));
      },
      stopping: () => {
        unwatch?.();
        unwatch = undefined;
        return this.#transport.close();
      },
    });
  }

  /**
   * Publishes events of `type` as `mapping` shapes them (one mapping per
   * event type). The mapping runs when the event is published, on the event
   * as the store reads it then; `undefined` publishes nothing for that event.
   * @example
   * publisher.on(OrderPlaced, (e) => ({ subject: "orders.placed", body: { orderId: e.payload.orderUuid, total: e.payload.total } }));
   */
  on<P>(type: EventType<P>, mapping: MessageMapping<P>): this {
    if (typeof mapping !== "function") throw new MnemeError("INVALID_EVENT_HANDLER", `${this.name}: a message mapping must be a function`);
    if ((type as { kind?: unknown } | undefined)?.kind !== "event")
      throw new MnemeError("INVALID_EVENT_HANDLER", `${this.name}: on() takes an event type`);
    if (this.#mappings.has(type.path)) throw new MnemeError("INVALID_EVENT_HANDLER", `${this.name} publishes ${type.path} already`);
    this.#mappings.set(type.path, mapping as MessageMapping<unknown>);
    this.addDomainEventHandler(type, (_ctx, event) => this.#record(event));
    return this;
  }

  #record(event: Event): void {
    if (this.outbox.isReplay(event)) return;
    // The lane: one aggregate's messages go one after another, in position order. The event uuid is the message id.
    this.outbox.add(event, [effectEntryOf(this.outbox, this.name, event, event.eventUuid, event.aggregateUuid)]);
  }

  /** The reaction part: maps the entry's event and publishes it, the event uuid as the message id. */
  async #publish(entry: OutboxEntry): Promise<void> {
    try {
      const mapping = this.#mappings.get(entry.eventPath);
      if (mapping === undefined) throw new MnemeError("INVALID_STATE", `${this.name} has no mapping for ${entry.eventPath}`);
      const event = this.#readAheadEvents.get(entry.eventUuid) ?? (await eventOfEntry(this.eventRepository, entry, this.name));
      this.#readAheadEvents.delete(entry.eventUuid);
      const message = mapping(event);
      if (message === undefined) return;
      checkMessage(message, this.name, entry.eventPath);
      await this.#transport.publish({
        id: event.eventUuid,
        subject: message.subject,
        ...(message.exchange === undefined ? {} : { exchange: message.exchange }),
        data: encodeBody(message.body, `${this.name} (${entry.eventPath})`),
        headers: messageHeaders(event, message.headers, entry.correlationId),
      });
      this.#stats.handled++;
    } catch (err) {
      // Its text may carry the event's data: listed to the event's tenant only.
      this.#stats.failed(err, entry.tenantUuid);
      throw err;
    }
  }

  /**
   * Reads the events of a page's entries with one read of their position
   * range (the types this publisher maps), rather than one read per entry.
   * Left out when the range is mostly other events: each entry then reads its own.
   */
  async #readAhead(entries: readonly OutboxEntry[]): Promise<void> {
    this.#readAheadEvents = new Map();
    if (entries.length < 2) return;
    const wanted = new Set(entries.map((e) => e.eventUuid));
    let from = Infinity;
    let to = 0;
    for (const e of entries) {
      from = Math.min(from, e.position);
      to = Math.max(to, e.position);
    }
    if (to - from + 1 > entries.length * READ_AHEAD_SPREAD) return;
    const found = new Map<string, Event>();
    const range = { afterPosition: from - 1, untilPosition: to, eventPaths: [...this.#mappings.keys()], batchSize: 500 };
    for await (const batch of this.eventRepository.readAll(range))
      for (const e of batch) if (wanted.has(e.eventUuid)) found.set(e.eventUuid, e);
    this.#readAheadEvents = found;
  }

  #describe(): IntegrationInfo {
    const now = Date.now();
    if (now - this.#countedAt >= COUNT_EVERY_MS) {
      this.#countedAt = now;
      this.outbox.counts().then(
        (c) => {
          this.#stats.lag = c.pending;
          this.#stats.deadLetters = c.dead;
        },
        () => undefined,
      );
    }
    return this.#stats.info(this.#transport.connected);
  }
}

/** INVALID_REQUEST (a dead letter at once: no retry mends a mapping) unless `m` is a message with a subject. */
function checkMessage(m: OutboundMessage, handler: string, path: string): void {
  if (typeof m !== "object" || m === null || typeof m.subject !== "string" || m.subject === "")
    throw new MnemeError("INVALID_REQUEST", `${handler}: the mapping of ${path} must return { subject, body } with a non-empty subject`);
  if (m.exchange !== undefined && typeof m.exchange !== "string")
    throw new MnemeError("INVALID_REQUEST", `${handler}: the exchange of ${path} must be a string`);
  if (m.headers !== undefined) {
    for (const [k, v] of Object.entries(m.headers))
      if (typeof v !== "string") throw new MnemeError("INVALID_REQUEST", `${handler}: header ${k} of ${path} must be a string`);
  }
}
