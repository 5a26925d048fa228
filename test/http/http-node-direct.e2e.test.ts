/**
 * What toNodeListener's direct path adds: a createHttpHandler handler is served
 * from node:http without a Fetch Request or Response; anything its routes do
 * not match goes to the Fetch handler; request bodies are read from the
 * IncomingMessage within the limits, an unread or refused body is drained so
 * the connection is reused, and a client that goes away mid-body dispatches
 * nothing; onError still gets a Request.
 */
import { once } from "node:events";
import { request as httpRequest, Agent, type ServerResponse } from "node:http";
import { connect } from "node:net";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { type Facade, MnemeError, createFacade, defineDomain, newUuid } from "mneme";
import type { HttpRouteModule } from "mneme/http";
import { registerTodo } from "../../examples/todo/todo-domain.js";
import { HTTP_PATHS, TENANT_A, USER, call, serve, testAuthorizer, type TestServer } from "../support/http-fixture.js";

let facade: Facade;
let srv: TestServer;
const serverErrors: { error: unknown; request: Request }[] = [];
const todos = `/api/tenants/${TENANT_A}/commands/Todo/CreateTodo`;
const list = `/api/tenants/${TENANT_A}/runtime/commands`;

// A query that fails with a plain error: a 500 whose detail is generic, and onError is told.
const Probe = defineDomain("Probe", { description: "HTTP probes" });
const Crash = Probe.query<Record<string, never>, string>("Crash", { description: "Throws a plain error" });
Probe.handleQuery(Crash, () => {
  throw new Error("secret internals");
});

beforeAll(async () => {
  facade = createFacade({ appName: "http-direct", systemEvents: true, authorizer: testAuthorizer });
  registerTodo(facade);
  facade.registerDomain(Probe);
  await facade.start();
  srv = await serve(facade, { maxBodyBytes: 1000, onError: (error, request) => serverErrors.push({ error, request }) }, "direct");
});
afterAll(async () => {
  await srv.close();
  await facade.stop();
});

/** Counts the Fetch Requests and Responses made while `fn` runs (the globals are wrapped, then restored). */
async function countingFetchObjects(fn: () => Promise<void>): Promise<{ requests: number; responses: number }> {
  const counts = { requests: 0, responses: 0 };
  const { Request: OriginalRequest, Response: OriginalResponse } = globalThis;
  globalThis.Request = class extends OriginalRequest {
    constructor(...args: ConstructorParameters<typeof OriginalRequest>) {
      super(...args);
      counts.requests++;
    }
  };
  globalThis.Response = class extends OriginalResponse {
    constructor(...args: ConstructorParameters<typeof OriginalResponse>) {
      super(...args);
      counts.responses++;
    }
  };
  try {
    await fn();
  } finally {
    globalThis.Request = OriginalRequest;
    globalThis.Response = OriginalResponse;
  }
  return counts;
}

/** A request with node's client, on an agent of one keep-alive socket; tells whether that socket was reused. */
function send(
  agent: Agent,
  method: string,
  path: string,
  headers: Record<string, string>,
  body?: string,
): Promise<{ status: number; text: string; reused: boolean }> {
  const { port } = new URL(srv.url);
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: "127.0.0.1", port, method, path, headers, agent }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString(), reused: req.reusedSocket }));
    });
    req.on("error", reject);
    req.end(body);
  });
}

const agents: Agent[] = [];
afterEach(() => {
  for (const a of agents.splice(0)) a.destroy();
});
function oneSocket(): Agent {
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  agents.push(agent);
  return agent;
}

