import { MnemeError } from "../model/errors.js";
import type { RequestContext } from "../model/types.js";

/** What an Idempotency-Key may hold: 1 to 255 printable ASCII characters. */
const KEY = /^[\x20-\x7e]{1,255}$/;

/**
 * The commandUuid of a request's `Idempotency-Key`: a uuid (version 8) made
 * from a SHA-256 of the caller's account and the key, so that keys of two
 * accounts never meet and the same key of one account always names the same
 * command. Undefined without the header. A key that is not 1 to 255 printable
 * ASCII characters, or one sent without a signed-in account (anonymous
 * callers cannot be told apart, so one's key would replay another's
 * outcome), is INVALID_REQUEST.
 */
export async function commandUuidOfIdempotencyKey(key: string | null, reqCtx: RequestContext): Promise<string | undefined> {
  if (key === null) return undefined;
  if (!KEY.test(key)) throw new MnemeError("INVALID_REQUEST", "Idempotency-Key must be 1 to 255 printable ASCII characters");
  const account = reqCtx.senderAccountUuid;
  if (account === undefined || account === "") {
    throw new MnemeError("INVALID_REQUEST", "Idempotency-Key needs a signed-in caller: keys are kept per account");
  }
  const digest = new Uint8Array(
    await crypto.subtle.digest("SHA-256", new TextEncoder().encode(`mneme.idempotency\u0000${account}\u0000${key}`)),
  );
  // RFC 9562 version 8 (custom) with the RFC variant bits.
  digest[6] = (digest[6]! & 0x0f) | 0x80;
  digest[8] = (digest[8]! & 0x3f) | 0x80;
  const hex = Array.from(digest.subarray(0, 16), (b) => b.toString(16).padStart(2, "0")).join("");
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20, 32)}`;
}
