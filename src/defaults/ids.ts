/**
 * Deterministic ids of the built-in domains (uuid v5 from one fixed namespace):
 * a restart, or a second instance, derives the same system tenant, admin
 * account, identities and email claims, so the bootstrap and uniqueness checks
 * need no lookup table.
 */
import { createHmac } from "node:crypto";
import { v5 as uuidv5 } from "uuid";
import { MnemeError } from "../model/errors.js";

/** The namespace of every id mneme derives. Never change it: stores written before would no longer match. */
export const MNEME_ID_NAMESPACE = "8b0c5f3e-2f4a-4d59-9a57-6c1e0d7b3a21";

// The parts are JSON-encoded so ("a:b", "c") and ("a", "b:c") never collide.
function derive(kind: string, ...parts: string[]): string {
  return uuidv5(JSON.stringify([kind, ...parts]), MNEME_ID_NAMESPACE);
}

const EMAIL = /^[^\s@]+@[^\s@]+$/;

/** Emails compare trimmed and lower-cased: `Ann@Example.org ` and `ann@example.org` are one account. */
export function normalizeEmail(email: unknown): string {
  if (typeof email !== "string")
    throw new MnemeError("VALIDATION_FAILED", "email must be a string", { details: [{ pointer: "/email", message: "must be a string" }] });
  const e = email.trim().toLowerCase();
  if (e.length > 254 || !EMAIL.test(e)) {
    throw new MnemeError("VALIDATION_FAILED", "email must be an email address of at most 254 characters", {
      details: [{ pointer: "/email", message: "must be an email address" }],
    });
  }
  return e;
}

/** The system tenant of an application. */
export function systemTenantUuidOf(appName: string): string {
  return derive("system-tenant", appName);
}

/** The bootstrapped administrator's account: from the app name and the admin email. */
export function adminAccountUuidOf(appName: string, adminEmail: string): string {
  return derive("admin-account", appName, normalizeEmail(adminEmail));
}

/** The `system-admin` group of a system tenant. */
export function systemAdminGroupUuidOf(systemTenantUuid: string): string {
  return derive("system-admin-group", systemTenantUuid);
}

/** An account's identity in a tenant: one membership per (tenant, account), so creating it twice conflicts. */
export function identityUuidOf(tenantUuid: string, accountUuid: string): string {
  return derive("identity", tenantUuid, accountUuid);
}

/**
 * The aggregate that claims an email for one account: it makes emails unique
 * without a readmodel race. Derived from a keyed hash (HMAC-SHA256) of the
 * email under `indexKey` (kept in the key store), so the id does not let
 * anyone holding the events confirm a guessed email.
 */
export function emailClaimUuidOf(normalizedEmail: string, indexKey: Uint8Array): string {
  return derive("email-claim-hmac", createHmac("sha256", indexKey).update(normalizedEmail).digest("base64url"));
}

/** The claim id of stores written before claims were keyed (an unkeyed hash of the email): still honoured by lookups. */
export function legacyEmailClaimUuidOf(normalizedEmail: string): string {
  return derive("email-claim", normalizedEmail);
}

/** The aggregate holding an account's password hash, apart from the account so its history never shows a hash. */
export function credentialUuidOf(accountUuid: string): string {
  return derive("credential", accountUuid);
}
