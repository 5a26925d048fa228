/**
 * Event subscriptions over HTTP: `GET {t}/events/stream?types=Domain.Event,...`
 * streams the stored events of the chosen types (docs/http.md, "Event
 * subscriptions"): tenant-scoped, permissioned per event type, resumable from a
 * position, catch-up from the store then live from the facade's EventTail.
 */
import type { Facade } from "../app/facade.js";
import { newUuid } from "../model/clock.js";
import { MnemeError } from "../model/errors.js";
import { authorized, newPermission, permissionLevelOf, type PermissionFunc } from "../model/permission.js";
import type { EventType } from "../model/tokens.js";
import type { Event, RequestContext } from "../model/types.js";
import type { ReadAllOptions } from "../store/event-repository.js";
import { EventTail, type TailSubscriber } from "./event-tail.js";
import type { Reply } from "./exchange.js";
import { boolParam, intParam } from "./responses.js";
import { guardBy, type HttpRoute, type RouteContext } from "./route.js";
import { SubscribeEvents } from "../runtime/runtime-domain.js";
import { lastEventIdOf } from "./sse.js";
import { currentRequestContext, eventStreamReply, HEARTBEAT, SseWriter, streamTicker } from "./stream-access.js";

/** The permission type that guards subscribing to an event type: `Subscribe.<EventName>` in the event's domain. */
export function subscriptionPermissionType(event: Pick<EventType, "name">): string {
  return `Subscribe.${event.name}`;
}

/**
 * Makes event types subscribable over HTTP: registers one permission per type,
 * `<Domain>.Subscribe.<EventName>`, in the facade's permission registry (listed
 * by the Runtime like every other). Default `authorized` (with the default
 * authorizer: an identity whose groups hold `Todo.Subscribe.TodoCreated`,
 * `Todo.*` or `*`); a custom function may decide instead. A type never made
 * subscribable cannot be subscribed to by anyone. `anonymous` is refused
 * (INVALID_PERMISSION): a subscription always needs a session.
 * @example
 * allowEventSubscriptions(facade, [TodoCreated, TodoCompleted]);
 */
export function allowEventSubscriptions(
  facade: Pick<Facade, "permissions">,
  types: readonly EventType<any>[],
  opts: { readonly permission?: PermissionFunc } = {},
): void {
  const permission = opts.permission ?? authorized;
  if (permissionLevelOf(permission) === "Anonymous")
    throw new MnemeError("INVALID_PERMISSION", "an event subscription needs a session: anonymous is not a subscription permission");
  for (const t of types) {
    if (t?.kind !== "event") throw new MnemeError("INVALID_PERMISSION", "allowEventSubscriptions takes event types");
    facade.permissions.register(
      newPermission(t.domain, subscriptionPermissionType(t), `subscribe to ${t.path} events over HTTP`, permission),
    );
  }
}

/** What one subscription streams. */
export interface EventSelection {
  readonly tenantUuid: string;
  readonly allTenants: boolean;
  readonly types: readonly EventType[];
  /**
   * Where the stream continues: after this position (Last-Event-ID, else
   * `?after=`); a string when the id sent is not a position (a gap follows);
   * undefined: live from now.
   */
  readonly resume: number | string | undefined;
}

/**
 * Which stored events a subscription shows: its tenant (unless all tenants)
 * and its types. The one place a further filter goes (the tags of an event,
 * once events carry them: a `tags` field here, matched in `matches` and, where
 * the store can, narrowed in `readAllOptions`).
 */
export class EventFilter {
  readonly #paths: ReadonlySet<string>;
  /** Equal for equal selections (tenant scope and types): their streams share the bytes of a page. */
  readonly key: string;

