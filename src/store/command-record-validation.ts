import { MnemeError } from "../model/errors.js";
import type { CommandRecord } from "./command-store.js";

const STATUSES: ReadonlySet<unknown> = new Set(["succeeded", "failed", "denied"]);

/**
 * Checks a CommandRecord before any backend stores it and returns its JSON, so
 * every backend rejects the same bad records with INVALID_REQUEST and writes nothing.
 */
export function validateCommandRecord(rec: CommandRecord): string {
  if (rec === null || typeof rec !== "object") throw bad("not an object");
  for (const f of ["commandUuid", "domain", "name"] as const) {
    if (typeof rec[f] !== "string" || rec[f] === "") throw bad(`${f} must be a non-empty string`);
  }
  if (typeof rec.tenantUuid !== "string") throw bad("tenantUuid must be a string");
  if (!STATUSES.has(rec.status)) throw bad(`status must be succeeded, failed or denied, got ${String(rec.status)}`);
  if (typeof rec.createdAt !== "number" || !Number.isFinite(rec.createdAt)) throw bad("createdAt must be a finite number (ns)");
  if (typeof rec.durationMicros !== "number" || !Number.isFinite(rec.durationMicros)) throw bad("durationMicros must be a finite number");
  if (!Array.isArray(rec.eventUuids) || rec.eventUuids.some((u) => typeof u !== "string"))
    throw bad("eventUuids must be an array of strings");
  if (rec.reqCtx === null || typeof rec.reqCtx !== "object") throw bad("reqCtx must be an object");
  try {
    return JSON.stringify(rec);
  } catch (e) {
    throw bad("not JSON-serialisable", e);
  }
}

// Module level, not a closure per call: every recorded command passes here.
function bad(what: string, cause?: unknown): MnemeError {
  return new MnemeError("INVALID_REQUEST", `invalid command record: ${what}`, { cause });
}

/** Checks the arguments of a claim call the same way on every backend (INVALID_REQUEST); returns the owner. */
export function checkClaimArgs(commandUuid: unknown, owner: unknown, leaseMs: unknown): string {
  if (typeof commandUuid !== "string" || commandUuid === "") {
    throw new MnemeError("INVALID_REQUEST", "claim: commandUuid must be a non-empty string");
  }
  if (typeof owner !== "string" || owner === "") throw new MnemeError("INVALID_REQUEST", "claim: owner must be a non-empty string");
  if (typeof leaseMs !== "number" || !Number.isSafeInteger(leaseMs) || leaseMs < 1) {
    throw new MnemeError("INVALID_REQUEST", `claim: leaseMs must be an integer >= 1, got ${String(leaseMs)}`);
  }
  return owner;
}
