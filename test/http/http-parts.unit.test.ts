/**
 * The parts of mneme/http on their own: the status table, the rate limiter
 * (fake clock), the SSE connection gauge, the body reader, the router and the
 * credential parser.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { MnemeErrorCode } from "mneme";
import { STATUS_BY_CODE, statusOf } from "mneme/http";
import { readJsonBody as readJson, type BodyLimits } from "../../src/http/body.js";
import { fetchInbound } from "../../src/http/exchange.js";
import { parseCookies, readCredentials } from "../../src/http/credentials.js";
import { ConnectionGauge, TokenBucketLimiter } from "../../src/http/limits.js";
import { Router } from "../../src/http/router.js";

describe("status table", () => {
  it("maps the codes the issue pins and falls back to 500 for an unknown code", () => {
    const pinned: [MnemeErrorCode, number][] = [
      ["UNAUTHENTICATED", 401],
      ["PERMISSION_DENIED", 403],
      ["NOT_FOUND", 404],
      ["UNKNOWN_COMMAND", 404],
      ["UNKNOWN_QUERY", 404],
      ["UNKNOWN_EVENT_HANDLER", 404],
      ["UNKNOWN_SCHEMA_TYPE", 404],
      ["CONFLICT", 409],
      ["INVALID_STATE", 409],
      ["INVALID_REQUEST", 400],
      ["VALIDATION_FAILED", 400],
      ["INVALID_ACTION", 400],
      ["PAYLOAD_TOO_LARGE", 413],
      ["RATE_LIMITED", 429],
      ["SSE_PRODUCER_NOT_RUNNING", 503],
      ["STORE_PERMISSIONS_NOT_REGISTERED", 503],
      ["SSE_CONNECTION_LIMIT", 503],
      ["UNAVAILABLE", 503],
      ["CSRF", 403],
    ];
    for (const [code, status] of pinned) expect(STATUS_BY_CODE[code], code).toBe(status);
    expect(statusOf("SOMETHING_NEW")).toBe(500);
  });
});

describe("TokenBucketLimiter", () => {
  it("allows a burst of `requests`, then refills evenly over the window", () => {
    let now = 0;
    const l = new TokenBucketLimiter(4, 60_000, () => now);
    for (let i = 0; i < 4; i++) expect(l.take("s").allowed).toBe(true);
    expect(l.take("s")).toEqual({ allowed: false, retryAfterSeconds: 15 });
    expect(l.take("other").allowed).toBe(true);
    now += 14_999;
    expect(l.take("s")).toEqual({ allowed: false, retryAfterSeconds: 1 });
    now += 2;
    expect(l.take("s").allowed).toBe(true);
    expect(l.take("s").allowed).toBe(false);
  });

  it("never allows more than requests + elapsed * rate (property)", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 20 }),
        fc.integer({ min: 1000, max: 60_000 }),
        fc.array(fc.integer({ min: 0, max: 5000 }), { maxLength: 200 }),
        (requests, windowMs, gaps) => {
          let now = 0;
          const l = new TokenBucketLimiter(requests, windowMs, () => now);
          let allowed = 0;
          for (const g of gaps) {
            now += g;
            if (l.take("k").allowed) allowed++;
          }
          expect(allowed).toBeLessThanOrEqual(requests + Math.floor((now * requests) / windowMs));
        },
      ),
    );
  });

  it("forgets idle sessions whose bucket refilled, so memory follows the active sessions", () => {
    let now = 0;
    const l = new TokenBucketLimiter(2, 1000, () => now);
    for (let i = 0; i < 100; i++) l.take(`s${i}`);
    expect(l.size).toBe(100);
    now += 5000;
    l.take("fresh");
    expect(l.size).toBe(1);
  });
});

describe("ConnectionGauge", () => {
  it("hands out at most max slots; a release is idempotent", () => {
    const g = new ConnectionGauge(2);
    const a = g.tryAcquire()!;
    const b = g.tryAcquire()!;
    expect(g.tryAcquire()).toBeUndefined();
    a();
    a();
    expect(g.open).toBe(1);
    expect(g.tryAcquire()).toBeDefined();
    b();
    expect(g.open).toBe(1);
  });
});

/** readJsonBody over a Fetch Request (the node:http path runs through the e2e tests). */
const readJsonBody = (request: Request, limits: BodyLimits) => readJson(fetchInbound(request), limits);

