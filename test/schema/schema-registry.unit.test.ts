import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Ajv2020 } from "ajv/dist/2020.js";
import { afterAll, describe, expect, it, vi } from "vitest";
import { defineDomain } from "../../src/model/domain.js";
import { isMnemeError, type MnemeError } from "../../src/model/errors.js";
import type { JsonSchema } from "../../src/model/types.js";
import { JSON_SCHEMA_2020_12 } from "../../src/schema/convert-2020-12.js";
import { FORMAT_CHECKS, isDate, isDateTime } from "../../src/schema/formats.js";
import { SchemaRegistry, type SchemaTypeRef } from "../../src/schema/schema-registry.js";

// What `mneme schema build` writes for a small Todo domain (hand-written, so the test needs no compiler).
const schemas: JsonSchema = {
  $schema: JSON_SCHEMA_2020_12,
  $defs: {
    Priority: { type: "string", enum: ["low", "normal", "high"] },
    Coordinates: { type: "array", prefixItems: [{ type: "number" }, { type: "number" }], minItems: 2, maxItems: 2 },
    Location: {
      type: "object",
      properties: { name: { type: "string" }, coordinates: { $ref: "#/$defs/Coordinates" } },
      required: ["name"],
      additionalProperties: false,
    },
    CreateTodo: {
      type: "object",
      properties: {
        todoUuid: { type: "string", format: "uuid" },
        title: { type: "string" },
        estimateMinutes: { type: "number", minimum: 0 },
        done: { type: "boolean" },
        assigneeEmail: { type: "string", format: "email" },
        dueAt: { type: "string", format: "date-time" },
        priority: { $ref: "#/$defs/Priority" },
        location: { $ref: "#/$defs/Location" },
        tags: { type: "array", items: { type: "string" } },
        label: { type: "array", prefixItems: [{ type: "string" }, { type: "number" }], minItems: 2, maxItems: 2 },
        site: { type: "string", format: "hostname" },
      },
      required: ["todoUuid", "title", "done"],
      additionalProperties: false,
      description: "Create a todo item.",
    },
    TodoCreated: { type: "object", properties: { title: { type: "string" } }, required: ["title"], additionalProperties: false },
    RenameTodo: { $ref: "#/$defs/TodoCreated", description: "Rename: same shape as TodoCreated." },
    Tree: {
      type: "object",
      properties: { label: { type: "string" }, children: { type: "array", items: { $ref: "#/$defs/Tree" } } },
      required: ["label"],
    },
    "Page<TodoCreated>": {
      type: "object",
      properties: { items: { type: "array", items: { $ref: "#/$defs/TodoCreated" } } },
    },
    ListTodos: { type: "object", properties: { page: { $ref: "#/$defs/Page%3CTodoCreated%3E" } } },
    Unrelated: { type: "object", properties: { x: { type: "number" } } },
  },
};

const Todo = defineDomain("Todo");
const CreateTodo = Todo.command("CreateTodo");
const RenameTodo = Todo.command("RenameTodo");
const TodoCreated = Todo.event("TodoCreated");
const Tree = Todo.query("Tree");
const ListTodos = Todo.query("ListTodos");
const NoSchema = Todo.command("DeleteTodo");
const types: SchemaTypeRef[] = [...Todo.commands.values(), ...Todo.queries.values(), ...Todo.events.values()];

const valid = {
  todoUuid: "0190a7a2-7d3c-7b5e-9f00-1234567890ab",
  title: "Write tests",
  estimateMinutes: 30,
  done: false,
  assigneeEmail: "ann@example.com",
  dueAt: "2025-06-01T12:00:00Z",
  priority: "high",
  location: { name: "office", coordinates: [52.5, 13.4] },
  tags: ["work"],
  label: ["effort", 3],
  site: "anything goes: hostname is not checked",
};

function caught(fn: () => unknown): MnemeError {
  try {
    fn();
  } catch (e) {
    if (isMnemeError(e)) return e;
    throw e;
  }
  throw new Error("expected a MnemeError");
}

const tmp = mkdtempSync(join(tmpdir(), "mneme-schema-registry-"));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

