/**
 * OpenTelemetry for mneme: spans and metrics of dispatch, query, append,
 * delivery and restoration, through the global OpenTelemetry API.
 *
 * `@opentelemetry/api` is an optional peer dependency. It is imported here
 * only, dynamically, when a facade starts: without it nothing is loaded and
 * the facade runs as before. With it, mneme reports to whatever SDK the
 * application registered (`trace.setGlobalTracerProvider`,
 * `metrics.setGlobalMeterProvider`, or the NodeSDK); with none registered the
 * API's no-op tracer and meter answer. See docs/observability.md.
 */
import type * as Otel from "@opentelemetry/api";
import { errorMessage, isMnemeError, MnemeError } from "../model/errors.js";
import type { DispatchResult } from "../model/facade-handle.js";
import type { RestoreReport } from "../model/event-handler.js";
import type { Event, RequestContext } from "../model/types.js";
import { cleanTraceState, formatTraceParent, parseTraceParent } from "./trace-context.js";

/** The package mneme reports through. */
export const OPENTELEMETRY_API = "@opentelemetry/api";
/** The instrumentation scope of every span and instrument. */
export const INSTRUMENTATION_SCOPE = "mneme";

/** The most links one `mneme.handle` span carries (one per distinct command of the batch). */
export const MAX_HANDLE_LINKS = 128;

type Api = typeof Otel;

/** Bucket boundaries (seconds) of `mneme.command.duration`: 0.1 ms to 10 s. */
const DURATION_BUCKETS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

const loads = new Map<string, Promise<Api | undefined>>();

/**
 * The OpenTelemetry API, imported once per process: undefined when it is not
 * installed. `moduleName` exists for tests.
 * @throws MnemeError INVALID_STATE when it is installed but cannot be loaded (a broken install).
 */
function loadApi(moduleName: string): Promise<Api | undefined> {
  let p = loads.get(moduleName);
  if (p === undefined) {
    p = importApi(moduleName);
    loads.set(moduleName, p);
    // A failed load is tried again by the next start (the install may be repaired meanwhile).
    p.catch(() => loads.delete(moduleName));
  }
  return p;
}

async function importApi(moduleName: string): Promise<Api | undefined> {
  let mod: Partial<Api> & { default?: Partial<Api> };
  try {
    mod = (await import(moduleName)) as typeof mod;
  } catch (e) {
    if (isMissing(e, moduleName)) return undefined;
    throw new MnemeError("INVALID_STATE", `${moduleName} is installed but cannot be loaded: ${errorMessage(e).split("\n", 1)[0]!}`, {
      cause: e,
    });
  }
  const api = mod.trace !== undefined ? mod : mod.default;
  if (api?.trace === undefined || api.metrics === undefined || api.context === undefined) {
    throw new MnemeError("INVALID_STATE", `${moduleName} has no trace, metrics and context APIs: mneme needs @opentelemetry/api ^1.3.0`);
  }
  return api as Api;
}

/** Whether the import failed because `moduleName` itself is absent (not something it imports). */
function isMissing(e: unknown, moduleName: string): boolean {
  const code = (e as { code?: unknown } | null)?.code;
  if (code !== "ERR_MODULE_NOT_FOUND" && code !== "MODULE_NOT_FOUND") return false;
  const message = errorMessage(e);
  return message.includes(`'${moduleName}'`) || message.includes(`"${moduleName}"`);
}

/**
 * The facade's telemetry, or undefined when it is off (`enabled` false) or
 * `@opentelemetry/api` is not installed. Called once per start.
 * @throws MnemeError INVALID_STATE when the API is installed but cannot be loaded.
 */
export async function loadTelemetry(enabled: boolean, moduleName: string = OPENTELEMETRY_API): Promise<Telemetry | undefined> {
  if (!enabled) return undefined;
  const api = await loadApi(moduleName);
  return api === undefined ? undefined : new OtelTelemetry(api);
}

/**
 * Spans and instruments of one started facade, at the hook points of the
 * facade and the handler runner. Its signatures name no OpenTelemetry type,
 * so mneme's declarations compile without the package.
 */