describe("readJsonBody", () => {
  const limits = { maxBytes: 100, maxDepth: 3 };
  const req = (body: BodyInit | null, headers: Record<string, string> = { "content-type": "application/json" }) =>
    new Request("http://x/", { method: "POST", headers, body });

  it("parses JSON, treats an empty body as undefined, accepts +json and a UTF-8 charset", async () => {
    expect(await readJsonBody(req('{"a":[1]}'), limits)).toEqual({ a: [1] });
    expect(await readJsonBody(req(null), limits)).toBeUndefined();
    expect(await readJsonBody(req(""), limits)).toBeUndefined();
    expect(await readJsonBody(req("1", { "content-type": "application/merge-patch+json" }), limits)).toBe(1);
    expect(await readJsonBody(req("true", { "content-type": "application/json; charset=UTF-8" }), limits)).toBe(true);
  });

  it("rejects: too large (413), wrong type, wrong charset, no type with a body, not UTF-8, malformed, too deep", async () => {
    await expect(readJsonBody(req("x".repeat(101)), limits)).rejects.toMatchObject({ code: "PAYLOAD_TOO_LARGE" });
    await expect(readJsonBody(req("1", { "content-type": "text/plain" }), limits)).rejects.toMatchObject({
      name: "MnemeError",
      code: "INVALID_REQUEST",
    });
    await expect(readJsonBody(req("1", { "content-type": "application/json; charset=latin1" }), limits)).rejects.toThrow(/UTF-8/);
    await expect(readJsonBody(new Request("http://x/", { method: "POST", body: new Uint8Array([49]) }), limits)).rejects.toThrow(
      /Content-Type/,
    );
    await expect(readJsonBody(req(new Uint8Array([0x22, 0xff, 0x22])), limits)).rejects.toThrow(/UTF-8/);
    await expect(readJsonBody(req('{"a":'), limits)).rejects.toThrow(/not valid JSON/);
    await expect(readJsonBody(req("[[[[1]]]]"), limits)).rejects.toThrow(/nests deeper than 3/);
    expect(await readJsonBody(req("[[[1]]]"), limits)).toEqual([[[1]]]);
  });

  it("the shortest body one level too deep is refused (short bodies skip the depth walk only when they cannot nest past it)", async () => {
    await expect(readJsonBody(req("[[[[]]]]"), limits)).rejects.toThrow(/nests deeper than 3/);
    await expect(readJsonBody(req('{"a":{"b":{"c":{}}}}'), limits)).rejects.toThrow(/nests deeper than 3/);
    expect(await readJsonBody(req("[[[]]]"), limits)).toEqual([[[]]]);
    expect(await readJsonBody(req("[[],[],[[]]]"), limits)).toEqual([[], [], [[]]]);
  });

  it("a Content-Type accepted once is accepted again; a refused one stays refused after accepted ones", async () => {
    const type = "application/vnd.cache-test+json; charset=utf-8";
    for (let i = 0; i < 3; i++) {
      expect(await readJsonBody(req("[1]", { "content-type": type }), limits)).toEqual([1]);
      await expect(readJsonBody(req("1", { "content-type": "text/json" }), limits)).rejects.toThrow(/must be JSON/);
      await expect(readJsonBody(req("1", { "content-type": "application/json; charset=utf-16" }), limits)).rejects.toThrow(/UTF-8/);
    }
    // Past the bound of kept types, checking goes on the same way.
    for (let i = 0; i < 40; i++) expect(await readJsonBody(req("2", { "content-type": `application/x${i}+json` }), limits)).toBe(2);
    await expect(readJsonBody(req("1", { "content-type": "text/plain" }), limits)).rejects.toThrow(/must be JSON/);
  });

  it("stops reading a streamed body as soon as it passes the limit", async () => {
    let pulled = 0;
    const stream = new ReadableStream<Uint8Array>({
      pull(c) {
        pulled++;
        c.enqueue(new Uint8Array(40).fill(0x20));
      },
    });
    const r = new Request("http://x/", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: stream,
      duplex: "half",
    } as RequestInit);
    await expect(readJsonBody(r, limits)).rejects.toMatchObject({ code: "PAYLOAD_TOO_LARGE" });
    expect(pulled).toBeLessThan(6);
  });
});

