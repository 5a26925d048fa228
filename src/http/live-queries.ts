/**
 * Live queries over HTTP: `GET {t}/queries/{domain}/{name}/live?payload=<json>`
 * answers a query declared `live` at once and again whenever a readmodel batch
 * commits that may change it (docs/http.md, "Live queries"). Subscribers with
 * the same query, payload and scope share one evaluation per batch.
 */
import type { Facade } from "../app/facade.js";
import { newUuid } from "../model/clock.js";
import { isMnemeError, MnemeError } from "../model/errors.js";
import type { LiveQuerySettings, QueryType } from "../model/tokens.js";
import type { RequestContext } from "../model/types.js";
import type { ReadmodelBatch } from "../readmodel/readmodel-commits.js";
import { depthExceeds } from "./body.js";
import type { Reply } from "./exchange.js";
import type { HttpRoute, RouteContext } from "./route.js";
import { currentRequestContext, eventStreamReply, HEARTBEAT, SseWriter, streamTicker } from "./stream-access.js";

/** One open live-query stream. */
interface LiveSubscriber {
  readonly writer: SseWriter;
  readonly route: RouteContext;
  /** The result text it was sent last: a new evaluation is sent only when it differs. */
  sent: string;
}

/** The subscribers of one query, payload and scope, evaluated together. */
class LiveGroup {
  readonly subscribers = new Set<LiveSubscriber>();
  #running = false;
  #again = false;

  constructor(
    readonly key: string,
    readonly type: QueryType<any, any>,
    readonly settings: LiveQuerySettings,
    readonly payload: Record<string, unknown>,
    readonly tenantUuid: string,
    readonly facade: Facade,
  ) {}

  /** Whether a committed batch may change the result: a readmodel it reads, events of its tenant or of none. */
  touchedBy(batch: ReadmodelBatch): boolean {
    const names = this.settings.readmodels;
    if (names !== undefined && !names.includes(batch.eventHandlerName)) return false;
    return batch.tenantUuids.has(this.tenantUuid) || batch.tenantUuids.has("");
  }

  /** Evaluates once more after the current evaluation (coalesced: a burst of batches costs at most two runs). */
  schedule(): void {
    if (this.#running) {
      this.#again = true;
      return;
    }
    this.#running = true;
    void this.#loop();
  }

  async #loop(): Promise<void> {
    try {
      do {
        this.#again = false;
        await this.#evaluate();
      } while (this.#again && this.subscribers.size > 0);
    } finally {
      this.#running = false;
    }
  }

  /**
   * Re-checks every subscriber (its session resolved again, the query's
   * permission with it) and ends those refused; runs the query once with a
   * subscriber's current context; sends the result to those that have not got it.
   */
  async #evaluate(): Promise<void> {
    const subs = [...this.subscribers];
    const contexts = await Promise.all(subs.map((s) => this.#recheck(s)));
    const allowed = subs.map((s, i) => [s, contexts[i]] as const).filter((x): x is [LiveSubscriber, RequestContext] => x[1] !== undefined);
    if (allowed.length === 0) return;
    let text: string;
    try {
      const result: unknown = await this.facade.query(this.type, this.payload, { reqCtx: allowed[0]![1] });
      text = JSON.stringify(result ?? null);
    } catch (e) {
      for (const [s] of allowed) endWith(s, e);
      return;
    }
    // One frame's bytes for the whole group; each subscriber gets one write of them.
    let frame: Uint8Array | undefined;
    for (const [s] of allowed) {
      if (s.writer.closed || s.sent === text) continue;
      s.sent = text;
      s.writer.push((frame ??= encoder.encode(resultFrame(text))));
    }
  }

  async #recheck(s: LiveSubscriber): Promise<RequestContext | undefined> {
    if (s.writer.closed) return undefined;
    try {
      const reqCtx = await currentRequestContext(s.route);
      await this.facade.permissions.check(reqCtx, {
        queryUuid: newUuid(),
        domain: this.type.domain,
        name: this.type.name,
        payload: this.payload,
        reqCtx,
      });
      return reqCtx;
    } catch (e) {
      endWith(s, e);
      return undefined;
    }
  }
}

/** Ends a stream with `event: error` (the code and message) so the client knows why. */
function endWith(s: LiveSubscriber, e: unknown): void {
  const code = isMnemeError(e) ? e.code : "INTERNAL";
  const message = isMnemeError(e) ? e.message : "the live query failed";
  s.writer.push(`event: error\ndata: ${JSON.stringify({ code, message })}\n\n`);
  s.writer.close();
}

const encoder = new TextEncoder();

function resultFrame(text: string): string {
  return `data: ${text}\n\n`;
}

/** The live queries of one facade: their groups, and the one readmodel listener that schedules them. */
export class LiveQueries {
  readonly #groups = new Map<string, LiveGroup>();
  #unlisten: (() => void) | undefined;

  constructor(readonly facade: Facade) {}

  /** Groups open now (for tests and metrics). */
  get groupCount(): number {
    return this.#groups.size;
  }

