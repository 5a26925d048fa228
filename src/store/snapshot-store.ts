import { nowNs } from "../model/clock.js";
import { MnemeError } from "../model/errors.js";
import { jsonSafeProblem } from "./json-safe.js";
import { sha256Hex } from "./sha256.js";
import type { StoreInfo } from "./store-info.js";

/**
 * A snapshot of one aggregate: its state folded from versions 1 to `version`,
 * made by the code whose `snapshotVersion` it carries. `createdAt` is in
 * nanoseconds; `tenantUuid` is the aggregate's tenant ("" when none), so a load
 * from a snapshot can check the tenant without reading version 1.
 */
export interface SnapshotRecord<S = unknown> {
  tenantUuid: string;
  domain: string;
  /** The aggregate type's name (`Todo.aggregate("Todo", ...)`: "Todo"). */
  aggregate: string;
  aggregateUuid: string;
  /** The aggregate version the state is folded up to (>= 1). */
  version: number;
  /** The `snapshotVersion` of the aggregate definition that folded it (>= 1). */
  snapshotVersion: number;
  /** The folded state, JSON-safe (see `jsonSafeProblem`). */
  state: S;
  createdAt: number;
  /**
   * `snapshotDigest` of this snapshot as it was made (64 hex digits), kept as
   * given: a reader recomputes it, and a snapshot whose stored parts no longer
   * match (a version, tenant or state changed in the database) is not folded
   * on. Absent when the snapshot was saved without one (written before digests existed).
   */
  digest?: string;
}

/** A snapshot to save: `tenantUuid` defaults to "", `createdAt` to now. */
export type NewSnapshotRecord<S = unknown> = Omit<SnapshotRecord<S>, "tenantUuid" | "createdAt"> & {
  tenantUuid?: string;
  createdAt?: number;
};

/**
 * The SnapshotStore: a cache of folded aggregate states, kept in the same
 * database as the events, so that a load reads the newest snapshot plus the
 * events after it instead of every event. Deleting snapshots is always safe:
 * nothing but the time of a load depends on them.
 *
 * Every backend (checked by the conformance suite in `mneme/testing`):
 * - one snapshot is kept per (domain, aggregate, aggregateUuid,
 *   snapshotVersion): a save replaces it only with a higher `version`, so of
 *   concurrent saves the highest version wins, and an older or equal one is
 *   dropped (`save` resolves false). Snapshots of other snapshotVersions stay
 *   until deleted (they are never read by code of another snapshotVersion; a
 *   rolling deploy keeps both working); `deleteAggregateType` with
 *   `exceptSnapshotVersion` removes the leftovers;
 * - `latest` answers the stored snapshot of exactly that snapshotVersion, or
 *   undefined; what it returns is a copy (changing it changes nothing stored),
 *   and so is what `save` keeps: `save` reads the state before it returns
 *   its promise, so the caller may change the state right away;
 * - a state that is not JSON-safe, an empty name or uuid, or a version or
 *   snapshotVersion that is not an integer >= 1 is refused with
 *   INVALID_REQUEST (`details` point at the offending part of the state), and
 *   nothing is written;
 * - a stored snapshot that cannot be read back (a damaged row: state that is not
 *   JSON or not JSON-safe, a version that is not an integer >= 1) is
 *   reported as absent (`latest` resolves undefined) and deleted, so the
 *   caller falls back to a full fold and a later save replaces it;
 * - `digest` is kept as saved and given back by `latest` (absent when saved
 *   without one); one that is not 64 lowercase hex digits is INVALID_REQUEST.
 *   Checking it is the reader's part (`snapshotDigestMatches`): a store
 *   returns what it holds;
 * - after `close()` every call rejects with STORE_CLOSED; `close()` may be
 *   called twice; errors come back as rejected promises.
 */
