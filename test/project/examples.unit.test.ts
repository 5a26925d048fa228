import { describe, expect, it } from "vitest";
import { main as readmodelExample } from "../../examples/readmodels/open-todos.js";

describe("examples/readmodels (docs/readmodels.md)", () => {
  it("counts open todos, restores to the same count, and serves history", async () => {
    const r = await readmodelExample();
    expect(r).toEqual({
      open: 2,
      afterRestore: 2,
      replayed: 4,
      history: ["1:TodoCreated by i", "2:TodoCompleted by i"],
    });
  });
});

describe("the README example", () => {
  it("is the README's code and runs", async () => {
    const { readFileSync, mkdtempSync, rmSync } = await import("node:fs");
    const { join } = await import("node:path");
    const { tmpdir } = await import("node:os");
    const readme = readFileSync(new URL("../../README.md", import.meta.url), "utf8");
    const example = readFileSync(new URL("../../examples/readme/readme-example.ts", import.meta.url), "utf8");
    const [, lines, block] = /## A whole app in (\d+) lines\n\n```ts\n([\s\S]*?)```/.exec(readme)!;
    // The heading says how long the example is.
    expect(block!.split("\n").length - 1).toBe(Number(lines));
    const body = example.split("\n").slice(1).join("\n").replace('process.env.MNEME_README_DB ?? "todo.db"', '"todo.db"');
    expect(body).toBe(block!);
    const dir = mkdtempSync(join(tmpdir(), "mneme-readme-"));
    process.env.MNEME_README_DB = join(dir, "todo.db");
    const logs: unknown[] = [];
    const log = console.log;
    console.log = (...a: unknown[]) => void logs.push(a[0]);
    try {
      // Twice on one file, as a user runs it twice: the second run must not fail (it restarts on the durable file).
      const example = "../../examples/readme/readme-example.js";
      await import(`${example}?first`);
      await import(`${example}?second`);
    } finally {
      console.log = log;
      rmSync(dir, { recursive: true, force: true });
    }
    expect(logs).toHaveLength(8);
    for (const run of [logs.slice(0, 4), logs.slice(4)]) {
      expect(run[0]).toMatchObject({ tenantUuid: "t", model: { exists: true, title: "Ship it" }, version: 1 });
      expect(run[0]).not.toHaveProperty("historyEvents");
      expect(run[1]).toBeUndefined(); // another tenant does not see it
      expect((run[2] as { historyEvents: unknown[] }).historyEvents).toHaveLength(1);
      expect(run[3]).toEqual(
        expect.arrayContaining([expect.objectContaining({ domain: "Todo", domainCmdName: "CreateTodo", permission: "Authorized" })]),
      );
    }
  });
});
