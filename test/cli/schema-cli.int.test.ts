import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { Ajv2020 } from "ajv/dist/2020.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildSchemas, buildSchemasWithReport } from "../../src/cli/schema-build.js";
import { isMnemeError } from "../../src/model/errors.js";
import type { JsonSchema } from "../../src/model/types.js";
import { SchemaRegistry } from "../../src/schema/schema-registry.js";
import { type Run, runProcess } from "../support/run-process.js";

const root = fileURLToPath(new URL("../..", import.meta.url));
const fixture = "test/fixtures/schema/todo-types.ts";
const tmp = mkdtempSync(join(tmpdir(), "mneme-schema-cli-"));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

/** Runs the real binary entry point, as a user would through npx. */
function mneme(...args: string[]): Promise<Run> {
  return runProcess("npx", ["tsx", "src/cli/main.ts", ...args], root, 60_000);
}

function refsOf(node: unknown, out: string[] = []): string[] {
  if (Array.isArray(node)) for (const n of node) refsOf(n, out);
  else if (typeof node === "object" && node !== null) {
    for (const [k, v] of Object.entries(node)) {
      if (k === "$ref" && typeof v === "string") out.push(v);
      else refsOf(v, out);
    }
  }
  return out;
}

describe("mneme schema build (real CLI)", () => {
  const out = join(tmp, "nested", "schemas.json");
  let run: Run;
  let doc: { $schema: string; $defs: Record<string, any> };

  beforeAll(async () => {
    // The fixture declares no message: --all-exports selects every exported type.
    run = await mneme("schema", "build", "--tsconfig", "tsconfig.json", "--path", fixture, "--out", out, "--all-exports");
    doc = JSON.parse(readFileSync(out, "utf8"));
  }, 90_000);

  it("exits 0 and reports what it wrote", () => {
    expect(run.stderr.trim()).toBe("");
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(/^mneme: wrote 8 schemas to .*schemas\.json in \d+\.\d s: Priority, Location, CreateTodo, /);
    expect(run.stdout).not.toContain("skipped");
  });

  it("writes a 2020-12 document with $defs for every exported type and nothing else", () => {
    expect(Object.keys(doc)).toEqual(["$schema", "$defs"]);
    expect(doc.$schema).toBe("https://json-schema.org/draft/2020-12/schema");
    expect(Object.keys(doc.$defs).sort()).toEqual([
      "CreateTodo",
      "ListTodos",
      "Location",
      "Page<TodoCreated>",
      "Priority",
      "TodoCreated",
      "TodoList",
      "UsesInternal",
    ]);
    // The non-exported interface is inlined where it is used, not exposed.
    expect(doc.$defs.UsesInternal.properties.inner.properties.secret).toEqual({ type: "string" });
  });

  it("is a valid 2020-12 document: ajv compiles it in strict mode", () => {
    const ajv = new Ajv2020({ strict: true, validateFormats: false });
    expect(() => ajv.compile(doc)).not.toThrow();
  });

  it("has no draft-07 leftovers: no definitions, every ref rewritten and resolvable", () => {
    const text = JSON.stringify(doc);
    expect(text).not.toContain('"definitions"');
    expect(text).not.toContain('"additionalItems"');
    const refs = refsOf(doc);
    expect(refs.length).toBeGreaterThan(0);
    for (const ref of refs) {
      expect(ref).toMatch(/^#\/\$defs\//);
      expect(doc.$defs).toHaveProperty([decodeURIComponent(ref.slice("#/$defs/".length))]);
    }
    expect(doc.$defs.TodoList.properties.page.$ref).toBe("#/$defs/Page%3CTodoCreated%3E");
  });

  it("converts tuples to prefixItems and keeps JSDoc formats and constraints", () => {
    const p = doc.$defs.CreateTodo.properties;
    expect(p.label.prefixItems).toEqual([{ type: "string" }, { type: "number" }]);
    expect(p.label.items).toBeUndefined();
    expect(p.assigneeEmail).toEqual({ type: "string", format: "email" });
    expect(p.dueAt).toEqual({ type: "string", format: "date-time" });
    expect(p.estimateMinutes).toEqual({ type: "number", minimum: 0 });
    expect(p.location).toEqual({ $ref: "#/$defs/Location" });
    expect(p.tags).toEqual({ type: "array", items: { type: "string" } });
    expect(p.priority).toEqual({ $ref: "#/$defs/Priority" });
    expect(doc.$defs.Priority.enum).toEqual(["low", "normal", "high"]);
    expect(doc.$defs.CreateTodo.required).toEqual([
      "todoUuid",
      "title",
      "estimateMinutes",
      "done",
      "assigneeEmail",
      "dueAt",
      "priority",
      "location",
      "tags",
    ]);
  });

  it("feeds SchemaRegistry: standalone documents compile in strict mode and validate payloads", () => {
    const registry = new SchemaRegistry(out);
    const CreateTodo = { kind: "command", domain: "Todo", name: "CreateTodo" } as const;
    const standalone = registry.documentFor(CreateTodo) as JsonSchema & { $defs: object; properties: object };
    expect(Object.keys(standalone.$defs).sort()).toEqual(["Location", "Priority"]);
    for (const [name, prop] of Object.entries<any>(standalone.properties)) expect(prop.type, name).toBeDefined();
    expect(() => new Ajv2020({ strict: true, validateFormats: false }).compile(standalone)).not.toThrow();
    const payload = {
      todoUuid: "t1",
      title: "x",
      estimateMinutes: 1,
      done: false,
      assigneeEmail: "ann@example.com",
      dueAt: "2025-01-01T00:00:00Z",
      priority: "low",
      location: { name: "home", coordinates: [1, 2] },
      tags: [],
    };
    expect(registry.validator(CreateTodo)!(payload)).toBeUndefined();
    const details = registry.validator(CreateTodo)!({ ...payload, assigneeEmail: "nope", location: { name: "home", coordinates: [1] } });
    expect(details?.map((d) => d.pointer).sort()).toEqual(["/assigneeEmail", "/location/coordinates"]);
  });

  it("matches the in-process buildSchemas (same function, deterministic)", async () => {
    expect(await buildSchemas({ tsconfig: "tsconfig.json", path: fixture, cwd: root, allExports: true })).toEqual(doc);
  });
});

describe("mneme schema build --type and errors (real CLI)", () => {
  it("--type limits the output to that type and what it references", async () => {
    const out = join(tmp, "one.json");
    const r = await mneme("schema", "build", "--tsconfig=tsconfig.json", `--path=${fixture}`, `--out=${out}`, "--type", "TodoList");
    expect(r.code).toBe(0);
    const doc = JSON.parse(readFileSync(out, "utf8"));
    expect(Object.keys(doc.$defs).sort()).toEqual(["Page<TodoCreated>", "Priority", "TodoCreated", "TodoList"]);
    expect(doc.$ref).toBeUndefined();
  }, 90_000);

  it("prints help with exit 0", async () => {
    const r = await mneme("--help");
    expect(r.code).toBe(0);
    expect(r.stdout).toContain("mneme schema build --tsconfig <file> --path <glob> --out <file> [--types <a,b>] [--all-exports]");
  }, 90_000);

  it("exits 2 with the usage on usage errors", async () => {
    const cases: [string[], string][] = [
      [[], "no command given"],
      [["schema", "build", "--tsconfig", "tsconfig.json", "--path", fixture], "missing --out"],
      [["schema", "build", "--tsconfig", "tsconfig.json", "--path", fixture, "--out", "x.json", "--bogus"], "--bogus"],
      [["schema", "make"], 'unknown command "schema make"'],
      [["schema", "build", "--tsconfig", "tsconfig.json", "--path", "a.ts", "b.ts", "--out", "x.json"], 'unexpected argument "b.ts"'],
    ];
    const runs = await Promise.all(cases.map(([args]) => mneme(...args)));
    runs.forEach((r, i) => {
      expect(r.code, cases[i]![1]).toBe(2);
      expect(r.stderr).toContain(cases[i]![1]);
      expect(r.stderr).toContain("Usage:");
    });
  }, 90_000);

  it("exits 1 and writes nothing when the build fails", async () => {
    const out = join(tmp, "never.json");
    const [noFiles, noType, noTsconfig] = await Promise.all([
      mneme("schema", "build", "--tsconfig", "tsconfig.json", "--path", "test/fixtures/schema/*.nope", "--out", out),
      mneme("schema", "build", "--tsconfig", "tsconfig.json", "--path", fixture, "--out", out, "--type", "Internal"),
      mneme("schema", "build", "--tsconfig", "missing.json", "--path", fixture, "--out", out),
    ]);
    expect([noFiles.code, noType.code, noTsconfig.code]).toEqual([1, 1, 1]);
    expect(noFiles.stderr).toContain('--path "test/fixtures/schema/*.nope" matches no file');
    expect(noType.stderr).toContain('--types: no exported type "Internal"');
    expect(noTsconfig.stderr).toContain('tsconfig "missing.json" is not a file');
    expect(existsSync(out)).toBe(false);
  }, 90_000);
});

describe("buildSchemas (in process)", () => {
  it("throws INVALID_REQUEST instead of falling back to the whole tsconfig when the glob matches nothing", async () => {
    try {
      await buildSchemas({ tsconfig: "tsconfig.json", path: "test/fixtures/schema/**/*.missing.ts", cwd: root });
      expect.unreachable();
    } catch (e) {
      expect(isMnemeError(e, "INVALID_REQUEST")).toBe(true);
    }
  });
});

describe("mneme schema build: only the types messages use (real CLI)", () => {
  const lending = "test/fixtures/schema/lending/*.ts";

  it("emits the payload types of the commands, queries and events and what they reference, and lists the skipped exports", async () => {
    const out = join(tmp, "lending.json");
    const r = await mneme("schema", "build", "--tsconfig", "tsconfig.json", "--path", lending, "--out", out);
    expect(r.stderr.trim()).toBe("");
    expect(r.code).toBe(0);
    const doc = JSON.parse(readFileSync(out, "utf8"));
    // Query results (Loans) count; Address only because BorrowBook references it.
    expect(Object.keys(doc.$defs).sort()).toEqual(["Address", "BookBorrowed", "BorrowBook", "FindLoans", "Loans"]);
    expect(doc.$defs.BorrowBook.properties.deliverTo).toEqual({ $ref: "#/$defs/Address" });
    expect(r.stdout).toContain("mneme: wrote 5 schemas to ");
    expect(r.stdout).toContain("the payload types of 4 message declarations");
    expect(r.stdout).toContain("mneme: no schema for 1 inline or library type argument: { at: number }");
    expect(r.stdout).toContain("mneme: skipped 3 exports that no command, query or event uses: Librarian, LibraryStats, registerLibrary\n");
    // The registry reads the document as emitted.
    const registry = new SchemaRegistry(out);
    const Borrow = { kind: "command", domain: "Library", name: "BorrowBook" } as const;
    expect(registry.validator(Borrow)!({ bookId: "b", memberId: "m" })).toBeUndefined();
    expect(registry.validator(Borrow)!({ bookId: "b" })?.length).toBeGreaterThan(0);
  }, 90_000);

  it("--types selects exact names (and what they reference); --all-exports every exported type; never classes or functions", async () => {
    const typesOut = join(tmp, "types.json");
    const allOut = join(tmp, "all.json");
    const [types, all] = await Promise.all([
      mneme("schema", "build", "--tsconfig", "tsconfig.json", "--path", lending, "--out", typesOut, "--types", "LibraryStats,BorrowBook"),
      mneme("schema", "build", "--tsconfig", "tsconfig.json", "--path", lending, "--out", allOut, "--all-exports"),
    ]);
    expect([types.code, all.code], types.stderr + all.stderr).toEqual([0, 0]);
    const defs = (f: string) => Object.keys(JSON.parse(readFileSync(f, "utf8")).$defs).sort();
    expect(defs(typesOut)).toEqual(["Address", "BorrowBook", "LibraryStats"]);
    expect(types.stdout).toContain(
      "mneme: skipped 5 exports not selected (classes and functions are never emitted): BookBorrowed, FindLoans, Librarian, Loans, registerLibrary\n",
    );
    expect(defs(allOut)).toEqual(["Address", "BookBorrowed", "BorrowBook", "FindLoans", "LibraryStats", "Loans"]);
    expect(all.stdout).toContain(
      "mneme: skipped 2 exports not selected (classes and functions are never emitted): Librarian, registerLibrary\n",
    );
  }, 90_000);

  it("refuses a class or a function in --types, and a file without messages, with exit 1 and no file written", async () => {
    const out = join(tmp, "refused.json");
    const [klass, fn, none, empty] = await Promise.all([
      mneme("schema", "build", "--tsconfig", "tsconfig.json", "--path", lending, "--out", out, "--types", "Librarian"),
      mneme("schema", "build", "--tsconfig", "tsconfig.json", "--path", lending, "--out", out, "--types", "registerLibrary"),
      mneme("schema", "build", "--tsconfig", "tsconfig.json", "--path", fixture, "--out", out),
      mneme("schema", "build", "--tsconfig", "tsconfig.json", "--path", lending, "--out", out, "--types", "BorrowBook,"),
    ]);
    expect([klass.code, fn.code, none.code, empty.code]).toEqual([1, 1, 1, 2]);
    expect(klass.stderr).toContain('--types: "Librarian" is a class, not a payload type');
    expect(fn.stderr).toContain('--types: "registerLibrary" is a function, not a payload type');
    expect(none.stderr).toContain(`no .command<T>(), .query<T, R>() or .event<T>() call in the files of --path "${fixture}"`);
    expect(none.stderr).toContain("--types or --all-exports");
    expect(empty.stderr).toContain("--types needs comma-separated type names");
    expect(existsSync(out)).toBe(false);
  }, 90_000);

  it("buildSchemasWithReport reports the same in process", async () => {
    const { doc, report } = await buildSchemasWithReport({ tsconfig: "tsconfig.json", path: lending, cwd: root });
    expect(report).toEqual({
      selection: "messages",
      messages: 4,
      roots: ["BorrowBook", "BookBorrowed", "FindLoans", "Loans"],
      unnamed: ["{ at: number }"],
      skipped: ["Librarian", "LibraryStats", "registerLibrary"],
    });
    expect(Object.keys(doc.$defs)).toHaveLength(5);
  }, 90_000);

  it("finds the payload types in files --path does not match (imported by the domain file)", async () => {
    const { doc, report } = await buildSchemasWithReport({
      tsconfig: "tsconfig.json",
      path: "test/fixtures/schema/lending/domain.ts",
      cwd: root,
    });
    expect(Object.keys(doc.$defs).sort()).toEqual(["Address", "BookBorrowed", "BorrowBook", "FindLoans", "Loans"]);
    // domain.ts re-exports types.ts: its unused exports are still reported.
    expect(report.skipped).toEqual(["Librarian", "LibraryStats", "registerLibrary"]);
  }, 90_000);
});
