import { MnemeError } from "../model/errors.js";
import { type InboundRequest, tooLarge } from "./exchange.js";

/** Thrown for a body that is not JSON at all: the handler answers 415 rather than 400. */
export class UnsupportedMediaType extends MnemeError {
  constructor(message: string) {
    super("INVALID_REQUEST", message);
  }
}

/** Limits of readJsonBody. */
export interface BodyLimits {
  readonly maxBytes: number;
  readonly maxDepth: number;
}

/**
 * Reads a JSON request body within the limits. Resolves `undefined` for an
 * empty body. PAYLOAD_TOO_LARGE past `maxBytes` (checked against
 * Content-Length first, then while reading, so a lying header does not help);
 * INVALID_REQUEST for a body that is not UTF-8 JSON or nests too deeply;
 * UnsupportedMediaType for a non-JSON content type.
 */
export function readJsonBody(request: InboundRequest, limits: BodyLimits): Promise<unknown> {
  // The checks before the read run at once (a refusal is still a rejected promise); the rest runs on the bytes.
  let contentType: string | null;
  try {
    const declared = request.headers.get("content-length");
    if (declared !== null) {
      const n = Number(declared);
      if (!/^\d+$/.test(declared.trim()) || !Number.isSafeInteger(n))
        throw new MnemeError("INVALID_REQUEST", "Content-Length must be a non-negative integer");
      if (n > limits.maxBytes) throw tooLarge(limits.maxBytes);
      if (n === 0) return Promise.resolve(undefined);
    }
    if (!request.hasBody) return Promise.resolve(undefined);
    contentType = request.headers.get("content-type");
    // Most requests send one of a few spellings: each is checked once.
    if (contentType !== null && !acceptedTypes.has(contentType)) {
      checkContentType(contentType);
      if (acceptedTypes.size >= 32) acceptedTypes.clear();
      acceptedTypes.add(contentType);
    }
  } catch (e) {
    return Promise.reject(e as Error);
  }
  return request.readBody(limits.maxBytes).then((bytes) => parseJsonBody(bytes, contentType, limits.maxDepth));
}

/** The JSON value of a body read whole (undefined when empty). */
function parseJsonBody(bytes: Uint8Array, contentType: string | null, maxDepth: number): unknown {
  if (bytes.byteLength === 0) return undefined;
  if (contentType === null) throw new UnsupportedMediaType("a request body needs `Content-Type: application/json`");
  let text: string;
  try {
    text = utf8.decode(bytes);
  } catch {
    throw new MnemeError("INVALID_REQUEST", "the request body is not valid UTF-8");
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (e) {
    throw new MnemeError("INVALID_REQUEST", `the request body is not valid JSON: ${e instanceof Error ? e.message : String(e)}`);
  }
  // Each level takes two characters at least ("[]"): a shorter text cannot nest deeper than the limit.
  if (text.length > 2 * maxDepth && depthExceeds(value, maxDepth))
    throw new MnemeError("INVALID_REQUEST", `the request body nests deeper than ${maxDepth} levels`);
  return value;
}

/** Content-Type values checkContentType accepted (bounded: a client sending many only clears it). */
const acceptedTypes = new Set<string>();

/** Fatal: a body that is not UTF-8 is refused, not patched with U+FFFD. Without `stream`, each decode starts afresh. */
const utf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: false });

/** `application/json` or any `+json` type; a charset, when given, must be UTF-8. */
export function checkContentType(contentType: string): void {
  const [type, ...params] = contentType.split(";");
  const media = (type ?? "").trim().toLowerCase();
  if (media !== "application/json" && !/^application\/[a-z0-9.+-]+\+json$/.test(media)) {
    throw new UnsupportedMediaType(
      `the request body must be JSON (Content-Type: application/json), not ${JSON.stringify(contentType.slice(0, 100))}`,
    );
  }
  for (const p of params) {
    const [k, v] = p.split("=");
    if (k?.trim().toLowerCase() === "charset" && !/^"?utf-8"?$/i.test((v ?? "").trim())) {
      throw new UnsupportedMediaType("a JSON request body must be UTF-8");
    }
  }
}

/** Iterative, so a hostile body cannot overflow the stack here (or later in validation). */
export function depthExceeds(value: unknown, maxDepth: number): boolean {
  const stack: [unknown, number][] = [[value, 1]];
  while (stack.length > 0) {
    const [v, depth] = stack.pop()!;
    if (typeof v !== "object" || v === null) continue;
    if (depth > maxDepth) return true;
    for (const child of Array.isArray(v) ? v : Object.values(v)) {
      if (typeof child === "object" && child !== null) stack.push([child, depth + 1]);
    }
  }
  return false;
}