export interface Telemetry {
  /**
   * False while neither a tracer provider nor a meter provider is registered:
   * the facade then skips every hook, so the API without an SDK costs a branch.
   */
  readonly active: boolean;
  /**
   * Runs one dispatch under a `mneme.dispatch` span and counts it
   * (`mneme.commands`, `mneme.command.duration`). The parent is the active
   * span, else the caller's `reqCtx.traceparent` (a remote parent).
   */
  dispatch<R>(
    domain: string,
    command: string,
    reqCtx: RequestContext | undefined,
    run: (trace: DispatchTrace | undefined) => Promise<DispatchResult<R>>,
  ): Promise<DispatchResult<R>>;
  /** Runs one query under a `mneme.query` span (parent as for dispatch). */
  query<R>(domain: string, query: string, reqCtx: RequestContext | undefined, run: () => Promise<R>): Promise<R>;
  /**
   * The `mneme.handle` span of a live batch (linked to the dispatch span of
   * each of its commands) and the count of its events (`mneme.handler.events`).
   */
  handle(handler: string, events: readonly Event[], restoring: boolean): BatchTrace | undefined;
  /** Runs a restoration under a `mneme.restore` span. */
  restore(handler: string, fromZero: boolean, run: () => Promise<RestoreReport>): Promise<RestoreReport>;
  /** Reports `mneme.handler.lag` from `source` at every collection until `close()`; a second call replaces the source. */
  observeLag(source: () => Iterable<HandlerLag>): void;
  /** Stops reporting lag. */
  close(): void;
}

/** The span of one dispatch, as the facade sees it while the command runs. */
export interface DispatchTrace {
  /** Names the command's uuid on the span (known once the envelope is made). */
  began(commandUuid: string): void;
  /** The request context to store with the events and the record: the caller's, with this span's traceparent. */
  stamp(reqCtx: RequestContext): RequestContext;
  /** Runs the event repository's append under a `mneme.append` span. */
  append(count: number, run: () => Promise<Event[]>): Promise<Event[]>;
}

/** The span of one delivered batch, as the handler runner sees it. */
export interface BatchTrace {
  /** Runs the batch with its span active (spans the handler functions start are its children). */
  within<T>(run: () => Promise<T>): Promise<T>;
  /** The batch committed: `handled` events went through the handler's functions. */
  committed(handled: number): void;
  /** The batch failed (it is rolled back; a batch of several events is applied again one by one). */
  failed(err: unknown): void;
}

/** One handler's lag, as `mneme.handler.lag` reports it. */
export interface HandlerLag {
  readonly handler: string;
  readonly lag: number;
}

/** Telemetry through the OpenTelemetry API. */
class OtelTelemetry implements Telemetry {
  readonly #api: Api;
  readonly #tracer: Otel.Tracer;
  /** The global tracer provider (the API's proxy, which an SDK registered later delegates to). */
  readonly #tracerProvider: Otel.TracerProvider;
  /** What the proxy answers while no SDK is registered. */
  readonly #noopTracerProvider: Otel.TracerProvider;
  /** Whether a meter provider was registered at start (the metrics API has no proxy: its no-op meter stays one). */
  readonly #metering: boolean;
  readonly #commands: Otel.Counter;
  readonly #duration: Otel.Histogram;
  readonly #handlerEvents: Otel.Counter;
  readonly #lag: Otel.ObservableGauge;
  #lagCallback: Otel.ObservableCallback | undefined;

