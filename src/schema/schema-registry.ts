/**
 * Schema discovery and payload validation: holds the `$defs` written by
 * `mneme schema build`, serves standalone 2020-12 documents per command, query
 * and event type, and validates payloads with compiled, cached ajv validators.
 */
import { readFileSync } from "node:fs";
import { Ajv2020, type ErrorObject, type ValidateFunction } from "ajv/dist/2020.js";
import { errorMessage, MnemeError, type MnemeErrorDetail } from "../model/errors.js";
import type { JsonSchema } from "../model/types.js";
import { convertTo2020_12, JSON_SCHEMA_2020_12 } from "./convert-2020-12.js";
import { FORMAT_CHECKS } from "./formats.js";
import { appendPointer, formatLocalRef, parseLocalRef } from "./json-pointer.js";
import { withPropertyTypes } from "./property-types.js";
import { isStandardSchema, type StandardSchemaV1 } from "../model/standard-schema.js";
import { standardJsonSchema, standardPayloadCheck, type StandardPayloadCheck } from "./standard-schema.js";

/** What the registry needs of a command, query or event type token. */
export interface SchemaTypeRef {
  readonly kind: "command" | "query" | "event";
  readonly domain: string;
  readonly name: string;
  /**
   * An explicit schema, JSON Schema or a Standard Schema v1 validator (zod 4,
   * valibot, arktype, ...): wins over `$defs[name]` of the registry.
   */
  readonly schema?: JsonSchema | StandardSchemaV1 | undefined;
}

/** The schemas document: the object `mneme schema build` wrote, or the path of its file. */
export type SchemaDocument = JsonSchema | string;

/**
 * `createFacade({ schemas: { document, required } })`: the document with options.
 * A type alias (not an interface), so it also fits `FacadeOptions.schemas`.
 */
export type SchemaOptions = {
  /** The output of `mneme schema build` (object or file path). Omitted: only types with an explicit `schema` have one. */
  readonly document?: SchemaDocument;
  /**
   * true: a command or query without a schema is INVALID_DOMAIN at registerDomain.
   * Default false: it is listed in `runtime.systemInfo().unvalidated`, and when a
   * document was given, a process warning `MNEME_SCHEMA_MISSING` names it.
   */
  readonly required?: boolean;
};

/** `createFacade({ schemas })`: a document (object or file path), or {@link SchemaOptions}. */
export type SchemaSource = SchemaDocument | SchemaOptions;

/** The code of the process warning for commands and queries left without a schema by a schemas document. */
export const SCHEMA_MISSING_WARNING = "MNEME_SCHEMA_MISSING";

/** Checks a payload: `undefined` when valid, else one detail per failing JSON pointer. */
export type PayloadValidator = (payload: unknown) => MnemeErrorDetail[] | undefined;

interface Entry {
  readonly explicit: JsonSchema | StandardSchemaV1 | undefined;
  readonly document: JsonSchema | undefined;
  validator?: PayloadValidator | undefined;
  /** A Standard Schema's check, which may answer asynchronously (`validate` awaits it). */
  readonly check?: StandardPayloadCheck | undefined;
}

type SchemaObject = { [key: string]: unknown };

// Keywords a `$ref`-only root may carry that do not constrain: they survive inlining.
const ANNOTATIONS = new Set(["$comment", "title", "description", "default", "examples", "deprecated", "readOnly", "writeOnly"]);
// Data-valued keywords: a "$ref" key inside them is data, not a reference.
const DATA_KEYWORDS = new Set(["enum", "const", "default", "examples"]);
const MESSAGE_POINTERS = 10;

/**
 * Holds the schemas of an application. Built once, at createFacade time (a file
 * is read synchronously then); every document and validator is computed on
 * first use and cached, so the request path only looks them up.
 * @example
 * const schemas = new SchemaRegistry("schemas.json");
 * schemas.validate(CreateTodo, payload);          // throws VALIDATION_FAILED
 * schemas.documentFor(CreateTodo);                // { $schema, type: "object", properties, required, $defs? }
 */
export class SchemaRegistry {
  /** The `$defs` of the source (converted to 2020-12, frozen). */
  readonly defs: Readonly<Record<string, JsonSchema | boolean>>;
  /** true: every command and query must have a schema (`{ required: true }`). */
  readonly required: boolean;
  /** true when a schemas document was given (so a type it lacks is likely a name mismatch). */
  readonly hasDocument: boolean;
  private readonly byToken = new WeakMap<SchemaTypeRef, Entry>();
  private readonly byKey = new Map<string, Entry>();
  private ajvInstance: Ajv2020 | undefined;

