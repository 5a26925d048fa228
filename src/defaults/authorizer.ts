/**
 * The authorizer installed by registerDefaults: role-based access through
 * groups. Consulted after the `authorized` level passes, and for every
 * permission without a level (store permissions, Runtime control, the SSE stream).
 */
import { senderDirectoryOf } from "../app/sender-directory.js";
import { MnemeError } from "../model/errors.js";
import type { Facade } from "../app/facade.js";
import { authorized } from "../model/permission.js";
import type { Authorizer } from "../permissions/permission-registry.js";
import { grantsCover, resolveSender, systemIdsOf } from "./sender.js";

/** The name a group holds to grant a permission: `<Domain>.<Type>` (store permissions: `Runtime.StoreEvent.Read`). */
export function permissionName(p: { domain: string; type: string }): string {
  return `${p.domain}.${p.type}`;
}

/**
 * Creates the default authorizer of a facade. It reads the sender where the
 * senders live (the facade itself; on a sharded app, the home shard) and allows when
 * 1. the sender identity exists, belongs to the sender account and to the sender tenant (both live);
 * 2. the target tenant, when given, is the sender's tenant, unless the sender is a system administrator;
 * 3. for a permission without a level, the sender is an identity of the system tenant;
 * 4. one of the identity's groups holds the permission (`Domain.Type`, `Domain.*` or `*`).
 * `next`, when given, is consulted after these pass (an application's own rules on top).
 * @example
 * facade.permissions.setAuthorizer(createDefaultAuthorizer(facade, myExtraRules));
 */
export function createDefaultAuthorizer(facade: Facade, next?: Authorizer): Authorizer {
  return async (reqCtx, permission, envelope) => {
    if (permission.level === undefined) {
      const levelError = authorized(reqCtx, envelope);
      if (levelError instanceof Error) return levelError;
    }
    const sender = await resolveSender(facade, reqCtx);
    if (sender instanceof Error) return sender;
    const name = permissionName(permission);
    if (reqCtx.targetTenantUuid !== undefined && reqCtx.targetTenantUuid !== sender.tenantUuid && !sender.systemAdmin) {
      return new MnemeError(
        "PERMISSION_DENIED",
        `${name}: the sender may act only within its own tenant, not on tenant ${reqCtx.targetTenantUuid}`,
      );
    }
    // The system tenant of the facade holding the senders (a sharded app's home shard), as resolveSender's.
    if (permission.level === undefined && sender.tenantUuid !== systemIdsOf(senderDirectoryOf(facade)).systemTenantUuid) {
      return new MnemeError(
        "PERMISSION_DENIED",
        `${name} is for system administrators: it is granted only to identities of the system tenant`,
      );
    }
    if (!grantsCover(sender.grants, name)) {
      return new MnemeError("PERMISSION_DENIED", `${name} is not granted to identity ${sender.identityUuid} by any of its groups`);
    }
    return next === undefined ? undefined : next(reqCtx, permission, envelope);
  };
}
