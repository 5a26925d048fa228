/**
 * The designed public surface: the root holds at most 60 names (counted in
 * src/index.ts, types included), every subpath in package.json has an
 * index.ts that starts with a comment naming it and its one purpose, no name
 * is exported by two subpaths, and the names that left the root are found in
 * the subpath that now holds them.
 */
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";

const read = (path: string): string => readFileSync(new URL(`../../${path}`, import.meta.url), "utf8");

/** The exported names of an index.ts (`export { a, type B } from` and `export type { C } from`). */
function exportedNames(text: string): string[] {
  const names: string[] = [];
  for (const m of text.matchAll(/export (?:type )?\{([^}]*)\}/g)) {
    for (const part of m[1]!.split(",")) {
      const p = part.trim().replace(/^type /, "");
      if (p !== "") names.push(p.split(" as ").at(-1)!.trim());
    }
  }
  return names;
}

const pkg = JSON.parse(read("package.json")) as { exports: Record<string, unknown> };
const subpaths = Object.keys(pkg.exports).filter((k) => k !== "./package.json");
const indexOf = (subpath: string) => (subpath === "." ? "src/index.ts" : `src/${subpath.slice(2)}/index.ts`);

describe("the public surface", () => {
  it("the root exports at most 60 names, and no store class, handler internal or Facade class", async () => {
    const names = exportedNames(read("src/index.ts"));
    expect(names.length).toBeLessThanOrEqual(60);
    const root = await import("mneme");
    expect(Object.keys(root).length).toBeLessThanOrEqual(names.length);
    for (const gone of ["Facade", "MemoryEventRepository", "FilesystemDataStore", "BaseEventHandler"])
      expect(root).not.toHaveProperty(gone);
    expect(typeof root.createFacade).toBe("function");
  });

  it("every subpath's index.ts starts with a comment naming the subpath and its purpose", () => {
    for (const subpath of subpaths) {
      const text = read(indexOf(subpath));
      const name = subpath === "." ? "mneme" : `mneme/${subpath.slice(2)}`;
      expect({ subpath, head: text.trimStart().slice(0, 3) }).toEqual({ subpath, head: "/**" });
      expect(text.slice(0, 200), subpath).toContain(`\`${name}\`:`);
    }
  });

  it("no name is exported by two subpaths (the root's Runtime and SystemEvent types are mneme/runtime's)", () => {
    const seen = new Map<string, string>();
    const twice: string[] = [];
    // mneme/store's StoreInfo is the record type, mneme/runtime's the query token answering it.
    const allowed = new Set(["Runtime: . and ./runtime", "SystemEvent: . and ./runtime", "StoreInfo: ./store and ./runtime"]);
    for (const subpath of subpaths) {
      for (const n of exportedNames(read(indexOf(subpath)))) {
        const before = seen.get(n);
        const pair = `${n}: ${before} and ${subpath}`;
        if (before !== undefined && before !== subpath && !allowed.has(pair)) twice.push(pair);
        seen.set(n, subpath);
      }
    }
    expect(twice).toEqual([]);
  });

  it("the names that left the root are in their subpaths", async () => {
    const memory = await import("mneme/memory");
    const reactions = await import("mneme/reactions");
    expect(typeof memory.MemoryEventRepository).toBe("function");
    expect(typeof memory.FilesystemDataStore).toBe("function");
    expect(typeof reactions.BaseEventHandler).toBe("function");
    expect(exportedNames(read("src/types/index.ts"))).toEqual(
      expect.arrayContaining(["CommandOptions", "AggregateLoader", "ReadmodelFacade"]),
    );
    expect(exportedNames(read("src/runtime/index.ts"))).toEqual(
      expect.arrayContaining(["EventHandlerInfo", "RestoreReport", "SystemInfo"]),
    );
  });
});
