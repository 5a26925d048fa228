/**
 * Keeps docs/testing.md and the Collections section of docs/readmodels.md
 * honest: their examples live in examples/testing/ and run here, and every
 * ts block of those pages must be code of those files (line by line,
 * indentation aside).
 */
import { readdirSync, readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { backendContracts } from "../../examples/testing/backend-contracts.test-example.js";
import { todoBoardTests, todoCommandTests } from "../../examples/testing/todo.test-example.js";

todoCommandTests();
todoBoardTests();
backendContracts();

const read = (path: string): string => readFileSync(new URL(`../../${path}`, import.meta.url), "utf8");

/** The ts code blocks of a markdown text. */
function tsBlocks(markdown: string): string[] {
  return [...markdown.matchAll(/```ts\n([\s\S]*?)```/g)].map((m) => m[1]!);
}

/** Lines without their indentation and trailing blanks. */
const lines = (text: string): string[] => text.split("\n").map((l) => l.trim());

/** True when the block's lines occur one after another in the file. */
function occursIn(block: string, file: string): boolean {
  const b = lines(block).filter((l, i, all) => l !== "" || (i > 0 && i < all.length - 1));
  const f = lines(file);
  for (let i = 0; i + b.length <= f.length; i++) {
    if (b.every((l, k) => f[i + k] === l)) return true;
  }
  return false;
}

describe("docs/testing.md and the Collections section of docs/readmodels.md", () => {
  const examples = readdirSync(new URL("../../examples/testing/", import.meta.url))
    .filter((f) => f.endsWith(".ts"))
    .map((f) => read(`examples/testing/${f}`));
  const collections = /\n## Collections\n([\s\S]*?)(?=\n## |$)/.exec(read("docs/readmodels.md"))?.[1];
  const pages = { "docs/testing.md": read("docs/testing.md"), "docs/readmodels.md#collections": collections ?? "" };

  it("docs/readmodels.md has a Collections section", () => {
    expect(collections).toBeDefined();
  });

  for (const [page, text] of Object.entries(pages)) {
    it(`every ts block of ${page} is code of examples/testing/`, () => {
      const blocks = tsBlocks(text);
      expect(blocks.length).toBeGreaterThan(0);
      const missing = blocks.filter((b) => !examples.some((e) => occursIn(b, e)));
      expect(missing).toEqual([]);
    });
  }

  it("every repository path named in docs/testing.md exists", async () => {
    const { existsSync } = await import("node:fs");
    const paths = [...read("docs/testing.md").matchAll(/\b((?:src|test|examples|docs)\/[\w./-]*\w)/g)].map((m) => m[1]!);
    expect(paths.length).toBeGreaterThan(0);
    expect(paths.filter((p) => !existsSync(new URL(`../../${p}`, import.meta.url)))).toEqual([]);
  });
});