describe("SchemaRegistry.documentFor", () => {
  const registry = new SchemaRegistry(schemas);

  it("inlines the root type and carries only the $defs it references, transitively", () => {
    const doc = registry.documentFor(CreateTodo) as any;
    expect(doc.$schema).toBe("https://json-schema.org/draft/2020-12/schema");
    expect(doc.type).toBe("object");
    expect(doc.required).toEqual(["todoUuid", "title", "done"]);
    expect(doc.description).toBe("Create a todo item.");
    expect(doc.properties.title).toEqual({ type: "string" });
    expect(doc.properties.assigneeEmail).toEqual({ type: "string", format: "email" });
    expect(doc.properties.dueAt).toEqual({ type: "string", format: "date-time" });
    expect(Object.keys(doc.$defs)).toEqual(["Coordinates", "Location", "Priority"]);
    expect(doc.$ref).toBeUndefined();
  });

  it("gives every top-level property a type, also those written as $ref or union (spec 2.9)", () => {
    const doc = registry.documentFor(CreateTodo) as any;
    for (const [name, prop] of Object.entries<any>(doc.properties)) expect(prop.type, name).toBeDefined();
    expect(doc.properties.priority).toEqual({ $ref: "#/$defs/Priority", type: "string" });
    expect(doc.properties.location).toEqual({ $ref: "#/$defs/Location", type: "object" });
    const Misc = defineDomain("Misc");
    const union = Misc.command("Union", {
      schema: {
        type: "object",
        properties: {
          when: { $ref: "#/$defs/Stamp" },
          either: { anyOf: [{ $ref: "#/$defs/Stamp" }, { type: "null" }] },
          mode: { enum: ["a", 1, null] },
          fixed: { const: true },
          unknown: { anyOf: [{ type: "string" }, {}] },
        },
        $defs: { Stamp: { type: "string", format: "date-time" } },
      },
    });
    // A cycle of aliases (which no validator could compile) must not loop while deriving.
    const loop = Misc.command("Loop", {
      schema: {
        type: "object",
        properties: { loop: { $ref: "#/$defs/A" } },
        $defs: { A: { $ref: "#/$defs/B" }, B: { $ref: "#/$defs/A" } },
      },
    });
    expect((registry.documentFor(loop) as any).properties.loop).toEqual({ $ref: "#/$defs/A" });
    const p = (registry.documentFor(union) as any).properties;
    expect(p.when).toEqual({ $ref: "#/$defs/Stamp", type: "string", format: "date-time" });
    expect(p.either.type).toEqual(["string", "null"]);
    expect(p.mode.type).toEqual(["string", "number", "null"]);
    expect(p.fixed.type).toBe("boolean");
    expect(p.unknown.type).toBeUndefined();
    // The added keywords do not change what validates.
    const v = registry.validator(union)!;
    expect(v({ when: "2025-01-01T00:00:00Z", either: null, mode: 1, fixed: true })).toBeUndefined();
    expect(v({ when: "yesterday" })?.map((d) => d.pointer)).toEqual(["/when"]);
  });

  it("omits $defs when the type references none, and follows generic and recursive refs", () => {
    expect(registry.documentFor(TodoCreated)).not.toHaveProperty("$defs");
    expect(Object.keys((registry.documentFor(ListTodos) as any).$defs)).toEqual(["Page<TodoCreated>", "TodoCreated"]);
    const tree = registry.documentFor(Tree) as any;
    expect(tree.type).toBe("object");
    expect(Object.keys(tree.$defs)).toEqual(["Tree"]);
  });

  it("inlines an alias root (a $ref with annotations) so the top level still has properties", () => {
    const doc = registry.documentFor(RenameTodo) as any;
    expect(doc.type).toBe("object");
    expect(doc.properties).toEqual({ title: { type: "string" } });
    expect(doc.description).toBe("Rename: same shape as TodoCreated.");
    expect(doc.$ref).toBeUndefined();
  });

  it("returns a cached, frozen, self-contained document that ajv compiles in strict mode", () => {
    const doc = registry.documentFor(CreateTodo)!;
    expect(registry.documentFor(CreateTodo)).toBe(doc);
    expect(registry.documentFor({ kind: "command", domain: "Todo", name: "CreateTodo" })).toBe(doc);
    expect(Object.isFrozen(doc)).toBe(true);
    expect(Object.isFrozen((doc as any).properties.title)).toBe(true);
    const ajv = new Ajv2020({ strict: true, validateFormats: false });
    expect(ajv.compile(doc)(valid)).toBe(true);
  });

  it("lets a type's own schema win over $defs, converting draft-07 and reaching the registry's $defs", () => {
    const Other = defineDomain("Other");
    const explicit = Other.command("CreateTodo", {
      schema: {
        $schema: "http://json-schema.org/draft-07/schema#",
        type: "object",
        properties: { id: { $ref: "#/definitions/Id" }, priority: { $ref: "#/$defs/Priority" } },
        required: ["id"],
        definitions: { Id: { type: "string", minLength: 3 } },
      },
    });
    const doc = registry.documentFor(explicit) as any;
    expect(doc.$schema).toBe(JSON_SCHEMA_2020_12);
    expect(doc.properties.id).toEqual({ $ref: "#/$defs/Id", type: "string" });
    expect(Object.keys(doc.$defs)).toEqual(["Id", "Priority"]);
    expect(doc.properties.title).toBeUndefined();
    expect(registry.validator(explicit)!({ id: "ab" })).toEqual([
      { pointer: "/id", message: "must NOT have fewer than 3 characters", keyword: "minLength" },
    ]);
  });

  it("gives undefined for a type with no schema, and works with no source at all", () => {
    expect(registry.documentFor(NoSchema)).toBeUndefined();
    const empty = new SchemaRegistry();
    expect(empty.documentFor(CreateTodo)).toBeUndefined();
    expect(empty.validator(CreateTodo)).toBeUndefined();
    expect(() => empty.validate(CreateTodo, { anything: 1 })).not.toThrow();
  });

  it("rejects an explicit schema that references a missing definition or does not compile", () => {
    const Bad = defineDomain("Bad");
    const dangling = Bad.command("Dangling", { schema: { type: "object", properties: { a: { $ref: "#/$defs/Nope" } } } });
    const e1 = caught(() => registry.documentFor(dangling));
    expect(e1.code).toBe("INVALID_REQUEST");
    expect(e1.message).toContain('"#/$defs/Nope"');
    const broken = Bad.command("Broken", { schema: { type: "strnig" } });
    expect(registry.documentFor(broken)).toBeDefined();
    const e2 = caught(() => registry.validator(broken));
    expect(e2.code).toBe("INVALID_REQUEST");
    expect(e2.message).toContain("Bad.Broken does not compile");
  });
});