  constructor(api: Api) {
    this.#api = api;
    // The global tracer is a proxy: an SDK registered after start still receives spans.
    this.#tracer = api.trace.getTracer(INSTRUMENTATION_SCOPE);
    this.#tracerProvider = api.trace.getTracerProvider();
    // A fresh proxy's delegate is the API's no-op provider, which the API exports no other way (1.x keeps the class).
    // eslint-disable-next-line @typescript-eslint/no-deprecated
    this.#noopTracerProvider = new api.ProxyTracerProvider().getDelegate();
    // Instruments come from the meter provider registered now: register the SDK before facade.start().
    const meter = api.metrics.getMeter(INSTRUMENTATION_SCOPE);
    this.#metering = meter.constructor !== api.createNoopMeter().constructor;
    this.#commands = meter.createCounter("mneme.commands", {
      description: "Commands dispatched, by domain, command and outcome",
      valueType: api.ValueType.INT,
    });
    this.#duration = meter.createHistogram("mneme.command.duration", {
      description: "Duration of a dispatch, from the call to its result or error",
      unit: "s",
      advice: { explicitBucketBoundaries: DURATION_BUCKETS },
    });
    this.#handlerEvents = meter.createCounter("mneme.handler.events", {
      description: "Events that went through an event handler's functions, by handler",
      valueType: api.ValueType.INT,
    });
    this.#lag = meter.createObservableGauge("mneme.handler.lag", {
      description: "Positions an event handler is behind the head of the event store",
      valueType: api.ValueType.INT,
    });
  }

  get active(): boolean {
    return this.#metering || this.#tracing();
  }

  /** Whether a tracer provider is registered (checked per call: an SDK may be registered after start). */
  #tracing(): boolean {
    const p = this.#tracerProvider as Otel.TracerProvider & { getDelegate?(): Otel.TracerProvider };
    return p.getDelegate === undefined || p.getDelegate() !== this.#noopTracerProvider;
  }

  /**
   * Reports `mneme.handler.lag` from `source` at every collection, until
   * `close()`. One source per facade.
   */
  observeLag(source: () => Iterable<HandlerLag>): void {
    if (this.#lagCallback !== undefined) this.#lag.removeCallback(this.#lagCallback);
    this.#lagCallback = (result) => {
      for (const { handler, lag } of source()) result.observe(lag, { "mneme.handler": handler });
    };
    this.#lag.addCallback(this.#lagCallback);
  }

  /** Stops reporting this facade's lag. */
  close(): void {
    if (this.#lagCallback !== undefined) this.#lag.removeCallback(this.#lagCallback);
    this.#lagCallback = undefined;
  }

  /**
   * Runs one dispatch under a `mneme.dispatch` span and counts it. The
   * parent is the active span, else the caller's `reqCtx.traceparent` (a
   * remote parent: the HTTP adapter puts the request's header there).
   */
  async dispatch<R>(
    domain: string,
    command: string,
    reqCtx: RequestContext | undefined,
    run: (trace: DispatchTrace | undefined) => Promise<DispatchResult<R>>,
  ): Promise<DispatchResult<R>> {
    const api = this.#api;
    const t0 = performance.now();
    const parent = this.#parent(reqCtx);
    const span = this.#tracing()
      ? this.#tracer.startSpan(
          "mneme.dispatch",
          { kind: api.SpanKind.INTERNAL, attributes: { "mneme.domain": domain, "mneme.command": command } },
          parent,
        )
      : undefined;
    // Nothing records (no SDK, or not sampled): no span context to store, no context to switch.
    const trace = span?.isRecording() === true ? new RecordingDispatch(api, this.#tracer, span, parent) : undefined;
    const attributes: Otel.Attributes = { "mneme.domain": domain, "mneme.command": command, "mneme.outcome": "succeeded" };
    try {
      const result = await (trace === undefined || span === undefined
        ? run(undefined)
        : api.context.with(api.trace.setSpan(parent, span), run, undefined, trace));
      if (trace !== undefined && span !== undefined) {
        span.setAttribute("mneme.outcome", "succeeded");
        span.setAttribute("mneme.command_uuid", result.commandUuid);
        span.setAttribute("mneme.event_count", result.events.length);
        if (result.events.length > 0) {
          span.setAttribute("mneme.position.first", result.events[0]!.position);
          span.setAttribute("mneme.position.last", result.events[result.events.length - 1]!.position);
        }
        if (result.replayed === true) span.setAttribute("mneme.replayed", true);
        if (result.handlerErrors.length > 0) span.setAttribute("mneme.handler_errors", result.handlerErrors.length);
      }
      return result;
    } catch (err) {
      attributes["mneme.outcome"] = outcomeOf(err);
      attributes["error.type"] = errorType(err);
      if (trace !== undefined && span !== undefined) {
        span.setAttribute("mneme.outcome", attributes["mneme.outcome"]);
        failSpan(api, span, err);
      }
      throw err;
    } finally {
      span?.end();
      if (this.#metering) {
        this.#commands.add(1, attributes);
        this.#duration.record((performance.now() - t0) / 1000, attributes);
      }
    }
  }

  /** Runs one query under a `mneme.query` span (parent as for dispatch). */
  async query<R>(domain: string, query: string, reqCtx: RequestContext | undefined, run: () => Promise<R>): Promise<R> {
    if (!this.#tracing()) return run();
    const api = this.#api;
    const parent = this.#parent(reqCtx);
    const span = this.#tracer.startSpan(
      "mneme.query",
      { kind: api.SpanKind.INTERNAL, attributes: { "mneme.domain": domain, "mneme.query": query } },
      parent,
    );
    if (!span.isRecording()) {
      span.end();
      return run();
    }
    try {
      const result = await api.context.with(api.trace.setSpan(parent, span), run);
      span.setAttribute("mneme.outcome", "succeeded");
      return result;
    } catch (err) {
      span.setAttribute("mneme.outcome", outcomeOf(err));
      failSpan(api, span, err);
      throw err;
    } finally {
      span.end();
    }
  }

  /**
   * Starts the `mneme.handle` span of a live batch, linked to the dispatch
   * span of each command whose events it holds (their stored traceparent).
   * Undefined during a restoration (the `mneme.restore` span covers it) and
   * when nothing records; events are counted either way.
   */
  handle(handler: string, events: readonly Event[], restoring: boolean): BatchTrace | undefined {
    const tracing = this.#tracing();
    if (restoring || !tracing) return this.#metering ? new CountedBatch(this.#handlerEvents, handler, restoring) : undefined;
    const api = this.#api;
    const first = events[0]!;
    const last = events[events.length - 1]!;
    // A new trace per batch: delivery runs in whatever context appended the events, which is not its parent.
    const span = this.#tracer.startSpan("mneme.handle", {
      kind: api.SpanKind.CONSUMER,
      root: true,
      links: linksOf(api, events),
      attributes: {
        "mneme.handler": handler,
        "mneme.event_count": events.length,
        "mneme.position.first": first.position,
        "mneme.position.last": last.position,
      },
    });
    if (!span.isRecording()) {
      span.end();
      return this.#metering ? new CountedBatch(this.#handlerEvents, handler, false) : undefined;
    }
    return new TracedBatch(api, span, this.#metering ? this.#handlerEvents : undefined, handler);
  }

  /** Runs a restoration under a `mneme.restore` span. */
  async restore(handler: string, fromZero: boolean, run: () => Promise<RestoreReport>): Promise<RestoreReport> {
    if (!this.#tracing()) return run();
    const api = this.#api;
    const span = this.#tracer.startSpan("mneme.restore", {
      kind: api.SpanKind.INTERNAL,
      attributes: { "mneme.handler": handler, "mneme.from_zero": fromZero },
    });
    try {
      const report = await run();
      if (span.isRecording()) {
        span.setAttributes({
          "mneme.outcome": "succeeded",
          "mneme.events_replayed": report.eventsReplayed,
          "mneme.events_caught": report.eventsCaught,
          "mneme.position.after": report.afterPosition,
          "mneme.position.to": report.toPosition,
        });
      }
      return report;
    } catch (err) {
      if (span.isRecording()) {
        span.setAttribute("mneme.outcome", isMnemeError(err, "RESTORE_CANCELLED") ? "cancelled" : "failed");
        failSpan(api, span, err);
      }
      throw err;
    } finally {
      span.end();
    }
  }

  /** The active context when it holds a span; else the caller's traceparent as a remote parent; else the active context. */
  #parent(reqCtx: RequestContext | undefined): Otel.Context {
    const api = this.#api;
    const active = api.context.active();
    const current = api.trace.getSpanContext(active);
    if (current !== undefined && api.isSpanContextValid(current)) return active;
    const remote = parseTraceParent(reqCtx?.traceparent);
    if (remote === undefined) return active;
    const state = cleanTraceState(reqCtx?.tracestate);
    const sc: Otel.SpanContext = { traceId: remote.traceId, spanId: remote.spanId, traceFlags: remote.traceFlags & 1, isRemote: true };
    if (state !== undefined) sc.traceState = api.createTraceState(state);
    return api.trace.setSpanContext(active, sc);
  }
}

