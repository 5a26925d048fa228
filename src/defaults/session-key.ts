/**
 * Session keys: 256 random bits handed to the client once; the store keeps only
 * a keyed hash (HMAC-SHA256), and checks compare hashes in constant time.
 */
import { createHmac, randomBytes, timingSafeEqual } from "node:crypto";

/** Algorithm recorded with every stored key hash. */
export const SESSION_KEY_HASH_ALGORITHM = "hmac-sha256";

const KEY_BYTES = 32;
/** base64url of 32 bytes is 43 characters; anything much longer is not one of ours and is not hashed. */
const MAX_KEY_LENGTH = 128;

/** A fresh session key (base64url, 43 characters, no "."). */
export function newSessionKey(): string {
  return randomBytes(KEY_BYTES).toString("base64url");
}

/** The keyed hash stored in place of a session key. `secret` is the application's HMAC key. */
export function hashSessionKey(sessionKey: string, secret: string): string {
  return createHmac("sha256", secret).update(sessionKey, "utf8").digest("base64url");
}

/** True when `sessionKey` hashes to `storedHash`; constant time in the key's content. */
export function sessionKeyMatches(sessionKey: unknown, storedHash: string, secret: string): boolean {
  if (typeof sessionKey !== "string" || sessionKey.length === 0 || sessionKey.length > MAX_KEY_LENGTH) return false;
  const a = Buffer.from(hashSessionKey(sessionKey, secret), "utf8");
  const b = Buffer.from(storedHash, "utf8");
  return a.length === b.length && timingSafeEqual(a, b);
}

/** Splits a bearer token `<sessionUuid>.<sessionKey>`; undefined when it has not that shape. */
export function parseSessionToken(token: unknown): { sessionUuid: string; sessionKey: string } | undefined {
  if (typeof token !== "string" || token.length > 200) return undefined;
  const dot = token.indexOf(".");
  if (dot <= 0 || dot === token.length - 1) return undefined;
  return { sessionUuid: token.slice(0, dot), sessionKey: token.slice(dot + 1) };
}
