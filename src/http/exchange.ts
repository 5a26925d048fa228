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
  /** Text (written with its length), a stream, a body pushed as it comes (SSE), or nothing. */
  readonly body?: string | ReadableStream<Uint8Array> | PushBody;
}

/**
 * A body the handler pushes bytes into as they come (an event stream). On
 * node:http, toNodeListener attaches the response itself and the bytes are
 * written straight to it; anywhere else the body is read as a ReadableStream.
 * Exactly one of `stream` and `attach` is called, once.
 */
export interface PushBody {
  readonly kind: "push";
  /** The body as a stream the client pulls (the Fetch API's view). */
  stream(): ReadableStream<Uint8Array>;
  /** From now on the body writes into `target`; the target tells it when the client caught up or went away. */
  attach(target: PushTarget): PushEvents;
  /** Ends the body unread (a HEAD answer). */
  cancel(): Promise<void>;
}

/** Where a PushBody writes on node:http (toNodeListener's side). */
export interface PushTarget {
  /** Writes the chunks in one go; false when they wait in memory (the client is behind): `drained` follows. */
  write(chunks: readonly Uint8Array[]): boolean;
  /** The body ended: ends the response. */
  end(): void;
}

/** What the target tells its PushBody. */
export interface PushEvents {
  /** Everything written was handed to the connection: writing may go on. */
  drained(): void;
  /** The client went away (the response closed before the body ended). */
  gone(): void;
}

/** True for a PushBody (not text, not a ReadableStream). */
export function isPushBody(body: Reply["body"]): body is PushBody {
  return typeof body === "object" && (body as Partial<PushBody>).kind === "push";
}

/** An InboundRequest over a Fetch Request; INVALID_REQUEST when its URL is malformed. */
export function fetchInbound(request: Request): InboundRequest {
  return new FetchInbound(request);
}

/** An InboundRequest over a Fetch Request: its URL split once, the query parsed only when asked for. */
class FetchInbound implements InboundRequest {
  readonly method: string;
  readonly pathname: string;
  readonly origin: string;
  readonly hasBody: boolean;
  readonly #request: Request;
  #search: string | URLSearchParams;

  constructor(request: Request) {
    const href = request.url;
    const split = splitHref(href);
    if (split !== undefined) {
      this.origin = split.origin;
      this.pathname = split.target.pathname;
      this.#search = split.target.search;
    } else {
      let url: URL;
      try {
        url = new URL(href);
      } catch {
        throw new MnemeError("INVALID_REQUEST", "the request URL is malformed");
      }
      this.origin = url.origin;
      this.pathname = url.pathname;
      this.#search = url.searchParams;
    }
    this.#request = request;
    this.method = request.method.toUpperCase();
    this.hasBody = request.body !== null;
  }

  get searchParams(): URLSearchParams {
    const s = this.#search;
    return typeof s === "string" ? (this.#search = new URLSearchParams(s)) : s;
  }

  get headers(): HeaderReader {
    return this.#request.headers;
  }

  get signal(): AbortSignal {
    return this.#request.signal;
  }

  readBody(maxBytes: number): Promise<Uint8Array> {
    const body = this.#request.body;
    return body === null ? Promise.resolve(new Uint8Array(0)) : readBounded(body, maxBytes);
  }

  toRequest(): Request {
    return this.#request;
  }
}

/**
 * A target the URL parser leaves as it is: origin-form, no character it would
 * percent-encode, no fragment, and (tested apart) no dot segment it would
 * resolve. Both paths read such a target by slicing it, not by parsing a URL.
 */
const PLAIN_TARGET = /^\/[\w\-.~!$&()*+,;=:@/%?]*$/;
const DOT_SEGMENT = /(?:^|\/)(?:\.|%2e){1,2}(?:\/|$)/i;

/**
 * The path and query of a plain target; undefined for any other (parse it as a
 * URL). The query keeps its "?": URLSearchParams drops one leading "?" only, so
 * "/a??x" reads as the URL parser reads it (a parameter named "?x").
 */
export function plainTarget(target: string): { pathname: string; search: string } | undefined {
  if (!PLAIN_TARGET.test(target)) return undefined;
  const q = target.indexOf("?");
  const pathname = q < 0 ? target : target.slice(0, q);
  if (DOT_SEGMENT.test(pathname)) return undefined;
  return { pathname, search: q < 0 ? "" : target.slice(q) };
}

/**
 * `scheme://authority` -> whether the URL parser serialises it as it is (its
 * origin is itself); bounded, a client sending many hosts only clears it.
 */
const canonicalOrigins = new Map<string, boolean>();

/**
 * The origin, path and query of a Request's URL by slicing it, when the URL
 * parser would give the same (an http(s) URL whose origin and target it leaves
 * as they are); undefined otherwise.
 */
function splitHref(href: string): { origin: string; target: { pathname: string; search: string } } | undefined {
  const from = href.startsWith("http://") ? 7 : href.startsWith("https://") ? 8 : 0;
  if (from === 0) return undefined;
  const slash = href.indexOf("/", from);
  if (slash < 0) return undefined;
  const origin = href.slice(0, slash);
  let canonical = canonicalOrigins.get(origin);
  if (canonical === undefined) {
    canonical = !origin.includes("@") && urlOriginOf(`${origin}/`) === origin;
    if (canonicalOrigins.size >= 64) canonicalOrigins.clear();
    canonicalOrigins.set(origin, canonical);
  }
  if (!canonical) return undefined;
  const target = plainTarget(href.slice(slash));
  return target === undefined ? undefined : { origin, target };
}

function urlOriginOf(url: string): string | undefined {
  try {
    return new URL(url).origin;
  } catch {
    return undefined;
  }
}

/** The Fetch Response of a reply: its headers given as a plain init, not set one by one on a Headers. */
export function toResponse(reply: Reply): Response {
  let headers: Record<string, string> | [string, string][] = reply.headers as Record<string, string>;
  for (const name in reply.headers) {
    if (typeof reply.headers[name] !== "string") {
      headers = [];
      for (const [k, value] of Object.entries(reply.headers)) {
        if (typeof value === "string") headers.push([k, value]);
        else for (const v of value) headers.push([k, v]);
      }
      break;
    }
  }
  const body = isPushBody(reply.body) ? reply.body.stream() : (reply.body ?? null);
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
