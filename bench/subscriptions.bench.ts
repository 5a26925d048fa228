/**
 * Event subscriptions over HTTP: 1,000 concurrent SSE subscribers
 * (`GET {t}/events/stream?types=Todo.TodoCreated`) on one instance while
 * 1,000 events/s of that type are appended (10 every 10 ms, through the
 * facade's event store, in memory). Prints whether every subscriber got every
 * event, the p50/p99/max delivery latency (append call to the client's parse
 * of the frame; client and server share this process), the memory per open
 * subscriber (heap and RSS, client sockets included), and the load average.
 * Baseline in the same run: a plain node:http SSE fan-out (the same frames
 * written to the same number of responses, no store, no routes, no checks).
 * BENCH_QUICK=1: 100 subscribers for 2 s.
 */
import { readFileSync } from "node:fs";
import { request as httpRequest, createServer, type IncomingMessage, type ServerResponse, Agent } from "node:http";
import type { AddressInfo } from "node:net";
import { createFacade } from "../src/app/facade.js";
import type { RequestContext } from "../src/model/types.js";
import { allowEventSubscriptions, createHttpHandler, toNodeListener } from "../src/http/index.js";
import { registerTodo, TodoCreated } from "../examples/todo/todo-domain.js";
import type { Bench } from "./harness.js";

const TENANT = "0190a7a2-7d3c-7b5e-9f00-1234567890ae";
const reqCtx: RequestContext = {
  senderAccountUuid: "0190a7a2-7d3c-7b5e-9f00-1234567890ab",
  senderSessionUuid: "0190a7a2-7d3c-7b5e-9f00-1234567890ac",
  senderIdentityUuid: "0190a7a2-7d3c-7b5e-9f00-1234567890ad",
  senderTenantUuid: TENANT,
};
const TOKEN = `${reqCtx.senderSessionUuid}.bench-key`;
const headers = { authorization: `Bearer ${TOKEN}`, "x-identity-uuid": reqCtx.senderIdentityUuid! };

const now = (): number => performance.timeOrigin + performance.now();

