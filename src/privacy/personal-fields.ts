/**
 * The protected fields of a payload, named by JSON pointers (RFC 6901): read
 * one, and replace values in a copy that shares every untouched part with the
 * original (the caller's payload is never changed).
 */

/** The tokens of a JSON pointer ("/a/b~1c" -> ["a", "b/c"]). */
export function pointerTokens(pointer: string): string[] {
  return pointer
    .slice(1)
    .split("/")
    .map((t) => t.replace(/~1/g, "/").replace(/~0/g, "~"));
}

function isContainer(v: unknown): v is Record<string, unknown> | unknown[] {
  return typeof v === "object" && v !== null;
}

/** The child of a container by one token; undefined when absent (an array takes decimal indexes only). */
function childOf(parent: unknown, token: string): unknown {
  if (Array.isArray(parent)) return /^(0|[1-9][0-9]*)$/.test(token) ? parent[Number(token)] : undefined;
  if (!isContainer(parent)) return undefined;
  return Object.hasOwn(parent, token) ? (parent as Record<string, unknown>)[token] : undefined;
}

/** The value at `tokens` in `root`, or undefined when the path does not exist. */
export function valueAt(root: unknown, tokens: readonly string[]): unknown {
  let v = root;
  for (const t of tokens) {
    v = childOf(v, t);
    if (v === undefined) return undefined;
  }
  return v;
}

/**
 * `root` with the value at `tokens` replaced by `value`: the containers along
 * the path are copied, everything else is shared. The path must exist (see valueAt).
 */
export function replaceAt(root: unknown, tokens: readonly string[], value: unknown): unknown {
  if (tokens.length === 0) return value;
  const [head, ...rest] = tokens as [string, ...string[]];
  const next = replaceAt(childOf(root, head), rest, value);
  if (Array.isArray(root)) {
    const copy = [...(root as unknown[])];
    copy[Number(head)] = next;
    return copy;
  }
  return { ...(root as Record<string, unknown>), [head]: next };
}

/**
 * `root` with `fn` applied to every value it holds, depth first, in a copy
 * that shares unchanged parts: `fn` returns the replacement, or undefined to
 * keep the value and look inside it.
 */
export function mapValues(root: unknown, fn: (v: unknown) => unknown): unknown {
  const replaced = fn(root);
  if (replaced !== undefined) return replaced;
  if (!isContainer(root)) return root;
  if (Array.isArray(root)) {
    let copy: unknown[] | undefined;
    root.forEach((item, i) => {
      const next = mapValues(item, fn);
      if (next !== item) (copy ??= [...root])[i] = next;
    });
    return copy ?? root;
  }
  let copy: Record<string, unknown> | undefined;
  for (const [k, item] of Object.entries(root)) {
    const next = mapValues(item, fn);
    if (next !== item) (copy ??= { ...root })[k] = next;
  }
  return copy ?? root;
}
