import { SseStream } from "./sse-stream.js";

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

export class SseClient extends SseStream {
  readonly events: SseEvent[] = [];
  readonly gaps: SseGap[] = [];
  readonly comments: string[] = [];
  /** The last `id:` received, as an EventSource would send it on reconnect (also from a block without data). */
  lastEventId: number | undefined;
  retry: number | undefined;

  private constructor(readonly response: Response) {
    super();
  }

  /** Opens the stream; resolves once the response headers are in (the body is read in the background). */
  static async open(url: string, headers: Record<string, string>): Promise<SseClient> {
    const { res, abort } = await SseStream.fetchStream(url, headers);
    const c = new SseClient(res);
    if (res.status === 200 && res.body !== null) c.readBody(res.body, abort);
    return c;
  }

  get status(): number {
    return this.response.status;
  }

  protected describe(): string {
    return `events: ${this.events.map((e) => `${e.id}:${e.data.kind}`).join(",")}`;
  }

  protected onBlock(block: string): void {
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
}
