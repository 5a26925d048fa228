/**
 * What OpenTelemetry costs a dispatch on the in-memory stores. Three facades
 * run the same 1-event commands in interleaved rounds (so load on a shared
 * machine falls on all alike): telemetry off (`telemetry: false`, the same
 * code path as when @opentelemetry/api is not installed), the API loaded
 * with no SDK registered (the API's no-op tracer and meter answer), and, in
 * a second part, an SDK registered (spans recorded by a BasicTracerProvider
 * into an exporter that drops them, metrics aggregated by a MeterProvider).
 * Each with no readmodel and with one readmodel and waitToFinish (a
 * mneme.handle span per batch). Ratios: against the raw
 * `MemoryEventRepository.append` of the same events (the harness's rule) and
 * against telemetry off; a second telemetry-off facade in part 1 is a control
 * that shows the noise of the run. The SDK is unregistered at the end.
 */
import { context, metrics, trace } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { MeterProvider, MetricReader } from "@opentelemetry/sdk-metrics";
import { BasicTracerProvider, type ReadableSpan, SimpleSpanProcessor, type SpanExporter } from "@opentelemetry/sdk-trace-base";
import { createFacade } from "../src/app/facade.js";
import { MemoryEventRepository } from "../src/memory/memory-event-repository.js";
import { defineDomain } from "../src/model/domain.js";
import type { DomainInstall } from "../src/model/domain-install.js";
import type { NewEvent } from "../src/model/types.js";
import { ProjectionReadmodel } from "../src/readmodel/projection-readmodel.js";
import { BENCH_REQ_CTX as reqCtx, BENCH_TENANT as TENANT, type Bench } from "./harness.js";

const AGGREGATES = 10_000;
const ids = Array.from({ length: AGGREGATES }, (_, i) => `0190a7a2-0000-7000-8000-${String(i).padStart(12, "0")}`);

function itemDomain() {
  const Items = defineDomain("Items");
  const ItemCreated = Items.event<{ title: string }>("ItemCreated");
  const Item = Items.aggregate<{ title: string; n: number }>("Item", {
    initialState: () => ({ title: "", n: 0 }),
    evolve: { ItemCreated: (s, p: { title: string }) => ({ title: p.title, n: s.n + 1 }) },
  });
  const CreateItem = Items.command<{ itemUuid: string; title: string }>("CreateItem");
  const install: DomainInstall = (d) =>
    d.handleCommand(CreateItem, (_ctx, _cmd, p) => [ItemCreated.create(p.itemUuid, { title: p.title })]);
  return { Items, ItemCreated, Item, CreateItem, install };
}

/** Spans are made, recorded and handed to the exporter, which keeps nothing (what a real exporter costs is not ours). */
class DroppingExporter implements SpanExporter {
  exported = 0;
  export(spans: ReadableSpan[], done: (r: { code: 0 }) => void): void {
    this.exported += spans.length;
    done({ code: 0 });
  }
  shutdown(): Promise<void> {
    return Promise.resolve();
  }
}

class ManualReader extends MetricReader {
  protected onShutdown(): Promise<void> {
    return Promise.resolve();
  }
  protected onForceFlush(): Promise<void> {
    return Promise.resolve();
  }
}

interface Variant {
  name: string;
  telemetry: boolean;
  seconds: number;
  /** CPU seconds of this process (less disturbed by other processes than wall time on a shared machine). */
  cpuSeconds: number;
  /** Seconds of each round, to compare round by round. */
  perRound: number[];
}

const gc = (globalThis as { gc?: () => void }).gc;

/**
 * Interleaved rounds: in each, every variant (in an order that rotates) gets
 * a fresh facade, a warm-up, a garbage collection, then `perRound` timed
 * commands; so the in-memory stores stay small and no variant inherits the
 * other's heap.
 */
