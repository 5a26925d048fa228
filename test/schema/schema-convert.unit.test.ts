import { Ajv2020 } from "ajv/dist/2020.js";
import { describe, expect, it } from "vitest";
import type { JsonSchema } from "../../src/model/types.js";
import { convertTo2020_12, JSON_SCHEMA_2020_12 } from "../../src/schema/convert-2020-12.js";
import { appendPointer, formatLocalRef, parseLocalRef } from "../../src/schema/json-pointer.js";

// Shaped like ts-json-schema-generator output (draft-07, topRef, encoded generic refs).
const generated: JsonSchema = {
  $schema: "http://json-schema.org/draft-07/schema#",
  $ref: "#/definitions/CreateTodo",
  definitions: {
    CreateTodo: {
      type: "object",
      properties: {
        title: { type: "string" },
        page: { $ref: "#/definitions/Page%3CTodo%3E" },
        label: { type: "array", items: [{ type: "string" }, { $ref: "#/definitions/Weight" }], minItems: 2, maxItems: 2 },
        rest: { type: "array", items: [{ type: "string" }], additionalItems: { type: "number" } },
        list: { type: "array", items: { type: "string" }, additionalItems: false },
        example: { type: "object", default: { items: [1, 2], $ref: "#/definitions/not-a-ref" }, enum: [{ definitions: 1 }] },
      },
      required: ["title"],
      additionalProperties: false,
    },
    "Page<Todo>": {
      type: "object",
      properties: { items: { type: "array", items: { $ref: "#/definitions/Todo" } }, total: { type: "number" } },
    },
    Todo: { type: "object", properties: { title: { type: "string" } } },
    Weight: { type: "number", minimum: 0 },
  },
};

