/**
 * OpenTelemetry with the SDK registered: the span tree of one HTTP command
 * with a traceparent header through a readmodel (remote parent ->
 * mneme.dispatch -> mneme.append; mneme.handle linked to the dispatch through
 * the stored traceparent), queries, restoration, and the metrics after a
 * number of commands, on memory, SQLite and Postgres. Links are also checked
 * where the events come back from the store: a handler of another facade
 * (SQLite: after a restart; Postgres: a second instance on the schema).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { SpanKind, SpanStatusCode, trace } from "@opentelemetry/api";
import type { ReadableSpan } from "@opentelemetry/sdk-trace-base";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { anonymous, authorized, createFacade, type Event, type Facade, type FacadeOptions, newUuid } from "mneme";
import { createHttpHandler } from "mneme/http";
import { createPostgresBackends } from "mneme/postgres";
import { createSqliteBackends } from "mneme/sqlite";
import { Counter, CounterTotals, Increment, Incremented } from "../support/counter-domain.js";
import { installOtelSdk, traceparentOf } from "../support/otel.js";
import { until } from "../support/until.js";
import { BaseEventHandler } from "mneme/reactions";

const DATABASE_URL = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test";
const TENANT = "0190f5e4-0000-7000-8000-00000000e001";
const REMOTE_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736";
const REMOTE_SPAN = "00f067aa0ba902b7";

const sdk = installOtelSdk();
const dir = mkdtempSync(join(tmpdir(), "mneme-otel-"));
const admin = new pg.Pool({ connectionString: DATABASE_URL, max: 2 });
const schemas: string[] = [];
const facades: Facade[] = [];

afterEach(async () => {
  for (const f of facades.splice(0)) await f.stop().catch(() => undefined);
  sdk.exporter.reset();
});
afterAll(async () => {
  for (const s of schemas) await admin.query(`DROP SCHEMA IF EXISTS "${s}" CASCADE`);
  await admin.end();
  await sdk.shutdown();
  rmSync(dir, { recursive: true, force: true });
});

type Backend = "memory" | "sqlite" | "postgres";

/** Store options for one test: a fresh file or schema; `same` reuses the last one (a restart, a second instance). */
function stores(backend: Backend, same = false): FacadeOptions {
  if (backend === "memory") return {};
  if (backend === "sqlite") {
    if (!same) schemas.push(`sqlite-${newUuid()}`);
    return createSqliteBackends({ filename: join(dir, `${schemas[schemas.length - 1]!}.db`) });
  }
  if (!same) schemas.push(`mneme_o_${newUuid().replace(/-/g, "").slice(-16)}`);
  return createPostgresBackends({ connectionString: DATABASE_URL, schema: schemas[schemas.length - 1]!, poolSize: 4, pollIntervalMs: 50 });
}

async function started(opts: FacadeOptions, setup: (f: Facade) => void): Promise<Facade> {
  const f = createFacade(opts);
  facades.push(f);
  f.registerDomain(Counter);
  setup(f);
  await f.start();
  return f;
}

/** An event handler (not a restorer) that records what it applied: it catches up from the store when its facade starts. */
class Recorder extends BaseEventHandler {
  readonly seen: Event[] = [];
  /** The span active in the handler function, per event. */
  readonly activeSpans: (string | undefined)[] = [];
  constructor() {
    super();
    this.domain = "Counter";
    this.name = "Recorder";
    this.addDomainEventHandler(Incremented, async (_ctx, e) => {
      await Promise.resolve();
      this.activeSpans.push(trace.getActiveSpan()?.spanContext().spanId);
      this.seen.push(e);
    });
  }
}

/** A command whose handler throws: HANDLER_FAILED. */
const Explode = Counter.command<{ counterUuid: string }>("Explode", { permission: anonymous });
Counter.handleCommand(Explode, () => {
  throw new Error("boom");
});

/** A command only an authorized sender may send: without a sender it is denied. */
const Guarded = Counter.command<{ counterUuid: string }>("Guarded", { permission: authorized });
Counter.handleCommand(Guarded, (_ctx, _c, p) => [Incremented.create(p.counterUuid, { by: 1 })]);

