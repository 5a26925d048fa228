/**
 * Tags of events and the queries over them (dynamic consistency boundaries):
 * the rules every backend applies alike, so that a tag or a query accepted by
 * one is accepted, stored and matched the same way by the others.
 *
 * An event of a type that declares tags is stored with one index row per tag
 * and one for its type (`typeTag`), all under the event's tenant and
 * position. A query item is answered from these rows alone: its driving rows
 * (its first tag, or else its types) are a range of the (tenant, tag,
 * position) index, and every other tag and the type are point lookups of the
 * same index. Events of types without tags have no rows and cost nothing.
 */
import { MnemeError, type MnemeErrorDetail } from "../model/errors.js";
import { EVENT_ID_MAX_LENGTH } from "./append-validation.js";
import { stringProblem } from "./json-safe.js";

/** One item of a query as the store takes it: event paths (`domain.name`, stored names included) and tags. */
export interface TagQueryItem {
  /** Events of one of these types (any type when absent; a type is `domain.name`). */
  readonly types?: readonly string[];
  /** Events carrying every one of these tags. */
  readonly tags?: readonly string[];
}

/**
 * An append condition: the append is refused (CONFLICT, nothing written) when
 * an event of `tenantUuid` matching an item was stored after `after`.
 */
export interface AppendCondition {
  readonly tenantUuid: string;
  readonly items: readonly TagQueryItem[];
  readonly after: number;
}

/** The index rows of one stored event to add (see EventRepository.indexTags): its type and tags. */
export interface TagIndexEntry {
  readonly position: number;
  /** The event's tenant, as stored: an entry of another tenant than the event's is refused. */
  readonly tenantUuid: string;
  /** `domain.name` of its type row (the current name of its type). */
  readonly type: string;
  readonly tags: readonly string[];
}

/** Checks entries for indexTags (INVALID_REQUEST; tags by the append's rule) and returns each entry's rows. */
export function tagIndexRows(entries: readonly TagIndexEntry[]): { tenantUuid: string; tag: string; position: number }[] {
  if (!Array.isArray(entries)) throw new MnemeError("INVALID_REQUEST", "indexTags: entries must be an array");
  const rows: { tenantUuid: string; tag: string; position: number }[] = [];
  entries.forEach((e, i) => {
    if (typeof e !== "object" || e === null || !Number.isSafeInteger(e.position) || e.position < 1 || typeof e.tenantUuid !== "string") {
      throw new MnemeError("INVALID_REQUEST", `indexTags: entries[${i}] needs a position (integer >= 1) and a tenantUuid`);
    }
    const dot = typeof e.type === "string" ? e.type.indexOf(".") : -1;
    if (dot <= 0 || stringProblem(e.type) !== undefined)
      throw new MnemeError("INVALID_REQUEST", `indexTags: entries[${i}].type must be domain.name`);
    let tags: string[];
    try {
      tags = checkEventTags(e.tags, i);
    } catch (err) {
      throw new MnemeError("INVALID_REQUEST", `indexTags: entries[${i}] (position ${e.position}): ${(err as Error).message}`, {
        cause: err,
      });
    }
    for (const tag of [`:${e.type}`, ...tags]) rows.push({ tenantUuid: e.tenantUuid, tag, position: e.position });
  });
  return rows;
}

/** The stored events matching a query, in position order, and the position the answer is complete up to. */
export interface TaggedRead<E> {
  readonly events: E[];
  readonly position: number;
}

/**
 * An item as the index answers it: `drive` rows (one tag, or the item's
 * types) give the candidates; each must have every tag of `rest` and, when
 * `types` is defined, one of them.
 */
export interface PlannedItem {
  readonly drive: readonly string[];
  readonly rest: readonly string[];
  readonly types: readonly string[] | undefined;
}

/** The index row of an event's type: no tag can take it (a tag's key is never empty). */
export function typeTag(domain: string, name: string): string {
  return `:${domain}.${name}`;
}

/** The index rows of an event: its type and its tags; none for an event without tags (its type declares none). */
export function tagRows(e: { readonly domain: string; readonly name: string; readonly tags?: readonly string[] }): readonly string[] {
  if (e.tags === undefined) return NO_ROWS;
  return [typeTag(e.domain, e.name), ...e.tags];
}

