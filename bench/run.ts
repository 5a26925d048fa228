/**
 * `npm run bench [-- name ...]`: runs every bench/*.bench.ts (or the named ones).
 * BENCH_QUICK=1 shrinks the sizes (for a smoke run).
 */
import { readdirSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { Bench } from "./harness.js";

const dir = fileURLToPath(new URL(".", import.meta.url));
const only = process.argv.slice(2);
const files = readdirSync(dir)
  .filter((f) => f.endsWith(".bench.ts"))
  .filter((f) => only.length === 0 || only.some((o) => f.startsWith(o)))
  .sort();

const bench = new Bench(process.env.BENCH_QUICK === "1");
console.log(`mneme bench  node ${process.version}  ${new Date().toISOString()}  quick=${bench.quick}`);
for (const f of files) {
  console.log(`\n## ${f}`);
  const mod = (await import(new URL(f, `file://${dir}`).href)) as { default: (b: Bench) => Promise<void> };
  await mod.default(bench);
}