describe("SchemaRegistry validation", () => {
  const registry = new SchemaRegistry(schemas);

  it("accepts a valid payload and ignores formats it does not check, without warnings", () => {
    const warn = vi.spyOn(console, "warn");
    try {
      expect(registry.validator(CreateTodo)!(valid)).toBeUndefined();
      expect(() => registry.validate(CreateTodo, valid)).not.toThrow();
      expect(warn).not.toHaveBeenCalled();
    } finally {
      warn.mockRestore();
    }
  });

  it("lists every failing JSON pointer", () => {
    const details = registry.validator(CreateTodo)!({
      todoUuid: "not-a-uuid",
      estimateMinutes: -1,
      done: "no",
      assigneeEmail: "ann@",
      dueAt: "2025-02-30T12:00:00Z",
      priority: "urgent",
      location: { coordinates: [1, "x"] },
      tags: ["ok", 2],
      label: ["effort", "three"],
      "a/b": 1,
    });
    const byPointer = Object.fromEntries((details ?? []).map((d) => [d.pointer, d.message]));
    expect(byPointer).toEqual({
      "/title": "is required",
      "/todoUuid": 'must match format "uuid"',
      "/estimateMinutes": "must be >= 0",
      "/done": "must be boolean",
      "/assigneeEmail": 'must match format "email"',
      "/dueAt": 'must match format "date-time"',
      "/priority": 'must be one of "low", "normal", "high"',
      "/location/name": "is required",
      "/location/coordinates/1": "must be number",
      "/tags/1": "must be string",
      "/label/1": "must be number",
      "/a~1b": "is not allowed",
    });
  });

  it("throws VALIDATION_FAILED with details and the pointers in the message", () => {
    const e = caught(() => registry.validate(CreateTodo, { todoUuid: valid.todoUuid, title: 5, done: true }));
    expect(e.code).toBe("VALIDATION_FAILED");
    expect(e.details).toEqual([{ pointer: "/title", message: "must be string", keyword: "type" }]);
    expect(e.message).toBe("invalid payload for command Todo.CreateTodo: /title must be string");
  });

  it("rejects a payload that is not an object", () => {
    for (const payload of [null, undefined, "text", 42, [valid]]) {
      const e = caught(() => registry.validate(CreateTodo, payload));
      expect(e.code).toBe("VALIDATION_FAILED");
      expect(e.details?.[0]?.pointer).toBe("");
      expect(e.details?.[0]?.message).toMatch(/^must be an object/);
    }
  });

  it("compiles each type once", () => {
    expect(registry.validator(CreateTodo)).toBe(registry.validator(CreateTodo));
    expect(registry.validator({ kind: "command", domain: "Todo", name: "CreateTodo" })).toBe(registry.validator(CreateTodo));
  });

  it("caps the message but keeps every detail", () => {
    const many = Object.fromEntries(Array.from({ length: 15 }, (_, i) => [`extra${i}`, i]));
    const e = caught(() => registry.validate(CreateTodo, { ...valid, ...many }));
    expect(e.details).toHaveLength(15);
    expect(e.message).toMatch(/; and 5 more$/);
  });
});

