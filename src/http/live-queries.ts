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
import type { SystemEvent } from "../runtime/system-events.js";
import { depthExceeds } from "./body.js";
import type { Reply } from "./exchange.js";
import { guardBy, type HttpRoute, type RouteContext } from "./route.js";
import { ListQueries } from "../runtime/runtime-domain.js";
import { currentRequestContext, eventStreamReply, HEARTBEAT, SseWriter, streamTicker } from "./stream-access.js";

/** One subscription to a live query: a stream of its own, or one query of a set sharing a stream. */
interface LiveSubscriber {
  readonly route: RouteContext;
  /** The result text it was sent last: a new evaluation is sent only when it differs. */
  sent: string;
  /** True once it ended (its stream closed, or it failed). */
  readonly closed: boolean;
  /**
   * Sends a result: its JSON text, and `frame`, the `data:` frame's bytes a
   * subscriber with a stream of its own writes (made once per evaluation for
   * the whole group).
   */
  send(text: string, frame: () => Uint8Array): void;
  /** Sends `event: error` with the code and message and ends the subscription. */
  fail(e: unknown): void;
}

/** The subscribers of one query, payload and scope, evaluated together. */
class LiveGroup {
  readonly subscribers = new Set<LiveSubscriber>();
  #running = false;
  #again = false;
  /** When the last evaluation started (performance.now()), for `minIntervalMs`. */
  #lastRun = Number.NEGATIVE_INFINITY;
  /** The `everyMs` timer, set after each evaluation while the group has subscribers. */
  #timer: ReturnType<typeof setTimeout> | undefined;
  /** The `minIntervalMs` wait under way, resolved early by close(). */
  #wait: { timer: ReturnType<typeof setTimeout>; done: () => void } | undefined;

  constructor(
    readonly key: string,
    readonly type: QueryType<any, any>,
    readonly settings: LiveQuerySettings,
    readonly payload: Record<string, unknown>,
    readonly tenantUuid: string,
    readonly facade: Facade,
  ) {}

  /**
   * Whether a committed batch may change the result: a readmodel it reads,
   * events of its tenant or of none (of any tenant with `allTenants`).
   */
  touchedBy(batch: ReadmodelBatch): boolean {
    const names = this.settings.readmodels;
    if (names !== undefined && !names.includes(batch.eventHandlerName)) return false;
    return this.#ofTenant(batch.tenantUuids);
  }

  /** Whether a system event of this instance may change the result: a kind it names, of its tenant or of none (any with `allTenants`). */
  touchedByEvent(event: SystemEvent): boolean {
    if (this.settings.systemEvents?.includes(event.kind) !== true) return false;
    return this.#ofTenant(new Set([event.tenantUuid ?? ""]));
  }

  #ofTenant(tenantUuids: ReadonlySet<string>): boolean {
    return this.settings.allTenants === true || tenantUuids.has(this.tenantUuid) || tenantUuids.has("");
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

  /** The group has no subscriber left: its timers stop. */
  close(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    if (this.#wait !== undefined) {
      clearTimeout(this.#wait.timer);
      this.#wait.done();
    }
  }

  async #loop(): Promise<void> {
    try {
      do {
        this.#again = false;
        await this.#spaced();
        if (this.subscribers.size === 0) return;
        clearTimeout(this.#timer);
        this.#lastRun = performance.now();
        await this.#evaluate();
      } while (this.#again && this.subscribers.size > 0);
    } finally {
      this.#running = false;
      this.#rearm();
    }
  }

  /** Waits out `minIntervalMs` since the last evaluation; signals that come meanwhile are served by the run that follows. */
  async #spaced(): Promise<void> {
    const min = this.settings.minIntervalMs;
    if (min === undefined) return;
    const wait = this.#lastRun + min - performance.now();
    if (wait <= 0) return;
    await new Promise<void>((resolve) => {
      const timer = setTimeout(() => {
        this.#wait = undefined;
        resolve();
      }, wait);
      (timer as { unref?: () => void }).unref?.();
      this.#wait = {
        timer,
        done: () => {
          this.#wait = undefined;
          resolve();
        },
      };
    });
  }

  /** `everyMs`: the next run when no signal comes first. */
  #rearm(): void {
    const every = this.settings.everyMs;
    if (every === undefined || this.subscribers.size === 0) return;
    clearTimeout(this.#timer);
    this.#timer = setTimeout(() => this.schedule(), every);
    (this.#timer as { unref?: () => void }).unref?.();
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
      for (const [s] of allowed) s.fail(e);
      return;
    }
    // One frame's bytes for the whole group; each subscriber gets one write of them.
    let frame: Uint8Array | undefined;
    const bytes = () => (frame ??= encoder.encode(resultFrame(text)));
    for (const [s] of allowed) {
      if (s.closed || s.sent === text) continue;
      s.sent = text;
      s.send(text, bytes);
    }
  }

