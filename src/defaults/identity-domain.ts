/**
 * The `Identity` domain's definitions: its events, the identity model and the
 * aggregate built from them. Commands, queries, handlers and the readmodel live
 * in identity.ts.
 */
import { defineDomain } from "../model/domain.js";

/** Payload of the `Identity.IdentityCreated` event. */
export interface IdentityCreated {
  accountUuid: string;
  tenantUuid: string;
}
/** Payload of the `Identity.IdentityRemoved` event. */
export type IdentityRemoved = Record<string, never>;
/** Payload of the `Identity.IdentityGroupAssigned` event. */
export interface IdentityGroupAssigned {
  groupUuid: string;
}
/** Payload of the `Identity.IdentityGroupUnassigned` event. */
export interface IdentityGroupUnassigned {
  groupUuid: string;
}

/** An identity as served. */
export interface IdentityModel {
  accountUuid: string;
  tenantUuid: string;
  groupUuids: string[];
  removed: boolean;
}

/** An entry of ListAccountIdentities (and of Login's result). */
export interface AccountIdentity {
  identityUuid: string;
  tenantUuid: string;
  tenantName: string;
}

/** Identities: memberships of accounts in tenants. */
export const Identity = defineDomain("Identity", { description: "Identities: an account's membership of a tenant, with its groups" });

/** The `Identity.IdentityCreated` event token. */
export const IdentityCreated = Identity.event<IdentityCreated>("IdentityCreated", {
  description: "An account became a member of a tenant",
});
/** The `Identity.IdentityRemoved` event token. */
export const IdentityRemoved = Identity.event<IdentityRemoved>("IdentityRemoved", {
  description: "An account's membership of a tenant ended",
});
/** The `Identity.IdentityGroupAssigned` event token. */
export const IdentityGroupAssigned = Identity.event<IdentityGroupAssigned>("IdentityGroupAssigned", {
  description: "An identity was given a group",
});
/** The `Identity.IdentityGroupUnassigned` event token. */
export const IdentityGroupUnassigned = Identity.event<IdentityGroupUnassigned>("IdentityGroupUnassigned", {
  description: "A group was taken from an identity",
});

/** The `Identity.Identity` aggregate: its state folded from its events. */
export const IdentityAggregate = Identity.aggregate<IdentityModel>("Identity", {
  // Built-in aggregates are global: their handlers check tenant access themselves (answering NOT_FOUND across tenants).
  tenancy: "global",
  initialState: () => ({ accountUuid: "", tenantUuid: "", groupUuids: [], removed: false }),
  evolve: {
    // A membership created again after its removal starts without groups.
    IdentityCreated: (_s, p: IdentityCreated) => ({ accountUuid: p.accountUuid, tenantUuid: p.tenantUuid, groupUuids: [], removed: false }),
    IdentityRemoved: (s) => ({ ...s, groupUuids: [], removed: true }),
    IdentityGroupAssigned: (s, p: IdentityGroupAssigned) =>
      s.groupUuids.includes(p.groupUuid) ? s : { ...s, groupUuids: [...s.groupUuids, p.groupUuid] },
    IdentityGroupUnassigned: (s, p: IdentityGroupUnassigned) => ({ ...s, groupUuids: s.groupUuids.filter((g) => g !== p.groupUuid) }),
  },
});