let queried: CounterTotals | undefined;
const GetTotal = Counter.query<{ counterUuid: string }, number>("GetTotal", { permission: anonymous });
Counter.handleQuery(GetTotal, (_ctx, _q, p) => queried!.total(p.counterUuid));

function attr(span: ReadableSpan, key: string): unknown {
  return span.attributes[key];
}

describe.each<Backend>(["memory", "sqlite", "postgres"])("OpenTelemetry spans on %s", (backend) => {
  it("an HTTP command with traceparent: remote parent -> mneme.dispatch -> mneme.append; mneme.handle linked to the dispatch", async () => {
    let totals!: CounterTotals;
    const facade = await started(stores(backend), (f) => f.registerReadmodel((totals = new CounterTotals(f))));
    const http = createHttpHandler(facade);
    const counterUuid = newUuid();
    const res = await http(
      new Request(`http://mneme.test/api/tenants/${TENANT}/commands/Counter/Increment?wait=true`, {
        method: "POST",
        headers: { "content-type": "application/json", traceparent: `00-${REMOTE_TRACE}-${REMOTE_SPAN}-01`, tracestate: "vendor=abc" },
        body: JSON.stringify({ counterUuid, by: 3 }),
      }),
    );
    expect(res.status).toBe(200);
    const body = (await res.json()) as { commandUuid: string; events: Event[] };
    expect(await totals.total(counterUuid)).toBe(3);
    await until(() => sdk.spans("mneme.handle").length === 1, "the batch span ended");

    const [dispatch] = sdk.spans("mneme.dispatch");
    expect(dispatch).toBeDefined();
    expect(dispatch!.spanContext().traceId).toBe(REMOTE_TRACE);
    expect(dispatch!.parentSpanContext?.spanId).toBe(REMOTE_SPAN);
    expect(dispatch!.parentSpanContext?.isRemote).toBe(true);
    expect(dispatch!.spanContext().traceState?.get("vendor")).toBe("abc");
    expect(attr(dispatch!, "mneme.domain")).toBe("Counter");
    expect(attr(dispatch!, "mneme.command")).toBe("Increment");
    expect(attr(dispatch!, "mneme.command_uuid")).toBe(body.commandUuid);
    expect(attr(dispatch!, "mneme.outcome")).toBe("succeeded");
    expect(attr(dispatch!, "mneme.event_count")).toBe(1);
    expect(attr(dispatch!, "mneme.position.last")).toBe(body.events[0]!.position);

    const [append] = sdk.spans("mneme.append");
    expect(append!.spanContext().traceId).toBe(REMOTE_TRACE);
    expect(append!.parentSpanContext?.spanId).toBe(dispatch!.spanContext().spanId);
    expect(attr(append!, "mneme.event_count")).toBe(1);
    expect(attr(append!, "mneme.position.first")).toBe(body.events[0]!.position);

    // The events and the command record store the dispatch span's traceparent (read back from the store).
    const stored: Event[] = [];
    for await (const batch of facade.eventRepository.readAll({ afterPosition: 0 })) stored.push(...batch);
    const event = stored.find((e) => e.commandUuid === body.commandUuid)!;
    expect(event.reqCtx.traceparent).toBe(traceparentOf(dispatch!));
    expect(event.reqCtx.tracestate).toBe("vendor=abc");
    expect(event.reqCtx.traceId).toBe(REMOTE_TRACE);
    expect((await facade.commandStore.get(body.commandUuid))?.reqCtx.traceparent).toBe(traceparentOf(dispatch!));

    const [handle] = sdk.spans("mneme.handle");
    expect(handle!.kind).toBe(SpanKind.CONSUMER);
    expect(handle!.parentSpanContext).toBeUndefined();
    expect(handle!.spanContext().traceId).not.toBe(REMOTE_TRACE);
    expect(attr(handle!, "mneme.handler")).toBe("CounterTotals");
    expect(attr(handle!, "mneme.events_handled")).toBe(1);
    expect(handle!.links.map((l) => [l.context.traceId, l.context.spanId])).toEqual([[REMOTE_TRACE, dispatch!.spanContext().spanId]]);
    expect(handle!.links[0]!.attributes?.["mneme.command_uuid"]).toBe(body.commandUuid);
  });

  it("a handler reading the events from the store links its batch to each command's dispatch span", async () => {
    // The commands are written by one facade; the handler runs in another that reads them back from the store.
    const writer = await started(stores(backend), () => undefined);
    const uuids: string[] = [];
    for (let i = 0; i < 3; i++) uuids.push((await writer.dispatch(Increment, { counterUuid: newUuid(), by: 1 })).commandUuid);
    const dispatched = new Map(sdk.spans("mneme.dispatch").map((s) => [attr(s, "mneme.command_uuid"), s.spanContext().spanId]));
    expect(dispatched.size).toBe(3);
    const handler = new Recorder();
    let reader: Facade;
    if (backend === "memory") {
      // One in-memory store shared by two facades.
      reader = await started({ eventRepository: writer.eventRepository }, (f) => f.registerReadmodel(handler));
    } else if (backend === "sqlite") {
      await writer.stop(); // a restart on the same file
      reader = await started(stores(backend, true), (f) => f.registerReadmodel(handler));
    } else {
      reader = await started(stores(backend, true), (f) => f.registerReadmodel(handler)); // a second instance
    }
    await until(() => handler.seen.length === 3, "the handler caught up");
    await until(() => sdk.spans("mneme.handle").length > 0, "the batch span ended");
    const links = sdk.spans("mneme.handle").flatMap((s) => s.links);
    expect(links.map((l) => l.context.spanId).sort()).toEqual([...dispatched.values()].sort());
    for (const l of links) expect(dispatched.get(l.attributes?.["mneme.command_uuid"])).toBe(l.context.spanId);
    expect(handler.seen.map((e) => e.reqCtx.traceparent?.split("-")[2]).sort()).toEqual([...dispatched.values()].sort());
    // The handler functions ran with their batch's span active.
    const batchSpans = new Set(sdk.spans("mneme.handle").map((s) => s.spanContext().spanId));
    expect(handler.activeSpans).toHaveLength(3);
    for (const id of handler.activeSpans) expect(batchSpans.has(id!)).toBe(true);

    if (backend === "postgres") {
      // Live from the other instance too (LISTEN/NOTIFY or polling: a "read the store" notification).
      sdk.exporter.reset();
      const { commandUuid } = await writer.dispatch(Increment, { counterUuid: newUuid(), by: 1 });
      await until(() => handler.seen.length === 4, "the live event arrived");
      await until(() => sdk.spans("mneme.handle").length > 0, "the batch span ended");
      const [d] = sdk.spans("mneme.dispatch");
      expect(attr(d!, "mneme.command_uuid")).toBe(commandUuid);
      expect(sdk.spans("mneme.handle").flatMap((s) => s.links.map((l) => l.context.spanId))).toEqual([d!.spanContext().spanId]);
    }
    expect(reader).toBeDefined();
  });

  it("concurrent commands, each with its own caller: every span, stored traceparent and link stays with its command", async () => {
    let totals!: CounterTotals;
    const facade = await started(stores(backend), (f) => f.registerReadmodel((totals = new CounterTotals(f))));
    const N = 24;
    const callers = Array.from({ length: N }, (_, i) => ({
      trace: newUuid().replace(/-/g, ""),
      span: (i + 1).toString(16).padStart(16, "0"),
      counterUuid: newUuid(),
    }));
    // All in flight at once: a batch may hold several commands' events (a read from the store), each linked to its own.
    const results = await Promise.all(
      callers.map((c) =>
        facade.dispatch(Increment, { counterUuid: c.counterUuid, by: 1 }, { reqCtx: { traceparent: `00-${c.trace}-${c.span}-01` } }),
      ),
    );
    await until(() => totals.applied.length === N, "the readmodel applied every event");
    await until(() => sdk.spans("mneme.handle").reduce((n, s) => n + s.links.length, 0) === N, "every batch span ended");
    const dispatches = new Map(sdk.spans("mneme.dispatch").map((s) => [attr(s, "mneme.command_uuid"), s]));
    const appends = sdk.spans("mneme.append");
    expect(appends).toHaveLength(N);
    const links = new Map(sdk.spans("mneme.handle").flatMap((s) => s.links.map((l) => [l.attributes?.["mneme.command_uuid"], l.context])));
    for (let i = 0; i < N; i++) {
      const c = callers[i]!;
      const r = results[i]!;
      const d = dispatches.get(r.commandUuid)!;
      expect(d.spanContext().traceId).toBe(c.trace);
      expect(d.parentSpanContext?.spanId).toBe(c.span);
      expect(appends.filter((a) => a.parentSpanContext?.spanId === d.spanContext().spanId)).toHaveLength(1);
      expect(r.events[0]!.reqCtx.traceparent).toBe(traceparentOf(d));
      expect(links.get(r.commandUuid)?.spanId).toBe(d.spanContext().spanId);
      expect(links.get(r.commandUuid)?.traceId).toBe(c.trace);
    }
  });

  it("queries get mneme.query; a failed command's span has the error code; restoration gets mneme.restore", async () => {
    let totals!: CounterTotals;
    const facade = await started(stores(backend), (f) => f.registerReadmodel((queried = totals = new CounterTotals(f))));
    const counterUuid = newUuid();
    await facade.dispatch(Increment, { counterUuid, by: 2 }, { waitToFinish: true });
    await expect(facade.dispatch(Explode, { counterUuid })).rejects.toMatchObject({ code: "HANDLER_FAILED" });
    const failed = sdk.spans("mneme.dispatch").find((s) => attr(s, "mneme.outcome") === "failed")!;
    expect(attr(failed, "mneme.command")).toBe("Explode");
    expect(failed.status.code).toBe(SpanStatusCode.ERROR);
    expect(failed.status.message).toContain("boom");
    expect(attr(failed, "error.type")).toBe("HANDLER_FAILED");
    expect(sdk.spans("mneme.append")).toHaveLength(1); // nothing was appended for the failed one

    const traceparent = `00-${REMOTE_TRACE}-${REMOTE_SPAN}-01`;
    await expect(facade.query(GetTotal, { counterUuid }, { reqCtx: { traceparent } })).resolves.toBe(2);
    const [query] = sdk.spans("mneme.query");
    expect(query!.parentSpanContext?.spanId).toBe(REMOTE_SPAN);
    expect(attr(query!, "mneme.query")).toBe("GetTotal");
    expect(attr(query!, "mneme.outcome")).toBe("succeeded");

    const report = await totals.restoreState(undefined, { fromZero: true }).done;
    expect(report.eventsReplayed).toBe(1);
    const restores = sdk.spans("mneme.restore").filter((s) => attr(s, "mneme.from_zero") === true);
    expect(restores).toHaveLength(1);
    expect(attr(restores[0]!, "mneme.handler")).toBe("CounterTotals");
    expect(attr(restores[0]!, "mneme.events_replayed")).toBe(1);
    expect(attr(restores[0]!, "mneme.outcome")).toBe("succeeded");
    // A replay is covered by the restore span: no batch span for it.
    expect(sdk.spans("mneme.handle")).toHaveLength(1);
    expect(await totals.total(counterUuid)).toBe(2);
  });
});

