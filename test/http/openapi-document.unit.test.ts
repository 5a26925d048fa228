/**
 * The parts of the OpenAPI document and the client that a live app does not
 * reach on its own: component names unique per domain when two messages
 * bring different `$defs` of one name, a message without a JSON Schema, a
 * route module's route without a description, basePath, and the TypeScript
 * the client derives from JSON Schemas.
 */
import { describe, expect, it } from "vitest";
import { createFacade, defineDomain } from "mneme";
import { buildOpenApiDocument, createHttpHandler, jsonResponse, type OpenApiDocument } from "mneme/http";
import { guardBy } from "../../src/http/route.js";
import { schemaToTs } from "../../src/cli/schema-to-ts.js";
import { generateClient } from "../../src/cli/client.js";

const shelf = (extra: Record<string, unknown>) => ({
  type: "object",
  properties: { room: { type: "string" }, ...extra },
  required: ["room"],
});
const withShelf = (shelfSchema: Record<string, unknown>) => ({
  type: "object",
  properties: { shelf: { $ref: "#/$defs/Shelf" } },
  required: ["shelf"],
  $defs: { Shelf: shelfSchema },
});

function app(): { doc: OpenApiDocument } {
  const Library = defineDomain("Library");
  const Archive = defineDomain("Archive");
  const Put = Library.command<{ shelf: { room: string } }>("Put", { schema: withShelf(shelf({})) });
  const Move = Library.command<{ shelf: { room: string; row: number } }>("Move", {
    schema: withShelf(shelf({ row: { type: "integer" } })),
  });
  const Same = Library.command<{ shelf: { room: string } }>("Same", { schema: withShelf(shelf({})) });
  const Store = Archive.command<{ shelf: { room: string } }>("Store", { schema: withShelf(shelf({})) });
  const Loose = Library.query<unknown, unknown>("Loose");
  const Count = Library.query<Record<string, never>, { count: number }>("Count", {
    schema: { type: "object" },
    resultSchema: {
      $schema: "https://json-schema.org/draft/2020-12/schema",
      type: "object",
      properties: { count: { type: "integer" } },
      required: ["count"],
    },
  });
  const Tag = Archive.command<{ tag: string }, { tagged: number }>("Tag", {
    schema: { type: "object", properties: { tag: { type: "string" } }, required: ["tag"] },
    resultSchema: { type: "object", properties: { tagged: { type: "integer" } } },
  });
  const facade = createFacade({ appName: "units", version: "0.0.1" });
  facade.registerDomain(Library, (d) => {
    d.handleCommand(Put, () => []);
    d.handleCommand(Move, () => []);
    d.handleCommand(Same, () => []);
    d.handleQuery(Loose, () => null);
    d.handleQuery(Count, () => ({ count: 0 }));
  });
  facade.registerDomain(Archive, (d) => {
    d.handleCommand(Store, () => []);
    d.handleCommand(Tag, () => []);
  });
  const doc = buildOpenApiDocument(facade, {
    basePath: "/mneme",
    modules: [
      {
        name: "shelves",
        routes: [{ method: "PUT", path: "/api/shelves/:room", guard: guardBy(Put), run: () => Promise.resolve(jsonResponse(200, {})) }],
      },
    ],
  });
  return { doc };
}

describe("buildOpenApiDocument", () => {
  const { doc } = app();

  it("names lifted $defs by domain, shares equal ones and suffixes different ones", () => {
    const schemas = doc.components.schemas as Record<string, { properties?: Record<string, { $ref?: string }> }>;
    const ref = (op: string) => schemas[op]!.properties!.shelf!.$ref;
    expect(ref("Library.Put")).toBe("#/components/schemas/Library.Shelf");
    expect(ref("Library.Same")).toBe("#/components/schemas/Library.Shelf");
    expect(ref("Library.Move")).toBe("#/components/schemas/Library.Shelf_2");
    expect(ref("Archive.Store")).toBe("#/components/schemas/Archive.Shelf");
    expect(schemas["Library.Shelf_2"]).toMatchObject({ properties: { row: { type: "integer" } } });
    expect(schemas["Library.Put"]).not.toHaveProperty("$defs");
    expect(schemas["Library.Put"]).not.toHaveProperty("$schema");
  });

  it("gives a message without a schema an open body, and a module's route without a description a JSON body and a 2XX", () => {
    const loose = doc.paths["/mneme/api/tenants/{tenantUuid}/queries/Library/Loose"]!.post!;
    expect(loose.requestBody!.content["application/json"]!.schema).toEqual({ description: expect.stringMatching(/has no JSON Schema/) });
    const put = doc.paths["/mneme/api/shelves/{room}"]!.put!;
    expect(put.parameters).toEqual([{ name: "room", in: "path", required: true, schema: { type: "string", minLength: 1 } }]);
    expect(put.requestBody!.content["application/json"]!.schema).toEqual({});
    expect(Object.keys(put.responses)).toContain("2XX");
    expect(put["x-mneme-permission"]).toMatchObject({ message: "Library.Put", kind: "level", level: "Authorized" });
    expect(put.tags).toEqual(["shelves"]);
  });

  it("documents a declared resultSchema as the query's answer and the command's result", () => {
    const count = doc.paths["/mneme/api/tenants/{tenantUuid}/queries/Library/Count"]!.post!;
    expect(count.responses["200"]).toMatchObject({
      content: { "application/json": { schema: { $ref: "#/components/schemas/Library.Count.Result" } } },
    });
    expect(doc.components.schemas["Library.Count.Result"]).toEqual({
      type: "object",
      properties: { count: { type: "integer" } },
      required: ["count"],
    });
    const tag = doc.paths["/mneme/api/tenants/{tenantUuid}/commands/Archive/Tag"]!.post!;
    expect(tag.responses["200"]).toMatchObject({
      content: {
        "application/json": {
          schema: {
            allOf: [
              { $ref: "#/components/schemas/CommandResponse" },
              { properties: { result: { $ref: "#/components/schemas/Archive.Tag.Result" } } },
            ],
          },
        },
      },
    });
    const source = generateClient(doc);
    expect(source).toContain("Count: <R = Library_Count_Result>(payload?: Library_Count, call?: CallOptions): Promise<Result<R>>");
    expect(source).toContain(
      "Tag: <R = Archive_Tag_Result>(payload: Archive_Tag, call?: CommandCallOptions): Promise<Result<CommandResponse<R>>>",
    );
  });

  it("refuses a resultSchema that is not a JSON Schema object (INVALID_DOMAIN)", () => {
    const D = defineDomain("Bad");
    for (const resultSchema of ["string", null, [], 1]) {
      expect(() => D.query(`Q${typeof resultSchema}${String(resultSchema).length}`, { resultSchema: resultSchema as never })).toThrow(
        expect.objectContaining({ code: "INVALID_DOMAIN", message: expect.stringMatching(/resultSchema must be a JSON Schema object/) }),
      );
    }
  });

  it("writes a client whose payload types follow the lifted names", () => {
    const source = generateClient(doc);
    expect(source).toContain("export type Library_Shelf_2 = {\n  room: string;\n  row?: number;\n};");
    expect(source).toContain("Move: <R = unknown>(payload: Library_Move, call?: CommandCallOptions)");
    // A query without a schema takes any payload, which may be left out.
    expect(source).toContain("Loose: <R = unknown>(payload?: unknown, call?: CallOptions)");
    expect(source).toContain('path: "/mneme/api/tenants/{tenantUuid}/commands/Library/Move"');
  });
});