  /**
   * @param source the output of `mneme schema build` (object, or path of the JSON file),
   *   or `{ document?, required? }` ({@link SchemaOptions}); raw ts-json-schema-generator
   *   output (draft-07 `definitions`) is accepted and converted. An object is read as
   *   options when it has no `$defs` / `definitions` and only the keys `document` and `required`.
   *   Omitted: only types with an explicit `schema` have one.
   * @throws MnemeError INVALID_REQUEST when the file cannot be read or parsed, the
   *   object is not a schema document whose local refs all resolve, or `required` is not a boolean.
   */
  constructor(sourceOrOptions?: SchemaSource) {
    let source: SchemaDocument | undefined;
    if (isSchemaOptions(sourceOrOptions)) {
      if (sourceOrOptions.required !== undefined && typeof sourceOrOptions.required !== "boolean") {
        throw new MnemeError(
          "INVALID_REQUEST",
          `schemas option "required" must be a boolean, got ${JSON.stringify(sourceOrOptions.required) ?? typeof sourceOrOptions.required}`,
        );
      }
      this.required = sourceOrOptions.required === true;
      source = sourceOrOptions.document;
    } else {
      this.required = false;
      source = sourceOrOptions;
    }
    this.hasDocument = source !== undefined;
    if (source === undefined) {
      this.defs = Object.freeze({});
      return;
    }
    const where = typeof source === "string" ? `schemas file "${source}"` : "schemas object";
    const raw = typeof source === "string" ? readSchemasFile(source) : source;
    if (!isObject(raw)) {
      throw new MnemeError("INVALID_REQUEST", `${where} must be a JSON object with "$defs" (the output of \`mneme schema build\`)`);
    }
    if (raw.$defs === undefined && raw.definitions === undefined) {
      throw new MnemeError("INVALID_REQUEST", `${where} has no "$defs": pass the output of \`mneme schema build\``);
    }
    const converted = convertTo2020_12(raw);
    const defs = converted.$defs;
    if (!isObject(defs)) throw new MnemeError("INVALID_REQUEST", `${where}: "$defs" must be an object of schemas`);
    for (const [name, def] of Object.entries(defs)) {
      if (!isObject(def) && typeof def !== "boolean") {
        throw new MnemeError("INVALID_REQUEST", `${where}: $defs["${name}"] is not a schema (an object or a boolean)`);
      }
    }
    const missing = new Set<string>();
    for (const def of Object.values(defs)) {
      for (const ref of localDefRefs(def)) if (!(ref in defs)) missing.add(ref);
    }
    if (missing.size > 0) {
      throw new MnemeError(
        "INVALID_REQUEST",
        `${where}: $refs point to missing $defs: ${[...missing].map((n) => JSON.stringify(n)).join(", ")}`,
      );
    }
    this.defs = deepFreeze(defs) as Record<string, JsonSchema | boolean>;
  }

  /** True when `$defs` holds a schema of this name. */
  has(name: string): boolean {
    return Object.hasOwn(this.defs, name);
  }

  /**
   * The standalone 2020-12 document of a type, or `undefined` when it has none:
   * its own `schema` wins, else `$defs[type.name]`. The root type is inlined
   * (`type: "object"`, `properties`, `required`, ...) next to `$schema` and only
   * the `$defs` it transitively references. A top-level property written as a
   * `$ref` or union also gets the `type` (and `format`) it resolves to, so every
   * property has a `type` (spec 2.9). Cached and frozen.
   * @throws MnemeError INVALID_REQUEST when an explicit schema references a missing `$defs` entry.
   */
  documentFor(type: SchemaTypeRef): JsonSchema | undefined {
    return this.entry(type).document;
  }

