/**
 * Fuzzing mneme/http with fast-check: arbitrary methods, paths (route-shaped
 * and random, with bad percent-escapes), headers (credentials, content types,
 * SSE and concurrency headers) and bodies (JSON, near-JSON, bytes), as an
 * anonymous caller, a user and the administrator. No request may get a 5xx,
 * and every error is a well-formed problem+json. First against the handler
 * directly (many runs), then through a real node:http server with raw request
 * targets that fetch would normalise.
 */
import { request as httpRequest } from "node:http";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Facade } from "mneme";
import { createHttpHandler, type HttpHandler } from "mneme/http";
import { ADMIN, TENANT_A, USER, serve, startFacade, testResolver, type TestServer } from "./support/http-fixture.js";

let facade: Facade;
let handler: HttpHandler;
let srv: TestServer;

beforeAll(async () => {
  facade = await startFacade();
  handler = createHttpHandler(facade, { resolveCredentials: testResolver, storeRateLimit: false, sse: { heartbeatMs: 60_000 } });
  srv = await serve(facade, { storeRateLimit: false });
});
afterAll(async () => {
  await srv.close();
  await facade.stop();
});

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

  it("through node:http with raw request targets and bodies", async () => {
    const { port } = new URL(srv.url);
    const rawTarget = fc.oneof(
      path,
      fc.constantFrom(
        "//api/accounts",
        "/api/tenants/../accounts",
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
        const { status, type, text } = await new Promise<{ status: number; type: string; text: string }>((resolve, reject) => {
          const req = httpRequest({ host: "127.0.0.1", port, method: m, path: target, headers }, (res) => {
            const chunks: Buffer[] = [];
            if ((res.headers["content-type"] ?? "").startsWith("text/event-stream")) {
              resolve({ status: res.statusCode ?? 0, type: "sse", text: "" });
              res.destroy();
              return;
            }
            res.on("data", (c: Buffer) => chunks.push(c));
            res.on("end", () =>
              resolve({
                status: res.statusCode ?? 0,
                type: String(res.headers["content-type"] ?? ""),
                text: Buffer.concat(chunks).toString(),
              }),
            );
            res.on("error", reject);
          });
          req.on("error", reject);
          req.end(payload);
        });
        const what = `${m} ${target}`;
        expect(status, what).toBeLessThan(500);
        if (status >= 400 && type !== "sse" && m !== "HEAD") {
          expect(type, what).toBe("application/problem+json");
          expect(JSON.parse(text).status, what).toBe(status);
        }
      }),
      { numRuns: 200 },
    );
  }, 120_000);
});
