import { MnemeError } from "../model/errors.js";

/** Reads request headers by lowercase name, joined as the Fetch API joins repeated ones. */
export interface HeaderReader {
  get(name: string): string | null;
}

/**
 * What the handler reads of a request. A Fetch Request fills it (the portable
 * handler), and so does toNodeListener straight from node:http's
 * IncomingMessage, without a Request in between.
 */
export interface InboundRequest {
  /** Upper case. */
  readonly method: string;
  /** The URL's path, still percent-encoded. */
  readonly pathname: string;
  /** `scheme://host[:port]` of the URL the client asked for (the CSRF check compares Origin with it). */
  readonly origin: string;
  readonly searchParams: URLSearchParams;
  readonly headers: HeaderReader;
  /** Fires when the client goes away. */
  readonly signal: AbortSignal;
  /** False for GET and HEAD: a body sent with them is not read, as with a Fetch Request. */
  readonly hasBody: boolean;
  /**
   * The whole body, read once. PAYLOAD_TOO_LARGE as soon as it passes
   * `maxBytes` (the rest is drained, not kept); INVALID_REQUEST when the client
   * goes away before the end.
   */
  readBody(maxBytes: number): Promise<Uint8Array>;
  /** The request as a Fetch Request without its body (what `onError` is told about). */
  toRequest(): Request;
}

/** The answer to a request, before it becomes a Fetch Response or is written to node:http. */
export interface Reply {
  readonly status: number;
  /** Lowercase names; `set-cookie` may hold several values. */
  readonly headers: Readonly<Record<string, string | string[]>>;
  /** Text (written with its length), a stream (SSE), or nothing. */
  readonly body?: string | ReadableStream<Uint8Array>;
}

/** An InboundRequest over a Fetch Request; INVALID_REQUEST when its URL is malformed. */
export function fetchInbound(request: Request): InboundRequest {
  let url: URL;
  try {
    url = new URL(request.url);
  } catch {
    throw new MnemeError("INVALID_REQUEST", "the request URL is malformed");
  }
  const body = request.body;
  return {
    method: request.method.toUpperCase(),
    pathname: url.pathname,
    origin: url.origin,
    searchParams: url.searchParams,
    headers: request.headers,
    signal: request.signal,
    hasBody: body !== null,
    readBody: (maxBytes) => (body === null ? Promise.resolve(new Uint8Array(0)) : readBounded(body, maxBytes)),
    toRequest: () => request,
  };
}

/** The Fetch Response of a reply. */
export function toResponse(reply: Reply): Response {
  const headers = new Headers();
  for (const [name, value] of Object.entries(reply.headers)) {
    if (typeof value === "string") headers.set(name, value);
    else for (const v of value) headers.append(name, v);
  }
  const body = reply.body ?? null;
  const response = new Response(body, { status: reply.status, headers });
  if (typeof body === "string") withBodyText(response, body);
  return response;
}

/**
 * Where a Response made here keeps its body text, so toNodeListener can write
 * it at once instead of pulling it through the Response's stream. Responses
 * from elsewhere lack it and take the stream path.
 */
export const BODY_TEXT: unique symbol = Symbol.for("mneme.http.bodyText") as never;

function withBodyText(response: Response, text: string): void {
  Object.defineProperty(response, BODY_TEXT, { value: text });
}

/** PAYLOAD_TOO_LARGE for a body past `maxBytes`. */
export function tooLarge(maxBytes: number): MnemeError {
  return new MnemeError("PAYLOAD_TOO_LARGE", `the request body is larger than ${maxBytes} bytes`);
}

/** INVALID_REQUEST for a body that ended early. */
export function bodyUnreadable(cause: unknown): MnemeError {
  return new MnemeError("INVALID_REQUEST", "the request body could not be read (the client went away?)", { cause });
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
    throw bodyUnreadable(e);
  } finally {
    reader.releaseLock();
  }
  return concat(chunks, total);
}

/** The chunks as one array (the chunk itself when there is one). */
export function concat(chunks: readonly Uint8Array[], total: number): Uint8Array {
  if (chunks.length === 1) return chunks[0]!;
  const out = new Uint8Array(total);
  let at = 0;
  for (const c of chunks) {
    out.set(c, at);
    at += c.byteLength;
  }
  return out;
}

/**
 * The handler's entry point below the Fetch API, carried by the function
 * createHttpHandler returns under a module-private key: toNodeListener fills an
 * InboundRequest from node:http and writes the Reply itself. A wrapped or
 * foreign handler lacks it and is bridged through Request and Response.
 */
export interface DirectHandler {
  /** The reply of a matching route, or undefined when none matches (the Fetch handler then answers). */
  answer(request: InboundRequest): Promise<Reply | undefined>;
}

const DIRECT: unique symbol = Symbol("mneme.http.direct");

/** Attaches the direct entry point to a Fetch handler. */
export function withDirectHandler<H extends (request: Request) => Promise<Response>>(handler: H, direct: DirectHandler): H {
  Object.defineProperty(handler, DIRECT, { value: direct });
  return handler;
}

/** The direct entry point of a handler made by createHttpHandler (of this copy of mneme), else undefined. */
export function directHandlerOf(handler: unknown): DirectHandler | undefined {
  return typeof handler === "function" ? (handler as { [DIRECT]?: DirectHandler })[DIRECT] : undefined;
}