  /**
   * Schema discovery: finds `ask.type` in `ask.domain` among `types` (first match
   * wins: pass commands, then queries, then events) and returns its document.
   * @throws MnemeError UNKNOWN_SCHEMA_TYPE for an unknown domain or type, or a type
   *   without a schema; INVALID_REQUEST when `domain` or `type` is not a non-empty string.
   */
  requireDocument(types: Iterable<SchemaTypeRef>, ask: { readonly domain?: unknown; readonly type?: unknown }): JsonSchema {
    const { domain, type } = ask;
    if (typeof domain !== "string" || domain === "" || typeof type !== "string" || type === "") {
      throw new MnemeError("INVALID_REQUEST", `a schema request needs "domain" and "type", both non-empty strings`);
    }
    const inDomain: SchemaTypeRef[] = [];
    let found: SchemaTypeRef | undefined;
    for (const t of types) {
      if (t.domain !== domain) continue;
      inDomain.push(t);
      if (t.name === type) {
        found = t;
        break;
      }
    }
    if (found === undefined) {
      if (inDomain.length === 0) {
        throw new MnemeError("UNKNOWN_SCHEMA_TYPE", `unknown domain "${domain}": it has no registered command, query or event`);
      }
      const known = inDomain.map((t) => t.name);
      const list = known.length > 20 ? `${known.slice(0, 20).join(", ")}, ...` : known.join(", ");
      throw new MnemeError("UNKNOWN_SCHEMA_TYPE", `unknown type "${type}" in domain "${domain}" (known: ${list})`);
    }
    const document = this.documentFor(found);
    if (document === undefined && isStandardSchema(found.schema)) {
      throw new MnemeError(
        "UNKNOWN_SCHEMA_TYPE",
        `${found.kind} ${domain}.${type} is validated by its ${found.schema["~standard"].vendor} schema, which offers no JSON Schema ` +
          `(Standard JSON Schema, \`~standard.jsonSchema\`); with valibot, pass toStandardJsonSchema(schema) from @valibot/to-json-schema`,
      );
    }
    if (document === undefined) {
      throw new MnemeError(
        "UNKNOWN_SCHEMA_TYPE",
        `${found.kind} ${domain}.${type} has no schema: give it a \`schema\` option, or pass createFacade({ schemas }) ` +
          `the output of \`mneme schema build\` with $defs["${type}"]`,
      );
    }
    return document;
  }

  /**
   * The compiled validator of a type, or `undefined` when it has no schema.
   * Compiled once per type (call it at registration to pay the compile cost early).
   * Formats date-time, date, time, email, uuid and uri are checked; other
   * formats are annotations only. A payload that is not an object always fails.
   * @throws MnemeError INVALID_REQUEST when the schema does not compile.
   */
  validator(type: SchemaTypeRef): PayloadValidator | undefined {
    const entry = this.entry(type);
    if (entry.validator !== undefined || entry.document === undefined) return entry.validator;
    entry.validator = this.compile(entry.document, type);
    return entry.validator;
  }

  /**
   * The labels (`Domain.Name`) of the types that have no schema, in the given
   * order; compiles the validators of the others (as {@link validator} does).
   * @throws MnemeError INVALID_REQUEST when a schema does not compile.
   */
  missing(types: Iterable<SchemaTypeRef>): string[] {
    const out: string[] = [];
    for (const t of types) if (this.validator(t) === undefined) out.push(`${t.domain}.${t.name}`);
    return out;
  }

  /**
   * The registration check of a domain's commands and queries: compiles their
   * validators (a bad schema fails now, the first request pays nothing) and
   * deals with those that have no schema, whose payloads would go unvalidated:
   * INVALID_DOMAIN when schemas are `required`; otherwise, when a schemas
   * document was given, one process warning `MNEME_SCHEMA_MISSING` that names
   * them (usually a name that differs between the document's `$defs` and the
   * code). Returns their labels.
   * @throws MnemeError INVALID_DOMAIN (required and missing), INVALID_REQUEST (a schema does not compile).
   */
  checkDomain(domain: string, types: Iterable<SchemaTypeRef>): string[] {
    const without: SchemaTypeRef[] = [];
    for (const t of types) if (this.validator(t) === undefined) without.push(t);
    if (without.length === 0) return [];
    const missing = without.map((t) => `${t.domain}.${t.name}`);
    const named = without.map((t) => `${t.domain}.${t.name}${this.hint(t.name)}`).join(", ");
    if (this.required) {
      throw new MnemeError(
        "INVALID_DOMAIN",
        `domain ${domain}: schemas are required, but ${without.length === 1 ? "this command or query has" : "these commands and queries have"} none: ${named}. ` +
          `Give each a \`schema\` option, or a $defs entry of its name in the schemas document (\`mneme schema build\`)`,
      );
    }
    if (this.hasDocument && typeof process !== "undefined" && typeof process.emitWarning === "function") {
      process.emitWarning(
        `domain ${domain}: the schemas document has no $defs entry for ${named}, so their payloads are not validated ` +
          `(createFacade({ schemas: { document, required: true } }) makes this an error)`,
        { code: SCHEMA_MISSING_WARNING, detail: `unvalidated: ${missing.join(", ")}` },
      );
    }
    return missing;
  }

