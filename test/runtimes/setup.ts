/**
 * Every runtime suite first checks that it runs where scripts/runtimes-smoke.sh
 * said (MNEME_RUNTIME = bun, deno or node): vitest's workers could otherwise be
 * a spawned Node while the run claims Bun or Deno.
 */
import { currentRuntime, runtimeVersion } from "./runtime.js";

const expected = process.env.MNEME_RUNTIME;
if (expected !== "bun" && expected !== "deno" && expected !== "node")
  throw new Error(`MNEME_RUNTIME must be bun, deno or node (got ${String(expected)}): run test/runtimes through scripts/runtimes-smoke.sh`);
if (currentRuntime() !== expected) throw new Error(`expected to run on ${expected}, but this test file runs on ${runtimeVersion()}`);
