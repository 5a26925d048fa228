/**
 * The `Group` domain's definitions: its events, the group model and the
 * aggregate built from them. Commands, queries, handlers and the readmodel live
 * in group.ts.
 */
import { defineDomain } from "../model/domain.js";

/** Payload of the `Group.GroupCreated` event. */
export interface GroupCreated {
  tenantUuid: string;
  name: string;
  permissions: string[];
}
/** Payload of the `Group.GroupRenamed` event. */
export interface GroupRenamed {
  name: string;
}
/** Payload of the `Group.GroupPermissionAdded` event. */
export interface GroupPermissionAdded {
  permission: string;
}
/** Payload of the `Group.GroupPermissionRemoved` event. */
export interface GroupPermissionRemoved {
  permission: string;
}
/** Payload of the `Group.GroupRemoved` event. */
export type GroupRemoved = Record<string, never>;

/** A group as served. */
export interface GroupModel {
  tenantUuid: string;
  name: string;
  /** `Domain.Type`, `Domain.*` or `*`. */
  permissions: string[];
  removed: boolean;
}

/** Groups: named permission sets within a tenant. */
export const Group = defineDomain("Group", { description: "Groups: named sets of permissions within a tenant (RBAC)" });

/** The `Group.GroupCreated` event token. */
export const GroupCreated = Group.event<GroupCreated>("GroupCreated", { description: "A group was created" });
/** The `Group.GroupRenamed` event token. */
export const GroupRenamed = Group.event<GroupRenamed>("GroupRenamed", { description: "A group was renamed" });
/** The `Group.GroupPermissionAdded` event token. */
export const GroupPermissionAdded = Group.event<GroupPermissionAdded>("GroupPermissionAdded", {
  description: "A permission was added to a group",
});
/** The `Group.GroupPermissionRemoved` event token. */
export const GroupPermissionRemoved = Group.event<GroupPermissionRemoved>("GroupPermissionRemoved", {
  description: "A permission was removed from a group",
});
/** The `Group.GroupRemoved` event token. */
export const GroupRemoved = Group.event<GroupRemoved>("GroupRemoved", { description: "A group was removed" });

/** The `Group.Group` aggregate: its state folded from its events. */
export const GroupAggregate = Group.aggregate<GroupModel>("Group", {
  // Built-in aggregates are global: their handlers check tenant access themselves (answering NOT_FOUND across tenants).
  tenancy: "global",
  initialState: () => ({ tenantUuid: "", name: "", permissions: [], removed: false }),
  evolve: {
    GroupCreated: (_s, p: GroupCreated) => ({ tenantUuid: p.tenantUuid, name: p.name, permissions: [...p.permissions], removed: false }),
    GroupRenamed: (s, p: GroupRenamed) => ({ ...s, name: p.name }),
    GroupPermissionAdded: (s, p: GroupPermissionAdded) =>
      s.permissions.includes(p.permission) ? s : { ...s, permissions: [...s.permissions, p.permission] },
    GroupPermissionRemoved: (s, p: GroupPermissionRemoved) => ({ ...s, permissions: s.permissions.filter((x) => x !== p.permission) }),
    GroupRemoved: (s) => ({ ...s, removed: true }),
  },
});