  async #recheck(s: LiveSubscriber): Promise<RequestContext | undefined> {
    if (s.closed) return undefined;
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
      s.fail(e);
      return undefined;
    }
  }
}

/** The `event: error` frame of a failure: its code and message (and the query's id in a set). */
function errorFrame(e: unknown, id?: string): string {
  const code = isMnemeError(e) ? e.code : "INTERNAL";
  const message = isMnemeError(e) ? e.message : "the live query failed";
  return `event: error\ndata: ${JSON.stringify(id === undefined ? { code, message } : { id, code, message })}\n\n`;
}

const encoder = new TextEncoder();

function resultFrame(text: string): string {
  return `data: ${text}\n\n`;
}

/**
 * The live queries of one facade: their groups, the one readmodel listener
 * and the one system-event subscription (while a group names system events)
 * that schedule them.
 */
export class LiveQueries {
  readonly #groups = new Map<string, LiveGroup>();
  #unlisten: (() => void) | undefined;
  #unsubscribe: (() => void) | undefined;

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
    if (settings.systemEvents !== undefined) this.#subscribeSystemEvents();
    group.schedule();
    const joined = group;
    return () => {
      joined.subscribers.delete(s);
      if (joined.subscribers.size === 0 && this.#groups.get(joined.key) === joined) {
        this.#groups.delete(joined.key);
        joined.close();
      }
      if (this.#groups.size === 0) {
        this.#unlisten?.();
        this.#unlisten = undefined;
        this.#unsubscribe?.();
        this.#unsubscribe = undefined;
      }
    };
  }

  /**
   * One subscription to this instance's system events, while the stream
   * runs (`createFacade({ systemEvents: true })`); without it such a query
   * runs again on batches (and `everyMs`) only.
   */
  #subscribeSystemEvents(): void {
    const producer = this.facade.systemEvents;
    if (this.#unsubscribe !== undefined || !producer.running) return;
    this.#unsubscribe = producer.subscribe(
      (event) => {
        for (const g of this.#groups.values()) if (g.touchedByEvent(event)) g.schedule();
      },
      { onClose: () => (this.#unsubscribe = undefined) },
    );
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

/** The live-query routes (added to the generic routes by buildRoutes): one query per stream, or a set sharing one. */
export function liveQueryRoutes(tenantPath: string): HttpRoute[] {
  return [
    {
      method: "GET",
      path: `${tenantPath}/queries/:domain/:name/live`,
      guard: (p) => ({ domain: p.domain!, name: p.name! }),
      session: true,
      run: (c) => openLiveQuery(c),
    },
    {
      method: "GET",
      path: `${tenantPath}/live-queries`,
      // Only the session this guard asks for counts here: each query's own permission decides, per query,
      // when the set opens and before each evaluation (Runtime.ListQueries itself is never checked).
      guard: guardBy(ListQueries),
      session: true,
      run: (c) => openLiveQuerySet(c),
    },
  ];
}

/** The most queries one set may hold. */
export const MAX_LIVE_SET = 32;
const SET_ID = /^[A-Za-z0-9_.-]{1,64}$/;

/** One query of a set, as `?queries=` names it. */
interface SetItem {
  readonly id: string;
  readonly domain: string;
  readonly name: string;
  readonly payload: Record<string, unknown>;
}

/** The `queries` parameter: a JSON array of 1..32 `{ id, domain, name, payload? }`, ids unique, within the body limits. */
export function liveSetOf(c: RouteContext): SetItem[] {
  const raw = c.request.searchParams.get("queries");
  const bad = (why: string) => new MnemeError("INVALID_REQUEST", `queries ${why}`);
  if (raw === null || raw.trim() === "") throw bad(`is missing: a JSON array of { id, domain, name, payload? }`);
  if (raw.length > c.options.maxBodyBytes)
    throw new MnemeError("PAYLOAD_TOO_LARGE", `queries is longer than ${c.options.maxBodyBytes} characters`);
  let value: unknown;
  try {
    value = JSON.parse(raw);
  } catch (e) {
    throw bad(`is not valid JSON: ${e instanceof Error ? e.message : String(e)}`);
  }
  if (!Array.isArray(value) || value.length === 0 || value.length > MAX_LIVE_SET)
    throw bad(`must be an array of 1 to ${MAX_LIVE_SET} queries`);
  if (depthExceeds(value, c.options.maxJsonDepth)) throw bad(`nests deeper than ${c.options.maxJsonDepth} levels`);
  const ids = new Set<string>();
  return value.map((v: unknown, i) => {
    const o = (typeof v === "object" && v !== null && !Array.isArray(v) ? v : {}) as Record<string, unknown>;
    const { id, domain, name, payload } = o;
    if (typeof id !== "string" || !SET_ID.test(id)) throw bad(`[${i}].id must be 1 to 64 letters, digits, "_", "." or "-"`);
    if (ids.has(id)) throw bad(`[${i}].id ${JSON.stringify(id)} is given twice`);
    ids.add(id);
    if (typeof domain !== "string" || domain === "" || typeof name !== "string" || name === "")
      throw bad(`[${i}] needs a domain and a name`);
    if (payload !== undefined && (typeof payload !== "object" || payload === null || Array.isArray(payload)))
      throw bad(`[${i}].payload must be a JSON object`);
    if (Object.keys(o).some((k) => !["id", "domain", "name", "payload"].includes(k)))
      throw bad(`[${i}] has a field other than id, domain, name, payload`);
    return { id, domain, name, payload: (payload ?? {}) as Record<string, unknown> };
  });
}

/** One query of an open set: its subscription on the set's stream. */
class SetSubscriber implements LiveSubscriber {
  #ended = false;
  leave: (() => void) | undefined;

  constructor(
    readonly id: string,
    readonly route: RouteContext,
    public sent: string,
    private readonly writer: SseWriter,
    private readonly onEnd: () => void,
  ) {}

  get closed(): boolean {
    return this.#ended || this.writer.closed;
  }

  send(text: string): void {
    this.writer.push(setResultFrame(this.id, text));
  }

  fail(e: unknown): void {
    if (this.#ended) return;
    this.#ended = true;
    this.writer.push(errorFrame(e, this.id));
    this.leave?.();
    this.onEnd();
  }
}

function setResultFrame(id: string, text: string): string {
  return `data: {"id":${JSON.stringify(id)},"result":${text}}\n\n`;
}

/**
 * `GET {t}/live-queries?queries=[{ id, domain, name, payload? }, ...]`: up to
 * 32 live queries on one stream (a browser holds few connections per origin
 * over HTTP/1.1: six in Chromium). Each query is answered and followed as on
 * its own route, with its own permission, tenant scope and group; its results
 * come as `data: {"id", "result"}`, its refusal or failure as `event: error`
 * with `{ id, code, message }`, which ends that query only. The stream ends
 * when every query of the set has ended.
 */
export async function openLiveQuerySet(c: RouteContext): Promise<Reply> {
  const items = liveSetOf(c);
  const firsts = await Promise.all(
    items.map(async (item) => {
      try {
        const type = c.facade.resolveQuery({ domain: item.domain, name: item.name });
        if (type.live === undefined)
          throw new MnemeError("INVALID_REQUEST", `${type.domain}.${type.name} is not a live query (define it with { live: true })`);
        const first = JSON.stringify((await c.facade.query(type, item.payload, { reqCtx: c.reqCtx })) ?? null);
        return { item, type, first, error: undefined };
      } catch (error) {
        return { item, type: undefined, first: "", error };
      }
    }),
  );
  const release = c.sseGauge.tryAcquire();
  if (release === undefined)
    throw new MnemeError("SSE_CONNECTION_LIMIT", `too many open event streams (the limit is ${c.sseGauge.max}); retry later`);
  const subscribers: SetSubscriber[] = [];
  let heartbeat: (() => void) | undefined;
  const onAbort = () => writer.close();
  let opening = "";
  for (const f of firsts) opening += f.error === undefined ? setResultFrame(f.item.id, f.first) : errorFrame(f.error, f.item.id);
  const writer = new SseWriter(`retry: ${c.options.sse.retryMs}\n: connected\n\n${opening}`, c.options.sse.maxQueuedEvents, () => {
    heartbeat?.();
    c.request.signal.removeEventListener("abort", onAbort);
    for (const s of subscribers) s.leave?.();
    release();
  });
  let open = firsts.filter((f) => f.error === undefined).length;
  // Ends the stream once the client has read what was sent (a close drops what it has not read yet).
  const end = () => void writer.room().then(() => writer.close());
  if (c.request.signal.aborted) {
    writer.close();
    return eventStreamReply(writer);
  }
  if (open === 0) {
    end();
    return eventStreamReply(writer);
  }
  c.request.signal.addEventListener("abort", onAbort, { once: true });
  heartbeat = streamTicker(c.options.sse.heartbeatMs).add(() => writer.push(HEARTBEAT));
  const registry = liveQueriesOf(c.facade);
  for (const f of firsts) {
    if (f.type === undefined) continue;
    const s = new SetSubscriber(f.item.id, c, f.first, writer, () => {
      // Nothing more can come once every query of the set has ended.
      if (--open === 0) end();
    });
    subscribers.push(s);
    s.leave = registry.join(f.type, f.item.payload, c.reqCtx, s);
  }
  return eventStreamReply(writer);
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
  leave = liveQueriesOf(c.facade).join(type, payload, c.reqCtx, {
    route: c,
    sent: first,
    get closed() {
      return writer.closed;
    },
    send: (_text, frame) => writer.push(frame()),
    fail: (e) => {
      writer.push(errorFrame(e));
      writer.close();
    },
  });
  return eventStreamReply(writer);
}
