import type { IncomingMessage, ServerResponse } from "node:http";
import {
  BODY_TEXT,
  bodyUnreadable,
  concat,
  directHandlerOf,
  type HeaderReader,
  type InboundRequest,
  type Reply,
  isPushBody,
  plainTarget,
  type PushBody,
  type PushTarget,
  tooLarge,
} from "./exchange.js";

/** Options of toNodeListener. */
export interface NodeListenerOptions {
  /** Told about a failure of the bridge itself (the handler answers its own errors). */
  readonly onError?: (error: unknown) => void;
}

/** A `(req, res)` listener for node:http / node:https, also usable as Express middleware. */
export type NodeListener = (req: IncomingMessage, res: ServerResponse) => Promise<void>;

/**
 * Serves a Fetch API handler on node:http. A handler made by createHttpHandler
 * is served directly: the request is read from the IncomingMessage and the
 * answer written to the ServerResponse, with no Request or Response in
 * between (the same routes, statuses, headers and limits, at a fraction of the
 * cost). Any other handler, and a request none of mneme's routes matches or
 * whose target or Host is unusual, goes through the Fetch API: a Request
 * (streaming body, an AbortSignal that fires when the client goes away) in,
 * the Response streamed back with backpressure. Uses only types from
 * node:http, so the adapter has no runtime dependency.
 * @example
 * createServer(toNodeListener(createHttpHandler(facade))).listen(3000, "127.0.0.1");
 */
export function toNodeListener(handler: (request: Request) => Promise<Response>, opts: NodeListenerOptions = {}): NodeListener {
  const bridge: NodeListener = (req, res) => viaFetch(handler, req, res, opts);
  const direct = directHandlerOf(handler);
  if (direct === undefined) return bridge;
  // Chained with `then`, not awaited in an async function: one promise less per request.
  return (req, res) => {
    const inbound = NodeInbound.of(req, res);
    if (inbound === undefined) return bridge(req, res);
    return direct.answer(inbound).then(
      (reply): Promise<void> | undefined => {
        if (reply === undefined) return bridge(req, res);
        try {
          // Text is written at once; only a stream (SSE) is awaited.
          if (isPushBody(reply.body)) return pushReply(reply, reply.body, req, res);
          if (typeof reply.body === "object")
            return pipeReply(reply, reply.body, req, res, inbound).then(undefined, (e: unknown) => writeFailed(e, inbound, res, opts));
          writeReply(reply, reply.body, req, res);
        } catch (e) {
          writeFailed(e, inbound, res, opts);
        }
        return undefined;
      },
      (e: unknown) => {
        opts.onError?.(e);
        if (!res.headersSent) send(res, 500, "text/plain", "internal error");
      },
    );
  };
}

/** Writing a reply failed: onError is told unless the client went away, and the connection is closed. */
function writeFailed(e: unknown, inbound: NodeInbound, res: ServerResponse, opts: NodeListenerOptions): void {
  if (!inbound.closed) opts.onError?.(e);
  res.destroy();
}

async function viaFetch(
  handler: (request: Request) => Promise<Response>,
  req: IncomingMessage,
  res: ServerResponse,
  opts: NodeListenerOptions,
): Promise<void> {
  const abort = new AbortController();
  res.once("close", () => {
    if (!res.writableFinished) abort.abort();
  });
  res.once("finish", () => drain(req));
  let request: Request;
  try {
    request = toRequest(req, abort.signal);
  } catch {
    send(
      res,
      400,
      "application/problem+json",
      JSON.stringify({
        type: "urn:mneme:error:INVALID_REQUEST",
        title: "Bad Request",
        status: 400,
        detail: "the request line or headers are malformed",
        code: "INVALID_REQUEST",
      }),
    );
    return;
  }
  let response: Response;
  try {
    response = await handler(request);
  } catch (e) {
    opts.onError?.(e);
    if (!res.headersSent) send(res, 500, "text/plain", "internal error");
    return;
  }
  try {
    await writeResponse(response, res, abort.signal);
  } catch (e) {
    if (!abort.signal.aborted) opts.onError?.(e);
    res.destroy();
  }
}

/** A body the handler did not read (a 401, a 413) is drained, not buffered, so keep-alive goes on. */
function drain(req: IncomingMessage): void {
  if (!req.complete) {
    req.removeAllListeners("data");
    req.resume();
  }
}

