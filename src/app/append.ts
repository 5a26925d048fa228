/**
 * The append of a command's events: each completed (uuid, time, commandUuid,
 * reqCtx copy, tenant, the version of its type), appended with the expected
 * versions of the aggregates the handler loaded or the request targets, the
 * aggregates exempt from the tenant rule and, where the repository joins the
 * command store, the command's record. Every event a command handler returns
 * passes here, so this is where an event type's own `schema` validates its
 * payload (INVALID_EVENTS with pointers, nothing appended).
 */
import { newUuid, nowNs } from "../model/clock.js";
import { errorMessage, MnemeError, type MnemeErrorDetail } from "../model/errors.js";
import type { EventType } from "../model/tokens.js";
import type { CommandEnvelope, Event, NewEvent, RequestContext } from "../model/types.js";
import type { DispatchTrace } from "../observability/telemetry.js";
import { pointerTokens, valueAt } from "../privacy/personal-fields.js";
import type { AppendOptions, EventRepository } from "../store/event-repository.js";
import { checkEventTags } from "../store/event-tags.js";
import type { CommandAggregates } from "./command-aggregates.js";
import type { CommandEvents } from "./command-events.js";
import { commandRecord, type RecordedCommand } from "./idempotency.js";
import { type EventTenancy, globalAggregates, tenantOf } from "./tenancy.js";

/** What the append needs of the facade. */
export interface AppendHost {
  readonly eventRepository: EventRepository;
  readonly eventTypes: ReadonlyMap<string, EventType>;
  readonly tenancy: EventTenancy;
  /** True when the event repository writes the command record in the append's transaction. */
  readonly recordsWithAppend: boolean;
  readonly schemas: EventSchemas;
}

type Problems = readonly MnemeErrorDetail[] | undefined;

/** What the append needs of the schema registry: an event payload's failures against its type's own schema. */
export interface EventSchemas {
  eventProblems(type: EventType, payload: unknown): Problems | Promise<Problems>;
}

/** The completed events and the aggregates they go to. */
interface Completed {
  readonly events: NewEvent[];
  readonly aggregates: Iterable<string>;
  /** True when the events go to more than one aggregate. */
  readonly several: boolean;
  /** Aggregates some event of which is evolved by a tenant-scoped aggregate (or by none). */
  readonly scopedByEvent: ReadonlySet<string> | undefined;
  /** The schema checks that answer asynchronously (a Standard Schema validator may). */
  readonly checking: Promise<void>[] | undefined;
}

/** Completes the command's events and appends them (see the file's head). */
export function appendCommandEvents(
  host: AppendHost,
  events: readonly NewEvent[],
  command: RecordedCommand,
  loader: CommandAggregates | undefined,
  trace: DispatchTrace | undefined,
  queries?: CommandEvents,
): Promise<Event[]> {
  const done = completeEvents(host, events, command.envelope, command.storedCtx);
  if (done.checking !== undefined) return Promise.all(done.checking).then(() => append(host, done, command, loader, trace, queries));
  return append(host, done, command, loader, trace, queries);
}

function append(
  host: AppendHost,
  done: Completed,
  command: RecordedCommand,
  loader: CommandAggregates | undefined,
  trace: DispatchTrace | undefined,
  queries: CommandEvents | undefined,
): Promise<Event[]> {
  const opts: AppendOptions = {};
  // What the handler read by queries is what it decided on: checked in the append's ordered section.
  const conditions = queries?.conditions();
  if (conditions !== undefined) opts.conditions = conditions;
  const globals = globalAggregates(done.aggregates, loader, done.scopedByEvent);
  if (globals !== undefined) opts.globalAggregates = globals;
  const expected = expectedVersions(command.storedCtx, done, loader);
  if (expected !== undefined) opts.expectedVersions = expected;
  if (host.recordsWithAppend) {
    opts.commandRecord = commandRecord(
      command,
      "succeeded",
      done.events.map((e) => e.eventUuid!),
      undefined,
    );
  }
  if (trace !== undefined) return trace.append(done.events.length, () => host.eventRepository.append(done.events, opts));
  return host.eventRepository.append(done.events, opts);
}

