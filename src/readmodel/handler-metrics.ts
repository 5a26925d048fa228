import type { EventHandlerMetrics, RestoreReport } from "../model/event-handler.js";

const SAMPLES = 1024;

/** Counters and a sliding window of handling times (for mean and p99). */
export class HandlerMetrics {
  eventsProcessed = 0;
  eventsFailed = 0;
  eventsCaught = 0;
  /** The tenant of the event whose handling failed with `lastError`; undefined for an error of no event. */
  lastErrorTenantUuid: string | undefined;
  #lastError: string | undefined;
  lastRestore: RestoreReport | undefined;
  #totalMicros = 0;
  #timed = 0;
  readonly #window = new Float64Array(SAMPLES);
  #windowLen = 0;
  #windowPos = 0;

  get lastError(): string | undefined {
    return this.#lastError;
  }

  /** Error text carries payload data: a new error belongs to no tenant until `failedOn` names its event's. */
  set lastError(message: string | undefined) {
    this.#lastError = message;
    this.lastErrorTenantUuid = undefined;
  }

  /** Records the error of handling an event of `tenantUuid`. */
  failedOn(message: string, tenantUuid: string): void {
    this.#lastError = message;
    this.lastErrorTenantUuid = tenantUuid;
  }

  /** Records the handling time of one event (µs). */
  sample(micros: number): void {
    this.#totalMicros += micros;
    this.#timed++;
    this.#window[this.#windowPos] = micros;
    this.#windowPos = (this.#windowPos + 1) % SAMPLES;
    if (this.#windowLen < SAMPLES) this.#windowLen++;
  }

  /** Records a batch handled in `micros` in all (restore: one sample per batch, spread over its events). */
  sampleBatch(events: number, micros: number): void {
    if (events <= 0) return;
    this.#totalMicros += micros;
    this.#timed += events;
    this.sampleWindowOnly(micros / events);
  }

  private sampleWindowOnly(micros: number): void {
    this.#window[this.#windowPos] = micros;
    this.#windowPos = (this.#windowPos + 1) % SAMPLES;
    if (this.#windowLen < SAMPLES) this.#windowLen++;
  }

  snapshot(lastPosition: number, lastEventTimestamp: number, head: number): EventHandlerMetrics {
    const m: EventHandlerMetrics = {
      eventsProcessed: this.eventsProcessed,
      eventsFailed: this.eventsFailed,
      eventsCaught: this.eventsCaught,
      meanHandleMicros: this.#timed === 0 ? 0 : this.#totalMicros / this.#timed,
      p99HandleMicros: this.#p99(),
      lag: Math.max(0, head - lastPosition),
      lastPosition,
      lastEventTimestamp,
    };
    if (this.#lastError !== undefined) m.lastError = this.#lastError;
    if (this.#lastError !== undefined && this.lastErrorTenantUuid !== undefined) m.lastErrorTenantUuid = this.lastErrorTenantUuid;
    if (this.lastRestore !== undefined) m.lastRestore = this.lastRestore;
    return m;
  }

  #p99(): number {
    if (this.#windowLen === 0) return 0;
    const sorted = this.#window.slice(0, this.#windowLen).sort();
    return sorted[Math.min(sorted.length - 1, Math.ceil(sorted.length * 0.99) - 1)] ?? 0;
  }
}
