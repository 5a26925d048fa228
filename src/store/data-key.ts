import { MnemeError } from "../model/errors.js";

/** The longest DataStore key, in characters. */
export const MAX_DATA_KEY_LENGTH = 1024;

/**
 * Checks a DataStore key: a non-empty string of at most 1024 characters without
 * NUL or "..", so a key can never name a path outside a filesystem store's root.
 */
export function assertDataKey(key: unknown): asserts key is string {
  if (typeof key !== "string" || key.length === 0) {
    throw new MnemeError("INVALID_REQUEST", "a data key must be a non-empty string");
  }
  if (key.length > MAX_DATA_KEY_LENGTH) {
    throw new MnemeError("INVALID_REQUEST", `a data key has at most ${MAX_DATA_KEY_LENGTH} characters, got ${key.length}`);
  }
  if (key.includes("\0")) throw new MnemeError("INVALID_REQUEST", "a data key must not contain NUL");
  // A lone surrogate has no UTF-8 form: a database or a file name would keep another key than the one given.
  if (/\p{Cs}/u.test(key)) throw new MnemeError("INVALID_REQUEST", "a data key must be well-formed Unicode (no lone surrogate)");
  if (key.includes("..")) throw new MnemeError("INVALID_REQUEST", `a data key must not contain "..": ${JSON.stringify(key.slice(0, 80))}`);
}

/** The content type of a string put without one. */
export const TEXT_CONTENT_TYPE = "text/plain; charset=utf-8";
/** The content type of bytes put without one. */
export const BINARY_CONTENT_TYPE = "application/octet-stream";

const encoder = new TextEncoder();

/**
 * Normalises put()'s arguments: the bytes to store (a private copy) and the
 * content type (given, or the default for a string or for bytes).
 */
export function dataToStore(data: Uint8Array | string, contentType: string | undefined): { bytes: Uint8Array; contentType: string } {
  let bytes: Uint8Array;
  if (typeof data === "string") bytes = encoder.encode(data);
  // new Uint8Array(x) copies (Buffer#slice would share memory) and drops Buffer's prototype.
  else if (data instanceof Uint8Array) bytes = new Uint8Array(data);
  else throw new MnemeError("INVALID_REQUEST", "data must be a string or a Uint8Array");
  if (contentType !== undefined && (typeof contentType !== "string" || contentType === "")) {
    throw new MnemeError("INVALID_REQUEST", "contentType must be a non-empty string");
  }
  return { bytes, contentType: contentType ?? (typeof data === "string" ? TEXT_CONTENT_TYPE : BINARY_CONTENT_TYPE) };
}
