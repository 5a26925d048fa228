/**
 * The HTTP handler served by the runtime's own server (Bun.serve, Deno.serve;
 * node:http through toNodeListener on Node) on 127.0.0.1, checked with fetch:
 * sign in, the Runtime's command list, a command, a query, the system-event
 * stream's first event, errors, sign out; in memory, on SQLite through the
 * runtime's own driver, and on Postgres, where a session made on one instance
 * is accepted by another at once.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { type Facade, createFacade, newUuid } from "mneme";
import { accountRoutes, registerDefaults } from "mneme/defaults";
import { createHttpHandler } from "mneme/http";
import { createMemoryBackends } from "mneme/memory";
import { createPostgresBackends } from "mneme/postgres";
import { createSqliteBackends } from "mneme/sqlite";
import type { Engine } from "mneme/store";
import { registerTodo } from "../../examples/todo/todo-domain.js";
import { postgresScratch } from "../support/postgres-scratch.js";
import { SseClient } from "../support/sse-client.js";
import { type Served, currentRuntime, runtimeSqliteDriver, serveFetch } from "./runtime.js";

const pg = postgresScratch("mneme_rt_http");
const dir = mkdtempSync(join(tmpdir(), "mneme-rt-http-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const ADMIN = { email: "admin@example.org", password: "admin-password-1" };
const json = { "content-type": "application/json" };
const SERVER_OF = { bun: "Bun.serve", deno: "Deno.serve", node: "node:http" } as const;

interface Instance {
  readonly facade: Facade;
  readonly served: Served;
}
const running: Instance[] = [];
afterEach(async () => {
  for (const i of running.splice(0).reverse()) {
    await i.served.close();
    await i.facade.stop();
  }
});

/** The demo app (built-in domains, the Todo domain, system events) on `backend`, served on a free port. */
async function serveApp(backend: Engine, via: "native" | "node:http" = "native"): Promise<Instance> {
  const facade = createFacade({ appName: `http-${currentRuntime()}`, version: "1.0.0", systemEvents: true, backend });
  // Cheap scrypt: the flow is under test here, not the hashing cost.
  await registerDefaults(facade, { admin: ADMIN, passwordHashing: { N: 1024, r: 8, p: 1 } });
  registerTodo(facade);
  await facade.start();
  const served = await serveFetch(createHttpHandler(facade, { modules: [accountRoutes()], sse: { maxConnections: 1 } }), via);
  expect(served.server).toBe(via === "native" ? SERVER_OF[currentRuntime()] : "node:http");
  const instance = { facade, served };
  running.push(instance);
  return instance;
}

interface Session {
  readonly tenantUuid: string;
  readonly auth: Record<string, string>;
}
async function signIn(url: string): Promise<Session> {
  const res = await fetch(`${url}/api/sessions`, { method: "POST", headers: json, body: JSON.stringify(ADMIN) });
  const text = await res.text();
  expect(res.status, text).toBe(201);
  const body = JSON.parse(text) as { token: string; identities: { identityUuid: string; tenantUuid: string }[] };
  const { identityUuid, tenantUuid } = body.identities[0]!;
  return { tenantUuid, auth: { authorization: `Bearer ${body.token}`, "x-identity-uuid": identityUuid } };
}