describe("toNodeListener's direct path", () => {
  it("answers mneme's routes with no Fetch Request or Response; a path none matches goes through the Fetch handler", async () => {
    const direct = await countingFetchObjects(async () => {
      const r = await call(srv.url, "GET", list, { headers: USER.headers });
      expect(r.status).toBe(200);
      const c = await call(srv.url, "POST", todos, { headers: USER.headers, body: { todoUuid: newUuid(), title: "direct" } });
      expect(c.status).toBe(200);
    });
    expect(direct).toEqual({ requests: 0, responses: 0 });

    const fallback = await countingFetchObjects(async () => {
      const r = await call(srv.url, "GET", "/no/such/route");
      expect(r.status).toBe(404);
      expect(r.body.code).toBe("NOT_FOUND");
    });
    // The Fetch handler answered: one Request in, one Response out.
    expect(fallback).toEqual({ requests: 1, responses: 1 });

    // The same route through the Fetch path (a wrapped handler) makes both, so the count above means something.
    const viaFetch = await serve(facade, {}, "fetch");
    try {
      const bridged = await countingFetchObjects(async () => {
        expect((await call(viaFetch.url, "GET", list, { headers: USER.headers })).status).toBe(200);
      });
      expect(bridged).toEqual({ requests: 1, responses: 1 });
    } finally {
      await viaFetch.close();
    }
  });

  it("the query is read as the URL parser reads it on both paths: after `??`, the parameter's name starts with `?`", async () => {
    const viaFetch = await serve(facade, {}, "fetch");
    try {
      for (const url of [srv.url, viaFetch.url]) {
        const one = await call(url, "GET", `${list}?pageSize=1`, { headers: USER.headers });
        expect(one.body.pageSize, url).toBe(1);
        const other = await call(url, "GET", `${list}??pageSize=1`, { headers: USER.headers });
        expect(other.status, url).toBe(200);
        expect(other.body.pageSize, url).not.toBe(1);
      }
    } finally {
      await viaFetch.close();
    }
  });

  it("a refused body is drained, not read: 401 and 413 leave the connection usable for the next request", async () => {
    const agent = oneSocket();
    const big = JSON.stringify({ title: "x".repeat(5000) });
    const anon = await send(agent, "POST", todos, { "content-type": "application/json" }, big);
    expect(anon.status).toBe(401);
    const declared = await send(agent, "POST", todos, { ...USER.headers, "content-type": "application/json" }, big);
    expect(declared.status).toBe(413);
    expect(declared.reused).toBe(true);
    const after = await send(agent, "GET", list, USER.headers);
    expect(after.status).toBe(200);
    expect(after.reused).toBe(true);
  });

  it("a chunked body past maxBodyBytes is 413 as soon as it passes the limit, and the connection goes on", async () => {
    const agent = oneSocket();
    const { port } = new URL(srv.url);
    const answer = await new Promise<{ status: number; text: string }>((resolve, reject) => {
      const req = httpRequest(
        { host: "127.0.0.1", port, method: "POST", path: todos, agent, headers: { ...USER.headers, "content-type": "application/json" } },
        (res) => {
          const chunks: Buffer[] = [];
          res.on("data", (c: Buffer) => chunks.push(c));
          res.on("end", () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString() }));
        },
      );
      req.on("error", reject);
      // No Content-Length: chunked, so only the count while reading can refuse it.
      for (let i = 0; i < 30; i++) req.write(`${" ".repeat(99)}\n`);
      req.end("{}");
    });
    expect(answer.status).toBe(413);
    expect(JSON.parse(answer.text)).toMatchObject({ code: "PAYLOAD_TOO_LARGE" });
    expect((await send(agent, "GET", list, USER.headers)).status).toBe(200);
  });

  it("concurrent requests over several keep-alive connections each get their own body and answer", async () => {
    const agent = new Agent({ keepAlive: true, maxSockets: 4 });
    agents.push(agent);
    const jobs = Array.from({ length: 40 }, (_, i) => ({
      todoUuid: newUuid(),
      title: `todo ${i} ${"x".repeat(i * 4)}`,
      tooLarge: i % 5 === 0,
    }));
    const answers = await Promise.all(
      jobs.map((j) =>
        send(
          agent,
          "POST",
          `${todos}?wait=true`,
          { ...USER.headers, "content-type": "application/json" },
          JSON.stringify({ todoUuid: j.todoUuid, title: j.title, ...(j.tooLarge ? { pad: "p".repeat(2000) } : {}) }),
        ),
      ),
    );
    answers.forEach((a, i) => expect(a.status, a.text).toBe(jobs[i]!.tooLarge ? 413 : 200));
    for (const [i, j] of jobs.entries()) {
      if (j.tooLarge) continue;
      const created = JSON.parse(answers[i]!.text) as { events: { aggregateUuid: string }[] };
      expect(created.events[0]!.aggregateUuid).toBe(j.todoUuid);
      const got = await call(srv.url, "POST", `/api/tenants/${TENANT_A}/queries/Todo/GetTodo`, {
        headers: USER.headers,
        body: { todoUuid: j.todoUuid },
      });
      expect(got.body.model.title).toBe(j.title);
    }
  });

  it("a client that goes away before its body ended dispatches nothing, and the server goes on", async () => {
    const before = await facade.eventRepository.headPosition();
    const todoUuid = newUuid();
    const { port } = new URL(srv.url);
    // A whole JSON object, but Content-Length promises 20 more bytes that never come: read as ended, it would dispatch.
    const body = JSON.stringify({ todoUuid, title: "never finished" });
    const arrived = new Promise<ServerResponse>((resolve) => srv.server.once("request", (_req, res: ServerResponse) => resolve(res)));
    const socket = connect(Number(port), "127.0.0.1");
    socket.on("error", () => undefined);
    socket.write(
      `POST ${todos} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nAuthorization: ${USER.headers.authorization}\r\n` +
        `X-Identity-Uuid: ${USER.headers["x-identity-uuid"]}\r\nContent-Type: application/json\r\nContent-Length: ${body.length + 20}\r\n\r\n${body}`,
    );
    const res = await arrived;
    socket.destroy();
    await once(res, "close");
    // The server still answers, and the unfinished command left no event.
    const r = await call(srv.url, "POST", todos, { headers: USER.headers, body: { todoUuid: newUuid(), title: "after" } });
    expect(r.status).toBe(200);
    const events = [];
    for await (const batch of facade.eventRepository.readAll({ afterPosition: before })) events.push(...batch);
    expect(events.map((e) => e.aggregateUuid)).not.toContain(todoUuid);
    expect(events).toHaveLength(1);
  });

  it("headers are read as the Fetch API joins them: two Authorization headers are one malformed credential (401)", async () => {
    const agent = oneSocket();
    const { port } = new URL(srv.url);
    const status = await new Promise<number>((resolve, reject) => {
      const req = httpRequest({ host: "127.0.0.1", port, method: "GET", path: list, agent }, (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      });
      req.setHeader("Authorization", [USER.headers.authorization!, USER.headers.authorization!]);
      req.setHeader("X-Identity-Uuid", USER.headers["x-identity-uuid"]!);
      req.on("error", reject);
      req.end();
    });
    expect(status).toBe(401);
  });

  it("a Host header is judged the same way each time it comes: a plain one is served directly, an unusual one through the Fetch API", async () => {
    const agent = oneSocket();
    for (let round = 0; round < 2; round++) {
      for (const [host, viaFetch] of [
        ["localhost:8080", false],
        ["[::1]", false],
        ["exa_mple.test", true],
      ] as const) {
        let answer: { status: number; text: string } | undefined;
        const made = await countingFetchObjects(async () => {
          answer = await send(agent, "GET", list, { ...USER.headers, host });
        });
        expect(answer?.status, `${host}, round ${round}`).toBe(200);
        expect(made.requests > 0, `${host}, round ${round}`).toBe(viaFetch);
      }
    }
  });

  it("onError gets the failing request as a Request (method, URL, headers) on the direct path too", async () => {
    serverErrors.length = 0;
    const path = `/api/tenants/${TENANT_A}/queries/Probe/Crash?page=1`;
    const r = await call(srv.url, "POST", path, { headers: USER.headers, body: {} });
    expect(r.status).toBe(500);
    expect(r.body.detail).not.toContain("secret");
    expect(serverErrors).toHaveLength(1);
    const { error, request } = serverErrors[0]!;
    expect((error as Error).message).toBe("secret internals");
    expect(request).toBeInstanceOf(Request);
    expect(request.method).toBe("POST");
    expect(request.url).toBe(`${srv.url}${path}`);
    expect(request.headers.get("x-identity-uuid")).toBe(USER.headers["x-identity-uuid"]);
  });
});

