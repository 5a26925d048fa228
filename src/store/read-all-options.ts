import { MnemeError } from "../model/errors.js";
import type { ReadAllOptions } from "./event-repository.js";

/** The page size of `readAll` when none is asked for. */
export const DEFAULT_READ_ALL_BATCH_SIZE = 1000;

/** The position window and page size of a `readAll` call, after its options were checked. */
export interface ReadAllWindow {
  afterPosition: number;
  untilPosition: number | undefined;
  batchSize: number;
}

/**
 * Checks the options of `readAll` for a database backend (positions are
 * integers >= 0, at most `maxBatchSize` events a page, filters of the right
 * types) and resolves the defaults, so the SQL backends reject the same calls with INVALID_REQUEST.
 */
export function readAllWindow(opts: ReadAllOptions, maxBatchSize: number): ReadAllWindow {
  const after = opts.afterPosition ?? 0;
  const until = opts.untilPosition;
  const batchSize = opts.batchSize ?? DEFAULT_READ_ALL_BATCH_SIZE;
  if (!Number.isInteger(after) || after < 0)
    throw new MnemeError("INVALID_REQUEST", `readAll: afterPosition must be an integer >= 0, got ${String(after)}`);
  if (until !== undefined && (!Number.isInteger(until) || until < 0)) {
    throw new MnemeError("INVALID_REQUEST", `readAll: untilPosition must be an integer >= 0, got ${String(until)}`);
  }
  if (!Number.isInteger(batchSize) || batchSize < 1 || batchSize > maxBatchSize) {
    throw new MnemeError("INVALID_REQUEST", `readAll: batchSize must be an integer in 1..${maxBatchSize}, got ${String(batchSize)}`);
  }
  if (opts.tenantUuid !== undefined && typeof opts.tenantUuid !== "string")
    throw new MnemeError("INVALID_REQUEST", "readAll: tenantUuid must be a string");
  if (opts.eventPaths !== undefined && (!Array.isArray(opts.eventPaths) || opts.eventPaths.some((p) => typeof p !== "string"))) {
    throw new MnemeError("INVALID_REQUEST", "readAll: eventPaths must be an array of strings");
  }
  return { afterPosition: after, untilPosition: until, batchSize };
}
