/**
 * OpenTelemetry with mneme: the SDK registered before the facade starts, one
 * command in an application span, one command that continues a caller's
 * trace (as an HTTP traceparent header does), a readmodel that handles both,
 * and a query. Spans and metrics are printed to the console.
 * Run: `npx tsx examples/observability/main.ts`
 */
import { context, metrics, trace } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { ConsoleMetricExporter, MeterProvider, PeriodicExportingMetricReader } from "@opentelemetry/sdk-metrics";
import { BasicTracerProvider, ConsoleSpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base";
import { anonymous, BaseReadmodel, createFacade, defineDomain, type Facade, newUuid } from "mneme";

// 1. The SDK, registered globally: mneme finds @opentelemetry/api at start and reports through it.
context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
const tracerProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(new ConsoleSpanExporter())] });
trace.setGlobalTracerProvider(tracerProvider);
const meterProvider = new MeterProvider({
  readers: [new PeriodicExportingMetricReader({ exporter: new ConsoleMetricExporter(), exportIntervalMillis: 60_000 })],
});
metrics.setGlobalMeterProvider(meterProvider);

// 2. A domain and a readmodel, as without telemetry.
const Notes = defineDomain("Notes", { description: "Notes, to show the spans of one command" });
const AddNote = Notes.command<{ noteUuid: string; text: string }>("AddNote", { permission: anonymous });
const NoteAdded = Notes.event<{ text: string }>("NoteAdded");
const CountNotes = Notes.query<Record<string, never>, number>("CountNotes", { permission: anonymous });

class NoteCount extends BaseReadmodel {
  constructor(facade: Facade) {
    super(facade);
    this.domain = "Notes";
    this.name = "NoteCount";
    this.addDomainEventHandler(NoteAdded, async () => {
      const counts = this.collection<{ n: number }>("counts");
      await counts.put("all", { n: ((await counts.get("all"))?.n ?? 0) + 1 });
    });
  }

  async count(): Promise<number> {
    return (await this.collection<{ n: number }>("counts").get("all"))?.n ?? 0;
  }
}

const facade = createFacade({ appName: "observability-example" });
const notes = new NoteCount(facade);
facade.registerDomain(Notes, (d) => {
  d.handleCommand(AddNote, (_ctx, _cmd, p) => [NoteAdded.create(p.noteUuid, { text: p.text })]);
  d.handleQuery(CountNotes, () => notes.count());
});
facade.registerReadmodel(notes);
await facade.start();

// 3. A command inside the application's own span: mneme.dispatch is its child, mneme.append the dispatch's.
const tracer = trace.getTracer("observability-example");
await tracer.startActiveSpan("example.request", async (span) => {
  await facade.dispatch(AddNote, { noteUuid: newUuid(), text: "first" }, { waitToFinish: true });
  span.end();
});

// 4. A command that continues a caller's trace: the HTTP adapter puts the traceparent header here.
const traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
await facade.dispatch(AddNote, { noteUuid: newUuid(), text: "second" }, { reqCtx: { traceparent }, waitToFinish: true });

// 5. A query: mneme.query. Each delivered batch above got a mneme.handle span linked to its dispatch.
console.log(`notes counted by the readmodel: ${await facade.query(CountNotes, {})}`);

// 6. The metrics, exported once as the meter provider shuts down (while the facade still reports its handlers' lag):
// mneme.commands, mneme.command.duration, mneme.handler.events, mneme.handler.lag.
await meterProvider.shutdown();
await facade.stop();
await tracerProvider.shutdown();
