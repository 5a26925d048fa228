/**
 * Who is asking: the sender of a request context checked against the built-in
 * readmodels (identity of the account in the tenant, live tenant, account and
 * groups), with what its groups grant and whether it is a system administrator.
 */
import { senderDirectoryOf } from "../app/sender-directory.js";
import { isMnemeError, MnemeError } from "../model/errors.js";
import type { FacadeHandle } from "../model/facade-handle.js";
import type { RequestContext } from "../model/types.js";
import { authorized } from "../model/permission.js";
import type { ProjectionReadmodel } from "../readmodel/projection-readmodel.js";
import type { AccountModel } from "./account-domain.js";
import type { GroupModel } from "./group-domain.js";
import type { IdentityModel } from "./identity-domain.js";
import { systemAdminGroupUuidOf, systemTenantUuidOf } from "./ids.js";
import { READMODELS, requireDefaults } from "./readmodel-names.js";
import type { TenantModel } from "./tenant-domain.js";

/** A sender whose identity, account, tenant and groups all check out. */
export interface Sender {
  readonly accountUuid: string;
  readonly identityUuid: string;
  readonly tenantUuid: string;
  /** Live groups of the identity (in its tenant). */
  readonly groupUuids: readonly string[];
  /** The permission names those groups hold (`Domain.Type`, `Domain.*`, `*`). */
  readonly grants: readonly string[];
  /** A member of the system tenant's `system-admin` group. */
  readonly systemAdmin: boolean;
}

function projection<M>(facade: FacadeHandle, name: string): ProjectionReadmodel<M, M> {
  return facade.readmodel<ProjectionReadmodel<M, M>>(name);
}

/**
 * The system tenant of the facade and its `system-admin` group: derived from
 * the app name (as registerDefaults derives them), so nothing is looked up.
 */
export function systemIdsOf(facade: { readonly appName: string }): { systemTenantUuid: string; systemAdminGroupUuid: string } {
  const systemTenantUuid = systemTenantUuidOf(facade.appName);
  return { systemTenantUuid, systemAdminGroupUuid: systemAdminGroupUuidOf(systemTenantUuid) };
}

function deny(message: string): MnemeError {
  return new MnemeError("PERMISSION_DENIED", message);
}

/**
 * Checks the sender fields of `reqCtx` against the readmodels of the facade
 * holding the senders (`facade` itself, or a sharded app's home shard). Resolves the
 * Sender, or a PERMISSION_DENIED error saying what did not check out. The
 * session itself is not looked at: contexts from outside are built by
 * resolveCredentials, which checks it.
 */
export async function resolveSender(of: FacadeHandle, reqCtx: RequestContext): Promise<Sender | MnemeError> {
  const levelError = authorized(reqCtx, { queryUuid: "", domain: "", name: "", payload: {}, reqCtx });
  if (levelError instanceof Error)
    return isMnemeError(levelError) ? levelError : new MnemeError("PERMISSION_DENIED", levelError.message, { cause: levelError });
  // A shard of a sharded app reads its senders on the home shard, where they live.
  const facade = senderDirectoryOf(of);
  requireDefaults(facade);
  const identityUuid = reqCtx.senderIdentityUuid!;
  const [identity, tenant, account] = await Promise.all([
    projection<IdentityModel>(facade, READMODELS.identity).getModel(identityUuid),
    projection<TenantModel>(facade, READMODELS.tenant).getModel(reqCtx.senderTenantUuid!),
    projection<AccountModel>(facade, READMODELS.account).getModel(reqCtx.senderAccountUuid!),
  ]);
  if (identity === undefined || identity.model.removed) return deny(`sender identity ${identityUuid} does not exist`);
  if (identity.model.accountUuid !== reqCtx.senderAccountUuid)
    return deny(`sender identity ${identityUuid} is not an identity of the sender account`);
  if (identity.model.tenantUuid !== reqCtx.senderTenantUuid)
    return deny(`sender identity ${identityUuid} does not belong to the sender tenant`);
  if (tenant === undefined || tenant.model.removed) return deny(`sender tenant ${String(reqCtx.senderTenantUuid)} does not exist`);
  if (account === undefined || account.model.removed) return deny("the sender account does not exist");
  const groups = projection<GroupModel>(facade, READMODELS.group);
  const found = await Promise.all(identity.model.groupUuids.map((g) => groups.getModel(g)));
  const groupUuids: string[] = [];
  const grants = new Set<string>();
  for (const g of found) {
    if (g === undefined || g.model.removed || g.model.tenantUuid !== identity.model.tenantUuid) continue;
    groupUuids.push(g.aggregateUuid);
    for (const p of g.model.permissions) grants.add(p);
  }
  return {
    accountUuid: identity.model.accountUuid,
    identityUuid,
    tenantUuid: identity.model.tenantUuid,
    groupUuids,
    grants: [...grants],
    systemAdmin: isSystemAdminSender(facade, identity.model.tenantUuid, groupUuids),
  };
}