function completeEvents(host: AppendHost, events: readonly NewEvent[], envelope: CommandEnvelope, reqCtx: RequestContext): Completed {
  const tenantUuid = tenantOf(reqCtx);
  const createdAt = nowNs();
  const out: NewEvent[] = new Array(events.length);
  // Most commands touch one aggregate: a Set only when there are more.
  let first: string | undefined;
  let more: Set<string> | undefined;
  let scopedByEvent: Set<string> | undefined;
  let checking: Promise<void>[] | undefined;
  for (let i = 0; i < events.length; i++) {
    const e = events[i]!;
    const eventType = checkedEventType(host, e, envelope, i);
    if (eventType.schema !== undefined) checking = checkSchema(host, eventType, e.payload, i, checking);
    const agg = e.aggregateUuid;
    if (first === undefined) first = agg;
    else if (agg !== first) (more ??= new Set([first])).add(agg);
    if (!host.tenancy.isGlobal(eventType.path)) (scopedByEvent ??= new Set()).add(agg);
    const ne: NewEvent = {
      domain: e.domain,
      name: e.name,
      aggregateUuid: agg,
      payload: e.payload,
      eventUuid: newUuid(),
      createdAt,
      commandUuid: envelope.commandUuid,
      tenantUuid: e.tenantUuid ?? tenantUuid,
      reqCtx,
    };
    if (e.version !== undefined) ne.version = e.version;
    if (eventType.tags !== undefined) ne.tags = eventTags(eventType, e.payload, i);
    // Stored with the version it is written in: reads of older versions are upcast to it.
    if (eventType.version !== 1) ne.eventVersion = eventType.version;
    out[i] = ne;
  }
  return { events: out, aggregates: more ?? [first!], several: more !== undefined, scopedByEvent, checking };
}

/** Validates event `i`'s payload against its type's schema: throws INVALID_EVENTS, or adds an asynchronous check to `checking`. */
function checkSchema(
  host: AppendHost,
  type: EventType,
  payload: unknown,
  i: number,
  checking: Promise<void>[] | undefined,
): Promise<void>[] | undefined {
  const problems = host.schemas.eventProblems(type, payload);
  if (problems instanceof Promise) {
    (checking ??= []).push(
      problems.then((d) => {
        if (d !== undefined) throw invalidPayload(type, i, d);
      }),
    );
    return checking;
  }
  if (problems !== undefined) throw invalidPayload(type, i, problems);
  return checking;
}

/**
 * The tags of event `i` from its type's `tags` function, checked as every store checks them, and none
 * carrying the value of one of the payload's personal fields: the tag index is not encrypted and no
 * `forget` reaches it, so personal data must never get there (INVALID_EVENTS with a pointer per tag).
 */
export function eventTags(type: EventType, payload: unknown, i: number): readonly string[] {
  let given: unknown;
  try {
    given = type.tags!(payload);
  } catch (e) {
    throw new MnemeError("INVALID_EVENTS", `event ${type.path} at index ${i}: its tags function failed: ${errorMessage(e)}`, { cause: e });
  }
  const tags = checkEventTags(given, i);
  const personal = type.personalData?.fields;
  if (personal === undefined || tags.length === 0) return tags;
  const details: MnemeErrorDetail[] = [];
  for (const field of personal) {
    const v = valueAt(payload, pointerTokens(field));
    if (typeof v !== "string" && typeof v !== "number") continue;
    const value = String(v);
    if (value === "") continue;
    tags.forEach((tag, k) => {
      if (tag.slice(tag.indexOf(":") + 1) === value) {
        details.push({ pointer: `/${i}/tags/${k}`, message: `carries the value of personal field ${field}`, field });
      }
    });
  }
  if (details.length > 0) {
    throw new MnemeError(
      "INVALID_EVENTS",
      `event ${type.path} at index ${i}: a tag carries personal data (${details.map((d) => String(d.field)).join(", ")}); tags are stored in clear and never forgotten: tag by an id instead`,
      { details },
    );
  }
  return tags;
}

const MESSAGE_POINTERS = 10;

/** INVALID_EVENTS for a payload its type's schema refuses: pointers into the append's events (`/0/payload/n`), as for a payload that is not JSON-safe. */
function invalidPayload(type: EventType, i: number, problems: readonly MnemeErrorDetail[]): MnemeError {
  const details = problems.map((d) => ({ ...d, pointer: `/${i}/payload${d.pointer ?? ""}` }));
  const shown = problems
    .slice(0, MESSAGE_POINTERS)
    .map((d) => `${d.pointer === undefined || d.pointer === "" ? "(payload)" : d.pointer} ${d.message}`);
  const more = problems.length > MESSAGE_POINTERS ? `; and ${problems.length - MESSAGE_POINTERS} more` : "";
  return new MnemeError("INVALID_EVENTS", `event ${type.domain}.${type.name} at index ${i} fails its schema: ${shown.join("; ")}${more}`, {
    details,
  });
}

