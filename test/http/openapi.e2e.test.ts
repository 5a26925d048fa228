/**
 * The OpenAPI 3.1 document of mneme/http: valid by a standard validator
 * (@seriousme/openapi-schema-validator) and by Ajv's 2020-12 compiler (every
 * schema compiles, every reference resolves); every command and query
 * present with its payload schema, permission and problem answers; and true
 * of a live app: for every operation of the document a request that matches
 * it is sent to the library app on SQLite, and the answer's status is one
 * the operation documents, its body valid against the documented schema.
 * Served at GET /api/openapi.json (public, authenticated, or off) and written
 * by `mneme openapi` alike.
 */
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { Ajv2020, type ValidateFunction } from "ajv/dist/2020.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { newUuid } from "mneme";
import { buildOpenApiDocument, type OpenApiDocument, type OpenApiOperation } from "mneme/http";
import { httpOptions } from "../support/library-app.js";
import { login, type LibraryWorld, type Session, startLibrary } from "../support/library-world.js";
import { runProcess } from "../support/run-process.js";
import { sqliteScratch } from "../support/sqlite-scratch.js";

const scratch = sqliteScratch("openapi");
const root = fileURLToPath(new URL("../..", import.meta.url));
// Imported by a name held in a variable: the type checker does not need the package, the test does.
const VALIDATOR = "@seriousme/openapi-schema-validator";
/** The document's id in Ajv: its `#/components/...` references resolve inside it. */
const DOC = "https://mneme.test/openapi.json";

let world: LibraryWorld;
let doc: OpenApiDocument;
let admin: Session;

beforeAll(async () => {
  world = await startLibrary(scratch.newFile());
  doc = (await (await fetch(`${world.url}/api/openapi.json`)).json()) as OpenApiDocument;
  admin = await login(world.url);
});
afterAll(async () => {
  await world?.close();
});

/** Every operation with its path and method. */
function operations(d: OpenApiDocument): { path: string; method: string; op: OpenApiOperation }[] {
  return Object.entries(d.paths).flatMap(([path, item]) => Object.entries(item).map(([method, op]) => ({ path, method, op })));
}

