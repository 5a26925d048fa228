/**
 * draft-07 -> JSON Schema 2020-12, for the output of ts-json-schema-generator
 * (and hand-written draft-07 schemas). Pure: the input is never modified.
 */
import type { JsonSchema } from "../model/types.js";
import { formatLocalRef, parseLocalRef } from "./json-pointer.js";

/** The `$schema` URI of the 2020-12 dialect, as every mneme schema document names it. */
export const JSON_SCHEMA_2020_12 = "https://json-schema.org/draft/2020-12/schema";

type Json = unknown;
type SchemaObject = { [key: string]: Json };

// Keywords whose value is one schema, an array of schemas, or a map of name -> schema.
// Everything else (enum, const, default, examples, ...) is data and is copied untouched.
const SCHEMA_KEYWORDS = new Set([
  "additionalItems",
  "additionalProperties",
  "contains",
  "not",
  "if",
  "then",
  "else",
  "propertyNames",
  "unevaluatedItems",
  "unevaluatedProperties",
  "contentSchema",
  "items",
]);
const SCHEMA_ARRAY_KEYWORDS = new Set(["allOf", "anyOf", "oneOf", "prefixItems"]);
const SCHEMA_MAP_KEYWORDS = new Set(["properties", "patternProperties", "definitions", "$defs", "dependentSchemas"]);

/**
 * Converts a draft-07 schema to 2020-12: `definitions` -> `$defs` (at every level),
 * every local `$ref` rewritten to follow (`#/definitions/Foo%3Cstring%3E` ->
 * `#/$defs/Foo%3Cstring%3E`, also pointers through tuples), tuple `items: [...]`
 * -> `prefixItems` with `additionalItems` -> `items`, `dependencies` ->
 * `dependentRequired` / `dependentSchemas`, and the root `$schema` set to 2020-12.
 * A 2020-12 schema comes back equal (refs normalised to their encoded form).
 * @example
 * const doc = convertTo2020_12(createGenerator(config).createSchema("*"));
 */
export function convertTo2020_12(schema: JsonSchema): JsonSchema {
  const converted = convertNode(schema, schema) as SchemaObject;
  const { $schema: _old, ...rest } = converted;
  return { $schema: JSON_SCHEMA_2020_12, ...rest };
}

function isObject(v: Json): v is SchemaObject {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function convertNode(node: Json, root: JsonSchema): Json {
  if (!isObject(node)) return node; // boolean schemas and malformed values pass through
  const out: SchemaObject = {};
  const tuple = Array.isArray(node.items);
  for (const [key, value] of Object.entries(node)) {
    if (key === "$ref" && typeof value === "string") {
      out.$ref = rewriteRef(value, root);
    } else if (key === "definitions" || key === "$defs") {
      // Both may occur in a half-converted document; an explicit $defs entry wins.
      const target = (out.$defs ?? {}) as SchemaObject;
      const converted = convertMap(value, root);
      if (!isObject(converted)) {
        out[key] = converted; // malformed: keep it for the caller's own validation to report
        continue;
      }
      out.$defs = key === "$defs" ? { ...target, ...converted } : { ...converted, ...target };
    } else if (key === "items" && tuple) {
      out.prefixItems = (value as Json[]).map((s) => convertNode(s, root));
      if ("additionalItems" in node) out.items = convertNode(node.additionalItems, root);
    } else if (key === "additionalItems") {
      // Only meaningful next to a tuple `items`, where it became `items` above; draft-07 ignores it otherwise.
      continue;
    } else if (key === "dependencies" && isObject(value)) {
      for (const [prop, dep] of Object.entries(value)) {
        const bucket = Array.isArray(dep) ? "dependentRequired" : "dependentSchemas";
        const target = (out[bucket] ??= {}) as SchemaObject;
        target[prop] = Array.isArray(dep) ? [...dep] : convertNode(dep, root);
      }
    } else if (SCHEMA_KEYWORDS.has(key)) {
      out[key] = convertNode(value, root);
    } else if (SCHEMA_ARRAY_KEYWORDS.has(key) && Array.isArray(value)) {
      out[key] = value.map((s) => convertNode(s, root));
    } else if (SCHEMA_MAP_KEYWORDS.has(key)) {
      out[key] = convertMap(value, root);
    } else {
      out[key] = cloneData(value);
    }
  }
  return out;
}

function convertMap(value: Json, root: JsonSchema): SchemaObject | Json {
  if (!isObject(value)) return cloneData(value);
  const out: SchemaObject = {};
  for (const [name, s] of Object.entries(value)) out[name] = convertNode(s, root);
  return out;
}

function cloneData(value: Json): Json {
  if (Array.isArray(value)) return value.map(cloneData);
  if (isObject(value)) {
    const out: SchemaObject = {};
    for (const [k, v] of Object.entries(value)) out[k] = cloneData(v);
    return out;
  }
  return value;
}

/**
 * Rewrites a local ref by walking its pointer through the ORIGINAL document, so each
 * token is known to be a keyword or a name: a property called "definitions" or
 * "items" is left alone, while the keywords are renamed. Refs to other documents
 * are kept as they are.
 */
function rewriteRef(ref: string, root: JsonSchema): string {
  const tokens = parseLocalRef(ref);
  if (tokens === undefined) return ref;
  const out: string[] = [];
  let node: Json = root;
  let i = 0;
  while (i < tokens.length) {
    const keyword = tokens[i]!;
    const parent: Json = node;
    const value: Json = isObject(parent) ? parent[keyword] : undefined;
    if (!isObject(parent) || value === undefined) {
      out.push(...tokens.slice(i)); // dangling or into data: keep the rest verbatim
      break;
    }
    if (keyword === "definitions" || keyword === "$defs" || SCHEMA_MAP_KEYWORDS.has(keyword) || keyword === "dependencies") {
      const name = tokens[i + 1];
      const renamed =
        keyword === "definitions"
          ? "$defs"
          : keyword === "dependencies" && name !== undefined && isObject(value) && !Array.isArray(value[name])
            ? "dependentSchemas"
            : keyword === "dependencies"
              ? "dependentRequired"
              : keyword;
      out.push(renamed);
      if (name === undefined) break;
      out.push(name);
      node = isObject(value) ? value[name] : undefined;
      i += 2;
    } else if (keyword === "items" && Array.isArray(value)) {
      out.push("prefixItems");
      const index = tokens[i + 1];
      if (index === undefined) break;
      out.push(index);
      node = value[Number(index)];
      i += 2;
    } else if (keyword === "additionalItems") {
      out.push(Array.isArray(parent.items) ? "items" : keyword);
      node = value;
      i += 1;
    } else if (SCHEMA_ARRAY_KEYWORDS.has(keyword) && Array.isArray(value)) {
      out.push(keyword);
      const index = tokens[i + 1];
      if (index === undefined) break;
      out.push(index);
      node = value[Number(index)];
      i += 2;
    } else {
      out.push(keyword);
      node = value;
      i += 1;
    }
  }
  return formatLocalRef(out);
}
