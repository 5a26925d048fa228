/**
 * Fuzzing mneme/http with fast-check: arbitrary methods, paths (route-shaped
 * and random, with bad percent-escapes), headers (credentials, content types,
 * SSE and concurrency headers) and bodies (JSON, near-JSON, bytes), as an
 * anonymous caller, a user and the administrator. No request may get a 5xx,
 * and every error is a well-formed problem+json. First against the handler
 * directly (many runs), then through a real node:http server with raw request
 * targets that fetch would normalise, on toNodeListener's direct path and
 * through the Fetch API: two servers over two facades fed the same requests
 * must answer alike (status, headers, problem codes).
 */
import { request as httpRequest } from "node:http";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Facade } from "mneme";
import { createHttpHandler, type HttpHandler } from "mneme/http";
import { ADMIN, TENANT_A, USER, serve, startFacade, testResolver, type TestServer } from "../support/http-fixture.js";

let facade: Facade;
let twin: Facade;
let handler: HttpHandler;
let srv: TestServer;
let srvFetch: TestServer;

beforeAll(async () => {
  facade = await startFacade();
  twin = await startFacade();
  handler = createHttpHandler(facade, { resolveCredentials: testResolver, storeRateLimit: false, sse: { heartbeatMs: 60_000 } });
  srv = await serve(facade, { storeRateLimit: false }, "direct");
  srvFetch = await serve(twin, { storeRateLimit: false }, "fetch");
});
afterAll(async () => {
  await srv.close();
  await srvFetch.close();
  await facade.stop();
  await twin.stop();
});

interface RawAnswer {
  status: number;
  type: string;
  text: string;
  headers: Record<string, string | string[] | undefined>;
}

/** One request with node's client, the target as given (fetch would normalise it). */
function rawRequest(
  base: string,
  m: string,
  target: string,
  headers: Record<string, string>,
  payload: Buffer | undefined,
): Promise<RawAnswer> {
  const { port } = new URL(base);
  return new Promise<RawAnswer>((resolve, reject) => {
    const req = httpRequest({ host: "127.0.0.1", port, method: m, path: target, headers, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      const done = (type: string, text: string) => resolve({ status: res.statusCode ?? 0, type, text, headers: res.headers });
      if ((res.headers["content-type"] ?? "").startsWith("text/event-stream")) {
        done("sse", "");
        res.destroy();
        return;
      }
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () => done(String(res.headers["content-type"] ?? ""), Buffer.concat(chunks).toString()));
      res.on("error", reject);
    });
    req.on("error", reject);
    req.end(payload);
  });
}

/** What both paths must agree on: status, headers (not the date), the problem's code, a JSON answer's top-level keys. */
function comparable(a: RawAnswer): unknown {
  const { date: _date, ...headers } = a.headers;
  let body: unknown = a.text;
  if (a.type.includes("json") && a.text !== "") {
    const parsed = JSON.parse(a.text) as unknown;
    body =
      typeof parsed === "object" && parsed !== null && !Array.isArray(parsed)
        ? "code" in parsed
          ? { code: (parsed as { code: unknown }).code }
          : Object.keys(parsed).sort()
        : typeof parsed;
    // Ids and times differ between the two facades, so JSON bodies differ in length too.
    delete headers["content-length"];
  }
  return { status: a.status, headers, body };
}