describe("the OpenAPI document", () => {
  it("is valid OpenAPI 3.1 by a standard validator", async () => {
    const { Validator } = (await import(VALIDATOR).catch((e: unknown) => {
      throw new Error(`${VALIDATOR} is a devDependency of this test: npm install --save-dev ${VALIDATOR}@2.11.0`, { cause: e });
    })) as {
      Validator: new () => { validate(d: unknown): Promise<{ valid: boolean; errors?: unknown }> };
    };
    const result = await new Validator().validate(structuredClone(doc));
    expect(result.errors).toBeUndefined();
    expect(result.valid).toBe(true);
    expect(doc.openapi).toBe("3.1.0");
    expect(doc.jsonSchemaDialect).toBe("https://json-schema.org/draft/2020-12/schema");
  });

  it("has schemas that compile as JSON Schema 2020-12, every $ref resolving", () => {
    const ajv = new Ajv2020({ strict: false, validateFormats: false, allErrors: true });
    ajv.addSchema(doc, DOC);
    for (const name of Object.keys(doc.components.schemas)) {
      expect(() => ajv.compile({ $ref: `${DOC}#/components/schemas/${name}` }), name).not.toThrow();
    }
    for (const { op } of operations(doc)) {
      const schema = op.requestBody?.content["application/json"]?.schema;
      if (schema !== undefined) expect(() => ajv.compile({ $id: `op:${op.operationId}`, ...rebase(schema) }), op.operationId).not.toThrow();
    }
  });

  it("lists every command and query with its payload schema, its permission and its problems", () => {
    const f = world.facade;
    for (const d of f.domains.values()) {
      for (const [kind, types] of [
        ["commands", d.commands],
        ["queries", d.queries],
      ] as const) {
        for (const t of types.values()) {
          const op = doc.paths[`/api/tenants/{tenantUuid}/${kind}/${d.name}/${t.name}`]?.post;
          expect(op, `${d.name}.${t.name}`).toBeDefined();
          expect(op!["x-mneme-message"]).toEqual({ kind: kind === "commands" ? "command" : "query", domain: d.name, name: t.name });
          expect(op!.responses["403"]).toEqual({ $ref: "#/components/responses/Problem403" });
        }
      }
    }
    const addBook = doc.paths["/api/tenants/{tenantUuid}/commands/Library/AddBook"]!.post!;
    // The payload's $defs are lifted into components, named by the domain.
    expect(addBook.requestBody!.content["application/json"]!.schema).toEqual({ $ref: "#/components/schemas/Library.AddBook" });
    const addBookSchema = doc.components.schemas["Library.AddBook"] as { properties: { shelf: { $ref: string } } };
    expect(addBookSchema.properties.shelf.$ref).toBe("#/components/schemas/Library.Shelf");
    expect(doc.components.schemas["Library.Shelf"]).toMatchObject({ type: "object", required: ["room"] });
    // Permissions: authorized needs a session and an identity; anonymous nothing; a custom function decides.
    expect(addBook.security).toEqual([
      { sessionToken: [], identityHeader: [] },
      { sessionCookie: [], identityCookie: [] },
    ]);
    expect(addBook["x-mneme-permission"]).toMatchObject({ kind: "level", level: "Authorized" });
    const listBooks = doc.paths["/api/tenants/{tenantUuid}/queries/Library/ListBooks"]!.post!;
    expect(listBooks.security).toEqual([]);
    const lendBook = doc.paths["/api/tenants/{tenantUuid}/commands/Library/LendBook"]!.post!;
    expect(lendBook["x-mneme-permission"]).toMatchObject({ kind: "custom" });
    expect(lendBook.security[0]).toEqual({});
    expect(lendBook.description).toMatch(/custom function/);
    // Commands: wait and the idempotency and concurrency headers; the app's own error code with its status.
    const params = (addBook.parameters ?? []).map((p) => ("$ref" in p ? p.$ref : p.name));
    for (const p of ["tenantUuid", "wait", "idempotencyKey", "targetAggregateUuid", "targetAggregateVersion"])
      expect(params).toContain(`#/components/parameters/${p}`);
    expect(doc.components.parameters.idempotencyKey!.name).toBe("Idempotency-Key");
    expect(addBook.responses["422"]).toEqual({ $ref: "#/components/responses/Problem422" });
    const problem422 = doc.components.responses.Problem422!.content!["application/problem+json"]!.schema;
    expect(JSON.stringify(problem422)).toContain("BOOK_UNAVAILABLE");
    // Runtime routes and the route module's, with their permission.
    expect(doc.paths["/api/tenants/{tenantUuid}/runtime/commands"]!.get!["x-mneme-permission"]).toMatchObject({
      message: "Runtime.ListCommands",
    });
    // Store routes: a session always; registerStorePermissions gives the store messages a function asking for <Store>.<Action>.
    const storeDelete = doc.paths["/api/tenants/{tenantUuid}/runtime/stores/{store}/entries/{key}"]!.delete!;
    expect(storeDelete["x-mneme-permission"]).toMatchObject({ kind: "custom", message: "Runtime.StoreDelete" });
    expect(storeDelete.security).not.toContainEqual({});
    expect(storeDelete.responses["429"]).toEqual({ $ref: "#/components/responses/Problem429" });
    expect(doc.paths["/api/tenants/{tenantUuid}/runtime/event-handler-list"]!.post!["x-mneme-permission"]).toMatchObject({
      kind: "level",
      level: "Authorized",
    });
    expect(doc.paths["/api/sessions"]!.post!.security).toEqual([]);
    expect(Object.keys(doc.paths["/api/sessions"]!.post!.responses)).toContain("201");
    expect(doc.paths["/api/openapi.json"]!.get!.security).toEqual([]);
  });

  it("is the same document through GET /api/openapi.json, buildOpenApiDocument and `mneme openapi`", async () => {
    const built = buildOpenApiDocument(world.facade, { ...httpOptions, served: "public" });
    expect(JSON.parse(JSON.stringify(built))).toEqual(doc);
    const out = `${scratch.newFile()}.json`;
    const run = await runProcess(
      "npx",
      ["tsx", "src/cli/main.ts", "openapi", "--app", "test/support/library-app.ts", "--out", out],
      root,
      90_000,
      {
        ...process.env,
        LIBRARY_DB: scratch.newFile(),
      },
    );
    expect(run.stderr).toBe("");
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(/wrote the OpenAPI 3\.1 document of library \(\d+ operations\)/);
    expect(JSON.parse(readFileSync(out, "utf8"))).toEqual(doc);
  });
});