const NO_ROWS: readonly string[] = Object.freeze([]);

/** Why a tag cannot be stored, or undefined. */
export function tagProblem(tag: unknown): string | undefined {
  if (typeof tag !== "string") return `must be a string, got ${tag === null ? "null" : typeof tag}`;
  if (tag.length > EVENT_ID_MAX_LENGTH) return `is longer than ${EVENT_ID_MAX_LENGTH} characters (${tag.length})`;
  const problem = stringProblem(tag);
  if (problem !== undefined) return problem;
  const colon = tag.indexOf(":");
  if (colon <= 0 || colon === tag.length - 1) return `must be "key:value" with a non-empty key and value, got ${JSON.stringify(tag)}`;
  return undefined;
}

/**
 * The tags of event `i` of an append, checked (INVALID_EVENTS with a pointer
 * per bad tag) and de-duplicated, in their first order.
 */
export function checkEventTags(tags: unknown, i: number): string[] {
  if (!Array.isArray(tags)) {
    throw new MnemeError("INVALID_EVENTS", `events[${i}].tags must be an array of "key:value" strings`, {
      details: [{ pointer: `/${i}/tags`, message: "must be an array" }],
    });
  }
  const details: MnemeErrorDetail[] = [];
  const seen = new Set<string>();
  for (let k = 0; k < tags.length; k++) {
    const problem = tagProblem(tags[k]);
    if (problem !== undefined) details.push({ pointer: `/${i}/tags/${k}`, message: problem });
    else seen.add(tags[k] as string);
  }
  if (details.length > 0) {
    throw new MnemeError(
      "INVALID_EVENTS",
      `events[${i}] has tags that cannot be stored: ${details.map((d) => `${d.pointer} ${d.message}`).join("; ")}`,
      {
        details,
      },
    );
  }
  return [...seen];
}

/** Checks a query's items as the store takes them (INVALID_REQUEST) and plans each for the index. */
export function planItems(items: unknown, where: string): PlannedItem[] {
  if (!Array.isArray(items) || items.length === 0) {
    throw new MnemeError("INVALID_REQUEST", `${where}: a query has a non-empty array of items`);
  }
  return items.map((item: unknown, k) => planItem(item, `${where}: items[${k}]`));
}

function planItem(item: unknown, where: string): PlannedItem {
  if (typeof item !== "object" || item === null || Array.isArray(item)) {
    throw new MnemeError("INVALID_REQUEST", `${where} must be an object { types?, tags? }`);
  }
  const { types, tags } = item as TagQueryItem;
  const typeRows =
    types === undefined
      ? undefined
      : texts(types, `${where}.types`, (t) => {
          const dot = t.indexOf(".");
          return dot <= 0 || dot === t.length - 1 ? "must be an event path domain.name" : stringProblem(t);
        });
  const tagList = tags === undefined ? [] : [...new Set(texts(tags, `${where}.tags`, tagProblem))];
  if (typeRows !== undefined && typeRows.length === 0) throw new MnemeError("INVALID_REQUEST", `${where}.types must not be empty`);
  if (typeRows === undefined && tagList.length === 0) {
    throw new MnemeError("INVALID_REQUEST", `${where} names no type and no tag: it would match every event of the tenant`);
  }
  const typed = typeRows?.map((t) => `:${t}`);
  if (tagList.length === 0) return { drive: [...new Set(typed)], rest: [], types: undefined };
  return { drive: [tagList[0]!], rest: tagList.slice(1), types: typed };
}

function texts(v: unknown, where: string, problemOf: (s: string) => string | undefined): string[] {
  if (!Array.isArray(v)) throw new MnemeError("INVALID_REQUEST", `${where} must be an array`);
  return v.map((s: unknown, k) => {
    const problem = typeof s === "string" ? problemOf(s) : "must be a string";
    if (problem !== undefined) throw new MnemeError("INVALID_REQUEST", `${where}[${k}] ${problem}`);
    return s as string;
  });
}

