import { MnemeError } from "../model/errors.js";
import type { RequestContext } from "../model/types.js";
import { readCredentials } from "./credentials.js";
import type { RouteContext } from "./route.js";

/**
 * The request context of a long-lived stream as it stands now: the stream's
 * credentials resolved again (a session signed out or expired since the stream
 * opened is UNAUTHENTICATED) with the path's target tenant. A subscription and
 * a live query call it before they push, so a revoked session ends the stream.
 */
export async function currentRequestContext(c: RouteContext): Promise<RequestContext> {
  const creds = readCredentials(c.request.headers);
  if (creds === undefined || typeof creds === "string")
    throw new MnemeError("UNAUTHENTICATED", "the stream's credentials are no longer readable");
  const resolved = await c.options.resolveCredentials(c.facade, creds);
  if (resolved === undefined) throw new MnemeError("UNAUTHENTICATED", "the stream's session is unknown, expired or signed out");
  // The sender as resolved now; what the path and headers added (the target tenant) as when the stream opened.
  return { ...c.reqCtx, ...resolved };
}

/**
 * A `text/event-stream` body the producer writes into: a chunk holds one or
 * more events, and `desiredSize` counts the events the client has not read.
 * `room()` resolves when the client has read what was queued (catch-up reads
 * the next page only then); `push` closes the stream once `maxQueued` events
 * pile up unread.
 */
export class SseWriter {
  readonly stream: ReadableStream<Uint8Array>;
  #controller: ReadableStreamDefaultController<Uint8Array> | undefined;
  #closed = false;
  #waiting: (() => void) | undefined;
  readonly #onClose: () => void;
  readonly #maxQueued: number;
  // Events per chunk, for the queuing strategy (a chunk not listed is one event).
  readonly #counts = new WeakMap<Uint8Array, number>();

  constructor(first: string, maxQueued: number, onClose: () => void) {
    this.#maxQueued = maxQueued;
    this.#onClose = onClose;
    this.stream = new ReadableStream<Uint8Array>(
      {
        start: (controller) => {
          this.#controller = controller;
          controller.enqueue(encoder.encode(first));
        },
        pull: () => {
          this.#wake();
        },
        cancel: () => {
          this.close();
        },
      },
      { highWaterMark: 1, size: (chunk) => (chunk === undefined ? 1 : (this.#counts.get(chunk) ?? 1)) },
    );
  }

  get closed(): boolean {
    return this.#closed;
  }

  /**
   * Queues SSE text (or its bytes, which may be shared with other streams and
   * are never changed) holding `events` events; false (and the stream closed)
   * when the client has left `maxQueued` events unread.
   */
  push(text: string | Uint8Array, events = 1): boolean {
    const c = this.#controller;
    if (this.#closed || c === undefined) return false;
    if ((c.desiredSize ?? 0) <= -this.#maxQueued) {
      this.close();
      return false;
    }
    const bytes = typeof text === "string" ? encoder.encode(text) : text;
    if (events !== 1) this.#counts.set(bytes, events);
    c.enqueue(bytes);
    return true;
  }

  /** Resolves when the client has read everything queued (or the stream closed). */
  room(): Promise<void> {
    if (this.#closed || (this.#controller?.desiredSize ?? 1) > 0) return Promise.resolve();
    return new Promise((resolve) => {
      const previous = this.#waiting;
      this.#waiting = () => {
        previous?.();
        resolve();
      };
    });
  }

  /** Ends the stream (idempotent) and tells the owner once. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#wake();
    try {
      this.#controller?.close();
    } catch {
      // Already closed or errored by the consumer's cancel: nothing left to end.
    }
    this.#onClose();
  }

  #wake(): void {
    const w = this.#waiting;
    this.#waiting = undefined;
    w?.();
  }
}

const encoder = new TextEncoder();

/** The reply of an event stream. */
export function eventStreamReply(stream: ReadableStream<Uint8Array>) {
  return {
    status: 200,
    headers: {
      "content-type": "text/event-stream; charset=utf-8",
      "cache-control": "no-store",
      "x-accel-buffering": "no",
    },
    body: stream,
  };
}