describe.each<Backend>(["memory", "sqlite"])("OpenTelemetry metrics on %s", (backend) => {
  beforeAll(() => sdk.exporter.reset());

  it("commands by outcome, the duration histogram, handler events and lag", async () => {
    await sdk.collect();
    const before = (metric: string, match: Record<string, unknown>): number => sum(sdk.points(metric), match);
    const base = {
      succeeded: before("mneme.commands", { "mneme.command": "Increment", "mneme.outcome": "succeeded" }),
      failed: before("mneme.commands", { "mneme.command": "Explode", "mneme.outcome": "failed" }),
      denied: before("mneme.commands", { "mneme.command": "Guarded", "mneme.outcome": "denied" }),
      handled: before("mneme.handler.events", { "mneme.handler": "CounterTotals", "mneme.restoring": false }),
      durations: histogramCount("Increment"),
      explodeDurations: histogramCount("Explode"),
    };
    let totals!: CounterTotals;
    let slow!: CounterTotals;
    const facade = await started(stores(backend), (f) => {
      f.registerReadmodel((totals = new CounterTotals(f)));
      f.registerReadmodel((slow = new CounterTotals(f, "Slow")));
    });
    const N = 5;
    for (let i = 0; i < N; i++) await facade.dispatch(Increment, { counterUuid: newUuid(), by: 1 }, { waitToFinish: true });
    await expect(facade.dispatch(Explode, { counterUuid: newUuid() })).rejects.toMatchObject({ code: "HANDLER_FAILED" });
    const denial = (await facade.dispatch(Guarded, { counterUuid: newUuid() }).then(
      () => ({ code: "none: the command went through" }),
      (e: unknown) => e,
    )) as { code: string };
    await slow.stop();
    for (let i = 0; i < 3; i++) await facade.dispatch(Increment, { counterUuid: newUuid(), by: 1 }, { waitToFinish: true });
    await sdk.collect();

    expect(sum(sdk.points("mneme.commands"), { "mneme.command": "Increment", "mneme.outcome": "succeeded" }) - base.succeeded).toBe(N + 3);
    expect(sum(sdk.points("mneme.commands"), { "mneme.command": "Explode", "mneme.outcome": "failed" }) - base.failed).toBe(1);
    const failedPoint = sdk.points("mneme.commands").find((p) => p.attributes["mneme.outcome"] === "failed")!;
    expect(failedPoint.attributes).toMatchObject({ "mneme.domain": "Counter", "error.type": "HANDLER_FAILED" });
    expect(sum(sdk.points("mneme.commands"), { "mneme.command": "Increment", "mneme.outcome": "failed" })).toBe(0);
    expect(
      sum(sdk.points("mneme.commands"), { "mneme.command": "Guarded", "mneme.outcome": "denied", "error.type": denial.code }) - base.denied,
    ).toBe(1);
    expect(["PERMISSION_DENIED", "UNAUTHENTICATED"]).toContain(denial.code);
    expect(histogramCount("Increment") - base.durations).toBe(N + 3);
    expect(histogramCount("Explode") - base.explodeDurations).toBe(1);
    expect(sum(sdk.points("mneme.handler.events"), { "mneme.handler": "CounterTotals", "mneme.restoring": false }) - base.handled).toBe(
      N + 3,
    );
    const lag = (h: string) => sdk.points("mneme.handler.lag").find((p) => p.attributes["mneme.handler"] === h)?.value;
    expect(lag("CounterTotals")).toBe(0);
    expect(lag("Slow")).toBe(3);
    expect(await totals.total(newUuid())).toBe(0);
  });
});

