/**
 * mneme/http: requests per second of a runtime list endpoint
 * (GET .../runtime/commands) and of a command endpoint
 * (POST .../commands/Todo/CreateTodo) through node:http on 127.0.0.1 with
 * autocannon (10 connections, bounded in requests and in seconds; client and
 * server share this process and the machine's cores), and the adapter's
 * overhead in the same run: the same list and command through the handler
 * in-process (a Request in, a Response read out) against `facade.query` /
 * `facade.dispatch` called directly.
 */
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import autocannon from "autocannon";
import { v4 as uuidv4 } from "uuid";
import { createFacade } from "../src/app/facade.js";
import type { RequestContext } from "../src/model/types.js";
import { createHttpHandler, toNodeListener } from "../src/http/index.js";
import { CreateTodo, registerTodo } from "../examples/todo/todo-domain.js";
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

export default async function httpBench(b: Bench): Promise<void> {
  const facade = createFacade({ appName: "http-bench" });
  registerTodo(facade);
  await facade.start();
  // A resolver with no I/O: the figures are the adapter's, not a session store's.
  const handler = createHttpHandler(facade, {
    resolveCredentials: async (_f, c) => (`${c.sessionUuid}.${c.sessionKey}` === TOKEN ? { ...reqCtx } : undefined),
  });
  const inProcess = b.quick ? 2000 : 20_000;
  const listUrl = `http://bench/api/tenants/${TENANT}/runtime/commands`;

  // Warm the JIT on both paths first, so neither side pays for compilation in its figure.
  for (let i = 0; i < 500; i++) {
    await facade.query({ domain: "Runtime", name: "ListCommands" }, {}, { reqCtx });
    await (await handler(new Request(listUrl, { headers }))).text();
  }
  const directList = await b.measure(
    "http",
    "facade.query ListCommands (direct, baseline)",
    inProcess,
    async () => {
      for (let i = 0; i < inProcess; i++) JSON.stringify(await facade.query({ domain: "Runtime", name: "ListCommands" }, {}, { reqCtx }));
    },
    "req/s",
  );
  const handlerList = await b.measure(
    "http",
    "handler GET runtime/commands (in-process)",
    inProcess,
    async () => {
      for (let i = 0; i < inProcess; i++) {
        const res = await handler(new Request(listUrl, { headers }));
        if (res.status !== 200) throw new Error(`status ${res.status}`);
        await res.text();
      }
    },
    "req/s",
  );
  b.compare(handlerList, directList);
  overhead(b, "list", handlerList.seconds / handlerList.ops - directList.seconds / directList.ops);

  const cmdUrl = `http://bench/api/tenants/${TENANT}/commands/Todo/CreateTodo`;
  const postCreate = () =>
    handler(
      new Request(cmdUrl, {
        method: "POST",
        headers: { ...headers, "content-type": "application/json" },
        body: JSON.stringify({ todoUuid: uuidv4(), title: "bench" }),
      }),
    );
  for (let i = 0; i < 500; i++) {
    await facade.dispatch(CreateTodo, { todoUuid: uuidv4(), title: "warm" }, { reqCtx });
    await (await postCreate()).text();
  }
  const directCmd = await b.measure(
    "http",
    "facade.dispatch CreateTodo (direct, baseline)",
    inProcess,
    async () => {
      for (let i = 0; i < inProcess; i++)
        JSON.stringify(await facade.dispatch(CreateTodo, { todoUuid: uuidv4(), title: "bench" }, { reqCtx }));
    },
    "req/s",
  );
  const handlerCmd = await b.measure(
    "http",
    "handler POST commands/Todo/CreateTodo (in-process)",
    inProcess,
    async () => {
      for (let i = 0; i < inProcess; i++) {
        const res = await postCreate();
        if (res.status !== 200) throw new Error(`status ${res.status}: ${await res.text()}`);
        await res.text();
      }
    },
    "req/s",
  );
  b.compare(handlerCmd, directCmd);
  overhead(b, "command", handlerCmd.seconds / handlerCmd.ops - directCmd.seconds / directCmd.ops);

  const nodeListener = toNodeListener(handler);
  const server = createServer((req, res) => void nodeListener(req, res));
  server.keepAliveTimeout = 10_000;
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  try {
    const amount = b.quick ? 3000 : 30_000;
    const list = await cannon(`${base}/api/tenants/${TENANT}/runtime/commands`, amount, { method: "GET", headers });
    report(b, "GET runtime/commands via node:http (autocannon)", list, directList);
    const cmd = await cannon(`${base}/api/tenants/${TENANT}/commands/Todo/CreateTodo`, amount, {
      method: "POST",
      headers: { ...headers, "content-type": "application/json" },
      setupRequest: (req) => ({ ...req, body: JSON.stringify({ todoUuid: uuidv4(), title: "bench" }) }),
    });
    report(b, "POST commands/Todo/CreateTodo via node:http (autocannon)", cmd, directCmd);
  } finally {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
    await facade.stop();
  }
}

interface CannonResult {
  rps: number;
  total: number;
  seconds: number;
  p99: number;
  non2xx: number;
  errors: number;
}

/** autocannon with 10 connections: `amount` requests at most, and 30 s at most. */
async function cannon(url: string, amount: number, request: autocannon.Request): Promise<CannonResult> {
  let stop: ReturnType<typeof setTimeout> | undefined;
  const t0 = performance.now();
  const result = await new Promise<autocannon.Result>((resolve, reject) => {
    const instance = autocannon({ url, connections: 10, amount, requests: [request] }, (err, r) => (err ? reject(err) : resolve(r)));
    stop = setTimeout(() => instance.stop(), 30_000);
  });
  clearTimeout(stop);
  // Wall time of our own: autocannon's duration is counted in whole sampling ticks.
  const seconds = (performance.now() - t0) / 1000;
  return {
    rps: result.requests.total / seconds,
    total: result.requests.total,
    seconds,
    p99: result.latency.p99,
    non2xx: result.non2xx,
    errors: result.errors,
  };
}

function report(b: Bench, name: string, r: CannonResult, direct: { ops: number; seconds: number }): void {
  if (r.non2xx > 0 || r.errors > 0) throw new Error(`${name}: ${r.non2xx} non-2xx answers, ${r.errors} errors`);
  b.value("http", name, r.rps, "req/s", `${r.total} in ${r.seconds.toFixed(2)} s, p99 ${r.p99} ms`);
  b.value("http", `  ${name.split(" via")[0]} over the network / direct`, r.rps / (direct.ops / direct.seconds), "x");
}

function overhead(b: Bench, what: string, secondsPerRequest: number): void {
  b.value("http", `adapter overhead per ${what} request (in-process)`, secondsPerRequest * 1e6, "µs");
}