  /** Adds a subscriber whose first result was sent; the group evaluates once more, so a batch committed meanwhile is not missed. */
  join(type: QueryType<any, any>, payload: Record<string, unknown>, reqCtx: RequestContext, s: LiveSubscriber): () => void {
    const settings = type.live!;
    const tenantUuid = reqCtx.targetTenantUuid ?? "";
    const key = groupKey(type, payload, settings, reqCtx);
    let group = this.#groups.get(key);
    if (group === undefined) {
      group = new LiveGroup(key, type, settings, payload, tenantUuid, this.facade);
      this.#groups.set(key, group);
    }
    group.subscribers.add(s);
    this.#unlisten ??= this.facade.readmodelCommits.listen((batch) => {
      for (const g of this.#groups.values()) if (g.touchedBy(batch)) g.schedule();
    });
    group.schedule();
    const joined = group;
    return () => {
      joined.subscribers.delete(s);
      if (joined.subscribers.size === 0 && this.#groups.get(joined.key) === joined) this.#groups.delete(joined.key);
      if (this.#groups.size === 0) {
        this.#unlisten?.();
        this.#unlisten = undefined;
      }
    };
  }
}

/**
 * Who shares an evaluation: the query, the payload (keys sorted), the target
 * tenant and, unless the query is declared `share: "tenant"`, the sender.
 */
function groupKey(type: QueryType<any, any>, payload: unknown, settings: LiveQuerySettings, reqCtx: RequestContext): string {
  const scope =
    settings.share === "tenant"
      ? [reqCtx.targetTenantUuid ?? ""]
      : [
          reqCtx.targetTenantUuid ?? "",
          reqCtx.senderTenantUuid ?? "",
          reqCtx.senderAccountUuid ?? "",
          reqCtx.senderIdentityUuid ?? "",
          reqCtx.senderService ?? "",
        ];
  return JSON.stringify([type.domain, type.name, canonicalJson(payload), ...scope]);
}

/** JSON with object keys sorted, so `{a,b}` and `{b,a}` share a group. */
export function canonicalJson(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonicalJson).join(",")}]`;
  if (typeof v === "object" && v !== null) {
    const o = v as Record<string, unknown>;
    return `{${Object.keys(o)
      .sort()
      .filter((k) => o[k] !== undefined)
      .map((k) => `${JSON.stringify(k)}:${canonicalJson(o[k])}`)
      .join(",")}}`;
  }
  return JSON.stringify(v);
}

const registries = new WeakMap<Facade, LiveQueries>();

/** The live queries of a facade, shared by every handler serving it. */
export function liveQueriesOf(facade: Facade): LiveQueries {
  let r = registries.get(facade);
  if (r === undefined) {
    r = new LiveQueries(facade);
    registries.set(facade, r);
  }
  return r;
}

/** The `payload` query parameter: a JSON object (absent: `{}`), within the body limits. */
export function livePayloadOf(c: RouteContext): Record<string, unknown> {
  const raw = c.request.searchParams.get("payload");
  if (raw === null || raw.trim() === "") return {};
  if (raw.length > c.options.maxBodyBytes)
    throw new MnemeError("PAYLOAD_TOO_LARGE", `payload is longer than ${c.options.maxBodyBytes} characters`);
  let value: unknown;
  try {
    value = JSON.parse(raw);
  } catch (e) {
    throw new MnemeError("INVALID_REQUEST", `payload is not valid JSON: ${e instanceof Error ? e.message : String(e)}`);
  }
  if (typeof value !== "object" || value === null || Array.isArray(value))
    throw new MnemeError("INVALID_REQUEST", "payload must be a JSON object");
  if (depthExceeds(value, c.options.maxJsonDepth))
    throw new MnemeError("INVALID_REQUEST", `payload nests deeper than ${c.options.maxJsonDepth} levels`);
  return value as Record<string, unknown>;
}

/** The live-query route (added to the generic routes by buildRoutes). */
export function liveQueryRoutes(tenantPath: string): HttpRoute[] {
  return [
    {
      method: "GET",
      path: `${tenantPath}/queries/:domain/:name/live`,
      guard: (p) => ({ domain: p.domain!, name: p.name! }),
      session: true,
      run: (c) => openLiveQuery(c),
    },
  ];
}

/**
 * Answers the query (its permission check, validation and handler, as
 * `POST .../queries/...`) and opens the stream with that result; 400
 * INVALID_REQUEST for a query not declared live.
 */
export async function openLiveQuery(c: RouteContext): Promise<Reply> {
  const type = c.facade.resolveQuery({ domain: c.params.domain!, name: c.params.name! });
  if (type.live === undefined)
    throw new MnemeError("INVALID_REQUEST", `${type.domain}.${type.name} is not a live query (define it with { live: true })`);
  const payload = livePayloadOf(c);
  const first = JSON.stringify((await c.facade.query(type, payload, { reqCtx: c.reqCtx })) ?? null);
  const release = c.sseGauge.tryAcquire();
  if (release === undefined)
    throw new MnemeError("SSE_CONNECTION_LIMIT", `too many open event streams (the limit is ${c.sseGauge.max}); retry later`);
  let leave: (() => void) | undefined;
  let heartbeat: (() => void) | undefined;
  const onAbort = () => writer.close();
  const writer = new SseWriter(
    `retry: ${c.options.sse.retryMs}\n: connected\n\n${resultFrame(first)}`,
    c.options.sse.maxQueuedEvents,
    () => {
      heartbeat?.();
      c.request.signal.removeEventListener("abort", onAbort);
      leave?.();
      release();
    },
  );
  if (c.request.signal.aborted) {
    writer.close();
    return eventStreamReply(writer);
  }
  c.request.signal.addEventListener("abort", onAbort, { once: true });
  heartbeat = streamTicker(c.options.sse.heartbeatMs).add(() => writer.push(HEARTBEAT));
  leave = liveQueriesOf(c.facade).join(type, payload, c.reqCtx, { writer, route: c, sent: first });
  return eventStreamReply(writer);
}