describe("SchemaRegistry.requireDocument", () => {
  const registry = new SchemaRegistry(schemas);

  it("finds a type by domain and name", () => {
    expect(registry.requireDocument(types, { domain: "Todo", type: "TodoCreated" })).toBe(registry.documentFor(TodoCreated));
  });

  it("throws UNKNOWN_SCHEMA_TYPE for an unknown domain, an unknown type, and a type without schema", () => {
    const d = caught(() => registry.requireDocument(types, { domain: "Nope", type: "CreateTodo" }));
    expect([d.code, d.message]).toEqual(["UNKNOWN_SCHEMA_TYPE", 'unknown domain "Nope": it has no registered command, query or event']);
    const t = caught(() => registry.requireDocument(types, { domain: "Todo", type: "Unrelated" }));
    expect(t.code).toBe("UNKNOWN_SCHEMA_TYPE");
    expect(t.message).toContain('unknown type "Unrelated" in domain "Todo" (known: CreateTodo, RenameTodo, DeleteTodo');
    const n = caught(() => registry.requireDocument(types, { domain: "Todo", type: "DeleteTodo" }));
    expect(n.code).toBe("UNKNOWN_SCHEMA_TYPE");
    expect(n.message).toContain("command Todo.DeleteTodo has no schema");
  });

  it("throws INVALID_REQUEST for a malformed request", () => {
    expect(caught(() => registry.requireDocument(types, { domain: "Todo" })).code).toBe("INVALID_REQUEST");
    expect(caught(() => registry.requireDocument(types, { domain: "", type: "CreateTodo" })).code).toBe("INVALID_REQUEST");
    expect(caught(() => registry.requireDocument(types, { domain: "Todo", type: 1 })).code).toBe("INVALID_REQUEST");
  });
});

describe("SchemaRegistry construction", () => {
  it("reads a file path synchronously and serves the same documents", () => {
    const file = join(tmp, "schemas.json");
    writeFileSync(file, JSON.stringify(schemas));
    const fromFile = new SchemaRegistry(file);
    expect(fromFile.documentFor(CreateTodo)).toEqual(new SchemaRegistry(schemas).documentFor(CreateTodo));
  });

  it("accepts raw draft-07 generator output", () => {
    const registry = new SchemaRegistry({
      $schema: "http://json-schema.org/draft-07/schema#",
      definitions: { TodoCreated: { type: "object", properties: { p: { $ref: "#/definitions/Priority" } } }, Priority: { type: "string" } },
    });
    expect((registry.documentFor(TodoCreated) as any).$defs).toEqual({ Priority: { type: "string" } });
  });

  it("rejects a missing file, bad JSON, a non-schema object and dangling refs with INVALID_REQUEST", () => {
    const missing = join(tmp, "nope.json");
    const e1 = caught(() => new SchemaRegistry(missing));
    expect([e1.code, e1.message.includes(missing)]).toEqual(["INVALID_REQUEST", true]);
    const bad = join(tmp, "bad.json");
    writeFileSync(bad, "{ not json");
    const e2 = caught(() => new SchemaRegistry(bad));
    expect([e2.code, e2.message.startsWith(`schemas file "${bad}" is not valid JSON`)]).toEqual(["INVALID_REQUEST", true]);
    expect(caught(() => new SchemaRegistry({ type: "object" })).code).toBe("INVALID_REQUEST");
    expect(caught(() => new SchemaRegistry({ $defs: { A: 5 } })).message).toContain('$defs["A"] is not a schema');
    const e3 = caught(() => new SchemaRegistry({ $defs: { A: { $ref: "#/$defs/B" } } }));
    expect(e3.message).toContain('missing $defs: "B"');
  });

  it("does not freeze or change the object it was given", () => {
    const input = structuredClone(schemas);
    new SchemaRegistry(input).documentFor(CreateTodo);
    expect(Object.isFrozen(input)).toBe(false);
    expect(input).toEqual(schemas);
  });
});

