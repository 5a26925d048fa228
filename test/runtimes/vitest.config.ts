/**
 * The runtime suites (test/runtimes/): run by scripts/runtimes-smoke.sh under
 * Bun, Deno and Node, against the built package (`npm run build` first).
 * `mneme/*` resolves to dist/, and dist/ is loaded by the runtime itself (not
 * transformed by Vite), as an application's node_modules/mneme would be.
 */
import { fileURLToPath } from "node:url";
import { defineConfig } from "vitest/config";

const root = fileURLToPath(new URL("../..", import.meta.url));
const dist = (p: string) => fileURLToPath(new URL(`../../dist/${p}`, import.meta.url));

export default defineConfig({
  root,
  resolve: {
    alias: [
      {
        find: /^mneme\/(sqlite|postgres|http|testing|defaults|store|runtime|reactions|types|memory|store-copy|shards|nats|amqp)$/,
        replacement: dist("$1/index.js"),
      },
      { find: /^mneme$/, replacement: dist("index.js") },
    ],
  },
  test: {
    include: ["test/runtimes/**/*.test.ts"],
    setupFiles: ["test/runtimes/setup.ts"],
    // Each test file in a child process of the runtime running vitest (its execPath): Bun's and Deno's worker threads are not Node's.
    pool: "forks",
    maxWorkers: 2,
    testTimeout: 30_000,
    hookTimeout: 60_000,
    server: { deps: { external: [/\/dist\//] } },
  },
});
