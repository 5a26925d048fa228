/**
 * The OpenTelemetry SDK as the observability tests register it: spans kept
 * in memory, metrics collected on demand, AsyncLocalStorage context. Global
 * for the test file's worker, as an application registers it.
 */
import { context, metrics, trace } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { type DataPoint, MeterProvider, MetricReader, type ResourceMetrics } from "@opentelemetry/sdk-metrics";
import { BasicTracerProvider, InMemorySpanExporter, type ReadableSpan, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base";

/** A reader that collects when the test asks. */
class TestMetricReader extends MetricReader {
  protected onShutdown(): Promise<void> {
    return Promise.resolve();
  }
  protected onForceFlush(): Promise<void> {
    return Promise.resolve();
  }
}

export interface OtelTestSdk {
  readonly exporter: InMemorySpanExporter;
  /** Finished spans with the given name. */
  spans(name: string): ReadableSpan[];
  /** The data points of one metric at this moment (cumulative). */
  points(metric: string): DataPoint<unknown>[];
  /** Collects metrics now. */
  collect(): Promise<void>;
  shutdown(): Promise<void>;
}

export function installOtelSdk(): OtelTestSdk {
  const exporter = new InMemorySpanExporter();
  const tracerProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  const reader = new TestMetricReader();
  const meterProvider = new MeterProvider({ readers: [reader] });
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  trace.setGlobalTracerProvider(tracerProvider);
  metrics.setGlobalMeterProvider(meterProvider);
  let last: ResourceMetrics | undefined;
  return {
    exporter,
    spans: (name) => exporter.getFinishedSpans().filter((s) => s.name === name),
    points: (metric) => {
      const out: DataPoint<unknown>[] = [];
      for (const scope of last?.scopeMetrics ?? [])
        for (const m of scope.metrics) if (m.descriptor.name === metric) out.push(...m.dataPoints);
      return out;
    },
    collect: async () => {
      const { resourceMetrics, errors } = await reader.collect();
      if (errors.length > 0) throw new Error(`metric collection failed: ${errors.map(String).join("; ")}`);
      last = resourceMetrics;
    },
    shutdown: async () => {
      await tracerProvider.shutdown();
      await meterProvider.shutdown();
      trace.disable();
      metrics.disable();
      context.disable();
    },
  };
}

/** The W3C traceparent of a finished span. */
export function traceparentOf(span: ReadableSpan): string {
  const sc = span.spanContext();
  return `00-${sc.traceId}-${sc.spanId}-${sc.traceFlags.toString(16).padStart(2, "0")}`;
}
