/**
 * Without Chromium the dashboard's browser tests never vanish in silence: a
 * run skips them with a boxed message on stderr, and under CI=true the run
 * fails instead of skipping.
 */
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { runProcess } from "../support/run-process.js";

const root = fileURLToPath(new URL("../..", import.meta.url));
const vitest = fileURLToPath(new URL("../../node_modules/vitest/vitest.mjs", import.meta.url));

/** The dashboard's e2e file run in a child vitest with no Chromium to find; only its CI probe test selected. */
function runWithoutChromium(ci: string | undefined) {
  const env: NodeJS.ProcessEnv = { ...process.env, CHROMIUM_PATH: "/nonexistent/chromium" };
  if (ci === undefined) delete env.CI;
  else env.CI = ci;
  const args = [vitest, "run", "test/dashboard/dashboard.e2e.test.ts", "-t", "finds Chromium on CI", "--reporter=default"];
  return runProcess(process.execPath, args, root, 120_000, env);
}

describe("the dashboard's browser tests without Chromium", () => {
  it("are skipped loudly: a boxed SKIPPED line on stderr names the file and the remedy", async () => {
    const r = await runWithoutChromium(undefined);
    expect(r.code).toBe(0);
    expect(r.stderr).toContain(
      "! SKIPPED: the browser tests of test/dashboard/dashboard.e2e.test.ts: no Chromium found: set CHROMIUM_PATH",
    );
  }, 150_000);

  it("fail under CI=true instead of skipping", async () => {
    const r = await runWithoutChromium("true");
    expect(r.code).not.toBe(0);
    expect(r.stdout + r.stderr).toContain("no Chromium found");
    expect(r.stderr).not.toContain("! SKIPPED");
  }, 150_000);
});