async function rounds(variants: Variant[], rounds: number, perRound: number, readmodel: boolean): Promise<void> {
  let next = 0;
  for (let r = 0; r < rounds; r++) {
    for (let k = 0; k < variants.length; k++) {
      const v = variants[(r + k) % variants.length]!;
      const d = itemDomain();
      const facade = createFacade({ telemetry: v.telemetry }).registerDomain(d.Items, d.install);
      if (readmodel) facade.registerReadmodel(new ProjectionReadmodel(facade, { aggregate: d.Item }));
      await facade.start();
      const opts = readmodel ? { reqCtx, waitToFinish: true } : { reqCtx };
      for (let i = 0; i < 1_000; i++, next++)
        await facade.dispatch(d.CreateItem, { itemUuid: ids[next % AGGREGATES]!, title: `item ${next}` }, opts);
      gc?.();
      const c0 = process.cpuUsage();
      const t0 = performance.now();
      for (let i = 0; i < perRound; i++, next++) {
        await facade.dispatch(d.CreateItem, { itemUuid: ids[next % AGGREGATES]!, title: `item ${next}` }, opts);
      }
      const seconds = (performance.now() - t0) / 1000;
      const cpu = process.cpuUsage(c0);
      v.cpuSeconds += (cpu.user + cpu.system) / 1e6;
      v.seconds += seconds;
      v.perRound.push(seconds);
      await facade.stop();
    }
  }
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 === 1 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

export default async function observabilityBench(b: Bench): Promise<void> {
  const nRounds = b.quick ? 4 : 10;
  const perRound = b.quick ? 2_500 : 10_000;
  const n = nRounds * perRound;

  // Baseline: the same one-event appends straight into the repository.
  const d0 = itemDomain();
  const rawEvents: NewEvent[] = Array.from({ length: perRound }, (_, i) => ({
    ...d0.ItemCreated.create(ids[i % AGGREGATES]!, { title: `item ${i}` }, { tenantUuid: TENANT, reqCtx }),
    commandUuid: "c",
  }));
  let rawSeconds = 0;
  for (let r = 0; r < nRounds; r++) {
    const repo = new MemoryEventRepository();
    for (let i = 0; i < 1_000; i++) await repo.append([rawEvents[i]!]);
    gc?.();
    const t0 = performance.now();
    for (let i = 0; i < perRound; i++) await repo.append([rawEvents[i]!]);
    rawSeconds += (performance.now() - t0) / 1000;
    await repo.close();
  }
  const raw = b.record("observability", "raw: MemoryEventRepository.append, 1 event/call", n, rawSeconds, "events/s");

  const report = (vs: Variant[], label: string): void => {
    const rows = vs.map((v) => b.record("observability", `${v.name}${label}`, n, v.seconds, "commands/s"));
    for (const r of rows) b.compare(r, raw);
    const [off, ...others] = vs as [Variant, ...Variant[]];
    for (const on of others) {
      b.value("observability", `  ${on.name} / ${off.name}, total`, off.seconds / on.seconds, "x");
      b.value("observability", `  same, median of ${nRounds} rounds`, median(off.perRound.map((s, i) => s / on.perRound[i]!)), "x");
      b.value("observability", "  same, by CPU time of this process", off.cpuSeconds / on.cpuSeconds, "x");
    }
  };
  const variants = (on: string): Variant[] => [
    { name: "telemetry off", telemetry: false, seconds: 0, cpuSeconds: 0, perRound: [] },
    { name: on, telemetry: true, seconds: 0, cpuSeconds: 0, perRound: [] },
  ];

  // Part 1: the API loaded, no SDK registered.
  for (const readmodel of [false, true]) {
    // A second facade with telemetry off shows how far two identical runs differ on this machine.
    const vs = [...variants("API, no SDK"), { name: "telemetry off (control)", telemetry: false, seconds: 0, cpuSeconds: 0, perRound: [] }];
    await rounds(vs, nRounds, perRound, readmodel);
    report(vs, readmodel ? ", + readmodel, waitToFinish" : "");
  }

  // Part 2: an SDK registered (before the facades start, as the docs say).
  const exporter = new DroppingExporter();
  const tracerProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  const meterProvider = new MeterProvider({ readers: [new ManualReader()] });
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  trace.setGlobalTracerProvider(tracerProvider);
  metrics.setGlobalMeterProvider(meterProvider);
  try {
    for (const readmodel of [false, true]) {
      const vs = variants("SDK recording");
      const before = exporter.exported;
      await rounds(vs, nRounds, perRound, readmodel);
      report(vs, `${readmodel ? ", + readmodel, waitToFinish" : ""} (SDK registered)`);
      // Every traced dispatch made a dispatch and an append span (plus a batch span with the readmodel).
      if (exporter.exported - before < n * 2) throw new Error(`only ${exporter.exported - before} spans for ${n} dispatches`);
    }
  } finally {
    await tracerProvider.shutdown();
    await meterProvider.shutdown();
    trace.disable();
    metrics.disable();
    context.disable();
  }
}
