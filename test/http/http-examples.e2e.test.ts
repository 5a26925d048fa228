/**
 * Starts every HTTP example (examples/http-*) as its own process on a free
 * port and drives it over the network: log in as the administrator, list the
 * runtime's commands, run a command, see it on the SSE stream, log out.
 * The NestJS example also serves its own controller beside the mounted handler.
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { request as httpsRequest } from "node:https";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { newUuid } from "mneme";

const ADMIN = { email: "admin@example.org", password: "an example admin password" };
const running: ChildProcess[] = [];
const tmp = mkdtempSync(join(tmpdir(), "mneme-http-examples-"));
afterAll(() => {
  for (const p of running) if (p.exitCode === null) p.kill("SIGKILL");
  rmSync(tmp, { recursive: true, force: true });
});

/** Spawns an example with tsx and resolves with its URL once it prints "listening on". */
function start(file: string, env: Record<string, string> = {}): Promise<{ url: string; proc: ChildProcess; output: () => string }> {
  const proc = spawn(process.execPath, ["--import", "tsx", file], {
    env: { ...process.env, PORT: "0", HOST: "127.0.0.1", MNEME_ADMIN_EMAIL: ADMIN.email, MNEME_ADMIN_PASSWORD: ADMIN.password, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  running.push(proc);
  let out = "";
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${file} did not start:\n${out}`)), 30_000);
    const onData = (chunk: Buffer) => {
      out += chunk.toString();
      const m = /listening on (https?:\/\/\S+)/.exec(out);
      if (m !== null) {
        clearTimeout(timer);
        resolve({ url: m[1]!, proc, output: () => out });
      }
    };
    proc.stdout.on("data", onData);
    proc.stderr.on("data", (c: Buffer) => (out += c.toString()));
    proc.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`${file} exited with ${code}:\n${out}`));
    });
  });
}

function stop(proc: ChildProcess): Promise<number | null> {
  return new Promise((resolve) => {
    if (proc.exitCode !== null) return void resolve(proc.exitCode);
    proc.once("exit", (code) => resolve(code));
    proc.kill("SIGTERM");
  });
}

type Fetch = (
  url: string,
  init?: { method?: string; headers?: Record<string, string>; body?: string },
) => Promise<{ status: number; text: string }>;
const plainFetch: Fetch = async (url, init) => {
  const r = await fetch(url, init);
  return { status: r.status, text: await r.text() };
};

/** The walk every example must serve. */
async function exercise(url: string, doFetch: Fetch): Promise<void> {
  const json = { "content-type": "application/json" };
  const login = await doFetch(`${url}/api/sessions`, { method: "POST", headers: json, body: JSON.stringify(ADMIN) });
  expect(login.status, login.text).toBe(201);
  const session = JSON.parse(login.text) as { token: string; identities: { identityUuid: string; tenantUuid: string }[] };
  const { identityUuid, tenantUuid } = session.identities[0]!;
  const auth = { authorization: `Bearer ${session.token}`, "x-identity-uuid": identityUuid };

  const list = await doFetch(`${url}/api/tenants/${tenantUuid}/runtime/commands?pageSize=500`, { headers: auth });
  expect(list.status).toBe(200);
  const names = (JSON.parse(list.text) as { items: { domainCmdName: string }[] }).items.map((c) => c.domainCmdName);
  expect(names).toEqual(expect.arrayContaining(["CreateTodo", "RegisterAccount", "ControlEventHandler"]));

  const created = await doFetch(`${url}/api/tenants/${tenantUuid}/commands/Todo/CreateTodo?wait=true`, {
    method: "POST",
    headers: { ...auth, ...json },
    body: JSON.stringify({ todoUuid: newUuid(), title: "from an example" }),
  });
  expect(created.status, created.text).toBe(200);
  const bad = await doFetch(`${url}/api/tenants/${tenantUuid}/commands/Todo/CreateTodo`, {
    method: "POST",
    headers: { ...auth, ...json },
    body: "{oops",
  });
  expect(bad.status).toBe(400);
  expect(JSON.parse(bad.text).code).toBe("INVALID_REQUEST");
  expect((await doFetch(`${url}/api/tenants/${tenantUuid}/runtime/commands`)).status).toBe(401);

  const out = await doFetch(`${url}/api/sessions/current`, { method: "DELETE", headers: auth });
  expect(out.status).toBe(204);
}

/** Opens the SSE stream, runs a command, and resolves with the first event block that names it. */
async function sseSeesCommand(url: string): Promise<string> {
  const json = { "content-type": "application/json" };
  const login = (await (await fetch(`${url}/api/sessions`, { method: "POST", headers: json, body: JSON.stringify(ADMIN) })).json()) as {
    token: string;
    identities: { identityUuid: string; tenantUuid: string }[];
  };
  const { identityUuid, tenantUuid } = login.identities[0]!;
  const auth = { authorization: `Bearer ${login.token}`, "x-identity-uuid": identityUuid };
  const ac = new AbortController();
  const res = await fetch(`${url}/api/tenants/${tenantUuid}/runtime/sse`, { headers: auth, signal: ac.signal });
  expect(res.status).toBe(200);
  const reader = res.body!.getReader();
  await reader.read(); // "retry:" and the connected comment: the subscription is live
  await fetch(`${url}/api/tenants/${tenantUuid}/commands/Todo/CreateTodo`, {
    method: "POST",
    headers: { ...auth, ...json },
    body: JSON.stringify({ todoUuid: newUuid(), title: "seen on the stream" }),
  });
  const decoder = new TextDecoder();
  let text = "";
  while (!/"name":"CreateTodo"/.test(text)) {
    const { done, value } = await reader.read();
    if (done) break;
    text += decoder.decode(value, { stream: true });
  }
  ac.abort();
  return text;
}

const frameworks = [
  ["node:http", "examples/http-node/server.ts"],
  ["Express", "examples/http-express/server.ts"],
  ["Fastify", "examples/http-fastify/server.ts"],
  ["Hono", "examples/http-hono/server.ts"],
] as const;

describe("HTTP examples", () => {
  for (const [name, file] of frameworks) {
    it(`${name}: ${file} serves the demo, including SSE, and stops on SIGTERM`, async () => {
      const { url, proc, output } = await start(file);
      await exercise(url, plainFetch);
      const block = await sseSeesCommand(url);
      expect(block).toMatch(/^id: \d+$/m);
      expect(await stop(proc), output()).toBe(0);
    }, 60_000);
  }

  it("NestJS: examples/nestjs/main.ts serves its controller and the mounted mneme handler, and shuts down on SIGTERM", async () => {
    const { url, proc, output } = await start("examples/nestjs/main.ts");
    // mneme's own routes under /mneme: the same walk as every other host, SSE included.
    await exercise(`${url}/mneme`, plainFetch);
    expect(await sseSeesCommand(`${url}/mneme`)).toMatch(/^id: \d+$/m);

    const json = { "content-type": "application/json" };
    const login = await fetch(`${url}/mneme/api/sessions`, { method: "POST", headers: json, body: JSON.stringify(ADMIN) });
    expect(login.status).toBe(201);
    const session = (await login.json()) as { token: string; identities: { identityUuid: string; tenantUuid: string }[] };
    const { identityUuid, tenantUuid } = session.identities[0]!;
    const auth = { authorization: `Bearer ${session.token}`, "x-identity-uuid": identityUuid };

    // The controller: a command dispatched through the facade with the caller's context, read back with a query.
    const created = await fetch(`${url}/todos`, {
      method: "POST",
      headers: { ...auth, ...json },
      body: JSON.stringify({ title: "from Nest" }),
    });
    expect(created.status).toBe(201);
    const { todoUuid } = (await created.json()) as { todoUuid: string };
    const read = await fetch(`${url}/todos/${todoUuid}?history=true`, { headers: auth });
    expect(read.status).toBe(200);
    const todo = (await read.json()) as {
      tenantUuid: string;
      model: { title: string; done: boolean };
      historyEvents: { senderIdentityUuid: string }[];
    };
    expect(todo).toMatchObject({ tenantUuid, model: { title: "from Nest", done: false } });
    expect(todo.historyEvents.map((e) => e.senderIdentityUuid)).toEqual([identityUuid]);
    expect((await fetch(`${url}/todos/${todoUuid}/complete`, { method: "POST", headers: auth })).status).toBe(204);
    const list = (await (await fetch(`${url}/todos`, { headers: auth })).json()) as {
      items: { aggregateUuid: string; model: { done: boolean } }[];
    };
    expect(list.items.find((t) => t.aggregateUuid === todoUuid)?.model.done).toBe(true);
    // The same todo through the mounted mneme handler's generic query route.
    const viaMneme = await fetch(`${url}/mneme/api/tenants/${tenantUuid}/queries/Todo/GetTodo`, {
      method: "POST",
      headers: { ...auth, ...json },
      body: JSON.stringify({ todoUuid }),
    });
    expect(((await viaMneme.json()) as { model: { title: string } }).model.title).toBe("from Nest");

    // mneme's errors through the controller: validation 400, no session 401, another tenant's or no todo 404.
    const invalid = await fetch(`${url}/todos`, { method: "POST", headers: { ...auth, ...json }, body: JSON.stringify({ title: "" }) });
    expect(invalid.status).toBe(400);
    expect(await invalid.json()).toMatchObject({ code: "VALIDATION_FAILED", errors: [{ pointer: "/title" }] });
    const anonymous = await fetch(`${url}/todos`, { method: "POST", headers: json, body: JSON.stringify({ title: "x" }) });
    expect(anonymous.status).toBe(401);
    expect(anonymous.headers.get("www-authenticate")).toBe("Bearer");
    expect((await fetch(`${url}/todos/${todoUuid}`, { headers: { authorization: "Bearer not.valid" } })).status).toBe(401);
    expect((await fetch(`${url}/todos/${newUuid()}`, { headers: auth })).status).toBe(404);

    // The mounted handler's Runtime routes: system info with an admin session, 401 without one.
    const info = await fetch(`${url}/mneme/api/tenants/${tenantUuid}/runtime/system-info`, { headers: auth });
    expect(info.status).toBe(200);
    expect(await info.json()).toMatchObject({ appName: "todo-nest" });
    expect((await fetch(`${url}/mneme/api/tenants/${tenantUuid}/runtime/system-info`)).status).toBe(401);

    // Shutdown with an event stream open: Nest closes the server (forceCloseConnections), then the module stops the facade.
    const sse = await fetch(`${url}/mneme/api/tenants/${tenantUuid}/runtime/sse`, { headers: auth });
    expect(sse.status).toBe(200);
    const reader = sse.body!.getReader();
    await reader.read();
    const exit = await stop(proc);
    expect(output()).toContain("mneme stopped");
    // enableShutdownHooks() re-raises the signal once the hooks have run (an error in them would exit with 1).
    expect([exit, proc.signalCode], output()).toEqual([null, "SIGTERM"]);
    await reader.read().catch(() => undefined);
  }, 90_000);

  it("node:https: examples/http-https/server.ts serves the demo over TLS", async () => {
    const key = join(tmp, "key.pem");
    const cert = join(tmp, "cert.pem");
    try {
      execFileSync(
        "openssl",
        [
          "req",
          "-x509",
          "-newkey",
          "rsa:2048",
          "-nodes",
          "-keyout",
          key,
          "-out",
          cert,
          "-days",
          "1",
          "-subj",
          "/CN=127.0.0.1",
          "-addext",
          "subjectAltName=IP:127.0.0.1",
        ],
        { stdio: "ignore" },
      );
    } catch (e) {
      throw new Error(`openssl is needed to make a test certificate: ${String(e)}`, { cause: e });
    }
    const { url, proc, output } = await start("examples/http-https/server.ts", { TLS_KEY_FILE: key, TLS_CERT_FILE: cert });
    expect(url.startsWith("https://127.0.0.1:")).toBe(true);
    const { readFileSync } = await import("node:fs");
    const ca = readFileSync(cert);
    const tlsFetch: Fetch = (target, init = {}) =>
      new Promise((resolve, reject) => {
        const req = httpsRequest(target, { method: init.method ?? "GET", headers: init.headers ?? {}, ca }, (res) => {
          let text = "";
          res.on("data", (c: Buffer) => (text += c.toString()));
          res.on("end", () => resolve({ status: res.statusCode ?? 0, text }));
          res.on("error", reject);
        });
        req.on("error", reject);
        req.end(init.body);
      });
    await exercise(url, tlsFetch);
    expect(await stop(proc), output()).toBe(0);
  }, 60_000);
});
