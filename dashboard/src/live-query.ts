/**
 * The page's live queries on one stream: `GET {t}/live-queries?queries=[...]`
 * (docs/http.md, "Live queries"). The server sends each query's result at
 * once and again whenever it changed, so the dashboard shows state without
 * polling. One stream for all, not one each: a browser holds six connections
 * per origin over HTTP/1.1, and the page's other requests must not wait for a
 * free one. Read with fetch, as the system-event stream, because EventSource
 * cannot send the `Authorization` header.
 *
 * When the set changes (a page follows another list) the stream is opened
 * again with the new set, on the next turn of the event loop, so changes
 * made together cost one reopening; every reopening answers each query's
 * current result first, so nothing is missed. A dropped stream is opened
 * again after the server's `retry:`. A query the server refuses (at once or
 * later: the session ended, a permission was withdrawn) is reported once and
 * leaves the set; the others go on.
 */
import { type Api, ApiError } from "./api.js";
import { problemOf, readSse } from "./sse-reader.js";

export interface LiveCallbacks<T> {
  onResult(result: T): void;
  /** The server refused the query (on opening or later); it left the set. */
  onRefused(error: ApiError): void;
  /** A connection problem; the stream reconnects by itself. */
  onTrouble?(error: ApiError): void;
}

interface Entry {
  readonly domain: string;
  readonly name: string;
  readonly payload: Record<string, unknown>;
  readonly cb: LiveCallbacks<unknown>;
}

/** The HTTP status a refusal code stands for (the stream carries codes only). */
function statusOf(code: string): number {
  if (code === "UNAUTHENTICATED") return 401;
  if (code === "PERMISSION_DENIED") return 403;
  if (code === "NOT_FOUND" || code.startsWith("UNKNOWN_")) return 404;
  if (code === "INVALID_REQUEST" || code === "VALIDATION_FAILED") return 400;
  return 500;
}

export class LiveSet {
  /** How many streams were opened (one per change of the set, plus reconnects). */
  opened = 0;
  private readonly entries = new Map<string, Entry>();
  private retryMs = 2000;
  private abort: AbortController | undefined;
  /** Bumped by each reopening and by stop: a connection of an older generation ends quietly. */
  private generation = 0;
  private timer: ReturnType<typeof setTimeout> | undefined;
  private reopening = false;
  private stopped = false;

  constructor(private readonly api: Api) {}

  /** Follows a query under `id` (replacing what had that id); returns the function that stops following it. */
  follow<T>(id: string, domain: string, name: string, payload: Record<string, unknown>, cb: LiveCallbacks<T>): () => void {
    const entry: Entry = { domain, name, payload, cb: cb as LiveCallbacks<unknown> };
    this.entries.set(id, entry);
    this.scheduleReopen();
    return () => {
      if (this.entries.get(id) !== entry) return;
      this.entries.delete(id);
      this.scheduleReopen();
    };
  }

  /** Whether a query is followed under `id`. */
  has(id: string): boolean {
    return this.entries.has(id);
  }

  stop(): void {
    this.stopped = true;
    this.entries.clear();
    this.generation++;
    clearTimeout(this.timer);
    this.abort?.abort();
  }

  /** The stream's URL: the session tenant's set route with every query followed. */
  url(): URL {
    const url = this.api.url(`${this.api.tenantPath()}/live-queries`);
    const queries = [...this.entries].map(([id, e]) => ({ id, domain: e.domain, name: e.name, payload: e.payload }));
    url.searchParams.set("queries", JSON.stringify(queries));
    return url;
  }

  private scheduleReopen(): void {
    if (this.reopening || this.stopped) return;
    this.reopening = true;
    setTimeout(() => {
      this.reopening = false;
      if (this.stopped) return;
      const gen = ++this.generation;
      clearTimeout(this.timer);
      this.abort?.abort();
      if (this.entries.size > 0) void this.connect(gen);
    }, 0);
  }

  private live(gen: number): boolean {
    return !this.stopped && gen === this.generation;
  }

  /** The query under `id` was refused: it leaves the set and is told. */
  private refuse(id: string, error: ApiError): void {
    const entry = this.entries.get(id);
    if (entry === undefined) return;
    this.entries.delete(id);
    if (error.status === 401) this.api.onSessionEnded(error.detail);
    entry.cb.onRefused(error);
  }

  private async connect(gen: number): Promise<void> {
    if (!this.live(gen)) return;
    const abort = new AbortController();
    this.abort = abort;
    this.opened++;
    try {
      const res = await fetch(this.url(), {
        headers: { ...this.api.headers(), accept: "text/event-stream" },
        signal: abort.signal,
        cache: "no-store",
      });
      if (!this.live(gen)) return void abort.abort();
      if (res.status >= 400 && res.status < 500) {
        // The whole set refused (no session, a malformed set): every query is told.
        const p = await problemOf(res);
        const error = new ApiError(res.status, p.code, p.detail);
        for (const id of [...this.entries.keys()]) this.refuse(id, error);
        return;
      }
      if (!res.ok || res.body === null) {
        const p = await problemOf(res);
        throw new ApiError(res.status, p.code, p.detail);
      }
      await readSse(
        res.body,
        () => this.live(gen),
        (block) => this.dispatch(block.type, block.data),
        (ms) => (this.retryMs = ms),
      );
      if (this.live(gen) && this.entries.size > 0)
        this.retryLater(gen, new ApiError(0, "STREAM_ENDED", "the server closed the live queries"));
    } catch (e) {
      if (this.live(gen)) this.retryLater(gen, e instanceof ApiError ? e : new ApiError(0, "NETWORK", String(e)));
    }
  }

  private dispatch(type: string, lines: string[]): void {
    if (lines.length === 0) return;
    let data: { id?: string; result?: unknown; code?: string; message?: string };
    try {
      data = JSON.parse(lines.join("\n")) as typeof data;
    } catch {
      return;
    }
    if (typeof data.id !== "string") return;
    if (type === "error") {
      const code = data.code ?? "ERROR";
      this.refuse(data.id, new ApiError(statusOf(code), code, data.message ?? code));
    } else if (type === "" || type === "message") this.entries.get(data.id)?.cb.onResult(data.result);
  }

  private retryLater(gen: number, error: ApiError): void {
    for (const e of [...this.entries.values()]) e.cb.onTrouble?.(error);
    this.timer = setTimeout(() => void this.connect(gen), this.retryMs);
  }
}
