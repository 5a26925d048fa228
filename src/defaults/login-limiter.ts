/**
 * Failed-login limit: at most `maxFailedLogins` failures per email within a
 * window, counted in the facade's CacheStore (shared between instances when
 * the cache is). Keyed by email, not by account, so an unknown email is
 * limited exactly like a known one and the limit reveals nothing.
 */
import { createHash } from "node:crypto";
import { MnemeError } from "../model/errors.js";
import type { DefaultsState, LoginStores } from "./defaults-state.js";

interface Window {
  /** ns: when the window's first failure happened. */
  start: number;
  failures: number;
}

const PREFIX = "mneme:defaults:failed-logins:";

function keyOf(normalizedEmail: string): string {
  // The cache is readable by administrators; a hash keeps it from listing who tried.
  return PREFIX + createHash("sha256").update(normalizedEmail).digest("hex");
}

async function current(facade: LoginStores, state: DefaultsState, key: string): Promise<Window | undefined> {
  const w = await facade.cacheStore.get<Window>(key);
  if (w === undefined || typeof w.start !== "number" || typeof w.failures !== "number") return undefined;
  return state.clock() - w.start >= state.failedLoginWindowNs ? undefined : w;
}

/**
 * RATE_LIMITED when the email has used up its failures in the current window.
 * Callers serialise check / fail per email (the Login command locks the email's claim aggregate).
 */
export async function assertLoginAllowed(facade: LoginStores, state: DefaultsState, normalizedEmail: string): Promise<void> {
  const w = await current(facade, state, keyOf(normalizedEmail));
  if (w !== undefined && w.failures >= state.maxFailedLogins) {
    throw new MnemeError("RATE_LIMITED", "too many failed logins for this email: try again later");
  }
}

/** Counts one failure; logs a warning when the limit is reached. */
export async function noteLoginFailure(facade: LoginStores, state: DefaultsState, normalizedEmail: string): Promise<void> {
  const key = keyOf(normalizedEmail);
  const w = (await current(facade, state, key)) ?? { start: state.clock(), failures: 0 };
  const next: Window = { start: w.start, failures: w.failures + 1 };
  const windowMs = state.failedLoginWindowNs / 1e6;
  const ttlMs = Math.min(windowMs, Math.max(1, Math.ceil(windowMs - (state.clock() - w.start) / 1e6)));
  await facade.cacheStore.set(key, next, { ttlMs });
  if (next.failures === state.maxFailedLogins) {
    await facade.logStore.append({
      level: "warn", source: "mneme.defaults.login",
      message: `failed-login limit reached (${state.maxFailedLogins} within ${state.failedLoginWindowNs / 1e9} s); further attempts are refused until the window ends`,
      data: { emailKey: key.slice(PREFIX.length) },
    }).catch(() => undefined);
  }
}

/** Forgets the failures of an email (after a successful login). */
export async function clearLoginFailures(facade: LoginStores, normalizedEmail: string): Promise<void> {
  await facade.cacheStore.delete(keyOf(normalizedEmail));
}