/** Latencies in 0.1 ms buckets up to 60 s. */
class Histogram {
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

interface Subscriber {
  received: number;
  close(): void;
}

/** Opens an SSE client that counts the frames carrying `"sentAt"` and records their latency. */
function subscribe(url: string, agent: Agent, hist: Histogram, ready: () => void): Subscriber {
  const sub: Subscriber = { received: 0, close: () => req.destroy() };
  const req = httpRequest(url, { headers, agent }, (res: IncomingMessage) => {
    res.setEncoding("utf8");
    let buffer = "";
    let first = true;
    res.on("data", (chunk: string) => {
      if (first) {
        first = false;
        ready();
      }
      buffer += chunk;
      let cut: number;
      while ((cut = buffer.indexOf("\n\n")) >= 0) {
        const block = buffer.slice(0, cut);
        buffer = buffer.slice(cut + 2);
        const at = block.indexOf('"sentAt":');
        if (at < 0) continue;
        const sentAt = Number(block.slice(at + 9, block.indexOf("}", at)));
        hist.add(now() - sentAt);
        sub.received++;
      }
    });
  });
  req.on("error", () => undefined);
  req.end();
  return sub;
}

async function listen(server: ReturnType<typeof createServer>): Promise<{ url: string; close(): Promise<void> }> {
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

function memory(): { heap: number; rss: number } {
  (globalThis as { gc?: () => void }).gc?.();
  const m = process.memoryUsage();
  return { heap: m.heapUsed, rss: m.rss };
}

interface RunResult {
  hist: Histogram;
  delivered: number;
  expected: number;
  heapPerSub: number;
  rssPerSub: number;
  seconds: number;
}

/** Opens `n` subscribers to `url`, appends 1,000 events/s for `seconds` with `append`, waits for delivery. */
async function run(
  url: string,
  n: number,
  seconds: number,
  append: (batch: number) => Promise<void> | void,
  subscribed: () => number,
): Promise<RunResult> {
  const agent = new Agent({ keepAlive: false, maxSockets: Infinity });
  const hist = new Histogram();
  const before = memory();
  let readyCount = 0;
  const subs: Subscriber[] = [];
  for (let i = 0; i < n; i++) subs.push(subscribe(url, agent, hist, () => readyCount++));
  while (readyCount < n || subscribed() < n) await new Promise((r) => setTimeout(r, 20));
  const after = memory();
  const ticks = seconds * 100;
  const t0 = performance.now();
  for (let t = 0; t < ticks; t++) {
    await append(10);
    const next = t0 + (t + 1) * 10;
    const wait = next - performance.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
  }
  const expected = ticks * 10;
  const deadline = performance.now() + 30_000;
  while (subs.some((s) => s.received < expected) && performance.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  const elapsed = (performance.now() - t0) / 1000;
  const delivered = subs.reduce((a, s) => a + s.received, 0);
  for (const s of subs) s.close();
  agent.destroy();
  return {
    hist,
    delivered,
    expected: expected * n,
    heapPerSub: (after.heap - before.heap) / n,
    rssPerSub: (after.rss - before.rss) / n,
    seconds: elapsed,
  };
}

function report(b: Bench, name: string, r: RunResult): void {
  b.value("subscriptions", `${name}: events delivered`, r.delivered, `of ${r.expected}`);
  b.value("subscriptions", `${name}: delivery latency p50`, r.hist.quantile(0.5), "ms");
  b.value("subscriptions", `${name}: delivery latency p99`, r.hist.quantile(0.99), "ms");
  b.value("subscriptions", `${name}: delivery latency max`, r.hist.max, "ms");
  b.value("subscriptions", `${name}: heap per subscriber`, r.heapPerSub / 1024, "KiB", "client sockets included");
  b.value("subscriptions", `${name}: RSS per subscriber`, r.rssPerSub / 1024, "KiB", "client sockets included");
}

export default async function subscriptionsBench(b: Bench): Promise<void> {
  const n = Number(process.env.SUBS ?? (b.quick ? 100 : 1000));
  const seconds = b.quick ? 2 : 10;
  console.log(`  load average before: ${readFileSync("/proc/loadavg", "utf8").trim()}`);

  // Baseline: a plain node:http SSE fan-out of the same frames.
  const open = new Set<ServerResponse>();
  let seq = 0;
  const plain = await listen(
    createServer((_req, res) => {
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.write("retry: 2000\n: connected\n\n");
      open.add(res);
      res.on("close", () => open.delete(res));
    }),
  );
  const plainRun = await run(
    plain.url,
    n,
    seconds,
    (k) => {
      let text = "";
      for (let i = 0; i < k; i++) {
        seq++;
        text += `id: ${seq}\ndata: ${JSON.stringify({ position: seq, domain: "Todo", name: "TodoCreated", tenantUuid: TENANT, payload: { title: "t", sentAt: now() } })}\n\n`;
      }
      for (const res of open) res.write(text);
    },
    () => open.size,
  );
  await plain.close();
  report(b, "plain node:http fan-out", plainRun);

  const facade = createFacade({ appName: "subscriptions-bench" });
  registerTodo(facade);
  allowEventSubscriptions(facade, [TodoCreated]);
  await facade.start();
  const handler = createHttpHandler(facade, {
    resolveCredentials: async (_f, c) => (`${c.sessionUuid}.${c.sessionKey}` === TOKEN ? { ...reqCtx } : undefined),
    sse: { maxConnections: n + 10 },
  });
  const listener = toNodeListener(handler);
  let openStreams = 0;
  const server = createServer((req, res) => {
    openStreams++;
    res.on("close", () => openStreams--);
    void listener(req, res);
  });
  const srv = await listen(server);
  let aggregate = 0;
  const mnemeRun = await run(
    `${srv.url}/api/tenants/${TENANT}/events/stream?types=Todo.TodoCreated`,
    n,
    seconds,
    async (k) => {
      const events = [];
      for (let i = 0; i < k; i++) {
        events.push({
          domain: "Todo",
          name: "TodoCreated",
          aggregateUuid: `0190a7a2-7d3c-7b5e-9f00-${String(++aggregate).padStart(12, "0")}`,
          tenantUuid: TENANT,
          payload: { title: "t", sentAt: now() },
        });
      }
      await facade.eventRepository.append(events);
    },
    () => openStreams,
  );
  await srv.close();
  await facade.stop();
  report(b, "mneme events/stream", mnemeRun);
  const ratio = mnemeRun.hist.quantile(0.99) / Math.max(0.1, plainRun.hist.quantile(0.99));
  console.log(`    -> p99 latency mneme / plain = ${ratio.toFixed(2)}x  (${n} subscribers, 1,000 events/s for ${seconds} s)`);
  console.log(`  load average after: ${readFileSync("/proc/loadavg", "utf8").trim()}`);
}
