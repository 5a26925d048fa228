import { newUuid, nowNs } from "../model/clock.js";
import { MnemeError } from "../model/errors.js";
import type { Event, NewEvent, RequestContext } from "../model/types.js";
import {
  checkEventTexts,
  checkEventVersion,
  eventFieldJson,
  expectedVersionsMap,
  globalAggregatesSet,
} from "../store/append-validation.js";
import { validateCommandRecord } from "../store/command-record-validation.js";
import type { CommandRecord } from "../store/command-store.js";
import type { AppendOptions } from "../store/event-repository.js";
import { checkEventTags, planConditions, typeTag } from "../store/event-tags.js";

const INT64_LIMIT = 2 ** 63;
const INT32_MAX = 2 ** 31 - 1;
const EMPTY_CTX: RequestContext = Object.freeze({});

/** One append, checked and laid out as the append function's parameters take it. */
export interface Prepared {
  readonly events: Event[];
  /** The ten event columns of the append function (event uuids ... payloads). */
  readonly columns: unknown[];
  readonly expectedAggregates: string[];
  readonly expectedVersions: number[];
  readonly globalAggregates: string[];
  /** Per event, the version of its type it is written in (1 when not given). */
  readonly eventVersions: number[];
  /** The aggregate of every event, when all belong to one (mneme_append_aggregate's case); else undefined. */
  readonly aggregate: string | undefined;
  /** True when some event gives its version (the database checks it). */
  readonly givesVersions: boolean;
  /**
   * The tag index rows and append conditions of a call that has either
   * (it goes by `mneme_append_tagged`); undefined for every other call, whose
   * statement stays the one it was.
   */
  readonly tagged: TaggedInput | undefined;
}

/** What `mneme_append_tagged` takes beside the flush's parameters, for one call. */
export interface TaggedInput {
  /** Per index row: the event's index in the call (from 0). */
  readonly tagEvents: number[];
  /** Per index row: the tag, or the event's type row. */
  readonly tags: string[];
  /** Per condition item: its jsonb (see TAGGED_PARAMS in postgres-append-flush-ddl.ts). */
  readonly conditions: string[];
}

/** The command record's columns, in the order of RECORD_COLUMNS. */
export type RecordColumns = [string, string, string, string, string, number, string];

/** The event columns of one append, filled event by event (see {@link Prepared.columns}). */
class EventColumns {
  readonly eventUuids: string[];
  readonly tenants: string[];
  readonly domains: string[];
  readonly names: string[];
  readonly aggs: string[];
  readonly versions: (number | null)[];
  readonly commands: (string | null)[];
  readonly createdAts: number[];
  readonly reqCtxs: string[];
  readonly payloads: string[];
  readonly eventVersions: number[];

  constructor(n: number) {
    this.eventUuids = new Array<string>(n);
    this.tenants = new Array<string>(n);
    this.domains = new Array<string>(n);
    this.names = new Array<string>(n);
    this.aggs = new Array<string>(n);
    this.versions = new Array<number | null>(n);
    this.commands = new Array<string | null>(n);
    this.createdAts = new Array<number>(n);
    this.reqCtxs = new Array<string>(n);
    this.payloads = new Array<string>(n);
    this.eventVersions = new Array<number>(n);
  }

  set(i: number, e: NewEvent, ev: Event, reqCtxJson: string, eventVersion: number): void {
    this.eventUuids[i] = ev.eventUuid;
    this.tenants[i] = ev.tenantUuid;
    this.domains[i] = ev.domain;
    this.names[i] = ev.name;
    this.aggs[i] = ev.aggregateUuid;
    this.versions[i] = e.version ?? null;
    this.commands[i] = e.commandUuid ?? null;
    this.createdAts[i] = ev.createdAt;
    this.reqCtxs[i] = reqCtxJson;
    this.payloads[i] = eventFieldJson(e.payload, i, "payload");
    this.eventVersions[i] = eventVersion;
  }

  list(): unknown[] {
    return [
      this.eventUuids,
      this.tenants,
      this.domains,
      this.names,
      this.aggs,
      this.versions,
      this.commands,
      this.createdAts,
      this.reqCtxs,
      this.payloads,
    ];
  }
}

/**
 * The request contexts of one append: events of one command share one
 * reqCtx object, so it is copied and serialised once per distinct object.
 */
class ReqCtxCache {
  private lastIn: RequestContext | undefined;
  private lastOut: RequestContext = EMPTY_CTX;
  private lastJson = "{}";

  of(reqCtx: RequestContext | undefined, i: number): [RequestContext, string] {
    if (reqCtx === undefined) return [EMPTY_CTX, "{}"];
    if (reqCtx !== this.lastIn) {
      this.lastIn = reqCtx;
      this.lastOut = Object.freeze({ ...reqCtx });
      this.lastJson = eventFieldJson(this.lastOut, i, "reqCtx");
    }
    return [this.lastOut, this.lastJson];
  }
}

