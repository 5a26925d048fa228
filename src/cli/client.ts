/**
 * `mneme client --app <module> --out <file>`: one dependency-free TypeScript
 * file, a typed client of the app's commands and queries over its HTTP
 * routes, written from the OpenAPI document (openapi.ts): a function per
 * command and query, its payload typed by the message's JSON Schema, answers
 * as `{ ok: true, value } | { ok: false, problem }`. It uses fetch and
 * nothing else.
 */
import type { OpenApiDocument, OpenApiOperation } from "../http/openapi-types.js";
import type { JsonSchema } from "../model/types.js";
import { openApiDocumentOfApp, writeFileAtomically } from "./openapi.js";
import { docComment, propertyKey, schemaToTs } from "./schema-to-ts.js";
import { CLIENT_RUNTIME } from "./client-runtime.js";

const SCHEMA_REF = "#/components/schemas/";

interface MessageOperation {
  readonly kind: "command" | "query";
  readonly domain: string;
  readonly name: string;
  readonly path: string;
  readonly operation: OpenApiOperation;
}

/**
 * The client's source for a document: the payload types (every component
 * schema the operations use), the runtime (fetch, credentials, idempotency
 * keys, retries, problems) and `createClient`.
 */
export function generateClient(doc: OpenApiDocument): string {
  const ops = messageOperations(doc);
  const names = typeNames(doc);
  const refName = (ref: string): string | undefined =>
    ref.startsWith(SCHEMA_REF) ? names.get(decodeURIComponent(ref.slice(SCHEMA_REF.length))) : undefined;
  const used = usedSchemas(doc, ops);
  const out: string[] = [];
  out.push(
    `/**\n * The typed client of ${doc.info.title} ${doc.info.version}, written by \`mneme client\` from its OpenAPI document.\n` +
      ` * Dependency-free (it uses fetch). Do not edit: run \`mneme client\` again when the app's messages change.\n */\n`,
    "/* eslint-disable */\n",
  );
  for (const name of used) {
    const schema = doc.components.schemas[name];
    const description = typeof schema === "object" && typeof schema.description === "string" ? schema.description : name;
    out.push(`${docComment(description, "")}export type ${names.get(name)!} = ${schemaToTs(schema, refName)};\n`);
  }
  out.push(CLIENT_RUNTIME);
  out.push(operationsTable(ops));
  out.push(createClientSource(doc, ops, refName));
  return out.join("\n");
}

/** The commands and queries of the document (`x-mneme-message`), in its order. */
function messageOperations(doc: OpenApiDocument): MessageOperation[] {
  const out: MessageOperation[] = [];
  for (const [path, item] of Object.entries(doc.paths)) {
    for (const operation of Object.values(item)) {
      const m = operation["x-mneme-message"];
      if (m !== undefined) out.push({ ...m, path, operation });
    }
  }
  return out;
}

/** A TypeScript name per component schema: `Todo.CreateTodo` is `Todo_CreateTodo`, unique. */
function typeNames(doc: OpenApiDocument): Map<string, string> {
  const out = new Map<string, string>();
  const taken = new Set<string>(RESERVED);
  for (const name of Object.keys(doc.components.schemas)) {
    const base = name.replace(/[^A-Za-z0-9_$]/g, "_").replace(/^(?=[0-9])/, "_");
    let candidate = base;
    for (let i = 2; taken.has(candidate); i++) candidate = `${base}_${i}`;
    taken.add(candidate);
    out.set(name, candidate);
  }
  return out;
}

/** Names the runtime part declares: a schema's type never takes one. */
const RESERVED = [
  "Problem",
  "Result",
  "CommandResponse",
  "ClientOptions",
  "CallOptions",
  "CommandCallOptions",
  "Operation",
  "OPERATIONS",
  "createClient",
  "Client",
  "send",
];

/** The component schemas the operations' payloads reach, through `$ref`s, in the document's order. */
function usedSchemas(doc: OpenApiDocument, ops: readonly MessageOperation[]): string[] {
  const reached = new Set<string>();
  const visit = (v: unknown): void => {
    if (Array.isArray(v)) v.forEach(visit);
    else if (typeof v === "object" && v !== null) {
      for (const [k, x] of Object.entries(v)) {
        if (k === "$ref" && typeof x === "string" && x.startsWith(SCHEMA_REF)) {
          const name = decodeURIComponent(x.slice(SCHEMA_REF.length)).split("/")[0]!;
          if (!reached.has(name) && doc.components.schemas[name] !== undefined) {
            reached.add(name);
            visit(doc.components.schemas[name]);
          }
        } else if (k !== "enum" && k !== "const" && k !== "default" && k !== "examples") visit(x);
      }
    }
  };
  for (const op of ops) {
    visit(payloadSchema(op.operation));
    visit(resultSchema(op));
  }
  return Object.keys(doc.components.schemas).filter((n) => reached.has(n));
}

function payloadSchema(op: OpenApiOperation): JsonSchema | boolean | undefined {
  return op.requestBody?.content["application/json"]?.schema;
}

