/**
 * registerDefaults: installs the built-in Tenant, Account, Identity and Group
 * domains, their readmodels, the store permissions, the group-based
 * authorizer, and the bootstrap of the system tenant and its administrator.
 */
import { hasSenderDirectory } from "../app/sender-directory.js";
import { MnemeError } from "../model/errors.js";
import type { Facade } from "../app/facade.js";
import { registerStorePermissions } from "../permissions/store-permissions.js";
import { AccountProjection, installAccount } from "./account.js";
import { AccountEraser } from "./account-eraser.js";
import { Account } from "./account-domain.js";
import { AuthIndex } from "./auth-index.js";
import { createDefaultAuthorizer } from "./authorizer.js";
import { createBootstrap } from "./bootstrap.js";
import { GroupProjection, installGroup } from "./group.js";
import { Group } from "./group-domain.js";
import { IdentityProjection, installIdentity } from "./identity.js";
import { Identity } from "./identity-domain.js";
import { READMODELS } from "./readmodel-names.js";
import { installSessions, SessionProjection } from "./session.js";
import { type DefaultsInfo, type DefaultsOptions, resolveDefaultsSettings } from "./settings.js";
import { installTenant, Tenant, TenantProjection } from "./tenant.js";

/** The built-in domains' definitions, in registration order. */
export const DEFAULT_DOMAINS = Object.freeze([Tenant, Account, Identity, Group]);

/**
 * Installs the built-in domains on a facade that has not started: each
 * domain's handlers get this facade's settings (from `opts`) as a parameter,
 * so facades never share them. Resolves at once with the ids of the system
 * tenant, the admin account and its identity (derived from the app name and
 * the admin email, so every start finds the same ones); the bootstrap itself
 * runs inside `facade.start()` and changes nothing when it ran before on the
 * same store (a sharded app's non-home shard, whose senders live on home,
 * runs none).
 * @example
 * const facade = createFacade({ appName: "shop", backend: createSqliteBackends({ filename: "shop.db" }) });
 * const { adminAccountUuid } = await registerDefaults(facade, { admin: { email: "admin@example.org", password } });
 * await facade.start();
 */
export async function registerDefaults(facade: Facade, opts: DefaultsOptions): Promise<DefaultsInfo> {
  if (facade.state !== "new") throw new MnemeError("INVALID_STATE", "registerDefaults must be called before facade.start()");
  const { settings, admin } = resolveDefaultsSettings(facade, opts);
  // Check every name first, so a clash leaves the facade as it was.
  for (const d of DEFAULT_DOMAINS) {
    if (facade.domains.has(d.name))
      throw new MnemeError("INVALID_DOMAIN", `registerDefaults: a domain named ${d.name} is registered already`);
  }
  for (const name of Object.values(READMODELS)) {
    if (facade.eventHandlers.has(name))
      throw new MnemeError("INVALID_EVENT_HANDLER", `registerDefaults: an event handler named ${name} is registered already`);
  }
  const bootstrap = createBootstrap(settings, admin);
  facade
    .registerDomain(Tenant, (d) => {
      installTenant(d, settings);
      bootstrap.install(d);
    })
    .registerDomain(Account, (d) => {
      installAccount(d, settings);
      installSessions(d, settings);
    })
    .registerDomain(Identity, (d) => installIdentity(d, settings))
    .registerDomain(Group, (d) => installGroup(d, settings));
  facade.registerReadmodel(new TenantProjection(facade));
  facade.registerReadmodel(new AccountProjection(facade));
  facade.registerReadmodel(new SessionProjection(facade, settings));
  facade.registerReadmodel(new IdentityProjection(facade));
  facade.registerReadmodel(new GroupProjection(facade));
  facade.registerReadmodel(new AuthIndex(facade));
  facade.registerReadmodel(new AccountEraser(facade));
  registerStorePermissions(facade);
  // An authorizer the application installed before stays in force, after the group check.
  facade.permissions.setAuthorizer(createDefaultAuthorizer(facade, facade.permissions.authorizer));
  // A facade whose senders live elsewhere (a sharded app's non-home shard) gets no admin of its own: it would never be read.
  if (!hasSenderDirectory(facade)) facade.onStart((f) => bootstrap.run(f));
  return {
    systemTenantUuid: settings.systemTenantUuid,
    adminAccountUuid: settings.adminAccountUuid,
    adminIdentityUuid: settings.adminIdentityUuid,
    systemAdminGroupUuid: settings.systemAdminGroupUuid,
  };
}
