import { MnemeError } from "../model/errors.js";
import type { RequestContext } from "../model/types.js";
import { type Credentials, readCredentials } from "./credentials.js";
import type { RouteContext } from "./route.js";
import type { Reply } from "./exchange.js";
import { concat, type PushBody, type PushEvents, type PushTarget } from "./exchange.js";
import { sseResponse } from "./sse.js";

const streamCredentials = new WeakMap<RouteContext, Credentials | string | null>();

/**
 * The request context of a long-lived stream as it stands now: the stream's
 * credentials resolved again (a session signed out or expired since the stream
 * opened is UNAUTHENTICATED) with the path's target tenant. A subscription and
 * a live query call it before they push, so a revoked session ends the stream.
 */
export async function currentRequestContext(c: RouteContext): Promise<RequestContext> {
  // The headers of an open stream do not change: they are read once per stream, then resolved every time.
  let creds = streamCredentials.get(c);
  if (creds === undefined) {
    creds = readCredentials(c.request.headers) ?? null;
    streamCredentials.set(c, creds);
  }
  if (creds === null || typeof creds === "string")
    throw new MnemeError("UNAUTHENTICATED", "the stream's credentials are no longer readable");
  const resolved = await c.options.resolveCredentials(c.facade, creds);
  if (resolved === undefined) throw new MnemeError("UNAUTHENTICATED", "the stream's session is unknown, expired or signed out");
  // The sender as resolved now; what the path and headers added (the target tenant) as when the stream opened.
  return { ...c.reqCtx, ...resolved };
}

/**
 * A `text/event-stream` body the producer pushes into (a PushBody). Served by
 * toNodeListener, each push is written straight to the node:http response
 * while the connection takes it; elsewhere the body is a ReadableStream and
 * each push a chunk while the client reads as fast as events come. While the
 * client is behind (node:http holds unsent bytes, or the stream's chunk before
 * is unread), pushes are held and handed over together when it catches up, so
 * a busy server writes fewer, larger chunks instead of one per event. `room()`
 * resolves when the client has taken everything (catch-up reads the next page
 * only then); `push` closes the stream once `maxQueued` events are held.
 */
export class SseWriter implements PushBody {
  readonly kind = "push";
  #closed = false;
  #waiting: (() => void) | undefined;
  readonly #onClose: () => void;
  readonly #maxQueued: number;
  // Not handed over yet (the first text, or pushes while the client is behind): the bytes and how many events they carry.
  #held: Uint8Array[] = [];
  #heldBytes = 0;
  #heldEvents = 0;
  // The consumer takes bytes now: the stream asked for a chunk, or the node:http response has room.
  #ready = false;
  #controller: ReadableStreamDefaultController<Uint8Array> | undefined;
  #target: PushTarget | undefined;
  // The client went away: nothing is written or ended any more.
  #gone = false;

  constructor(first: string, maxQueued: number, onClose: () => void) {
    this.#maxQueued = maxQueued;
    this.#onClose = onClose;
    this.#hold(encoder.encode(first), 0);
  }

  get closed(): boolean {
    return this.#closed;
  }