/** The methods served directly; anything else goes through the Fetch API, which refuses some of them itself. */
const DIRECT_METHODS: ReadonlySet<string> = new Set(["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]);
/** A host name or IPv4 address, or an IPv6 literal, with an optional port. */
const PLAIN_HOST = /^(?:[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.?|\[[0-9A-Fa-f:.]+\])(?::\d{1,5})?$/;

/**
 * Host header -> its URL origin, one map per scheme (null: not a plain host, or
 * not a valid URL host), so a known host costs one lookup. Bounded: a client
 * sending many hosts only clears it.
 */
const httpOrigins = new Map<string, string | null>();
const httpsOrigins = new Map<string, string | null>();

function originOf(encrypted: boolean, host: string): string | undefined {
  const known = encrypted ? httpsOrigins : httpOrigins;
  let origin = known.get(host);
  if (origin === undefined) {
    origin = PLAIN_HOST.test(host) ? urlOrigin(`${encrypted ? "https" : "http"}://${host}/`) : null;
    if (known.size >= 64) known.clear();
    known.set(host, origin);
  }
  return origin ?? undefined;
}

function urlOrigin(url: string): string | null {
  try {
    return new URL(url).origin;
  } catch {
    return null;
  }
}

/** An InboundRequest read straight from node:http: headers, query and signal are made only when asked for. */
class NodeInbound implements InboundRequest {
  readonly method: string;
  readonly pathname: string;
  readonly hasBody: boolean;
  readonly #req: IncomingMessage;
  readonly #search: string;
  #query: URLSearchParams | undefined;
  #headers: Map<string, string> | undefined;
  /** True when node:http's own header object can be read as is (no name repeated); undefined until asked. */
  #distinct: boolean | undefined;
  readonly #res: ServerResponse;
  #abort: AbortController | undefined;

  /** Undefined when the request is better served through the Fetch API (see PLAIN_TARGET, PLAIN_HOST). */
  static of(req: IncomingMessage, res: ServerResponse): NodeInbound | undefined {
    const method = (req.method ?? "GET").toUpperCase();
    if (!DIRECT_METHODS.has(method)) return undefined;
    const target = plainTarget(req.url ?? "/");
    if (target === undefined) return undefined;
    const encrypted = (req.socket as { encrypted?: boolean }).encrypted === true;
    const origin = originOf(encrypted, req.headers.host ?? "localhost");
    if (origin === undefined) return undefined;
    return new NodeInbound(req, res, method, target.pathname, target.search, origin);
  }

  private constructor(
    req: IncomingMessage,
    res: ServerResponse,
    method: string,
    pathname: string,
    search: string,
    readonly origin: string,
  ) {
    this.#req = req;
    this.method = method;
    this.pathname = pathname;
    this.#search = search;
    this.#res = res;
    this.hasBody = method !== "GET" && method !== "HEAD";
  }

  /** The client went away before the answer was complete. */
  get closed(): boolean {
    return this.#res.destroyed && !this.#res.writableFinished;
  }

  get searchParams(): URLSearchParams {
    return (this.#query ??= new URLSearchParams(this.#search));
  }

  get headers(): HeaderReader {
    return this;
  }

  /** A header as the Fetch API's Headers gives it: repeated ones joined with ", " (cookies with "; "). */
  get(name: string): string | null {
    if (this.#headers === undefined) {
      // node:http has made its header object already (for Host, at least). Where no name is repeated,
      // its values are the raw ones, as the Fetch API would give them; else the map below joins them.
      const req = this.#req;
      if ((this.#distinct ??= distinctNames(req))) {
        const v = req.headers[name];
        if (typeof v === "string") return v;
        if (v === undefined) return null;
      }
      this.#headers = headerMap(req.rawHeaders);
    }
    return this.#headers.get(name) ?? null;
  }

  /** Made when a route asks for it (most never do): from then on it follows the response's "close". */
  get signal(): AbortSignal {
    if (this.#abort === undefined) {
      const abort = (this.#abort = new AbortController());
      const res = this.#res;
      if (this.closed) abort.abort();
      else
        res.once("close", () => {
          if (!res.writableFinished) abort.abort();
        });
    }
    return this.#abort.signal;
  }

  readBody(maxBytes: number): Promise<Uint8Array> {
    const req = this.#req as Reading;
    if (req.readableEnded || req[BODY_READ] !== undefined) return Promise.reject(bodyUnreadable(new Error("the body was read already")));
    return new Promise<Uint8Array>((resolve, reject) => {
      req[BODY_READ] = { chunks: [], total: 0, maxBytes, resolve, reject };
      req.on("data", onBodyData);
      req.once("end", onBodyEnd);
      req.once("error", onBodyError);
      req.once("close", onBodyClose);
    });
  }

  toRequest(): Request {
    const headers = new Headers();
    for (const [k, v] of this.#headers ?? headerMap(this.#req.rawHeaders)) headers.set(k, v);
    return new Request(`${this.origin}${this.#req.url ?? "/"}`, { method: this.method, headers });
  }
}

/**
 * The state of a body being read, kept on the request itself: the listeners
 * are the four functions below, shared by every request, not four closures
 * made per request.
 */
const BODY_READ: unique symbol = Symbol("mneme.http.bodyRead");

interface BodyRead {
  readonly chunks: Buffer[];
  total: number;
  readonly maxBytes: number;
  readonly resolve: (body: Uint8Array) => void;
  readonly reject: (error: unknown) => void;
}

type Reading = IncomingMessage & { [BODY_READ]?: BodyRead };

function onBodyData(this: Reading, chunk: Buffer): void {
  const read = this[BODY_READ]!;
  read.total += chunk.byteLength;
  if (read.total <= read.maxBytes) {
    read.chunks.push(chunk);
    return;
  }
  stopReading(this);
  // Drain the rest unread: the answer (413) goes out and the connection stays usable.
  this.resume();
  read.reject(tooLarge(read.maxBytes));
}

function onBodyEnd(this: Reading): void {
  const read = stopReading(this);
  read.resolve(concat(read.chunks, read.total));
}

function onBodyError(this: Reading, e: unknown): void {
  stopReading(this).reject(bodyUnreadable(e));
}

function onBodyClose(this: Reading): void {
  if (!this.complete) onBodyError.call(this, new Error("the connection closed before the body ended"));
}

/** Takes the body listeners off; the state stays, so a second read is refused. */
function stopReading(req: Reading): BodyRead {
  req.off("data", onBodyData);
  req.off("end", onBodyEnd);
  req.off("error", onBodyError);
  req.off("close", onBodyClose);
  return req[BODY_READ]!;
}

/** True when no header name of the request is repeated: node:http's object then holds one raw value per name. */
function distinctNames(req: IncomingMessage): boolean {
  let names = 0;
  for (const _ in req.headers) names++;
  return names * 2 === req.rawHeaders.length;
}

function headerMap(raw: readonly string[]): Map<string, string> {
  const out = new Map<string, string>();
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const name = raw[i]!.toLowerCase();
    const value = raw[i + 1]!;
    const before = out.get(name);
    out.set(name, before === undefined ? value : `${before}${name === "cookie" ? "; " : ", "}${value}`);
  }
  return out;
}

function writeReply(reply: Reply, body: string | undefined, req: IncomingMessage, res: ServerResponse): void {
  if (body === undefined) {
    res.writeHead(reply.status, reply.headers);
    res.end();
  } else {
    res.writeHead(reply.status, { ...reply.headers, "content-length": Buffer.byteLength(body) });
    res.end(body);
  }
  drain(req);
}

async function pipeReply(
  reply: Reply,
  body: ReadableStream<Uint8Array>,
  req: IncomingMessage,
  res: ServerResponse,
  inbound: NodeInbound,
): Promise<void> {
  res.writeHead(reply.status, reply.headers);
  await pipeStream(body, res, inbound.signal);
  drain(req);
}

/**
 * Serves a pushed body (an event stream) straight into the response: each
 * push is a write (writes of one tick leave as one), with no stream, reader
 * or promise per chunk. The body holds what comes while node:http reports the
 * connection full and writes it on "drain"; the response's "close" before the
 * end tells the body the client went away.
 */
function pushReply(reply: Reply, body: PushBody, req: IncomingMessage, res: ServerResponse): Promise<void> {
  res.writeHead(reply.status, reply.headers);
  res.flushHeaders();
  return new Promise<void>((resolve) => {
    const target: PushTarget = {
      write: (chunks) => {
        let room = true;
        for (const chunk of chunks) room = res.write(chunk);
        return room;
      },
      end: () => {
        if (!res.destroyed) res.end();
      },
    };
    const events = body.attach(target);
    if (res.destroyed) {
      // The client went away before the answer: its "close" came already.
      if (!res.writableFinished) events.gone();
      drain(req);
      resolve();
      return;
    }
    res.on("drain", events.drained);
    res.once("close", () => {
      res.off("drain", events.drained);
      if (!res.writableFinished) events.gone();
      drain(req);
      resolve();
    });
  });
}

function toRequest(req: IncomingMessage, signal: AbortSignal): Request {
  const encrypted = (req.socket as { encrypted?: boolean }).encrypted === true;
  const host = req.headers.host ?? "localhost";
  const target = req.url ?? "/";
  // Concatenate, never resolve: "//x" must stay a path, not become a host. An origin-form target
  // gives an http(s) URL whatever the host, so the Request's own parse is the only one (it throws
  // a TypeError for a malformed one); any other form is parsed first to check its scheme.
  let url: string | URL;
  if (target.startsWith("/")) url = `${encrypted ? "https" : "http"}://${host}${target}`;
  else {
    url = new URL(target);
    if (url.protocol !== "http:" && url.protocol !== "https:") throw new TypeError("unsupported request target");
  }
  const method = (req.method ?? "GET").toUpperCase();
  const init: RequestInit & { duplex?: "half" } = { method, headers: fetchHeaders(req), signal };
  if (method !== "GET" && method !== "HEAD") {
    init.body = bodyStream(req);
    init.duplex = "half";
  }
  return new Request(url, init);
}

/**
 * The request's headers as a Fetch Headers init: node:http's own object when
 * no name is repeated (one raw value per name), else every raw pair, which the
 * Headers joins as the Fetch API does. Never a Headers of our own: the
 * Request would copy it into its own.
 */
function fetchHeaders(req: IncomingMessage): Record<string, string> | [string, string][] {
  if (distinctNames(req)) {
    let plain = true;
    for (const name in req.headers) if (typeof req.headers[name] !== "string") plain = false;
    if (plain) return req.headers as Record<string, string>;
  }
  const raw = req.rawHeaders;
  const pairs: [string, string][] = [];
  for (let i = 0; i + 1 < raw.length; i += 2) pairs.push([raw[i]!, raw[i + 1]!]);
  return pairs;
}

function bodyStream(req: IncomingMessage): ReadableStream<Uint8Array> {
  return new ReadableStream<Uint8Array>(
    {
      start(controller) {
        req.on("data", (chunk: Buffer) => {
          controller.enqueue(new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength));
          if ((controller.desiredSize ?? 1) <= 0) req.pause();
        });
        req.once("end", () => {
          try {
            controller.close();
          } catch {
            // cancelled by the reader already
          }
        });
        req.once("error", (e) => {
          try {
            controller.error(e);
          } catch {
            // cancelled by the reader already
          }
        });
        req.pause();
      },
      pull() {
        req.resume();
      },
      cancel() {
        // The handler has what it needs (or refused the body): drain the rest so the connection stays usable.
        req.removeAllListeners("data");
        req.resume();
      },
    },
    { highWaterMark: 16 },
  );
}

async function writeResponse(response: Response, res: ServerResponse, signal: AbortSignal): Promise<void> {
  // One object for writeHead (node:http writes it as it is), not a setHeader per header.
  const headers: Record<string, string | string[] | number> = {};
  response.headers.forEach((v, k) => {
    if (k !== "set-cookie") headers[k] = v;
  });
  const cookies = response.headers.getSetCookie();
  if (cookies.length > 0) headers["set-cookie"] = cookies;
  const text = (response as Response & { [BODY_TEXT]?: string })[BODY_TEXT];
  if (typeof text === "string" && !response.bodyUsed) {
    // A response of mneme/http whose text is at hand: skip pulling it through the stream.
    headers["content-length"] = Buffer.byteLength(text);
    res.writeHead(response.status, headers);
    res.end(text);
    return;
  }
  res.writeHead(response.status, headers);
  if (response.body === null) {
    res.end();
    return;
  }
  await pipeStream(response.body, res, signal);
}

/** Streams a body with backpressure; the stream is cancelled when the client goes away. */
async function pipeStream(body: ReadableStream<Uint8Array>, res: ServerResponse, signal: AbortSignal): Promise<void> {
  res.flushHeaders();
  const reader = body.getReader();
  const onAbort = () => void reader.cancel().catch(() => undefined);
  signal.addEventListener("abort", onAbort, { once: true });
  if (signal.aborted) onAbort();
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      if (!res.write(value)) {
        await new Promise<void>((resolve) => {
          const go = () => {
            res.off("drain", go);
            res.off("close", go);
            resolve();
          };
          res.on("drain", go);
          res.on("close", go);
        });
      }
      if (signal.aborted) break;
    }
  } finally {
    signal.removeEventListener("abort", onAbort);
  }
  if (signal.aborted) res.destroy();
  else res.end();
}

function send(res: ServerResponse, status: number, type: string, body: string): void {
  res.writeHead(status, { "content-type": type, "content-length": Buffer.byteLength(body) });
  res.end(body);
}
