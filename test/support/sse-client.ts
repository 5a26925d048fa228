/** A minimal SSE client over fetch for the http-sse tests: parses blocks into events and comments. */
export interface SseEvent {
  id: number;
  data: { id: number; kind: string; tenantUuid?: string; data: Record<string, unknown> };
}

/** An `event: gap` block: its data and its `id:`. */
export interface SseGap {
  id: number | undefined;
  data: { lastEventId: number | string; reason: string };
}

export class SseClient {
  readonly events: SseEvent[] = [];
  readonly gaps: SseGap[] = [];
  readonly comments: string[] = [];
  /** The last `id:` received, as an EventSource would send it on reconnect (also from a block without data). */
  lastEventId: number | undefined;
  retry: number | undefined;
  ended = false;
  readonly #abort = new AbortController();
  #waiters: (() => void)[] = [];
  #done: Promise<void> = Promise.resolve();

  private constructor(readonly response: Response) {}

  /** Opens the stream; resolves once the response headers are in (the body is read in the background). */
  static async open(url: string, headers: Record<string, string>): Promise<SseClient> {
    const abort = new AbortController();
    const res = await fetch(url, { headers, signal: abort.signal });
    const c = new SseClient(res);
    c.#abort.signal.addEventListener("abort", () => abort.abort());
    if (res.status === 200 && res.body !== null) c.#done = c.#read(res.body);
    return c;
  }

  get status(): number {
    return this.response.status;
  }

  /** Resolves when `predicate` holds (checked after every block); rejects after `ms`. */
  async until(predicate: (c: SseClient) => boolean, ms = 10_000): Promise<void> {
    const deadline = Date.now() + ms;
    while (!predicate(this)) {
      if (this.ended) throw new Error(`stream ended before the condition held (events: ${this.events.map((e) => e.id).join(",")})`);
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`timed out waiting (events: ${this.events.map((e) => `${e.id}:${e.data.kind}`).join(",")})`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, Math.min(left, 200));
        this.#waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
  }

  /** Disconnects like a browser tab closing. */
  close(): Promise<void> {
    this.#abort.abort();
    return this.#done;
  }

  /** Resolves when the server ended the stream. */
  get finished(): Promise<void> {
    return this.#done;
  }

  async #read(body: ReadableStream<Uint8Array>): Promise<void> {
    const decoder = new TextDecoder();
    let buffer = "";
    const reader = body.getReader();
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        buffer += decoder.decode(value, { stream: true });
        let cut: number;
        while ((cut = buffer.indexOf("\n\n")) >= 0) {
          this.#block(buffer.slice(0, cut));
          buffer = buffer.slice(cut + 2);
        }
        this.#wake();
      }
    } catch {
      // aborted by close()
    } finally {
      this.ended = true;
      this.#wake();
    }
  }

  #block(block: string): void {
    let id: number | undefined;
    let data: string | undefined;
    let type: string | undefined;
    for (const line of block.split("\n")) {
      if (line.startsWith(":")) this.comments.push(line.slice(1).trim());
      else if (line.startsWith("id: ")) id = Number(line.slice(4));
      else if (line.startsWith("data: ")) data = line.slice(6);
      else if (line.startsWith("event: ")) type = line.slice(7);
      else if (line.startsWith("retry: ")) this.retry = Number(line.slice(7));
    }
    if (id !== undefined) this.lastEventId = id;
    if (type !== undefined) {
      if (type !== "gap" || data === undefined) throw new Error(`an unexpected event type: ${block}`);
      this.gaps.push({ id, data: JSON.parse(data) });
      if (this.events.length > 0) throw new Error(`a gap after events: ${block}`);
      return;
    }
    if (data !== undefined) {
      if (id === undefined) throw new Error(`an event without id: ${block}`);
      this.events.push({ id, data: JSON.parse(data) });
    }
  }

  #wake(): void {
    for (const w of this.#waiters.splice(0)) w();
  }
}