/** The registered type of what a handler returned at index `i`: INVALID_EVENTS when it is no event of a registered type. */
function checkedEventType(host: AppendHost, e: unknown, envelope: CommandEnvelope, i: number): EventType {
  if (!isNewEvent(e)) {
    throw new MnemeError(
      "INVALID_EVENTS",
      `command ${envelope.domain}.${envelope.name} returned something that is not an event at index ${i}: use EventType.create(aggregateUuid, payload)`,
    );
  }
  const path = `${e.domain}.${e.name}`;
  const eventType = host.eventTypes.get(path);
  if (eventType === undefined) {
    throw new MnemeError(
      "INVALID_EVENTS",
      `command ${envelope.domain}.${envelope.name} returned event ${path}, which no registered domain defines`,
    );
  }
  if (e.aggregateUuid === "") throw new MnemeError("INVALID_EVENTS", `event ${path} has an empty aggregateUuid`);
  return eventType;
}

/**
 * The expected version per aggregate: the version the handler loaded (it
 * decided on it), else the request's `targetAggregateVersion` for the
 * aggregate it targets; undefined when there is neither a loader nor a target.
 */
function expectedVersions(
  reqCtx: RequestContext,
  done: Completed,
  loader: CommandAggregates | undefined,
): Record<string, number> | undefined {
  const target = reqCtx.targetAggregateVersion;
  if (target !== undefined) checkTarget(reqCtx, done.aggregates, done.several, loader);
  if (loader === undefined && target === undefined) return undefined;
  // Without a prototype: an aggregate uuid such as "__proto__" must stay a plain key.
  const expected = Object.create(null) as Record<string, number>;
  for (const agg of done.aggregates) {
    const targeted =
      target !== undefined && (reqCtx.targetAggregateUuid === agg || (reqCtx.targetAggregateUuid === undefined && !done.several));
    const loaded = loader?.loadedVersion(agg);
    if (loaded !== undefined) {
      // The loaded version is what the handler decided on; a stale version the client sent must not be ignored silently.
      if (targeted && loaded !== target) {
        throw new MnemeError("CONFLICT", `aggregate ${agg} is at version ${loaded}, the request expected ${target}`);
      }
      expected[agg] = loaded;
    } else if (targeted) {
      expected[agg] = target;
    }
  }
  // What the handler read is what it decided on: the aggregates it loaded and appends nothing to are checked too.
  loader?.addReadChecks(expected);
  return expected;
}

/**
 * A `targetAggregateVersion` must name what it guards: with
 * `targetAggregateUuid`, an aggregate the command loaded or appends to;
 * without it, the command's only aggregate. Anything else is ambiguous and
 * refused (INVALID_REQUEST) rather than ignored.
 */
function checkTarget(reqCtx: RequestContext, aggregates: Iterable<string>, several: boolean, loader: CommandAggregates | undefined): void {
  const uuid = reqCtx.targetAggregateUuid;
  if (uuid === undefined) {
    if (several) {
      throw new MnemeError(
        "INVALID_REQUEST",
        "targetAggregateVersion without targetAggregateUuid is ambiguous: the command appends to several aggregates",
      );
    }
    return;
  }
  if (loader?.loadedVersion(uuid) !== undefined) return;
  for (const agg of aggregates) if (agg === uuid) return;
  throw new MnemeError(
    "INVALID_REQUEST",
    `targetAggregateVersion guards aggregate ${uuid}, which the command neither loaded nor appends to`,
  );
}

function isNewEvent(e: unknown): e is NewEvent {
  if (typeof e !== "object" || e === null) return false;
  const r = e as Record<string, unknown>;
  return typeof r.domain === "string" && typeof r.name === "string" && typeof r.aggregateUuid === "string" && "payload" in r;
}

/** What a command handler returned, as events and a result: INVALID_EVENTS for anything else. */
export function normaliseHandlerResult(
  out: unknown,
  type: { domain: string; name: string },
): { events: readonly NewEvent[]; result: unknown } {
  if (out === undefined || out === null) return { events: [], result: undefined };
  if (Array.isArray(out)) return { events: out as NewEvent[], result: undefined };
  if (typeof out === "object" && !isNewEvent(out)) {
    const o = out as { events?: unknown; result?: unknown };
    if (o.events !== undefined && !Array.isArray(o.events)) {
      throw new MnemeError("INVALID_EVENTS", `command ${type.domain}.${type.name}: events must be an array`);
    }
    if ("events" in o || "result" in o) return { events: (o.events as NewEvent[] | undefined) ?? [], result: o.result };
  }
  throw new MnemeError(
    "INVALID_EVENTS",
    `command ${type.domain}.${type.name} returned ${describe(out)}; a handler returns an array of events, nothing, or { events, result }`,
  );
}

function describe(v: unknown): string {
  if (Array.isArray(v)) return "an array";
  return v === null ? "null" : `a ${typeof v}`;
}