describe("format checks", () => {
  it("checks calendar dates and RFC 3339 date-times", () => {
    expect(isDate("2024-02-29")).toBe(true);
    expect(isDate("2023-02-29")).toBe(false);
    expect(isDate("2023-13-01")).toBe(false);
    expect(isDateTime("2025-06-01T12:00:00.123+02:00")).toBe(true);
    expect(isDateTime("2025-06-01 12:00:00Z")).toBe(true);
    expect(isDateTime("2025-06-01T12:00:00")).toBe(false); // no offset
    expect(isDateTime("2025-06-01T24:00:00Z")).toBe(false);
  });

  it("checks email, uuid and uri", () => {
    const f = FORMAT_CHECKS;
    expect([f.email!("a.b+c@example.co"), f.email!("a@b"), f.email!("a b@example.com")]).toEqual([true, false, false]);
    expect([f.uuid!("0190A7A2-7D3C-7B5E-9F00-1234567890AB"), f.uuid!("0190a7a2-7d3c-7b5e-9f00")]).toEqual([true, false]);
    expect([f.uri!("https://example.com/a?b#c"), f.uri!("urn:isbn:123"), f.uri!("/relative"), f.uri!("http://exa mple.com")]).toEqual([
      true,
      true,
      false,
      false,
    ]);
  });
});

