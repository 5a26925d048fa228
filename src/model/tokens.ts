import type { PermissionFunc } from "./permission.js";
import type { StandardSchemaV1 } from "./standard-schema.js";
import type { SystemEventKind } from "./system-event-kind.js";
import type { Event, JsonSchema, NewEvent, RequestContext } from "./types.js";

/** What command and query types share: identity, description, permission, schema, secret fields. */
export interface MessageType<P = unknown, R = unknown> {
  readonly domain: string;
  readonly name: string;
  readonly description: string;
  readonly permission: PermissionFunc;
  readonly schema?: JsonSchema | StandardSchemaV1;
  /** The result's JSON Schema, for documentation (the OpenAPI document, the generated client); never checked. */
  readonly resultSchema?: JsonSchema;
  /** Payload fields recorded as "[redacted]" wherever the message is recorded. */
  readonly secretFields: readonly string[];
  /** Phantom members: carry the payload and result types. */
  readonly __payload?: P;
  readonly __result?: R;
}

/** A command type: a runtime token typed by its payload. `name` is the exported TypeScript type's name. */
export interface CommandType<P = unknown, R = unknown> extends MessageType<P, R> {
  readonly kind: "command";
  /**
   * The payload fields that are personal data of a subject: stored encrypted
   * wherever mneme keeps the command (its record, outbox entries, scheduled
   * commands, dead letters; see docs/privacy.md); absent when it holds none.
   */
  readonly personalData?: CommandPersonalData<P>;
}

/** Personal data settings of a command type: every field as a JSON pointer (`"email"` becomes `"/email"`). */
export interface CommandPersonalData<P = any> {
  /** The data subject of a payload (an opaque id such as an account uuid, never personal data itself). */
  readonly subject: (payload: P, reqCtx: Readonly<RequestContext>) => string;
  /** JSON pointers, each naming one protected value; none inside another. */
  readonly fields: readonly string[];
}

/** `personalData` of `Domain.command`: like an event's, the subject computed from the payload (and the request context). */
export interface CommandPersonalDataOptions<P = any> {
  /**
   * The data subject of a payload (e.g. `(p) => p.memberUuid`): a non-empty
   * string, never personal data itself. The request context is the second
   * argument (`(_p, reqCtx) => reqCtx.senderAccountUuid` names the sender).
   */
  readonly subject: (payload: P, reqCtx: Readonly<RequestContext>) => string;
  /** Top-level field names (`"memberEmail"`) or JSON pointers (RFC 6901) to nested ones (`"/address/street"`). */
  readonly fields: readonly string[];
}

/** A query type, typed by its payload and its result. */
export interface QueryType<P = unknown, R = unknown> extends MessageType<P, R> {
  readonly kind: "query";
  /** Present when the query may be subscribed to as a live query (`D.query(name, { live: true })`; see docs/http.md). */
  readonly live?: LiveQuerySettings;
}

/**
 * How a live query is evaluated again. `readmodels`: the names of the
 * readmodels whose committed batches make it run again (absent: a batch of
 * any readmodel does; empty: none, the other signals only). `share`: who may share one evaluation: `"sender"`
 * (default) the subscribers with the same sender (account, identity, tenant)
 * and target tenant, `"tenant"` every subscriber of the target tenant (the
 * result depends on the tenant and the payload only, not on who asks).
 * `allTenants`: a batch of any tenant makes it run again, not only one of
 * the subscriber's tenant (for results that describe the instance or every
 * tenant). `systemEvents`: this instance's system events of these kinds make
 * it run again too (while the system-event stream runs). `everyMs`: it also
 * runs again after this long without another run (for state no batch or
 * system event announces). `minIntervalMs`: at least this long between two
 * runs of one group (a burst costs one run per interval). See docs/http.md.
 */
export interface LiveQuerySettings {
  readonly readmodels?: readonly string[];
  readonly share: "sender" | "tenant";
  readonly allTenants?: boolean;
  readonly systemEvents?: readonly SystemEventKind[];
  readonly everyMs?: number;
  readonly minIntervalMs?: number;
}

/** An event type. `create` makes a NewEvent for dispatch to append. */
export interface EventType<P = unknown> {
  readonly kind: "event";
  readonly domain: string;
  readonly name: string;
  /** `${domain}.${name}` */
  readonly path: string;
  readonly description: string;
  readonly schema?: JsonSchema | StandardSchemaV1;
  create(aggregateUuid: string, payload: P, opts?: { version?: number; tenantUuid?: string; reqCtx?: RequestContext }): NewEvent<P>;
  /** Narrows a stored event to this type. */
  is(event: Event): event is Event<P>;
  /** The event's current version (1 when it never changed): new events are stored with it. */
  readonly version: number;
  /** Per older version v (1 .. version - 1), the function that turns a payload of version v into one of v + 1. */
  readonly upcasters: Readonly<Record<number, Upcaster>>;
  /** Former names of the event in its domain: stored events of those names read as this event. */
  readonly renamedFrom: readonly string[];
  /** The payload fields stored encrypted per data subject (see docs/privacy.md); absent when the event holds none. */
  readonly personalData?: PersonalData;
  /**
   * The tags of a payload (`"key:value"` strings), computed when the event is
   * appended and stored in its tenant's tag index: commands read and guard
   * events by them (`ctx.events.read`, see docs/dcb.md). Absent: the type
   * declares no tags and no query finds its events. (A method, so an event
   * type stays assignable to one of a wider payload, as without tags.)
   */
  tags?(payload: P): readonly string[];
  /** How long events of this type are kept (ms, from `retainFor`); absent: for ever. */
  readonly retainForMs?: number;
  readonly __payload?: P;
}

