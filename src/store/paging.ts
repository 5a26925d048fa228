import { MnemeError } from "../model/errors.js";
import { DEFAULT_PAGE_LIMIT, MAX_PAGE_LIMIT } from "./store-info.js";

/**
 * The page size of a store listing, for every backend alike: default 100,
 * larger requests are capped at 1000, anything but a positive integer is INVALID_REQUEST.
 */
export function pageLimit(limit: number | undefined): number {
  if (limit === undefined) return DEFAULT_PAGE_LIMIT;
  if (typeof limit !== "number" || !Number.isInteger(limit) || limit < 1) {
    throw new MnemeError("INVALID_REQUEST", `limit must be a positive integer, got ${String(limit)}`);
  }
  return Math.min(limit, MAX_PAGE_LIMIT);
}

/** What one part of a keyset cursor must be; "integer" where the backend binds it to a bigint. */
export type CursorPart = "string" | "number" | "integer";

const encoder = new TextEncoder();
const decoder = new TextDecoder("utf-8", { fatal: true });

/**
 * Encodes a keyset position (the sort key of a page's last item) as an opaque
 * cursor, base64url of JSON, so callers cannot build cursors by hand and a
 * malformed one is detected. Web-standard APIs only: the memory stores run anywhere.
 */
export function encodeCursor(position: readonly (string | number)[]): string {
  const bytes = encoder.encode(JSON.stringify(position));
  let bin = "";
  for (const b of bytes) bin += String.fromCharCode(b);
  return btoa(bin).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

/**
 * Decodes a cursor made by {@link encodeCursor} whose parts are of the given
 * kinds (numbers finite, integers integral); anything else (a forged or foreign cursor) is INVALID_REQUEST.
 * An absent cursor stays undefined.
 */
export function decodeCursor(cursor: string, parts: readonly CursorPart[]): (string | number)[];
export function decodeCursor(cursor: string | undefined, parts: readonly CursorPart[]): (string | number)[] | undefined;
export function decodeCursor(cursor: string | undefined, parts: readonly CursorPart[]): (string | number)[] | undefined {
  if (cursor === undefined) return undefined;
  const invalid = (): MnemeError => new MnemeError("INVALID_REQUEST", `malformed cursor ${JSON.stringify(cursor).slice(0, 80)}`);
  if (typeof cursor !== "string" || !/^[A-Za-z0-9_-]+$/.test(cursor)) throw invalid();
  let parsed: unknown;
  try {
    const bin = atob(cursor.replace(/-/g, "+").replace(/_/g, "/"));
    const bytes = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
    parsed = JSON.parse(decoder.decode(bytes));
  } catch {
    throw invalid();
  }
  if (!Array.isArray(parsed) || parsed.length !== parts.length) throw invalid();
  for (let i = 0; i < parts.length; i++) {
    const v: unknown = parsed[i];
    const part = parts[i];
    const ok =
      part === "string" ? typeof v === "string" : part === "integer" ? Number.isInteger(v) : typeof v === "number" && Number.isFinite(v);
    if (!ok) throw invalid();
  }
  return parsed as (string | number)[];
}

/**
 * The equality filters a list call sets: `[column, value]` for each
 * `[field, column]` whose option is defined, in that order; INVALID_REQUEST
 * when one is not a string.
 */
export function stringFilters<O extends object>(
  opts: O,
  fields: readonly (readonly [field: keyof O & string, column: string])[],
): [column: string, value: string][] {
  const out: [string, string][] = [];
  for (const [field, column] of fields) {
    const value: unknown = opts[field];
    if (value === undefined) continue;
    if (typeof value !== "string") throw new MnemeError("INVALID_REQUEST", `list: ${field} must be a string`);
    out.push([column, value]);
  }
  return out;
}

/** The page a key-ordered listing asks for: its size, the key it starts after (the cursor) and the key prefix (default ""). */
export function keyPage(opts: { readonly limit?: number; readonly cursor?: string; readonly prefix?: string }): {
  limit: number;
  after: string | undefined;
  prefix: string;
} {
  const limit = pageLimit(opts.limit);
  const after = opts.cursor === undefined ? undefined : (decodeCursor(opts.cursor, ["string"])[0] as string);
  return { limit, after, prefix: opts.prefix ?? "" };
}