  /** ' (did you mean $defs["X"]?)' for $defs names that equal the type's name but for case, or contain it. */
  private hint(name: string): string {
    const lower = name.toLowerCase();
    const near = Object.keys(this.defs).filter((d) => d !== name && d.toLowerCase().includes(lower));
    return near.length === 0
      ? ""
      : ` (did you mean $defs[${near
          .slice(0, 3)
          .map((d) => JSON.stringify(d))
          .join(" or ")}]?)`;
  }

  /**
   * Validates a payload against the type's schema; a type without a schema passes.
   * @throws MnemeError VALIDATION_FAILED with one detail (`pointer`, `message`) per
   *   failure and a message that lists the pointers.
   */
  validate(type: SchemaTypeRef, payload: unknown): void | Promise<void> {
    const entry = this.entry(type);
    const details = entry.check !== undefined ? entry.check(payload) : this.validator(type)?.(payload);
    if (details instanceof Promise) {
      return details.then((d) => {
        if (d !== undefined) throw validationFailed(type, d);
      });
    }
    if (details !== undefined) throw validationFailed(type, details);
  }

  /**
   * The failures of an event payload against its type's own `schema` (one
   * detail per failing pointer into the payload), undefined when it passes or
   * the type has no `schema` of its own. A `$defs` entry of the schemas
   * document does not apply to events: `$defs` are named by type name only,
   * and an event shares its name with commands of other domains.
   */
  eventProblems(type: SchemaTypeRef, payload: unknown): MnemeErrorDetail[] | undefined | Promise<MnemeErrorDetail[] | undefined> {
    if (type.schema === undefined) return undefined;
    const entry = this.entry(type);
    return entry.check !== undefined ? entry.check(payload) : this.validator(type)?.(payload);
  }

  /**
   * The registration check of a domain's events: compiles the validators of
   * those that have a `schema` of their own, so a bad one fails at
   * registration (INVALID_REQUEST), not in the first command that emits it.
   */
  checkEvents(types: Iterable<SchemaTypeRef>): void {
    for (const t of types) if (t.schema !== undefined) this.validator(t);
  }

  private entry(type: SchemaTypeRef): Entry {
    const cached = this.byToken.get(type);
    if (cached !== undefined && cached.explicit === type.schema) return cached;
    // Tokens are long-lived objects, but a caller may pass an equal literal: fall back to the key.
    const key = `${type.kind}\u0000${type.domain}\u0000${type.name}`;
    let entry = this.byKey.get(key);
    if (entry === undefined || entry.explicit !== type.schema) {
      entry = isStandardSchema(type.schema)
        ? standardEntry(type, type.schema)
        : { explicit: type.schema, document: this.buildDocument(type) };
      this.byKey.set(key, entry);
    }
    this.byToken.set(type, entry);
    return entry;
  }

  private buildDocument(type: SchemaTypeRef): JsonSchema | undefined {
    const label = `${type.kind} ${type.domain}.${type.name}`;
    let root: unknown;
    let ownDefs: SchemaObject = {};
    if (type.schema !== undefined) {
      if (!isObject(type.schema)) throw new MnemeError("INVALID_REQUEST", `the schema of ${label} must be an object`);
      const converted = convertTo2020_12(type.schema);
      if (isObject(converted.$defs)) ownDefs = converted.$defs;
      const { $schema: _s, $defs: _d, ...rest } = converted;
      root = rest;
    } else {
      if (!this.has(type.name)) return undefined;
      root = this.defs[type.name];
    }
    const lookup = (name: string): unknown =>
      Object.hasOwn(ownDefs, name) ? ownDefs[name] : Object.hasOwn(this.defs, name) ? this.defs[name] : undefined;
    const missing = (name: string) =>
      new MnemeError("INVALID_REQUEST", `the schema of ${label} references "${formatLocalRef(["$defs", name])}", which no $defs holds`);

    root = inlineRoot(root, lookup, missing);
    if (isObject(root)) root = withPropertyTypes(root, lookup);
    const used: SchemaObject = {};
    const pending = [...localDefRefs(root)];
    while (pending.length > 0) {
      const name = pending.pop()!;
      if (Object.hasOwn(used, name)) continue;
      const def = lookup(name);
      if (def === undefined) throw missing(name);
      used[name] = def;
      pending.push(...localDefRefs(def));
    }
    const body = typeof root === "boolean" ? (root ? {} : { not: {} }) : (root as SchemaObject);
    const document: JsonSchema = { $schema: JSON_SCHEMA_2020_12, ...body };
    if (Object.keys(used).length > 0) document.$defs = sortKeys(used);
    return deepFreeze<JsonSchema>(document);
  }

