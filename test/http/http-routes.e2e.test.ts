/**
 * mneme/http end to end: a real node:http server on 127.0.0.1:0, fetch as the
 * client. Every route allowed and denied, the spec's endpoints with their
 * exact bodies, the generic command / query routes, the store endpoints and
 * the problem+json error answers.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Facade, MnemeError, anonymous, createFacade, defineDomain, newUuid } from "mneme";
import { ADMIN, TENANT_A, TENANT_SYS, USER, call, serve, testAuthorizer, type TestServer, HTTP_PATHS } from "../support/http-fixture.js";

const NO_IDENTITY = { authorization: USER.headers.authorization! };
const BAD_TOKEN = { authorization: `Bearer ${USER.reqCtx.senderSessionUuid}.wrong-key` };

// A small domain with the permission kinds the adapter treats differently.
const Probe = defineDomain("Probe", { description: "HTTP probes" });
const Ping = Probe.query<Record<string, never>, string>("Ping", { description: "Public liveness", permission: anonymous });
const Vip = Probe.query<Record<string, never>, string>("Vip", {
  description: "Only senders with attribute vip",
  permission: (reqCtx) =>
    reqCtx.senderAccountUuid === ADMIN.reqCtx.senderAccountUuid
      ? undefined
      : new MnemeError("PERMISSION_DENIED", "only the vip account may call this"),
});
const Crash = Probe.query<Record<string, never>, string>("Crash", { description: "Throws a plain error" });
Probe.handleQuery(Ping, () => "pong");
Probe.handleQuery(Vip, () => "welcome");
Probe.handleQuery(Crash, () => {
  throw new Error("secret internals at /srv/db");
});

describe.each(HTTP_PATHS)("over node:http, %s path", (httpPath) => {
  let facade: Facade;
  let srv: TestServer;
  const serverErrors: unknown[] = [];
  const t = (path: string) => `/api/tenants/${TENANT_A}${path}`;

  beforeAll(async () => {
    facade = createFacade({ appName: "http-test", version: "1.2.3", systemEvents: true, authorizer: testAuthorizer });
    const { registerTodo } = await import("../../examples/todo/todo-domain.js");
    registerTodo(facade);
    facade.registerDomain(Probe);
    const { registerStorePermissions } = await import("mneme");
    registerStorePermissions(facade);
    await facade.start();
    srv = await serve(facade, { onError: (e) => serverErrors.push(e) }, httpPath);
  });
  afterAll(async () => {
    await srv.close();
    await facade.stop();
  });

  function expectProblem(r: { status: number; headers: Headers; body: any }, status: number, code: string): void {
    expect(r.status, JSON.stringify(r.body)).toBe(status);
    expect(r.headers.get("content-type")).toBe("application/problem+json");
    expect(r.body).toMatchObject({ type: `urn:mneme:error:${code}`, status, code });
    expect(typeof r.body.title).toBe("string");
    expect(typeof r.body.detail).toBe("string");
    expect(r.body.detail.length).toBeGreaterThan(10);
  }

  describe("every route, allowed and denied", () => {
    interface Case {
      name: string;
      method: string;
      path: string;
      body?: unknown;
      allowed: Record<string, string>;
      allowedStatus: number;
      /** Valid credentials without the permission. */
      denied: Record<string, string>;
    }
    const todo = newUuid();
    const cases: Case[] = [
      ...[
        "commands",
        "queries",
        "events",
        "command-handlers",
        "query-handlers",
        "event-handlers",
        "permissions",
        "metrics",
        "system-info",
      ].map((p) => ({
        name: `GET runtime/${p}`,
        method: "GET",
        path: t(`/runtime/${p}`),
        allowed: USER.headers,
        allowedStatus: 200,
        denied: NO_IDENTITY,
      })),
      {
        name: "event-handler-list (list)",
        method: "POST",
        path: t("/runtime/event-handler-list"),
        body: {},
        allowed: USER.headers,
        allowedStatus: 200,
        denied: NO_IDENTITY,
      },
      {
        name: "event-handler-list (restore)",
        method: "POST",
        path: t("/runtime/event-handler-list"),
        body: { action: "restore", eventHandlerName: "TodoProjection" },
        allowed: ADMIN.headers,
        allowedStatus: 200,
        denied: USER.headers,
      },
      {
        name: "schema",
        method: "POST",
        path: t("/runtime/schema"),
        body: { domain: "Todo", type: "CreateTodo" },
        allowed: USER.headers,
        allowedStatus: 200,
        denied: NO_IDENTITY,
      },
      {
        name: "store info",
        method: "GET",
        path: t("/runtime/stores/event/info"),
        allowed: ADMIN.headers,
        allowedStatus: 200,
        denied: USER.headers,
      },
      {
        name: "store entries",
        method: "GET",
        path: t("/runtime/stores/log/entries?limit=5"),
        allowed: ADMIN.headers,
        allowedStatus: 200,
        denied: USER.headers,
      },
      {
        name: "store update",
        method: "PATCH",
        path: t("/runtime/stores/cache/entries/matrix"),
        body: { value: 1 },
        allowed: ADMIN.headers,
        allowedStatus: 200,
        denied: USER.headers,
      },
      {
        name: "store delete",
        method: "DELETE",
        path: t("/runtime/stores/cache/entries/matrix"),
        allowed: ADMIN.headers,
        allowedStatus: 204,
        denied: USER.headers,
      },
      {
        name: "command",
        method: "POST",
        path: t("/commands/Todo/CreateTodo"),
        body: { todoUuid: todo, title: "matrix" },
        allowed: USER.headers,
        allowedStatus: 200,
        denied: NO_IDENTITY,
      },
      {
        name: "query",
        method: "POST",
        path: t("/queries/Todo/ListTodos"),
        body: {},
        allowed: USER.headers,
        allowedStatus: 200,
        denied: NO_IDENTITY,
      },
      {
        name: "custom permission query",
        method: "POST",
        path: t("/queries/Probe/Vip"),
        body: {},
        allowed: ADMIN.headers,
        allowedStatus: 200,
        denied: USER.headers,
      },
    ];

    for (const c of cases) {
      it(`${c.name}: 401 without credentials, 401 with a bad token, 403 without the permission, ${c.allowedStatus} when allowed`, async () => {
        const opts = c.body === undefined ? {} : { body: c.body };
        const none = await call(srv.url, c.method, c.path, opts);
        expectProblem(none, 401, "UNAUTHENTICATED");
        expect(none.headers.get("www-authenticate")).toBe("Bearer");
        expectProblem(await call(srv.url, c.method, c.path, { ...opts, headers: BAD_TOKEN }), 401, "UNAUTHENTICATED");
        expectProblem(await call(srv.url, c.method, c.path, { ...opts, headers: c.denied }), 403, "PERMISSION_DENIED");
        const ok = await call(srv.url, c.method, c.path, { ...opts, headers: c.allowed });
        expect(ok.status, JSON.stringify(ok.body)).toBe(c.allowedStatus);
      });
    }

    it("SSE: 401 without credentials, 403 for a user, 200 text/event-stream for the administrator", async () => {
      expectProblem(await call(srv.url, "GET", t("/runtime/sse")), 401, "UNAUTHENTICATED");
      expectProblem(await call(srv.url, "GET", t("/runtime/sse"), { headers: USER.headers }), 403, "PERMISSION_DENIED");
      const ac = new AbortController();
      const res = await fetch(`${srv.url}${t("/runtime/sse")}`, { headers: ADMIN.headers, signal: ac.signal });
      expect(res.status).toBe(200);
      expect(res.headers.get("content-type")).toBe("text/event-stream; charset=utf-8");
      ac.abort();
    });

    it("HEAD answers like GET with no body: 200 for a list, 401 without credentials, 404 for an unknown path", async () => {
      const get = await call(srv.url, "GET", t("/runtime/commands"), { headers: ADMIN.headers });
      const head = await call(srv.url, "HEAD", t("/runtime/commands"), { headers: ADMIN.headers });
      expect(head.status).toBe(200);
      expect(head.body).toBe("");
      expect(head.headers.get("content-type")).toBe(get.headers.get("content-type"));
      expect((await call(srv.url, "HEAD", t("/runtime/commands"))).status).toBe(401);
      const unknown = await call(srv.url, "HEAD", "/api/nowhere");
      expect(unknown.status).toBe(404);
      expect(unknown.body).toBe("");
      expect(serverErrors).toEqual([]);
    });

    it("an anonymous route runs without credentials, and with a stale token as anonymous", async () => {
      expect(await call(srv.url, "POST", t("/queries/Probe/Ping"), { body: {} })).toMatchObject({ status: 200, body: "pong" });
      expect(await call(srv.url, "POST", t("/queries/Probe/Ping"), { body: {}, headers: BAD_TOKEN })).toMatchObject({
        status: 200,
        body: "pong",
      });
    });

    it("an unknown command is 401 for an anonymous caller (nothing is revealed) and 404 with a session", async () => {
      expectProblem(await call(srv.url, "POST", t("/commands/Nope/Nothing"), { body: {} }), 401, "UNAUTHENTICATED");
      expectProblem(await call(srv.url, "POST", t("/commands/Nope/Nothing"), { body: {}, headers: USER.headers }), 404, "UNKNOWN_COMMAND");
      expectProblem(await call(srv.url, "POST", t("/queries/Nope/Nothing"), { body: {}, headers: USER.headers }), 404, "UNKNOWN_QUERY");
    });

    it("credentials from cookies work like the header; a malformed Authorization header is 401", async () => {
      const cookie = `session=${encodeURIComponent(USER.token)}; identity=${USER.identityUuid}`;
      expect((await call(srv.url, "GET", t("/runtime/commands"), { headers: { cookie } })).status).toBe(200);
      expectProblem(
        await call(srv.url, "GET", t("/runtime/commands"), { headers: { authorization: "Basic dXNlcjpwdw==" } }),
        401,
        "UNAUTHENTICATED",
      );
      expectProblem(
        await call(srv.url, "GET", t("/runtime/commands"), { headers: { authorization: "Bearer no-dot" } }),
        401,
        "UNAUTHENTICATED",
      );
      expectProblem(
        await call(srv.url, "GET", t("/runtime/commands"), { headers: { "x-identity-uuid": USER.identityUuid } }),
        401,
        "UNAUTHENTICATED",
      );
      // The identity must be the account's: the resolver refuses another one.
      expectProblem(
        await call(srv.url, "GET", t("/runtime/commands"), { headers: { ...USER.headers, "x-identity-uuid": ADMIN.identityUuid } }),
        401,
        "UNAUTHENTICATED",
      );
    });
  });

  describe("the spec's endpoints", () => {
    it('event-handler-list with {} and with {action: "list"} returns the handlers as { items, total, page, pageSize }', async () => {
      const expected = { items: facade.runtime.listEventHandlers(), total: 1, page: 1, pageSize: 50 };
      const a = await call(srv.url, "POST", t("/runtime/event-handler-list"), { body: {}, headers: USER.headers });
      expect(a.status).toBe(200);
      expect(a.body).toEqual(JSON.parse(JSON.stringify(expected)));
      const b = await call(srv.url, "POST", t("/runtime/event-handler-list"), { body: { action: "list" }, headers: USER.headers });
      expect(b.body).toEqual(a.body);
      expect(a.body.items[0]).toMatchObject({
        eventHandlerName: "TodoProjection",
        domain: "Todo",
        state: "running",
        restorationState: "restored",
        isStateRestorer: true,
      });
      const empty = await call(srv.url, "POST", t("/runtime/event-handler-list"), { rawBody: "", headers: USER.headers });
      expect(empty.body).toEqual(a.body);
      const named = await call(srv.url, "POST", t("/runtime/event-handler-list"), {
        body: { action: "list", eventHandlerName: "Nope" },
        headers: USER.headers,
      });
      expect(named.body).toEqual({ items: [], total: 0, page: 1, pageSize: 50 });
    });

    it("restore (from zero), stop and start act and return the handler's record", async () => {
      const path = t("/runtime/event-handler-list");
      await call(srv.url, "POST", t("/commands/Todo/CreateTodo?wait=true"), {
        body: { todoUuid: newUuid(), title: "before restore" },
        headers: USER.headers,
      });
      const restored = await call(srv.url, "POST", path, {
        body: { action: "restore", eventHandlerName: "TodoProjection", restoreFromZero: true },
        headers: ADMIN.headers,
      });
      expect(restored.status).toBe(200);
      expect(restored.body).toEqual(JSON.parse(JSON.stringify(facade.runtime.listEventHandlers()[0])));
      expect(restored.body).toMatchObject({ eventHandlerName: "TodoProjection", state: "running", restorationState: "restored" });
      expect(facade.runtime.getMetrics("TodoProjection").lastRestore?.afterPosition).toBe(0);

      const stopped = await call(srv.url, "POST", path, {
        body: { action: "stop", eventHandlerName: "TodoProjection" },
        headers: ADMIN.headers,
      });
      expect(stopped).toMatchObject({ status: 200, body: { eventHandlerName: "TodoProjection", state: "stopped" } });
      expectProblem(
        await call(srv.url, "POST", path, { body: { action: "stop", eventHandlerName: "TodoProjection" }, headers: ADMIN.headers }),
        409,
        "INVALID_STATE",
      );
      const started = await call(srv.url, "POST", path, {
        body: { action: "start", eventHandlerName: "TodoProjection" },
        headers: ADMIN.headers,
      });
      expect(started).toMatchObject({ status: 200, body: { eventHandlerName: "TodoProjection", state: "running" } });
    });

    it("event-handler-list rejects an unknown action, handler or field with a 4xx", async () => {
      const path = t("/runtime/event-handler-list");
      expectProblem(
        await call(srv.url, "POST", path, { body: { action: "explode", eventHandlerName: "TodoProjection" }, headers: ADMIN.headers }),
        400,
        "INVALID_ACTION",
      );
      expectProblem(
        await call(srv.url, "POST", path, { body: { action: "restore", eventHandlerName: "Nope" }, headers: ADMIN.headers }),
        404,
        "UNKNOWN_EVENT_HANDLER",
      );
      expectProblem(await call(srv.url, "POST", path, { body: { action: "restore" }, headers: ADMIN.headers }), 400, "VALIDATION_FAILED");
      expectProblem(
        await call(srv.url, "POST", path, { body: { action: "list", bogus: 1 }, headers: USER.headers }),
        400,
        "INVALID_REQUEST",
      );
      expectProblem(await call(srv.url, "POST", path, { body: { pageSize: 0 }, headers: USER.headers }), 400, "INVALID_REQUEST");
      expectProblem(await call(srv.url, "POST", path, { body: [1, 2], headers: USER.headers }), 400, "INVALID_REQUEST");
    });

    it("an unknown action is 400 INVALID_ACTION on event-handler-list and on the generic command route alike", async () => {
      const generic = t("/commands/Runtime/ControlEventHandler");
      for (const action of ["explode", "", 3]) {
        const body = { action, eventHandlerName: "TodoProjection" };
        expectProblem(
          await call(srv.url, "POST", t("/runtime/event-handler-list"), { body, headers: ADMIN.headers }),
          400,
          "INVALID_ACTION",
        );
        expectProblem(await call(srv.url, "POST", generic, { body, headers: ADMIN.headers }), 400, "INVALID_ACTION");
      }
      // The generic route has no "list" default: no action is an unknown action there too.
      expectProblem(
        await call(srv.url, "POST", generic, { body: { eventHandlerName: "TodoProjection" }, headers: ADMIN.headers }),
        400,
        "INVALID_ACTION",
      );
      expectProblem(
        await call(srv.url, "POST", generic, { body: { action: "stop", eventHandlerName: 5 }, headers: ADMIN.headers }),
        400,
        "VALIDATION_FAILED",
      );
      expect(facade.runtime.listEventHandlers().find((h) => h.eventHandlerName === "TodoProjection")?.state).toBe("running");
    });

    it("schema returns the JSON schema document of a type, exactly as the Runtime builds it", async () => {
      const r = await call(srv.url, "POST", t("/runtime/schema"), { body: { domain: "Todo", type: "CreateTodo" }, headers: USER.headers });
      expect(r.status).toBe(200);
      expect(r.body).toEqual(facade.runtime.getSchema({ domain: "Todo", type: "CreateTodo" }));
      expect(r.body).toMatchObject({
        $schema: "https://json-schema.org/draft/2020-12/schema",
        type: "object",
        required: ["todoUuid", "title"],
      });
      expectProblem(
        await call(srv.url, "POST", t("/runtime/schema"), { body: { domain: "Todo", type: "Nope" }, headers: USER.headers }),
        404,
        "UNKNOWN_SCHEMA_TYPE",
      );
      expectProblem(
        await call(srv.url, "POST", t("/runtime/schema"), { body: { domain: "Todo" }, headers: USER.headers }),
        400,
        "VALIDATION_FAILED",
      );
    });
  });

  describe("runtime lists", () => {
    it("page through the commands with page and pageSize; the pages add up to the whole list", async () => {
      const all = facade.runtime.listCommands();
      const first = await call(srv.url, "GET", t("/runtime/commands?pageSize=2"), { headers: USER.headers });
      expect(first.body).toEqual({ items: all.slice(0, 2), total: all.length, page: 1, pageSize: 2 });
      const collected: unknown[] = [];
      for (let page = 1; page <= Math.ceil(all.length / 3); page++) {
        collected.push(
          ...(await call(srv.url, "GET", t(`/runtime/commands?page=${page}&pageSize=3`), { headers: USER.headers })).body.items,
        );
      }
      expect(collected).toEqual(all);
      const beyond = await call(srv.url, "GET", t("/runtime/commands?page=99"), { headers: USER.headers });
      expect(beyond.body).toEqual({ items: [], total: all.length, page: 99, pageSize: 50 });
      expectProblem(await call(srv.url, "GET", t("/runtime/commands?pageSize=1001"), { headers: USER.headers }), 400, "INVALID_REQUEST");
      expectProblem(await call(srv.url, "GET", t("/runtime/commands?page=0"), { headers: USER.headers }), 400, "INVALID_REQUEST");
      expectProblem(await call(srv.url, "GET", t("/runtime/commands?page=abc"), { headers: USER.headers }), 400, "INVALID_REQUEST");
    });

    it("permissions filter by domain and never carry the function; metrics and system-info are objects", async () => {
      const perms = await call(srv.url, "GET", t("/runtime/permissions?domain=Todo"), { headers: USER.headers });
      expect(perms.body.items.map((p: { type: string }) => p.type).sort()).toEqual([
        "CompleteTodo",
        "CreateTodo",
        "GetTodo",
        "ListTodos",
        "RenameTodo",
      ]);
      expect(perms.body.items.every((p: Record<string, unknown>) => p.domain === "Todo" && !("cmdFunc" in p))).toBe(true);
      const metrics = await call(srv.url, "GET", t("/runtime/metrics"), { headers: USER.headers });
      expect(Object.keys(metrics.body)).toEqual(["TodoProjection"]);
      const one = await call(srv.url, "GET", t("/runtime/metrics?eventHandlerName=TodoProjection"), { headers: USER.headers });
      expect(one.body).toMatchObject({ eventsProcessed: expect.any(Number), lag: expect.any(Number) });
      expectProblem(
        await call(srv.url, "GET", t("/runtime/metrics?eventHandlerName=Nope"), { headers: USER.headers }),
        404,
        "UNKNOWN_EVENT_HANDLER",
      );
      const info = await call(srv.url, "GET", t("/runtime/system-info"), { headers: USER.headers });
      expect(info.body).toMatchObject({ appName: "http-test", version: "1.2.3", state: "started" });
    });
  });

  describe("commands and queries", () => {
    it("a command returns { commandUuid, events }; its events carry the path's tenant; a query returns the handler's result", async () => {
      const todoUuid = newUuid();
      const r = await call(srv.url, "POST", t("/commands/Todo/CreateTodo?wait=true"), {
        body: { todoUuid, title: "Buy milk" },
        headers: USER.headers,
      });
      expect(r.status).toBe(200);
      expect(Object.keys(r.body).sort()).toEqual(["commandUuid", "events"]);
      expect(r.body.events).toHaveLength(1);
      expect(r.body.events[0]).toMatchObject({
        domain: "Todo",
        name: "TodoCreated",
        aggregateUuid: todoUuid,
        version: 1,
        tenantUuid: TENANT_A,
        commandUuid: r.body.commandUuid,
        payload: { title: "Buy milk" },
      });
      expect(r.body.events[0].reqCtx).toMatchObject({ senderAccountUuid: USER.reqCtx.senderAccountUuid, targetTenantUuid: TENANT_A });

      const got = await call(srv.url, "POST", t("/queries/Todo/GetTodo"), {
        body: { todoUuid, includeHistory: true },
        headers: USER.headers,
      });
      expect(got.status).toBe(200);
      expect(got.body).toMatchObject({ aggregateUuid: todoUuid, model: { title: "Buy milk", done: false }, version: 1 });
      expect(got.body.historyEvents.map((h: { domainEvtName: string }) => h.domainEvtName)).toEqual(["TodoCreated"]);
      expect(
        (await call(srv.url, "POST", t("/queries/Todo/GetTodo"), { body: { todoUuid: newUuid() }, headers: USER.headers })).body,
      ).toBeNull();
    });

    it("CONFLICT is 409, a schema failure is 400 with the failing pointers, a stale X-Target-Aggregate-Version is 409", async () => {
      const todoUuid = newUuid();
      await call(srv.url, "POST", t("/commands/Todo/CreateTodo"), { body: { todoUuid, title: "x" }, headers: USER.headers });
      expectProblem(
        await call(srv.url, "POST", t("/commands/Todo/CreateTodo"), { body: { todoUuid, title: "x" }, headers: USER.headers }),
        409,
        "CONFLICT",
      );
      const bad = await call(srv.url, "POST", t("/commands/Todo/CreateTodo"), {
        body: { todoUuid: "not-a-uuid", title: "" },
        headers: USER.headers,
      });
      expectProblem(bad, 400, "VALIDATION_FAILED");
      expect(bad.body.errors.length).toBeGreaterThan(0);
      expect(bad.body.errors[0]).toHaveProperty("pointer");
      const stale = await call(srv.url, "POST", t("/commands/Todo/RenameTodo"), {
        body: { todoUuid, title: "y" },
        headers: { ...USER.headers, "x-target-aggregate-uuid": todoUuid, "x-target-aggregate-version": "7" },
      });
      expectProblem(stale, 409, "CONFLICT");
      const fresh = await call(srv.url, "POST", t("/commands/Todo/RenameTodo"), {
        body: { todoUuid, title: "y" },
        headers: { ...USER.headers, "x-target-aggregate-uuid": todoUuid, "x-target-aggregate-version": "1" },
      });
      expect(fresh.status).toBe(200);
      expectProblem(
        await call(srv.url, "POST", t("/commands/Todo/RenameTodo"), {
          body: { todoUuid, title: "z" },
          headers: { ...USER.headers, "x-target-aggregate-version": "-1" },
        }),
        400,
        "INVALID_REQUEST",
      );
      // A version that guards nothing the command touches is never ignored: an X-Target-Aggregate-Uuid naming another
      // aggregate is 400, whatever the version (it was 200 with a stale one).
      const other = newUuid();
      await call(srv.url, "POST", t("/commands/Todo/CreateTodo"), { body: { todoUuid: other, title: "other" }, headers: USER.headers });
      expectProblem(
        await call(srv.url, "POST", t("/commands/Todo/RenameTodo"), {
          body: { todoUuid, title: "w" },
          headers: { ...USER.headers, "x-target-aggregate-uuid": other, "x-target-aggregate-version": "7" },
        }),
        400,
        "INVALID_REQUEST",
      );
      const after = await call(srv.url, "POST", t("/queries/Todo/GetTodo"), { body: { todoUuid }, headers: USER.headers });
      expect(after.body).toMatchObject({ version: 2, model: { title: "y" } });
    });

    it("a handler's plain error is a 500 whose detail leaks nothing, and onError hears of it", async () => {
      const before = serverErrors.length;
      const r = await call(srv.url, "POST", t("/queries/Probe/Crash"), { body: {}, headers: USER.headers });
      expect(r.status).toBe(500);
      expect(r.body.detail).not.toContain("secret");
      expect(serverErrors.length).toBe(before + 1);
    });
  });

  describe("store endpoints", () => {
    it("info, entries, update and delete of the stores, for the administrator", async () => {
      const info = await call(srv.url, "GET", t("/runtime/stores/event/info"), { headers: ADMIN.headers });
      expect(info.body).toMatchObject({ storeType: "memory", numItems: expect.any(Number) });
      const events = await call(srv.url, "GET", t("/runtime/stores/event/entries?limit=2"), { headers: ADMIN.headers });
      expect(events.body.items).toHaveLength(2);
      expect(events.body.nextCursor).toBe(String(events.body.items[1].position));
      const next = await call(srv.url, "GET", t(`/runtime/stores/event/entries?limit=2&cursor=${events.body.nextCursor}`), {
        headers: ADMIN.headers,
      });
      expect(next.body.items[0].position).toBeGreaterThan(events.body.items[1].position);

      const key = "dir/with slash";
      const path = t(`/runtime/stores/data/entries/${encodeURIComponent(key)}`);
      expect(
        await call(srv.url, "PATCH", path, { body: { text: "hello", contentType: "text/plain" }, headers: ADMIN.headers }),
      ).toMatchObject({ status: 200, body: { key } });
      expect(await facade.dataStore.get(key)).toMatchObject({ contentType: "text/plain" });
      const deleted = await call(srv.url, "DELETE", path, { headers: ADMIN.headers });
      expect(deleted.status).toBe(204);
      expect(await facade.dataStore.get(key)).toBeUndefined();
      expectProblem(await call(srv.url, "DELETE", path, { headers: ADMIN.headers }), 404, "NOT_FOUND");
      expectProblem(
        await call(srv.url, "PATCH", t("/runtime/stores/event/entries/1"), { body: {}, headers: ADMIN.headers }),
        400,
        "INVALID_ACTION",
      );
      expectProblem(await call(srv.url, "PATCH", t("/runtime/stores/cache/entries/k"), { headers: ADMIN.headers }), 400, "INVALID_REQUEST");
      expectProblem(await call(srv.url, "GET", t("/runtime/stores/nope/info"), { headers: ADMIN.headers }), 400, "INVALID_REQUEST");
      expectProblem(
        await call(srv.url, "GET", t("/runtime/stores/log/entries?limit=0"), { headers: ADMIN.headers }),
        400,
        "INVALID_REQUEST",
      );
      const audit = await facade.logStore.list({ limit: 1000 });
      expect(audit.items.some((e) => e.message === "StoreData.Update dir/with slash")).toBe(true);
    });

    it("a session over the rate limit gets 429 with Retry-After; another session is not affected", async () => {
      let now = 1_000_000;
      const limited = await serve(facade, { storeRateLimit: { requests: 3, windowMs: 60_000 }, now: () => now }, httpPath);
      try {
        for (let i = 0; i < 3; i++)
          expect((await call(limited.url, "GET", t("/runtime/stores/event/info"), { headers: ADMIN.headers })).status).toBe(200);
        const over = await call(limited.url, "GET", t("/runtime/stores/event/info"), { headers: ADMIN.headers });
        expectProblem(over, 429, "RATE_LIMITED");
        expect(over.headers.get("retry-after")).toBe("20");
        // USER's session has its own bucket (and is then refused by the permission check, not the limiter).
        expectProblem(await call(limited.url, "GET", t("/runtime/stores/event/info"), { headers: USER.headers }), 403, "PERMISSION_DENIED");
        // The generic routes reach the same store messages and the same bucket.
        expectProblem(
          await call(limited.url, "POST", t("/queries/Runtime/StoreInfo"), { body: { store: "event" }, headers: ADMIN.headers }),
          429,
          "RATE_LIMITED",
        );
        expectProblem(
          await call(limited.url, "POST", t("/commands/Runtime/StoreDelete"), {
            body: { store: "cache", key: "k" },
            headers: ADMIN.headers,
          }),
          429,
          "RATE_LIMITED",
        );
        expectProblem(
          await call(limited.url, "POST", t("/queries/Runtime/StoreInfo"), { body: { store: "event" } }),
          401,
          "UNAUTHENTICATED",
        );
        now += 20_000;
        expect(
          (await call(limited.url, "POST", t("/queries/Runtime/StoreInfo"), { body: { store: "event" }, headers: ADMIN.headers })).status,
        ).toBe(200);
        expectProblem(await call(limited.url, "GET", t("/runtime/stores/event/info"), { headers: ADMIN.headers }), 429, "RATE_LIMITED");
        now += 20_000;
        expect((await call(limited.url, "GET", t("/runtime/stores/event/info"), { headers: ADMIN.headers })).status).toBe(200);
      } finally {
        await limited.close();
      }
    });

    it("without registerStorePermissions the store endpoints answer 503 STORE_PERMISSIONS_NOT_REGISTERED", async () => {
      const bare = createFacade({ authorizer: testAuthorizer });
      await bare.start();
      const s = await serve(bare, {}, httpPath);
      try {
        expectProblem(
          await call(s.url, "GET", t("/runtime/stores/event/info"), { headers: ADMIN.headers }),
          503,
          "STORE_PERMISSIONS_NOT_REGISTERED",
        );
      } finally {
        await s.close();
        await bare.stop();
      }
    });
  });

  describe("malformed requests get a 4xx problem, never a 500", () => {
    it("unknown route 404, wrong method 405 with Allow, OPTIONS 204", async () => {
      expectProblem(await call(srv.url, "GET", "/api/nothing/here"), 404, "NOT_FOUND");
      expectProblem(await call(srv.url, "GET", "/"), 404, "NOT_FOUND");
      const m = await call(srv.url, "PUT", t("/runtime/schema"), { headers: USER.headers });
      expect(m.status).toBe(405);
      expect(m.body.code).toBe("INVALID_REQUEST");
      expect(m.headers.get("allow")).toBe("POST, OPTIONS");
      const o = await fetch(`${srv.url}${t("/runtime/stores/cache/entries/x")}`, { method: "OPTIONS" });
      expect(o.status).toBe(204);
      expect(o.headers.get("allow")).toBe("DELETE, PATCH, OPTIONS");
    });

    it("malformed JSON, wrong content type, not UTF-8, too deep, too large (declared and streamed), bad escapes", async () => {
      const h = { ...USER.headers, "content-type": "application/json" };
      const malformed = await call(srv.url, "POST", t("/runtime/schema"), { rawBody: '{"domain": ', headers: h });
      expectProblem(malformed, 400, "INVALID_REQUEST");
      expect(malformed.body.detail).toContain("not valid JSON");
      const wrongType = await call(srv.url, "POST", t("/runtime/schema"), {
        rawBody: "domain=Todo",
        headers: { ...USER.headers, "content-type": "application/x-www-form-urlencoded" },
      });
      expect(wrongType.status).toBe(415);
      expect(wrongType.body.code).toBe("INVALID_REQUEST");
      const latin1 = await fetch(`${srv.url}${t("/runtime/schema")}`, {
        method: "POST",
        headers: h,
        body: new Uint8Array([0x7b, 0x22, 0xe9, 0x22, 0x3a, 0x31, 0x7d]),
      });
      expect(latin1.status).toBe(400);
      const deep = await call(srv.url, "POST", t("/commands/Todo/CreateTodo"), {
        rawBody: `${"[".repeat(100)}${"]".repeat(100)}`,
        headers: h,
      });
      expectProblem(deep, 400, "INVALID_REQUEST");
      expect(deep.body.detail).toContain("nests deeper");
      const big = JSON.stringify({ todoUuid: newUuid(), title: "x".repeat(1024 * 1024) });
      expectProblem(await call(srv.url, "POST", t("/commands/Todo/CreateTodo"), { rawBody: big, headers: h }), 413, "PAYLOAD_TOO_LARGE");
      const chunks = [new TextEncoder().encode(big.slice(0, 600_000)), new TextEncoder().encode(big.slice(600_000))];
      const streamed = await fetch(`${srv.url}${t("/commands/Todo/CreateTodo")}`, {
        method: "POST",
        headers: h,
        duplex: "half",
        body: new ReadableStream({
          pull(c) {
            const next = chunks.shift();
            if (next === undefined) c.close();
            else c.enqueue(next);
          },
        }),
      } as RequestInit);
      expect(streamed.status).toBe(413);
      expectProblem(
        await call(srv.url, "GET", "/api/tenants/%E0%A4%A/runtime/commands", { headers: USER.headers }),
        400,
        "INVALID_REQUEST",
      );
      // The connection is still usable after all that.
      expect((await call(srv.url, "GET", t("/runtime/commands"), { headers: USER.headers })).status).toBe(200);
    });

    it("a facade that is not started answers 503 NOT_STARTED", async () => {
      const idle = createFacade({ authorizer: testAuthorizer });
      const s = await serve(idle, {}, httpPath);
      try {
        expectProblem(await call(s.url, "GET", t("/runtime/commands"), { headers: USER.headers }), 503, "NOT_STARTED");
      } finally {
        await s.close();
      }
    });

    it("basePath puts every route under a prefix", async () => {
      const s = await serve(facade, { basePath: "/mneme" }, httpPath);
      try {
        expect((await call(s.url, "GET", `/mneme${t("/runtime/commands")}`, { headers: USER.headers })).status).toBe(200);
        expectProblem(await call(s.url, "GET", t("/runtime/commands"), { headers: USER.headers }), 404, "NOT_FOUND");
      } finally {
        await s.close();
      }
    });

    it("options are validated when the handler is made", async () => {
      const { createHttpHandler } = await import("mneme/http");
      expect(() => createHttpHandler(facade, { maxBodyBytes: 0 })).toThrow(/maxBodyBytes/);
      expect(() => createHttpHandler(facade, { basePath: "api/" })).toThrow(/basePath/);
      expect(() => createHttpHandler(facade, { storeRateLimit: { requests: 1, windowMs: -1 } })).toThrow(/windowMs/);
      expect(() => createHttpHandler(facade, { sse: { heartbeatMs: 1.5 } })).toThrow(/heartbeatMs/);
    });
  });

  describe("tenant in the path", () => {
    it("becomes the target tenant of the request context", async () => {
      const todoUuid = newUuid();
      const r = await call(srv.url, "POST", `/api/tenants/${TENANT_SYS}/commands/Todo/CreateTodo`, {
        body: { todoUuid, title: "sys" },
        headers: ADMIN.headers,
      });
      expect(r.body.events[0].tenantUuid).toBe(TENANT_SYS);
      expect(r.body.events[0].reqCtx.targetTenantUuid).toBe(TENANT_SYS);
    });
  });
});
