import { MnemeError } from "../core/errors.js";
import { DEFAULT_PAGE_LIMIT, MAX_PAGE_LIMIT } from "../store/store-info.js";

/**
 * The page size of a store listing: default 100, larger requests are capped at
 * 1000, anything but a positive integer is INVALID_REQUEST.
 */
export function resolvePageLimit(limit: number | undefined): number {
  if (limit === undefined) return DEFAULT_PAGE_LIMIT;
  if (typeof limit !== "number" || !Number.isInteger(limit) || limit < 1) {
    throw new MnemeError("INVALID_REQUEST", `limit must be a positive integer, got ${String(limit)}`);
  }
  return Math.min(limit, MAX_PAGE_LIMIT);
}

const encoder = new TextEncoder();
const decoder = new TextDecoder("utf-8", { fatal: true });

/**
 * Encodes a keyset position as an opaque cursor (base64url of JSON), so callers
 * cannot build cursors by hand and a malformed one is detected.
 */
export function encodeCursor(position: readonly (string | number)[]): string {
  const bytes = encoder.encode(JSON.stringify(position));
  let bin = "";
  for (const b of bytes) bin += String.fromCharCode(b);
  return btoa(bin).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

/**
 * Decodes a cursor made by {@link encodeCursor} whose parts have the given
 * types ("s": string, "n": finite number); anything else is INVALID_REQUEST.
 */
export function decodeCursor(cursor: string, shape: string): (string | number)[] {
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
  if (!Array.isArray(parsed) || parsed.length !== shape.length) throw invalid();
  for (let i = 0; i < shape.length; i++) {
    const v: unknown = parsed[i];
    const ok = shape[i] === "s" ? typeof v === "string" : typeof v === "number" && Number.isFinite(v);
    if (!ok) throw invalid();
  }
  return parsed as (string | number)[];
}

/** The STORE_CLOSED error a memory store rejects with once it is closed. */
export function storeClosed(store: string): MnemeError {
  return new MnemeError("STORE_CLOSED", `${store} is closed`);
}
