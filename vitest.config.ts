import { fileURLToPath } from "node:url";
import { configDefaults, defineConfig } from "vitest/config";

const src = (p: string) => fileURLToPath(new URL(`./src/${p}`, import.meta.url));

export default defineConfig({
  resolve: {
    alias: [
      {
        find: /^mneme\/(sqlite|postgres|http|testing|defaults|store|runtime|reactions|types|memory|store-copy|shards|nats|amqp)$/,
        replacement: src("$1/index.ts"),
      },
      { find: /^mneme$/, replacement: src("index.ts") },
    ],
  },
  test: {
    include: ["test/**/*.test.ts"],
    // The runtime suites run against dist/ under Bun, Deno and Node, by scripts/runtimes-smoke.sh (test/runtimes/vitest.config.ts).
    exclude: [...configDefaults.exclude, "test/runtimes/**"],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // Postgres and SQLite suites each work in their own schema / file, so files may run in parallel.
    fileParallelism: true,
    maxWorkers: 2,
    // On CI, also write a JSON report: .ci/run prints the plain "N passed, N failed" line from it.
    ...(process.env.CI ? { reporters: ["default", "json"], outputFile: { json: ".ci/vitest-report.json" } } : {}),
  },
});
