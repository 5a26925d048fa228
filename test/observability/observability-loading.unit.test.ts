/**
 * How mneme loads OpenTelemetry: on demand, never statically; a missing
 * package turns it off, a broken one is named; with the API installed but no
 * SDK registered (this file registers none) dispatch and delivery run as
 * without it and store nothing of their own. Plus the W3C trace context
 * rules the HTTP adapter and the store path share.
 */
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { createFacade, type Event, type Facade, newUuid } from "mneme";
import { createHttpHandler } from "mneme/http";
import { loadTelemetry, OPENTELEMETRY_API } from "../../src/observability/telemetry.js";
import { cleanTraceState, formatTraceParent, parseTraceParent } from "../../src/observability/trace-context.js";
import { isMnemeError } from "../../src/model/errors.js";
import { Counter, CounterTotals, Increment } from "../support/counter-domain.js";

const root = fileURLToPath(new URL("../..", import.meta.url));
const tmp = mkdtempSync(join(tmpdir(), "mneme-otel-load-"));
const facades: Facade[] = [];
afterAll(async () => {
  for (const f of facades) await f.stop();
  rmSync(tmp, { recursive: true, force: true });
});

const TRACE = "4bf92f3577b34da6a3ce929d0e0e4736";
const SPAN = "00f067aa0ba902b7";

describe("loadTelemetry", () => {
  it("is off when disabled, and when the package is not installed", async () => {
    expect(await loadTelemetry(false)).toBeUndefined();
    expect(await loadTelemetry(true, "mneme-test-no-such-package")).toBeUndefined();
  });

  it("with @opentelemetry/api installed (a dev dependency here) it reports through it", async () => {
    const t = await loadTelemetry(true);
    expect(t).toBeDefined();
    expect(typeof t!.dispatch).toBe("function");
  });

  it("an installed package that cannot be loaded is INVALID_STATE naming it, not silently off", async () => {
    const dir = join(tmp, "broken");
    mkdirSync(dir, { recursive: true });
    const broken = join(dir, "broken-api.mjs");
    writeFileSync(broken, 'export { trace } from "mneme-test-no-such-dependency";\n');
    const e = await loadTelemetry(true, broken).catch((err: unknown) => err);
    expect(isMnemeError(e, "INVALID_STATE")).toBe(true);
    expect((e as Error).message).toContain(`${broken} is installed but cannot be loaded`);
    expect((e as Error).message).toContain("mneme-test-no-such-dependency");

    const empty = join(dir, "no-api.mjs");
    writeFileSync(empty, "export const other = 1;\n");
    const e2 = await loadTelemetry(true, empty).catch((err: unknown) => err);
    expect(isMnemeError(e2, "INVALID_STATE")).toBe(true);
    expect((e2 as Error).message).toContain("@opentelemetry/api ^1.3.0");
  });
});