describe("Router", () => {
  const r = new Router<string>()
    .add("GET", "/api/tenants/:t/runtime/commands", "commands")
    .add("POST", "/api/tenants/:t/runtime/schema", "schema")
    .add("GET", "/api/accounts/:a", "account")
    .add("GET", "/api/accounts", "accounts")
    .add("POST", "/api/accounts", "register");

  it("matches literal segments and decodes parameters", () => {
    expect(r.match("GET", "/api/tenants/t%2F1/runtime/commands")).toEqual({ kind: "found", value: "commands", params: { t: "t/1" } });
    expect(r.match("GET", "/api/accounts/")).toEqual({ kind: "found", value: "accounts", params: {} });
    expect(r.match("GET", "/api/accounts/x")).toMatchObject({ value: "account", params: { a: "x" } });
  });

  it("tells a wrong method (with the allowed ones) from an unknown path; a bad escape is INVALID_REQUEST", () => {
    expect(r.match("DELETE", "/api/accounts")).toEqual({ kind: "method-not-allowed", allow: ["GET", "POST"] });
    expect(r.match("GET", "/api/tenants//runtime/commands")).toEqual({ kind: "not-found" });
    expect(r.match("GET", "/nothing")).toEqual({ kind: "not-found" });
    expect(() => r.match("GET", "/api/accounts/%E0%A4%A")).toThrow(expect.objectContaining({ code: "INVALID_REQUEST" }));
    expect(() => new Router<string>().add("GET", "/a/:x", "1").add("GET", "/a/:x", "2")).toThrow(/twice/);
  });

  it("tries the routes in order: a literal after a parameter decides, every parameter is given, none may be empty", () => {
    const s = new Router<string>().add("GET", "/t/:t/a/:x", "a").add("GET", "/t/:t/b/:x", "b").add("GET", "/t/:t/:kind/:x", "any");
    expect(s.match("GET", "/t/1/b/2")).toEqual({ kind: "found", value: "b", params: { t: "1", x: "2" } });
    expect(s.match("GET", "/t/1/c/%41")).toEqual({ kind: "found", value: "any", params: { t: "1", kind: "c", x: "A" } });
    expect(s.match("GET", "/t/1/a/")).toEqual({ kind: "not-found" });
    expect(s.match("GET", "/t//a/2")).toEqual({ kind: "not-found" });
  });
});

describe("readCredentials", () => {
  const h = (init: Record<string, string>) => new Headers(init);
  it("reads the bearer token and identity, else the cookies; the header wins", () => {
    expect(readCredentials(h({ authorization: "Bearer s1.k1", "x-identity-uuid": "i1" }))).toEqual({
      sessionUuid: "s1",
      sessionKey: "k1",
      identityUuid: "i1",
    });
    expect(readCredentials(h({ authorization: "bearer   s1.k.with.dots " }))).toEqual({ sessionUuid: "s1", sessionKey: "k.with.dots" });
    expect(readCredentials(h({ cookie: "a=1; session=s2.k2; identity=i2" }))).toEqual({
      sessionUuid: "s2",
      sessionKey: "k2",
      identityUuid: "i2",
    });
    expect(readCredentials(h({ cookie: "session=s2.k2", authorization: "Bearer s1.k1" }))).toEqual({ sessionUuid: "s1", sessionKey: "k1" });
    expect(readCredentials(h({}))).toBeUndefined();
  });

  it("returns a reason for what cannot be used", () => {
    for (const bad of [
      { authorization: "Basic abc" },
      { authorization: "Bearer" },
      { authorization: "Bearer .k" },
      { authorization: "Bearer s." },
      { "x-identity-uuid": "i" },
      { authorization: `Bearer s.${"k".repeat(600)}` },
    ]) {
      expect(typeof readCredentials(h(bad)), JSON.stringify(bad)).toBe("string");
    }
  });

  it("parses cookies leniently: quotes, percent-decoding, first of a repeated name, junk ignored", () => {
    const c = parseCookies('x; a="q"; b=%41%42; a=second; c=%E0%A4%A; =v');
    expect(Object.fromEntries(c)).toEqual({ a: "q", b: "AB", c: "%E0%A4%A" });
  });
});

