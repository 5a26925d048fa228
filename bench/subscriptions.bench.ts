/**
 * Event subscriptions over HTTP: 1,000 concurrent SSE subscribers
 * (`GET {t}/events/stream?types=Todo.TodoCreated`) on one instance while
 * 1,000 events/s of that type are appended (10 every 10 ms, through the
 * facade's event store, in memory). Prints whether every subscriber got every
 * event, the p50/p99/max delivery latency (append call to the client's parse
 * of the frame; client and server share this process), the memory per open
 * subscriber (the server's heap and RSS growth with the streams open; the
 * clients run in a child process, bench/subscriptions-clients.ts; latency is
 * measured across the two processes' clocks, both performance.timeOrigin
 * based), and the load average.
 * Baseline in the same run: a plain node:http SSE fan-out (the same frames
 * written to the same number of responses, no store, no routes, no checks).
 * BENCH_QUICK=1: 100 subscribers for 2 s; SUBS=<n> another number of
 * subscribers; SUBS_SIDES=plain or =mneme one side only (for a profile).
 */
import { readFileSync } from "node:fs";
import { fork } from "node:child_process";
import { createServer, type ServerResponse } from "node:http";
import { fileURLToPath } from "node:url";
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

const now = (): number => performance.timeOrigin + performance.now();

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
  delivered: number;
  duplicates: number;
  missing: number;
  reconnects: number;
  p50: number;
  p99: number;
  max: number;
  expected: number;
  heapPerSub: number;
  rssPerSub: number;
}

/**
 * Opens `n` subscribers to `url` from a child process, appends 1,000 events/s
 * for `seconds` with `append`, and waits for the child to have them all.
 * Memory per subscriber is this (the server's) process's growth while the
 * streams are open and idle.
 */
async function run(
  url: string,
  n: number,
  seconds: number,
  append: (batch: number) => Promise<void> | void,
  subscribed: () => number,
): Promise<RunResult> {
  const before = memory();
  const child = fork(
    fileURLToPath(new URL("subscriptions-clients.ts", import.meta.url)),
    [url, String(n), TOKEN, reqCtx.senderIdentityUuid!],
    {
      execArgv: ["--import", "tsx"],
    },
  );
  const next = (kind: string) =>
    new Promise<Record<string, number>>((resolve) => {
      const on = (m: Record<string, unknown>) => {
        if (m.kind !== kind) return;
        child.off("message", on);
        resolve(m as Record<string, number>);
      };
      child.on("message", on);
    });
  await next("ready");
  while (subscribed() < n) await new Promise((r) => setTimeout(r, 20));
  const after = memory();
  const ticks = seconds * 100;
  const t0 = performance.now();
  for (let t = 0; t < ticks; t++) {
    await append(10);
    const wait = t0 + (t + 1) * 10 - performance.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
  }
  const done = next("done");
  child.send({ kind: "finish", expected: ticks * 10 });
  const r = await done;
  return {
    delivered: r.delivered!,
    duplicates: r.duplicates!,
    missing: r.missing!,
    reconnects: r.reconnects!,
    p50: r.p50!,
    p99: r.p99!,
    max: r.max!,
    expected: ticks * 10 * n,
    heapPerSub: (after.heap - before.heap) / n,
    rssPerSub: (after.rss - before.rss) / n,
  };
}

function report(b: Bench, name: string, r: RunResult): void {
  b.value("subscriptions", `${name}: events delivered`, r.delivered, `of ${r.expected}`);
  b.value("subscriptions", `${name}: duplicates`, r.duplicates, "events");
  b.value("subscriptions", `${name}: missing`, r.missing, "events");
  b.value("subscriptions", `${name}: reconnects (cut off as too slow)`, r.reconnects, "streams");
  b.value("subscriptions", `${name}: delivery latency p50`, r.p50, "ms");
  b.value("subscriptions", `${name}: delivery latency p99`, r.p99, "ms");
  b.value("subscriptions", `${name}: delivery latency max`, r.max, "ms");
  b.value("subscriptions", `${name}: server heap per subscriber`, r.heapPerSub / 1024, "KiB");
  b.value("subscriptions", `${name}: server RSS per subscriber`, r.rssPerSub / 1024, "KiB");
}

export default async function subscriptionsBench(b: Bench): Promise<void> {
  const n = Number(process.env.SUBS ?? (b.quick ? 100 : 1000));
  const seconds = b.quick ? 2 : 10;
  console.log(`  load average before: ${readFileSync("/proc/loadavg", "utf8").trim()}`);

  const sides = (process.env.SUBS_SIDES ?? "plain,mneme").split(",");
  let plainRun: RunResult | undefined;
  let mnemeRun: RunResult | undefined;
  if (sides.includes("plain")) plainRun = await runPlain(b, n, seconds);
  if (sides.includes("mneme")) mnemeRun = await runMneme(b, n, seconds);
  if (plainRun !== undefined && mnemeRun !== undefined) {
    const ratio = mnemeRun.p99 / Math.max(0.1, plainRun.p99);
    console.log(`    -> p99 latency mneme / plain = ${ratio.toFixed(2)}x  (${n} subscribers, 1,000 events/s for ${seconds} s)`);
  }
  console.log(`  load average after: ${readFileSync("/proc/loadavg", "utf8").trim()}`);
}

/** Baseline: a plain node:http SSE fan-out of the same frames. */
async function runPlain(b: Bench, n: number, seconds: number): Promise<RunResult> {
  const open = new Set<ServerResponse>();
  let seq = 0;
  const plain = await listen(
    createServer((_req, res) => {
      res.writeHead(200, { "content-type": "text/event-stream" });
      // As mneme's stream starting live: the current position first (so every client checks ids from 0).
      res.write("retry: 2000\n: connected\n\nid: 0\n\n");
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
        // The fields (and so the size) of mneme's frame of the same event.
        const id = `0190a7a2-7d3c-7b5e-9f00-${String(seq).padStart(12, "0")}`;
        const event = {
          position: seq,
          eventUuid: id,
          domain: "Todo",
          name: "TodoCreated",
          aggregateUuid: id,
          version: 1,
          tenantUuid: TENANT,
          createdAt: Date.now() * 1_000_000,
          payload: { title: "t", sentAt: now() },
        };
        text += `id: ${seq}\ndata: ${JSON.stringify(event)}\n\n`;
      }
      for (const res of open) res.write(text);
    },
    () => open.size,
  );
  await plain.close();
  report(b, "plain node:http fan-out", plainRun);
  return plainRun;
}

/** mneme: `GET {t}/events/stream` served by toNodeListener(createHttpHandler(facade)). */
async function runMneme(b: Bench, n: number, seconds: number): Promise<RunResult> {
  const facade = createFacade({ appName: "subscriptions-bench" });
  registerTodo(facade);
  allowEventSubscriptions(facade, [TodoCreated]);
  await facade.start();
  const handler = createHttpHandler(facade, {
    resolveCredentials: async (_f, c) => (`${c.sessionUuid}.${c.sessionKey}` === TOKEN ? { ...reqCtx } : undefined),
    // 10 s of events may queue for a client before it is cut off (and resumes): a server for this load is set so.
    sse: { maxConnections: n + 10, maxQueuedEvents: 10_000 },
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
  return mnemeRun;
}
