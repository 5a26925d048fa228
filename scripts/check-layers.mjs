#!/usr/bin/env node
/**
 * Keeps the layers of src/ one-way (docs/architecture.md, Layers).
 *
 * Reads the imports of every src/**\/*.ts file (static `import ... from`,
 * `export ... from`, `import type`, side-effect `import "..."`, dynamic
 * `import("...")` including `typeof import("...")`), resolves the relative
 * ones to files, and fails
 *   1. on any cycle among files (type-only imports count too), and
 *   2. on an import from a folder to a folder of the same or a higher layer
 *      in LAYERS below (a folder may import only itself and lower layers).
 * Plain Node, no dependency. `--report` prints the findings without failing;
 * `--root <dir>` checks the src/ of another tree (the test of this script).
 * Usage: node scripts/check-layers.mjs [--report] [--root <dir>]
 */
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, resolve, sep } from "node:path";
import { fileURLToPath } from "node:url";

/**
 * The layers of src/, from the ground floor up: each has a name and its
 * parts (a folder, or a file directly in src/). An import must go to a part
 * of a lower layer or stay inside its own folder: parts of one layer do not
 * import each other. Add a folder to the layer it belongs to; a new layer
 * goes between the two it sits between.
 */
const LAYERS = [
  ["model", ["model"]], //                        types, tokens, defineDomain, errors, clock, context types, permission levels
  ["store contracts", ["store", "observability"]], // store interfaces, engine capabilities and their shared validation; spans and metrics
  ["registries", ["permissions", "schema"]], //   the permission registry and store permissions; schema registry, conversion, validation
  ["file storage", ["store-fs", "event-archive"]], // the filesystem DataStore (exported by mneme/memory); archive files of old events
  ["engines", ["memory", "sqlite", "postgres"]], // one folder per database: mneme/memory, mneme/sqlite, mneme/postgres
  ["store copy", ["store-copy"]], //              mneme/store-copy: a whole store copied between SQLite and Postgres
  ["read side", ["readmodel", "privacy"]], //     delivery, restoration, BaseReadmodel, projections, history; personal data, forget
  ["reactions", ["reactions"]], //                mneme/reactions: process managers, reactors, their outbox (on the read side)
  ["messaging", ["integration"]], //              the broker-neutral publisher of integration events and consumer of messages
  ["transports", ["nats", "amqp"]], //            mneme/nats, mneme/amqp
  ["runtime", ["runtime"]], //                    the Runtime: introspection, control, metrics, system events, store access
  ["composition", ["app"]], //                    createFacade / Facade: the composition root
  ["shards", ["shards"]], //                      mneme/shards: one facade per shard behind a tenant router, placements, tenant moves
  ["exports", ["index.ts", "types"]], //          the root export `mneme`; mneme/types
  ["edges", ["http"]], //                         mneme/http: the HTTP core (generic routes; knows no domain)
  ["built-ins", ["defaults", "testing"]], //      mneme/defaults (built-in domains, their routes), mneme/testing
  ["tooling", ["cli"]], //                        the `mneme` binary (`mneme seed` dispatches the built-in domains' commands)
];

/** The layer of each part: its name and its place from the ground floor (0). */
const LAYER_OF = new Map(LAYERS.flatMap(([name, parts], level) => parts.map((part) => [part, { name, level }])));

/** The source tree checked: src/ of the repository, or `--root <dir>` (a tree with a src/ folder). */
const rootAt = process.argv.indexOf("--root");
const ROOT = rootAt < 0 ? resolve(dirname(fileURLToPath(import.meta.url)), "..") : resolve(process.argv[rootAt + 1] ?? ".");
const SRC = join(ROOT, "src");

function listTs(dir) {
  const out = [];
  for (const name of readdirSync(dir).sort()) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) out.push(...listTs(p));
    else if (name.endsWith(".ts") && !name.endsWith(".d.ts")) out.push(p);
  }
  return out;
}

/** Source without comments; strings and template literals are kept. */
function stripComments(text) {
  let out = "";
  let i = 0;
  let quote = null; // ' " or `
  while (i < text.length) {
    const c = text[i];
    const n = text[i + 1];
    if (quote !== null) {
      out += c;
      if (c === "\\") {
        out += n ?? "";
        i += 2;
        continue;
      }
      if (c === quote || (c === "\n" && quote !== "`")) quote = null;
      i++;
      continue;
    }
    if (c === "/" && n === "/") {
      while (i < text.length && text[i] !== "\n") i++;
      continue;
    }
    if (c === "/" && n === "*") {
      const end = text.indexOf("*/", i + 2);
      const stop = end < 0 ? text.length : end + 2;
      out += text.slice(i, stop).replace(/[^\n]/g, " ");
      i = stop;
      continue;
    }
    if (c === "'" || c === '"' || c === "`") quote = c;
    out += c;
    i++;
  }
  return out;
}

