/**
 * The `Tenant` domain's definitions: its events, the tenant model and the
 * aggregate built from them. Commands, queries, handlers and the readmodel live
 * in tenant.ts.
 */
import { defineDomain } from "../model/domain.js";

/** Payload of the `Tenant.TenantCreated` event. */
export interface TenantCreated {
  name: string;
  system: boolean;
}
/** Payload of the `Tenant.TenantRenamed` event. */
export interface TenantRenamed {
  name: string;
}
/** Payload of the `Tenant.TenantRemoved` event. */
export type TenantRemoved = Record<string, never>;

/** A tenant as served. */
export interface TenantModel {
  name: string;
  /** True for the bootstrapped system tenant. */
  system: boolean;
  removed: boolean;
}

/** Tenants: create, rename, remove; lists for system administrators. */
export const Tenant = defineDomain("Tenant", { description: "Tenants: the isolation units; identities and groups belong to one" });

/** The `Tenant.TenantCreated` event token. */
export const TenantCreated = Tenant.event<TenantCreated>("TenantCreated", { description: "A tenant was created" });
/** The `Tenant.TenantRenamed` event token. */
export const TenantRenamed = Tenant.event<TenantRenamed>("TenantRenamed", { description: "A tenant was renamed" });
/** The `Tenant.TenantRemoved` event token. */
export const TenantRemoved = Tenant.event<TenantRemoved>("TenantRemoved", { description: "A tenant was removed" });

/** The `Tenant.Tenant` aggregate: its state folded from its events. */
export const TenantAggregate = Tenant.aggregate<TenantModel>("Tenant", {
  tenancy: "global",
  initialState: () => ({ name: "", system: false, removed: false }),
  evolve: {
    TenantCreated: (_s, p: TenantCreated) => ({ name: p.name, system: p.system, removed: false }),
    TenantRenamed: (s, p: TenantRenamed) => ({ ...s, name: p.name }),
    TenantRemoved: (s) => ({ ...s, removed: true }),
  },
});
