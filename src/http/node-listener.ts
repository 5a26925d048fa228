import type { IncomingMessage, ServerResponse } from "node:http";
import { BODY_TEXT } from "./responses.js";

/** Options of toNodeListener. */
export interface NodeListenerOptions {
  /** Told about a failure of the bridge itself (the handler answers its own errors). */
  readonly onError?: (error: unknown) => void;
}

/** A `(req, res)` listener for node:http / node:https, also usable as Express middleware. */
export type NodeListener = (req: IncomingMessage, res: ServerResponse) => Promise<void>;

/**
 * Bridges a Fetch API handler to node:http: builds a Request (streaming body,
 * an AbortSignal that fires when the client goes away) and streams the
 * Response back with backpressure. Uses only types from node:http, so the
 * adapter has no runtime dependency.
 * @example
 * createServer(toNodeListener(createHttpHandler(facade))).listen(3000, "127.0.0.1");
 */
export function toNodeListener(handler: (request: Request) => Promise<Response>, opts: NodeListenerOptions = {}): NodeListener {
  return async (req, res) => {
    const abort = new AbortController();
    res.once("close", () => {
      if (!res.writableFinished) abort.abort();
    });
    res.once("finish", () => {
      // A body the handler did not read (a 401, a 413) is drained, not buffered, so keep-alive goes on.
      if (!req.complete) {
        req.removeAllListeners("data");
        req.resume();
      }
    });
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
  };
}

function toRequest(req: IncomingMessage, signal: AbortSignal): Request {
  const encrypted = (req.socket as { encrypted?: boolean }).encrypted === true;
  const host = req.headers.host ?? "localhost";
  const target = req.url ?? "/";
  // Concatenate, never resolve: "//x" must stay a path, not become a host.
  const url = target.startsWith("/") ? new URL(`${encrypted ? "https" : "http"}://${host}${target}`) : new URL(target);
  if (url.protocol !== "http:" && url.protocol !== "https:") throw new TypeError("unsupported request target");
  const headers = new Headers();
  const raw = req.rawHeaders;
  for (let i = 0; i + 1 < raw.length; i += 2) headers.append(raw[i]!, raw[i + 1]!);
  const method = (req.method ?? "GET").toUpperCase();
  const init: RequestInit & { duplex?: "half" } = { method, headers, signal };
  if (method !== "GET" && method !== "HEAD") {
    init.body = bodyStream(req);
    init.duplex = "half";
  }
  return new Request(url, init);
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
  res.statusCode = response.status;
  const cookies = response.headers.getSetCookie();
  response.headers.forEach((v, k) => {
    if (k !== "set-cookie") res.setHeader(k, v);
  });
  if (cookies.length > 0) res.setHeader("set-cookie", cookies);
  const text = (response as Response & { [BODY_TEXT]?: string })[BODY_TEXT];
  if (typeof text === "string" && !response.bodyUsed) {
    // A response of mneme/http whose text is at hand: skip pulling it through the stream.
    res.setHeader("content-length", Buffer.byteLength(text));
    res.end(text);
    return;
  }
  if (response.body === null) {
    res.end();
    return;
  }
  res.flushHeaders();
  const reader = response.body.getReader();
  const onAbort = () => void reader.cancel().catch(() => undefined);
  signal.addEventListener("abort", onAbort, { once: true });
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
