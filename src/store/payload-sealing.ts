/**
 * The one rewrite a store of append-only data allows: the personal-data
 * migration (docs/privacy.md, "Personal data written before it was
 * declared") replaces values stored in clear with sealed envelopes
 * (`{ "$enc": "v1:..." }`), in place, keeping everything else. The optional
 * backend methods that do it (`EventRepository.sealStoredPayloads`,
 * `CommandStore.sealRecordPayloads`) check every rewrite with
 * {@link checkPayloadSealing} and refuse anything else with INVALID_REQUEST.
 */
import { MnemeError } from "../model/errors.js";

/** One stored payload to rewrite: `stored` as it was read, `sealed` the same payload with clear values replaced by envelopes. */
export interface PayloadSealing {
  /** The event's uuid (event repositories) or the command's uuid (command stores). */
  readonly id: string;
  /** The payload as read from the store: the rewrite happens only while the stored payload still equals it. */
  readonly stored: unknown;
  /** The payload to store. */
  readonly sealed: unknown;
}

/** True when `v` has the shape of a sealed envelope: an object whose only member is `$enc`, a string "v1:<keyId>:<iv>:<data>". */
export function isSealedEnvelope(v: unknown): boolean {
  if (typeof v !== "object" || v === null || Array.isArray(v)) return false;
  const keys = Object.keys(v);
  const text = (v as Record<string, unknown>)["$enc"];
  return keys.length === 1 && typeof text === "string" && /^v1:[^:]+:[^:]+:[^:]+$/.test(text);
}

/** Deep equality of JSON values (object member order ignored, as a jsonb column ignores it). */
export function jsonEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== "object" || typeof b !== "object" || a === null || b === null) return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  if (Array.isArray(a)) {
    const bb = b as unknown[];
    return a.length === bb.length && a.every((v, i) => jsonEqual(v, bb[i]));
  }
  const ka = Object.keys(a);
  if (ka.length !== Object.keys(b).length) return false;
  return ka.every((k) => Object.hasOwn(b, k) && jsonEqual((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k]));
}

/** What a secret field of a command reads as in its record. */
const REDACTED_VALUE = "[redacted]";

/**
 * How many values `sealed` seals that `stored` held in clear; -1 when the two
 * differ in any other way (a value changed, added or removed, an envelope
 * replaced or opened). With `redacts`, a clear value may also become
 * "[redacted]" (a command record's secret field).
 */
function sealedValues(stored: unknown, sealed: unknown, redacts: boolean): number {
  if (jsonEqual(stored, sealed)) return 0;
  const cleared = isSealedEnvelope(sealed) || (redacts && sealed === REDACTED_VALUE);
  if (cleared) return stored === undefined || isSealedEnvelope(stored) || stored === REDACTED_VALUE ? -1 : 1;
  if (typeof stored !== "object" || typeof sealed !== "object" || stored === null || sealed === null) return -1;
  if (Array.isArray(stored) !== Array.isArray(sealed)) return -1;
  const ks = Object.keys(stored);
  if (ks.length !== Object.keys(sealed).length) return -1;
  let n = 0;
  for (const k of ks) {
    if (!Object.hasOwn(sealed, k)) return -1;
    const m = sealedValues((stored as Record<string, unknown>)[k], (sealed as Record<string, unknown>)[k], redacts);
    if (m < 0) return -1;
    n += m;
  }
  return n;
}

/**
 * Checks a list of rewrites (INVALID_REQUEST otherwise, nothing written):
 * each has a non-empty string id, ids are distinct, and `sealed` differs from
 * `stored` only where a clear value became an envelope (or, with `redacts`,
 * for command records, "[redacted]"), at least once.
 */
export function checkPayloadSealing(what: string, rewrites: readonly PayloadSealing[], opts: { redacts?: boolean } = {}): void {
  if (!Array.isArray(rewrites)) throw new MnemeError("INVALID_REQUEST", `${what}: rewrites must be an array`);
  const ids = new Set<string>();
  rewrites.forEach((r, i) => {
    if (typeof r !== "object" || r === null || typeof r.id !== "string" || r.id === "") {
      throw new MnemeError("INVALID_REQUEST", `${what}: rewrites[${i}].id must be a non-empty string`);
    }
    if (ids.has(r.id)) throw new MnemeError("INVALID_REQUEST", `${what}: rewrites[${i}]: ${r.id} is listed twice`);
    ids.add(r.id);
    if (sealedValues(r.stored, r.sealed, opts.redacts === true) < 1) {
      throw new MnemeError(
        "INVALID_REQUEST",
        `${what}: rewrites[${i}] (${r.id}) does not only seal clear values: a stored payload may be rewritten only to replace clear values with sealed envelopes (the personal-data migration)`,
      );
    }
  });
}
