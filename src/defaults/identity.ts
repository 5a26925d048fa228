/**
 * The `Identity` domain: an account's membership of a tenant, and the groups
 * it holds there. A request is authorized as an identity (sender identity and
 * tenant in the request context).
 */
import type { AggregateLoader, LoadedAggregate } from "../model/context.js";
import { MnemeError } from "../model/errors.js";
import type { DomainInstaller } from "../model/domain-install.js";
import type { Facade } from "../app/facade.js";
import type { FacadeHandle } from "../model/facade-handle.js";
import { ProjectionReadmodel, type ProjectionList, type ProjectionModel } from "../readmodel/projection-readmodel.js";
import { AccountAggregate } from "./account-domain.js";
import type { AuthIndex } from "./auth-index.js";
import { loadLiveGroup } from "./group.js";
import { identityUuidOf } from "./ids.js";
import { includeHistorySchema, objectSchema, pageProperties, uuidSchema } from "./payload-schemas.js";
import { accountOwnerOrSystemAdministrator } from "./permission-functions.js";
import { found, listOptions } from "./query-helpers.js";
import { READMODELS } from "./readmodel-names.js";
import type { DefaultsSettings } from "./settings.js";
import { assertHolds, assertSeesObject, assertTenantAccess, scopeTenantOf } from "./sender.js";
import { TenantAggregate } from "./tenant-domain.js";
import type { TenantProjection } from "./tenant.js";
import {
  IdentityCreated,
  IdentityRemoved,
  IdentityGroupAssigned,
  IdentityGroupUnassigned,
  type IdentityModel,
  type AccountIdentity,
  Identity,
  IdentityAggregate,
} from "./identity-domain.js";

/** Payload of the `Identity.CreateIdentity` command. */
export interface CreateIdentity {
  accountUuid: string;
  tenantUuid?: string;
}
/** Payload of the `Identity.RemoveIdentity` command. */
export interface RemoveIdentity {
  identityUuid: string;
}
/** Payload of the `Identity.AssignGroup` command. */
export interface AssignGroup {
  identityUuid: string;
  groupUuid: string;
}
/** Payload of the `Identity.UnassignGroup` command. */
export interface UnassignGroup {
  identityUuid: string;
  groupUuid: string;
}
/** Payload of the `Identity.GetIdentity` query. */
export interface GetIdentity {
  identityUuid: string;
  includeHistory?: boolean;
}
/** Payload of the `Identity.ListIdentities` query. */
export interface ListIdentities {
  tenantUuid?: string;
  page?: number;
  pageSize?: number;
  includeHistory?: boolean;
}
/** Payload of the `Identity.ListAccountIdentities` query. */
export interface ListAccountIdentities {
  accountUuid: string;
}

