/**
 * Gives every top-level property of a served schema a `type` (and the `format`
 * it resolves to), as schema discovery promises (spec 2.9), even when the
 * generator wrote the property as a `$ref` or a union. The copied keywords sit
 * next to the `$ref`, which 2020-12 applies together: the constraint is unchanged.
 */
import { parseLocalRef } from "./json-pointer.js";

type SchemaObject = { [key: string]: unknown };
type Lookup = (defName: string) => unknown;

const TYPE_ORDER = ["object", "array", "string", "number", "integer", "boolean", "null"];

function isObject(v: unknown): v is SchemaObject {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/**
 * A copy of `root` whose `properties` entries each carry a `type` (and `format`)
 * wherever one can be derived through `$ref`s, unions, `enum` and `const`.
 * Properties that already have a `type`, and underivable ones, are left as they are.
 */
export function withPropertyTypes(root: SchemaObject, lookup: Lookup): SchemaObject {
  if (!isObject(root.properties)) return root;
  let changed = false;
  const properties: SchemaObject = {};
  for (const [name, prop] of Object.entries(root.properties)) {
    properties[name] = prop;
    if (!isObject(prop) || prop.type !== undefined) continue;
    const types = deriveTypes(prop, lookup, new Set());
    if (types === undefined || types.length === 0) continue;
    const format = prop.format === undefined ? deriveFormat(prop, lookup, new Set()) : undefined;
    properties[name] = { ...prop, type: types.length === 1 ? types[0] : types, ...(format === undefined ? {} : { format }) };
    changed = true;
  }
  return changed ? { ...root, properties } : root;
}

function target(schema: SchemaObject, lookup: Lookup, seen: Set<string>): unknown {
  if (typeof schema.$ref !== "string") return undefined;
  const tokens = parseLocalRef(schema.$ref);
  if (tokens?.length !== 2 || tokens[0] !== "$defs" || seen.has(tokens[1]!)) return undefined;
  seen.add(tokens[1]!);
  return lookup(tokens[1]!);
}

function deriveTypes(schema: unknown, lookup: Lookup, seen: Set<string>): string[] | undefined {
  if (!isObject(schema)) return undefined;
  if (typeof schema.type === "string") return [schema.type];
  if (Array.isArray(schema.type)) return schema.type.filter((t): t is string => typeof t === "string");
  if (schema.$ref !== undefined) return deriveTypes(target(schema, lookup, seen), lookup, seen);
  if (Array.isArray(schema.enum)) return union(schema.enum.map(jsonType));
  if ("const" in schema) return [jsonType(schema.const)];
  for (const key of ["anyOf", "oneOf"] as const) {
    const branches = schema[key];
    if (!Array.isArray(branches)) continue;
    const all: string[] = [];
    for (const b of branches) {
      // Each branch gets its own cycle guard: siblings may share a $defs entry.
      const t = deriveTypes(b, lookup, new Set(seen));
      if (t === undefined) return undefined; // one unknown branch: the property's type is unknown
      all.push(...t);
    }
    return union(all);
  }
  if (Array.isArray(schema.allOf)) {
    for (const b of schema.allOf) {
      const t = deriveTypes(b, lookup, new Set(seen));
      if (t !== undefined) return t;
    }
  }
  return undefined;
}

function deriveFormat(schema: unknown, lookup: Lookup, seen: Set<string>): string | undefined {
  if (!isObject(schema)) return undefined;
  if (typeof schema.format === "string") return schema.format;
  return schema.$ref === undefined ? undefined : deriveFormat(target(schema, lookup, seen), lookup, seen);
}

function jsonType(v: unknown): string {
  if (v === null) return "null";
  if (Array.isArray(v)) return "array";
  return typeof v === "number" ? "number" : typeof v === "boolean" ? "boolean" : typeof v === "string" ? "string" : "object";
}

function union(types: string[]): string[] {
  const set = new Set(types);
  // "integer" is within "number": keep the wider one only.
  if (set.has("number")) set.delete("integer");
  return TYPE_ORDER.filter((t) => set.has(t));
}
