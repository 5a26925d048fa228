/**
 * A small glob matcher for `mneme schema build --path`. ts-json-schema-generator
 * silently falls back to every file of the tsconfig when its glob matches
 * nothing; matching here first turns a mistyped path into a clear error.
 */
import { readdirSync, statSync } from "node:fs";
import { isAbsolute, join, relative, resolve, sep } from "node:path";

const MAGIC = /[*?[\]{}]/;

/**
 * The files matching `pattern` (relative to `cwd`), sorted, absolute. Supports
 * `*`, `**` (any depth), `?`, `[abc]` and `{a,b}`; like glob, wildcards skip
 * dot entries and `node_modules` is only searched when the pattern names it.
 */
export function matchFiles(pattern: string, cwd: string = process.cwd()): string[] {
  const posix = pattern.split(sep).join("/");
  const absolute = isAbsolute(posix) ? posix : `${resolve(cwd).split(sep).join("/")}/${posix}`;
  const parts = absolute.split("/");
  const firstMagic = parts.findIndex((p) => MAGIC.test(p));
  if (firstMagic === -1) return isFile(absolute) ? [resolve(absolute)] : [];
  const base = parts.slice(0, firstMagic).join("/") || "/";
  const regex = globToRegExp(parts.slice(firstMagic).join("/"));
  const searchNodeModules = posix.includes("node_modules");
  const found: string[] = [];
  const walk = (dir: string): void => {
    let entries;
    try {
      entries = readdirSync(dir, { withFileTypes: true });
    } catch {
      return; // unreadable directory: nothing to match there
    }
    for (const e of entries) {
      if (e.name.startsWith(".") || (e.name === "node_modules" && !searchNodeModules)) continue;
      const full = join(dir, e.name);
      if (e.isDirectory()) walk(full);
      else if (regex.test(relative(base, full).split(sep).join("/"))) found.push(full);
    }
  };
  walk(base);
  return found.sort();
}

function isFile(path: string): boolean {
  try {
    return statSync(path).isFile();
  } catch {
    return false;
  }
}

/** Converts the glob part after the static base to an anchored regular expression. */
export function globToRegExp(glob: string): RegExp {
  let re = "";
  let braces = 0;
  for (let i = 0; i < glob.length; i++) {
    const c = glob[i]!;
    if (c === "*") {
      if (glob[i + 1] === "*") {
        // "**/" matches zero or more directories; a trailing "**" matches anything below.
        const slash = glob[i + 2] === "/";
        re += slash ? "(?:[^/.][^/]*/)*" : ".*";
        i += slash ? 2 : 1;
      } else {
        re += "[^/]*";
      }
    } else if (c === "?") {
      re += "[^/]";
    } else if (c === "[") {
      const end = glob.indexOf("]", i + 1);
      if (end === -1) re += "\\[";
      else {
        const body = glob
          .slice(i + 1, end)
          .replace(/^!/, "^")
          .replace(/\\/g, "\\\\");
        re += `[${body}]`;
        i = end;
      }
    } else if (c === "{") {
      braces++;
      re += "(?:";
    } else if (c === "}" && braces > 0) {
      braces--;
      re += ")";
    } else if (c === "," && braces > 0) {
      re += "|";
    } else {
      re += c.replace(/[.+^$()|\\/]/g, "\\$&");
    }
  }
  return new RegExp(`^${re}$`);
}
