import { MnemeError } from "../model/errors.js";
import type { RequestContext } from "../model/types.js";
import { cleanTraceState, parseTraceParent } from "../observability/trace-context.js";
import type { HeaderReader, InboundRequest } from "./exchange.js";

const TRACEPARENT = /^[\da-f]{2}-([\da-f]{32})-[\da-f]{16}-[\da-f]{2}$/;

/**
 * CSRF: a browser attaches the session cookie to a request another site
 * makes, so a state-changing request authenticated by the cookie alone must
 * come from the request's own origin or an allowed one: its `Origin`, else
 * its `Referer`'s origin; neither is refused too.
 */
export function checkOrigin(request: InboundRequest, allowedOrigins: ReadonlySet<string>): void {
  const origin = request.headers.get("origin");
  const referer = origin === null ? request.headers.get("referer") : null;
  const claimed = origin ?? referer;
  if (claimed === null) {
    throw new MnemeError(
      "CSRF",
      "a state-changing request authenticated by the session cookie needs an Origin (or Referer) header; send the token in `Authorization: Bearer` instead, or from a browser",
    );
  }
  let from: string | undefined;
  try {
    const u = new URL(claimed);
    if (u.protocol === "http:" || u.protocol === "https:") from = u.origin;
  } catch {
    from = undefined; // "null" (an opaque origin) or garbage
  }
  if (from === request.origin || (from !== undefined && allowedOrigins.has(from))) return;
  const what = origin !== null ? "Origin" : "Referer";
  throw new MnemeError(
    "CSRF",
    `cross-site request refused: the ${what} ${JSON.stringify(claimed.slice(0, 200))} is neither this server's origin nor one of createHttpHandler's allowedOrigins, and the request is authenticated by the session cookie alone`,
  );
}

/**
 * The request context of one request: the resolved sender, the path's tenant
 * as target, the W3C trace id, and on command routes the optimistic-concurrency
 * headers X-Target-Aggregate-Uuid / X-Target-Aggregate-Version.
 */
export function requestContext(
  headers: HeaderReader,
  sender: RequestContext,
  params: Readonly<Record<string, string>>,
  concurrency: boolean,
): RequestContext {
  const ctx: RequestContext = { ...sender };
  if (params.tenantUuid !== undefined) ctx.targetTenantUuid = params.tenantUuid;
  const traceHeader = headers.get("traceparent");
  if (traceHeader !== null) {
    const traceparent = traceHeader.trim();
    const trace = TRACEPARENT.exec(traceparent);
    if (trace !== null) ctx.traceId = trace[1]!;
    // The caller's span: the parent of this request's mneme.dispatch / mneme.query span (docs/observability.md).
    if (parseTraceParent(traceparent) !== undefined) {
      ctx.traceparent = traceparent;
      const state = cleanTraceState(headers.get("tracestate"));
      if (state !== undefined) ctx.tracestate = state;
    }
  }
  if (concurrency) {
    const agg = headers.get("x-target-aggregate-uuid");
    const version = headers.get("x-target-aggregate-version");
    if (agg !== null) {
      if (agg.trim() === "" || agg.length > 200) throw new MnemeError("INVALID_REQUEST", "X-Target-Aggregate-Uuid must be a non-empty id");
      ctx.targetAggregateUuid = agg.trim();
    }
    if (version !== null) {
      const n = Number(version.trim());
      if (!/^\d+$/.test(version.trim()) || !Number.isSafeInteger(n))
        throw new MnemeError("INVALID_REQUEST", "X-Target-Aggregate-Version must be a non-negative integer");
      ctx.targetAggregateVersion = n;
    }
  }
  return ctx;
}
