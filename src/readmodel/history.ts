import type { Event } from "../model/types.js";

/** One entry of an aggregate's history (spec 2.8), built from a stored event at query time. */
export interface HistoryEventModel {
  eventUuid: string;
  /** The event's name (not its path). */
  domainEvtName: string;
  /** The payload, JSON-serialised. */
  domainEvtData: string;
  version: number;
  /** ns since the epoch. */
  createdAt: number;
  senderTenantUuid: string;
  senderIdentityUuid: string;
  /** The command that produced the event (absent for an event appended without one). */
  causationId?: string;
  /** The chain the event belongs to (absent for an event appended without a command or correlation id). */
  correlationId?: string;
}

/** Maps a stored event to its history model; sender fields come from the event's request context. */
export function toHistoryEvent(event: Event): HistoryEventModel {
  return {
    eventUuid: event.eventUuid,
    domainEvtName: event.name,
    domainEvtData: JSON.stringify(event.payload) ?? "null",
    version: event.version,
    createdAt: event.createdAt,
    senderTenantUuid: event.reqCtx.senderTenantUuid ?? "",
    senderIdentityUuid: event.reqCtx.senderIdentityUuid ?? "",
    ...(event.causationId === undefined ? {} : { causationId: event.causationId }),
    ...(event.correlationId === undefined ? {} : { correlationId: event.correlationId }),
  };
}