  constructor(readonly selection: EventSelection) {
    this.#paths = new Set(selection.types.map((t) => t.path));
    this.key = JSON.stringify([selection.allTenants ? "*" : selection.tenantUuid, [...this.#paths].sort()]);
  }

  matches(e: Event): boolean {
    if (!this.selection.allTenants && e.tenantUuid !== this.selection.tenantUuid) return false;
    return this.#paths.has(`${e.domain}.${e.name}`);
  }

  /** The store-side narrowing of a catch-up read (matches() still decides). */
  readAllOptions(): ReadAllOptions {
    return this.selection.allTenants
      ? { eventPaths: [...this.#paths] }
      : { eventPaths: [...this.#paths], tenantUuid: this.selection.tenantUuid };
  }
}

/** How often an open subscription re-checks its session and permissions (a revoked session ends it within this). */
export const SUBSCRIPTION_RECHECK_MS = 5000;
const MAX_TYPES = 100;
const CATCH_UP_PAGE = 500;

/** The event an SSE `data:` line carries: the stored event as readers get it, without the request context. */
export function subscribedEvent(e: Event): Record<string, unknown> {
  const out: Record<string, unknown> = {
    position: e.position,
    eventUuid: e.eventUuid,
    domain: e.domain,
    name: e.name,
    aggregateUuid: e.aggregateUuid,
    version: e.version,
    tenantUuid: e.tenantUuid,
    createdAt: e.createdAt,
    payload: e.payload,
  };
  if (e.eventVersion !== undefined) out.eventVersion = e.eventVersion;
  if (e.commandUuid !== undefined) out.commandUuid = e.commandUuid;
  if (e.causationId !== undefined) out.causationId = e.causationId;
  if (e.correlationId !== undefined) out.correlationId = e.correlationId;
  return out;
}

// One tail per facade, shared by every handler serving it (several handlers may serve one facade).
const tails = new WeakMap<Facade, EventTail>();

function tailOf(facade: Facade): EventTail {
  let tail = tails.get(facade);
  if (tail === undefined) {
    tail = new EventTail(facade.eventRepository);
    tails.set(facade, tail);
  }
  return tail;
}

/** The subscription route (added to the generic routes by buildRoutes). */
export function eventStreamRoutes(tenantPath: string): HttpRoute[] {
  return [
    {
      method: "GET",
      path: `${tenantPath}/events/stream`,
      // Runtime.SubscribeEvents (authenticated) first; each type's own permission in run (checkSubscription).
      guard: guardBy(SubscribeEvents),
      session: true,
      run: async (c) => {
        const selection = selectionOf(c);
        await checkSubscription(c.facade, c.reqCtx, selection);
        return openEventSubscription(c, selection, tailOf(c.facade));
      },
    },
  ];
}

/** The selection of a request: `types` (required), `allTenants`, and where to resume. */
export function selectionOf(c: RouteContext): EventSelection {
  const q = c.request.searchParams;
  const raw = q.get("types");
  if (raw === null || raw.trim() === "")
    throw new MnemeError("INVALID_REQUEST", "types is required: a comma-separated list of event paths (Domain.Event)");
  const paths = [
    ...new Set(
      raw
        .split(",")
        .map((p) => p.trim())
        .filter((p) => p !== ""),
    ),
  ];
  if (paths.length === 0 || paths.length > MAX_TYPES)
    throw new MnemeError("INVALID_REQUEST", `types must name 1 to ${MAX_TYPES} event types`);
  const types = paths.map((p) => {
    const t = c.facade.eventType(p);
    if (t === undefined)
      throw new MnemeError("INVALID_REQUEST", `types: ${JSON.stringify(p.slice(0, 100))} is not a registered event type`);
    return t;
  });
  const allTenants = boolParam("allTenants", q.get("allTenants")) ?? false;
  // An EventSource's reconnect sends Last-Event-ID; the URL's `after` is the first connection's start.
  const header = c.request.headers.get("last-event-id");
  const after = intParam("after", q.get("after") ?? undefined, 0, Number.MAX_SAFE_INTEGER);
  const resume = header !== null && header.trim() !== "" ? lastEventIdOf(c.request) : (after ?? lastEventIdOf(c.request));
  return { tenantUuid: c.params.tenantUuid!, allTenants, types, resume };
}

/**
 * PERMISSION_DENIED unless the caller passes `Runtime.SubscribeEvents`
 * (`{ types, allTenants }`) and may subscribe to every type of the selection (`<Domain>.Subscribe.<Event>`, with `{ eventType, allTenants }` as
 * the envelope's payload) and, for `allTenants`, is granted it as an
 * administrator (as the Runtime lists' `allTenants`).
 */
export async function checkSubscription(facade: Facade, reqCtx: RequestContext, selection: EventSelection): Promise<void> {
  await facade.permissions.check(reqCtx, {
    queryUuid: newUuid(),
    domain: SubscribeEvents.domain,
    name: SubscribeEvents.name,
    payload: { types: selection.types.map((t) => t.path), allTenants: selection.allTenants },
    reqCtx,
  });
  for (const t of selection.types) {
    const envelope = {
      queryUuid: newUuid(),
      domain: t.domain,
      name: subscriptionPermissionType(t),
      payload: { eventType: t.path, allTenants: selection.allTenants },
      reqCtx,
    };
    await facade.permissions.check(reqCtx, envelope);
    if (selection.allTenants) await facade.permissions.checkAdministrator(reqCtx, envelope);
  }
}

/**
 * Opens the stream: `retry:`, then (resuming) the stored events after the
 * position read page by page as the client reads them, then live events from
 * the tail. The seam: the catch-up reads up to the tail's position and joins
 * the tail only when it has reached it (synchronously), so nothing is missed
 * and nothing is sent twice. Ends on the client's abort, a failed re-check, a
 * client that stops reading (`sse.maxQueuedEvents`), or a store that fails.
 */
export function openEventSubscription(c: RouteContext, selection: EventSelection, tail: EventTail): Reply {
  const release = c.sseGauge.tryAcquire();
  if (release === undefined)
    throw new MnemeError("SSE_CONNECTION_LIMIT", `too many open event streams (the limit is ${c.sseGauge.max}); retry later`);
  const filter = new EventFilter(selection);
  const limits = c.options.sse;
  let sent = 0;
  let heartbeat: (() => void) | undefined;
  let recheck: (() => void) | undefined;
  const subscriber: TailSubscriber = {
    deliver: (events) => {
      const first = events[0];
      if (first === undefined) return;
      if (first.position > sent) {
        // The usual case: the whole page is new to this subscriber, and its frames are shared with every subscriber of the same selection.
        const page = framesOf(events, filter);
        sent = events[events.length - 1]!.position;
        if (page.count > 0) writer.push(page.bytes, page.count);
        return;
      }
      for (const e of events) {
        if (e.position <= sent) continue;
        sent = e.position;
        if (filter.matches(e) && !writer.push(frame(e))) return;
      }
    },
    fail: () => writer.close(),
  };
  const writer = new SseWriter(`retry: ${limits.retryMs}\n: connected\n\n`, limits.maxQueuedEvents, () => {
    heartbeat?.();
    recheck?.();
    c.request.signal.removeEventListener("abort", onAbort);
    tail.leave(subscriber);
    release();
  });
  const onAbort = () => writer.close();
  if (c.request.signal.aborted) {
    writer.close();
    return eventStreamReply(writer);
  }
  c.request.signal.addEventListener("abort", onAbort, { once: true });
  // One timer per period for all streams, not two per stream.
  heartbeat = streamTicker(limits.heartbeatMs).add(() => writer.push(HEARTBEAT));
  recheck = streamTicker(SUBSCRIPTION_RECHECK_MS).add(() => {
    currentRequestContext(c)
      .then((reqCtx) => checkSubscription(c.facade, reqCtx, selection))
      .catch(() => writer.close());
  });

  const run = async () => {
    await tail.ensureStarted();
    sent = await startPosition(c.facade, selection.resume, tail, writer);
    for (;;) {
      if (writer.closed) return;
      await tail.ensureStarted();
      const target = tail.position;
      if (sent < target) {
        const pages = c.facade.eventRepository.readAll({
          ...filter.readAllOptions(),
          afterPosition: sent,
          untilPosition: target,
          // A page is sent as one chunk, so it must fit what a client may leave unread.
          batchSize: Math.max(1, Math.min(CATCH_UP_PAGE, Math.floor(limits.maxQueuedEvents / 2))),
        });
        for await (const page of pages) {
          let text = "";
          let count = 0;
          for (const e of page) {
            if (e.position <= sent || !filter.matches(e)) continue;
            text += frame(e);
            count++;
          }
          if (count > 0) writer.push(text, count);
          if (writer.closed) return;
          // Paced by the client: the next page is read once it has read this one.
          await writer.room();
        }
        sent = Math.max(sent, target);
      }
      if (writer.closed) return;
      if (tail.join(subscriber, sent)) return;
    }
  };
  run().catch(() => writer.close());
  return eventStreamReply(writer);
}

/**
 * Where the stream starts, sending what the client needs first: no resume, an
 * `id:` line of the current position (a reconnect then resumes exactly); a
 * resume that is not a position or lies past the store's head (another store,
 * a restored backup), `event: gap` with reason `unknown-id`, continuing from
 * the head.
 */
async function startPosition(facade: Facade, resume: number | string | undefined, tail: EventTail, writer: SseWriter): Promise<number> {
  if (resume === undefined) {
    writer.push(`id: ${tail.position}\n\n`);
    return tail.position;
  }
  if (typeof resume === "number") {
    if (resume <= tail.position) return resume;
    const head = await facade.eventRepository.headPosition();
    if (resume <= head) return resume;
  }
  const from = tail.position;
  const lastEventId = typeof resume === "number" ? resume : resume;
  writer.push(`event: gap\nid: ${from}\ndata: ${JSON.stringify({ lastEventId, reason: "unknown-id" })}\n\n`);
  return from;
}

// Per event, its frame (made once however many streams send it).
const frames = new WeakMap<Event, string>();

function frame(e: Event): string {
  let f = frames.get(e);
  if (f === undefined) {
    f = `id: ${e.position}\ndata: ${JSON.stringify(subscribedEvent(e))}\n\n`;
    frames.set(e, f);
  }
  return f;
}

const encoder = new TextEncoder();
// Per page of the tail and per selection, the bytes of its matching frames: encoded once for every subscriber of that selection.
const pages = new WeakMap<readonly Event[], Map<string, { readonly bytes: Uint8Array; readonly count: number }>>();

function framesOf(events: readonly Event[], filter: EventFilter): { readonly bytes: Uint8Array; readonly count: number } {
  let bySelection = pages.get(events);
  if (bySelection === undefined) {
    bySelection = new Map();
    pages.set(events, bySelection);
  }
  let page = bySelection.get(filter.key);
  if (page === undefined) {
    let text = "";
    let count = 0;
    for (const e of events) {
      if (!filter.matches(e)) continue;
      text += frame(e);
      count++;
    }
    page = { bytes: encoder.encode(text), count };
    bySelection.set(filter.key, page);
  }
  return page;
}
