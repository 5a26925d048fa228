/**
 * Deterministic ids of reactions: the commandUuid of the n-th command a
 * process manager dispatches or schedules for an event, and the dedupe key of
 * a reactor's effect for an event. Made again from the same inputs after a
 * crash or on another instance, so a re-sent command is the same command
 * (idempotent dispatch) and a re-run effect carries the same key.
 */
import { v5 as uuidv5 } from "uuid";
import type { Event, RequestContext } from "../model/types.js";

/** The namespace of reaction ids (uuid v5, RFC 9562). Never change it: ids derived before would no longer match. */
const REACTION_ID_NAMESPACE = "3f0b8f7e-6d0c-4e57-8a47-2b9c1d7e5a10";

/**
 * The commandUuid of the `index`-th command (0-based, in the order the step
 * asked for them) that handler `handlerName` dispatches or schedules for the
 * event `eventUuid`. The parts are JSON-encoded so ("a:b", "c") and ("a", "b:c") never meet.
 */
export function reactionCommandUuid(handlerName: string, eventUuid: string, index: number): string {
  return uuidv5(JSON.stringify(["command", handlerName, eventUuid, index]), REACTION_ID_NAMESPACE);
}

/** The dedupe key of reactor `reactorName`'s effect for the event `eventUuid`: the same on every attempt. */
export function reactionDedupeKey(reactorName: string, eventUuid: string): string {
  return uuidv5(JSON.stringify(["effect", reactorName, eventUuid]), REACTION_ID_NAMESPACE);
}

/** A request context with the chain's ids (`correlationId`, `causationId`), as a reaction's command carries it. */
export type ChainRequestContext = RequestContext;

/**
 * The correlation id of an event: the one the event carries, else the one its
 * command's request context carried, else the id of the command that produced
 * it (a chain starts at its first command), else the event's own id (an
 * event appended without a command).
 */
export function correlationOf(event: Event): string {
  if (typeof event.correlationId === "string" && event.correlationId !== "") return event.correlationId;
  const fromCtx = event.reqCtx?.correlationId;
  if (typeof fromCtx === "string" && fromCtx !== "") return fromCtx;
  return event.commandUuid ?? event.eventUuid;
}

/** The namespace of the commandUuids of broker messages (uuid v5). Never change it. */
const MESSAGE_COMMAND_NAMESPACE = "8c5e2d4a-1f3b-5c6d-9e7f-0a1b2c3d4e5f";

/**
 * The commandUuid of the command a broker message becomes (mneme/nats,
 * mneme/amqp): a uuid v5 of the message id, so a redelivered message is the
 * same command and runs once (idempotent dispatch). `namespace` (a uuid)
 * separates consumers that turn one message into different commands.
 */
export function messageCommandUuid(messageId: string, namespace: string = MESSAGE_COMMAND_NAMESPACE): string {
  return uuidv5(messageId, namespace);
}
