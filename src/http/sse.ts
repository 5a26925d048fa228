import { MnemeError } from "../model/errors.js";
import type { SystemEvent, SystemEventGap, SystemEventProducer } from "../runtime/system-events.js";
import type { InboundRequest, PushBody, Reply } from "./exchange.js";
import type { ConnectionGauge } from "./limits.js";

/** What a system-event stream shows and where it resumes. */
export interface StreamSelection {
  /** Events of this tenant and system-wide ones (which carry no tenant). */
  readonly tenantUuid: string;
  /** Every tenant's events (the URL's `?allTenants=true`). */
  readonly allTenants: boolean;
  /**
   * Replay buffered events after this id first (Last-Event-ID). A string: what
   * the client sent is not an id (not a non-negative integer); the stream
   * starts with a gap (reason `unknown-id`) and replays everything buffered.
   */
  readonly lastEventId: number | string | undefined;
}

/** Limits and timing of one stream. */
export interface StreamLimits {
  readonly heartbeatMs: number;
  readonly maxQueuedEvents: number;
  readonly retryMs: number;
}

const encoder = new TextEncoder();

/** One event in SSE framing: `id:` is the system event's id, `data:` the event as JSON (one line). */
export function formatSseEvent(e: SystemEvent): string {
  return `id: ${e.id}\ndata: ${JSON.stringify(e)}\n\n`;
}

/**
 * The notice that events may be missing: `event: gap`, data `{ lastEventId, reason }`,
 * and as `id:` the id the replay continues after, so a reconnect after it does not
 * report the same gap again.
 */
export function formatSseGap(gap: Omit<SystemEventGap, "lastEventId"> & { readonly lastEventId: number | string }): string {
  return `event: gap\nid: ${gap.continuesAfter}\ndata: ${JSON.stringify({ lastEventId: gap.lastEventId, reason: gap.reason })}\n\n`;
}

/** The longest unreadable Last-Event-ID a gap repeats back to the client. */
const MAX_ECHOED_ID = 64;

/**
 * The `Last-Event-ID` header, else the `lastEventId` query parameter (an
 * EventSource cannot set headers on its first connection): a number when it
 * is a non-negative integer, else the text sent (at most 64 characters).
 * Never an error: a browser's EventSource gives up for good on a 4xx, so an
 * id that cannot be continued starts the stream with a gap instead.
 */
export function lastEventIdOf(request: Pick<InboundRequest, "headers" | "searchParams">): number | string | undefined {
  const raw = request.headers.get("last-event-id") ?? request.searchParams.get("lastEventId");
  if (raw === null || raw.trim() === "") return undefined;
  const t = raw.trim();
  const n = Number(t);
  return /^\d+$/.test(t) && Number.isSafeInteger(n) ? n : t.slice(0, MAX_ECHOED_ID);
}

/**
 * Opens a `text/event-stream` reply over the system-event producer. A
 * resume that cannot continue exactly starts with `event: gap`; a stream opened
 * without a Last-Event-ID starts with an `id:` line (the producer's last id), so
 * the client's first reconnect resumes exactly even before any event came. The
 * stream ends (and its connection slot is released) when the client aborts or
 * cancels, when the producer stops (facade.stop()), or when the client stops
 * reading and `maxQueuedEvents` pile up; the client then resumes with Last-Event-ID.
 * Throws SSE_PRODUCER_NOT_RUNNING or SSE_CONNECTION_LIMIT before anything is sent.
 */
export function openSystemEventStream(
  producer: SystemEventProducer,
  signal: AbortSignal,
  selection: StreamSelection,
  gauge: ConnectionGauge,
  limits: StreamLimits,
): Reply {
  if (!producer.running) throw notRunning();
  const release = gauge.tryAcquire();
  if (release === undefined) {
    throw new MnemeError("SSE_CONNECTION_LIMIT", `too many open event streams (the limit is ${gauge.max}); retry later`);
  }
  let closed = false;
  let unsubscribe: (() => void) | undefined;
  let heartbeat: ReturnType<typeof setInterval> | undefined;
  let controllerRef: ReadableStreamDefaultController<Uint8Array> | undefined;

  const close = () => {
    if (closed) return;
    closed = true;
    if (heartbeat !== undefined) clearInterval(heartbeat);
    signal.removeEventListener("abort", close);
    unsubscribe?.();
    release();
    try {
      controllerRef?.close();
    } catch {
      // Already closed or errored by the consumer's cancel: nothing left to end.
    }
  };

  const send = (text: string) => {
    if (closed || controllerRef === undefined) return;
    // desiredSize goes negative as chunks queue unread; past the bound the client is too slow.
    if ((controllerRef.desiredSize ?? 0) <= -limits.maxQueuedEvents) {
      close();
      return;
    }
    controllerRef.enqueue(encoder.encode(text));
  };

  const stream = new ReadableStream<Uint8Array>(
    {
      start(controller) {
        controllerRef = controller;
        controller.enqueue(encoder.encode(`retry: ${limits.retryMs}\n: connected\n\n`));
      },
      cancel() {
        close();
      },
    },
    { highWaterMark: 1 },
  );

  if (signal.aborted) {
    close();
    return sseResponse(stream);
  }
  signal.addEventListener("abort", close, { once: true });
  try {
    unsubscribe = subscribeSelection(producer, selection, send, close);
  } catch (e) {
    close();
    throw e;
  }
  if (closed) {
    unsubscribe();
    return sseResponse(stream);
  }
  heartbeat = setInterval(() => send(": heartbeat\n\n"), limits.heartbeatMs);
  (heartbeat as { unref?: () => void }).unref?.();
  return sseResponse(stream);
}

/**
 * Subscribes `send` to the producer's events of the selection, from where the
 * client resumes. No publish can come between reading the last id and
 * subscribing (both synchronous).
 */
function subscribeSelection(
  producer: SystemEventProducer,
  selection: StreamSelection,
  send: (text: string) => void,
  close: () => void,
): () => void {
  const resume = selection.lastEventId;
  if (resume === undefined) send(`id: ${producer.lastEventId}\n\n`);
  // Not an id at all: told as a gap, then everything buffered follows (as after any other gap).
  const resumeAfter = typeof resume === "string" ? producer.replayStart : resume;
  if (typeof resume === "string") send(formatSseGap({ lastEventId: resume, reason: "unknown-id", continuesAfter: producer.replayStart }));
  return producer.subscribe(
    (e) => {
      if (!selection.allTenants && e.tenantUuid !== undefined && e.tenantUuid !== selection.tenantUuid) return;
      send(formatSseEvent(e));
    },
    {
      ...(resumeAfter === undefined ? {} : { lastEventId: resumeAfter, onGap: (gap: SystemEventGap) => send(formatSseGap(gap)) }),
      onClose: () => close(),
    },
  );
}

/** A 200 text/event-stream reply of `stream`, not cached nor buffered by proxies. */
export function sseResponse(stream: ReadableStream<Uint8Array> | PushBody): Reply {
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

function notRunning(): MnemeError {
  return new MnemeError(
    "SSE_PRODUCER_NOT_RUNNING",
    "the system-event producer is not running: start it with runtime.systemEvents.start() or createFacade({ systemEvents: true })",
  );
}
