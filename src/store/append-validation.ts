import { MnemeError } from "../core/errors.js";

/**
 * The checked `expectedVersions` of an append (aggregateUuid -> version, empty
 * when absent), so the database backends reject the same options with INVALID_EVENTS before writing.
 */
export function expectedVersionsMap(expected: Record<string, number> | undefined): Map<string, number> {
  const m = new Map<string, number>();
  if (expected === undefined) return m;
  if (typeof expected !== "object" || expected === null || Array.isArray(expected)) throw new MnemeError("INVALID_EVENTS", "append: expectedVersions must be an object");
  for (const [agg, v] of Object.entries(expected)) {
    if (agg === "") throw new MnemeError("INVALID_EVENTS", "append: expectedVersions has an empty aggregateUuid");
    if (!Number.isInteger(v) || v < 0) throw new MnemeError("INVALID_EVENTS", `append: expectedVersions[${agg}] must be an integer >= 0, got ${String(v)}`);
    m.set(agg, v);
  }
  return m;
}

/** The JSON of field `field` of event `i` of an append (payload, reqCtx); INVALID_EVENTS when it has no JSON form. */
export function eventFieldJson(v: unknown, i: number, field: string): string {
  let json: string | undefined;
  try {
    json = JSON.stringify(v);
  } catch (e) {
    throw new MnemeError("INVALID_EVENTS", `events[${i}].${field} is not JSON-serialisable`, { cause: e });
  }
  if (json === undefined) throw new MnemeError("INVALID_EVENTS", `events[${i}].${field} is not JSON-serialisable`);
  return json;
}