  /** The Fetch API's view: one chunk per pull (highWaterMark 0), the held bytes as one chunk. */
  stream(): ReadableStream<Uint8Array> {
    return new ReadableStream<Uint8Array>(
      {
        start: (controller) => {
          this.#controller = controller;
          if (this.#closed) this.#endConsumer();
        },
        pull: () => this.#caughtUp(),
        cancel: () => {
          this.#gone = true;
          this.close();
        },
      },
      { highWaterMark: 0 },
    );
  }

  /** toNodeListener's view: pushes are written to `target` while it takes them. */
  attach(target: PushTarget): PushEvents {
    this.#target = target;
    if (this.#closed) this.#endConsumer();
    else this.#caughtUp();
    return {
      drained: () => {
        if (!this.#closed) this.#caughtUp();
      },
      gone: () => {
        this.#gone = true;
        this.close();
      },
    };
  }

  cancel(): Promise<void> {
    this.close();
    return Promise.resolve();
  }

  /**
   * Sends SSE text (or its bytes, which may be shared with other streams and
   * are never changed) holding `events` events; false (and the stream closed)
   * when the client has left more than `maxQueued` events untaken.
   */
  push(text: string | Uint8Array, events = 1): boolean {
    if (this.#closed) return false;
    const bytes = typeof text === "string" ? encoder.encode(text) : text;
    if (this.#ready && this.#held.length === 0) {
      this.#hand([bytes], bytes.byteLength);
      return true;
    }
    if (this.#heldEvents + events > this.#maxQueued) {
      // Too slow: what is held is dropped (the client resumes from its last id).
      this.#dropHeld();
      this.close();
      return false;
    }
    this.#hold(bytes, events);
    return true;
  }

  /** Resolves when the client has taken everything sent (or the stream closed). */
  room(): Promise<void> {
    if (this.#closed || (this.#ready && this.#held.length === 0)) return Promise.resolve();
    return new Promise((resolve) => {
      const previous = this.#waiting;
      this.#waiting = () => {
        previous?.();
        resolve();
      };
    });
  }

  /** Ends the stream (idempotent) after what is held, and tells the owner once. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#endConsumer();
    this.#wake();
    this.#onClose();
  }

  #hold(bytes: Uint8Array, events: number): void {
    this.#held.push(bytes);
    this.#heldBytes += bytes.byteLength;
    this.#heldEvents += events;
  }

  #dropHeld(): void {
    this.#held = [];
    this.#heldBytes = 0;
    this.#heldEvents = 0;
  }

  /** The consumer takes bytes again: the held ones go at once, else the next push does. */
  #caughtUp(): void {
    if (this.#held.length > 0) {
      const held = this.#held;
      const total = this.#heldBytes;
      this.#dropHeld();
      this.#hand(held, total);
      if (!this.#ready) return;
    }
    this.#ready = true;
    this.#wake();
  }

  /** Hands bytes to the consumer (which has asked for them). */
  #hand(chunks: Uint8Array[], total: number): void {
    const target = this.#target;
    if (target !== undefined) {
      this.#ready = target.write(chunks);
      return;
    }
    this.#ready = false;
    this.#controller?.enqueue(concat(chunks, total));
  }

  /** Hands over what is held (unless the client went away) and ends the consumer's side. */
  #endConsumer(): void {
    if (this.#gone) return;
    const target = this.#target;
    const controller = this.#controller;
    if (target === undefined && controller === undefined) return; // ended when stream() or attach() comes
    const held = this.#held;
    const total = this.#heldBytes;
    this.#dropHeld();
    if (target !== undefined) {
      if (held.length > 0) target.write(held);
      target.end();
      return;
    }
    try {
      if (held.length > 0) controller!.enqueue(concat(held, total));
      controller!.close();
    } catch {
      // Already closed or errored by the consumer's cancel: nothing left to end.
    }
  }

  #wake(): void {
    const w = this.#waiting;
    this.#waiting = undefined;
    w?.();
  }
}

const encoder = new TextEncoder();

/** The heartbeat comment, its bytes made once for every stream. */
export const HEARTBEAT = encoder.encode(": heartbeat\n\n");

/** The reply of an event stream (the headers of every SSE route), its body pushed by `writer`. */
export function eventStreamReply(writer: SseWriter): Reply {
  return sseResponse(writer);
}

/**
 * One timer for many streams instead of a setInterval each: calls every
 * member once per `periodMs`, the members dealt round the `slots` ticks of the
 * period (1,000 streams' re-checks are 100 per tick, not 1,000 at once). A
 * member's first call comes within one period of joining, and each later one
 * one period after the one before. The timer runs (unref'd) while there are
 * members.
 */
export class StreamTicker {
  readonly #slots: Set<() => void>[];
  #deal = 0;
  #turn = 0;
  #members = 0;
  #timer: ReturnType<typeof setInterval> | undefined;

  constructor(
    readonly periodMs: number,
    slots = 10,
  ) {
    this.#slots = Array.from({ length: Math.max(1, Math.min(slots, Math.floor(periodMs))) }, () => new Set());
  }

  /** Adds `fn`; the function returned takes it off (idempotent). */
  add(fn: () => void): () => void {
    const slot = this.#slots[this.#deal]!;
    this.#deal = (this.#deal + 1) % this.#slots.length;
    slot.add(fn);
    this.#members++;
    if (this.#timer === undefined) {
      this.#timer = setInterval(() => this.#tick(), this.periodMs / this.#slots.length);
      (this.#timer as { unref?: () => void }).unref?.();
    }
    return () => {
      if (!slot.delete(fn)) return;
      if (--this.#members === 0 && this.#timer !== undefined) {
        clearInterval(this.#timer);
        this.#timer = undefined;
      }
    };
  }

  #tick(): void {
    const slot = this.#slots[this.#turn]!;
    this.#turn = (this.#turn + 1) % this.#slots.length;
    for (const fn of slot) fn();
  }
}

const tickers = new Map<number, StreamTicker>();

/** The ticker of a period, shared by every stream of the process that uses that period. */
export function streamTicker(periodMs: number): StreamTicker {
  let t = tickers.get(periodMs);
  if (t === undefined) {
    t = new StreamTicker(periodMs);
    tickers.set(periodMs, t);
  }
  return t;
}
