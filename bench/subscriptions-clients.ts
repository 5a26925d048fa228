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
const BLANK = Buffer.from("\n\n");
/** "data: " at `at`. */
const isData = (b: Buffer, at: number): boolean =>
  b[at] === 0x64 && b[at + 1] === 0x61 && b[at + 2] === 0x74 && b[at + 3] === 0x61 && b[at + 4] === 0x3a && b[at + 5] === 0x20;
const SENT_AT = Buffer.from('"sentAt":');

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
  /** Events taken exactly once, in order. */
  received: number;
  /** Events whose id was at or below one already taken. */
  duplicates: number;
  /** Positions skipped over (an id past the last one + 1). */
  missing: number;
  reconnects: number;
  close(): void;
}

/**
 * Opens an SSE client that checks every event frame (`id: N` followed by
 * `data: `): in this bench the positions of the one event type are 1, 2, 3...
 * and the stream starts at `id: 0`, so each frame's id must be the last one
 * + 1: one at or below it is a duplicate, one further on counts the positions
 * it skipped as missing. Only the `id:` lines are parsed (no JSON.parse of the
 * payloads); a data line always follows its id line within one frame, and a
 * frame is looked at only once its blank line has come. The latency is taken
 * of the first (oldest) event of each read, from its `"sentAt":`. Like an
 * EventSource, it reconnects with Last-Event-ID when the server ends the
 * stream (a client too slow for `sse.maxQueuedEvents` is cut off and resumes).
 */
export function subscribe(url: string, agent: Agent, hist: Histogram, ready: () => void): Subscriber {
  let lastId = 0;
  let closed = false;
  let current: ReturnType<typeof httpRequest> | undefined;
  const sub: Subscriber = {
    received: 0,
    duplicates: 0,
    missing: 0,
    reconnects: 0,
    close: () => {
      closed = true;
      current?.destroy();
    },
  };
  let announced = false;
  const connect = () => {
    const h: Record<string, string> =
      sub.received === 0 && sub.reconnects === 0 ? headers : { ...headers, "last-event-id": String(lastId) };
    const req = httpRequest(url, { headers: h, agent }, (res: IncomingMessage) => {
      // Bytes, not text: frames are found with Buffer.indexOf (native) and only the ids' digits are read.
      let rest: Buffer | undefined;
      res.on("data", (chunk: Buffer) => {
        if (!announced) {
          announced = true;
          ready();
        }
        const buf = rest === undefined ? chunk : Buffer.concat([rest, chunk]);
        const end = buf.lastIndexOf(BLANK);
        if (end < 0) {
          rest = buf;
          return;
        }
        rest = end + 2 < buf.length ? buf.subarray(end + 2) : undefined;
        let timed = false;
        let at = 0;
        while (at <= end) {
          const blockEnd = buf.indexOf(BLANK, at);
          // "id: " then digits then "\n".
          if (buf[at] === 0x69 && buf[at + 1] === 0x64 && buf[at + 2] === 0x3a && buf[at + 3] === 0x20) {
            let i = at + 4;
            let id = 0;
            for (let d = buf[i]!; d >= 0x30 && d <= 0x39; d = buf[++i]!) id = id * 10 + (d - 0x30);
            if (buf[i] !== 0x0a || i === at + 4) throw new Error(`a malformed id line at ${at}`);
            if (i < blockEnd && isData(buf, i + 1)) {
              if (id <= lastId) sub.duplicates++;
              else {
                sub.missing += id - lastId - 1;
                sub.received++;
                lastId = id;
              }
              if (!timed) {
                timed = true;
                const s = buf.indexOf(SENT_AT, i);
                if (s >= 0 && s < blockEnd) hist.add(now() - Number(buf.toString("latin1", s + SENT_AT.length, buf.indexOf(0x7d, s))));
              }
            } else if (id > lastId) lastId = id;
          }
          at = blockEnd + 2;
        }
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
        missing: subs.reduce((a, s) => a + s.missing, 0),
        reconnects: subs.reduce((a, s) => a + s.reconnects, 0),
        p50: hist.quantile(0.5),
        p99: hist.quantile(0.99),
        max: hist.max,
      },
      () => process.exit(0),
    );
  }, 50);
});
