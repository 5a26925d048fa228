/**
 * Custom permission functions of the built-in domains. Each decides alone (the
 * authorizer is not consulted), reading the facade's readmodels through the
 * permission context the registry passes. They are module-level values that
 * hold nothing: an application may put them on its own commands too.
 */
import { isMnemeError, MnemeError } from "../model/errors.js";
import type { FacadeHandle } from "../model/facade-handle.js";
import { authenticated, type PermissionFunc } from "../model/permission.js";
import type { RequestContext } from "../model/types.js";
import { isSystemAdmin } from "./sender.js";

function deny(message: string): MnemeError {
  return new MnemeError("PERMISSION_DENIED", message);
}

const NOT_REGISTERED = "the built-in domains are not registered";

/** true / false, or undefined when the facade has no built-in domains. */
async function systemAdminOrUnknown(facade: FacadeHandle, reqCtx: RequestContext): Promise<boolean | undefined> {
  try {
    return await isSystemAdmin(facade, reqCtx);
  } catch (e) {
    if (isMnemeError(e, "INVALID_STATE")) return undefined;
    throw e;
  }
}

/** Allows system administrators only (members of the system tenant's `system-admin` group). */
export const systemAdministrator: PermissionFunc = async (reqCtx, _envelope, ctx) => {
  const admin = ctx === undefined ? undefined : await systemAdminOrUnknown(ctx.facade, reqCtx);
  if (admin === undefined) return deny(`system administrators only: ${NOT_REGISTERED}`);
  if (!admin) return deny("system administrators only");
  return undefined;
};

/**
 * Allows the account named by the payload's `accountUuid` itself (authenticated
 * as that account), and system administrators.
 */
export const accountOwnerOrSystemAdministrator: PermissionFunc = async (reqCtx, envelope, ctx) => {
  const target = (envelope.payload as { accountUuid?: unknown } | undefined)?.accountUuid;
  if (authenticated(reqCtx, envelope) === undefined && typeof target === "string" && target === reqCtx.senderAccountUuid) return undefined;
  if (ctx !== undefined && (await systemAdminOrUnknown(ctx.facade, reqCtx)) === true) return undefined;
  return deny("only the account itself or a system administrator may do this");
};

/**
 * Allows only the request contexts in `trusted` (held by identity, never
 * persisted): the bootstrap's permission, made by its install step with the
 * set the bootstrap of that facade adds its context to.
 */
export function trustedContextsOnly(trusted: WeakSet<RequestContext>): PermissionFunc {
  return (reqCtx) => (trusted.has(reqCtx) ? undefined : deny("the bootstrap runs only inside facade.start()"));
}