describe("dispatch through tokens", () => {
  it("names no command or query by a string: every route's message is a Runtime or built-in token", async () => {
    const { readdirSync, readFileSync } = await import("node:fs");
    const dir = new URL("../../src/http/", import.meta.url);
    for (const file of readdirSync(dir).filter((f) => f.endsWith(".ts"))) {
      const text = readFileSync(new URL(file, dir), "utf8");
      expect({ file, byName: text.match(/domain: "\w+"|"(Runtime|Account|Tenant)"/g) ?? [] }).toEqual({ file, byName: [] });
    }
    const { buildRoutes } = await import("../../src/http/routes.js");
    const { ListCommands, StoreRead } = await import("mneme/runtime");
    const { Login, accountRoutes } = await import("mneme/defaults");
    const routes = buildRoutes([accountRoutes()]);
    const guard = (method: string, path: string) => {
      const m = routes.match(method, path);
      return m.kind === "found" ? m.value.route.guard(m.params) : undefined;
    };
    // A guardBy guard is worked out once, when the table is built: the same message, and whether it is a store's.
    const fixed = (method: string, path: string) => {
      const m = routes.match(method, path);
      return m.kind === "found" ? m.value.fixed : undefined;
    };
    expect(fixed("GET", "/api/tenants/t/runtime/commands")).toEqual({ guard: ListCommands, storeAccess: false });
    expect(fixed("GET", "/api/tenants/t/runtime/stores/event/entries")).toEqual({ guard: StoreRead, storeAccess: true });
    expect(fixed("POST", "/api/tenants/t/commands/Todo/CreateTodo")).toBeUndefined();
    expect(guard("GET", "/api/tenants/t/runtime/commands")).toBe(ListCommands);
    expect(guard("GET", "/api/tenants/t/runtime/stores/event/entries")).toBe(StoreRead);
    expect(guard("POST", "/api/sessions")).toBe(Login);
    // The core alone knows no domain: the login route comes with the module.
    expect(buildRoutes().match("POST", "/api/sessions").kind).toBe("not-found");
  });

  it("the HTTP core imports nothing of mneme/defaults", async () => {
    const { readdirSync, readFileSync } = await import("node:fs");
    const dir = new URL("../../src/http/", import.meta.url);
    for (const file of readdirSync(dir).filter((f) => f.endsWith(".ts"))) {
      const text = readFileSync(new URL(file, dir), "utf8");
      expect({ file, imports: text.match(/from "\.\.\/defaults\/[^"]*"/g) ?? [] }).toEqual({ file, imports: [] });
    }
  });
});

describe("fetchInbound", () => {
  /** What the URL parser makes of a Request's URL: fetchInbound slices canonical ones and must give the same. */
  const parsed = (href: string) => {
    const u = new URL(new Request(href).url);
    return { origin: u.origin, pathname: u.pathname, query: [...u.searchParams] };
  };
  const read = (request: Request) => {
    const i = fetchInbound(request);
    return { origin: i.origin, pathname: i.pathname, query: [...i.searchParams] };
  };

  it("gives the URL parser's origin, path and query, whether the URL is sliced or parsed", () => {
    for (const href of [
      "http://example.test/api/a?page=2&x=%20y+z",
      "https://example.test:8443/a/b/",
      "http://EXAMPLE.test:80/a",
      "https://example.test:8080/a@b?c@d&e",
      "http://example.test/a??b=1",
      "http://127.1/a",
      "http://[::1]:3000/a/%2e%2E/b?q=1#frag",
      "http://example.test/a/./b/../c?x=a'b",
      "http://example.test/a b/ü?q=ü",
      "http://xn--bcher-kva.test/",
      "http://example.test",
    ]) {
      expect(read(new Request(href)), href).toEqual(parsed(href));
    }
  });

  it("matches the URL parser on any path and query (property)", () => {
    const chars = fc.constantFrom(..."aZ09-._~!$&'()*+,;=:@/%?#[]\\ \"<>^`{|}é".split(""));
    fc.assert(
      fc.property(
        fc.string({ unit: chars, maxLength: 30 }),
        fc.constantFrom("http://h.test", "https://h.test:444", "http://H.test"),
        (tail, base) => {
          const href = `${base}/${tail}`;
          let request: Request;
          try {
            request = new Request(href);
          } catch {
            return;
          }
          expect(read(request)).toEqual(parsed(href));
        },
      ),
      { numRuns: 500 },
    );
  });

  it("refuses a request whose URL does not parse with INVALID_REQUEST", () => {
    const fake = {
      url: "http://[x/",
      method: "GET",
      headers: new Headers(),
      body: null,
      signal: new AbortController().signal,
    } as unknown as Request;
    expect(() => fetchInbound(fake)).toThrow(expect.objectContaining({ code: "INVALID_REQUEST" }));
  });
});