export interface SnapshotStore {
  /** Creates the store's tables; idempotent. */
  init(): Promise<void>;
  /** Keeps `snapshot` unless a snapshot of the same key with an equal or higher version is stored; true when it was written. */
  save<S>(snapshot: NewSnapshotRecord<S>): Promise<boolean>;
  /** The stored snapshot of this aggregate and snapshotVersion, or undefined. */
  latest<S = unknown>(
    domain: string,
    aggregate: string,
    aggregateUuid: string,
    snapshotVersion: number,
  ): Promise<SnapshotRecord<S> | undefined>;
  /** Deletes the aggregate's snapshots (of every snapshotVersion); resolves how many were deleted. */
  delete(domain: string, aggregate: string, aggregateUuid: string): Promise<number>;
  /**
   * Deletes every snapshot of an aggregate type, or, with `exceptSnapshotVersion`,
   * those of every other snapshotVersion (the leftovers after a bump); resolves how many were deleted.
   */
  deleteAggregateType(domain: string, aggregate: string, opts?: { exceptSnapshotVersion?: number }): Promise<number>;
  /** Deletes every snapshot; resolves how many were deleted. */
  clear(): Promise<number>;
  info(): Promise<StoreInfo>;
  close(): Promise<void>;
}

/** A snapshot checked by {@link validateSnapshot}: defaults filled, the state as JSON. */
export interface ValidatedSnapshot {
  readonly tenantUuid: string;
  readonly domain: string;
  readonly aggregate: string;
  readonly aggregateUuid: string;
  readonly version: number;
  readonly snapshotVersion: number;
  readonly createdAt: number;
  /** `JSON.stringify(state)`: what a backend stores. */
  readonly stateJson: string;
  /** The digest given (64 lowercase hex digits), or null. */
  readonly digest: string | null;
}

/**
 * Checks a snapshot before any backend saves it, so every backend refuses the
 * same snapshots with INVALID_REQUEST; returns it with defaults filled and
 * the state serialised once.
 */
export function validateSnapshot(input: NewSnapshotRecord): ValidatedSnapshot {
  if (input === null || typeof input !== "object") throw new MnemeError("INVALID_REQUEST", "snapshot: a snapshot must be an object");
  const { domain, aggregate, aggregateUuid } = input;
  assertName("domain", domain);
  assertName("aggregate", aggregate);
  assertName("aggregateUuid", aggregateUuid);
  assertVersion("version", input.version);
  assertVersion("snapshotVersion", input.snapshotVersion);
  const tenantUuid = input.tenantUuid ?? "";
  if (typeof tenantUuid !== "string" || tenantUuid.includes("\u0000")) {
    throw new MnemeError("INVALID_REQUEST", "snapshot: tenantUuid must be a string without U+0000");
  }
  const createdAt = input.createdAt ?? nowNs();
  if (typeof createdAt !== "number" || !Number.isInteger(createdAt) || createdAt < 0) {
    throw new MnemeError("INVALID_REQUEST", `snapshot: createdAt must be a non-negative integer (ns), got ${String(createdAt)}`);
  }
  const where = `${domain}.${aggregate} ${aggregateUuid} at version ${input.version}`;
  if (!("state" in input)) throw new MnemeError("INVALID_REQUEST", `snapshot of ${where}: state is missing`);
  const problem = jsonSafeProblem(input.state);
  if (problem !== undefined) {
    throw new MnemeError("INVALID_REQUEST", `snapshot of ${where}: the state at "${problem.pointer}" ${problem.message}`, {
      details: [{ pointer: problem.pointer, message: problem.message }],
    });
  }
  const digest = input.digest ?? null;
  if (digest !== null && (typeof digest !== "string" || !DIGEST.test(digest))) {
    throw new MnemeError("INVALID_REQUEST", `snapshot of ${where}: digest must be 64 lowercase hex digits (see snapshotDigest)`);
  }
  return {
    tenantUuid,
    domain,
    aggregate,
    aggregateUuid,
    version: input.version,
    snapshotVersion: input.snapshotVersion,
    createdAt,
    stateJson: JSON.stringify(input.state),
    digest,
  };
}

const DIGEST = /^[0-9a-f]{64}$/;

/** The parts of a snapshot its digest covers. */
export type SnapshotDigestParts = Pick<
  SnapshotRecord,
  "tenantUuid" | "domain" | "aggregate" | "aggregateUuid" | "version" | "snapshotVersion" | "state"
>;

/**
 * The digest of a snapshot: SHA-256 (hex) of its tenant, aggregate type and
 * uuid, version, snapshotVersion and state, the state as JSON with object
 * keys sorted (Postgres jsonb gives keys back in another order). It tells a
 * snapshot that is readable but not what was saved (a version lowered or a
 * state changed by hand or by a faulty copy) from a sound one. It is not a
 * signature: whoever can write the database can recompute it.
 */
