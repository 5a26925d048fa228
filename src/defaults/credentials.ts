/**
 * Credentials -> request context, for adapters (mneme/http): a session uuid
 * and key (and optionally the identity to act as) become the sender fields
 * of a RequestContext, or nothing when they do not check out.
 */
import { senderDirectoryOf } from "../app/sender-directory.js";
import type { Credentials } from "../http/credentials.js";
import type { FacadeHandle } from "../model/facade-handle.js";
import type { RequestContext } from "../model/types.js";
import type { ProjectionReadmodel } from "../readmodel/projection-readmodel.js";
import type { AccountModel } from "./account-domain.js";
import type { IdentityModel } from "./identity-domain.js";
import { READMODELS, requireDefaults } from "./readmodel-names.js";
import type { SessionProjection } from "./session.js";
import type { TenantModel } from "./tenant-domain.js";

export { isSystemAdmin } from "./sender.js";
export { parseSessionToken } from "./session-key.js";

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

function projection<M>(facade: FacadeHandle, name: string): ProjectionReadmodel<M, M> {
  return facade.readmodel<ProjectionReadmodel<M, M>>(name);
}

/**
 * Resolves `{ senderAccountUuid, senderSessionUuid }`, plus `senderIdentityUuid`
 * and `senderTenantUuid` when `identityUuid` is a live identity of the account
 * in a live tenant; undefined when the session is unknown, ended, expired, of a
 * removed account, or the key is wrong (compared in constant time). The
 * session is read from its committed events (a login on another instance
 * counts at once); the Account and Identity readmodels give the rest. On a
 * shard of a sharded app all of it is read on the home shard.
 * @example
 * const reqCtx = await resolveCredentials(facade, { sessionUuid, sessionKey, identityUuid });
 * if (reqCtx === undefined) return unauthorized();
 */
export async function resolveCredentials(of: FacadeHandle, creds: Credentials): Promise<RequestContext | undefined> {
  // Sessions live with the senders: on a sharded app's home shard, whichever shard's adapter asks.
  const facade = senderDirectoryOf(of);
  // The Session readmodel holds that facade's session settings (key secret, clock): registerDefaults gave them.
  requireDefaults(facade);
  const sessions = facade.readmodel<SessionProjection>(READMODELS.session);
  if (typeof creds !== "object" || creds === null) return undefined;
  const { sessionUuid, sessionKey, identityUuid } = creds;
  if (typeof sessionUuid !== "string" || !UUID.test(sessionUuid) || typeof sessionKey !== "string") return undefined;
  const s = await sessions.openSession(sessionUuid, sessionKey);
  if (s === undefined) return undefined;
  const wantIdentity = typeof identityUuid === "string" && UUID.test(identityUuid);
  const [account, identity] = await Promise.all([
    projection<AccountModel>(facade, READMODELS.account).getModel(s.accountUuid),
    wantIdentity ? projection<IdentityModel>(facade, READMODELS.identity).getModel(identityUuid) : Promise.resolve(undefined),
  ]);
  if (account === undefined ? !(await sessions.accountLives(s.accountUuid)) : account.model.removed) return undefined;
  const reqCtx: RequestContext = { senderAccountUuid: s.accountUuid, senderSessionUuid: sessionUuid };
  if (identity !== undefined && !identity.model.removed && identity.model.accountUuid === s.accountUuid) {
    const tenant = await projection<TenantModel>(facade, READMODELS.tenant).getModel(identity.model.tenantUuid);
    if (tenant !== undefined && !tenant.model.removed) {
      reqCtx.senderIdentityUuid = identity.aggregateUuid;
      reqCtx.senderTenantUuid = identity.model.tenantUuid;
    }
  }
  return reqCtx;
}
