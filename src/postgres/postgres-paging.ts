import { MnemeError } from "../core/errors.js";
import { DEFAULT_PAGE_LIMIT, MAX_PAGE_LIMIT, type PageRequest } from "../store/store-info.js";

/** The page size of a listing: default 100, capped at 1000; anything but a positive integer is INVALID_REQUEST. */
export function pageLimit(opts: PageRequest | undefined): number {
  const limit = opts?.limit ?? DEFAULT_PAGE_LIMIT;
  if (typeof limit !== "number" || !Number.isInteger(limit) || limit < 1) {
    throw new MnemeError("INVALID_REQUEST", `limit must be a positive integer, got ${String(limit)}`);
  }
  return Math.min(limit, MAX_PAGE_LIMIT);
}

/** An opaque keyset cursor: the sort key of a page's last item, as base64url JSON. */
export function encodeCursor(key: readonly (string | number)[]): string {
  return Buffer.from(JSON.stringify(key), "utf8").toString("base64url");
}

/** Decodes a cursor of {@link encodeCursor} whose parts have the given types; a forged or foreign one is INVALID_REQUEST. */
export function decodeCursor(cursor: string | undefined, types: readonly ("string" | "number")[]): (string | number)[] | undefined {
  if (cursor === undefined) return undefined;
  let key: unknown;
  try {
    if (typeof cursor !== "string" || !/^[A-Za-z0-9_-]+$/.test(cursor)) throw new Error("not base64url");
    key = JSON.parse(Buffer.from(cursor, "base64url").toString("utf8"));
  } catch {
    throw new MnemeError("INVALID_REQUEST", "invalid cursor");
  }
  if (!Array.isArray(key) || key.length !== types.length || key.some((k, i) => typeof k !== types[i] || (typeof k === "number" && !Number.isInteger(k)))) {
    throw new MnemeError("INVALID_REQUEST", "invalid cursor");
  }
  return key as (string | number)[];
}
