import { MnemeError } from "../model/errors.js";
import type { LogLevel, NewLogEntry } from "./log-store.js";

const LEVELS: ReadonlySet<unknown> = new Set<LogLevel>(["debug", "info", "warn", "error"]);

/** True for the four log levels; list filters check `level` with it. */
export function isLogLevel(level: unknown): level is LogLevel {
  return LEVELS.has(level);
}

/**
 * Checks a log entry before any backend appends it and returns the JSON of its
 * `data` (undefined when it has none), so every backend rejects the same bad entries with INVALID_REQUEST.
 */
export function validateNewLogEntry(input: NewLogEntry): string | undefined {
  if (input === null || typeof input !== "object") throw new MnemeError("INVALID_REQUEST", "a log entry must be an object");
  if (!isLogLevel(input.level))
    throw new MnemeError("INVALID_REQUEST", `log level must be debug, info, warn or error, got ${String(input.level)}`);
  if (typeof input.message !== "string") throw new MnemeError("INVALID_REQUEST", "log message must be a string");
  if (input.source !== undefined && typeof input.source !== "string")
    throw new MnemeError("INVALID_REQUEST", "log source must be a string");
  if (input.tenantUuid !== undefined && typeof input.tenantUuid !== "string")
    throw new MnemeError("INVALID_REQUEST", "log tenantUuid must be a string");
  if (input.data === undefined) return undefined;
  if (input.data === null || typeof input.data !== "object" || Array.isArray(input.data))
    throw new MnemeError("INVALID_REQUEST", "log data must be an object");
  try {
    return JSON.stringify(input.data);
  } catch (e) {
    throw new MnemeError("INVALID_REQUEST", "log data is not JSON-serialisable", { cause: e });
  }
}