const tenantScoped = "(members of the tenant with the grant, or system administrators)";
/** The `Identity.CreateIdentity` command token. */
export const CreateIdentity = Identity.command<CreateIdentity, { identityUuid: string }>("CreateIdentity", {
  description: `Make an account a member of a tenant ${tenantScoped}`,
  schema: objectSchema({ accountUuid: uuidSchema, tenantUuid: uuidSchema }, ["accountUuid"]),
});
/** The `Identity.RemoveIdentity` command token. */
export const RemoveIdentity = Identity.command<RemoveIdentity>("RemoveIdentity", {
  description: `End an account's membership of a tenant ${tenantScoped}`,
  schema: objectSchema({ identityUuid: uuidSchema }, ["identityUuid"]),
});
/** The `Identity.AssignGroup` command token. */
export const AssignGroup = Identity.command<AssignGroup>("AssignGroup", {
  description: `Give an identity a group of its tenant; the sender must hold the group's permissions ${tenantScoped}`,
  schema: objectSchema({ identityUuid: uuidSchema, groupUuid: uuidSchema }, ["identityUuid", "groupUuid"]),
});
/** The `Identity.UnassignGroup` command token. */
export const UnassignGroup = Identity.command<UnassignGroup>("UnassignGroup", {
  description: `Take a group from an identity ${tenantScoped}`,
  schema: objectSchema({ identityUuid: uuidSchema, groupUuid: uuidSchema }, ["identityUuid", "groupUuid"]),
});
/** The `Identity.GetIdentity` query token. */
export const GetIdentity = Identity.query<GetIdentity, ProjectionModel<IdentityModel>>("GetIdentity", {
  description: "One identity, with its history on request",
  schema: objectSchema({ identityUuid: uuidSchema, includeHistory: includeHistorySchema }, ["identityUuid"]),
});
/** The `Identity.ListIdentities` query token. */
export const ListIdentities = Identity.query<ListIdentities, ProjectionList<IdentityModel>>("ListIdentities", {
  description: "A page of the identities of a tenant (default: the sender's)",
  schema: objectSchema({ tenantUuid: uuidSchema, ...pageProperties }),
});
/** The `Identity.ListAccountIdentities` query token. */
export const ListAccountIdentities = Identity.query<ListAccountIdentities, { items: AccountIdentity[] }>("ListAccountIdentities", {
  description: "The identities of an account, to choose one (the account itself, or system administrators)",
  permission: accountOwnerOrSystemAdministrator,
  schema: objectSchema({ accountUuid: uuidSchema }, ["accountUuid"]),
});

/** The Identity readmodel: one model per identity, listed by tenant, history on demand. */
export class IdentityProjection extends ProjectionReadmodel<IdentityModel> {
  constructor(facade: Facade) {
    super(facade, { aggregate: IdentityAggregate, name: READMODELS.identity });
  }
}

/** Loads an identity that exists and is not removed (in a command: locks it); NOT_FOUND otherwise. */
export async function loadLiveIdentity(loader: AggregateLoader, identityUuid: string): Promise<LoadedAggregate<IdentityModel>> {
  const identity = await loader.load(IdentityAggregate, identityUuid);
  if (identity.version === 0 || identity.state.removed) throw new MnemeError("NOT_FOUND", `identity ${identityUuid} does not exist`);
  return identity;
}

/** The live identities of an account whose tenant is live, with the tenant's name. */
export async function accountIdentities(facade: FacadeHandle, accountUuid: string): Promise<AccountIdentity[]> {
  const refs = await facade.readmodel<AuthIndex>(READMODELS.authIndex).identitiesOf(accountUuid);
  const tenants = facade.readmodel<TenantProjection>(READMODELS.tenant);
  const out: AccountIdentity[] = [];
  for (const r of refs) {
    const t = await tenants.getModel(r.tenantUuid);
    if (t !== undefined && !t.model.removed) out.push({ identityUuid: r.identityUuid, tenantUuid: r.tenantUuid, tenantName: t.model.name });
  }
  return out;
}

