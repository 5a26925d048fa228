import { MnemeError } from "../model/errors.js";
import type { RequestContext } from "../model/types.js";
import { readCredentials } from "./credentials.js";
import type { RouteContext } from "./route.js";
import { concat } from "./exchange.js";
import { sseResponse } from "./sse.js";

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
 * A `text/event-stream` body the producer writes into. While the client reads
 * as fast as events come, each push is a chunk of its own; while it is behind
 * (the chunk before is unread), pushes are held and handed over as one chunk
 * when it reads again, so a busy server writes fewer, larger chunks instead of
 * queueing one per event. `room()` resolves when the client has read
 * everything (catch-up reads the next page only then); `push` closes the
 * stream once `maxQueued` events are held unread.
 */
export class SseWriter {
  readonly stream: ReadableStream<Uint8Array>;
  #controller: ReadableStreamDefaultController<Uint8Array> | undefined;
  #closed = false;
  #waiting: (() => void) | undefined;
  readonly #onClose: () => void;
  readonly #maxQueued: number;
  // Held while the client is behind: the bytes and how many events they carry.
  #held: Uint8Array[] = [];
  #heldBytes = 0;
  #heldEvents = 0;
  // True when the stream asked for a chunk and none was given yet: the next push goes straight out.
  #wanted = false;

  constructor(first: string, maxQueued: number, onClose: () => void) {
    this.#maxQueued = maxQueued;
    this.#onClose = onClose;
    this.stream = new ReadableStream<Uint8Array>(
      {
        start: (controller) => {
          this.#controller = controller;
          controller.enqueue(encoder.encode(first));
        },
        pull: (controller) => {
          if (this.#held.length > 0) {
            controller.enqueue(this.#takeHeld());
            return;
          }
          this.#wanted = true;
          this.#wake();
        },
        cancel: () => {
          this.close();
        },
      },
      { highWaterMark: 0 },
    );
  }

  get closed(): boolean {
    return this.#closed;
  }

  /**
   * Sends SSE text (or its bytes, which may be shared with other streams and
   * are never changed) holding `events` events; false (and the stream closed)
   * when the client has left more than `maxQueued` events unread.
   */
  push(text: string | Uint8Array, events = 1): boolean {
    const c = this.#controller;
    if (this.#closed || c === undefined) return false;
    const bytes = typeof text === "string" ? encoder.encode(text) : text;
    if (this.#wanted) {
      this.#wanted = false;
      c.enqueue(bytes);
      return true;
    }
    if (this.#heldEvents + events > this.#maxQueued) {
      this.close();
      return false;
    }
    this.#held.push(bytes);
    this.#heldBytes += bytes.byteLength;
    this.#heldEvents += events;
    return true;
  }

  /** Resolves when the client has read everything sent (or the stream closed). */
  room(): Promise<void> {
    if (this.#closed || (this.#wanted && this.#held.length === 0)) return Promise.resolve();
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
    this.#held = [];
    this.#wake();
    try {
      this.#controller?.close();
    } catch {
      // Already closed or errored by the consumer's cancel: nothing left to end.
    }
    this.#onClose();
  }

  #takeHeld(): Uint8Array {
    const held = this.#held;
    const out = concat(held, this.#heldBytes);
    this.#held = [];
    this.#heldBytes = 0;
    this.#heldEvents = 0;
    return out;
  }

  #wake(): void {
    const w = this.#waiting;
    this.#waiting = undefined;
    w?.();
  }
}

const encoder = new TextEncoder();

/** The reply of an event stream (the headers of every SSE route). */
export const eventStreamReply = sseResponse;
