/**
 * What the SSE clients of the tests share: reading a fetch body into blocks
 * (separated by a blank line), waiting for a condition checked after every
 * block, and closing like a browser tab. A subclass parses each block.
 */
export abstract class SseStream {
  ended = false;
  readonly #abort = new AbortController();
  #waiters: (() => void)[] = [];
  #done: Promise<void> = Promise.resolve();

  /** Fetches `url` with a signal `close()` aborts; the caller reads the body with `readBody`. */
  protected static async fetchStream(url: string, headers: Record<string, string>): Promise<{ res: Response; abort: AbortController }> {
    const abort = new AbortController();
    const res = await fetch(url, { headers, signal: abort.signal });
    return { res, abort };
  }

  /** Reads `body` in the background, handing each block to `onBlock`; `close()` aborts `fetchAbort`. */
  protected readBody(body: ReadableStream<Uint8Array>, fetchAbort: AbortController): void {
    this.#abort.signal.addEventListener("abort", () => fetchAbort.abort());
    this.#done = this.#read(body);
  }

  /** One block (without its blank line). */
  protected abstract onBlock(block: string): void;

  /** What a failed wait reports of the stream so far. */
  protected abstract describe(): string;

  /** Resolves when `predicate` holds (checked after every block); rejects after `ms`. */
  async until(predicate: (c: this) => boolean, ms = 10_000): Promise<void> {
    const deadline = Date.now() + ms;
    while (!predicate(this)) {
      if (this.ended) throw new Error(`stream ended before the condition held (${this.describe()})`);
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`timed out waiting (${this.describe()})`);
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
          this.onBlock(buffer.slice(0, cut));
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

  #wake(): void {
    for (const w of this.#waiters.splice(0)) w();
  }
}
