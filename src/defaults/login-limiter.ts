/**
 * Failed-login limit: at most `maxFailedLogins` attempts per email that are
 * not followed by a success, within each window of `failedLoginWindowMs`,
 * counted in the facade's CacheStore (shared by the instances on one SQLite
 * file or Postgres schema, and kept across their restarts). Keyed by email,
 * not by account, so an unknown email is limited exactly like a known one and
 * the limit reveals nothing.
 */
import { createHash } from "node:crypto";
import { MnemeError } from "../model/errors.js";
import type { DefaultsSettings } from "./settings.js";

const PREFIX = "mneme:defaults:failed-logins:";

/**
 * The counter of the email's current window. Windows are numbered by the
 * settings' clock (so tests can move it), and each has a key of its own, so a
 * new window starts from zero without anyone having to reset the old one.
 */
function keyOf(s: DefaultsSettings, normalizedEmail: string): string {
  return `${PREFIX}${emailKey(normalizedEmail)}:${Math.floor(s.clock() / s.failedLoginWindowNs)}`;
}

/** The cache is readable by administrators; a hash keeps it from listing who tried. */
function emailKey(normalizedEmail: string): string {
  return createHash("sha256").update(normalizedEmail).digest("hex");
}

/**
 * Counts an attempt before the password is checked, in one atomic increment
 * of the shared counter: of any number of attempts at once, on any number of
 * instances, at most `maxFailedLogins` per window get as far as the password.
 * RATE_LIMITED when the email has used up its attempts. Resolves the
 * attempt's number, for {@link noteLoginFailure}.
 */
export async function takeLoginAttempt(s: DefaultsSettings, normalizedEmail: string): Promise<number> {
  // The ttl only lets the store drop the counter once its window is over; the key already ends it.
  const attempt = await s.stores.cacheStore.increment(keyOf(s, normalizedEmail), 1, { ttlMs: s.failedLoginWindowNs / 1e6 });
  if (attempt > s.maxFailedLogins) {
    throw new MnemeError("RATE_LIMITED", "too many failed logins for this email: try again later");
  }
  return attempt;
}

/** After a failed attempt: logs a warning when it was the last one the window allows. */
export async function noteLoginFailure(s: DefaultsSettings, normalizedEmail: string, attempt: number): Promise<void> {
  if (attempt !== s.maxFailedLogins) return;
  await s.stores.logStore
    .append({
      level: "warn",
      source: "mneme.defaults.login",
      message: `failed-login limit reached (${s.maxFailedLogins} within ${s.failedLoginWindowNs / 1e9} s); further attempts are refused until the window ends`,
      data: { emailKey: emailKey(normalizedEmail) },
    })
    .catch(() => undefined);
}

/** Forgets the attempts of an email (after a successful login). */
export async function clearLoginFailures(s: DefaultsSettings, normalizedEmail: string): Promise<void> {
  await s.stores.cacheStore.delete(keyOf(s, normalizedEmail));
}