export function snapshotDigest(s: SnapshotDigestParts): string {
  const head = JSON.stringify([s.tenantUuid, s.domain, s.aggregate, s.aggregateUuid, s.version, s.snapshotVersion]);
  return sha256Hex(`${head}\n${sortedJson(s.state)}`);
}

/** True when the snapshot carries a digest and it matches its parts. */
export function snapshotDigestMatches(s: SnapshotDigestParts & { digest?: string | undefined }): boolean {
  return s.digest !== undefined && s.digest === snapshotDigest(s);
}

/** JSON with every object's keys sorted (the state is JSON-safe: plain objects, arrays, strings, finite numbers, booleans, null). */
function sortedJson(v: unknown): string {
  if (v === null || typeof v !== "object") return JSON.stringify(v) ?? "null";
  if (Array.isArray(v)) {
    let out = "[";
    for (let i = 0; i < v.length; i++) out += (i === 0 ? "" : ",") + sortedJson(v[i]);
    return `${out}]`;
  }
  const o = v as Record<string, unknown>;
  const keys = Object.keys(o).sort();
  let out = "{";
  for (let i = 0; i < keys.length; i++) {
    const k = keys[i]!;
    out += `${i === 0 ? "" : ","}${JSON.stringify(k)}:${sortedJson(o[k])}`;
  }
  return `${out}}`;
}

/** Checks the arguments of `latest`, so every backend refuses the same ones with INVALID_REQUEST. */
export function validateSnapshotKey(domain: string, aggregate: string, aggregateUuid: string, snapshotVersion: number): void {
  assertName("domain", domain);
  assertName("aggregate", aggregate);
  assertName("aggregateUuid", aggregateUuid);
  assertVersion("snapshotVersion", snapshotVersion);
}

/** Checks the names a delete takes (`aggregateUuid` only when given). */
export function validateSnapshotDelete(
  domain: string,
  aggregate: string,
  aggregateUuid?: string,
  opts?: { exceptSnapshotVersion?: number },
): void {
  assertName("domain", domain);
  assertName("aggregate", aggregate);
  if (aggregateUuid !== undefined) assertName("aggregateUuid", aggregateUuid);
  if (opts !== undefined && (opts === null || typeof opts !== "object")) {
    throw new MnemeError("INVALID_REQUEST", "snapshot: options must be an object");
  }
  if (opts?.exceptSnapshotVersion !== undefined) assertVersion("exceptSnapshotVersion", opts.exceptSnapshotVersion);
}

/**
 * The state of a stored snapshot, or undefined when it cannot be read back
 * (not JSON, or JSON that is not JSON-safe, such as a number beyond the range
 * of a double): the backends then treat the snapshot as damaged.
 */
export function parseStoredState(json: unknown): { state: unknown } | undefined {
  if (typeof json !== "string") return undefined;
  let state: unknown;
  try {
    state = JSON.parse(json);
  } catch {
    return undefined;
  }
  // JSON.parse yields Infinity for a number beyond a double, and escapes can make U+0000 or a lone surrogate.
  return jsonSafeProblem(state) === undefined ? { state } : undefined;
}

/** True for a stored version or snapshotVersion that reads back as what was saved: an integer from 1 to 2^53 - 1. */
export function isStoredVersion(v: unknown): v is number {
  return typeof v === "number" && Number.isSafeInteger(v) && v >= 1;
}

function assertName(what: string, v: unknown): asserts v is string {
  if (typeof v !== "string" || v === "") throw new MnemeError("INVALID_REQUEST", `snapshot: ${what} must be a non-empty string`);
  // Postgres text cannot hold U+0000; refused everywhere so every backend takes the same names.
  if (v.includes("\u0000")) throw new MnemeError("INVALID_REQUEST", `snapshot: ${what} must not contain U+0000`);
}

function assertVersion(what: string, v: unknown): asserts v is number {
  if (!isStoredVersion(v)) {
    throw new MnemeError("INVALID_REQUEST", `snapshot: ${what} must be an integer >= 1, got ${typeof v === "number" ? v : typeof v}`);
  }
}
