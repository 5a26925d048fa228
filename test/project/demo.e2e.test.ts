import { execFile } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, describe, expect, it } from "vitest";

const run = promisify(execFile);
const dir = mkdtempSync(join(tmpdir(), "mneme-demo-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

async function demo(): Promise<string> {
  const { stdout } = await run("npx", ["tsx", "examples/todo/main.ts"], {
    env: { ...process.env, MNEME_DEMO_DB: join(dir, "demo.db") },
    timeout: 60_000,
  });
  return stdout;
}

describe("npm run demo", () => {
  it("runs on SQLite, and a second run restores from the checkpoint instead of replaying from zero", async () => {
    const first = await demo();
    expect(first).toContain("first run: TodoProjection built from position 0");
    expect(first).toContain("CreateTodo   -> TodoCreated (the todo's version 1, position 1)");
    expect(first).toContain("anonymous CreateTodo is denied: PERMISSION_DENIED");
    expect(first).toContain("history: TodoCreated > TodoRenamed > TodoCompleted");
    expect(first).toContain("RenameTodo from another tenant is refused: NOT_FOUND");
    expect(first).toContain("GetTodo from another tenant -> undefined");
    const second = await demo();
    expect(second).toContain("restored TodoProjection from its checkpoint at position 3: replayed 0 event(s)");
    expect(second).toContain("CreateTodo   -> TodoCreated (the todo's version 1, position 4)");
    expect(second).toContain("ListTodos    -> 2 todo(s) in this tenant");
  }, 120_000);
});