/**
 * Which fields of an event's payload are personal data, and whose: they are
 * stored encrypted with a key of that subject, and read as "[erased]" once
 * `facade.forget(subject)` deleted the key.
 */
export interface PersonalDataOptions<P = any> {
  /**
   * The data subject of a payload (e.g. an account uuid): a non-empty string, never personal data itself.
   * The new event is the second argument (`(_p, e) => e.aggregateUuid` when the aggregate is the subject).
   */
  readonly subject: (payload: P, event: Readonly<NewEvent<P>>) => string;
  /**
   * The protected fields: top-level field names (`"email"`) or JSON pointers
   * (RFC 6901) to nested ones (`"/address/street"`, `"/contacts/0/phone"`).
   */
  readonly fields: readonly string[];
}

/** Personal data settings as an event type carries them: every field as a JSON pointer (`"email"` becomes `"/email"`). */
export interface PersonalData<P = any> {
  readonly subject: (payload: P, event: Readonly<NewEvent<P>>) => string;
  /** JSON pointers, each naming one protected value; none inside another. */
  readonly fields: readonly string[];
}

/** Turns a stored payload of one event version into the payload of the next version. Pure, JSON in, JSON out. */
export type Upcaster = (payload: any, event: Readonly<Event>) => unknown;

/** Options of `Domain.event`. */
export interface EventOptions<P = any> {
  readonly description?: string;
  readonly schema?: JsonSchema | StandardSchemaV1;
  /** The current version of the event's payload (an integer >= 1, default 1). Stored events keep the version they were written in. */
  readonly version?: number;
  /** For every older version v (1 .. version - 1): `v: (payload) => payload of v + 1`. A missing step is INVALID_DOMAIN. */
  readonly upcasters?: Readonly<Record<number, Upcaster>>;
  /** Names this event had before in this domain: stored events of those names read as this event (renamed without rewriting history). */
  readonly renamedFrom?: string | readonly string[];
  /** Payload fields that are personal data of a subject: stored encrypted, erasable with `facade.forget(subject)`. */
  readonly personalData?: PersonalDataOptions<P>;
  /**
   * The event's tags, from its payload: `"key:value"` strings (each at most
   * 512 characters, no value of a personal field) by which commands find and
   * guard events beyond aggregates (dynamic consistency boundaries, see
   * docs/dcb.md). Declare it, even as `() => []`, for every type a query names.
   * @example
   * const StudentSubscribed = Courses.event<{ studentId: string; courseId: string }>("StudentSubscribed", {
   *   tags: (p) => [`student:${p.studentId}`, `course:${p.courseId}`],
   * });
   */
  readonly tags?: (payload: P) => readonly string[];
  /**
   * How long events of this type are kept: milliseconds, an ISO 8601
   * duration (`"P30D"`) or a short form (`"30d"`, `"12h"`). Older ones are
   * removed by the retention job (`Runtime.ApplyRetention`, `mneme store
   * retention`), never while a live aggregate's state depends on them
   * without a snapshot; see docs/operations.md.
   * @example
   * const PageVisited = Shop.event<{ page: string }>("PageVisited", { retainFor: "P90D" });
   */
  readonly retainFor?: number | string;
}

/** The catch-all event kind: a handler registered for it receives every event. */
export const AllEvents: { readonly kind: "allEvents"; readonly path: "*" } = Object.freeze({ kind: "allEvents", path: "*" });
export type AllEventsType = typeof AllEvents;

/** Folds an aggregate's events into its state. */
export type Evolver<S, P = any> = (state: S, payload: P, event: Event<P>) => S;

/**
 * Whom an aggregate belongs to. `"tenant"` (the default): the tenant of its
 * first event; commands of other tenants cannot load it or append to it.
 * `"global"`: no tenant check (e.g. accounts, which exist across tenants).
 */
export type AggregateTenancy = "tenant" | "global";

/** An aggregate type: how its state is built from its events. */
export interface AggregateType<S = unknown> {
  readonly kind: "aggregate";
  readonly domain: string;
  readonly name: string;
  readonly tenancy: AggregateTenancy;
  initialState(): S;
  /** Evolvers keyed by event name (events of the same domain) or by event path. */
  readonly evolve: Readonly<Record<string, Evolver<S>>>;
  /** Applies one event: unknown events leave the state as it is. */
  apply(state: S, event: Event): S;
}

export type PayloadOf<T> = T extends { readonly __payload?: infer P } ? P : never;
export type ResultOf<T> = T extends { readonly __result?: infer R } ? R : never;
