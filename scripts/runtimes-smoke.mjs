#!/usr/bin/env node
/**
 * Runs the runtime suites (test/runtimes/) under Bun and Deno (and Node, when
 * asked), each by vitest started with that runtime, against the built package
 * (run `npm run build` first) and the Postgres of DATABASE_URL (default
 * postgres://postgres@127.0.0.1:5432/test). Prints the pass counts per runtime
 * and exits non-zero when a runtime is missing, a suite fails, or a runtime
 * ran no test.
 *
 *   BUN=/path/to/bun DENO=/path/to/deno node scripts/runtimes-smoke.mjs
 *
 * Environment: BUN, DENO (binaries; both required unless RUNTIMES leaves one
 * out), NODE (a Node binary, only for RUNTIMES=node), RUNTIMES (default
 * "bun deno"), DATABASE_URL. Extra arguments go to vitest (e.g. a test file).
 * Plain Node, no dependency.
 */
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const VITEST = join(ROOT, "node_modules", "vitest", "vitest.mjs");
const CONFIG = join("test", "runtimes", "vitest.config.ts");

/** How each runtime starts vitest: Bun with --bun (else its node shim may run Node), Deno with every permission. */
const RUNTIMES = {
  bun: { env: "BUN", args: ["--bun", VITEST] },
  deno: { env: "DENO", args: ["run", "-A", VITEST] },
  node: { env: "NODE", args: [VITEST] },
};

const wanted = (process.env.RUNTIMES ?? "bun deno").split(/[\s,]+/).filter(Boolean);
const extra = process.argv.slice(2);

function fail(message) {
  console.error(`runtimes-smoke: ${message}`);
  process.exit(2);
}

if (!existsSync(join(ROOT, "dist", "index.js"))) fail("dist/ is missing: run `npm run build` first");
for (const name of wanted) {
  const runtime = RUNTIMES[name];
  if (runtime === undefined) fail(`unknown runtime ${JSON.stringify(name)} in RUNTIMES (bun, deno, node)`);
  const bin = process.env[runtime.env];
  if (bin === undefined || bin === "") fail(`${runtime.env} must name the ${name} binary`);
  if (!existsSync(bin)) fail(`${runtime.env}=${bin} does not exist`);
}

const reportDir = mkdtempSync(join(tmpdir(), "mneme-runtimes-"));
const results = [];
try {
  for (const name of wanted) {
    const runtime = RUNTIMES[name];
    const bin = process.env[runtime.env];
    const version = spawnSync(bin, ["--version"], { encoding: "utf8" }).stdout.trim().split("\n")[0] ?? "?";
    const report = join(reportDir, `${name}.json`);
    console.log(`\n== ${name}: ${bin} (${version})`);
    const started = Date.now();
    const run = spawnSync(
      bin,
      [...runtime.args, "run", "--config", CONFIG, "--reporter=default", "--reporter=json", `--outputFile.json=${report}`, ...extra],
      {
        cwd: ROOT,
        stdio: "inherit",
        env: { ...process.env, MNEME_RUNTIME: name, CI: process.env.CI ?? "" },
      },
    );
    const seconds = Math.round((Date.now() - started) / 100) / 10;
    let counts = { passed: 0, failed: 0, skipped: 0, total: 0 };
    if (existsSync(report)) {
      const r = JSON.parse(readFileSync(report, "utf8"));
      counts = { passed: r.numPassedTests, failed: r.numFailedTests, skipped: r.numPendingTests + r.numTodoTests, total: r.numTotalTests };
    }
    const ok = run.status === 0 && counts.failed === 0 && counts.passed > 0;
    results.push({ name, version, seconds, ok, status: run.status ?? run.signal, ...counts });
  }
} finally {
  rmSync(reportDir, { recursive: true, force: true });
}

console.log("\n== runtimes");
for (const r of results) {
  console.log(
    `${r.ok ? "ok  " : "FAIL"} ${r.name} (${r.version}): ${r.passed} passed, ${r.failed} failed, ${r.skipped} skipped of ${r.total} in ${r.seconds} s` +
      (r.ok ? "" : ` (vitest exit ${r.status})`),
  );
}
process.exit(results.every((r) => r.ok) ? 0 : 1);