/** Attaches the Identity domain's commands and queries in one facade, with its settings (see registerDefaults). */
export function installIdentity(d: DomainInstaller, s: DefaultsSettings): void {
  d.handleCommand(CreateIdentity, async (ctx, _cmd, p) => {
    const tenantUuid = scopeTenantOf(ctx.reqCtx, p.tenantUuid);
    await assertTenantAccess(ctx.facade, ctx.reqCtx, tenantUuid);
    const identityUuid = identityUuidOf(tenantUuid, p.accountUuid);
    const identity = await ctx.aggregates.load(IdentityAggregate, identityUuid);
    if (identity.version > 0 && !identity.state.removed)
      throw new MnemeError("CONFLICT", `account ${p.accountUuid} is a member of tenant ${tenantUuid} already`);
    const [account, tenant] = await Promise.all([
      ctx.aggregates.load(AccountAggregate, p.accountUuid),
      ctx.aggregates.load(TenantAggregate, tenantUuid),
    ]);
    if (account.version === 0 || account.state.removed) throw new MnemeError("NOT_FOUND", `account ${p.accountUuid} does not exist`);
    if (tenant.version === 0 || tenant.state.removed) throw new MnemeError("NOT_FOUND", `tenant ${tenantUuid} does not exist`);
    return {
      events: [IdentityCreated.create(identityUuid, { accountUuid: p.accountUuid, tenantUuid }, { tenantUuid })],
      result: { identityUuid },
    };
  });

  d.handleCommand(RemoveIdentity, async (ctx, _cmd, p) => {
    const identity = await loadLiveIdentity(ctx.aggregates, p.identityUuid);
    await assertSeesObject(ctx.facade, ctx.reqCtx, identity.state.tenantUuid, `identity ${p.identityUuid}`);
    if (p.identityUuid === s.adminIdentityUuid)
      throw new MnemeError("INVALID_ACTION", "the bootstrapped administrator's identity cannot be removed");
    return [IdentityRemoved.create(p.identityUuid, {}, { tenantUuid: identity.state.tenantUuid })];
  });

  d.handleCommand(AssignGroup, async (ctx, _cmd, p) => {
    const identity = await loadLiveIdentity(ctx.aggregates, p.identityUuid);
    await assertSeesObject(ctx.facade, ctx.reqCtx, identity.state.tenantUuid, `identity ${p.identityUuid}`);
    const group = await loadLiveGroup(ctx.aggregates, p.groupUuid);
    // Another tenant's group answers as if it did not exist (the same words as loadLiveGroup's).
    if (group.state.tenantUuid !== identity.state.tenantUuid) throw new MnemeError("NOT_FOUND", `group ${p.groupUuid} does not exist`);
    await assertHolds(ctx.facade, ctx.reqCtx, group.state.permissions, `assigning group ${p.groupUuid}`);
    if (identity.state.groupUuids.includes(p.groupUuid)) return [];
    return [IdentityGroupAssigned.create(p.identityUuid, { groupUuid: p.groupUuid }, { tenantUuid: identity.state.tenantUuid })];
  });

  d.handleCommand(UnassignGroup, async (ctx, _cmd, p) => {
    const identity = await loadLiveIdentity(ctx.aggregates, p.identityUuid);
    await assertSeesObject(ctx.facade, ctx.reqCtx, identity.state.tenantUuid, `identity ${p.identityUuid}`);
    if (p.identityUuid === s.adminIdentityUuid && p.groupUuid === s.systemAdminGroupUuid) {
      throw new MnemeError("INVALID_ACTION", "the bootstrapped administrator keeps the system-admin group");
    }
    if (!identity.state.groupUuids.includes(p.groupUuid)) return [];
    return [IdentityGroupUnassigned.create(p.identityUuid, { groupUuid: p.groupUuid }, { tenantUuid: identity.state.tenantUuid })];
  });

  d.handleQuery(GetIdentity, async (ctx, _q, p) => {
    const projection = ctx.readmodel<IdentityProjection>(READMODELS.identity);
    const model = found(await projection.getModel(p.identityUuid), `identity ${p.identityUuid}`);
    await assertSeesObject(ctx.facade, ctx.reqCtx, model.model.tenantUuid, `identity ${p.identityUuid}`);
    return p.includeHistory === true
      ? found(await projection.getModel(p.identityUuid, { includeHistory: true }), `identity ${p.identityUuid}`)
      : model;
  });

  d.handleQuery(ListIdentities, async (ctx, _q, p) => {
    const tenantUuid = scopeTenantOf(ctx.reqCtx, p.tenantUuid);
    await assertTenantAccess(ctx.facade, ctx.reqCtx, tenantUuid);
    return ctx.readmodel<IdentityProjection>(READMODELS.identity).getModelList(listOptions(p, tenantUuid));
  });

  d.handleQuery(ListAccountIdentities, async (ctx, _q, p) => ({ items: await accountIdentities(ctx.facade, p.accountUuid) }));
}
