import type { Facade } from "../app/facade.js";
import type { RequestContext } from "../model/types.js";
import type { HeaderReader } from "./exchange.js";

/** What a client presents: the two halves of its session token and, optionally, the identity it acts as. */
export interface Credentials {
  sessionUuid: string;
  sessionKey: string;
  identityUuid?: string;
}

/**
 * Turns presented credentials into the sender part of a RequestContext;
 * `undefined` means the credentials are not valid (unknown or expired session,
 * wrong key, identity not of this account).
 */
export type CredentialResolver = (facade: Facade, credentials: Credentials) => Promise<RequestContext | undefined>;

/**
 * What the request carried: nothing, something unusable (a malformed header,
 * a token the resolver rejected), or a resolved sender, with where its session
 * token came from (a cookie is sent by the browser by itself: see the CSRF check).
 */
export type Authentication =
  | { readonly state: "none"; readonly reqCtx: RequestContext }
  | { readonly state: "invalid"; readonly reqCtx: RequestContext; readonly reason: string }
  | { readonly state: "valid"; readonly reqCtx: RequestContext; readonly via: "header" | "cookie" };

const MAX_PART = 512;
const BEARER = /^\s*Bearer\s+(\S+)\s*$/i;

/**
 * Reads credentials from `Authorization: Bearer <sessionUuid>.<sessionKey>`
 * plus `X-Identity-Uuid`, else from the cookies `session` and `identity`.
 * Returns a string (the reason) when something was presented but cannot be used.
 */
export function readCredentials(headers: HeaderReader): Credentials | string | undefined {
  const authorization = headers.get("authorization");
  const identityHeader = headers.get("x-identity-uuid");
  // The cookies are parsed only when a header leaves something to them.
  let cookies: Map<string, string> | undefined;
  let token: string | undefined;
  if (authorization !== null) {
    const m = BEARER.exec(authorization);
    if (m === null) return "the Authorization header must be `Bearer <sessionUuid>.<sessionKey>`";
    token = m[1];
  } else {
    cookies = parseCookies(headers.get("cookie"));
    token = cookies.get("session");
  }
  const identity = identityHeader ?? (cookies ?? parseCookies(headers.get("cookie"))).get("identity");
  if (token === undefined) {
    return identity === undefined ? undefined : "an identity was given without a session token";
  }
  const dot = token.indexOf(".");
  if (dot <= 0 || dot === token.length - 1) return "a session token is `<sessionUuid>.<sessionKey>`";
  const sessionUuid = token.slice(0, dot);
  const sessionKey = token.slice(dot + 1);
  if (sessionUuid.length > MAX_PART || sessionKey.length > MAX_PART) return "the session token is too long";
  if (identity !== undefined && (identity.trim() === "" || identity.length > MAX_PART)) return "the identity must be a non-empty id";
  return identity === undefined ? { sessionUuid, sessionKey } : { sessionUuid, sessionKey, identityUuid: identity.trim() };
}

/** Cookie header -> name/value map; values are percent-decoded where that is valid. */
export function parseCookies(header: string | null): Map<string, string> {
  const out = new Map<string, string>();
  if (header === null) return out;
  for (const part of header.split(";")) {
    const eq = part.indexOf("=");
    if (eq < 0) continue;
    const name = part.slice(0, eq).trim();
    let value = part.slice(eq + 1).trim();
    if (value.startsWith('"') && value.endsWith('"') && value.length >= 2) value = value.slice(1, -1);
    if (name === "" || out.has(name)) continue;
    try {
      out.set(name, decodeURIComponent(value));
    } catch {
      out.set(name, value);
    }
  }
  return out;
}

/** A `Set-Cookie` value. */
export function serializeCookie(
  name: string,
  value: string,
  opts: { secure: boolean; sameSite: string; path: string; maxAgeSeconds?: number; httpOnly?: boolean },
): string {
  let c = `${name}=${encodeURIComponent(value)}; Path=${opts.path}; SameSite=${opts.sameSite}`;
  if (opts.httpOnly !== false) c += "; HttpOnly";
  if (opts.secure) c += "; Secure";
  if (opts.maxAgeSeconds !== undefined) c += `; Max-Age=${opts.maxAgeSeconds}`;
  return c;
}
