/**
 * Schema discovery and payload validation on the request path: a cached
 * `documentFor` lookup and `validate()` of a small payload, against raw ajv
 * (the same compiled schema called directly) as the baseline; and the same
 * payload validated by a Standard Schema validator (zod 4, arktype) through
 * the registry, against the library's own `~standard.validate` called directly.
 */
import { Ajv2020 } from "ajv/dist/2020.js";
import type { JsonSchema } from "../src/model/types.js";
import { JSON_SCHEMA_2020_12 } from "../src/schema/convert-2020-12.js";
import { FORMAT_CHECKS } from "../src/schema/formats.js";
import { SchemaRegistry, type SchemaTypeRef } from "../src/schema/schema-registry.js";
import { type } from "arktype";
import { z } from "zod";
import type { StandardSchemaV1 } from "../src/model/standard-schema.js";
import type { Bench } from "./harness.js";

const schemas: JsonSchema = {
  $schema: JSON_SCHEMA_2020_12,
  $defs: {
    Priority: { type: "string", enum: ["low", "normal", "high"] },
    CreateTodo: {
      type: "object",
      properties: {
        todoUuid: { type: "string", format: "uuid" },
        title: { type: "string", minLength: 1 },
        assigneeEmail: { type: "string", format: "email" },
        dueAt: { type: "string", format: "date-time" },
        priority: { $ref: "#/$defs/Priority" },
        tags: { type: "array", items: { type: "string" } },
      },
      required: ["todoUuid", "title", "priority"],
      additionalProperties: false,
    },
  },
};

const CreateTodo: SchemaTypeRef = Object.freeze({ kind: "command", domain: "Todo", name: "CreateTodo" });
const payload = {
  todoUuid: "0190a7a2-7d3c-7b5e-9f00-1234567890ab",
  title: "Write the bench",
  assigneeEmail: "ann@example.com",
  dueAt: "2025-06-01T12:00:00Z",
  priority: "high",
  tags: ["work", "bench"],
};

export default async function (b: Bench): Promise<void> {
  const n = b.quick ? 20_000 : 500_000;
  const registry = new SchemaRegistry(schemas);
  void registry.validate(CreateTodo, payload); // compile outside the measurement (a JSON Schema answers synchronously)

  let sink = 0;
  await b.measure(
    "schema",
    "documentFor (cached, same token)",
    n,
    () => {
      for (let i = 0; i < n; i++) if (registry.documentFor(CreateTodo) !== undefined) sink++;
    },
    "calls/s",
  );
  const literal = { kind: "command", domain: "Todo", name: "CreateTodo" } as const;
  await b.measure(
    "schema",
    "documentFor (cached, equal literal token)",
    n,
    () => {
      for (let i = 0; i < n; i++) if (registry.documentFor({ ...literal }) !== undefined) sink++;
    },
    "calls/s",
  );

  const raw = new Ajv2020({ allErrors: true, strict: false, formats: { ...FORMAT_CHECKS } }).compile(registry.documentFor(CreateTodo)!);
  const baseline = await b.measure(
    "schema",
    "raw ajv compiled function (baseline)",
    n,
    () => {
      for (let i = 0; i < n; i++) if (raw(payload)) sink++;
    },
    "calls/s",
  );
  const validate = await b.measure(
    "schema",
    "registry.validate() small valid payload",
    n,
    () => {
      for (let i = 0; i < n; i++) void registry.validate(CreateTodo, payload);
    },
    "calls/s",
  );
  b.compare(validate, baseline);

  const bad = { ...payload, title: "", assigneeEmail: "nope" };
  const m = Math.floor(n / 10);
  await b.measure(
    "schema",
    "registry.validate() invalid payload (throws, 2 details)",
    m,
    () => {
      for (let i = 0; i < m; i++) {
        try {
          void registry.validate(CreateTodo, bad);
        } catch {
          sink++;
        }
      }
    },
    "calls/s",
  );
  // Standard Schema: the same payload's shape in zod 4 and arktype, through the registry and raw.
  const standard: [string, StandardSchemaV1][] = [
    [
      "zod",
      z.object({
        todoUuid: z.uuid(),
        title: z.string().min(1),
        assigneeEmail: z.email().optional(),
        dueAt: z.iso.datetime().optional(),
        priority: z.enum(["low", "normal", "high"]),
        tags: z.array(z.string()).optional(),
      }),
    ],
    [
      "arktype",
      type({
        todoUuid: "string.uuid",
        title: "string > 0",
        "assigneeEmail?": "string.email",
        "dueAt?": "string.date.iso",
        priority: "'low' | 'normal' | 'high'",
        "tags?": "string[]",
      }),
    ],
  ];
  for (const [vendor, schema] of standard) {
    const token: SchemaTypeRef = Object.freeze({ kind: "command", domain: "Todo", name: `CreateTodo_${vendor}`, schema });
    void registry.validate(token, payload);
    const props = schema["~standard"];
    const rawStandard = await b.measure(
      "schema",
      `raw ${vendor} ~standard.validate (baseline)`,
      n,
      () => {
        for (let i = 0; i < n; i++) if ((props.validate(payload) as StandardSchemaV1.Result<unknown>).issues === undefined) sink++;
      },
      "calls/s",
    );
    const viaRegistry = await b.measure(
      "schema",
      `registry.validate() ${vendor} schema, small valid payload`,
      n,
      () => {
        for (let i = 0; i < n; i++) void registry.validate(token, payload);
      },
      "calls/s",
    );
    b.compare(viaRegistry, rawStandard);
  }
  if (sink === 0) throw new Error("unreachable: keeps the loops from being optimised away");
}
