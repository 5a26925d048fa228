/**
 * mneme/http: requests per second of a runtime list endpoint
 * (GET .../runtime/commands) and of a command endpoint
 * (POST .../commands/Todo/CreateTodo) through node:http on 127.0.0.1 with
 * autocannon (10 connections, bounded in requests and in seconds; client and
 * servers share this process and the machine's cores), in interleaved rounds
 * against a plain node:http handler answering JSON of the same size (the
 * baseline: the URL parsed and routed, the list serialised, the command's
 * body read, parsed and a result answered). Each mneme figure is served twice: by toNodeListener's direct
 * path (createHttpHandler's routes from node:http) and through the Fetch API
 * (a wrapped handler: a Request and a Response per request). Also, in-process:
 * the handler called with a Request against `facade.query` / `facade.dispatch`.
 * A fourth server, "plain node:http handler + facade", does the plain
 * handler's parsing and then calls `facade.query` / `facade.dispatch` itself
 * with the bench's request context (no credentials, no route table, no
 * adapter): its ratio to the plain handler is the most any adapter could
 * reach with the query and command path as it is (the ceiling), and mneme's
 * direct path against it is the adapter's own share. For POST, a fifth
 * server does the same on a second facade with the Todo domain and no
 * readmodel: the ceiling of the command path without its projection (so the
 * projection's share of the POST figure is read off one run; the process's
 * AsyncLocalStorage hooks, on since the first facade's readmodel ran, are paid
 * by it too).
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import autocannon from "autocannon";
import { v4 as uuidv4 } from "uuid";
import { createFacade } from "../src/app/facade.js";
import type { RequestContext } from "../src/model/types.js";
import { createHttpHandler, toNodeListener } from "../src/http/index.js";
import { CreateTodo, installTodo, registerTodo, Todo, TodoProjection } from "../examples/todo/todo-domain.js";
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

  const direct = await listen(toNodeListener(handler));
  // Any handler but createHttpHandler's own goes through Request and Response: what every request cost before.
  const viaFetch = await listen(toNodeListener((request) => handler(request)));
  const listPath = `/api/tenants/${TENANT}/runtime/commands`;
  const cmdPath = `/api/tenants/${TENANT}/commands/Todo/CreateTodo`;
  // The plain servers answer bodies of mneme's own shape and size: one list, and one command result per request.
  const listSample: unknown = await (await fetch(`${direct.url}${listPath}`, { headers })).json();
  const cmdSample = (await (
    await fetch(`${direct.url}${cmdPath}`, {
      method: "POST",
      headers: { ...headers, "content-type": "application/json" },
      body: JSON.stringify({ todoUuid: uuidv4(), title: "bench" }),
    })
  ).json()) as { commandUuid: string; events: { payload: unknown }[] };
  const plain = await listen(plainHandler(listSample, cmdSample));
  const withFacade = await listen(plainFacadeHandler(facade, (listSample as { pageSize: number }).pageSize));
  // The Todo domain without a readmodel: the projection is made (its queries need one) but never registered.
  const bare = createFacade({ appName: "http-bench-bare" });
  bare.registerDomain(Todo, (d) => installTodo(d, new TodoProjection(bare)));
  await bare.start();
  const withBareFacade = await listen(plainFacadeHandler(bare, (listSample as { pageSize: number }).pageSize));
  const servers = [direct, viaFetch, plain, withFacade];
  try {
    const seconds = 1;
    // Many short rounds: load from elsewhere on the machine falls on every server alike.
    const rounds = b.quick ? 2 : 8;
    const get: autocannon.Request = { method: "GET", headers };
    const [gDirect, gFetch, gPlain, gFacade] = await interleaved(servers, listPath, get, seconds, rounds);
    report(b, "GET runtime/commands, node:http direct", gDirect!, gPlain!, directList);
    report(b, "GET runtime/commands, node:http via Fetch", gFetch!, gPlain!, directList);
    b.value(
      "http",
      "GET plain node:http JSON handler (baseline)",
      gPlain!.rps,
      "req/s",
      `${gPlain!.total} in ${gPlain!.seconds.toFixed(2)} s`,
    );
    ceiling(b, "GET", gFacade!, gPlain!, gDirect!);
    const post: autocannon.Request = {
      method: "POST",
      headers: { ...headers, "content-type": "application/json" },
      setupRequest: (req) => ({ ...req, body: JSON.stringify({ todoUuid: uuidv4(), title: "bench" }) }),
    };
    const [pDirect, pFetch, pPlain, pFacade, pBare] = await interleaved([...servers, withBareFacade], cmdPath, post, seconds, rounds);
    report(b, "POST commands/Todo/CreateTodo, node:http direct", pDirect!, pPlain!, directCmd);
    report(b, "POST commands/Todo/CreateTodo, node:http via Fetch", pFetch!, pPlain!, directCmd);
    b.value(
      "http",
      "POST plain node:http JSON handler (baseline)",
      pPlain!.rps,
      "req/s",
      `${pPlain!.total} in ${pPlain!.seconds.toFixed(2)} s`,
    );
    ceiling(b, "POST", pFacade!, pPlain!, pDirect!);
    if (pBare!.non2xx > 0 || pBare!.errors > 0)
      throw new Error(`POST plain node:http handler + facade without readmodel: ${pBare!.non2xx} non-2xx answers, ${pBare!.errors} errors`);
    b.value(
      "http",
      "POST plain node:http handler + facade without readmodel",
      pBare!.rps,
      "req/s",
      `${pBare!.total} in ${pBare!.seconds.toFixed(2)} s, p99 ${pBare!.p99} ms`,
    );
    b.value("http", "  ceiling without the projection: (plain + facade, no readmodel) / plain", pBare!.rps / pPlain!.rps, "x");
  } finally {
    for (const s of [...servers, withBareFacade]) await s.close();
    await facade.stop();
    await bare.stop();
  }
}

interface Listening {
  url: string;
  close(): Promise<void>;
}

async function listen(listener: (req: IncomingMessage, res: ServerResponse) => unknown): Promise<Listening> {
  const server = createServer((req, res) => void listener(req, res));
  server.keepAliveTimeout = 10_000;
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** The plain servers' 200: the body serialised per request, mneme's content type and cache header. */
function answer(res: ServerResponse, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(200, {
    "content-type": "application/json; charset=utf-8",
    "cache-control": "no-store",
    "content-length": Buffer.byteLength(text),
  });
  res.end(text);
}