function isSystemAdminSender(facade: FacadeHandle, tenantUuid: string, groupUuids: readonly string[]): boolean {
  const ids = systemIdsOf(facade);
  return tenantUuid === ids.systemTenantUuid && groupUuids.includes(ids.systemAdminGroupUuid);
}

/**
 * True when `reqCtx` is a system administrator: an identity of the system
 * tenant, of the sender account, in the `system-admin` group.
 * @example
 * if (await isSystemAdmin(facade, reqCtx)) showAdminMenu();
 */
export async function isSystemAdmin(facade: FacadeHandle, reqCtx: RequestContext): Promise<boolean> {
  // Throws INVALID_STATE when the built-in domains are not registered, whoever asks.
  const directory = senderDirectoryOf(facade);
  requireDefaults(directory);
  if (reqCtx?.senderTenantUuid !== systemIdsOf(directory).systemTenantUuid) return false;
  const sender = await resolveSender(facade, reqCtx);
  return !(sender instanceof Error) && sender.systemAdmin;
}

/**
 * True when the grants cover `permission`: `*` covers everything, `Domain.*`
 * covers the domain's permissions (and itself), anything else only itself.
 */
export function grantsCover(grants: readonly string[], permission: string): boolean {
  if (grants.includes("*") || grants.includes(permission)) return true;
  if (permission === "*") return false;
  const domain = permission.slice(0, permission.indexOf("."));
  return domain !== "" && grants.includes(`${domain}.*`);
}

/**
 * Rejects unless the sender may act on `tenantUuid`: its own tenant, or any
 * tenant for a system administrator. A request that targets one tenant and
 * names an object of another is refused too (INVALID_REQUEST).
 */
export async function assertTenantAccess(facade: FacadeHandle, reqCtx: RequestContext, tenantUuid: string): Promise<void> {
  if (tenantUuid !== reqCtx.senderTenantUuid && !(await isSystemAdmin(facade, reqCtx))) {
    throw deny(`the sender may act only within its own tenant (${String(reqCtx.senderTenantUuid ?? "none")}), not on tenant ${tenantUuid}`);
  }
  if (reqCtx.targetTenantUuid !== undefined && reqCtx.targetTenantUuid !== tenantUuid) {
    throw new MnemeError(
      "INVALID_REQUEST",
      `the request targets tenant ${reqCtx.targetTenantUuid}, but the object belongs to tenant ${tenantUuid}`,
    );
  }
}

/**
 * Rejects with NOT_FOUND unless the sender may see an object (a group, an
 * identity) of `objectTenantUuid`: worded as for an absent object, so a
 * lookup across tenants does not confirm that the object exists. A request
 * that targets another tenant than the object's is NOT_FOUND too.
 */
export async function assertSeesObject(
  facade: FacadeHandle,
  reqCtx: RequestContext,
  objectTenantUuid: string,
  what: string,
): Promise<void> {
  const visible =
    (reqCtx.targetTenantUuid === undefined || reqCtx.targetTenantUuid === objectTenantUuid) &&
    (objectTenantUuid === reqCtx.senderTenantUuid || (await isSystemAdmin(facade, reqCtx)));
  if (!visible) throw new MnemeError("NOT_FOUND", `${what} does not exist`);
}

/** The tenant a tenant-scoped request works in: the payload's, else the target tenant, else the sender's. */
export function scopeTenantOf(reqCtx: RequestContext, payloadTenantUuid: string | undefined): string {
  const t = payloadTenantUuid ?? reqCtx.targetTenantUuid ?? reqCtx.senderTenantUuid;
  if (t === undefined || t === "")
    throw new MnemeError("INVALID_REQUEST", "no tenant given: set tenantUuid, or send the request within a tenant");
  return t;
}

/**
 * Rejects unless the sender holds every one of `permissions` (system
 * administrators hold all): nobody hands out more than it has.
 */
export async function assertHolds(
  facade: FacadeHandle,
  reqCtx: RequestContext,
  permissions: readonly string[],
  what: string,
): Promise<void> {
  if (permissions.length === 0) return;
  const sender = await resolveSender(facade, reqCtx);
  if (sender instanceof Error) throw sender;
  if (sender.systemAdmin) return;
  const missing = permissions.filter((p) => !grantsCover(sender.grants, p));
  if (missing.length > 0) throw deny(`${what} needs permissions the sender does not hold: ${missing.join(", ")}`);
}
