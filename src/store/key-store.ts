import { MnemeError } from "../model/errors.js";
import type { StoreInfo } from "./store-info.js";

/** Bytes of every subject key: AES-256 takes 32. */
export const SUBJECT_KEY_BYTES = 32;

/** Longest subject and key id a key store accepts (characters). */
export const KEY_STORE_MAX_ID_LENGTH = 512;

/**
 * The encryption key of one data subject (a person, usually named by an
 * account uuid). `keyId` is random and never reused: it names the key in what
 * it encrypted, so a key made after a forget never opens what the forgotten
 * key encrypted.
 */
export interface SubjectKey {
  readonly subject: string;
  readonly keyId: string;
  /** 32 random bytes; a copy the caller may keep. */
  readonly key: Uint8Array;
  /** ns since the epoch. */
  readonly createdAt: number;
}

/** A key to create: `createdAt` defaults to now. */
export interface NewSubjectKey {
  readonly subject: string;
  readonly keyId: string;
  readonly key: Uint8Array;
  readonly createdAt?: number;
}

/**
 * The KeyStore: one live encryption key per data subject, kept beside the
 * events (the same SQLite file, the same Postgres schema), so that deleting a
 * subject's key (`forget`) makes every field encrypted with it unreadable
 * without rewriting a single event.
 *
 * Every backend (checked by the conformance suite in `mneme/testing`):
 * - `ensureKey(candidate)` stores the candidate when its subject has no live
 *   key and resolves the subject's live key: of concurrent calls for one
 *   subject (from any number of instances) exactly one candidate wins and
 *   every call resolves that one;
 * - `keysById` and `keyOf` answer live keys only; unknown and forgotten ids
 *   are simply absent;
 * - `forget(subject)` deletes every key of the subject and resolves how many
 *   it deleted; a forgotten key id never comes back: `ensureKey` with a key
 *   id that was ever stored (live or forgotten) is refused with CONFLICT, so
 *   a key made after a forget has a new id and opens only what it encrypts;
 * - a subject or key id that is not a non-empty string of at most 512
 *   characters without U+0000, or a key that is not 32 bytes, is refused with
 *   INVALID_REQUEST and nothing is written;
 * - what is returned is a copy (changing its bytes changes nothing stored);
 * - after `close()` every call rejects with STORE_CLOSED; `close()` may be
 *   called twice; errors come back as rejected promises.
 */
export interface KeyStore {
  /** Creates the store's tables; idempotent. */
  init(): Promise<void>;
  /** Stores `candidate` unless its subject has a live key; resolves the subject's live key (the candidate or the one stored). */
  ensureKey(candidate: NewSubjectKey): Promise<SubjectKey>;
  /** The subject's live key, or undefined. */
  keyOf(subject: string): Promise<SubjectKey | undefined>;
  /** The live keys among `keyIds`, by key id (one round trip where the backend can). */
  keysById(keyIds: readonly string[]): Promise<Map<string, SubjectKey>>;
  /** Deletes the subject's keys (the data encrypted with them becomes unreadable); resolves how many were deleted. */
  forget(subject: string): Promise<number>;
  info(): Promise<StoreInfo>;
  close(): Promise<void>;
}

/** A candidate checked by {@link validateNewSubjectKey}: createdAt filled, the key copied. */
export interface ValidatedSubjectKey {
  readonly subject: string;
  readonly keyId: string;
  readonly key: Uint8Array;
  readonly createdAt: number;
}

/** Checks a subject or key id (INVALID_REQUEST): a non-empty string of at most 512 characters without U+0000. */
export function validateKeyStoreId(what: "subject" | "keyId", id: unknown): string {
  if (typeof id !== "string" || id === "" || id.length > KEY_STORE_MAX_ID_LENGTH || id.includes("\u0000")) {
    throw new MnemeError(
      "INVALID_REQUEST",
      `key store: ${what} must be a non-empty string of at most ${KEY_STORE_MAX_ID_LENGTH} characters without U+0000`,
    );
  }
  return id;
}

/** Checks a list of key ids for `keysById` (INVALID_REQUEST); resolves them without duplicates. */
export function validateKeyIds(keyIds: unknown): string[] {
  if (!Array.isArray(keyIds)) throw new MnemeError("INVALID_REQUEST", "key store: keysById needs an array of key ids");
  return [...new Set((keyIds as unknown[]).map((id) => validateKeyStoreId("keyId", id)))];
}

/**
 * Checks a key before any backend stores it, so every backend refuses the
 * same candidates with INVALID_REQUEST; returns it with createdAt filled and
 * the key bytes copied (the caller may change its array afterwards).
 */
export function validateNewSubjectKey(candidate: NewSubjectKey, now: () => number): ValidatedSubjectKey {
  if (candidate === null || typeof candidate !== "object") throw new MnemeError("INVALID_REQUEST", "key store: a key must be an object");
  const subject = validateKeyStoreId("subject", candidate.subject);
  const keyId = validateKeyStoreId("keyId", candidate.keyId);
  const key: unknown = candidate.key;
  if (!(key instanceof Uint8Array) || key.byteLength !== SUBJECT_KEY_BYTES) {
    throw new MnemeError("INVALID_REQUEST", `key store: key must be a Uint8Array of ${SUBJECT_KEY_BYTES} bytes`);
  }
  const createdAt = candidate.createdAt ?? now();
  if (typeof createdAt !== "number" || !Number.isInteger(createdAt) || createdAt < 0) {
    throw new MnemeError("INVALID_REQUEST", `key store: createdAt must be a non-negative integer (ns), got ${String(createdAt)}`);
  }
  return { subject, keyId, key: Uint8Array.from(key), createdAt };
}

/** The CONFLICT of a candidate whose key id was stored before (live or forgotten). */
export function keyIdTaken(keyId: string): MnemeError {
  return new MnemeError("CONFLICT", `key store: key id ${JSON.stringify(keyId)} was used before; a key id is never reused`);
}

/** A stored key read back as a fresh copy, or undefined when the row is not a usable key (wrong length). */
export function subjectKeyOf(subject: unknown, keyId: unknown, key: unknown, createdAt: unknown): SubjectKey | undefined {
  if (typeof subject !== "string" || typeof keyId !== "string" || !(key instanceof Uint8Array) || key.byteLength !== SUBJECT_KEY_BYTES) {
    return undefined;
  }
  const at = typeof createdAt === "number" ? createdAt : Number(createdAt);
  return { subject, keyId, key: Uint8Array.from(key), createdAt: Number.isFinite(at) ? at : 0 };
}
