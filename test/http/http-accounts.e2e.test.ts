/**
 * The Account endpoints and the real credential chain through HTTP: the
 * built-in domains (registerDefaults), the default resolver of
 * createHttpHandler (no test resolver), sessions by header and by cookie, and
 * the permission matrix of an administrator against an ordinary account.
 */
import { createServer, request as httpRequest } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Facade, createFacade, newUuid } from "mneme";
import { accountRoutes, registerDefaults } from "mneme/defaults";
import { createHttpHandler, type HttpHandler } from "mneme/http";
import { registerTodo } from "../../examples/todo/todo-domain.js";
import { HTTP_PATHS, call, nodeListenerFor } from "../support/http-fixture.js";

describe.each(HTTP_PATHS)("over node:http, %s path", (httpPath) => {
  const ADMIN_EMAIL = "admin@example.org";
  const ADMIN_PASSWORD = "correct horse battery staple";
  let facade: Facade;
  let base: string;
  let cookieBase: string;
  let allowedBase: string;
  let systemTenant: string;
  let adminAccount: string;
  const closers: (() => Promise<void>)[] = [];

  async function listen(handler: HttpHandler): Promise<string> {
    const nodeListener = nodeListenerFor(handler, httpPath);
    const server = createServer((req, res) => void nodeListener(req, res));
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    closers.push(
      () =>
        new Promise<void>((resolve) => {
          server.closeAllConnections();
          server.close(() => resolve());
        }),
    );
    return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  }

  beforeAll(async () => {
    facade = createFacade({ appName: "http-accounts", systemEvents: true });
    const info = await registerDefaults(facade, { admin: { email: ADMIN_EMAIL, password: ADMIN_PASSWORD }, passwordHashing: { N: 1024 } });
    systemTenant = info.systemTenantUuid;
    adminAccount = info.adminAccountUuid;
    registerTodo(facade);
    await facade.start();
    base = await listen(createHttpHandler(facade, { modules: [accountRoutes()] }));
    cookieBase = await listen(createHttpHandler(facade, { modules: [accountRoutes()], sessionCookies: { secure: false } }));
    allowedBase = await listen(
      createHttpHandler(facade, { modules: [accountRoutes()], sessionCookies: { secure: false }, allowedOrigins: ["https://app.example"] }),
    );
  });
  afterAll(async () => {
    for (const c of closers) await c();
    await facade.stop();
  });

  interface Session {
    sessionUuid: string;
    sessionKey: string;
    token: string;
    accountUuid: string;
    identities: { identityUuid: string; tenantUuid: string }[];
  }

  async function login(email: string, password: string): Promise<Session> {
    const r = await call(base, "POST", "/api/sessions", { body: { email, password } });
    expect(r.status, JSON.stringify(r.body)).toBe(201);
    return r.body as Session;
  }
  const bearer = (s: Session, identityUuid?: string) => ({
    authorization: `Bearer ${s.token}`,
    ...(identityUuid === undefined ? {} : { "x-identity-uuid": identityUuid }),
  });

  describe("account registration, login, logout", () => {
    it("POST /api/accounts registers anonymously: 201 { accountUuid }; the same email again is a 409", async () => {
      const r = await call(base, "POST", "/api/accounts", {
        body: { email: "ann@example.org", password: "ann's long password", name: "Ann" },
      });
      expect(r.status).toBe(201);
      expect(Object.keys(r.body)).toEqual(["accountUuid"]);
      expect(r.body.accountUuid).toMatch(/^[0-9a-f-]{36}$/);
      const again = await call(base, "POST", "/api/accounts", { body: { email: "ann@example.org", password: "another long password" } });
      expect(again.status).toBe(409);
      expect(again.body.code).toBe("CONFLICT");
      const invalid = await call(base, "POST", "/api/accounts", { body: { email: "not an email", password: "x" } });
      expect(invalid.status).toBe(400);
    });

    it("POST /api/sessions answers 201 with the session; token = sessionUuid.sessionKey; a wrong password is 401", async () => {
      const s = await login(ADMIN_EMAIL, ADMIN_PASSWORD);
      expect(s).toMatchObject({ sessionUuid: expect.any(String), sessionKey: expect.any(String), accountUuid: adminAccount });
      expect(s.token).toBe(`${s.sessionUuid}.${s.sessionKey}`);
      expect(s.identities).toEqual([expect.objectContaining({ tenantUuid: systemTenant, identityUuid: expect.any(String) })]);
      const wrong = await call(base, "POST", "/api/sessions", { body: { email: ADMIN_EMAIL, password: "wrong password!" } });
      expect(wrong.status).toBe(401);
      expect(wrong.body.code).toBe("UNAUTHENTICATED");
    });

    it("DELETE /api/sessions/current answers 204 and the token stops working", async () => {
      const s = await login(ADMIN_EMAIL, ADMIN_PASSWORD);
      expect((await call(base, "GET", `/api/accounts/${adminAccount}`, { headers: bearer(s) })).status).toBe(200);
      const out = await call(base, "DELETE", "/api/sessions/current", { headers: bearer(s) });
      expect(out.status).toBe(204);
      const after = await call(base, "GET", `/api/accounts/${adminAccount}`, { headers: bearer(s) });
      expect(after.status).toBe(401);
      expect(after.body.code).toBe("UNAUTHENTICATED");
      expect((await call(base, "DELETE", "/api/sessions/current")).status).toBe(401);
    });

    it("with sessionCookies, login sets the session and identity cookies, they authenticate, logout clears them", async () => {
      const r = await fetch(`${cookieBase}/api/sessions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ email: ADMIN_EMAIL, password: ADMIN_PASSWORD }),
      });
      expect(r.status).toBe(201);
      const set = r.headers.getSetCookie();
      expect(set).toHaveLength(2);
      expect(set[0]).toMatch(/^session=[^;]+; Path=\/; SameSite=Lax; HttpOnly$/);
      expect(set[1]).toMatch(/^identity=[^;]+; Path=\/; SameSite=Lax; HttpOnly$/);
      const cookie = set.map((c) => c.split(";")[0]).join("; ");
      const lists = await call(cookieBase, "GET", `/api/tenants/${systemTenant}/runtime/commands`, { headers: { cookie } });
      expect(lists.status).toBe(200);
      const out = await fetch(`${cookieBase}/api/sessions/current`, { method: "DELETE", headers: { cookie, origin: cookieBase } });
      expect(out.status).toBe(204);
      expect(out.headers.getSetCookie().every((c) => c.includes("Max-Age=0"))).toBe(true);
      expect((await call(cookieBase, "GET", `/api/tenants/${systemTenant}/runtime/commands`, { headers: { cookie } })).status).toBe(401);
    });
  });

  /** Sends exactly these headers and body over node:http (fetch would add or normalise some). */
  function raw(
    at: string,
    method: string,
    path: string,
    headers: Record<string, string>,
    body = "",
  ): Promise<{ status: number; body: any }> {
    return new Promise((resolve, reject) => {
      const req = httpRequest(`${at}${path}`, { method, headers }, (res) => {
        let text = "";
        res.setEncoding("utf8");
        res.on("data", (c: string) => (text += c));
        res.on("end", () => resolve({ status: res.statusCode!, body: text === "" ? undefined : JSON.parse(text) }));
      });
      req.on("error", reject);
      req.end(body);
    });
  }

  async function cookieLogin(): Promise<string> {
    const r = await fetch(`${cookieBase}/api/sessions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ email: ADMIN_EMAIL, password: ADMIN_PASSWORD }),
    });
    expect(r.status).toBe(201);
    return r.headers
      .getSetCookie()
      .map((c) => c.split(";")[0])
      .join("; ");
  }

  describe("CSRF: state-changing requests authenticated by the session cookie alone", () => {
    const EVIL = "https://evil.example";
    const logout = () => `/api/tenants/${systemTenant}/commands/Account/Logout`;
    const entry = (key: string) => `/api/tenants/${systemTenant}/runtime/stores/cache/entries/${key}`;
    const json = { "content-type": "application/json" };
    const stillSignedIn = async (cookie: string) =>
      (await call(cookieBase, "GET", `/api/tenants/${systemTenant}/runtime/commands`, { headers: { cookie } })).status;

    it("an empty text/plain POST from another origin with only the cookie is 403 CSRF, and the session still works", async () => {
      const cookie = await cookieLogin();
      const r = await raw(cookieBase, "POST", logout(), { cookie, "content-type": "text/plain", "content-length": "0", origin: EVIL });
      expect(r.status).toBe(403);
      expect(r.body).toMatchObject({ code: "CSRF", status: 403, type: "urn:mneme:error:CSRF" });
      expect(await stillSignedIn(cookie)).toBe(200);
    });

    it("refuses every state-changing method from a foreign or opaque origin, a foreign Referer, or with neither header", async () => {
      const cookie = await cookieLogin();
      const requests: [method: string, path: string, body: string][] = [
        ["POST", logout(), ""],
        ["DELETE", "/api/sessions/current", ""],
        ["PATCH", entry("csrf"), JSON.stringify({ value: "x" })],
        ["DELETE", entry("csrf"), ""],
      ];
      const origins: Record<string, string>[] = [
        { origin: EVIL },
        { origin: "null" },
        { origin: `${cookieBase}.evil.example` },
        { referer: `${EVIL}/page?from=${encodeURIComponent(cookieBase)}` },
        {},
      ];
      for (const [method, path, body] of requests) {
        for (const from of origins) {
          const r = await raw(cookieBase, method, path, { cookie, ...json, ...from }, body);
          expect(r.status, `${method} ${path} ${JSON.stringify(from)}`).toBe(403);
          expect(r.body.code).toBe("CSRF");
        }
      }
      expect(await stillSignedIn(cookie)).toBe(200);
      // Reads are not state-changing: no Origin needed.
      expect((await raw(cookieBase, "GET", `/api/tenants/${systemTenant}/runtime/system-info`, { cookie, origin: EVIL })).status).toBe(200);
    });

    it("the request's own origin, its Referer, and an allowedOrigins entry pass", async () => {
      const cookie = await cookieLogin();
      const patch = (at: string, from: Record<string, string>) =>
        raw(at, "PATCH", entry("csrf-ok"), { cookie, ...json, ...from }, JSON.stringify({ value: 1 }));
      expect((await patch(cookieBase, { origin: cookieBase })).status).toBe(200);
      expect((await patch(cookieBase, { referer: `${cookieBase}/app/index.html` })).status).toBe(200);
      expect((await patch(allowedBase, { origin: "https://app.example" })).status).toBe(200);
      expect((await patch(allowedBase, { origin: allowedBase })).status).toBe(200);
      expect((await patch(allowedBase, { origin: EVIL })).status).toBe(403);
      expect((await patch(cookieBase, { origin: "https://app.example" })).status).toBe(403); // allowed on the other handler only
      // A same-origin logout does sign out.
      expect(
        (await raw(cookieBase, "POST", logout(), { cookie, "content-type": "text/plain", "content-length": "0", origin: cookieBase }))
          .status,
      ).toBe(200);
      expect(await stillSignedIn(cookie)).toBe(401);
    });

    it("requests with the token in the Authorization header are unaffected, whatever their Origin", async () => {
      const cookie = await cookieLogin();
      const s = await login(ADMIN_EMAIL, ADMIN_PASSWORD);
      const auth = bearer(s, s.identities[0]!.identityUuid);
      const r = await raw(cookieBase, "PATCH", entry("csrf-bearer"), { ...auth, ...json, origin: EVIL }, JSON.stringify({ value: 2 }));
      expect(r.status).toBe(200);
      // The header wins over a cookie sent along: still not a cookie-only request.
      expect(
        (await raw(cookieBase, "PATCH", entry("csrf-bearer"), { ...auth, cookie, ...json }, JSON.stringify({ value: 3 }))).status,
      ).toBe(200);
      expect(
        (await raw(cookieBase, "POST", logout(), { ...auth, "content-type": "text/plain", "content-length": "0", origin: EVIL })).status,
      ).toBe(200);
      expect((await call(cookieBase, "GET", `/api/accounts/${adminAccount}`, { headers: auth })).status).toBe(401);
      expect(await stillSignedIn(cookie)).toBe(200); // the cookie's own session is another one
    });

    it("createHttpHandler rejects an allowedOrigins entry that is not an origin", () => {
      for (const bad of [
        "app.example",
        "https://app.example/path",
        "https://app.example?x",
        "ftp://app.example",
        "*",
        "https://u:p@app.example",
      ]) {
        expect(() => createHttpHandler(facade, { allowedOrigins: [bad] }), bad).toThrow(
          expect.objectContaining({ code: "INVALID_REQUEST" }),
        );
      }
      expect(() => createHttpHandler(facade, { allowedOrigins: ["https://App.Example:443/", "http://127.0.0.1:8080"] })).not.toThrow();
    });
  });

  describe("GET /api/accounts/{accountUuid} and GET /api/accounts (spec 4)", () => {
    let ann: Session;
    let annUuid: string;
    beforeAll(async () => {
      annUuid = (
        await call(base, "POST", "/api/accounts", { body: { email: "bob@example.org", password: "bob's long password", name: "Bob" } })
      ).body.accountUuid;
      ann = await login("bob@example.org", "bob's long password");
    });

    it("the account itself gets its item; history only with includeHistory=true", async () => {
      const r = await call(base, "GET", `/api/accounts/${annUuid}`, { headers: bearer(ann) });
      expect(r.status).toBe(200);
      expect(r.body).toMatchObject({
        aggregateUuid: annUuid,
        model: { email: "bob@example.org", name: "Bob" },
        version: expect.any(Number),
      });
      expect(r.body).not.toHaveProperty("historyEvents");
      expect(JSON.stringify(r.body)).not.toMatch(/"hash"|keyHash|scrypt|salt/i);
      const h = await call(base, "GET", `/api/accounts/${annUuid}?includeHistory=true`, { headers: bearer(ann) });
      expect(h.status).toBe(200);
      expect(h.body.historyEvents.map((e: { domainEvtName: string }) => e.domainEvtName)).toContain("AccountRegistered");
      const direct = await facade.query(
        { domain: "Account", name: "GetAccount" },
        { accountUuid: annUuid, includeHistory: true },
        {
          reqCtx: { senderAccountUuid: annUuid, senderSessionUuid: ann.sessionUuid },
        },
      );
      expect(h.body).toEqual(JSON.parse(JSON.stringify(direct)));
    });

    it("another account is 403, an anonymous caller 401, an administrator 200; an unknown account is 404 for the administrator", async () => {
      const s = await login(ADMIN_EMAIL, ADMIN_PASSWORD);
      // A system administrator acts through an identity in the system tenant.
      const admin = bearer(s, s.identities[0]!.identityUuid);
      expect((await call(base, "GET", `/api/accounts/${adminAccount}`, { headers: bearer(ann) })).status).toBe(403);
      expect((await call(base, "GET", `/api/accounts/${annUuid}`)).status).toBe(401);
      expect((await call(base, "GET", `/api/accounts/${annUuid}`, { headers: admin })).status).toBe(200);
      expect((await call(base, "GET", `/api/accounts/${newUuid()}`, { headers: admin })).status).toBe(404);
      expect((await call(base, "GET", `/api/accounts/${annUuid}?includeHistory=maybe`, { headers: admin })).status).toBe(400);
    });

    it("GET /api/accounts is for system administrators: a page of items, with history when asked", async () => {
      const s = await login(ADMIN_EMAIL, ADMIN_PASSWORD);
      const admin = bearer(s, s.identities[0]!.identityUuid);
      expect((await call(base, "GET", "/api/accounts")).status).toBe(401);
      expect((await call(base, "GET", "/api/accounts", { headers: bearer(ann) })).status).toBe(403);
      const r = await call(base, "GET", "/api/accounts?pageSize=2", { headers: admin });
      expect(r.status).toBe(200);
      expect(r.body).toMatchObject({ total: 3, page: 1, pageSize: 2 });
      expect(r.body.items).toHaveLength(2);
      expect(r.body.items.every((i: object) => !("historyEvents" in i))).toBe(true);
      const h = await call(base, "GET", "/api/accounts?includeHistory=true&page=2&pageSize=2", { headers: admin });
      expect(h.body).toMatchObject({ total: 3, page: 2, pageSize: 2 });
      expect(h.body.items).toHaveLength(1);
      expect(h.body.items[0].historyEvents.length).toBeGreaterThan(0);
    });
  });

  describe("the permission matrix with the built-in authorizer", () => {
    it("an ordinary account: no runtime lists without an identity in the tenant, no control, stores or SSE; the administrator: all", async () => {
      const admin = await login(ADMIN_EMAIL, ADMIN_PASSWORD);
      const adminIdentity = admin.identities[0]!.identityUuid;
      const user = await login("bob@example.org", "bob's long password");
      const tp = (p: string) => `/api/tenants/${systemTenant}${p}`;
      const requests: { method: string; path: string; body?: unknown; ok: number }[] = [
        { method: "GET", path: tp("/runtime/commands"), ok: 200 },
        { method: "GET", path: tp("/runtime/system-info"), ok: 200 },
        { method: "POST", path: tp("/runtime/event-handler-list"), body: {}, ok: 200 },
        {
          method: "POST",
          path: tp("/runtime/event-handler-list"),
          body: { action: "restore", eventHandlerName: "TodoProjection" },
          ok: 200,
        },
        { method: "POST", path: tp("/runtime/schema"), body: { domain: "Account", type: "RegisterAccount" }, ok: 200 },
        { method: "GET", path: tp("/runtime/stores/event/info"), ok: 200 },
        { method: "GET", path: tp("/runtime/stores/command/entries?limit=3"), ok: 200 },
        { method: "POST", path: tp("/commands/Todo/CreateTodo"), body: { todoUuid: newUuid(), title: "t" }, ok: 200 },
      ];
      for (const r of requests) {
        const opts = r.body === undefined ? {} : { body: r.body };
        const asAdmin = await call(base, r.method, r.path, { ...opts, headers: bearer(admin, adminIdentity) });
        expect(asAdmin.status, `${r.method} ${r.path} as admin: ${JSON.stringify(asAdmin.body)}`).toBe(r.ok);
        const asUser = await call(base, r.method, r.path, { ...opts, headers: bearer(user) });
        expect(asUser.status, `${r.method} ${r.path} as user`).toBe(403);
        const anon = await call(base, r.method, r.path, opts);
        expect(anon.status, `${r.method} ${r.path} anonymous`).toBe(401);
      }
      const ac = new AbortController();
      const stream = await fetch(`${base}${tp("/runtime/sse")}`, { headers: bearer(admin, adminIdentity), signal: ac.signal });
      expect(stream.status).toBe(200);
      ac.abort();
      expect((await call(base, "GET", tp("/runtime/sse"), { headers: bearer(user) })).status).toBe(403);
      expect((await call(base, "GET", tp("/runtime/sse"))).status).toBe(401);
    });
  });
});