const printable = fc.string({ unit: fc.integer({ min: 0x20, max: 0x7e }).map((c) => String.fromCharCode(c)), maxLength: 40 });
const words = [
  "api",
  "tenants",
  TENANT_A,
  "runtime",
  "commands",
  "queries",
  "Todo",
  "CreateTodo",
  "RenameTodo",
  "GetTodo",
  "ListTodos",
  "event-handler-list",
  "schema",
  "sse",
  "stores",
  "event",
  "cache",
  "data",
  "log",
  "command",
  "entries",
  "info",
  "accounts",
  "sessions",
  "current",
  "metrics",
  "system-info",
  "permissions",
  "event-handlers",
  "Runtime",
  "ListCommands",
  "ControlEventHandler",
  "StoreUpdate",
  "StoreDelete",
  "StoreRead",
  "GetSchema",
  "Account",
  "Login",
  "..",
  ".",
  "%",
  "%zz",
  "%E0%A4%A",
  "%2F",
  "%00",
  "",
];
const segment = fc.oneof(
  { weight: 4, arbitrary: fc.constantFrom(...words) },
  { weight: 1, arbitrary: printable.map((s) => s.replace(/[/?#]/g, "")) },
  { weight: 1, arbitrary: fc.string({ maxLength: 12 }).map((s) => encodeURIComponent(s)) },
);
const templates = [
  "/api/tenants/:t/runtime/event-handler-list",
  "/api/tenants/:t/runtime/schema",
  "/api/tenants/:t/runtime/commands",
  "/api/tenants/:t/runtime/permissions",
  "/api/tenants/:t/runtime/metrics",
  "/api/tenants/:t/runtime/system-info",
  "/api/tenants/:t/runtime/sse",
  "/api/tenants/:t/runtime/stores/:s/info",
  "/api/tenants/:t/runtime/stores/:s/entries",
  "/api/tenants/:t/runtime/stores/:s/entries/:k",
  "/api/tenants/:t/commands/:d/:n",
  "/api/tenants/:t/queries/:d/:n",
  "/api/accounts",
  "/api/accounts/:a",
  "/api/sessions",
  "/api/sessions/current",
];
const routeShaped = fc.tuple(fc.constantFrom(...templates), fc.array(segment, { minLength: 6, maxLength: 6 })).map(([tpl, subs]) => {
  let i = 0;
  return tpl.replace(/:[a-z]/g, () => subs[i++] ?? "x");
});
const randomPath = fc.array(segment, { maxLength: 8 }).map((s) => `/${s.join("/")}`);
const queryString = fc
  .array(
    fc.tuple(
      fc.constantFrom(
        "page",
        "pageSize",
        "wait",
        "includeHistory",
        "lastEventId",
        "allTenants",
        "cursor",
        "limit",
        "domain",
        "eventHandlerName",
      ),
      fc.oneof(fc.constantFrom("1", "0", "true", "false", "-1", "1e3", "", "50", "1001", "abc"), printable),
    ),
    { maxLength: 3 },
  )
  .map((kv) => (kv.length === 0 ? "" : `?${kv.map(([k, v]) => `${k}=${encodeURIComponent(v)}`).join("&")}`));
const path = fc
  .tuple(fc.oneof({ weight: 3, arbitrary: routeShaped }, { weight: 1, arbitrary: randomPath }), queryString)
  .map(([p, q]) => p + q);

const credentials = fc.oneof(
  fc.constant<Record<string, string>>({}),
  fc.constant(USER.headers),
  fc.constant(ADMIN.headers),
  fc.constant({ authorization: USER.headers.authorization! }),
  printable.map((s) => ({ authorization: s })),
  printable.map((s) => ({ authorization: `Bearer ${s}` })),
  printable.map((s) => ({ cookie: s })),
  printable.map((s) => ({ ...ADMIN.headers, "x-identity-uuid": s })),
);
const extraHeaders = fc.record(
  {
    "content-type": fc.constantFrom(
      "application/json",
      "application/json; charset=utf-8",
      "text/plain",
      "application/merge-patch+json",
      "application/json; charset=latin1",
      "multipart/form-data",
      "",
    ),
    "last-event-id": printable,
    traceparent: printable,
    "x-target-aggregate-uuid": printable,
    "x-target-aggregate-version": fc.oneof(fc.constantFrom("0", "1", "-1", "x"), printable),
  },
  { requiredKeys: [] },
);

const bodyObject = fc.record(
  {
    action: fc.oneof(fc.constantFrom("list", "restore", "start", "stop", "explode"), fc.jsonValue()),
    eventHandlerName: fc.oneof(fc.constant("TodoProjection"), fc.jsonValue()),
    restoreFromZero: fc.jsonValue(),
    domain: fc.oneof(fc.constantFrom("Todo", "Runtime"), fc.jsonValue()),
    type: fc.oneof(fc.constantFrom("CreateTodo", "GetTodo"), fc.jsonValue()),
    todoUuid: fc.oneof(fc.uuid(), fc.jsonValue()),
    title: fc.oneof(printable, fc.jsonValue()),
    page: fc.jsonValue(),
    pageSize: fc.jsonValue(),
    store: fc.oneof(fc.constantFrom("event", "cache", "data", "log", "command"), fc.jsonValue()),
    key: fc.jsonValue(),
    value: fc.jsonValue(),
  },
  { requiredKeys: [] },
);
const body = fc.oneof(
  fc.constant<string | Uint8Array | undefined>(undefined),
  bodyObject.map((o) => JSON.stringify(o)),
  fc.jsonValue().map((v) => JSON.stringify(v)),
  fc.string({ maxLength: 60 }),
  fc.uint8Array({ maxLength: 60 }),
  fc.constantFrom("{", "[[[[", '{"a":}', "\uFEFF{}", "null", '"x"', "1e999"),
);
const method = fc.constantFrom("GET", "POST", "PATCH", "DELETE", "PUT", "OPTIONS", "HEAD");

async function checkResponse(res: Response, what: string): Promise<void> {
  expect(res.status, what).toBeLessThan(500);
  expect(res.status, what).toBeGreaterThanOrEqual(200);
  const type = res.headers.get("content-type") ?? "";
  if (type.startsWith("text/event-stream")) {
    await res.body?.cancel();
    return;
  }
  const text = await res.text();
  if (res.status >= 400 && what.startsWith("HEAD ")) {
    expect(type, what).toBe("application/problem+json");
  } else if (res.status >= 400) {
    expect(type, what).toBe("application/problem+json");
    const p = JSON.parse(text) as Record<string, unknown>;
    expect(p.status, what).toBe(res.status);
    expect(typeof p.code, what).toBe("string");
    expect(typeof p.detail, what).toBe("string");
    expect(String(p.type), what).toBe(`urn:mneme:error:${String(p.code)}`);
  }
}

describe("fuzzing mneme/http never gets a 5xx", () => {
  it("against the handler: arbitrary method, path, headers and body", async () => {
    await fc.assert(
      fc.asyncProperty(method, path, credentials, extraHeaders, body, async (m, p, creds, extra, b) => {
        const headers = new Headers();
        for (const [k, v] of Object.entries({ ...creds, ...extra })) {
          if (v !== undefined && v !== "") headers.set(k, v);
        }
        const hasBody = b !== undefined && m !== "GET" && m !== "HEAD";
        let req: Request;
        try {
          req = new Request(`http://127.0.0.1${p}`, { method: m, headers, ...(hasBody ? { body: b as BodyInit } : {}) });
        } catch {
          return; // not a request a client could send
        }
        await checkResponse(await handler(req), `${m} ${p}`);
      }),
      { numRuns: 1500 },
    );
  }, 120_000);

  it("through node:http with raw request targets and bodies: the direct path and the Fetch path answer alike", async () => {
    const rawTarget = fc.oneof(
      path,
      fc.constantFrom(
        "//api/accounts",
        "/api/tenants/../accounts",
        `/api/tenants/${TENANT_A}/runtime/x/../commands`,
        `/api/tenants/${TENANT_A}/runtime/%2e%2e/runtime/commands`,
        "/api//tenants",
        "/%",
        "/api/tenants/%ZZ/runtime/commands",
        "*",
        "http://other.host/api/accounts",
      ),
    );
    await fc.assert(
      fc.asyncProperty(method, rawTarget, credentials, extraHeaders, body, async (m, target, creds, extra, b) => {
        if (/[\s\u0000-\u001f\u007f-\uffff]/.test(target)) return; // node's client refuses such a request line
        const headers: Record<string, string> = {};
        for (const [k, v] of Object.entries({ ...creds, ...extra })) if (v !== undefined && v !== "") headers[k] = v;
        const payload = b === undefined ? undefined : typeof b === "string" ? Buffer.from(b) : Buffer.from(b);
        if (payload !== undefined) headers["content-length"] = String(payload.length);
        const direct = await rawRequest(srv.url, m, target, headers, payload);
        const viaFetch = await rawRequest(srvFetch.url, m, target, headers, payload);
        const what = `${m} ${target}`;
        expect(direct.status, what).toBeLessThan(500);
        if (direct.status >= 400 && direct.type !== "sse" && m !== "HEAD") {
          expect(direct.type, what).toBe("application/problem+json");
          expect((JSON.parse(direct.text) as { status: number }).status, what).toBe(direct.status);
        }
        expect(comparable(direct), what).toEqual(comparable(viaFetch));
      }),
      { numRuns: 300 },
    );
  }, 120_000);
});
