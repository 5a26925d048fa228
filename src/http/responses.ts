import { MnemeError } from "../model/errors.js";
import type { Reply } from "./exchange.js";

/** A JSON reply that no cache keeps (every answer depends on the caller's permissions). */
export function jsonResponse(status: number, body: unknown, headers?: Readonly<Record<string, string | string[]>>): Reply {
  const text = JSON.stringify(body === undefined ? null : body);
  // Most replies add no header of their own: a literal, not a spread of an empty object.
  const all =
    headers === undefined
      ? { "content-type": JSON_TYPE, "cache-control": "no-store" }
      : { ...headers, "content-type": JSON_TYPE, "cache-control": "no-store" };
  return { status, headers: all, body: text };
}

const JSON_TYPE = "application/json; charset=utf-8";

/** 204 without a body. */
export function noContent(headers: Readonly<Record<string, string | string[]>> = {}): Reply {
  return { status: 204, headers: { ...headers, "cache-control": "no-store" } };
}

/** The page of a list endpoint. */
export interface PageParams {
  page: number;
  pageSize: number;
}

/** Every list endpoint answers this envelope. */
export interface ListBody<T> {
  items: T[];
  total: number;
  page: number;
  pageSize: number;
}

/** Cuts one page out of a complete list. */
export function paginate<T>(all: readonly T[], { page, pageSize }: PageParams): ListBody<T> {
  const start = (page - 1) * pageSize;
  return { items: all.slice(start, start + pageSize), total: all.length, page, pageSize };
}

/**
 * `page` (from 1) and `pageSize` (1..max) from a query string or a JSON body;
 * INVALID_REQUEST when present and not such an integer.
 */
export function readPage(
  raw: { page?: unknown; pageSize?: unknown },
  defaults: { defaultPageSize: number; maxPageSize: number },
): PageParams {
  const page = intParam("page", raw.page, 1, Number.MAX_SAFE_INTEGER) ?? 1;
  const pageSize = intParam("pageSize", raw.pageSize, 1, defaults.maxPageSize) ?? defaults.defaultPageSize;
  return { page, pageSize };
}

/** An integer from a query parameter (string) or JSON (number); undefined when absent. */
export function intParam(name: string, v: unknown, min: number, max: number): number | undefined {
  if (v === undefined || v === null || v === "") return undefined;
  const n = typeof v === "string" && /^-?\d+$/.test(v.trim()) ? Number(v.trim()) : typeof v === "number" ? v : Number.NaN;
  if (!Number.isSafeInteger(n) || n < min || n > max) {
    throw new MnemeError(
      "INVALID_REQUEST",
      `${name} must be an integer from ${min} to ${max} (got ${JSON.stringify(typeof v === "string" ? v.slice(0, 40) : v)})`,
    );
  }
  return n;
}

/** A boolean query parameter: true/false/1/0, absent = undefined. */
export function boolParam(name: string, v: string | null): boolean | undefined {
  if (v === null) return undefined;
  switch (v.trim().toLowerCase()) {
    case "true":
    case "1":
    case "":
      return true;
    case "false":
    case "0":
      return false;
    default:
      throw new MnemeError("INVALID_REQUEST", `${name} must be true or false (got ${JSON.stringify(v.slice(0, 40))})`);
  }
}