  private compile(document: JsonSchema, type: SchemaTypeRef): PayloadValidator {
    // Equal documents compile to equal validators: share them across registries (every facade of a test run, say).
    const cacheKey = JSON.stringify(document);
    const shared = COMPILED.get(cacheKey);
    if (shared !== undefined) return shared;
    const validator = this.compileNew(document, type);
    if (COMPILED.size >= COMPILED_MAX) COMPILED.delete(COMPILED.keys().next().value!);
    COMPILED.set(cacheKey, validator);
    return validator;
  }

  private compileNew(document: JsonSchema, type: SchemaTypeRef): PayloadValidator {
    const ajv = this.ajv();
    // Unknown formats are annotations: registering them as "always valid" keeps ajv from warning or throwing.
    for (const f of formatsIn(document)) if (ajv.formats[f] === undefined) ajv.addFormat(f, true);
    let fn: ValidateFunction;
    try {
      fn = ajv.compile(document);
    } catch (e) {
      throw new MnemeError(
        "INVALID_REQUEST",
        `the schema of ${type.kind} ${type.domain}.${type.name} does not compile: ${errorMessage(e)}`,
        {
          cause: e,
        },
      );
    }
    return (payload: unknown) => {
      if (typeof payload !== "object" || payload === null || Array.isArray(payload)) {
        return [
          {
            pointer: "",
            message: `must be an object (got ${payload === null ? "null" : Array.isArray(payload) ? "an array" : typeof payload})`,
            keyword: "type",
          },
        ];
      }
      if (fn(payload)) return undefined;
      return toDetails(fn.errors ?? []);
    };
  }

  private ajv(): Ajv2020 {
    // allErrors: a caller fixing a form wants every failing field at once, not the first.
    this.ajvInstance ??= new Ajv2020({ allErrors: true, strict: false, validateFormats: true, formats: { ...FORMAT_CHECKS } });
    return this.ajvInstance;
  }
}

/** Compiled validators by document (JSON), shared by every registry of the process; bounded. */
const COMPILED = new Map<string, PayloadValidator>();
const COMPILED_MAX = 2000;

function readSchemasFile(path: string): unknown {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (e) {
    throw new MnemeError("INVALID_REQUEST", `cannot read schemas file "${path}": ${errorMessage(e)}`, { cause: e });
  }
  try {
    return JSON.parse(text) as unknown;
  } catch (e) {
    throw new MnemeError("INVALID_REQUEST", `schemas file "${path}" is not valid JSON: ${errorMessage(e)}`, { cause: e });
  }
}

const OPTION_KEYS = new Set(["document", "required"]);

/** `{ document?, required? }` rather than a schemas document: no `$defs` / `definitions`, only option keys, at least one. */
function isSchemaOptions(v: unknown): v is SchemaOptions {
  if (!isObject(v) || "$defs" in v || "definitions" in v) return false;
  const keys = Object.keys(v);
  return keys.length > 0 && keys.every((k) => OPTION_KEYS.has(k));
}