class RecordingDispatch implements DispatchTrace {
  readonly #api: Api;
  readonly #tracer: Otel.Tracer;
  readonly #span: Otel.Span;
  readonly #context: Otel.Context;

  constructor(api: Api, tracer: Otel.Tracer, span: Otel.Span, parent: Otel.Context) {
    this.#api = api;
    this.#tracer = tracer;
    this.#span = span;
    this.#context = api.trace.setSpan(parent, span);
  }

  began(commandUuid: string): void {
    this.#span.setAttribute("mneme.command_uuid", commandUuid);
  }

  stamp(reqCtx: RequestContext): RequestContext {
    const sc = this.#span.spanContext();
    const out: RequestContext = { ...reqCtx, traceparent: formatTraceParent(sc) };
    const state = sc.traceState?.serialize();
    if (state !== undefined && state !== "") out.tracestate = state;
    else delete out.tracestate;
    return out;
  }

  async append(count: number, run: () => Promise<Event[]>): Promise<Event[]> {
    const api = this.#api;
    const span = this.#tracer.startSpan(
      "mneme.append",
      { kind: api.SpanKind.INTERNAL, attributes: { "mneme.event_count": count } },
      this.#context,
    );
    try {
      const events = await api.context.with(api.trace.setSpan(this.#context, span), run);
      if (events.length > 0) {
        span.setAttribute("mneme.position.first", events[0]!.position);
        span.setAttribute("mneme.position.last", events[events.length - 1]!.position);
      }
      return events;
    } catch (err) {
      failSpan(api, span, err);
      throw err;
    } finally {
      span.end();
    }
  }
}

/** A batch that only counts (restoring, or nothing records). */
class CountedBatch implements BatchTrace {
  readonly #counter: Otel.Counter;
  readonly #attributes: Otel.Attributes;

