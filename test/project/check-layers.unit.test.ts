/**
 * scripts/check-layers.mjs fails on an import against the named layers (up,
 * or across two folders of one layer) and on a cycle, and passes a tree
 * whose imports go only downwards: run on small temporary trees (--root).
 */
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it } from "vitest";

const SCRIPT = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "scripts", "check-layers.mjs");
const trees: string[] = [];

/** A temporary tree with the given src/ files (path -> text). */
function tree(files: Record<string, string>): string {
  const root = mkdtempSync(join(tmpdir(), "mneme-layers-"));
  trees.push(root);
  for (const [path, text] of Object.entries(files)) {
    const file = join(root, "src", path);
    mkdirSync(dirname(file), { recursive: true });
    writeFileSync(file, text);
  }
  return root;
}

function check(root: string): { status: number | null; out: string } {
  const r = spawnSync(process.execPath, [SCRIPT, "--root", root], { encoding: "utf8" });
  return { status: r.status, out: r.stdout + r.stderr };
}

afterEach(() => {
  for (const root of trees.splice(0)) rmSync(root, { recursive: true, force: true });
});

describe("check-layers", () => {
  it("passes imports that go downwards or stay in a folder", () => {
    const r = check(
      tree({
        "model/errors.ts": "export const E = 1;\n",
        "store/backend.ts": 'import { E } from "../model/errors.js";\nexport const B = E;\n',
        "app/facade.ts": 'import { B } from "../store/backend.js";\nimport { C } from "./choice.js";\nexport const F = B + C;\n',
        "app/choice.ts": "export const C = 2;\n",
      }),
    );
    expect(r.out).toMatch(/imports against the layers: 0/);
    expect(r.status).toBe(0);
  });

  it("fails on an upward import, naming both layers", () => {
    const r = check(
      tree({
        "model/errors.ts": 'import { F } from "../app/facade.js";\nexport const E = F;\n',
        "app/facade.ts": "export const F = 1;\n",
      }),
    );
    expect(r.status).toBe(1);
    expect(r.out).toMatch(
      /up: src\/model\/errors\.ts:1 imports "\.\.\/app\/facade\.js" \(model in "model" -> app in "composition", above it\)/,
    );
  });

  it("fails on an import across two folders of one layer, and on a folder in no layer", () => {
    const across = check(
      tree({ "memory/a.ts": 'import { S } from "../sqlite/s.js";\nexport const A = S;\n', "sqlite/s.ts": "export const S = 1;\n" }),
    );
    expect(across.status).toBe(1);
    expect(across.out).toMatch(/across: .*memory -> sqlite, both in "engines"/);
    const unknown = check(
      tree({ "nowhere/a.ts": 'import { E } from "../model/e.js";\nexport const A = E;\n', "model/e.ts": "export const E = 1;\n" }),
    );
    expect(unknown.status).toBe(1);
    expect(unknown.out).toMatch(/no layer: .*nowhere -> model/);
  });

  it("fails on a cycle inside a folder", () => {
    const r = check(
      tree({
        "app/a.ts": 'import { B } from "./b.js";\nexport const A = () => B;\n',
        "app/b.ts": 'import type { A } from "./a.js";\nexport const B: typeof A | undefined = undefined;\n',
      }),
    );
    expect(r.status).toBe(1);
    expect(r.out).toMatch(/cycles: 1/);
  });
});
