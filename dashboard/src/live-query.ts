/**
 * A live query of the session's tenant (`GET {t}/queries/{domain}/{name}/live`,
 * docs/http.md "Live queries"): the server sends the result at once and again
 * whenever it changed, so the dashboard shows state without polling. Read
 * with fetch, as the system-event stream, because EventSource cannot send the
 * `Authorization` header. A dropped stream is opened again after the server's
 * `retry:` (its first frame is the current result, so nothing is missed); a
 * refusal (the open answered 4xx, or `event: error` from the server: the
 * session ended, the permission was withdrawn) ends it and is reported once.
 */
import { type Api, ApiError } from "./api.js";
import { problemOf, readSse } from "./sse-reader.js";

export interface LiveQueryCallbacks<T> {
  onResult(result: T): void;
  /** The server refused the query (on opening or later); the stream stays closed. */
  onRefused(error: ApiError): void;
  /** A connection problem; the stream reconnects by itself. */
  onTrouble?(error: ApiError): void;
}

export class LiveQuery<T> {
  private retryMs = 2000;
  private abort: AbortController | undefined;
  private running = false;
  /** Bumped by start and stop: a connection of an older generation ends quietly. */
  private generation = 0;
  private timer: ReturnType<typeof setTimeout> | undefined;

  constructor(
    private readonly api: Api,
    readonly domain: string,
    readonly name: string,
    readonly payload: Record<string, unknown>,
    private readonly cb: LiveQueryCallbacks<T>,
  ) {}

  /** The stream's URL: the session tenant's live route with the payload as JSON. */
  url(): URL {
    const path = `${this.api.tenantQueryPath(this.domain, this.name)}/live`;
    const url = this.api.url(path);
    url.searchParams.set("payload", JSON.stringify(this.payload));
    return url;
  }

  start(): this {
    if (this.running) return this;
    this.running = true;
    void this.connect(++this.generation);
    return this;
  }

  stop(): void {
    this.running = false;
    this.generation++;
    clearTimeout(this.timer);
    this.abort?.abort();
  }

  private live(gen: number): boolean {
    return this.running && gen === this.generation;
  }

  private refuse(error: ApiError): void {
    this.running = false;
    if (error.status === 401) this.api.onSessionEnded(error.detail);
    this.cb.onRefused(error);
  }

  private async connect(gen: number): Promise<void> {
    if (!this.live(gen)) return;
    const abort = new AbortController();
    this.abort = abort;
    try {
      const res = await fetch(this.url(), {
        headers: { ...this.api.headers(), accept: "text/event-stream" },
        signal: abort.signal,
        cache: "no-store",
      });
      if (!this.live(gen)) return void abort.abort();
      if (res.status >= 400 && res.status < 500) {
        const p = await problemOf(res);
        return this.refuse(new ApiError(res.status, p.code, p.detail));
      }
      if (!res.ok || res.body === null) {
        const p = await problemOf(res);
        throw new ApiError(res.status, p.code, p.detail);
      }
      let refused: ApiError | undefined;
      await readSse(
        res.body,
        () => this.live(gen) && refused === undefined,
        (block) => {
          if (block.data.length === 0) return;
          let data: unknown;
          try {
            data = JSON.parse(block.data.join("\n"));
          } catch {
            return;
          }
          if (block.type === "error") {
            const e = data as { code?: string; message?: string };
            const code = e.code ?? "ERROR";
            refused = new ApiError(code === "UNAUTHENTICATED" ? 401 : code === "PERMISSION_DENIED" ? 403 : 500, code, e.message ?? code);
          } else if (block.type === "" || block.type === "message") this.cb.onResult(data as T);
        },
        (ms) => (this.retryMs = ms),
      );
      if (refused !== undefined) return this.live(gen) ? this.refuse(refused) : undefined;
      if (this.live(gen)) this.retryLater(gen, new ApiError(0, "STREAM_ENDED", "the server closed the live query"));
    } catch (e) {
      if (this.live(gen)) this.retryLater(gen, e instanceof ApiError ? e : new ApiError(0, "NETWORK", String(e)));
    }
  }

  private retryLater(gen: number, error: ApiError): void {
    this.cb.onTrouble?.(error);
    this.timer = setTimeout(() => void this.connect(gen), this.retryMs);
  }
}
