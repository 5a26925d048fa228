import { MnemeError } from "../model/errors.js";
import type { Event, NewEvent } from "../model/types.js";
import { jsonSafeProblem, stringProblem } from "./json-safe.js";

/**
 * The checked `expectedVersions` of an append (aggregateUuid -> version, empty
 * when absent), so the database backends reject the same options with INVALID_EVENTS before writing.
 */
export function expectedVersionsMap(expected: Record<string, number> | undefined): Map<string, number> {
  const m = new Map<string, number>();
  if (expected === undefined) return m;
  if (typeof expected !== "object" || expected === null || Array.isArray(expected))
    throw new MnemeError("INVALID_EVENTS", "append: expectedVersions must be an object");
  for (const [agg, v] of Object.entries(expected)) {
    if (agg === "") throw new MnemeError("INVALID_EVENTS", "append: expectedVersions has an empty aggregateUuid");
    checkExpectedAggregate(agg);
    if (!Number.isInteger(v) || v < 0)
      throw new MnemeError("INVALID_EVENTS", `append: expectedVersions[${agg}] must be an integer >= 0, got ${String(v)}`);
    m.set(agg, v);
  }
  return m;
}

/**
 * Refuses a field of event `i` (payload, reqCtx) that is not JSON-safe (see
 * json-safe.ts) with INVALID_EVENTS and a JSON pointer into the append's
 * events array, so every backend refuses the same values before writing.
 */
export function checkEventField(v: unknown, i: number, field: string): void {
  const problem = jsonSafeProblem(v);
  if (problem !== undefined) {
    const pointer = `/${i}/${field}${problem.pointer}`;
    throw new MnemeError(
      "INVALID_EVENTS",
      `events[${i}].${field} is not JSON-safe at ${problem.pointer === "" ? "its root" : problem.pointer}: ${problem.message}`,
      {
        details: [{ pointer, message: problem.message }],
      },
    );
  }
}

/** The ids and names of an event that backends store as text. */
const EVENT_TEXTS = ["aggregateUuid", "tenantUuid", "domain", "name", "eventUuid", "commandUuid"] as const;

/**
 * The longest id or name of an event (UTF-16 code units): indexed by every
 * backend, and Postgres refuses an index entry over 2704 bytes, which 512
 * units (at most 1536 bytes of UTF-8) stay well below.
 */
export const EVENT_ID_MAX_LENGTH = 512;

/** Why an event's id or name cannot be stored alike on every backend, or undefined. */
function eventTextProblem(s: string): string | undefined {
  if (s.length > EVENT_ID_MAX_LENGTH) return `is longer than ${EVENT_ID_MAX_LENGTH} characters (${s.length})`;
  return stringProblem(s);
}

/**
 * Refuses an id or name of event `i` (aggregateUuid, tenantUuid, domain,
 * name, eventUuid, commandUuid) that breaks the payloads' string rule (no
 * U+0000, no lone surrogate) or is longer than {@link EVENT_ID_MAX_LENGTH},
 * with INVALID_EVENTS and a pointer into the append's events array. Postgres would store a lone surrogate as U+FFFD, so
 * aggregates "\ud800", "\udc00" and "\ufffd" would be one, and SQLite reads
 * it back as U+FFFD: every backend refuses them alike. Fields that are not
 * strings are left to the backend's type checks.
 */
export function checkEventTexts(e: NewEvent, i: number): void {
  for (const field of EVENT_TEXTS) {
    const v = e[field];
    if (typeof v !== "string") continue;
    const problem = eventTextProblem(v);
    if (problem !== undefined)
      throw new MnemeError("INVALID_EVENTS", `events[${i}].${field} ${problem}`, {
        details: [{ pointer: `/${i}/${field}`, message: problem }],
      });
  }
}

/** Refuses an `expectedVersions` key that no append accepts as an aggregate id (see {@link checkEventTexts}): INVALID_EVENTS. */
export function checkExpectedAggregate(agg: string): void {
  const problem = eventTextProblem(agg);
  if (problem !== undefined) throw new MnemeError("INVALID_EVENTS", `append: expectedVersions has an aggregateUuid that ${problem}`);
}

