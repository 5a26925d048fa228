import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { globToRegExp, matchFiles } from "../../src/cli/match-files.js";

const dir = mkdtempSync(join(tmpdir(), "mneme-match-files-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
for (const f of [
  "a.ts",
  "b.ts",
  "c.js",
  "sub/d.ts",
  "sub/deep/e.ts",
  "sub/deep/f.tsx",
  ".hidden/g.ts",
  "node_modules/pkg/h.ts",
  "x[1].ts",
]) {
  mkdirSync(join(dir, f, ".."), { recursive: true });
  writeFileSync(join(dir, f), "export {};\n");
}
const rel = (files: string[]) => files.map((f) => relative(dir, f));

describe("matchFiles", () => {
  it("matches *, **, ?, [..] and {a,b} relative to cwd, sorted", () => {
    expect(rel(matchFiles("*.ts", dir))).toEqual(["a.ts", "b.ts", "x[1].ts"]);
    expect(rel(matchFiles("**/*.ts", dir))).toEqual(["a.ts", "b.ts", "sub/d.ts", "sub/deep/e.ts", "x[1].ts"]);
    expect(rel(matchFiles("sub/**/*.{ts,tsx}", dir))).toEqual(["sub/d.ts", "sub/deep/e.ts", "sub/deep/f.tsx"]);
    expect(rel(matchFiles("?.ts", dir))).toEqual(["a.ts", "b.ts"]);
    expect(rel(matchFiles("[a].ts", dir))).toEqual(["a.ts"]);
    expect(rel(matchFiles("[!a].ts", dir))).toEqual(["b.ts"]);
  });

  it("takes a plain path literally, absolute or relative, and gives [] for nothing", () => {
    expect(rel(matchFiles("sub/d.ts", dir))).toEqual(["sub/d.ts"]);
    expect(rel(matchFiles(join(dir, "a.ts")))).toEqual(["a.ts"]);
    expect(matchFiles("sub", dir)).toEqual([]); // a directory is not a file
    expect(matchFiles("*.nope", dir)).toEqual([]);
    expect(matchFiles("missing/**/*.ts", dir)).toEqual([]);
  });

  it("skips dot directories and node_modules unless the pattern names node_modules", () => {
    expect(rel(matchFiles("**/g.ts", dir))).toEqual([]);
    expect(rel(matchFiles("**/h.ts", dir))).toEqual([]);
    expect(rel(matchFiles("node_modules/**/*.ts", dir))).toEqual(["node_modules/pkg/h.ts"]);
  });
});

describe("globToRegExp", () => {
  it("escapes regex characters and keeps * within one segment", () => {
    expect(globToRegExp("a.b+c(d).ts").test("a.b+c(d).ts")).toBe(true);
    expect(globToRegExp("a.ts").test("abts")).toBe(false);
    expect(globToRegExp("*.ts").test("dir/a.ts")).toBe(false);
    expect(globToRegExp("**").test("dir/a.ts")).toBe(true);
  });
});