  constructor(counter: Otel.Counter, handler: string, restoring: boolean) {
    this.#counter = counter;
    this.#attributes = { "mneme.handler": handler, "mneme.restoring": restoring };
  }

  within<T>(run: () => Promise<T>): Promise<T> {
    return run();
  }

  committed(handled: number): void {
    if (handled > 0) this.#counter.add(handled, this.#attributes);
  }

  failed(): void {
    // Counted where the events commit (the replay one by one).
  }
}

class TracedBatch implements BatchTrace {
  readonly #api: Api;
  readonly #span: Otel.Span;
  readonly #counter: Otel.Counter | undefined;
  readonly #handler: string;

  constructor(api: Api, span: Otel.Span, counter: Otel.Counter | undefined, handler: string) {
    this.#api = api;
    this.#span = span;
    this.#counter = counter;
    this.#handler = handler;
  }

  within<T>(run: () => Promise<T>): Promise<T> {
    const api = this.#api;
    return api.context.with(api.trace.setSpan(api.context.active(), this.#span), run);
  }

  committed(handled: number): void {
    if (handled > 0) this.#counter?.add(handled, { "mneme.handler": this.#handler, "mneme.restoring": false });
    this.#span.setAttribute("mneme.events_handled", handled);
    this.#span.setAttribute("mneme.outcome", "succeeded");
    this.#span.end();
  }

  failed(err: unknown): void {
    this.#span.setAttribute("mneme.outcome", "failed");
    failSpan(this.#api, this.#span, err);
    this.#span.end();
  }
}

/** One link per distinct stored traceparent of the batch (the dispatch spans of its commands). */
function linksOf(api: Api, events: readonly Event[]): Otel.Link[] {
  const links: Otel.Link[] = [];
  let seen: Set<string> | undefined;
  for (const e of events) {
    const tp = e.reqCtx.traceparent;
    if (tp === undefined || seen?.has(tp) === true) continue;
    (seen ??= new Set()).add(tp);
    const p = parseTraceParent(tp);
    if (p === undefined) continue;
    const sc: Otel.SpanContext = { traceId: p.traceId, spanId: p.spanId, traceFlags: p.traceFlags & 1, isRemote: true };
    const state = cleanTraceState(e.reqCtx.tracestate);
    if (state !== undefined) sc.traceState = api.createTraceState(state);
    const attributes: Otel.Attributes = { "mneme.position": e.position };
    if (e.commandUuid !== undefined) attributes["mneme.command_uuid"] = e.commandUuid;
    links.push({ context: sc, attributes });
    if (links.length === MAX_HANDLE_LINKS) break;
  }
  return links;
}

/** succeeded / denied / failed: denied when the sender was not let through. */
function outcomeOf(err: unknown): string {
  return isMnemeError(err, "PERMISSION_DENIED") || isMnemeError(err, "UNAUTHENTICATED") ? "denied" : "failed";
}

/** The error code of a MnemeError, else the error's class name. */
function errorType(err: unknown): string {
  if (isMnemeError(err)) return err.code;
  return err instanceof Error ? err.name : "unknown";
}

function failSpan(api: Api, span: Otel.Span, err: unknown): void {
  span.setAttribute("error.type", errorType(err));
  span.setStatus({ code: api.SpanStatusCode.ERROR, message: errorMessage(err) });
}
