/**
 * Failed-login limit: at most `maxFailedLogins` failures per email within a
 * window, counted in the facade's CacheStore (shared by the instances on one
 * SQLite file or Postgres schema, and kept across their restarts). Keyed by email, not by account, so an unknown email is
 * limited exactly like a known one and the limit reveals nothing.
 */
import { createHash } from "node:crypto";
import { MnemeError } from "../model/errors.js";
import type { DefaultsSettings } from "./settings.js";

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

async function current(s: DefaultsSettings, key: string): Promise<Window | undefined> {
  const w = await s.stores.cacheStore.get<Window>(key);
  if (w === undefined || typeof w.start !== "number" || typeof w.failures !== "number") return undefined;
  return s.clock() - w.start >= s.failedLoginWindowNs ? undefined : w;
}

/**
 * RATE_LIMITED when the email has used up its failures in the current window.
 * Callers serialise check / fail per email (the Login command locks the email's claim aggregate).
 */
export async function assertLoginAllowed(s: DefaultsSettings, normalizedEmail: string): Promise<void> {
  const w = await current(s, keyOf(normalizedEmail));
  if (w !== undefined && w.failures >= s.maxFailedLogins) {
    throw new MnemeError("RATE_LIMITED", "too many failed logins for this email: try again later");
  }
}

/** Counts one failure; logs a warning when the limit is reached. */
export async function noteLoginFailure(s: DefaultsSettings, normalizedEmail: string): Promise<void> {
  const key = keyOf(normalizedEmail);
  const w = (await current(s, key)) ?? { start: s.clock(), failures: 0 };
  const next: Window = { start: w.start, failures: w.failures + 1 };
  const windowMs = s.failedLoginWindowNs / 1e6;
  const ttlMs = Math.min(windowMs, Math.max(1, Math.ceil(windowMs - (s.clock() - w.start) / 1e6)));
  await s.stores.cacheStore.set(key, next, { ttlMs });
  if (next.failures === s.maxFailedLogins) {
    await s.stores.logStore
      .append({
        level: "warn",
        source: "mneme.defaults.login",
        message: `failed-login limit reached (${s.maxFailedLogins} within ${s.failedLoginWindowNs / 1e9} s); further attempts are refused until the window ends`,
        data: { emailKey: key.slice(PREFIX.length) },
      })
      .catch(() => undefined);
  }
}

/** Forgets the failures of an email (after a successful login). */
export async function clearLoginFailures(s: DefaultsSettings, normalizedEmail: string): Promise<void> {
  await s.stores.cacheStore.delete(keyOf(normalizedEmail));
}