function notFound(res: ServerResponse): void {
  res.writeHead(404, { "content-length": 0 });
  res.end();
}

/**
 * The plain servers' parsing, as mneme's routes do it: every request's URL is
 * parsed (its path routed, its query read: `?page`, `?wait`); a POST's body is
 * read (one Buffer.concat) and parsed. `list` answers a GET of the list,
 * `command` a POST of a command with its parsed payload.
 */
function plainServer(list: (res: ServerResponse) => void, command: (res: ServerResponse, payload: unknown) => void) {
  return (req: IncomingMessage, res: ServerResponse) => {
    const url = new URL(req.url ?? "/", `http://${req.headers.host ?? "localhost"}`);
    if (req.method === "GET") {
      if (!url.pathname.endsWith("/runtime/commands") || url.searchParams.get("page") === "0") {
        notFound(res);
        return;
      }
      list(res);
      return;
    }
    if (!url.pathname.includes("/commands/") || url.searchParams.get("wait") === "true") {
      notFound(res);
      return;
    }
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => command(res, JSON.parse(Buffer.concat(chunks).toString("utf8"))));
  };
}

/**
 * The baseline: node:http and JSON alone, doing the parsing and serialising
 * mneme's routes do: GET answers the list (serialised per request), POST a
 * command result with a fresh id and the payload.
 */
function plainHandler(list: unknown, cmd: { commandUuid: string; events: { payload: unknown }[] }) {
  return plainServer(
    (res) => answer(res, list),
    (res, payload) => answer(res, { ...cmd, commandUuid: uuidv4(), events: cmd.events.map((e) => ({ ...e, payload })) }),
  );
}

/**
 * The ceiling: the plain handler's parsing (the same URL, query and body
 * handling), then the facade called directly with the bench's request
 * context, answering what mneme's routes answer (the list paged as the
 * default page, the command's id and events). No credential resolver, no
 * route table, no Host check, no content-type or body limits: what is left
 * of mneme's figure is the query and command path.
 */