/** Validates an append and fills what is missing; the versions and positions come from the database. */
export function prepare(events: readonly NewEvent[], opts: AppendOptions | undefined): Prepared {
  if (!Array.isArray(events)) throw new MnemeError("INVALID_EVENTS", "append: events must be an array");
  const expected = expectedVersionsMap(opts?.expectedVersions);
  const globals = globalAggregatesSet(opts?.globalAggregates);
  for (const [agg, v] of expected) {
    if (v > INT32_MAX) throw new MnemeError("INVALID_EVENTS", `append: expectedVersions[${agg}] must be at most ${INT32_MAX}, got ${v}`);
  }
  const n = events.length;
  const out = new Array<Event>(n);
  const cols = new EventColumns(n);
  const ctxs = new ReqCtxCache();
  let aggregate: string | undefined = n > 0 ? (events[0] as NewEvent).aggregateUuid : undefined;
  let givesVersions = false;
  let tagged: TaggedInput | undefined;
  for (let i = 0; i < n; i++) {
    const e = events[i] as NewEvent;
    checkNewEvent(e, i);
    if (e.tags !== undefined) {
      tagged ??= { tagEvents: [], tags: [], conditions: [] };
      for (const row of [typeTag(e.domain, e.name), ...checkEventTags(e.tags, i)]) {
        tagged.tagEvents.push(i);
        tagged.tags.push(row);
      }
    }
    if (e.aggregateUuid !== aggregate) aggregate = undefined;
    if (e.version !== undefined) givesVersions = true;
    const [reqCtx, reqCtxJson] = ctxs.of(e.reqCtx, i);
    const eventVersion = e.eventVersion ?? 1;
    const ev = newStoredEvent(e, reqCtx, eventVersion);
    out[i] = ev;
    cols.set(i, e, ev, reqCtxJson, eventVersion);
  }
  const conditions = planConditions(opts?.conditions);
  if (conditions !== undefined) {
    tagged ??= { tagEvents: [], tags: [], conditions: [] };
    for (let q = 0; q < conditions.length; q++) {
      const { tenantUuid, items, after } = conditions[q]!;
      for (let k = 0; k < items.length; k++) {
        const { drive, rest, types } = items[k]!;
        tagged.conditions.push(JSON.stringify({ t: tenantUuid, a: after, d: drive, r: rest, y: types ?? null, q, k }));
      }
    }
  }
  return {
    tagged,
    events: out,
    columns: cols.list(),
    expectedAggregates: [...expected.keys()],
    expectedVersions: [...expected.values()],
    globalAggregates: globals === undefined ? [] : [...globals],
    eventVersions: cols.eventVersions,
    aggregate,
    givesVersions,
  };
}

/** The event as it will be stored, its position and version still 0 (the database assigns them). */
function newStoredEvent(e: NewEvent, reqCtx: RequestContext, eventVersion: number): Event {
  const ev: Event = {
    eventUuid: e.eventUuid ?? newUuid(),
    position: 0,
    tenantUuid: e.tenantUuid ?? "",
    domain: e.domain,
    name: e.name,
    aggregateUuid: e.aggregateUuid,
    version: 0,
    createdAt: e.createdAt ?? nowNs(),
    reqCtx,
    payload: e.payload,
  };
  if (e.commandUuid !== undefined) ev.commandUuid = ev.causationId = e.commandUuid;
  const correlation = reqCtx.correlationId ?? e.commandUuid;
  if (correlation !== undefined) ev.correlationId = correlation;
  if (eventVersion !== 1) ev.eventVersion = eventVersion;
  return ev;
}

/** The checks of event `i` of an append that do not need the database (INVALID_EVENTS). */
function checkNewEvent(e: NewEvent, i: number): void {
  if (typeof e !== "object" || e === null) throw new MnemeError("INVALID_EVENTS", `events[${i}] is not an object`);
  for (const field of ["aggregateUuid", "domain", "name"] as const) {
    if (typeof e[field] !== "string" || e[field] === "")
      throw new MnemeError("INVALID_EVENTS", `events[${i}].${field} must be a non-empty string`);
  }
  if (e.version !== undefined && (!Number.isInteger(e.version) || e.version < 1 || e.version > INT32_MAX)) {
    throw new MnemeError("INVALID_EVENTS", `events[${i}].version must be an integer in 1..${INT32_MAX}, got ${String(e.version)}`);
  }
  if (e.createdAt !== undefined && (!Number.isInteger(e.createdAt) || Math.abs(e.createdAt) >= INT64_LIMIT)) {
    throw new MnemeError("INVALID_EVENTS", `events[${i}].createdAt must be an integer number of ns, got ${String(e.createdAt)}`);
  }
  for (const field of ["eventUuid", "tenantUuid", "commandUuid"] as const) {
    const v = e[field];
    if (v !== undefined && typeof v !== "string") throw new MnemeError("INVALID_EVENTS", `events[${i}].${field} must be a string`);
  }
  if (e.eventUuid === "") throw new MnemeError("INVALID_EVENTS", `events[${i}].eventUuid must be a non-empty string`);
  checkEventVersion(e.eventVersion, i);
  if (e.eventVersion !== undefined && e.eventVersion > INT32_MAX) {
    throw new MnemeError("INVALID_EVENTS", `events[${i}].eventVersion must be at most ${INT32_MAX}`);
  }
  // Checked here, not by the database: the calls of a flush share one statement, which such a value would refuse whole.
  checkEventTexts(e, i);
  if (e.reqCtx !== undefined && (typeof e.reqCtx !== "object" || e.reqCtx === null || Array.isArray(e.reqCtx))) {
    throw new MnemeError("INVALID_EVENTS", `events[${i}].reqCtx must be an object`);
  }
}

/** The command record's columns, checked as the command store checks them. */
export function recordColumns(rec: CommandRecord): RecordColumns {
  const json = validateCommandRecord(rec);
  if (!Number.isInteger(rec.createdAt) || Math.abs(rec.createdAt) >= INT64_LIMIT) {
    throw new MnemeError("INVALID_REQUEST", "invalid command record: createdAt must be an integer number of ns");
  }
  for (const v of [rec.commandUuid, rec.domain, rec.name, rec.tenantUuid, rec.status, json]) {
    if (v.includes("\u0000")) throw new MnemeError("INVALID_REQUEST", "invalid command record: Postgres cannot store U+0000");
  }
  return [rec.commandUuid, rec.domain, rec.name, rec.tenantUuid, rec.status, rec.createdAt, json];
}
