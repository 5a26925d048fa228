/**
 * The `Group` domain: a named set of permission names within a tenant. An
 * identity holds what its groups hold; the default authorizer grants a
 * command or query when one of them holds `<Domain>.<Command>`.
 */
import { newUuid } from "../model/clock.js";
import type { AggregateLoader, LoadedAggregate } from "../model/context.js";
import { MnemeError } from "../model/errors.js";
import type { DomainInstaller } from "../model/domain-install.js";
import type { Facade } from "../app/facade.js";
import type { FacadeHandle } from "../model/facade-handle.js";
import { ProjectionReadmodel, type ProjectionList, type ProjectionModel } from "../readmodel/projection-readmodel.js";
import {
  cleanName,
  includeHistorySchema,
  nameSchema,
  objectSchema,
  pageProperties,
  permissionNameSchema,
  uuidSchema,
} from "./payload-schemas.js";
import { found, listOptions } from "./query-helpers.js";
import { READMODELS } from "./readmodel-names.js";
import type { DefaultsSettings } from "./settings.js";
import { assertHolds, assertSeesObject, assertTenantAccess, scopeTenantOf } from "./sender.js";
import { TenantAggregate } from "./tenant-domain.js";
import {
  GroupCreated,
  GroupRenamed,
  GroupPermissionAdded,
  GroupPermissionRemoved,
  GroupRemoved,
  type GroupModel,
  Group,
  GroupAggregate,
} from "./group-domain.js";

/** Payload of the `Group.CreateGroup` command. */
export interface CreateGroup {
  groupUuid?: string;
  tenantUuid?: string;
  name: string;
  permissions?: string[];
}
/** Payload of the `Group.RenameGroup` command. */
export interface RenameGroup {
  groupUuid: string;
  name: string;
}
/** Payload of the `Group.AddGroupPermission` command. */
export interface AddGroupPermission {
  groupUuid: string;
  permission: string;
}
/** Payload of the `Group.RemoveGroupPermission` command. */
export interface RemoveGroupPermission {
  groupUuid: string;
  permission: string;
}
/** Payload of the `Group.RemoveGroup` command. */
export interface RemoveGroup {
  groupUuid: string;
}
/** Payload of the `Group.GetGroup` query. */
export interface GetGroup {
  groupUuid: string;
  includeHistory?: boolean;
}
/** Payload of the `Group.ListGroups` query. */
export interface ListGroups {
  tenantUuid?: string;
  page?: number;
  pageSize?: number;
  includeHistory?: boolean;
}

const tenantScoped = "(members of the group's tenant with the grant, or system administrators)";
/** The `Group.CreateGroup` command token. */
export const CreateGroup = Group.command<CreateGroup, { groupUuid: string }>("CreateGroup", {
  description: `Create a group in a tenant ${tenantScoped}`,
  schema: objectSchema(
    {
      groupUuid: uuidSchema,
      tenantUuid: uuidSchema,
      name: nameSchema,
      permissions: { type: "array", items: permissionNameSchema, maxItems: 1000, uniqueItems: true },
    },
    ["name"],
  ),
});
/** The `Group.RenameGroup` command token. */
export const RenameGroup = Group.command<RenameGroup>("RenameGroup", {
  description: `Rename a group ${tenantScoped}`,
  schema: objectSchema({ groupUuid: uuidSchema, name: nameSchema }, ["groupUuid", "name"]),
});
/** The `Group.AddGroupPermission` command token. */
export const AddGroupPermission = Group.command<AddGroupPermission>("AddGroupPermission", {
  description: `Add a permission to a group; the sender must hold it ${tenantScoped}`,
  schema: objectSchema({ groupUuid: uuidSchema, permission: permissionNameSchema }, ["groupUuid", "permission"]),
});
/** The `Group.RemoveGroupPermission` command token. */
export const RemoveGroupPermission = Group.command<RemoveGroupPermission>("RemoveGroupPermission", {
  description: `Remove a permission from a group ${tenantScoped}`,
  schema: objectSchema({ groupUuid: uuidSchema, permission: permissionNameSchema }, ["groupUuid", "permission"]),
});
/** The `Group.RemoveGroup` command token. */
export const RemoveGroup = Group.command<RemoveGroup>("RemoveGroup", {
  description: `Remove a group (not system-admin) ${tenantScoped}`,
  schema: objectSchema({ groupUuid: uuidSchema }, ["groupUuid"]),
});
/** The `Group.GetGroup` query token. */
export const GetGroup = Group.query<GetGroup, ProjectionModel<GroupModel>>("GetGroup", {
  description: "One group, with its history on request",
  schema: objectSchema({ groupUuid: uuidSchema, includeHistory: includeHistorySchema }, ["groupUuid"]),
});
/** The `Group.ListGroups` query token. */
export const ListGroups = Group.query<ListGroups, ProjectionList<GroupModel>>("ListGroups", {
  description: "A page of the groups of a tenant (default: the sender's)",
  schema: objectSchema({ tenantUuid: uuidSchema, ...pageProperties }),
});

/** The Group readmodel: one model per group, listed by tenant, history on demand. */
export class GroupProjection extends ProjectionReadmodel<GroupModel> {
  constructor(facade: Facade) {
    super(facade, { aggregate: GroupAggregate, name: READMODELS.group });
  }
}

/**
 * Rejects a permission name that grants nothing: `*`, `Domain.*` of a
 * registered domain, or a registered `Domain.Type` (a typo would otherwise fail silently).
 */
