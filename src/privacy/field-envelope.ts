/**
 * How one protected value is stored: the value as JSON, encrypted with
 * AES-256-GCM under its subject's key, in a JSON-safe envelope
 * `{ "$enc": "v1:<keyId>:<iv>:<ciphertext and tag>" }` (base64url), so the
 * payload stays a JSON object whatever the backend and the key is found by id.
 */
import { createCipheriv, createDecipheriv, createSecretKey, type KeyObject, randomBytes } from "node:crypto";

/** What a protected field reads as once its subject's key is gone. */
export const ERASED = "[erased]";

/** The member of an envelope object: the object holds it and nothing else. */
export const ENVELOPE_MEMBER = "$enc";

const VERSION = "v1";
const IV_BYTES = 12;
const TAG_BYTES = 16;
/** Bound to every ciphertext, so a value encrypted by another scheme never passes as one of these. */
const AAD = Buffer.from("mneme:personal-data:v1");

/** Key objects of key bytes, made once per key: a cipher made from one costs a quarter less than from the bytes. */
const keyObjects = new WeakMap<Uint8Array, KeyObject>();

function keyObjectOf(key: Uint8Array): KeyObject {
  let ko = keyObjects.get(key);
  if (ko === undefined) {
    ko = createSecretKey(key);
    keyObjects.set(key, ko);
  }
  return ko;
}

/** A stored protected value. */
export interface FieldEnvelope {
  readonly [ENVELOPE_MEMBER]: string;
}

/** The key id of an envelope, or undefined when `v` is not one (shape and version checked, not the ciphertext). */
export function envelopeKeyId(v: unknown): string | undefined {
  if (typeof v !== "object" || v === null || Array.isArray(v)) return undefined;
  const text = (v as Record<string, unknown>)[ENVELOPE_MEMBER];
  if (typeof text !== "string" || Object.keys(v).length !== 1) return undefined;
  const parts = text.split(":");
  return parts.length === 4 && parts[0] === VERSION && parts[1] !== "" ? parts[1] : undefined;
}

/** Random bytes for IVs, drawn from the CSPRNG 256 IVs at a time: one call per IV cost more than the cipher itself. */
const IV_POOL_IVS = 256;
let ivPool = Buffer.alloc(0);
let ivAt = 0;

/** A fresh random IV (never handed out twice). */
function nextIv(): Buffer {
  if (ivAt + IV_BYTES > ivPool.length) {
    ivPool = randomBytes(IV_BYTES * IV_POOL_IVS);
    ivAt = 0;
  }
  const iv = ivPool.subarray(ivAt, ivAt + IV_BYTES);
  ivAt += IV_BYTES;
  return iv;
}

/** Encrypts `value` (any JSON value) under `key` (32 bytes) with a fresh random IV. */
export function sealValue(value: unknown, keyId: string, key: Uint8Array): FieldEnvelope {
  const iv = nextIv();
  const cipher = createCipheriv("aes-256-gcm", keyObjectOf(key), iv);
  cipher.setAAD(AAD);
  const body = Buffer.concat([cipher.update(JSON.stringify(value), "utf8"), cipher.final(), cipher.getAuthTag()]);
  return { [ENVELOPE_MEMBER]: `${VERSION}:${keyId}:${iv.toString("base64url")}:${body.toString("base64url")}` };
}

/**
 * The value an envelope holds, or ERASED when it cannot be opened with `key`
 * (a damaged or foreign ciphertext reads like an erased one: it is unreadable either way).
 */
export function openValue(envelope: FieldEnvelope, key: Uint8Array): unknown {
  const [, , ivText, bodyText] = envelope[ENVELOPE_MEMBER].split(":") as [string, string, string, string];
  try {
    const iv = Buffer.from(ivText, "base64url");
    const body = Buffer.from(bodyText, "base64url");
    if (iv.length !== IV_BYTES || body.length < TAG_BYTES) return ERASED;
    const decipher = createDecipheriv("aes-256-gcm", keyObjectOf(key), iv);
    decipher.setAAD(AAD);
    decipher.setAuthTag(body.subarray(body.length - TAG_BYTES));
    const clear = Buffer.concat([decipher.update(body.subarray(0, body.length - TAG_BYTES)), decipher.final()]).toString("utf8");
    return JSON.parse(clear) as unknown;
  } catch {
    return ERASED;
  }
}