function plainFacadeHandler(facade: ReturnType<typeof createFacade>, pageSize: number) {
  const fail = (res: ServerResponse, e: unknown) => {
    const text = JSON.stringify({ error: (e as Error).message });
    res.writeHead(500, { "content-type": "application/json; charset=utf-8", "content-length": Buffer.byteLength(text) });
    res.end(text);
  };
  return plainServer(
    (res) =>
      void facade.query({ domain: "Runtime", name: "ListCommands" }, {}, { reqCtx }).then(
        (all) => answer(res, { items: (all as unknown[]).slice(0, pageSize), total: (all as unknown[]).length, page: 1, pageSize }),
        (e: unknown) => fail(res, e),
      ),
    (res, payload) =>
      void facade.dispatch(CreateTodo, payload as { todoUuid: string; title: string }, { reqCtx }).then(
        (out) => {
          const body: Record<string, unknown> = { commandUuid: out.commandUuid, events: out.events };
          if (out.result !== undefined) body.result = out.result;
          answer(res, body);
        },
        (e: unknown) => fail(res, e),
      ),
  );
}

/** Rounds of `seconds` against each server in turn (rotating who goes first); sums per server. */
async function interleaved(
  servers: readonly Listening[],
  path: string,
  request: autocannon.Request,
  seconds: number,
  rounds: number,
): Promise<CannonResult[]> {
  const sums = servers.map(() => ({ rps: 0, total: 0, seconds: 0, p99: 0, non2xx: 0, errors: 0 }));
  for (let r = 0; r < rounds; r++) {
    for (let k = 0; k < servers.length; k++) {
      const i = (k + r) % servers.length;
      const one = await cannon(`${servers[i]!.url}${path}`, seconds, request);
      const sum = sums[i]!;
      sum.total += one.total;
      sum.seconds += one.seconds;
      sum.p99 = Math.max(sum.p99, one.p99);
      sum.non2xx += one.non2xx;
      sum.errors += one.errors;
    }
  }
  for (const s of sums) s.rps = s.total / s.seconds;
  return sums;
}

interface CannonResult {
  rps: number;
  total: number;
  seconds: number;
  p99: number;
  non2xx: number;
  errors: number;
}

/** autocannon with 10 connections for `seconds` (its own sampling counts whole seconds, so runs are timed, not counted). */
async function cannon(url: string, seconds: number, request: autocannon.Request): Promise<CannonResult> {
  const t0 = performance.now();
  const result = await new Promise<autocannon.Result>((resolve, reject) => {
    autocannon({ url, connections: 10, duration: seconds, requests: [request] }, (err, r) => (err ? reject(err) : resolve(r)));
  });
  const elapsed = (performance.now() - t0) / 1000;
  return {
    rps: result.requests.total / elapsed,
    total: result.requests.total,
    seconds: elapsed,
    p99: result.latency.p99,
    non2xx: result.non2xx,
    errors: result.errors,
  };
}

function report(b: Bench, name: string, r: CannonResult, plain: CannonResult, direct: { ops: number; seconds: number }): void {
  if (r.non2xx > 0 || r.errors > 0) throw new Error(`${name}: ${r.non2xx} non-2xx answers, ${r.errors} errors`);
  if (plain.non2xx > 0 || plain.errors > 0)
    throw new Error(`${name}: the baseline gave ${plain.non2xx} non-2xx answers, ${plain.errors} errors`);
  b.value("http", name, r.rps, "req/s", `${r.total} in ${r.seconds.toFixed(2)} s, p99 ${r.p99} ms`);
  b.value("http", "  / plain node:http JSON handler", r.rps / plain.rps, "x");
  b.value("http", "  / the facade called directly (in-process)", r.rps / (direct.ops / direct.seconds), "x");
}

/** The plain handler + facade server: its rate, its ratio to the plain handler (the ceiling), mneme direct against it (the adapter's share). */
function ceiling(b: Bench, method: string, withFacade: CannonResult, plain: CannonResult, direct: CannonResult): void {
  if (withFacade.non2xx > 0 || withFacade.errors > 0)
    throw new Error(`${method} plain node:http handler + facade: ${withFacade.non2xx} non-2xx answers, ${withFacade.errors} errors`);
  b.value(
    "http",
    `${method} plain node:http handler + facade (ceiling)`,
    withFacade.rps,
    "req/s",
    `${withFacade.total} in ${withFacade.seconds.toFixed(2)} s, p99 ${withFacade.p99} ms`,
  );
  b.value("http", "  ceiling: (plain + facade) / plain node:http JSON handler", withFacade.rps / plain.rps, "x");
  b.value("http", "  adapter: mneme direct / (plain + facade)", direct.rps / withFacade.rps, "x");
}

function overhead(b: Bench, what: string, secondsPerRequest: number): void {
  b.value("http", `adapter overhead per ${what} request (in-process)`, secondsPerRequest * 1e6, "µs");
}
