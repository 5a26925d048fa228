/**
 * The `Tenant` domain: the isolation units of an application. Every identity
 * and group belongs to one tenant; the system tenant is bootstrapped and holds
 * the system administrators.
 */
import { newUuid } from "../model/clock.js";
import { MnemeError } from "../model/errors.js";
import type { DomainInstaller } from "../model/domain-install.js";
import type { Facade } from "../app/facade.js";
import { ProjectionReadmodel, type ProjectionList, type ProjectionModel } from "../readmodel/projection-readmodel.js";
import { cleanName, includeHistorySchema, nameSchema, objectSchema, pageProperties, uuidSchema } from "./payload-schemas.js";
import { systemAdministrator } from "./permission-functions.js";
import { found, listOptions } from "./query-helpers.js";
import { READMODELS } from "./readmodel-names.js";
import type { DefaultsSettings } from "./settings.js";
import { assertTenantAccess } from "./sender.js";
import { TenantCreated, TenantRenamed, TenantRemoved, type TenantModel, Tenant, TenantAggregate } from "./tenant-domain.js";

export { TenantCreated, TenantRenamed, TenantRemoved, type TenantModel, Tenant, TenantAggregate } from "./tenant-domain.js";

/** Payload of the `Tenant.CreateTenant` command. */
export interface CreateTenant {
  tenantUuid?: string;
  name: string;
}
/** Payload of the `Tenant.RenameTenant` command. */
export interface RenameTenant {
  tenantUuid: string;
  name: string;
}
/** Payload of the `Tenant.RemoveTenant` command. */
export interface RemoveTenant {
  tenantUuid: string;
}
/** Payload of the `Tenant.GetTenant` query. */
export interface GetTenant {
  tenantUuid: string;
  includeHistory?: boolean;
}
/** Payload of the `Tenant.ListTenants` query. */
export interface ListTenants {
  page?: number;
  pageSize?: number;
  includeHistory?: boolean;
}

/** The `Tenant.CreateTenant` command token. */
export const CreateTenant = Tenant.command<CreateTenant, { tenantUuid: string }>("CreateTenant", {
  description: "Create a tenant (system administrators)",
  permission: systemAdministrator,
  schema: objectSchema({ tenantUuid: uuidSchema, name: nameSchema }, ["name"]),
});
/** The `Tenant.RenameTenant` command token. */
export const RenameTenant = Tenant.command<RenameTenant>("RenameTenant", {
  description: "Rename a tenant (its own members with the grant, or system administrators)",
  schema: objectSchema({ tenantUuid: uuidSchema, name: nameSchema }, ["tenantUuid", "name"]),
});
/** The `Tenant.RemoveTenant` command token. */
export const RemoveTenant = Tenant.command<RemoveTenant>("RemoveTenant", {
  description: "Remove a tenant (not the system tenant); its identities stop authorizing",
  schema: objectSchema({ tenantUuid: uuidSchema }, ["tenantUuid"]),
});
/** The `Tenant.GetTenant` query token. */
export const GetTenant = Tenant.query<GetTenant, ProjectionModel<TenantModel>>("GetTenant", {
  description: "One tenant, with its history on request",
  schema: objectSchema({ tenantUuid: uuidSchema, includeHistory: includeHistorySchema }, ["tenantUuid"]),
});
/** The `Tenant.ListTenants` query token. */
export const ListTenants = Tenant.query<ListTenants, ProjectionList<TenantModel>>("ListTenants", {
  description: "A page of tenants (system administrators)",
  permission: systemAdministrator,
  // Live (the dashboard names tenants with it): a tenant's events carry its own tenant, so a batch of any tenant counts.
  live: { readmodels: [READMODELS.tenant], allTenants: true },
  schema: objectSchema(pageProperties),
});

/** The Tenant readmodel: one model per tenant, history on demand. */
export class TenantProjection extends ProjectionReadmodel<TenantModel> {
  constructor(facade: Facade) {
    super(facade, { aggregate: TenantAggregate, name: READMODELS.tenant });
  }
}

/** Attaches the Tenant domain's commands and queries in one facade, with its settings (see registerDefaults). */
export function installTenant(d: DomainInstaller, s: DefaultsSettings): void {
  d.handleCommand(CreateTenant, async (ctx, _cmd, p) => {
    const tenantUuid = p.tenantUuid ?? newUuid();
    const tenant = await ctx.aggregates.load(TenantAggregate, tenantUuid);
    if (tenant.version > 0) throw new MnemeError("CONFLICT", `tenant ${tenantUuid} exists already`);
    return {
      events: [TenantCreated.create(tenantUuid, { name: cleanName(p.name), system: false }, { tenantUuid })],
      result: { tenantUuid },
    };
  });

  d.handleCommand(RenameTenant, async (ctx, _cmd, p) => {
    await assertTenantAccess(ctx.facade, ctx.reqCtx, p.tenantUuid);
    const tenant = await ctx.aggregates.load(TenantAggregate, p.tenantUuid);
    if (tenant.version === 0 || tenant.state.removed) throw new MnemeError("NOT_FOUND", `tenant ${p.tenantUuid} does not exist`);
    const name = cleanName(p.name);
    if (name === tenant.state.name) return [];
    return [TenantRenamed.create(p.tenantUuid, { name }, { tenantUuid: p.tenantUuid })];
  });

  d.handleCommand(RemoveTenant, async (ctx, _cmd, p) => {
    await assertTenantAccess(ctx.facade, ctx.reqCtx, p.tenantUuid);
    if (p.tenantUuid === s.systemTenantUuid) throw new MnemeError("INVALID_ACTION", "the system tenant cannot be removed");
    const tenant = await ctx.aggregates.load(TenantAggregate, p.tenantUuid);
    if (tenant.version === 0) throw new MnemeError("NOT_FOUND", `tenant ${p.tenantUuid} does not exist`);
    if (tenant.state.removed) return [];
    return [TenantRemoved.create(p.tenantUuid, {}, { tenantUuid: p.tenantUuid })];
  });

  d.handleQuery(GetTenant, async (ctx, _q, p) => {
    await assertTenantAccess(ctx.facade, ctx.reqCtx, p.tenantUuid);
    const projection = ctx.readmodel<TenantProjection>(READMODELS.tenant);
    return found(await projection.getModel(p.tenantUuid, { includeHistory: p.includeHistory === true }), `tenant ${p.tenantUuid}`);
  });

  d.handleQuery(ListTenants, (ctx, _q, p) => ctx.readmodel<TenantProjection>(READMODELS.tenant).getModelList(listOptions(p)));
}