describe("createHttpHandler", () => {
  it("refuses a module route on the document's path unless openapi is false", () => {
    const facade = createFacade({ appName: "units" });
    const Own = defineDomain("Own").query<unknown, unknown>("Doc");
    const module = {
      name: "own-docs",
      routes: [{ method: "GET" as const, path: "/api/:file", guard: guardBy(Own), run: () => Promise.resolve(jsonResponse(200, {})) }],
    };
    expect(() => createHttpHandler(facade, { modules: [module] })).toThrow(
      expect.objectContaining({ code: "INVALID_REQUEST", message: expect.stringMatching(/openapi: false/) }),
    );
    expect(() => createHttpHandler(facade, { modules: [module], openapi: false })).not.toThrow();
    expect(() => createHttpHandler(facade, { openapi: { info: { title: 1 as never } } })).toThrow(
      expect.objectContaining({ code: "INVALID_REQUEST", message: expect.stringMatching(/openapi.info/) }),
    );
    expect(() => createHttpHandler(facade, { openapi: { access: "everyone" as never } })).toThrow(
      expect.objectContaining({ code: "INVALID_REQUEST", message: expect.stringMatching(/openapi.access/) }),
    );
  });
});

describe("schemaToTs", () => {
  const none = () => undefined;
  const ts = (s: unknown) => schemaToTs(s as Record<string, unknown>, none);

  it("writes what JSON Schema says in TypeScript's words", () => {
    expect(ts({ type: "string", format: "uuid" })).toBe("string");
    expect(ts({ type: ["string", "null"] })).toBe("string | null");
    expect(ts({ enum: ["a", 1, null] })).toBe('"a" | 1 | null');
    expect(ts({ const: true })).toBe("true");
    expect(ts({ type: "array", items: { type: ["integer", "null"] } })).toBe("(number | null)[]");
    expect(ts({ type: "array", prefixItems: [{ type: "string" }, { type: "number" }], items: false })).toBe("[string, number]");
    expect(ts({ anyOf: [{ type: "string" }, { type: "object", properties: { a: { type: "number" } }, required: ["a"] }] })).toBe(
      "string | {\n  a: number;\n}",
    );
    expect(ts({ type: "object", properties: { "my-key": { type: "boolean", description: "a flag" } } })).toBe(
      '{\n  /** a flag */\n  "my-key"?: boolean;\n}',
    );
    expect(ts({ type: "object", additionalProperties: { type: "number" } })).toBe("{\n  [key: string]: number;\n}");
    expect(ts({ type: "object", properties: { a: { type: "string" } }, additionalProperties: true })).toBe(
      "{\n  a?: string;\n  [key: string]: unknown;\n}",
    );
    expect(ts({ type: "object", additionalProperties: false })).toBe("Record<string, never>");
    expect(ts({})).toBe("unknown");
    expect(ts(false)).toBe("never");
    expect(ts({ allOf: [{ $ref: "#/x" }, { type: "object", properties: { b: { type: "string" } } }] })).toBe("{\n  b?: string;\n}");
    expect(schemaToTs({ $ref: "#/components/schemas/A", type: "object" }, () => "A")).toBe("A");
    expect(ts({ type: "object", properties: { note: { type: "string", description: "ends */ here" } } })).toContain("ends *\\/ here");
  });
});