/** A checked append condition: its tenant, its planned items and the position after which a match refuses the append. */
export interface PlannedCondition {
  readonly tenantUuid: string;
  readonly items: readonly PlannedItem[];
  readonly after: number;
}

/** Checks the conditions of an append (INVALID_REQUEST) and plans them; undefined when there are none. */
export function planConditions(conditions: readonly AppendCondition[] | undefined): PlannedCondition[] | undefined {
  if (conditions === undefined) return undefined;
  if (!Array.isArray(conditions)) throw new MnemeError("INVALID_REQUEST", "append: conditions must be an array");
  if (conditions.length === 0) return undefined;
  return conditions.map((c: AppendCondition, n) => {
    const where = `append: conditions[${n}]`;
    if (typeof c !== "object" || c === null) throw new MnemeError("INVALID_REQUEST", `${where} must be an object`);
    if (typeof c.tenantUuid !== "string" || stringProblem(c.tenantUuid) !== undefined) {
      throw new MnemeError("INVALID_REQUEST", `${where}.tenantUuid must be a string (the tenant the query reads)`);
    }
    if (!Number.isSafeInteger(c.after) || c.after < 0) {
      throw new MnemeError("INVALID_REQUEST", `${where}.after must be a position (an integer >= 0), got ${String(c.after)}`);
    }
    return { tenantUuid: c.tenantUuid, items: planItems(c.items, where), after: c.after };
  });
}

/**
 * CONFLICT for condition `condition` whose item `item` matched an event
 * stored at `position` (after the condition's `after`): the details name both.
 */
export function conditionFailed(condition: number, item: number, after: number, position: number | undefined): MnemeError {
  const at = position === undefined ? "" : ` (at position ${position})`;
  return new MnemeError(
    "CONFLICT",
    `an event matching item ${item} of query ${condition} the command read was appended after position ${after}${at}`,
    { details: [{ message: "query matched", query: condition, item, after, ...(position === undefined ? {} : { position }) }] },
  );
}

/** True when an event's index rows (`rows`, see tagRows) match a planned item. */
export function rowsMatch(rows: ReadonlySet<string>, item: PlannedItem): boolean {
  let driven = false;
  for (const d of item.drive) if (rows.has(d)) driven = true;
  if (!driven) return false;
  for (const t of item.rest) if (!rows.has(t)) return false;
  if (item.types === undefined) return true;
  for (const t of item.types) if (rows.has(t)) return true;
  return false;
}

/**
 * The SQL of one item over a tag table (tenant_uuid, tag, position; primary
 * key in that order): the positions of the tenant's matching events, after
 * `after` and up to `until` when given. `param` binds a value and returns its
 * placeholder. Every part is a range or point lookup of the primary key.
 */
export function itemMatchSql(
  table: string,
  tenantUuid: string,
  item: PlannedItem,
  bounds: { readonly after?: number; readonly until?: number },
  param: (v: unknown) => string,
): string {
  const tenant = param(tenantUuid);
  const inList = (values: readonly string[]): string =>
    values.length === 1 ? `= ${param(values[0])}` : `IN (${values.map(param).join(", ")})`;
  let sql = `SELECT t.position FROM ${table} t WHERE t.tenant_uuid = ${tenant} AND t.tag ${inList(item.drive)}`;
  if (bounds.after !== undefined) sql += ` AND t.position > ${param(bounds.after)}`;
  if (bounds.until !== undefined) sql += ` AND t.position <= ${param(bounds.until)}`;
  // Scalar subqueries with LIMIT, not EXISTS: the planner cannot turn them into a join that scans a tag's rows
  // for every candidate (it did, on young tables whose statistics said one row); each stays a probe of the key.
  for (const tag of item.rest) {
    sql += ` AND (SELECT 1 FROM ${table} u WHERE u.tenant_uuid = t.tenant_uuid AND u.tag = ${param(tag)} AND u.position = t.position LIMIT 1) IS NOT NULL`;
  }
  if (item.types !== undefined) {
    sql += ` AND (SELECT 1 FROM ${table} u WHERE u.tenant_uuid = t.tenant_uuid AND u.tag ${inList(item.types)} AND u.position = t.position LIMIT 1) IS NOT NULL`;
  }
  return sql;
}