export function checkPermissionName(facade: FacadeHandle, permission: string): void {
  if (permission === "*") return;
  const dot = permission.indexOf(".");
  const domain = dot > 0 ? permission.slice(0, dot) : "";
  const type = dot > 0 ? permission.slice(dot + 1) : "";
  const known = type === "*" ? facade.permissions.list({ domain }).length > 0 : domain !== "" && facade.permissions.has(domain, type);
  if (!known) {
    throw new MnemeError(
      "VALIDATION_FAILED",
      `permission ${JSON.stringify(permission)} is not registered (use "Domain.Type", "Domain.*" or "*")`,
      {
        details: [{ pointer: "/permission", message: "is not a registered permission" }],
      },
    );
  }
}

/** Loads a group that exists and is not removed (in a command: locks it); NOT_FOUND otherwise. */
export async function loadLiveGroup(loader: AggregateLoader, groupUuid: string): Promise<LoadedAggregate<GroupModel>> {
  const group = await loader.load(GroupAggregate, groupUuid);
  if (group.version === 0 || group.state.removed) throw new MnemeError("NOT_FOUND", `group ${groupUuid} does not exist`);
  return group;
}

/** Attaches the Group domain's commands and queries in one facade, with its settings (see registerDefaults). */
export function installGroup(d: DomainInstaller, s: DefaultsSettings): void {
  d.handleCommand(CreateGroup, async (ctx, _cmd, p) => {
    const tenantUuid = scopeTenantOf(ctx.reqCtx, p.tenantUuid);
    await assertTenantAccess(ctx.facade, ctx.reqCtx, tenantUuid);
    const groupUuid = p.groupUuid ?? newUuid();
    const group = await ctx.aggregates.load(GroupAggregate, groupUuid);
    if (group.version > 0) throw new MnemeError("CONFLICT", `group ${groupUuid} exists already`);
    const tenant = await ctx.aggregates.load(TenantAggregate, tenantUuid);
    if (tenant.version === 0 || tenant.state.removed) throw new MnemeError("NOT_FOUND", `tenant ${tenantUuid} does not exist`);
    const permissions = [...new Set(p.permissions ?? [])];
    for (const perm of permissions) checkPermissionName(ctx.facade, perm);
    await assertHolds(ctx.facade, ctx.reqCtx, permissions, "creating a group with these permissions");
    return {
      events: [GroupCreated.create(groupUuid, { tenantUuid, name: cleanName(p.name), permissions }, { tenantUuid })],
      result: { groupUuid },
    };
  });

  d.handleCommand(RenameGroup, async (ctx, _cmd, p) => {
    const group = await loadLiveGroup(ctx.aggregates, p.groupUuid);
    await assertSeesObject(ctx.facade, ctx.reqCtx, group.state.tenantUuid, `group ${p.groupUuid}`);
    const name = cleanName(p.name);
    if (name === group.state.name) return [];
    return [GroupRenamed.create(p.groupUuid, { name }, { tenantUuid: group.state.tenantUuid })];
  });

  d.handleCommand(AddGroupPermission, async (ctx, _cmd, p) => {
    const group = await loadLiveGroup(ctx.aggregates, p.groupUuid);
    await assertSeesObject(ctx.facade, ctx.reqCtx, group.state.tenantUuid, `group ${p.groupUuid}`);
    checkPermissionName(ctx.facade, p.permission);
    await assertHolds(ctx.facade, ctx.reqCtx, [p.permission], `adding ${p.permission} to a group`);
    if (group.state.permissions.includes(p.permission)) return [];
    return [GroupPermissionAdded.create(p.groupUuid, { permission: p.permission }, { tenantUuid: group.state.tenantUuid })];
  });

  d.handleCommand(RemoveGroupPermission, async (ctx, _cmd, p) => {
    const group = await loadLiveGroup(ctx.aggregates, p.groupUuid);
    await assertSeesObject(ctx.facade, ctx.reqCtx, group.state.tenantUuid, `group ${p.groupUuid}`);
    if (p.groupUuid === s.systemAdminGroupUuid && p.permission === "*") {
      throw new MnemeError("INVALID_ACTION", "the system-admin group always holds every permission");
    }
    if (!group.state.permissions.includes(p.permission)) return [];
    return [GroupPermissionRemoved.create(p.groupUuid, { permission: p.permission }, { tenantUuid: group.state.tenantUuid })];
  });

  d.handleCommand(RemoveGroup, async (ctx, _cmd, p) => {
    const group = await loadLiveGroup(ctx.aggregates, p.groupUuid);
    await assertSeesObject(ctx.facade, ctx.reqCtx, group.state.tenantUuid, `group ${p.groupUuid}`);
    if (p.groupUuid === s.systemAdminGroupUuid) throw new MnemeError("INVALID_ACTION", "the system-admin group cannot be removed");
    return [GroupRemoved.create(p.groupUuid, {}, { tenantUuid: group.state.tenantUuid })];
  });

  d.handleQuery(GetGroup, async (ctx, _q, p) => {
    const projection = ctx.readmodel<GroupProjection>(READMODELS.group);
    const model = found(await projection.getModel(p.groupUuid), `group ${p.groupUuid}`);
    await assertSeesObject(ctx.facade, ctx.reqCtx, model.model.tenantUuid, `group ${p.groupUuid}`);
    // History is read only once access is settled.
    return p.includeHistory === true
      ? found(await projection.getModel(p.groupUuid, { includeHistory: true }), `group ${p.groupUuid}`)
      : model;
  });

  d.handleQuery(ListGroups, async (ctx, _q, p) => {
    const tenantUuid = scopeTenantOf(ctx.reqCtx, p.tenantUuid);
    await assertTenantAccess(ctx.facade, ctx.reqCtx, tenantUuid);
    return ctx.readmodel<GroupProjection>(READMODELS.group).getModelList(listOptions(p, tenantUuid));
  });
}