const STATIC = /(?:^|[\n;])\s*(?:import|export)\s+(?:type\s+)?[^;"'`]*?\bfrom\s*(["'])([^"']+)\1/g;
const SIDE_EFFECT = /(?:^|[\n;])\s*import\s*(["'])([^"']+)\1/g;
const DYNAMIC = /\bimport\s*\(\s*(["'])([^"']+)\1\s*\)/g;

/** The module specifiers a file imports, with the line of each. */
function importsOf(text) {
  const code = stripComments(text);
  const found = [];
  for (const re of [STATIC, SIDE_EFFECT, DYNAMIC]) {
    re.lastIndex = 0;
    for (let m; (m = re.exec(code)) !== null;) {
      const at = m.index + m[0].lastIndexOf(m[2]);
      found.push({ spec: m[2], line: code.slice(0, at).split("\n").length });
    }
  }
  return found;
}

/** The .ts file a relative specifier names, or undefined. */
function resolveSpec(fromFile, spec) {
  if (!spec.startsWith(".")) return undefined;
  const base = resolve(dirname(fromFile), spec);
  const candidates = [base.replace(/\.(m?js)$/, (_m, ext) => (ext === "mjs" ? ".mts" : ".ts")), base, `${base}.ts`, join(base, "index.ts")];
  return candidates.find((c) => c.endsWith(".ts") && existsSync(c) && statSync(c).isFile());
}

const rel = (p) => relative(ROOT, p).split(sep).join("/");
/** The part of src/ a file belongs to: its first folder, or its own name. */
const partOf = (file) => relative(SRC, file).split(sep)[0];

const files = listTs(SRC);
const edges = new Map(); // file -> [{ to, line, spec }]
const problems = [];
for (const file of files) {
  const list = [];
  for (const { spec, line } of importsOf(readFileSync(file, "utf8"))) {
    if (!spec.startsWith(".")) continue;
    const to = resolveSpec(file, spec);
    if (to === undefined) {
      problems.push(`unresolved: ${rel(file)}:${line} imports "${spec}"`);
      continue;
    }
    list.push({ to, line, spec });
  }
  edges.set(file, list);
}

// 1. cycles: strongly connected components (Tarjan), then one loop through each.
const index = new Map();
const low = new Map();
const onStack = new Set();
const stack = [];
const components = [];
let counter = 0;
function strongConnect(v) {
  index.set(v, counter);
  low.set(v, counter);
  counter++;
  stack.push(v);
  onStack.add(v);
  for (const { to } of edges.get(v) ?? []) {
    if (!index.has(to)) {
      strongConnect(to);
      low.set(v, Math.min(low.get(v), low.get(to)));
    } else if (onStack.has(to)) {
      low.set(v, Math.min(low.get(v), index.get(to)));
    }
  }
  if (low.get(v) === index.get(v)) {
    const comp = [];
    let w;
    do {
      w = stack.pop();
      onStack.delete(w);
      comp.push(w);
    } while (w !== v);
    const selfLoop = (edges.get(v) ?? []).some((e) => e.to === v);
    if (comp.length > 1 || selfLoop) components.push(comp);
  }
}
for (const f of files) if (!index.has(f)) strongConnect(f);

/** A shortest loop from `start` back to itself inside `comp`. */
function loopThrough(start, comp) {
  const inComp = new Set(comp);
  const prev = new Map([[start, null]]);
  const queue = [start];
  while (queue.length > 0) {
    const v = queue.shift();
    for (const { to } of edges.get(v) ?? []) {
      if (to === start) {
        const path = [v];
        for (let p = prev.get(v); p !== null; p = prev.get(p)) path.unshift(p);
        return [...path, start];
      }
      if (inComp.has(to) && !prev.has(to)) {
        prev.set(to, v);
        queue.push(to);
      }
    }
  }
  return [start, start];
}

const cycles = [];
for (const comp of components) {
  comp.sort();
  cycles.push(`cycle of ${comp.length} file(s): ${comp.map(rel).join(", ")}\n    e.g. ${loopThrough(comp[0], comp).map(rel).join(" -> ")}`);
}

// 2. layers
const layers = [];
for (const [file, list] of edges) {
  const from = partOf(file);
  for (const { to, line, spec } of list) {
    const target = partOf(to);
    if (target === from) continue;
    const lf = LAYER_OF.get(from);
    const lt = LAYER_OF.get(target);
    if (lf === undefined || lt === undefined) {
      layers.push(`no layer: ${rel(file)}:${line} imports "${spec}" (${from} -> ${target}); add the folder to a layer of LAYERS`);
    } else if (lt.level > lf.level) {
      layers.push(`up: ${rel(file)}:${line} imports "${spec}" (${from} in "${lf.name}" -> ${target} in "${lt.name}", above it)`);
    } else if (lt.level === lf.level) {
      layers.push(`across: ${rel(file)}:${line} imports "${spec}" (${from} -> ${target}, both in "${lf.name}")`);
    }
  }
}

const report = process.argv.includes("--report");
const count = [...edges.values()].reduce((n, l) => n + l.length, 0);
console.log(`check-layers: ${files.length} files, ${count} relative imports`);
for (const line of problems) console.log(line);
console.log(`cycles: ${cycles.length}`);
for (const line of cycles) console.log(`  ${line}`);
console.log(`imports against the layers: ${layers.length}`);
for (const line of layers.sort()) console.log(`  ${line}`);
const failed = problems.length + cycles.length + layers.length > 0;
if (failed && !report) process.exitCode = 1;
