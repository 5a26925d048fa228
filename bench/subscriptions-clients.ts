/**
 * The SSE clients of bench/subscriptions.bench.ts, in a process of their own
 * (so the server's figures are not the clients' parsing): `node --import tsx
 * bench/subscriptions-clients.ts <url> <n> <token> <identity>`. Opens `n`
 * streams, tells the parent "ready" once each has its first bytes, and on
 * "finish" with the number of events expected per stream, waits for them (at
 * most 60 s) and answers with the latency quantiles and the counts.
 */
import { request as httpRequest, type IncomingMessage, Agent } from "node:http";

const [url, nText, token, identity] = process.argv.slice(2);
const headers = { authorization: `Bearer ${token!}`, "x-identity-uuid": identity! };
const now = (): number => performance.timeOrigin + performance.now();

/** Latencies in 0.1 ms buckets up to 60 s. */
export class Histogram {
  readonly #buckets = new Uint32Array(600_000);
  count = 0;
  max = 0;
  add(ms: number): void {
    this.#buckets[Math.min(this.#buckets.length - 1, Math.max(0, Math.round(ms * 10)))]!++;
    this.count++;
    if (ms > this.max) this.max = ms;
  }
  quantile(q: number): number {
    const target = Math.ceil(this.count * q);
    let seen = 0;
    for (let i = 0; i < this.#buckets.length; i++) {
      seen += this.#buckets[i]!;
      if (seen >= target) return i / 10;
    }
    return this.max;
  }
}

export interface Subscriber {
  received: number;
  duplicates: number;
  reconnects: number;
  close(): void;
}

/**
 * Opens an SSE client that counts the frames carrying `"sentAt"` and records
 * the latency of the first event of each read (the oldest of those it holds). Like an EventSource, it reconnects with Last-Event-ID when the
 * server ends the stream (a client too slow for `sse.maxQueuedEvents` is cut
 * off and resumes); a read that starts at or below its last id counts as a duplicate.
 */
export function subscribe(url: string, agent: Agent, hist: Histogram, ready: () => void): Subscriber {
  let lastId: number | undefined;
  let closed = false;
  let current: ReturnType<typeof httpRequest> | undefined;
  const sub: Subscriber = {
    received: 0,
    duplicates: 0,
    reconnects: 0,
    close: () => {
      closed = true;
      current?.destroy();
    },
  };
  let announced = false;
  const connect = () => {
    const h: Record<string, string> = lastId === undefined ? headers : { ...headers, "last-event-id": String(lastId) };
    const req = httpRequest(url, { headers: h, agent }, (res: IncomingMessage) => {
      res.setEncoding("utf8");
      let buffer = "";
      res.on("data", (chunk: string) => {
        if (!announced) {
          announced = true;
          ready();
        }
        // Cheap on purpose (1,000 streams x 1,000 events/s): only complete blocks are looked at, events are
        // counted by their "sentAt", and the latency is taken of the first (oldest) event of each read.
        buffer += chunk;
        const end = buffer.lastIndexOf("\n\n");
        if (end < 0) return;
        const complete = buffer.slice(0, end + 2);
        buffer = buffer.slice(end + 2);
        let at = complete.indexOf('"sentAt":');
        if (at < 0) {
          const idAt = complete.lastIndexOf("id: ");
          if (idAt >= 0) lastId = Math.max(lastId ?? 0, Number(complete.slice(idAt + 4, complete.indexOf("\n", idAt))));
          return;
        }
        const firstIdAt = complete.lastIndexOf("id: ", at);
        const firstId = Number(complete.slice(firstIdAt + 4, complete.indexOf("\n", firstIdAt)));
        if (lastId !== undefined && firstId <= lastId) sub.duplicates++;
        hist.add(now() - Number(complete.slice(at + 9, complete.indexOf("}", at))));
        while (at >= 0) {
          sub.received++;
          at = complete.indexOf('"sentAt":', at + 9);
        }
        const lastIdAt = complete.lastIndexOf("id: ");
        lastId = Number(complete.slice(lastIdAt + 4, complete.indexOf("\n", lastIdAt)));
      });
      res.on("close", () => {
        if (closed) return;
        sub.reconnects++;
        setTimeout(connect, 0);
      });
    });
    req.on("error", () => undefined);
    req.end();
    current = req;
  };
  connect();
  return sub;
}

const n = Number(nText);
const hist = new Histogram();
const agent = new Agent({ keepAlive: false, maxSockets: Infinity });
let ready = 0;
const subs: Subscriber[] = [];
for (let i = 0; i < n; i++) subs.push(subscribe(url!, agent, hist, () => ready++));
const readyTimer = setInterval(() => {
  if (ready < n) return;
  clearInterval(readyTimer);
  process.send!({ kind: "ready" });
}, 20);

process.on("message", (m: { kind: string; expected: number }) => {
  if (m.kind !== "finish") return;
  const deadline = performance.now() + 60_000;
  const check = setInterval(() => {
    if (subs.some((s) => s.received < m.expected) && performance.now() < deadline) return;
    clearInterval(check);
    for (const s of subs) s.close();
    agent.destroy();
    process.send!(
      {
        kind: "done",
        delivered: subs.reduce((a, s) => a + s.received, 0),
        duplicates: subs.reduce((a, s) => a + s.duplicates, 0),
        reconnects: subs.reduce((a, s) => a + s.reconnects, 0),
        p50: hist.quantile(0.5),
        p99: hist.quantile(0.99),
        max: hist.max,
      },
      () => process.exit(0),
    );
  }, 50);
});