function isObject(v: unknown): v is SchemaObject {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/**
 * Follows a root that is only a `$ref` (plus annotations) to its target, so a
 * `type Alias = Other` still serves `type: "object"` and `properties` at the top.
 */
function inlineRoot(root: unknown, lookup: (name: string) => unknown, missing: (name: string) => Error): unknown {
  const seen = new Set<string>();
  let current = root;
  while (isObject(current) && typeof current.$ref === "string" && Object.keys(current).every((k) => k === "$ref" || ANNOTATIONS.has(k))) {
    const tokens = parseLocalRef(current.$ref);
    if (tokens === undefined || tokens.length !== 2 || tokens[0] !== "$defs") break;
    const name = tokens[1]!;
    if (seen.has(name)) break; // a cycle of aliases: keep the $ref, the $defs closure resolves it
    seen.add(name);
    const target = lookup(name);
    if (target === undefined) throw missing(name);
    if (!isObject(target)) break;
    const { $ref: _r, ...annotations } = current;
    current = { ...target, ...annotations };
  }
  return current;
}

/** Calls `visit` with every keyword and value of a schema, skipping the values of data keywords (const, enum, ...). */
function walkSchema(node: unknown, visit: (keyword: string, value: unknown) => void): void {
  if (Array.isArray(node)) {
    for (const n of node) walkSchema(n, visit);
    return;
  }
  if (!isObject(node)) return;
  for (const [k, v] of Object.entries(node)) {
    visit(k, v);
    if (!DATA_KEYWORDS.has(k)) walkSchema(v, visit);
  }
}

/** Names of the `$defs` entries a schema references directly (refs `#/$defs/<name>[/...]`). */
function localDefRefs(schema: unknown): Set<string> {
  const names = new Set<string>();
  walkSchema(schema, (k, v) => {
    if (k !== "$ref" || typeof v !== "string") return;
    const tokens = parseLocalRef(v);
    if (tokens !== undefined && tokens[0] === "$defs" && tokens[1] !== undefined) names.add(tokens[1]);
  });
  return names;
}

function formatsIn(schema: unknown): Set<string> {
  const found = new Set<string>();
  walkSchema(schema, (k, v) => {
    if (k === "format" && typeof v === "string") found.add(v);
  });
  return found;
}

function toDetails(errors: readonly ErrorObject[]): MnemeErrorDetail[] {
  const details: MnemeErrorDetail[] = [];
  const seen = new Set<string>();
  for (const e of errors) {
    const p = e.params as Record<string, unknown>;
    let pointer = e.instancePath;
    let message = e.message ?? `fails "${e.keyword}"`;
    if (e.keyword === "required" || e.keyword === "dependentRequired") {
      pointer = appendPointer(e.instancePath, String(p.missingProperty));
      message = e.keyword === "required" ? "is required" : `is required when "${String(p.property)}" is present`;
    } else if (e.keyword === "additionalProperties" || e.keyword === "unevaluatedProperties") {
      pointer = appendPointer(e.instancePath, String(p.additionalProperty ?? p.unevaluatedProperty));
      message = "is not allowed";
    } else if (e.keyword === "enum" && Array.isArray(p.allowedValues)) {
      message = `must be one of ${p.allowedValues.map((v) => JSON.stringify(v)).join(", ")}`;
    } else if (e.keyword === "const") {
      message = `must be ${JSON.stringify(p.allowedValue)}`;
    }
    const id = `${pointer}\u0000${message}`;
    if (seen.has(id)) continue;
    seen.add(id);
    details.push({ pointer, message, keyword: e.keyword });
  }
  return details;
}

function sortKeys(o: SchemaObject): SchemaObject {
  const out: SchemaObject = {};
  for (const k of Object.keys(o).sort()) out[k] = o[k];
  return out;
}

function deepFreeze<T>(value: T): T {
  if (typeof value === "object" && value !== null && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const v of Object.values(value)) deepFreeze(v);
  }
  return value;
}

/** VALIDATION_FAILED with one detail per failure and a message that lists the first pointers. */
function validationFailed(type: SchemaTypeRef, details: MnemeErrorDetail[]): MnemeError {
  const shown = details.slice(0, MESSAGE_POINTERS).map((d) => `${d.pointer === "" ? "(payload)" : d.pointer} ${d.message}`);
  const more = details.length > MESSAGE_POINTERS ? `; and ${details.length - MESSAGE_POINTERS} more` : "";
  return new MnemeError("VALIDATION_FAILED", `invalid payload for ${type.kind} ${type.domain}.${type.name}: ${shown.join("; ")}${more}`, {
    details,
  });
}

/** A type declared with a Standard Schema: its own check, and the JSON Schema its library offers (if any). */
function standardEntry(type: SchemaTypeRef, schema: StandardSchemaV1): Entry {
  const label = `${type.kind} ${type.domain}.${type.name}`;
  const document = standardJsonSchema(schema, label);
  const check = standardPayloadCheck(schema, label);
  return {
    explicit: schema,
    document: document === undefined ? undefined : deepFreeze<JsonSchema>({ $schema: JSON_SCHEMA_2020_12, ...convertTo2020_12(document) }),
    check,
    validator: (payload) => {
      const details = check(payload);
      if (details instanceof Promise) {
        details.catch(() => undefined);
        throw new MnemeError(
          "INVALID_REQUEST",
          `the ${schema["~standard"].vendor} schema of ${label} validates asynchronously: use validate(), which awaits it`,
        );
      }
      return details;
    },
  };
}
