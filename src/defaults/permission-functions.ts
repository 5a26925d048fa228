/**
 * Custom permission functions of the built-in domains. Each decides alone (the
 * authorizer is not consulted), reading the facade's readmodels through the
 * permission context the registry passes.
 */
import { MnemeError } from "../model/errors.js";
import { authenticated, type PermissionFunc } from "../model/permission.js";
import { maybeDefaultsOf } from "./defaults-state.js";
import { isSystemAdmin } from "./sender.js";

function deny(message: string): MnemeError {
  return new MnemeError("PERMISSION_DENIED", message);
}

/** Allows system administrators only (members of the system tenant's `system-admin` group). */
export const systemAdministrator: PermissionFunc = async (reqCtx, _envelope, ctx) => {
  if (ctx === undefined || maybeDefaultsOf(ctx.facade) === undefined) return deny("system administrators only: the built-in domains are not registered");
  if (!(await isSystemAdmin(ctx.facade, reqCtx))) return deny("system administrators only");
  return undefined;
};

/**
 * Allows the account named by the payload's `accountUuid` itself (authenticated
 * as that account), and system administrators.
 */
export const accountOwnerOrSystemAdministrator: PermissionFunc = async (reqCtx, envelope, ctx) => {
  const target = (envelope.payload as { accountUuid?: unknown } | undefined)?.accountUuid;
  if (authenticated(reqCtx, envelope) === undefined && typeof target === "string" && target === reqCtx.senderAccountUuid) return undefined;
  if (ctx !== undefined && maybeDefaultsOf(ctx.facade) !== undefined && (await isSystemAdmin(ctx.facade, reqCtx))) return undefined;
  return deny("only the account itself or a system administrator may do this");
};

/** Allows only the request contexts the facade's own bootstrap created (held by identity, never persisted). */
export const bootstrapOnly: PermissionFunc = (reqCtx, _envelope, ctx) => {
  const state = ctx === undefined ? undefined : maybeDefaultsOf(ctx.facade);
  if (state === undefined || !state.trustedContexts.has(reqCtx)) return deny("the bootstrap runs only inside facade.start()");
  return undefined;
};
