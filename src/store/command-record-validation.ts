import { MnemeError } from "../model/errors.js";
import type { CommandRecord } from "./command-store.js";
import { isSealedJsonSafe, sealJsonSafe, tryFreezeJsonSafe } from "./json-safe.js";

const STATUSES: ReadonlySet<unknown> = new Set(["succeeded", "failed", "denied"]);

/**
 * Checks a CommandRecord before any backend stores it and returns its JSON, so
 * every backend rejects the same bad records with INVALID_REQUEST and writes nothing.
 */
export function validateCommandRecord(rec: CommandRecord): string {
  checkCommandRecordFields(rec);
  try {
    return JSON.stringify(rec);
  } catch (e) {
    throw bad("not JSON-serialisable", e);
  }
}

/**
 * The field checks of {@link validateCommandRecord} alone, for a store that
 * keeps records as objects (it makes its own copy, see sealedCommandRecord).
 */
export function checkCommandRecordFields(rec: CommandRecord): void {
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
}

/**
 * A deeply frozen copy of a checked record that reads back exactly as its
 * JSON would: a JSON-safe record (the facade's: its request context is
 * sealed already) is copied as it is, anything else through JSON.
 */
export function sealedCommandRecord(rec: CommandRecord): CommandRecord {
  const copy = frozenCopy(rec);
  if (copy !== undefined) return copy;
  let json: string;
  try {
    json = JSON.stringify(rec);
  } catch (e) {
    throw bad("not JSON-serialisable", e);
  }
  return sealJsonSafe(JSON.parse(json) as CommandRecord);
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

/** The fields checkCommandRecordFields checked (strings, finite numbers, an array of strings): copied as they are. */
const CHECKED_FIELDS: ReadonlySet<string> = new Set([
  "commandUuid",
  "domain",
  "name",
  "tenantUuid",
  "status",
  "createdAt",
  "durationMicros",
]);

/**
 * The frozen copy of a record whose JSON round trip would be itself (checked
 * fields, a sealed reqCtx, a JSON-safe payload, nothing else), in its key
 * order; undefined for any other record (it goes through JSON).
 */
function frozenCopy(rec: CommandRecord): CommandRecord | undefined {
  if (!isSealedJsonSafe(rec.reqCtx)) return undefined;
  if (hasFacadeKeys(rec)) return facadeCopy(rec);
  const src = rec as unknown as Record<string, unknown>;
  const out: Record<string, unknown> = {};
  for (const k in src) {
    if (!Object.hasOwn(src, k)) return undefined;
    const v = src[k];
    if (CHECKED_FIELDS.has(k)) {
      // -0 reads back from JSON as 0.
      if (Object.is(v, -0)) return undefined;
      out[k] = v;
    } else if (k === "reqCtx") out[k] = v;
    else if (k === "eventUuids") out[k] = Object.freeze((v as string[]).slice());
    else if (k === "payload" && v !== undefined) {
      // Checked and copied in one walk (a sealed payload is shared as it is).
      const sealed = tryFreezeJsonSafe(v);
      if (sealed === undefined) return undefined;
      out[k] = sealed;
    } else return undefined;
  }
  // Its parts are sealed or frozen already: freezing the top is enough.
  return Object.freeze(out) as unknown as CommandRecord;
}

/** The keys of a succeeded record as the facade makes it, in its order. */
const FACADE_KEYS: readonly string[] = [
  "commandUuid",
  "domain",
  "name",
  "tenantUuid",
  "reqCtx",
  "payload",
  "status",
  "eventUuids",
  "createdAt",
  "durationMicros",
];

/** True when the record's keys are its own and exactly FACADE_KEYS, in that order. */
function hasFacadeKeys(rec: CommandRecord): boolean {
  let i = 0;
  for (const k in rec) {
    if (k !== FACADE_KEYS[i] || !Object.hasOwn(rec, k)) return false;
    i++;
  }
  return i === FACADE_KEYS.length;
}

/**
 * frozenCopy of a record with the facade's keys (see hasFacadeKeys), built as
 * one object literal: the same copy, without a keyed store per field.
 */
function facadeCopy(rec: CommandRecord): CommandRecord | undefined {
  // -0 reads back from JSON as 0.
  if (Object.is(rec.createdAt, -0) || Object.is(rec.durationMicros, -0) || rec.payload === undefined) return undefined;
  // Checked and copied in one walk (a sealed payload is shared as it is).
  const payload = tryFreezeJsonSafe(rec.payload);
  if (payload === undefined) return undefined;
  return Object.freeze({
    commandUuid: rec.commandUuid,
    domain: rec.domain,
    name: rec.name,
    tenantUuid: rec.tenantUuid,
    reqCtx: rec.reqCtx,
    payload,
    status: rec.status,
    eventUuids: Object.freeze(rec.eventUuids.slice()) as string[],
    createdAt: rec.createdAt,
    durationMicros: rec.durationMicros,
  });
}