describe("package.json and sources", () => {
  const pkg = JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as Record<string, Record<string, unknown> | undefined>;

  it("@opentelemetry/api is an optional peer dependency (and a dev dependency), never a dependency", () => {
    expect(pkg.dependencies?.[OPENTELEMETRY_API]).toBeUndefined();
    expect(pkg.peerDependencies?.[OPENTELEMETRY_API]).toBe("^1.3.0");
    expect(pkg.peerDependenciesMeta?.[OPENTELEMETRY_API]).toEqual({ optional: true });
    expect(pkg.devDependencies?.[OPENTELEMETRY_API]).toBeDefined();
    for (const name of Object.keys(pkg.dependencies ?? {})) expect(name.startsWith("@opentelemetry/")).toBe(false);
  });

  it("no source file imports @opentelemetry at run time; telemetry.ts imports it dynamically", () => {
    const offenders: string[] = [];
    const walk = (dir: string): void => {
      for (const e of readdirSync(dir, { withFileTypes: true })) {
        const full = join(dir, e.name);
        if (e.isDirectory()) walk(full);
        else if (e.name.endsWith(".ts")) {
          const text = readFileSync(full, "utf8");
          const value = /^\s*(?:import|export)\s+(?!type\b)[^;]*?from\s+["']@opentelemetry\//m;
          const bare = /^\s*import\s+["']@opentelemetry\//m;
          const dynamic = /(?:import|require)\(\s*["']@opentelemetry\//;
          if (value.test(text) || bare.test(text) || dynamic.test(text)) offenders.push(full.slice(root.length));
        }
      }
    };
    walk(join(root, "src"));
    expect(offenders).toEqual([]);
    const telemetry = readFileSync(join(root, "src/observability/telemetry.ts"), "utf8");
    expect(telemetry).toContain("await import(moduleName)");
    expect(telemetry).toMatch(/^import type \* as Otel from "@opentelemetry\/api";$/m);
  });
});

describe("with the API installed and no SDK registered", () => {
  it("dispatch and delivery run, and the stored reqCtx is the caller's (no traceparent of mneme's own)", async () => {
    const f = createFacade();
    facades.push(f);
    f.registerDomain(Counter);
    const totals = new CounterTotals(f);
    f.registerReadmodel(totals);
    await f.start();
    const a = newUuid();
    const plain = await f.dispatch(Increment, { counterUuid: a, by: 1 }, { waitToFinish: true });
    expect(plain.events[0]!.reqCtx.traceparent).toBeUndefined();
    const traceparent = `00-${TRACE}-${SPAN}-01`;
    const given = await f.dispatch(
      Increment,
      { counterUuid: a, by: 1 },
      { reqCtx: { traceparent, tracestate: "k=v" }, waitToFinish: true },
    );
    expect(given.events[0]!.reqCtx).toEqual({ traceparent, tracestate: "k=v" });
    expect(await totals.total(a)).toBe(2);
  });

  it("the HTTP adapter copies a valid traceparent and its tracestate into reqCtx, and drops an invalid one", async () => {
    const f = createFacade();
    facades.push(f);
    f.registerDomain(Counter);
    await f.start();
    const http = createHttpHandler(f);
    const post = async (headers: Record<string, string>): Promise<Event> => {
      const res = await http(
        new Request(`http://mneme.test/api/tenants/0190f5e4-0000-7000-8000-00000000e001/commands/Counter/Increment`, {
          method: "POST",
          headers: { "content-type": "application/json", ...headers },
          body: JSON.stringify({ counterUuid: newUuid(), by: 1 }),
        }),
      );
      expect(res.status).toBe(200);
      return ((await res.json()) as { events: Event[] }).events[0]!;
    };
    const valid = await post({ traceparent: `00-${TRACE}-${SPAN}-01`, tracestate: "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE" });
    expect(valid.reqCtx).toMatchObject({
      traceId: TRACE,
      traceparent: `00-${TRACE}-${SPAN}-01`,
      tracestate: "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE",
    });
    const zeroSpan = await post({ traceparent: `00-${TRACE}-0000000000000000-01`, tracestate: "a=b" });
    expect(zeroSpan.reqCtx.traceparent).toBeUndefined();
    expect(zeroSpan.reqCtx.tracestate).toBeUndefined();
    const none = await post({ tracestate: "a=b" });
    expect(none.reqCtx.traceparent).toBeUndefined();
    expect(none.reqCtx.tracestate).toBeUndefined();
  });
});

describe("W3C trace context", () => {
  it("parses what the specification allows and ignores the rest", () => {
    expect(parseTraceParent(`00-${TRACE}-${SPAN}-01`)).toEqual({ traceId: TRACE, spanId: SPAN, traceFlags: 1 });
    expect(parseTraceParent(`00-${TRACE}-${SPAN}-00`)?.traceFlags).toBe(0);
    // A later version may add fields: the first four are read.
    expect(parseTraceParent(`01-${TRACE}-${SPAN}-03-extra`)).toEqual({ traceId: TRACE, spanId: SPAN, traceFlags: 3 });
    for (const bad of [
      `ff-${TRACE}-${SPAN}-01`,
      `00-${TRACE}-${SPAN}-01-extra`,
      `00-${"0".repeat(32)}-${SPAN}-01`,
      `00-${TRACE}-${"0".repeat(16)}-01`,
      `00-${TRACE.toUpperCase()}-${SPAN}-01`,
      `00-${TRACE}-${SPAN}`,
      "",
      42,
      undefined,
    ]) {
      expect(parseTraceParent(bad), String(bad)).toBeUndefined();
    }
  });

  it("formats version 00 and round-trips", () => {
    const p = { traceId: TRACE, spanId: SPAN, traceFlags: 1 };
    expect(formatTraceParent(p)).toBe(`00-${TRACE}-${SPAN}-01`);
    expect(parseTraceParent(formatTraceParent(p))).toEqual(p);
  });

  it("keeps a tracestate of printable ASCII up to 512 characters", () => {
    expect(cleanTraceState(" a=b,c=d ")).toBe("a=b,c=d");
    expect(cleanTraceState("")).toBeUndefined();
    expect(cleanTraceState("a=\u00e9")).toBeUndefined();
    expect(cleanTraceState(`a=${"x".repeat(510)}`)).toHaveLength(512);
    expect(cleanTraceState(`a=${"x".repeat(511)}`)).toBeUndefined();
    expect(cleanTraceState(1)).toBeUndefined();
  });
});

describe("an SDK registered after the facade started", () => {
  it("telemetry is inactive until a tracer provider is registered; then spans appear without a restart", async () => {
    const { trace } = await import("@opentelemetry/api");
    const { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } = await import("@opentelemetry/sdk-trace-base");
    const telemetry = await loadTelemetry(true);
    expect(telemetry?.active).toBe(false);
    const f = createFacade();
    facades.push(f);
    f.registerDomain(Counter);
    await f.start();
    await f.dispatch(Increment, { counterUuid: newUuid(), by: 1 });

    const exporter = new InMemorySpanExporter();
    const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
    trace.setGlobalTracerProvider(provider);
    try {
      expect(telemetry?.active).toBe(true);
      const { events } = await f.dispatch(Increment, { counterUuid: newUuid(), by: 1 });
      const names = exporter.getFinishedSpans().map((s) => s.name);
      expect(names.sort()).toEqual(["mneme.append", "mneme.dispatch"]);
      const dispatch = exporter.getFinishedSpans().find((s) => s.name === "mneme.dispatch")!;
      expect(events[0]!.reqCtx.traceparent).toBe(`00-${dispatch.spanContext().traceId}-${dispatch.spanContext().spanId}-01`);
    } finally {
      await provider.shutdown();
      trace.disable();
    }
  });
});
