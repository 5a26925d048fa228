/**
 * TypeScript types from JSON Schema 2020-12, for the client `mneme client`
 * writes: the payload schemas of an OpenAPI document become type aliases.
 * What TypeScript cannot say (formats, patterns, bounds) is left to the
 * server's validation; what a schema does not constrain is `unknown`.
 */
import type { JsonSchema } from "../model/types.js";

/** Resolves a `$ref` to the TypeScript name of its type; undefined for a reference it does not know (then `unknown`). */
export type RefNamer = (ref: string) => string | undefined;

const IDENTIFIER = /^[A-Za-z_$][A-Za-z0-9_$]*$/;
const MAX_DEPTH = 32;

/** A property key as TypeScript writes it: bare when it is an identifier, else quoted. */
export function propertyKey(key: string): string {
  return IDENTIFIER.test(key) ? key : JSON.stringify(key);
}

/** The TypeScript type of a schema (an expression, to be used as `type X = <it>`). */
export function schemaToTs(schema: JsonSchema | boolean | undefined, refName: RefNamer, indent = ""): string {
  return new Writer(refName).type(schema, indent, 0);
}

class Writer {
  constructor(private readonly refName: RefNamer) {}

  type(schema: unknown, indent: string, depth: number): string {
    if (schema === undefined || schema === true) return "unknown";
    if (schema === false) return "never";
    if (typeof schema !== "object" || schema === null || Array.isArray(schema) || depth > MAX_DEPTH) return "unknown";
    const s = schema as JsonSchema;
    const parts: string[] = [];
    if (typeof s.$ref === "string") parts.push(this.refName(s.$ref) ?? "unknown");
    if ("const" in s) parts.push(literal(s.const));
    else if (Array.isArray(s.enum)) parts.push(s.enum.length === 0 ? "never" : union(s.enum.map(literal)));
    else if (!(typeof s.$ref === "string" && refOnly(s))) {
      const own = this.ownType(s, indent, depth);
      if (own !== undefined) parts.push(own);
    }
    for (const key of ["anyOf", "oneOf"] as const) {
      const list = s[key];
      if (Array.isArray(list) && list.length > 0) parts.push(union(list.map((x) => this.type(x, indent, depth + 1))));
    }
    if (Array.isArray(s.allOf)) for (const x of s.allOf) parts.push(this.type(x, indent, depth + 1));
    const known = parts.filter((p) => p !== "unknown");
    if (known.length === 0) return "unknown";
    return known.length === 1 ? known[0]! : known.map(paren).join(" & ");
  }

  /** The type its `type` keyword (and the keywords that go with it) says; undefined when it has none. */
  private ownType(s: JsonSchema, indent: string, depth: number): string | undefined {
    const declared = s.type;
    const types = Array.isArray(declared) ? (declared as unknown[]) : typeof declared === "string" ? [declared] : [];
    if (types.length === 0) {
      if (isObject(s.properties) || s.additionalProperties !== undefined) return this.object(s, indent, depth);
      if (s.items !== undefined || s.prefixItems !== undefined) return this.array(s, indent, depth);
      return undefined;
    }
    return union(types.map((t) => this.typeOfName(String(t), s, indent, depth)));
  }

  private typeOfName(t: string, s: JsonSchema, indent: string, depth: number): string {
    switch (t) {
      case "string":
        return "string";
      case "number":
      case "integer":
        return "number";
      case "boolean":
        return "boolean";
      case "null":
        return "null";
      case "array":
        return this.array(s, indent, depth);
      case "object":
        return this.object(s, indent, depth);
      default:
        return "unknown";
    }
  }

  private array(s: JsonSchema, indent: string, depth: number): string {
    const prefix = Array.isArray(s.prefixItems) ? s.prefixItems : undefined;
    if (prefix !== undefined) {
      const rest = s.items === false ? [] : [`...${paren(this.type(s.items, indent, depth + 1))}[]`];
      return `[${[...prefix.map((x) => this.type(x, indent, depth + 1)), ...rest].join(", ")}]`;
    }
    return `${paren(this.type(s.items, indent, depth + 1))}[]`;
  }

  private object(s: JsonSchema, indent: string, depth: number): string {
    const props = isObject(s.properties) ? s.properties : {};
    const required = new Set(Array.isArray(s.required) ? s.required.map(String) : []);
    const inner = `${indent}  `;
    const lines: string[] = [];
    for (const [key, value] of Object.entries(props)) {
      const doc = isObject(value) && typeof value.description === "string" ? docComment(value.description, inner) : "";
      lines.push(`${doc}${inner}${propertyKey(key)}${required.has(key) ? "" : "?"}: ${this.type(value, inner, depth + 1)};`);
    }
    const extra = s.additionalProperties;
    const patterns = isObject(s.patternProperties) && Object.keys(s.patternProperties).length > 0;
    if (extra !== false && (extra !== undefined || patterns)) {
      // Declared properties must fit an index signature: with some, the extra ones are `unknown`.
      const value = lines.length > 0 || patterns ? "unknown" : this.type(extra, inner, depth + 1);
      lines.push(`${inner}[key: string]: ${value};`);
    }
    if (lines.length === 0) return extra === false ? "Record<string, never>" : "Record<string, unknown>";
    return `{\n${lines.join("\n")}\n${indent}}`;
  }
}

/**
 * A `$ref` whose siblings say nothing the referenced type does not (`type`, `format`: the schema
 * registry writes them next to a top-level `$ref`): the reference alone is the type.
 */
function refOnly(s: JsonSchema): boolean {
  return s.properties === undefined && s.items === undefined && s.prefixItems === undefined && s.additionalProperties === undefined;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function literal(v: unknown): string {
  if (v === null || typeof v === "string" || typeof v === "number" || typeof v === "boolean") return JSON.stringify(v);
  return "unknown";
}

function union(parts: readonly string[]): string {
  const unique = [...new Set(parts)];
  if (unique.includes("unknown")) return "unknown";
  return unique.join(" | ");
}

/** Wrapped in parentheses when it is a union or an intersection at its top level (before `[]` or `&`). */
function paren(t: string): string {
  let depth = 0;
  let quote: string | undefined;
  for (let i = 0; i < t.length; i++) {
    const c = t[i]!;
    if (quote !== undefined) {
      if (c === "\\") i++;
      else if (c === quote) quote = undefined;
    } else if (c === '"') quote = c;
    else if (c === "{" || c === "[" || c === "(" || c === "<") depth++;
    else if (c === "}" || c === "]" || c === ")" || c === ">") depth--;
    else if (depth === 0 && (c === "|" || c === "&")) return `(${t})`;
  }
  return t;
}

/** A JSDoc comment; `*\/` in the text cannot end it. */
export function docComment(text: string, indent: string): string {
  const lines = text.replace(/\*\//g, "*\\/").split(/\r?\n/);
  if (lines.length === 1) return `${indent}/** ${lines[0]} */\n`;
  return `${indent}/**\n${lines.map((l) => (l === "" ? `${indent} *` : `${indent} * ${l}`)).join("\n")}\n${indent} */\n`;
}
