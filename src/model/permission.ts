import { MnemeError } from "./errors.js";
import type { FacadeHandle } from "./facade-handle.js";
import type { CommandEnvelope, QueryEnvelope, RequestContext } from "./types.js";

/**
 * What the registry passes a permission function besides the request: the facade
 * the check runs in, so a custom function defined next to its domain can read a readmodel.
 */
export interface PermissionContext {
  readonly facade: FacadeHandle;
}

/**
 * Decides whether a command or query may run: nothing (allow) or an Error
 * (deny). A thrown error denies too. `ctx` is given by the facade's registry.
 */
export type PermissionFunc = (
  reqCtx: RequestContext,
  command: CommandEnvelope | QueryEnvelope,
  ctx?: PermissionContext,
) => void | Error | Promise<void | Error>;

/** The three built-in levels. */
export type PermissionLevel = "Anonymous" | "Authenticated" | "Authorized";

/** What every permission names: the (domain, type) it guards and what it is for. */
interface PermissionBase {
  readonly domain: string;
  readonly type: string;
  readonly description: string;
}

/**
 * A built-in level: its own function (`anonymous`, `authenticated`,
 * `authorized`) decides, and for `Authorized` the authorizer then too.
 */
export interface LevelPermission extends PermissionBase {
  readonly kind: "level";
  readonly level: PermissionLevel;
  readonly funcSet: false;
  readonly cmdFunc?: undefined;
}

/** A custom permission function: it decides alone, the authorizer is not consulted. */
export interface CustomPermission extends PermissionBase {
  readonly kind: "custom";
  readonly funcSet: true;
  readonly cmdFunc: PermissionFunc;
  readonly level?: undefined;
}

/**
 * No level and no function: granted only by the authorizer (system
 * administrators with the default one), never without an authorizer. The
 * store permissions, `Runtime.ControlEventHandler` and `Runtime.StreamSystemEvents`.
 */
export interface AdministratorPermission extends PermissionBase {
  readonly kind: "administrator";
  readonly funcSet: false;
  readonly cmdFunc?: undefined;
  readonly level?: undefined;
}

/**
 * A registry entry: one per command, query and store action. Narrow on
 * `kind` (or on `funcSet`: `cmdFunc` is present exactly when it is true).
 */
export type Permission = LevelPermission | CustomPermission | AdministratorPermission;

/** `"level"`, `"custom"` or `"administrator"`. */
export type PermissionKind = Permission["kind"];

const LEVEL = Symbol.for("mneme.permissionLevel");

function levelFunc(level: PermissionLevel, fn: PermissionFunc): PermissionFunc {
  Object.defineProperty(fn, LEVEL, { value: level });
  Object.defineProperty(fn, "name", { value: level.toLowerCase() });
  return fn;
}

/** The level of a built-in permission function, or undefined for a custom one. */
export function permissionLevelOf(fn: PermissionFunc): PermissionLevel | undefined {
  return (fn as unknown as Record<symbol, PermissionLevel | undefined>)[LEVEL];
}

/** Always allows. For public endpoints such as health checks. */
export const anonymous: PermissionFunc = levelFunc("Anonymous", () => undefined);

/** Allows when the request context carries a sender account id and a sender session id. */
export const authenticated: PermissionFunc = levelFunc("Authenticated", (reqCtx) => {
  if (!reqCtx.senderAccountUuid || !reqCtx.senderSessionUuid) {
    return new MnemeError("PERMISSION_DENIED", "authentication required: the request carries no sender account or session");
  }
  return undefined;
});

/** Allows when the context carries sender account, session, identity and tenant ids. */
export const authorized: PermissionFunc = levelFunc("Authorized", (reqCtx) => {
  const missing: string[] = [];
  if (!reqCtx.senderAccountUuid) missing.push("senderAccountUuid");
  if (!reqCtx.senderSessionUuid) missing.push("senderSessionUuid");
  if (!reqCtx.senderIdentityUuid) missing.push("senderIdentityUuid");
  if (!reqCtx.senderTenantUuid) missing.push("senderTenantUuid");
  if (missing.length > 0) {
    return new MnemeError("PERMISSION_DENIED", `authorization required: the request context lacks ${missing.join(", ")}`);
  }
  return undefined;
});

const LEVEL_FUNCS: Readonly<Record<PermissionLevel, PermissionFunc>> = Object.freeze({
  Anonymous: anonymous,
  Authenticated: authenticated,
  Authorized: authorized,
});

/** The function that decides a permission: its level's built-in function, its custom one, or none (administrator). */
export function permissionFuncOf(p: LevelPermission | CustomPermission): PermissionFunc;
export function permissionFuncOf(p: Permission): PermissionFunc | undefined;
export function permissionFuncOf(p: Permission): PermissionFunc | undefined {
  switch (p.kind) {
    case "level":
      return LEVEL_FUNCS[p.level];
    case "custom":
      return p.cmdFunc;
    case "administrator":
      return undefined;
  }
}