/** Opens the stream until it is accepted (the server has let the last one go); fails after 10 s. */
async function untilOpens(url: string, headers: Record<string, string>): Promise<void> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const c = await SseClient.open(url, headers);
    await c.close();
    if (c.status === 200) return;
    expect(c.status).toBe(503);
    if (Date.now() > deadline) throw new Error("the server still counts a stream whose client went away");
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** The walk: Runtime list, SSE, a command, a query, the stream's first event, errors, sign out. */
async function walk(url: string): Promise<void> {
  const { tenantUuid, auth } = await signIn(url);
  const t = `${url}/api/tenants/${tenantUuid}`;

  const commands = await fetch(`${t}/runtime/commands?pageSize=500`, { headers: auth });
  expect(commands.status).toBe(200);
  const names = ((await commands.json()) as { items: { domainCmdName: string }[] }).items.map((c) => c.domainCmdName);
  expect(names).toEqual(expect.arrayContaining(["CreateTodo", "RegisterAccount", "ControlEventHandler"]));

  const sse = await SseClient.open(`${t}/runtime/sse`, auth);
  try {
    expect(sse.status).toBe(200);
    expect(sse.response.headers.get("content-type")).toMatch(/^text\/event-stream/);
    // The stream opens with the producer's last id: from then on the subscription is live.
    await sse.until((c) => c.lastEventId !== undefined);

    const todoUuid = newUuid();
    const created = await fetch(`${t}/commands/Todo/CreateTodo?wait=true`, {
      method: "POST",
      headers: { ...auth, ...json },
      body: JSON.stringify({ todoUuid, title: `served by ${currentRuntime()}` }),
    });
    const createdText = await created.text();
    expect(created.status, createdText).toBe(200);
    const result = JSON.parse(createdText) as { commandUuid: string; events: { name: string }[] };
    expect(result.events.map((e) => e.name)).toEqual(["TodoCreated"]);

    const got = await fetch(`${t}/queries/Todo/GetTodo`, {
      method: "POST",
      headers: { ...auth, ...json },
      body: JSON.stringify({ todoUuid }),
    });
    expect(got.status).toBe(200);
    expect(((await got.json()) as { model: { title: string } }).model.title).toBe(`served by ${currentRuntime()}`);

    await sse.until((c) => c.events.some((e) => e.data.kind === "CommandExecuted" && e.data.data.commandUuid === result.commandUuid));
    const first = sse.events[0]!;
    expect(first.data.kind).toBe("CommandExecuted");
    expect(first.data.data).toMatchObject({ commandUuid: result.commandUuid, domain: "Todo", name: "CreateTodo" });
    expect(first.id).toBeGreaterThan(0);
    // One stream at a time (maxConnections 1): a second is refused while the first is open.
    const second = await fetch(`${t}/runtime/sse`, { headers: auth });
    expect(second.status).toBe(503);
    await second.body?.cancel();
  } finally {
    await sse.close();
  }
  // The server sees the client go (request.signal on this runtime's server) and frees the slot.
  await untilOpens(`${t}/runtime/sse`, auth);

  const bad = await fetch(`${t}/commands/Todo/CreateTodo`, { method: "POST", headers: { ...auth, ...json }, body: "{oops" });
  expect(bad.status).toBe(400);
  expect(bad.headers.get("content-type")).toMatch(/^application\/problem\+json/);
  expect(((await bad.json()) as { code: string }).code).toBe("INVALID_REQUEST");
  expect((await fetch(`${t}/runtime/commands`)).status).toBe(401);

  expect((await fetch(`${url}/api/sessions/current`, { method: "DELETE", headers: auth })).status).toBe(204);
  expect((await fetch(`${t}/runtime/commands`, { headers: auth })).status).toBe(401);
}

describe(`HTTP on ${currentRuntime()}'s own server`, () => {
  it("in memory: sign in, Runtime list, command, query, the SSE stream's first event, errors, sign out", async () => {
    const { served } = await serveApp(createMemoryBackends());
    await walk(served.url);
  });

  it("in memory through the runtime's node:http and toNodeListener: the same walk", async () => {
    const { served } = await serveApp(createMemoryBackends(), "node:http");
    await walk(served.url);
  });

  it(`on SQLite (${runtimeSqliteDriver()}): the same walk`, async () => {
    const { served } = await serveApp(createSqliteBackends({ filename: join(dir, "app.db"), driver: runtimeSqliteDriver() }));
    await walk(served.url);
  });

  it("on Postgres: the same walk, and a session made on one instance is accepted by another at once", async () => {
    const schema = pg.newSchema();
    const a = await serveApp(createPostgresBackends({ pool: pg.pool, schema }));
    const b = await serveApp(createPostgresBackends({ pool: pg.pool, schema }));
    await walk(a.served.url);
    const { tenantUuid, auth } = await signIn(a.served.url);
    const info = await fetch(`${b.served.url}/api/tenants/${tenantUuid}/runtime/system-info`, { headers: auth });
    expect(info.status).toBe(200);
    expect(((await info.json()) as { appName: string }).appName).toBe(`http-${currentRuntime()}`);
  });
});