describe("mneme openapi and mneme client on the command line", () => {
  const mneme = (args: string[]) =>
    runProcess("npx", ["tsx", "src/cli/main.ts", ...args], root, 90_000, { ...process.env, LIBRARY_DB: scratch.newFile() });

  it("prints the document without --out, and refuses a missing --app or --out with a usage error", async () => {
    const printed = await mneme(["openapi", "--app", "test/support/library-app.ts"]);
    expect(printed.code).toBe(0);
    expect(JSON.parse(printed.stdout)).toEqual(doc);
    const noApp = await mneme(["openapi"]);
    expect(noApp.code).toBe(2);
    expect(noApp.stderr).toContain("mneme: missing --app");
    const noOut = await mneme(["client", "--app", "test/support/library-app.ts"]);
    expect(noOut.code).toBe(2);
    expect(noOut.stderr).toContain("mneme: missing --out");
    const notAnApp = await mneme(["openapi", "--app", "test/support/library-world.ts"]);
    expect(notAnApp.code).toBe(1);
    expect(notAnApp.stderr).toMatch(/default export must be a function that returns the app's facade/);
  }, 120_000);
});

describe("every operation against the live app", () => {
  it("answers a matching request with a documented status and a body valid against the documented schema", async () => {
    const ajv = new Ajv2020({ strict: false, validateFormats: false, allErrors: true });
    ajv.addSchema(doc, DOC);
    const validators = new Map<string, ValidateFunction>();
    const seen: string[] = [];
    // The logouts last, each with a fresh session: they end the session the requests use.
    const logout = (o: { path: string }) => o.path === "/api/sessions/current" || o.path.endsWith("/commands/Account/Logout");
    const all = operations(doc).sort((a, b) => Number(logout(a)) - Number(logout(b)));
    expect(all.length).toBeGreaterThan(60);
    for (const { path, method, op } of all) {
      if (logout({ path })) admin = await login(world.url);
      const url = world.url + fillPath(path);
      const headers: Record<string, string> = { authorization: `Bearer ${admin.token}`, "x-identity-uuid": admin.identityUuid };
      const init: RequestInit = { method: method.toUpperCase(), headers, signal: AbortSignal.timeout(10_000) };
      const bodySchema = op.requestBody?.content["application/json"]?.schema;
      if (bodySchema !== undefined) {
        headers["content-type"] = "application/json";
        init.body = JSON.stringify(sample(bodySchema, 0));
      }
      const controller = new AbortController();
      const res = await fetch(url, { ...init, signal: controller.signal });
      const status = String(res.status);
      const documented = Object.keys(op.responses);
      expect(documented.includes(status) || documented.includes(`${status[0]}XX`), `${op.operationId} answered ${status}`).toBe(true);
      const key = op.responses[status] === undefined ? `${status[0]}XX` : status;
      const response = resolveResponse(op.responses[key]!, `#/paths/${pointerPart(path)}/${method}/responses/${key}`);
      const type = res.headers.get("content-type") ?? "";
      if (type.startsWith("text/event-stream")) {
        controller.abort();
      } else {
        const text = await res.text();
        const media = type.split(";")[0]!;
        const schemaPointer = response.content?.[media] === undefined ? undefined : response.pointer(media);
        if (res.status >= 400) expect(media, `${op.operationId} ${status}`).toBe("application/problem+json");
        if (schemaPointer !== undefined && text !== "") {
          let validate = validators.get(schemaPointer);
          if (validate === undefined) validators.set(schemaPointer, (validate = ajv.compile({ $ref: schemaPointer })));
          expect(validate(JSON.parse(text)), `${op.operationId} ${status}: ${JSON.stringify(validate.errors)} ${text.slice(0, 300)}`).toBe(
            true,
          );
        }
      }
      seen.push(`${op.operationId} ${status}`);
    }
    if (process.env.OPENAPI_DEBUG) console.log(seen.join("\n"));
    // The requests did reach the handlers: the app's own messages and routes succeeded.
    for (const ok of [
      "command.Library.AddBook 200",
      "query.Library.ListBooks 200",
      "query.Runtime.ListCommands 200",
      "GET /api/tenants/{tenantUuid}/runtime/commands 200",
      "DELETE /api/sessions/current 204",
    ])
      expect(seen).toContain(ok);
  }, 120_000);

  /** Path parameters filled: the admin's tenant and account, a store, a key. */
  function fillPath(path: string): string {
    return path
      .replace("{tenantUuid}", admin.tenantUuid)
      .replace("{accountUuid}", admin.accountUuid)
      .replace("{store}", "cache")
      .replace("{key}", "openapi-test");
  }

  /** A response (following a $ref to components/responses) and the JSON pointer of its schema for a media type. */
  function resolveResponse(
    r: { $ref?: string; content?: Record<string, unknown> },
    at: string,
  ): {
    content?: Record<string, unknown>;
    pointer(media: string): string;
  } {
    if (r.$ref !== undefined) {
      const name = r.$ref.slice("#/components/responses/".length);
      const target = doc.components.responses[name]!;
      return { ...target, pointer: (m) => `${DOC}#/components/responses/${name}/content/${pointerPart(m)}/schema` };
    }
    return { ...r, pointer: (m) => `${DOC}${at}/content/${pointerPart(m)}/schema` };
  }
});

describe("GET /api/openapi.json", () => {
  it("is a 404 with openapi: false, and needs a session with access: authenticated", async () => {
    const off = await startLibrary(scratch.newFile(), undefined, { openapi: false });
    const authenticated = await startLibrary(scratch.newFile(), undefined, {
      openapi: { access: "authenticated", info: { title: "Library API" } },
    });
    try {
      expect((await fetch(`${off.url}/api/openapi.json`)).status).toBe(404);
      const anonymous = await fetch(`${authenticated.url}/api/openapi.json`);
      expect(anonymous.status).toBe(401);
      expect(anonymous.headers.get("content-type")).toBe("application/problem+json");
      const session = await login(authenticated.url);
      const signedIn = await fetch(`${authenticated.url}/api/openapi.json`, { headers: { authorization: `Bearer ${session.token}` } });
      expect(signedIn.status).toBe(200);
      const body = (await signedIn.json()) as OpenApiDocument;
      expect(body.info.title).toBe("Library API");
      expect(body.paths["/api/openapi.json"]!.get!.security).toEqual([{ sessionToken: [] }, { sessionCookie: [] }]);
      const post = await fetch(`${authenticated.url}/api/openapi.json`, { method: "POST" });
      expect(post.status).toBe(405);
      expect(post.headers.get("allow")).toBe("GET, HEAD, OPTIONS");
      expect((await fetch(`${world.url}/api/openapi.json`, { method: "HEAD" })).status).toBe(200);
    } finally {
      await off.close();
      await authenticated.close();
    }
  });
});

/**
 * A value the schema accepts, as a client following the document would send:
 * required properties only, the first of an enum or a union, a fresh uuid for
 * format uuid. References are followed through the document.
 */
function sample(schema: unknown, depth: number): unknown {
  if (typeof schema !== "object" || schema === null || depth > 12) return {};
  const s = schema as Record<string, any>;
  if (typeof s.$ref === "string") return sample(doc.components.schemas[decodeURIComponent(s.$ref.split("/").pop()!)], depth + 1);
  if ("const" in s) return s.const;
  if (Array.isArray(s.enum)) return s.enum[0];
  if (Array.isArray(s.anyOf)) return sample(s.anyOf[0], depth + 1);
  if (Array.isArray(s.oneOf)) return sample(s.oneOf[0], depth + 1);
  if (Array.isArray(s.allOf)) return Object.assign({}, ...s.allOf.map((x: unknown) => sample(x, depth + 1)));
  const type = Array.isArray(s.type) ? s.type[0] : s.type;
  switch (type) {
    case "string":
      if (s.format === "uuid") return newUuid();
      if (s.format === "email") return `someone-${newUuid().slice(-8)}@example.test`;
      return "x".repeat(Math.max(1, s.minLength ?? 1));
    case "integer":
    case "number":
      return s.minimum ?? 1;
    case "boolean":
      return false;
    case "array":
      return Array.from({ length: s.minItems ?? 0 }, () => sample(s.items, depth + 1));
    case "null":
      return null;
    default: {
      const out: Record<string, unknown> = {};
      for (const key of s.required ?? []) out[key] = sample(s.properties?.[key], depth + 1);
      return out;
    }
  }
}

/** One JSON pointer token in a URI fragment. */
function pointerPart(s: string): string {
  return encodeURIComponent(s.replace(/~/g, "~0").replace(/\//g, "~1"));
}

/** An operation's body schema with its `#/components/...` references pointed at the whole document (added as "doc"). */
function rebase(schema: unknown): Record<string, unknown> {
  return JSON.parse(JSON.stringify(schema).replace(/"#\/components\//g, `"${DOC}#/components/`)) as Record<string, unknown>;
}
