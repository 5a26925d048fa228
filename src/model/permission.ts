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

/** A registry entry: one per command, query and store action. */
export interface Permission {
  domain: string;
  type: string;
  description: string;
  /** True when a custom permission function is attached. */
  funcSet: boolean;
  cmdFunc?: PermissionFunc;
  /** Set for the built-in levels; absent for custom functions and store permissions. */
  level?: PermissionLevel;
}

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

/** Creates a permission; with `cmdFunc` it is a custom one (`funcSet: true`) unless cmdFunc is a built-in level. */
export function newPermission(domain: string, type: string, description: string, cmdFunc?: PermissionFunc): Permission {
  if (cmdFunc === undefined) return { domain, type, description, funcSet: false };
  const level = permissionLevelOf(cmdFunc);
  if (level !== undefined) return { domain, type, description, funcSet: false, cmdFunc, level };
  return { domain, type, description, funcSet: true, cmdFunc };
}

/** Creates a custom permission for a (domain, command) pair. */
export function newPermissionCmdFunc(domain: string, commandName: string, cmdFunc: PermissionFunc, description?: string): Permission {
  return { domain, type: commandName, description: description ?? `Custom permission for ${domain}.${commandName}`, funcSet: true, cmdFunc };
}