describe("convertTo2020_12", () => {
  it("renames definitions to $defs and rewrites every ref, generic names included", () => {
    const out = convertTo2020_12(generated) as any;
    expect(out.$schema).toBe(JSON_SCHEMA_2020_12);
    expect(out.definitions).toBeUndefined();
    expect(Object.keys(out.$defs)).toEqual(["CreateTodo", "Page<Todo>", "Todo", "Weight"]);
    expect(out.$ref).toBe("#/$defs/CreateTodo");
    expect(out.$defs.CreateTodo.properties.page.$ref).toBe("#/$defs/Page%3CTodo%3E");
    expect(out.$defs["Page<Todo>"].properties.items.items.$ref).toBe("#/$defs/Todo");
    const { example: _data, ...schemaProps } = out.$defs.CreateTodo.properties; // its default holds the string as data
    expect(JSON.stringify({ ...out, $defs: { ...out.$defs, CreateTodo: { properties: schemaProps } } })).not.toContain("#/definitions/");
  });

  it("turns tuple items into prefixItems and additionalItems into items", () => {
    const p = (convertTo2020_12(generated) as any).$defs.CreateTodo.properties;
    expect(p.label).toEqual({
      type: "array",
      prefixItems: [{ type: "string" }, { $ref: "#/$defs/Weight" }],
      minItems: 2,
      maxItems: 2,
    });
    expect(p.rest).toEqual({ type: "array", prefixItems: [{ type: "string" }], items: { type: "number" } });
    // additionalItems next to a schema-valued items means nothing in draft-07: dropped.
    expect(p.list).toEqual({ type: "array", items: { type: "string" } });
  });

  it("leaves data keywords (default, enum, const, examples) untouched", () => {
    const p = (convertTo2020_12(generated) as any).$defs.CreateTodo.properties;
    expect(p.example.default).toEqual({ items: [1, 2], $ref: "#/definitions/not-a-ref" });
    expect(p.example.enum).toEqual([{ definitions: 1 }]);
  });

  it("does not modify its input", () => {
    const before = JSON.stringify(generated);
    convertTo2020_12(generated);
    expect(JSON.stringify(generated)).toBe(before);
  });

  it("handles unencoded refs, names with / and ~, and nested definitions", () => {
    const out = convertTo2020_12({
      definitions: {
        "Map<string,number>": { type: "object" },
        "a/b~c": { type: "string" },
        Outer: { definitions: { Inner: { type: "boolean" } }, properties: { i: { $ref: "#/definitions/Outer/definitions/Inner" } } },
      },
      properties: {
        m: { $ref: "#/definitions/Map<string,number>" },
        s: { $ref: "#/definitions/a~1b~0c" },
      },
    }) as any;
    expect(out.properties.m.$ref).toBe("#/$defs/Map%3Cstring,number%3E");
    expect(out.properties.s.$ref).toBe("#/$defs/a~1b~0c");
    expect(out.$defs.Outer.$defs.Inner).toEqual({ type: "boolean" });
    expect(out.$defs.Outer.properties.i.$ref).toBe("#/$defs/Outer/$defs/Inner");
    // ajv resolves every rewritten ref.
    const validate = new Ajv2020({ strict: false }).compile(out);
    expect(validate({ m: {}, s: "x" })).toBe(true);
    expect(validate({ m: {}, s: 1 })).toBe(false);
  });

  it("rewrites pointers that go through tuples and leaves a property named items alone", () => {
    const out = convertTo2020_12({
      definitions: {
        T: { type: "array", items: [{ type: "string" }, { type: "number" }], additionalItems: { type: "boolean" } },
        O: { type: "object", properties: { items: { type: "string" }, definitions: { type: "number" } } },
      },
      properties: {
        second: { $ref: "#/definitions/T/items/1" },
        extra: { $ref: "#/definitions/T/additionalItems" },
        prop: { $ref: "#/definitions/O/properties/items" },
        prop2: { $ref: "#/definitions/O/properties/definitions" },
        remote: { $ref: "https://example.com/s.json#/definitions/X" },
        self: { $ref: "#" },
      },
    }) as any;
    expect(out.properties.second.$ref).toBe("#/$defs/T/prefixItems/1");
    expect(out.properties.extra.$ref).toBe("#/$defs/T/items");
    expect(out.properties.prop.$ref).toBe("#/$defs/O/properties/items");
    expect(out.properties.prop2.$ref).toBe("#/$defs/O/properties/definitions");
    expect(out.properties.remote.$ref).toBe("https://example.com/s.json#/definitions/X");
    expect(out.properties.self.$ref).toBe("#");
  });

  it("splits dependencies into dependentRequired and dependentSchemas", () => {
    const out = convertTo2020_12({
      type: "object",
      dependencies: { card: ["billing"], vip: { required: ["since"] } },
    }) as any;
    expect(out.dependencies).toBeUndefined();
    expect(out.dependentRequired).toEqual({ card: ["billing"] });
    expect(out.dependentSchemas).toEqual({ vip: { required: ["since"] } });
  });

  it("is idempotent on a 2020-12 document", () => {
    const once = convertTo2020_12(generated);
    expect(convertTo2020_12(once)).toEqual(once);
  });

  it("keeps boolean schemas", () => {
    const out = convertTo2020_12({ definitions: { Any: true, None: false }, properties: { a: true } }) as any;
    expect(out.$defs).toEqual({ Any: true, None: false });
    expect(out.properties.a).toBe(true);
  });
});

describe("json pointers", () => {
  it("round-trips tokens through a $ref fragment", () => {
    const tokens = ["$defs", "Page<Todo>", "a/b", "~x", "100%"];
    const ref = formatLocalRef(tokens);
    expect(ref).toBe("#/$defs/Page%3CTodo%3E/a~1b/~0x/100%25");
    expect(parseLocalRef(ref)).toEqual(tokens);
    expect(parseLocalRef("other.json#/x")).toBeUndefined();
    expect(appendPointer("/a", "b/c")).toBe("/a/b~1c");
  });
});