/**
 * Creates a permission. Without `cmdFunc`: an administrator-only permission
 * (`kind: "administrator"`); with a built-in level function: that level
 * (`kind: "level"`, no cmdFunc); with any other function: a custom one (`kind: "custom"`, `funcSet: true`).
 */
export function newPermission(domain: string, type: string, description: string): AdministratorPermission;
export function newPermission(
  domain: string,
  type: string,
  description: string,
  cmdFunc: PermissionFunc,
): LevelPermission | CustomPermission;
export function newPermission(domain: string, type: string, description: string, cmdFunc?: PermissionFunc): Permission;
export function newPermission(domain: string, type: string, description: string, cmdFunc?: PermissionFunc): Permission {
  if (cmdFunc === undefined) return { kind: "administrator", domain, type, description, funcSet: false };
  const level = permissionLevelOf(cmdFunc);
  if (level !== undefined) return { kind: "level", domain, type, description, funcSet: false, level };
  return { kind: "custom", domain, type, description, funcSet: true, cmdFunc };
}

/** Creates a custom permission for a (domain, command) pair (a built-in level function gives that level). */
export function newPermissionCmdFunc(
  domain: string,
  commandName: string,
  cmdFunc: PermissionFunc,
  description?: string,
): LevelPermission | CustomPermission {
  return newPermission(domain, commandName, description ?? `Custom permission for ${domain}.${commandName}`, cmdFunc);
}

const KINDS: readonly PermissionKind[] = ["level", "custom", "administrator"];
const LEVELS: readonly PermissionLevel[] = ["Anonymous", "Authenticated", "Authorized"];

/**
 * Validates a permission given by a caller and returns a frozen copy of
 * exactly its fields; INVALID_PERMISSION when a field is missing or
 * contradicts its kind. A custom permission whose cmdFunc is a built-in level
 * function becomes that level, so `authorized` always consults the authorizer,
 * however the permission was made.
 */
export function checkPermission(input: Permission): Permission {
  const raw = input as unknown as Record<string, unknown> | null;
  if (raw === null || typeof raw !== "object") throw new MnemeError("INVALID_PERMISSION", "a permission must be an object");
  for (const field of ["domain", "type", "description"] as const) {
    const v = raw[field];
    if (typeof v !== "string" || v.trim() === "") {
      throw new MnemeError("INVALID_PERMISSION", `permission ${field} must be a non-empty string (got ${JSON.stringify(v)})`);
    }
  }
  const p = input;
  const name = `permission ${p.domain}.${p.type}`;
  const invalid = (why: string) =>
    new MnemeError("INVALID_PERMISSION", `${name}: ${why} (make permissions with newPermission or newPermissionCmdFunc)`);
  if (!KINDS.includes(p.kind))
    throw invalid(`kind must be one of ${KINDS.map((k) => JSON.stringify(k)).join(", ")}, got ${JSON.stringify(raw.kind)}`);
  if (typeof raw.funcSet !== "boolean") throw invalid("funcSet must be a boolean");
  if (raw.cmdFunc !== undefined && typeof raw.cmdFunc !== "function") throw invalid("cmdFunc must be a function");
  const { domain, type, description } = p;
  switch (p.kind) {
    case "custom": {
      if (!raw.funcSet) throw invalid("a custom permission has funcSet: true");
      if (typeof p.cmdFunc !== "function") throw invalid("a custom permission needs its cmdFunc");
      if (raw.level !== undefined) throw invalid("a custom permission has no level");
      const level = permissionLevelOf(p.cmdFunc);
      return Object.freeze(
        level === undefined
          ? { kind: "custom", domain, type, description, funcSet: true, cmdFunc: p.cmdFunc }
          : { kind: "level", domain, type, description, funcSet: false, level },
      );
    }
    case "level":
      if (raw.funcSet) throw invalid("a level permission has funcSet: false");
      if (raw.cmdFunc !== undefined) throw invalid("a level permission carries no cmdFunc: its level's built-in function decides");
      if (!LEVELS.includes(p.level)) throw invalid(`level must be one of ${LEVELS.join(", ")}, got ${JSON.stringify(raw.level)}`);
      return Object.freeze({ kind: "level", domain, type, description, funcSet: false, level: p.level });
    case "administrator":
      if (raw.funcSet) throw invalid("an administrator permission has funcSet: false");
      // A function or a level here would silently change who is granted: say so instead.
      if (raw.cmdFunc !== undefined) throw invalid('an administrator permission has no cmdFunc (a custom permission has kind "custom")');
      if (raw.level !== undefined) throw invalid(`an administrator permission has no level (a level permission has kind "level")`);
      return Object.freeze({ kind: "administrator", domain, type, description, funcSet: false });
  }
}
