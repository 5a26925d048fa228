import { MnemeError } from "../model/errors.js";
import type { EventType } from "../model/tokens.js";
import { serviceRequestContext, type ServicePrincipal } from "../model/service-principal.js";
import type { Event, RequestContext } from "../model/types.js";
import type { EventRepository } from "../store/event-repository.js";
import { BaseReadmodel, type ReadmodelFacade } from "../readmodel/base-readmodel.js";
import type { OutboxEntry, RetryPolicy } from "./outbox-entry.js";
import { commandPayloadsOf, Outbox, type OutboxHandlerOptions, reactionOptions } from "./outbox.js";
import { correlationOf, reactionDedupeKey } from "./reaction-ids.js";
import { registerReactionService } from "./reaction-service.js";

/** What an effect receives besides the event. */
export interface EffectInfo {
  /** The same for every attempt at this (event, reactor): give it to the external system as its idempotency key. */
  readonly dedupeKey: string;
  /** 1 for the first attempt. */
  readonly attempt: number;
  /**
   * With the reactor's `service`: the request context to dispatch commands
   * with from the effect (`facade.dispatch(type, payload, { reqCtx })`), the
   * service in the event's tenant. Undefined without one.
   */
  readonly reqCtx?: RequestContext;
}

/** An external effect of an event (a call to a payment provider, a mail): throw to have it retried. */
export type Effect<P> = (event: Event<P>, info: EffectInfo) => Promise<void> | void;

/** Configuration of a reactor. */
export interface ReactorOptions extends OutboxHandlerOptions {
  /** The service principal its effects dispatch commands as (see EffectInfo.reqCtx). */
  readonly service?: ServicePrincipal;
}

/**
 * Runs external effects of events, at least once (an outbox): the event's
 * effect is recorded in the same transaction as the reactor's checkpoint and
 * run afterwards with a dedupe key that is the same on every attempt,
 * retried with exponential backoff, and dead after `retry.maxAttempts`
 * failures (the dead-letter list, with retry and discard in the Runtime).
 * A replay (a crash, a restore from zero) runs nothing again. Register it like a readmodel.
 * @example
 * const mailer = new Reactor(facade, { name: "Mailer", domain: "Orders" })
 *   .on(OrderShipped, async (e, { dedupeKey }) => mail.send({ to: e.payload.email, idempotencyKey: dedupeKey }));
 * facade.registerReadmodel(mailer);
 */
export class Reactor extends BaseReadmodel {
  /** The outbox part: the effects this reactor runs, with their retries and dead letters (see Outbox). */
  readonly outbox: Outbox;
  readonly #effects = new Map<string, Effect<unknown>>();
  readonly #service: ServicePrincipal | undefined;

  constructor(facade: ReadmodelFacade, options: ReactorOptions) {
    super(facade, ...reactionOptions(options));
    this.name = options.name;
    this.domain = options.domain;
    this.outbox = new Outbox(this, options, (entry) => this.#deliver(entry), commandPayloadsOf(facade));
    this.addPart(this.outbox);
    this.#service = registerReactionService(facade, `reactor ${this.name}`, options.service);
  }

  /** The retry policy of the outbox. */
  get retry(): RetryPolicy {
    return this.outbox.retry;
  }

  /** Adds the effect of events of `type` (one per event type). */
  on<P>(type: EventType<P>, effect: Effect<P>): this {
    if (typeof effect !== "function") throw new MnemeError("INVALID_EVENT_HANDLER", `${this.name}: an effect must be a function`);
    if ((type as { kind?: unknown } | undefined)?.kind !== "event")
      throw new MnemeError("INVALID_EVENT_HANDLER", `${this.name}: on() takes an event type`);
    if (this.#effects.has(type.path)) throw new MnemeError("INVALID_EVENT_HANDLER", `${this.name} has an effect for ${type.path} already`);
    this.#effects.set(type.path, effect as Effect<unknown>);
    this.addDomainEventHandler(type, (_ctx, event) => this.#record(event));
    return this;
  }

  async #record(event: Event): Promise<void> {
    if (this.outbox.isReplay(event)) return;
    await this.outbox.record(event, [effectEntryOf(this.outbox, this.name, event, reactionDedupeKey(this.name, event.eventUuid))]);
  }

  /** The reaction part: runs the entry's effect on its event, read from the store. */
  async #deliver(entry: OutboxEntry): Promise<void> {
    const effect = this.#effects.get(entry.eventPath);
    if (effect === undefined)
      throw new MnemeError("INVALID_STATE", `${this.name} has no effect for ${entry.eventPath} (entry ${entry.id})`);
    const event = await eventOfEntry(this.eventRepository, entry, this.name);
    const info: EffectInfo = { dedupeKey: entry.id, attempt: entry.attempts + 1 };
    if (this.#service === undefined) return effect(event, info);
    const reqCtx = {
      ...serviceRequestContext(this.#service, event.tenantUuid),
      correlationId: correlationOf(event),
      causationId: event.eventUuid,
    };
    await effect(event, { ...info, reqCtx });
  }
}

/**
 * The outbox entry of an effect of `event` (a reactor's, a publisher's), due
 * at the event's time, with the key `id` (and the lane `processId`, when given).
 */
export function effectEntryOf(outbox: Outbox, handlerName: string, event: Event, id: string, processId?: string): OutboxEntry {
  const now = outbox.now();
  const due = Math.min(Math.floor(event.createdAt / 1e6), now);
  return {
    id,
    kind: "effect",
    eventHandlerName: handlerName,
    status: "pending",
    scheduled: false,
    dueAt: due,
    dueOrder: outbox.orderOf(due, event.position, 0),
    index: 0,
    attempts: 0,
    createdAt: now,
    eventUuid: event.eventUuid,
    eventPath: `${event.domain}.${event.name}`,
    position: event.position,
    tenantUuid: event.tenantUuid,
    correlationId: correlationOf(event),
    ...(processId === undefined ? {} : { processId }),
  };
}

/**
 * The event of an outbox entry, read from the event store when it is
 * delivered (the outbox keeps only its position): upcast to its current
 * version, and with personal data as the store shows it now (erased once
 * forgotten). NOT_FOUND when it is not there.
 */
export async function eventOfEntry(events: EventRepository, entry: OutboxEntry, handlerName: string): Promise<Event> {
  for await (const batch of events.readAll({ afterPosition: entry.position - 1, untilPosition: entry.position, batchSize: 1 })) {
    const e = batch[0];
    if (e !== undefined && e.eventUuid === entry.eventUuid) return e;
    break;
  }
  throw new MnemeError("NOT_FOUND", `${handlerName}: event ${entry.eventUuid} at position ${entry.position} is not in the event store`);
}
