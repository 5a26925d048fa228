#!/usr/bin/env node
/**
 * Builds the Runtime dashboard's static assets (docs/dashboard.md) into
 * dist/dashboard/, where `createHttpHandler(facade, { dashboard: true })`
 * serves them from: the TypeScript modules of dashboard/src compiled by tsc
 * for the browser (dashboard/tsconfig.json, no bundler), plus index.html,
 * dashboard.css and favicon.svg as they are. The folder is emptied first, so
 * nothing stale is served. Part of `npm run build`.
 * Usage: node scripts/build-dashboard.mjs [--out <dir>]
 */
import { spawnSync } from "node:child_process";
import { copyFileSync, existsSync, mkdirSync, readdirSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const SOURCE = join(ROOT, "dashboard");
const STATIC_FILES = ["index.html", "dashboard.css", "favicon.svg"];

const args = process.argv.slice(2);
const outIndex = args.indexOf("--out");
if (outIndex !== -1 && args[outIndex + 1] === undefined) {
  console.error("build-dashboard: --out needs a directory");
  process.exit(2);
}
const out = resolve(outIndex === -1 ? join(ROOT, "dist", "dashboard") : args[outIndex + 1]);

rmSync(out, { recursive: true, force: true });
mkdirSync(out, { recursive: true });

const tsc = createRequire(import.meta.url).resolve("typescript/bin/tsc");
const compiled = spawnSync(process.execPath, [tsc, "-p", join(SOURCE, "tsconfig.json"), "--outDir", join(out, "js")], {
  cwd: ROOT,
  stdio: "inherit",
});
if (compiled.status !== 0) {
  console.error("build-dashboard: tsc failed");
  process.exit(compiled.status ?? 1);
}
for (const f of STATIC_FILES) copyFileSync(join(SOURCE, f), join(out, f));
if (!existsSync(join(out, "js", "main.js"))) {
  console.error("build-dashboard: js/main.js was not written");
  process.exit(1);
}
const count = readdirSync(out, { recursive: true }).length;
console.log(`build-dashboard: ${count} files in ${out}`);
