/**
 * registerDefaults: the built-in Tenant, Account, Identity and Group domains,
 * their readmodels, the store permissions, the group-based authorizer, and the
 * bootstrap of the system tenant and its administrator.
 */
import { MnemeError } from "../model/errors.js";
import type { Facade } from "../app/facade.js";
import { registerStorePermissions } from "../permissions/store-permissions.js";
import { AccountProjection } from "./account.js";
import { AuthIndex } from "./auth-index.js";
import { createDefaultAuthorizer } from "./authorizer.js";
import { bootstrap } from "./bootstrap.js";
import { createDefaultsState, type DefaultsInfo, type DefaultsOptions } from "./defaults-state.js";
import { Group, GroupProjection } from "./group.js";
import { Identity, IdentityProjection } from "./identity.js";
import { READMODELS } from "./readmodel-names.js";
import { SessionProjection } from "./session.js";
import { Tenant, TenantProjection } from "./tenant.js";
import { Account } from "./account-domain.js";

/** The built-in domains, in registration order. */
export const DEFAULT_DOMAINS = Object.freeze([Tenant, Account, Identity, Group]);

/**
 * Registers the built-in domains on a facade that has not started. Resolves at
 * once with the ids of the system tenant, the admin account and its identity
 * (derived from the app name and the admin email, so every start finds the
 * same ones); the bootstrap itself runs inside `facade.start()` and changes
 * nothing when it ran before on the same store.
 * @example
 * const facade = createFacade({ appName: "shop", ...createSqliteBackends({ filename: "shop.db" }) });
 * const { adminAccountUuid } = await registerDefaults(facade, { admin: { email: "admin@example.org", password } });
 * await facade.start();
 */
export async function registerDefaults(facade: Facade, opts: DefaultsOptions): Promise<DefaultsInfo> {
  if (facade.state !== "new") throw new MnemeError("INVALID_STATE", "registerDefaults must be called before facade.start()");
  // Check every name first, so a clash leaves the facade as it was.
  for (const d of DEFAULT_DOMAINS) {
    if (facade.domains.has(d.name)) throw new MnemeError("INVALID_DOMAIN", `registerDefaults: a domain named ${d.name} is registered already`);
  }
  for (const name of Object.values(READMODELS)) {
    if (facade.eventHandlers.has(name)) throw new MnemeError("INVALID_EVENT_HANDLER", `registerDefaults: an event handler named ${name} is registered already`);
  }
  const state = createDefaultsState(facade, opts);
  for (const d of DEFAULT_DOMAINS) facade.registerDomain(d);
  facade
    .registerReadmodel(new TenantProjection(facade))
    .registerReadmodel(new AccountProjection(facade))
    .registerReadmodel(new SessionProjection(facade))
    .registerReadmodel(new IdentityProjection(facade))
    .registerReadmodel(new GroupProjection(facade))
    .registerReadmodel(new AuthIndex(facade));
  registerStorePermissions(facade);
  // An authorizer the application installed before stays in force, after the group check.
  facade.permissions.setAuthorizer(createDefaultAuthorizer(facade, facade.permissions.authorizer));
  facade.onStart(bootstrap);
  return {
    systemTenantUuid: state.systemTenantUuid,
    adminAccountUuid: state.adminAccountUuid,
    adminIdentityUuid: state.adminIdentityUuid,
    systemAdminGroupUuid: state.systemAdminGroupUuid,
  };
}