// Route code and credential resolvers are application code: one that throws at once, instead of returning a
// rejected promise, is answered as one that rejects, on both paths.
const syncThrows: HttpRouteModule = {
  name: "sync-throws",
  routes: [
    {
      method: "GET",
      path: "/api/sync/refused",
      guard: () => ({ domain: "Runtime", name: "ListCommands" }),
      run: () => {
        throw new MnemeError("INVALID_REQUEST", "refused at once");
      },
    },
    {
      method: "GET",
      path: "/api/sync/crash",
      guard: () => ({ domain: "Runtime", name: "ListCommands" }),
      run: () => {
        throw new Error("secret crash");
      },
    },
  ],
};

describe("errors thrown at once by application code", () => {
  for (const path of HTTP_PATHS) {
    it(`${path}: a route's run or a credential resolver that throws instead of rejecting gets the same answer as one that rejects`, async () => {
      const errors: unknown[] = [];
      const onError = (error: unknown) => void errors.push(error);
      const routes = await serve(facade, { modules: [syncThrows], onError }, path);
      const resolverThrows = await serve(
        facade,
        {
          resolveCredentials: () => {
            throw new Error("secret resolver");
          },
          onError,
        },
        path,
      );
      try {
        const refused = await call(routes.url, "GET", "/api/sync/refused", { headers: USER.headers });
        expect(refused.status).toBe(400);
        expect(refused.body).toMatchObject({ code: "INVALID_REQUEST", detail: "refused at once" });
        const crash = await call(routes.url, "GET", "/api/sync/crash", { headers: USER.headers });
        expect(crash.status).toBe(500);
        expect(JSON.stringify(crash.body)).not.toContain("secret");
        const resolver = await call(resolverThrows.url, "GET", list, { headers: USER.headers });
        expect(resolver.status).toBe(500);
        expect(JSON.stringify(resolver.body)).not.toContain("secret");
        expect(errors.map((e) => (e as Error).message)).toEqual(["secret crash", "secret resolver"]);
        // The servers go on answering.
        expect((await call(routes.url, "GET", list, { headers: USER.headers })).status).toBe(200);
      } finally {
        await routes.close();
        await resolverThrows.close();
      }
    });
  }
});
