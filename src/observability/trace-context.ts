/**
 * W3C Trace Context (https://www.w3.org/TR/trace-context/): the `traceparent`
 * and `tracestate` values mneme reads from a request and stores with events.
 * Plain string work, no OpenTelemetry import: the HTTP adapter and the store
 * path use it whether or not @opentelemetry/api is installed.
 */

/** A parsed `traceparent`: ids in lowercase hex, flags as a number (bit 0: sampled). */
export interface TraceParent {
  readonly traceId: string;
  readonly spanId: string;
  readonly traceFlags: number;
}

const TRACEPARENT = /^([\da-f]{2})-([\da-f]{32})-([\da-f]{16})-([\da-f]{2})(-.*)?$/;
const ZERO_TRACE = "0".repeat(32);
const ZERO_SPAN = "0".repeat(16);

/** The longest `tracestate` kept; the specification lets a vendor drop longer ones (512 characters is its floor). */
export const TRACESTATE_MAX_LENGTH = 512;

/**
 * Parses a `traceparent` header value. Undefined for anything the
 * specification says to ignore: a malformed value, version ff, an all-zero
 * trace or span id, or version 00 with trailing fields.
 */
export function parseTraceParent(value: unknown): TraceParent | undefined {
  if (typeof value !== "string" || value.length > 512) return undefined;
  const m = TRACEPARENT.exec(value);
  if (m === null) return undefined;
  const [, version, traceId, spanId, flags, rest] = m;
  if (version === "ff" || (version === "00" && rest !== undefined)) return undefined;
  if (traceId === ZERO_TRACE || spanId === ZERO_SPAN) return undefined;
  return { traceId: traceId!, spanId: spanId!, traceFlags: parseInt(flags!, 16) };
}

/** The `traceparent` value (version 00) of a span. */
export function formatTraceParent(p: TraceParent): string {
  return `00-${p.traceId}-${p.spanId}-${(p.traceFlags & 0xff).toString(16).padStart(2, "0")}`;
}

/** A `tracestate` value worth passing on: a non-empty string of printable ASCII, at most TRACESTATE_MAX_LENGTH long. */
export function cleanTraceState(value: unknown): string | undefined {
  if (typeof value !== "string") return undefined;
  const v = value.trim();
  if (v === "" || v.length > TRACESTATE_MAX_LENGTH || !/^[\x20-\x7e]*$/.test(v)) return undefined;
  return v;
}
