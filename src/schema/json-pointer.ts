/**
 * JSON Pointer (RFC 6901) helpers for `$ref` fragments and validation details.
 * A `$ref` fragment is a URI fragment: its tokens are pointer-escaped and then
 * percent-encoded, so a generic type name like `Page<Todo>` appears as
 * `#/$defs/Page%3CTodo%3E` while its `$defs` key stays `Page<Todo>`.
 */

/** Escapes one pointer token: `~` -> `~0`, `/` -> `~1`. */
export function escapePointerToken(token: string): string {
  return token.replace(/~/g, "~0").replace(/\//g, "~1");
}

/** Reverses {@link escapePointerToken}. */
export function unescapePointerToken(token: string): string {
  return token.replace(/~1/g, "/").replace(/~0/g, "~");
}

/** Appends one (unescaped) token to a JSON pointer: `appendPointer("/a", "b/c")` is `"/a/b~1c"`. */
export function appendPointer(pointer: string, token: string | number): string {
  return `${pointer}/${escapePointerToken(String(token))}`;
}

/**
 * The tokens of a local `$ref` (`"#/$defs/Page%3CTodo%3E"` -> `["$defs", "Page<Todo>"]`),
 * or `undefined` when the reference is not a local JSON pointer (another document,
 * an anchor). A token that is not valid percent-encoding is taken literally, so
 * refs written without encoding (`#/definitions/Page<Todo>`) are understood too.
 */
export function parseLocalRef(ref: string): string[] | undefined {
  if (ref === "#") return [];
  if (!ref.startsWith("#/")) return undefined;
  return ref
    .slice(2)
    .split("/")
    .map((raw) => unescapePointerToken(decodeFragment(raw)));
}

/** Builds a local `$ref` from unescaped tokens, percent-encoding what a URI fragment may not hold. */
export function formatLocalRef(tokens: readonly string[]): string {
  return tokens.length === 0 ? "#" : `#/${tokens.map((t) => encodeFragment(escapePointerToken(t))).join("/")}`;
}

function decodeFragment(raw: string): string {
  try {
    return decodeURIComponent(raw);
  } catch {
    return raw;
  }
}

// RFC 3986 fragment characters that encodeURIComponent escapes needlessly (sub-delims, ":", "@", "/"
// never occurs here because tokens are pointer-escaped first). Keeping them readable keeps "#/$defs/X".
const FRAGMENT_SAFE = /%(24|26|2B|2C|3B|3D|3A|40)/g;

function encodeFragment(token: string): string {
  return encodeURIComponent(token).replace(FRAGMENT_SAFE, (m) => decodeURIComponent(m));
}
