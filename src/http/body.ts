import { MnemeError } from "../model/errors.js";

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
export async function readJsonBody(request: Request, limits: BodyLimits): Promise<unknown> {
  const declared = request.headers.get("content-length");
  if (declared !== null) {
    const n = Number(declared);
    if (!/^\d+$/.test(declared.trim()) || !Number.isSafeInteger(n))
      throw new MnemeError("INVALID_REQUEST", "Content-Length must be a non-negative integer");
    if (n > limits.maxBytes) throw tooLarge(limits.maxBytes);
    if (n === 0) return undefined;
  }
  if (request.body === null) return undefined;
  const contentType = request.headers.get("content-type");
  if (contentType !== null) checkContentType(contentType);
  const bytes = await readBounded(request.body, limits.maxBytes);
  if (bytes.byteLength === 0) return undefined;
  if (contentType === null) throw new UnsupportedMediaType("a request body needs `Content-Type: application/json`");
  let text: string;
  try {
    text = new TextDecoder("utf-8", { fatal: true, ignoreBOM: false }).decode(bytes);
  } catch {
    throw new MnemeError("INVALID_REQUEST", "the request body is not valid UTF-8");
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (e) {
    throw new MnemeError("INVALID_REQUEST", `the request body is not valid JSON: ${e instanceof Error ? e.message : String(e)}`);
  }
  if (depthExceeds(value, limits.maxDepth))
    throw new MnemeError("INVALID_REQUEST", `the request body nests deeper than ${limits.maxDepth} levels`);
  return value;
}

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

async function readBounded(body: ReadableStream<Uint8Array>, maxBytes: number): Promise<Uint8Array> {
  const reader = body.getReader();
  const chunks: Uint8Array[] = [];
  let total = 0;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      total += value.byteLength;
      if (total > maxBytes) {
        await reader.cancel().catch(() => undefined);
        throw tooLarge(maxBytes);
      }
      chunks.push(value);
    }
  } catch (e) {
    if (e instanceof MnemeError) throw e;
    throw new MnemeError("INVALID_REQUEST", "the request body could not be read (the client went away?)", { cause: e });
  } finally {
    reader.releaseLock();
  }
  if (chunks.length === 1) return chunks[0]!;
  const out = new Uint8Array(total);
  let at = 0;
  for (const c of chunks) {
    out.set(c, at);
    at += c.byteLength;
  }
  return out;
}

/** Iterative, so a hostile body cannot overflow the stack here (or later in validation). */
function depthExceeds(value: unknown, maxDepth: number): boolean {
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

function tooLarge(maxBytes: number): MnemeError {
  return new MnemeError("PAYLOAD_TOO_LARGE", `the request body is larger than ${maxBytes} bytes`);
}