/**
 * Refuses an aggregate id a read is given (loadAggregate, loadAggregates)
 * that no append accepts (see {@link checkEventTexts}), with INVALID_REQUEST:
 * on Postgres it would find the events of another aggregate (the lone
 * surrogate read as U+FFFD).
 */
export function checkAggregateIdToRead(id: unknown, where: string): string {
  if (typeof id !== "string") throw new MnemeError("INVALID_REQUEST", `${where}: aggregateUuid must be a string`);
  const problem = eventTextProblem(id);
  if (problem !== undefined)
    throw new MnemeError("INVALID_REQUEST", `${where}: aggregateUuid ${problem}; no event is stored under such an id`);
  return id;
}

/** The JSON of field `field` of event `i` of an append (payload, reqCtx); INVALID_EVENTS when it is not JSON-safe. */
export function eventFieldJson(v: unknown, i: number, field: string): string {
  checkEventField(v, i, field);
  let json: string | undefined;
  try {
    json = JSON.stringify(v);
  } catch (e) {
    throw new MnemeError("INVALID_EVENTS", `events[${i}].${field} is not JSON-serialisable`, { cause: e });
  }
  if (json === undefined) throw new MnemeError("INVALID_EVENTS", `events[${i}].${field} is not JSON-serialisable`);
  return json;
}

/** The NOT_FOUND of the tenant rule: worded as for an absent aggregate, so it reveals nothing of another tenant. */
export function aggregateNotInTenant(aggregateUuid: string): MnemeError {
  return new MnemeError("NOT_FOUND", `aggregate ${aggregateUuid} was not found`);
}

/** The checked `globalAggregates` of an append (undefined when none). */
export function globalAggregatesSet(globals: readonly string[] | undefined): ReadonlySet<string> | undefined {
  if (globals === undefined) return undefined;
  if (!Array.isArray(globals) || globals.some((g) => typeof g !== "string")) {
    throw new MnemeError("INVALID_EVENTS", "append: globalAggregates must be an array of aggregate uuids");
  }
  return globals.length === 0 ? undefined : new Set(globals);
}

/**
 * The tenant rule of an append (see EventRepository): each event's tenant
 * must be its aggregate's, which is the tenant of the aggregate's first
 * stored event (`storedTenant`, undefined for a new aggregate) or else of its
 * first event in this call. Throws NOT_FOUND on the first mismatch. Backends
 * that can run a lookup inside their write transaction call this there.
 */
export function checkAppendTenants(
  events: readonly { aggregateUuid: string; tenantUuid?: string }[],
  globals: ReadonlySet<string> | undefined,
  storedTenant: (aggregateUuid: string) => string | undefined,
): void {
  let first: string | undefined;
  let firstTenant: string | undefined;
  let tenants: Map<string, string> | undefined;
  for (const e of events) {
    const agg = e.aggregateUuid;
    if (globals?.has(agg) === true) continue;
    const tenant = e.tenantUuid ?? "";
    let owner: string | undefined;
    // Most calls touch one aggregate: no Map for them.
    if (agg === first) owner = firstTenant;
    else if (first === undefined) {
      first = agg;
      owner = firstTenant = storedTenant(agg) ?? tenant;
    } else {
      owner = (tenants ??= new Map()).get(agg);
      if (owner === undefined) tenants.set(agg, (owner = storedTenant(agg) ?? tenant));
    }
    if (owner !== tenant) throw aggregateNotInTenant(agg);
  }
}

/** An event's `eventVersion`: absent (1) or an integer >= 1; INVALID_EVENTS otherwise. */
export function checkEventVersion(v: unknown, i: number): void {
  if (v !== undefined && (typeof v !== "number" || !Number.isSafeInteger(v) || v < 1)) {
    throw new MnemeError("INVALID_EVENTS", `events[${i}].eventVersion must be an integer >= 1, got ${JSON.stringify(v) ?? typeof v}`);
  }
}

/**
 * Fills the two ids every read event carries: `causationId`, the command that
 * produced it (its commandUuid), and `correlationId`, the chain it belongs to
 * (`reqCtx.correlationId` as the dispatch stored it, else its command).
 */
export function withCausation(e: Event): Event {
  if (e.commandUuid !== undefined) e.causationId = e.commandUuid;
  const correlation = e.reqCtx.correlationId ?? e.commandUuid;
  if (correlation !== undefined) e.correlationId = correlation;
  return e;
}
