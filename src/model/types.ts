/**
 * Who sent a command or query, and what it targets. Built-in permission levels
 * read the sender fields; `targetAggregateVersion` is an expected version
 * (optimistic concurrency).
 */
export interface RequestContext {
  senderAccountUuid?: string;
  senderSessionUuid?: string;
  senderIdentityUuid?: string;
  senderTenantUuid?: string;
  /**
   * The service principal sending (a process manager's or reactor's; see
   * `servicePrincipal` in mneme/reactions): a non-human sender whose grant is
   * its list of commands, within `senderTenantUuid`. Never set by the HTTP adapter.
   */
  senderService?: string;
  targetTenantUuid?: string;
  targetAggregateUuid?: string;
  targetAggregateVersion?: number;
  traceId?: string;
  /**
   * W3C traceparent. From a caller (the HTTP adapter copies the request's header): the parent of the
   * command's `mneme.dispatch` span. Stored with events and records: that span's own, when a tracer records it.
   */
  traceparent?: string;
  /** W3C tracestate that goes with `traceparent`. */
  tracestate?: string;
  /** The chain this request belongs to: every command and event of one chain carries it (dispatch fills it with the command's uuid when absent). */
  correlationId?: string;
  /** What caused this request: the uuid of the event (or command) it reacts to. */
  causationId?: string;
  attributes?: Record<string, unknown>;
}

/** A stored event. `position` is global and assigned by the event repository. */
export interface Event<P = unknown> {
  eventUuid: string;
  position: number;
  tenantUuid: string;
  domain: string;
  name: string;
  aggregateUuid: string;
  version: number;
  commandUuid?: string;
  /** Nanoseconds since the Unix epoch (an integer-valued number). */
  createdAt: number;
  reqCtx: RequestContext;
  payload: P;
  /** The version of the event type the payload was written in; absent means 1. Reads hand out the current version (see upcasters). */
  eventVersion?: number;
  /** The uuid of the command that produced the event (its commandUuid). */
  causationId?: string;
  /** The chain the event belongs to: `reqCtx.correlationId` of its command, else its command's uuid. */
  correlationId?: string;
}

/** An event to append. The repository fills what is missing (uuid, time, version, position). */
export interface NewEvent<P = unknown> {
  domain: string;
  name: string;
  aggregateUuid: string;
  payload: P;
  version?: number;
  tenantUuid?: string;
  reqCtx?: RequestContext;
  commandUuid?: string;
  eventUuid?: string;
  createdAt?: number;
  /** The version of the event type the payload is in (an integer >= 1; absent means 1). dispatch sets the type's current version. */
  eventVersion?: number;
  /**
   * The event's tags (`"key:value"`), set by dispatch from its type's `tags`
   * function; stored in an index of the event's tenant, so commands can read
   * and guard the events of a query (see docs/dcb.md). Absent: the event's
   * type declares no tags, and no query finds it.
   */
  tags?: readonly string[];
}

/** A JSON Schema document (2020-12). */
export type JsonSchema = { [key: string]: unknown };

/** The command as a permission function and a handler see it. */
export interface CommandEnvelope<P = unknown> {
  commandUuid: string;
  domain: string;
  name: string;
  payload: P;
  reqCtx: RequestContext;
}

/** The query as a permission function and a handler see it. */
export interface QueryEnvelope<P = unknown> {
  queryUuid: string;
  domain: string;
  name: string;
  payload: P;
  reqCtx: RequestContext;
}

/** Event path: `${domain}.${name}`. */
export function eventPath(e: { domain: string; name: string }): string {
  return `${e.domain}.${e.name}`;
}
