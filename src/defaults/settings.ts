/**
 * The settings of the built-in domains in one facade: `registerDefaults`
 * resolves them from its options once and passes them as a parameter to each
 * domain's install step, readmodel, authorizer and bootstrap. Nothing here is
 * module state: two facades (or two copies of this module) share nothing.
 */
import { nowNs } from "../model/clock.js";
import { MnemeError } from "../model/errors.js";
import type { CacheStore } from "../store/cache-store.js";
import type { LogStore } from "../store/log-store.js";
import { adminAccountUuidOf, identityUuidOf, normalizeEmail, systemAdminGroupUuidOf, systemTenantUuidOf } from "./ids.js";
import { checkPasswordPolicy, checkScryptParams, DEFAULT_SCRYPT, type ScryptParams } from "./password.js";

/** Options of `registerDefaults`. Only `admin` is required. */
export interface DefaultsOptions {
  /** The first system administrator, created on the first start (later starts leave the account as it is). */
  readonly admin: { readonly email: string; readonly password: string; readonly name?: string };
  /** Name of the system tenant. Default "system". */
  readonly systemTenantName?: string;
  /** Lifetime of a session from login. Default 24 h. */
  readonly sessionTtlMs?: number;
  /**
   * HMAC key of stored session-key hashes (at least 16 characters). Default: derived from the app name.
   * Session keys are 256 random bits, so the hash cannot be reversed either way; a secret key also keeps
   * someone who can write the store from minting a valid key. Changing it ends every session.
   */
  readonly sessionSecret?: string;
  /** scrypt parameters of new password hashes. Default N=2^15, r=8, p=1 (recorded with each hash). */
  readonly passwordHashing?: Partial<ScryptParams>;
  /** Login attempts per email within a window of `failedLoginWindowMs` (a success clears them) before further attempts are refused. Default 5. */
  readonly maxFailedLogins?: number;
  /** The failed-login window (windows are counted from the epoch by `clock`). Default 60 000 (one minute). */
  readonly failedLoginWindowMs?: number;
  /** The clock, in ns since the epoch (session expiry, login limits). Default `nowNs`; tests pass a fake one. */
  readonly clock?: () => number;
}

/** What `registerDefaults` resolves with: ids derived from the app name and the admin email. */
export interface DefaultsInfo {
  readonly systemTenantUuid: string;
  readonly adminAccountUuid: string;
  readonly adminIdentityUuid: string;
  readonly systemAdminGroupUuid: string;
}

/** @internal The resolved settings and in-process state of one facade's built-in domains. */
export interface DefaultsSettings extends DefaultsInfo {
  readonly appName: string;
  readonly systemTenantName: string;
  readonly sessionTtlNs: number;
  readonly sessionSecret: string;
  readonly scrypt: Required<ScryptParams>;
  readonly maxFailedLogins: number;
  readonly failedLoginWindowNs: number;
  readonly clock: () => number;
  /** The facade's stores the login limiter counts in and logs to. */
  readonly stores: LoginStores;
  /** The key of the keyed hash that derives email claim ids (kept in the facade's key store). */
  readonly emailIndexKey: () => Promise<Uint8Array>;
  /** True while instances of 0.1.0 run beside this release (the store admits them): new email claims use the legacy id they find. */
  readonly claimsForOldReaders: () => boolean;
}

/** What the settings need of the facade's personal data protection: mneme's own keys. */
export interface SystemKeys {
  systemKey(name: string): Promise<Uint8Array>;
}

/** Where failed logins are counted (CacheStore) and the limit is logged (LogStore). */
export interface LoginStores {
  readonly cacheStore: CacheStore;
  readonly logStore: LogStore;
}

/** The first administrator, as the bootstrap needs it (held only until the bootstrap has run). */
export interface AdminCredentials {
  readonly email: string;
  readonly password: string;
  readonly name: string;
}

function positiveInt(name: string, v: number | undefined, fallback: number, max: number): number {
  if (v === undefined) return fallback;
  if (!Number.isInteger(v) || v < 1 || v > max)
    throw new MnemeError("INVALID_REQUEST", `registerDefaults: ${name} must be an integer in 1..${max} (got ${String(v)})`);
  return v;
}

/** Validates the options once and derives the ids: the settings, and the admin's credentials for the bootstrap. */
export function resolveDefaultsSettings(
  facade: { readonly appName: string; readonly personalData: SystemKeys; readonly rollingFrom?: string | undefined } & LoginStores,
  opts: DefaultsOptions,
): { settings: DefaultsSettings; admin: AdminCredentials } {
  if (typeof opts !== "object" || opts === null || typeof opts.admin !== "object" || opts.admin === null) {
    throw new MnemeError("INVALID_REQUEST", "registerDefaults: options { admin: { email, password } } are required");
  }
  const email = normalizeEmail(opts.admin.email);
  checkPasswordPolicy(opts.admin.password, "admin.password");
  const name = opts.admin.name ?? "";
  if (typeof name !== "string" || name.length > 200)
    throw new MnemeError("INVALID_REQUEST", "registerDefaults: admin.name must be a string of at most 200 characters");
  const tenantName = opts.systemTenantName ?? "system";
  if (typeof tenantName !== "string" || tenantName.trim() === "" || tenantName.length > 200) {
    throw new MnemeError("INVALID_REQUEST", "registerDefaults: systemTenantName must be a non-empty string of at most 200 characters");
  }
  const secret = opts.sessionSecret ?? `mneme-session-key:${facade.appName}`;
  if (typeof secret !== "string" || secret.length < 16)
    throw new MnemeError("INVALID_REQUEST", "registerDefaults: sessionSecret must be a string of at least 16 characters");
  if (opts.clock !== undefined && typeof opts.clock !== "function")
    throw new MnemeError("INVALID_REQUEST", "registerDefaults: clock must be a function returning ns");
  const scrypt = checkScryptParams({ ...DEFAULT_SCRYPT, ...opts.passwordHashing });

  const appName = facade.appName;
  const systemTenantUuid = systemTenantUuidOf(appName);
  const adminAccountUuid = adminAccountUuidOf(appName, email);
  const settings: DefaultsSettings = {
    appName,
    systemTenantUuid,
    adminAccountUuid,
    adminIdentityUuid: identityUuidOf(systemTenantUuid, adminAccountUuid),
    systemAdminGroupUuid: systemAdminGroupUuidOf(systemTenantUuid),
    systemTenantName: tenantName.trim(),
    sessionTtlNs: positiveInt("sessionTtlMs", opts.sessionTtlMs, 24 * 3_600_000, 366 * 24 * 3_600_000) * 1e6,
    sessionSecret: secret,
    scrypt,
    maxFailedLogins: positiveInt("maxFailedLogins", opts.maxFailedLogins, 5, 1000),
    failedLoginWindowNs: positiveInt("failedLoginWindowMs", opts.failedLoginWindowMs, 60_000, 24 * 3_600_000) * 1e6,
    clock: opts.clock ?? nowNs,
    stores: { cacheStore: facade.cacheStore, logStore: facade.logStore },
    emailIndexKey: () => facade.personalData.systemKey("email-index"),
    claimsForOldReaders: () => facade.rollingFrom !== undefined,
  };
  return { settings, admin: { email, password: opts.admin.password, name } };
}
