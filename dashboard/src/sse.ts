/**
 * The system-event stream (`GET {t}/runtime/sse`) read with fetch, not
 * EventSource: EventSource cannot send the `Authorization` header, and the
 * dashboard keeps its token out of cookies. The parser follows the
 * text/event-stream rules (id, event, data, retry, comments); on a drop it
 * reconnects after the server's `retry:` and sends `Last-Event-ID`, so the
 * server replays what was missed, or says `event: gap` when it cannot.
 */
import { problemDetail, readSse, type SseBlock } from "./sse-reader.js";
import type { GapInfo, SystemEvent } from "./types.js";

export type StreamStatus = "connecting" | "live" | "reconnecting" | "refused" | "stopped";

export interface StreamCallbacks {
  url(): URL;
  headers(): Record<string, string>;
  onEvent(event: SystemEvent): void;
  onGap(gap: GapInfo): void;
  /** `detail` explains "refused" and "reconnecting". */
  onStatus(status: StreamStatus, detail?: string): void;
  /** 401: the session ended. */
  onUnauthenticated(detail: string): void;
}

export class SystemEventStream {
  /** The id the next connection resumes after. */
  lastEventId: string | undefined;
  /** How many times the stream was opened again after a drop. */
  reconnects = 0;
  private retryMs = 2000;
  private abort: AbortController | undefined;
  private running = false;
  /** Bumped by start and stop: a connection of an older generation ends quietly. */
  private generation = 0;
  private timer: ReturnType<typeof setTimeout> | undefined;

  constructor(private readonly cb: StreamCallbacks) {}

  start(): void {
    if (this.running) return;
    this.running = true;
    void this.connect(++this.generation);
  }

  stop(): void {
    this.running = false;
    this.generation++;
    clearTimeout(this.timer);
    this.abort?.abort();
    this.cb.onStatus("stopped");
  }

  private live(gen: number): boolean {
    return this.running && gen === this.generation;
  }

  private async connect(gen: number): Promise<void> {
    if (!this.live(gen)) return;
    this.cb.onStatus(
      this.reconnects === 0 ? "connecting" : "reconnecting",
      this.lastEventId === undefined ? undefined : `resuming after ${this.lastEventId}`,
    );
    const abort = new AbortController();
    this.abort = abort;
    const headers: Record<string, string> = { ...this.cb.headers(), accept: "text/event-stream" };
    if (this.lastEventId !== undefined) headers["last-event-id"] = this.lastEventId;
    try {
      const res = await fetch(this.cb.url(), { headers, signal: abort.signal, cache: "no-store" });
      if (!this.live(gen)) return void abort.abort();
      if (res.status === 401 || res.status === 403) {
        const detail = await problemDetail(res);
        this.running = false;
        if (res.status === 401) this.cb.onUnauthenticated(detail);
        this.cb.onStatus("refused", detail);
        return;
      }
      if (!res.ok || res.body === null) throw new Error(`${res.status} ${await problemDetail(res)}`);
      this.cb.onStatus("live");
      await this.read(res.body, gen);
      if (this.live(gen)) this.retryLater(gen, "the server closed the stream");
    } catch (e) {
      if (this.live(gen)) this.retryLater(gen, e instanceof Error ? e.message : String(e));
    }
  }

  private retryLater(gen: number, reason: string): void {
    this.reconnects++;
    this.cb.onStatus("reconnecting", reason);
    this.timer = setTimeout(() => void this.connect(gen), this.retryMs);
  }

  private read(body: ReadableStream<Uint8Array>, gen: number): Promise<void> {
    return readSse(
      body,
      () => this.live(gen),
      (block) => this.dispatch(block),
      (ms) => (this.retryMs = ms),
    );
  }

  private dispatch(event: SseBlock): void {
    // An `id:` alone moves the resume point too (the server sends one first, so even a quiet stream resumes exactly).
    if (event.id !== undefined) this.lastEventId = event.id;
    if (event.data.length === 0) return;
    let data: unknown;
    try {
      data = JSON.parse(event.data.join("\n"));
    } catch {
      return;
    }
    if (event.type === "gap") this.cb.onGap(data as GapInfo);
    else if (event.type === "" || event.type === "message") this.cb.onEvent(data as SystemEvent);
  }
}
