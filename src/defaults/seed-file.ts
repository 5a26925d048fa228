/**
 * The seed file of `mneme seed` (see seed.ts), checked before anything is
 * written: every error names the JSON pointer of the value at fault, so a
 * bad file changes nothing.
 */
import { MnemeError } from "../model/errors.js";
import { normalizeEmail } from "./ids.js";
import { checkPasswordPolicy } from "./password.js";

/** A group of a seeded tenant: found by name in its tenant, created when missing; `permissions` are added when missing. */
export interface SeedGroup {
  readonly name: string;
  readonly permissions: readonly string[];
  readonly pointer: string;
}

/** A tenant: found by `tenantUuid` when given, else by name; created when missing. */
export interface SeedTenant {
  readonly name: string;
  readonly tenantUuid: string | undefined;
  readonly groups: readonly SeedGroup[];
  readonly pointer: string;
}

/** A membership of an account in a tenant (by the tenant's name), with groups of that tenant (by name). */
export interface SeedIdentity {
  readonly tenant: string;
  readonly groups: readonly string[];
  readonly pointer: string;
}

/** An account: found by email; registered with `password` when missing (an existing account keeps its password and name). */
export interface SeedAccount {
  readonly email: string;
  readonly password: string;
  readonly name: string;
  readonly identities: readonly SeedIdentity[];
  readonly pointer: string;
}

/** A seed file, checked. */
export interface SeedDocument {
  readonly tenants: readonly SeedTenant[];
  readonly accounts: readonly SeedAccount[];
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** A VALIDATION_FAILED error at `pointer` (RFC 6901) of the seed file. */
export function seedError(pointer: string, message: string): MnemeError {
  return new MnemeError("VALIDATION_FAILED", `the seed file at ${pointer === "" ? "/" : pointer}: ${message}`, {
    details: [{ pointer, message }],
  });
}

function escape(key: string): string {
  return key.replace(/~/g, "~0").replace(/\//g, "~1");
}

function object(v: unknown, at: string, keys: readonly string[]): Record<string, unknown> {
  if (typeof v !== "object" || v === null || Array.isArray(v)) throw seedError(at, "must be an object");
  const o = v as Record<string, unknown>;
  for (const k of Object.keys(o)) {
    if (!keys.includes(k)) throw seedError(`${at}/${escape(k)}`, `is not a known field (known: ${keys.join(", ")})`);
  }
  return o;
}

function list(v: unknown, at: string): unknown[] {
  if (v === undefined) return [];
  if (!Array.isArray(v)) throw seedError(at, "must be an array");
  if (v.length > 10_000) throw seedError(at, "must have at most 10000 items");
  return v;
}

function name(v: unknown, at: string): string {
  if (typeof v !== "string" || v.trim() === "" || v.length > 200)
    throw seedError(at, "must be a non-blank string of at most 200 characters");
  return v.trim();
}

/** Rethrows a check of a single value (email, password) at the pointer of that value. */
function at<T>(pointer: string, check: () => T): T {
  try {
    return check();
  } catch (e) {
    if (e instanceof MnemeError) throw seedError(pointer, e.details?.[0]?.message ?? e.message);
    throw e;
  }
}

function group(v: unknown, p: string): SeedGroup {
  const o = object(v, p, ["name", "permissions"]);
  const permissions = list(o.permissions, `${p}/permissions`).map((perm, i) => {
    if (typeof perm !== "string" || perm === "")
      throw seedError(`${p}/permissions/${i}`, "must be a permission name (Domain.Type, Domain.* or *)");
    return perm;
  });
  return { name: name(o.name, `${p}/name`), permissions: [...new Set(permissions)], pointer: p };
}

function tenant(v: unknown, p: string): SeedTenant {
  const o = object(v, p, ["name", "tenantUuid", "groups"]);
  if (o.tenantUuid !== undefined && (typeof o.tenantUuid !== "string" || !UUID.test(o.tenantUuid)))
    throw seedError(`${p}/tenantUuid`, "must be a uuid");
  const groups = list(o.groups, `${p}/groups`).map((g, i) => group(g, `${p}/groups/${i}`));
  unique(
    groups.map((g) => [g.name, `${g.pointer}/name`]),
    "a group of this name is in this tenant already",
  );
  return { name: name(o.name, `${p}/name`), tenantUuid: o.tenantUuid as string | undefined, groups, pointer: p };
}

function identity(v: unknown, p: string): SeedIdentity {
  const o = object(v, p, ["tenant", "groups"]);
  const groups = list(o.groups, `${p}/groups`).map((g, i) => name(g, `${p}/groups/${i}`));
  return { tenant: name(o.tenant, `${p}/tenant`), groups: [...new Set(groups)], pointer: p };
}

function account(v: unknown, p: string): SeedAccount {
  const o = object(v, p, ["email", "password", "name", "identities"]);
  const email = at(`${p}/email`, () => normalizeEmail(o.email));
  at(`${p}/password`, () => checkPasswordPolicy(o.password));
  if (o.name !== undefined && (typeof o.name !== "string" || o.name.length > 200))
    throw seedError(`${p}/name`, "must be a string of at most 200 characters");
  const identities = list(o.identities, `${p}/identities`).map((x, i) => identity(x, `${p}/identities/${i}`));
  unique(
    identities.map((x) => [x.tenant, `${x.pointer}/tenant`]),
    "this account is given this tenant already",
  );
  return { email, password: o.password as string, name: (o.name as string | undefined) ?? "", identities, pointer: p };
}

/** Each key once: the second one is an error at its pointer. */
function unique(entries: readonly (readonly [string, string])[], message: string): void {
  const seen = new Set<string>();
  for (const [key, pointer] of entries) {
    if (seen.has(key)) throw seedError(pointer, `${JSON.stringify(key)}: ${message}`);
    seen.add(key);
  }
}

/**
 * Checks a parsed seed file: `{ tenants?: [...], accounts?: [...] }`.
 * @throws MnemeError VALIDATION_FAILED with the JSON pointer of the first value at fault.
 */
export function parseSeedDocument(v: unknown): SeedDocument {
  const o = object(v, "", ["tenants", "accounts"]);
  const tenants = list(o.tenants, "/tenants").map((t, i) => tenant(t, `/tenants/${i}`));
  unique(
    tenants.map((t) => [t.name, `${t.pointer}/name`]),
    "a tenant of this name is in the file already",
  );
  const accounts = list(o.accounts, "/accounts").map((a, i) => account(a, `/accounts/${i}`));
  unique(
    accounts.map((a) => [a.email, `${a.pointer}/email`]),
    "an account with this email is in the file already",
  );
  return { tenants, accounts };
}
