/**
 * Route modules: the HTTP core serves its generic routes and knows no domain;
 * an application adds routes (and the resolver of its sessions) as modules,
 * like the built-in Account domain's accountRoutes() of mneme/defaults. Served
 * over node:http on both of toNodeListener's paths.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Facade } from "mneme";
import { type HttpRouteModule, createHttpHandler, jsonResponse } from "mneme/http";
import { accountRoutes } from "mneme/defaults";
import { CreateTodo, GetTodo } from "../../examples/todo/todo-domain.js";
import { ADMIN, HTTP_PATHS, TENANT_A, USER, call, serve, startFacade, testResolver, type TestServer } from "../support/http-fixture.js";

const TODO = "0190f5e4-0000-7000-8000-0000000e0001";

/** `GET /api/todos/:todoUuid`: GetTodo for the sender's tenant, 404 when there is none. */
const todoModule = (withResolver: boolean): HttpRouteModule => ({
  name: "todo-routes",
  routes: [
    {
      method: "GET",
      path: "/api/todos/:todoUuid",
      guard: () => GetTodo,
      run: async (c) => {
        const todo = await c.facade.query(GetTodo, { todoUuid: c.params.todoUuid! }, { reqCtx: c.reqCtx });
        return todo === undefined ? jsonResponse(404, { todoUuid: c.params.todoUuid }) : jsonResponse(200, todo.model);
      },
    },
  ],
  ...(withResolver ? { resolveCredentials: testResolver } : {}),
});

let facade: Facade;
beforeAll(async () => {
  facade = await startFacade();
  await facade.dispatch(CreateTodo, { todoUuid: TODO, title: "ship the modules" }, { reqCtx: USER.reqCtx, waitToFinish: true });
});
afterAll(() => facade.stop());

for (const path of HTTP_PATHS) {
  describe(`over node:http, ${path} path`, () => {
    const servers: TestServer[] = [];
    afterAll(async () => {
      for (const s of servers) await s.close();
    });
    const start = async (options: Parameters<typeof serve>[1]) => {
      const s = await serve(facade, options, path);
      servers.push(s);
      return s.url;
    };

    it("without modules the core serves no login, account or session route", async () => {
      const url = await start({});
      expect((await call(url, "POST", "/api/sessions", { body: { email: "a@b.c", password: "x" } })).status).toBe(404);
      expect((await call(url, "GET", "/api/accounts")).status).toBe(404);
      expect((await call(url, "GET", `/api/tenants/${TENANT_A}/runtime/commands`, { headers: USER.headers })).status).toBe(200);
    });

    it("a module's route is served after the generic ones, behind its guard's permission", async () => {
      const url = await start({ modules: [todoModule(false)] });
      const ok = await call(url, "GET", `/api/todos/${TODO}`, { headers: USER.headers });
      expect(ok.status).toBe(200);
      expect(ok.body).toMatchObject({ title: "ship the modules" });
      expect((await call(url, "GET", `/api/todos/${TODO}`)).status).toBe(401);
      // Another tenant's caller does not see it.
      expect((await call(url, "GET", `/api/todos/${TODO}`, { headers: ADMIN.headers })).status).toBe(404);
    });

    it("a route may take body and rawBody off its context and call them more than once: the body is read once", async () => {
      const echo: HttpRouteModule = {
        name: "echo",
        routes: [
          {
            method: "POST",
            path: "/api/echo",
            guard: () => GetTodo,
            run: async (c) => {
              const { body, rawBody } = c;
              const [first, raw, again] = [await body(), await rawBody(), await body()];
              return jsonResponse(200, { first, raw: raw ?? "none", again, same: body === c.body });
            },
          },
        ],
      };
      const url = await start({ modules: [echo] });
      const sent = await call(url, "POST", "/api/echo", { headers: USER.headers, body: { a: 1 } });
      expect(sent.body).toEqual({ first: { a: 1 }, raw: { a: 1 }, again: { a: 1 }, same: true });
      const empty = await call(url, "POST", "/api/echo", { headers: USER.headers, rawBody: "" });
      expect(empty.body).toEqual({ first: {}, raw: "none", again: {}, same: true });
    });

    it("the resolver comes from the option first, else from the first module that has one; with none, credentials are a 500", async () => {
      const fromModule = await serve(facade, { resolveCredentials: undefined as never, modules: [todoModule(true)] }, path);
      servers.push(fromModule);
      expect((await call(fromModule.url, "GET", `/api/todos/${TODO}`, { headers: USER.headers })).status).toBe(200);
      const none = await serve(facade, { resolveCredentials: undefined as never }, path);
      servers.push(none);
      const res = await call(none.url, "GET", `/api/tenants/${TENANT_A}/runtime/commands`, { headers: USER.headers });
      expect(res.status).toBe(500);
      expect(res.body).toMatchObject({ code: "INVALID_DOMAIN" });
      expect(JSON.stringify(res.body)).toMatch(/accountRoutes/);
    });
  });
}

describe("createHttpHandler's modules option", () => {
  it("refuses a route a module defines twice or that clashes with a generic route, naming the module", () => {
    const clash: HttpRouteModule = {
      name: "clashing",
      routes: [{ ...todoModule(false).routes[0]!, method: "POST", path: "/api/tenants/:tenantUuid/commands/:domain/:name" }],
    };
    expect(() => createHttpHandler(facade, { modules: [clash] })).toThrow(/route module clashing: route POST .* is defined twice/);
    expect(() => createHttpHandler(facade, { modules: [accountRoutes(), accountRoutes()] })).toThrow(/accountRoutes/);
  });

  it("refuses a modules option that is not an array of route modules", () => {
    for (const bad of [{}, [null], [{ name: "x" }], [{ routes: [] }]]) {
      expect(() => createHttpHandler(facade, { modules: bad as never }), JSON.stringify(bad)).toThrow(
        /modules must be an array of route modules/,
      );
    }
  });
});
