import { MnemeError } from "../model/errors.js";
import type { SystemEvent, SystemEventGap, SystemEventProducer } from "../runtime/system-events.js";
import type { InboundRequest, Reply } from "./exchange.js";
import type { ConnectionGauge } from "./limits.js";

/** What a system-event stream shows and where it resumes. */
export interface StreamSelection {
  /** Events of this tenant and system-wide ones (which carry no tenant). */
  readonly tenantUuid: string;
  /** Every tenant's events (the URL's `?allTenants=true`). */
  readonly allTenants: boolean;
  /** Replay buffered events after this id first (Last-Event-ID). */
  readonly lastEventId: number | undefined;
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
export function formatSseGap(gap: SystemEventGap): string {
  return `event: gap\nid: ${gap.continuesAfter}\ndata: ${JSON.stringify({ lastEventId: gap.lastEventId, reason: gap.reason })}\n\n`;
}

/**
 * The `Last-Event-ID` header, else the `lastEventId` query parameter (an
 * EventSource cannot set headers on its first connection). INVALID_REQUEST
 * when it is not a non-negative integer.
 */
export function lastEventIdOf(request: Pick<InboundRequest, "headers" | "searchParams">): number | undefined {
  const raw = request.headers.get("last-event-id") ?? request.searchParams.get("lastEventId");
  if (raw === null || raw.trim() === "") return undefined;
  const t = raw.trim();
  const n = Number(t);
  if (!/^\d+$/.test(t) || !Number.isSafeInteger(n))
    throw new MnemeError("INVALID_REQUEST", `Last-Event-ID must be a non-negative integer (got ${JSON.stringify(t.slice(0, 40))})`);
  return n;
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
  // No publish can come between reading the last id and subscribing (both synchronous).
  if (selection.lastEventId === undefined) send(`id: ${producer.lastEventId}\n\n`);
  try {
    unsubscribe = producer.subscribe(
      (e) => {
        if (!selection.allTenants && e.tenantUuid !== undefined && e.tenantUuid !== selection.tenantUuid) return;
        send(formatSseEvent(e));
      },
      {
        ...(selection.lastEventId === undefined
          ? {}
          : { lastEventId: selection.lastEventId, onGap: (gap: SystemEventGap) => send(formatSseGap(gap)) }),
        onClose: () => close(),
      },
    );
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

function sseResponse(stream: ReadableStream<Uint8Array>): Reply {
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