/**
 * The result's schema, where the message declares one (`resultSchema`): a query's answer, or the
 * `result` of a command's answer (`allOf: [CommandResponse, { properties: { result } }]`).
 */
function resultSchema(op: MessageOperation): JsonSchema | undefined {
  const ok = op.operation.responses["200"];
  const schema = ok !== undefined && "content" in ok ? ok.content?.["application/json"]?.schema : undefined;
  if (typeof schema !== "object") return undefined;
  if (op.kind === "query") return Object.keys(schema).length === 0 ? undefined : schema;
  const typed = Array.isArray(schema.allOf) ? (schema.allOf[1] as { properties?: { result?: JsonSchema } } | undefined) : undefined;
  return typed?.properties?.result;
}

function operationsTable(ops: readonly MessageOperation[]): string {
  const rows = ops.map((op) => {
    const p = op.operation["x-mneme-permission"];
    const anonymous = p.kind === "level" && p.level === "Anonymous";
    return `  { kind: ${JSON.stringify(op.kind)}, name: ${JSON.stringify(`${op.domain}.${op.name}`)}, path: ${JSON.stringify(op.path)}, anonymous: ${anonymous} },`;
  });
  return `const OPERATIONS: readonly Operation[] = [\n${rows.join("\n")}\n];\n`;
}

/** `createClient(options)`: `commands.<Domain>.<Name>(payload, call?)` and `queries.<Domain>.<Name>(payload, call?)`. */
function createClientSource(doc: OpenApiDocument, ops: readonly MessageOperation[], refName: (ref: string) => string | undefined): string {
  const groups: string[] = [];
  for (const kind of ["command", "query"] as const) {
    const byDomain = new Map<string, string[]>();
    ops.forEach((op, index) => {
      if (op.kind !== kind) return;
      const payload = payloadSchema(op.operation);
      const type = schemaToTs(payload, refName, "      ");
      const optional = !requiresSomething(payload, doc);
      const declared = resultSchema(op);
      const result = declared === undefined ? "unknown" : schemaToTs(declared, refName, "      ");
      const comment = docComment(
        [op.operation.summary, op.operation.description].filter((s) => s !== undefined && s !== "").join("\n\n"),
        "      ",
      );
      const line =
        kind === "command"
          ? `${comment}      ${propertyKey(op.name)}: <R = ${result}>(payload${optional ? "?" : ""}: ${type}, call?: CommandCallOptions): Promise<Result<CommandResponse<R>>> =>\n        send<CommandResponse<R>>(options, OPERATIONS[${index}]!, payload, call),`
          : `${comment}      ${propertyKey(op.name)}: <R = ${result}>(payload${optional ? "?" : ""}: ${type}, call?: CallOptions): Promise<Result<R>> =>\n        send<R>(options, OPERATIONS[${index}]!, payload, call),`;
      const list = byDomain.get(op.domain) ?? [];
      list.push(line);
      byDomain.set(op.domain, list);
    });
    const domains = [...byDomain].map(([domain, lines]) => `    ${propertyKey(domain)}: {\n${lines.join("\n")}\n    },`);
    groups.push(`    ${kind === "command" ? "commands" : "queries"}: {\n${domains.join("\n")}\n    },`.replace(/^ {4}/gm, "  "));
  }
  return (
    `/**\n * A client of the app's commands and queries. Every call answers \`{ ok: true, status, value }\` or\n` +
    ` * \`{ ok: false, status, problem }\` (the problem document the server answered); it rejects only when\n` +
    ` * the server could not be reached (after the retries a call allows).\n */\n` +
    `export function createClient(options: ClientOptions) {\n  return {\n${groups.join("\n")}\n  };\n}\n\n` +
    `/** The client's type. */\nexport type Client = ReturnType<typeof createClient>;\n`
  );
}

/** True when a payload must be given: its schema (or the one it refers to) requires a property. */
function requiresSomething(schema: unknown, doc: OpenApiDocument, depth = 0): boolean {
  if (typeof schema !== "object" || schema === null || depth > 8) return false;
  const s = schema as JsonSchema;
  if (Array.isArray(s.required) && s.required.length > 0) return true;
  if (typeof s.$ref === "string" && s.$ref.startsWith(SCHEMA_REF))
    return requiresSomething(doc.components.schemas[decodeURIComponent(s.$ref.slice(SCHEMA_REF.length))], doc, depth + 1);
  return false;
}

/** `mneme client`: the client of the app of `app`, written to `out`. */
export async function runClientCommand(opts: { app: string; out: string }, stdout: { write(s: string): unknown }): Promise<void> {
  const doc = await openApiDocumentOfApp(opts.app);
  const source = generateClient(doc);
  writeFileAtomically(opts.out, source);
  const count = messageOperations(doc).length;
  stdout.write(`mneme: wrote a typed client of ${doc.info.title} (${count} commands and queries) to ${opts.out}\n`);
}
