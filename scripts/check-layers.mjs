#!/usr/bin/env node
/**
 * Keeps the layers of src/ one-way (docs/architecture.md, Layers).
 *
 * Reads the imports of every src/**\/*.ts file (static `import ... from`,
 * `export ... from`, `import type`, side-effect `import "..."`, dynamic
 * `import("...")` including `typeof import("...")`), resolves the relative
 * ones to files, and fails
 *   1. on any cycle among files (type-only imports count too), and
 *   2. on an import from a folder to a folder of the same or a higher rank in
 *      RANKS below (a folder may import only itself and lower ranks).
 * Plain Node, no dependency. `--report` prints the findings without failing.
 * Usage: node scripts/check-layers.mjs [--report]
 */
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, resolve, sep } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const SRC = join(ROOT, "src");

/**
 * Rank of each part of src/ (a folder, or a file directly in src/). An import
 * must go to a strictly lower rank or stay inside its own folder.
 */
const RANKS = {
  model: 0, //       types, tokens, defineDomain, errors, clock, context types, permission levels
  store: 1, //       store interfaces and their shared validation
  observability: 1, // OpenTelemetry spans and metrics (loads @opentelemetry/api on demand), W3C trace context
  permissions: 2, // the permission registry, store permissions
  schema: 2, //      schema registry, conversion, validation
  memory: 3, //      subpath mneme/memory: the in-memory stores (and the filesystem DataStore)
  "store-fs": 2.5, // the filesystem DataStore (exported by mneme/memory)
  sqlite: 3, //      subpath mneme/sqlite: the SQLite stores
  postgres: 3, //    subpath mneme/postgres: the Postgres stores
  "store-copy": 3.5, // subpath mneme/store-copy: a whole store copied between SQLite and Postgres (mneme store copy)
  readmodel: 4, //   delivery, restoration, BaseReadmodel, projections, history
  privacy: 4, //     personal data: encryption of personal fields per subject, forget, the Privacy domain
  reactions: 4.5, // subpath mneme/reactions: process managers, reactors, their outbox (built on src/readmodel, listed by the Runtime)
  integration: 4.6, // the broker-neutral publisher of integration events and consumer of messages (outbox handlers)
  nats: 4.7, //      subpath mneme/nats: the NATS JetStream transports
  amqp: 4.7, //      subpath mneme/amqp: the RabbitMQ (amqplib) transports
  runtime: 5, //     the Runtime: introspection, control, metrics, system events, store access
  app: 6, //         createFacade / Facade: the composition root
  shards: 6.5, //    subpath mneme/shards: one facade per shard behind a tenant router, placements, tenant moves
  "index.ts": 7, //  the root export `mneme`
  types: 7, //       subpath mneme/types: type-only names of the definition API
  http: 7.5, //      subpath mneme/http: the HTTP core (generic routes; knows no domain)
  defaults: 8, //    subpath mneme/defaults: the built-in domains and their HTTP route module
  testing: 8, //     subpath mneme/testing
  cli: 9, //         the `mneme` binary (on top: `mneme seed` dispatches the built-in domains' commands)
};

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
    const rf = RANKS[from];
    const rt = RANKS[target];
    if (rf === undefined || rt === undefined) {
      layers.push(`no rank: ${rel(file)}:${line} imports "${spec}" (${from} -> ${target}); add the folder to RANKS`);
    } else if (rt >= rf) {
      layers.push(`up: ${rel(file)}:${line} imports "${spec}" (${from} ${rf} -> ${target} ${rt})`);
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