describe("commands and queries without a schema", () => {
  // A schemas document whose names do not match the code: `CreateTodoPayload` instead of `CreateTodo`.
  const mismatched: JsonSchema = {
    $schema: JSON_SCHEMA_2020_12,
    $defs: {
      CreateTodoPayload: { type: "object", properties: { title: { type: "string" } }, required: ["title"] },
      ListTodos: { type: "object", properties: {} },
    },
  };
  const domain = () => {
    const Shop = defineDomain("Shop");
    const Create = Shop.command<{ title: string }>("CreateTodo");
    Shop.query("ListTodos");
    Shop.query("CountTodos");
    Shop.command("Explicit", { schema: { type: "object", properties: {} } });
    Shop.handleCommand(Create, async () => []);
    return { Shop, Create };
  };

  it("are warned about once per domain at registerDomain (MNEME_SCHEMA_MISSING), with a hint at a near $defs name", async () => {
    const { createFacade } = await import("../../src/app/facade.js");
    const warn = vi.spyOn(process, "emitWarning").mockImplementation(() => undefined);
    try {
      const f = createFacade({ schemas: mismatched });
      expect(warn).not.toHaveBeenCalled(); // the Runtime domain ships its own schemas
      f.registerDomain(domain().Shop);
      expect(warn).toHaveBeenCalledTimes(1);
      const [message, options] = warn.mock.calls[0] as [string, { code: string; detail: string }];
      expect(options.code).toBe("MNEME_SCHEMA_MISSING");
      expect(message).toContain('Shop.CreateTodo (did you mean $defs["CreateTodoPayload"]?)');
      expect(message).toContain("Shop.CountTodos");
      expect(message).not.toContain("Shop.ListTodos");
      expect(message).not.toContain("Shop.Explicit");
      expect(options.detail).toBe("unvalidated: Shop.CreateTodo, Shop.CountTodos");
    } finally {
      warn.mockRestore();
    }
  });

  it("are listed in systemInfo().unvalidated; built-in and Runtime types never are", async () => {
    const { createFacade } = await import("../../src/app/facade.js");
    const { registerDefaults } = await import("../../src/defaults/register-defaults.js");
    const warn = vi.spyOn(process, "emitWarning").mockImplementation(() => undefined);
    try {
      const f = createFacade({ schemas: mismatched });
      await registerDefaults(f, { admin: { email: "admin@example.org", password: "a long enough password" } });
      expect(f.runtime.systemInfo().unvalidated).toEqual([]);
      f.registerDomain(domain().Shop);
      expect(f.runtime.systemInfo().unvalidated).toEqual(["Shop.CreateTodo", "Shop.CountTodos"]);
      // Without any schemas document nothing is validated by choice: listed, but no warning.
      warn.mockClear();
      const bare = createFacade({});
      bare.registerDomain(domain().Shop);
      expect(warn).not.toHaveBeenCalled();
      expect(bare.runtime.systemInfo().unvalidated).toEqual(["Shop.CreateTodo", "Shop.ListTodos", "Shop.CountTodos"]);
    } finally {
      warn.mockRestore();
    }
  });

  it("are INVALID_DOMAIN at registerDomain with schemas: { document, required: true }, and nothing of the domain is registered", async () => {
    const { createFacade } = await import("../../src/app/facade.js");
    const { registerDefaults } = await import("../../src/defaults/register-defaults.js");
    const f = createFacade({ schemas: { document: mismatched, required: true } });
    await registerDefaults(f, { admin: { email: "admin@example.org", password: "a long enough password" } }); // built-ins pass
    const { Shop } = domain();
    let error: unknown;
    try {
      f.registerDomain(Shop);
    } catch (e) {
      error = e;
    }
    expect(isMnemeError(error, "INVALID_DOMAIN")).toBe(true);
    expect((error as MnemeError).message).toMatch(
      /domain Shop: schemas are required, but these commands and queries have none: Shop\.CreateTodo \(did you mean \$defs\["CreateTodoPayload"\]\?\), Shop\.CountTodos/,
    );
    expect(f.domains.has("Shop")).toBe(false);
    expect(f.permissions.has("Shop", "CreateTodo")).toBe(false);
    // Fixed (here: an explicit schema for each), the domain registers.
    const Fixed = defineDomain("Shop");
    Fixed.command("CreateTodo", { schema: { type: "object", properties: { title: { type: "string" } } } });
    Fixed.query("CountTodos", { schema: { type: "object" } });
    f.registerDomain(Fixed);
    expect(f.runtime.systemInfo().unvalidated).toEqual([]);
  });

  it("accepts the options form with a file path, and without a document when every type has its own schema", () => {
    const dir = mkdtempSync(join(tmpdir(), "mneme-schema-options-"));
    try {
      const file = join(dir, "schemas.json");
      writeFileSync(file, JSON.stringify(schemas));
      const fromFile = new SchemaRegistry({ document: file, required: true });
      expect(fromFile.required).toBe(true);
      expect(fromFile.has("CreateTodo")).toBe(true);
      expect(new SchemaRegistry({ document: schemas }).required).toBe(false);
      const explicitOnly = new SchemaRegistry({ required: true });
      expect(explicitOnly.hasDocument).toBe(false);
      expect(explicitOnly.checkDomain("Todo", [{ kind: "command", domain: "Todo", name: "X", schema: { type: "object" } }])).toEqual([]);
      expect(() => explicitOnly.checkDomain("Todo", [{ kind: "command", domain: "Todo", name: "Y" }])).toThrow(
        /schemas are required.*Todo\.Y/,
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("keeps reading a document as a document, and refuses a non-boolean required", () => {
    // JSON Schema's own `required` is an array: a document with $defs is never mistaken for options.
    const doc = new SchemaRegistry({ $defs: { A: { type: "object" } }, required: ["a"], document: "x" });
    expect(doc.has("A")).toBe(true);
    expect(doc.required).toBe(false);
    expect(() => new SchemaRegistry({ required: "yes" })).toThrow(/"required" must be a boolean/);
  });
});
