import { MnemeError } from "../model/errors.js";

/** What matching a request gives: a route with its decoded path parameters, the methods a known path allows, or nothing. */
export type RouteMatch<T> =
  | { readonly kind: "found"; readonly value: T; readonly params: Readonly<Record<string, string>> }
  | { readonly kind: "method-not-allowed"; readonly allow: readonly string[] }
  | { readonly kind: "not-found" };

interface Entry<T> {
  method: string;
  segments: readonly string[];
  /** Per segment: the parameter's name, or undefined where the segment is literal (worked out once, not per request). */
  names: readonly (string | undefined)[];
  value: T;
}

const MAX_SEGMENT = 1024;

/**
 * A small path router: patterns like `/api/tenants/:tenantUuid/runtime/schema`,
 * exact segment counts, literal segments before parameters. Path segments are
 * percent-decoded; a malformed escape is INVALID_REQUEST.
 */
export class Router<T> {
  /** Entries by segment count (a pattern matches paths of its own count only), each list in the order added. */
  readonly #bySize = new Map<number, Entry<T>[]>();

  /** Adds a route; a second route of the same method and pattern is a programming error. */
  add(method: string, pattern: string, value: T): this {
    const segments = pattern.split("/").slice(1);
    let entries = this.#bySize.get(segments.length);
    if (entries === undefined) this.#bySize.set(segments.length, (entries = []));
    if (entries.some((e) => e.method === method && e.segments.join("/") === segments.join("/"))) {
      throw new Error(`route ${method} ${pattern} is defined twice`);
    }
    entries.push({ method, segments, names: segments.map((p) => (p.startsWith(":") ? p.slice(1) : undefined)), value });
    return this;
  }

  /** Matches a method and a (still percent-encoded) pathname. */
  match(method: string, pathname: string): RouteMatch<T> {
    const segments = splitPath(pathname);
    const entries = segments === undefined ? undefined : this.#bySize.get(segments.length);
    if (segments === undefined || entries === undefined) return NOT_FOUND;
    let allow: Set<string> | undefined;
    for (const e of entries) {
      const params = matchSegments(e, segments);
      if (params === undefined) continue;
      if (e.method === method) return { kind: "found", value: e.value, params };
      (allow ??= new Set()).add(e.method);
    }
    return allow === undefined ? NOT_FOUND : { kind: "method-not-allowed", allow: [...allow].sort() };
  }
}

const NOT_FOUND = Object.freeze({ kind: "not-found" as const });

function splitPath(pathname: string): string[] | undefined {
  if (!pathname.startsWith("/")) return undefined;
  let p = pathname.slice(1);
  if (p.endsWith("/")) p = p.slice(0, -1);
  // Decoded in place: the split's own array is the result.
  const out = p.split("/");
  for (let i = 0; i < out.length; i++) {
    const s = out[i]!;
    if (s.length > MAX_SEGMENT * 3) throw new MnemeError("INVALID_REQUEST", "a path segment is too long");
    let d: string;
    try {
      d = s.includes("%") ? decodeURIComponent(s) : s;
    } catch {
      throw new MnemeError("INVALID_REQUEST", `malformed percent-encoding in the path segment ${JSON.stringify(s.slice(0, 100))}`);
    }
    if (d.length > MAX_SEGMENT) throw new MnemeError("INVALID_REQUEST", "a path segment is too long");
    out[i] = d;
  }
  return out;
}

/** The parameters of `segments` when they match the entry's pattern; the literals are compared first, so a miss allocates nothing. */
function matchSegments(entry: Entry<unknown>, segments: readonly string[]): Record<string, string> | undefined {
  const { segments: pattern, names } = entry;
  if (pattern.length !== segments.length) return undefined;
  for (let i = 0; i < pattern.length; i++) {
    if (names[i] === undefined ? pattern[i] !== segments[i] : segments[i] === "") return undefined;
  }
  const params: Record<string, string> = {};
  for (let i = 0; i < names.length; i++) {
    const name = names[i];
    if (name !== undefined) params[name] = segments[i]!;
  }
  return params;
}