/** Sum of counter points whose attributes include `match`. */
function sum(points: { attributes: Record<string, unknown>; value: unknown }[], match: Record<string, unknown>): number {
  let n = 0;
  for (const p of points) if (Object.entries(match).every(([k, v]) => p.attributes[k] === v)) n += p.value as number;
  return n;
}

/** How many dispatches of `command` the duration histogram holds (as last collected). */
function histogramCount(command: string): number {
  return sdk
    .points("mneme.command.duration")
    .filter((p) => p.attributes["mneme.command"] === command)
    .reduce((n, p) => n + (p.value as { count: number }).count, 0);
}

describe("telemetry: false", () => {
  it("turns spans, metrics and the stored traceparent off even with an SDK registered", async () => {
    await sdk.collect();
    const before = sum(sdk.points("mneme.commands"), { "mneme.command": "Increment" });
    sdk.exporter.reset();
    const facade = await started({ telemetry: false }, (f) => f.registerReadmodel(new CounterTotals(f)));
    const traceparent = `00-${REMOTE_TRACE}-${REMOTE_SPAN}-01`;
    const { events } = await facade.dispatch(Increment, { counterUuid: newUuid(), by: 1 }, { reqCtx: { traceparent }, waitToFinish: true });
    expect(events[0]!.reqCtx.traceparent).toBe(traceparent); // the caller's, as given
    expect(sdk.exporter.getFinishedSpans()).toEqual([]);
    await sdk.collect();
    expect(sum(sdk.points("mneme.commands"), { "mneme.command": "Increment" })).toBe(before);
  });
});
