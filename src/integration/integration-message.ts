/**
 * The broker-neutral shapes of integration messages: what an application maps
 * an event to (outbound), what a consumer hands the application (inbound),
 * and what a broker's transport (mneme/nats, mneme/amqp) publishes and delivers.
 */
import { MnemeError } from "../model/errors.js";
import type { CommandRef } from "../model/facade-handle.js";
import type { Event, RequestContext } from "../model/types.js";

/** An event as the application publishes it: its public shape and where it goes. */
export interface OutboundMessage {
  /** The NATS subject, or the AMQP routing key. */
  readonly subject: string;
  /** AMQP only: the exchange it goes to instead of the publisher's (NATS refuses a message that names one). */
  readonly exchange?: string;
  /** The message body: JSON-safe, sent as JSON. */
  readonly body: unknown;
  /** Headers of the application's own, besides mneme's (`mneme-event`, `mneme-aggregate`, `mneme-position`, `mneme-correlation-id`). */
  readonly headers?: Readonly<Record<string, string>>;
}

/** Maps an event to its integration message; `undefined` publishes nothing for it. */
export type MessageMapping<P> = (event: Event<P>) => OutboundMessage | undefined;

/** A message as a transport publishes it. `id` is the event uuid: the broker's dedupe key. */
export interface TransportMessage {
  readonly id: string;
  readonly subject: string;
  /** The exchange the mapping named (AMQP), if any. */
  readonly exchange?: string;
  readonly data: Uint8Array;
  readonly headers: Readonly<Record<string, string>>;
}

/** A broker message as a consumer hands it to the application's mapping. */
export interface InboundMessage {
  /** The message id (JetStream `Nats-Msg-Id`, AMQP `message-id`): the seed of the command's uuid. */
  readonly id: string;
  /** The subject (NATS) or routing key (AMQP) it was published to. */
  readonly subject: string;
  readonly headers: Readonly<Record<string, string>>;
  /** The body, parsed as JSON. */
  readonly body: unknown;
  /** How many times the broker has delivered it, this delivery included (1 when the broker does not say). */
  readonly deliveryCount: number;
}

/** The command a message becomes. Its commandUuid is a uuid v5 of the message id. */
export interface InboundCommand<P = unknown> {
  readonly command: CommandRef<P>;
  readonly payload: P;
  /** The request context it runs with (who sends it, for which tenant). Default: none (the facade's authorizer decides). */
  readonly reqCtx?: RequestContext;
}

/** Maps a message to its command; `undefined` takes the message as done without a command. Throw to fail the attempt. */
export type CommandMapping = (message: InboundMessage) => InboundCommand | undefined | Promise<InboundCommand | undefined>;

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** The body as JSON bytes. INVALID_REQUEST when it is not JSON-safe (a function, a cycle, a bigint). */
export function encodeBody(body: unknown, what: string): Uint8Array {
  let text: string | undefined;
  try {
    text = JSON.stringify(body);
  } catch (e) {
    throw new MnemeError("INVALID_REQUEST", `${what}: the message body is not JSON-safe`, { cause: e });
  }
  if (text === undefined) throw new MnemeError("INVALID_REQUEST", `${what}: the message body is not JSON-safe (${typeof body})`);
  return encoder.encode(text);
}

/** The body of a delivered message. VALIDATION_FAILED when it is not JSON: no retry can mend it. */
export function decodeBody(data: Uint8Array, id: string): unknown {
  const text = decoder.decode(data);
  try {
    return JSON.parse(text) as unknown;
  } catch (e) {
    throw new MnemeError("VALIDATION_FAILED", `message ${id}: the body is not JSON`, { cause: e });
  }
}

/** The text of a delivered body, as a dead letter keeps it. */
export function bodyText(data: Uint8Array): string {
  return decoder.decode(data);
}

/** The headers mneme adds to every published message, with the application's own. */
export function messageHeaders(
  event: Event,
  own: Readonly<Record<string, string>> | undefined,
  correlationId: string,
): Record<string, string> {
  return {
    ...own,
    "mneme-event": `${event.domain}.${event.name}`,
    "mneme-aggregate": event.aggregateUuid,
    "mneme-position": String(event.position),
    "mneme-correlation-id": correlationId,
  };
}
