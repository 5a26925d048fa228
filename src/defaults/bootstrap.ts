/**
 * The bootstrap of the built-in domains: the system tenant, its `system-admin`
 * group (holding `*`: every permission, store permissions included), the admin
 * account and its identity in the system tenant. It runs inside
 * facade.start(), appends everything in one command (all or nothing), and does
 * nothing at all when the system tenant exists already. `createBootstrap`
 * makes one facade's part: the install step of its command (part of the Tenant
 * domain's) and the start hook, sharing the request contexts it trusts.
 */
import { isMnemeError, MnemeError } from "../model/errors.js";
import type { Facade } from "../app/facade.js";
import type { DomainInstaller } from "../model/domain-install.js";
import { newPermissionCmdFunc } from "../model/permission.js";
import type { CommandContext } from "../model/context.js";
import type { CommandHandlerResult } from "../model/domain.js";
import type { RequestContext } from "../model/types.js";
import { AccountAggregate, AccountRegistered, CredentialSet, EmailClaimed } from "./account-domain.js";
import { GroupAggregate, GroupCreated } from "./group-domain.js";
import { loadEmailClaim } from "./email-claims.js";
import { credentialUuidOf } from "./ids.js";
import { IdentityAggregate, IdentityCreated, IdentityGroupAssigned } from "./identity-domain.js";
import { hashPassword } from "./password.js";
import { emailSchema, nameSchema, objectSchema, accountNameSchema, passwordSchema } from "./payload-schemas.js";
import { trustedContextsOnly } from "./permission-functions.js";
import type { AdminCredentials, DefaultsSettings } from "./settings.js";
import { Tenant, TenantAggregate, TenantCreated } from "./tenant.js";

/** The name of the bootstrapped group of system administrators. */
export const SYSTEM_ADMIN_GROUP_NAME = "system-admin";

/** Payload of the `Tenant.BootstrapSystemTenant` command. */
export interface BootstrapSystemTenant {
  email: string;
  password: string;
  name: string;
  tenantName: string;
}

/**
 * Internal: dispatched by the bootstrap only. The definition refuses every
 * caller; the install step gives each facade a permission that lets its own
 * bootstrap's request context through.
 */
export const BootstrapSystemTenant = Tenant.command<BootstrapSystemTenant, { created: boolean }>("BootstrapSystemTenant", {
  description: "Create the system tenant, the system-admin group and the admin account and identity (runs inside facade.start() only)",
  permission: trustedContextsOnly(new WeakSet()),
  secretFields: ["password", "email", "name"],
  schema: objectSchema({ email: emailSchema, password: passwordSchema, name: accountNameSchema, tenantName: nameSchema }, [
    "email",
    "password",
    "name",
    "tenantName",
  ]),
});

/** One facade's bootstrap: the install step of its command, and the start hook that dispatches it. */
export interface Bootstrap {
  /** Part of the Tenant domain's install step: BootstrapSystemTenant's handler and permission. */
  install(d: DomainInstaller): void;
  /** The start hook (`facade.onStart`). */
  run(facade: Facade): Promise<void>;
}

/** The bootstrap of one facade, with its settings and the first administrator's credentials. */
export function createBootstrap(s: DefaultsSettings, adminCredentials: AdminCredentials): Bootstrap {
  // Request contexts the bootstrap dispatches with (by identity: nothing about them is persisted).
  const trusted = new WeakSet<RequestContext>();
  // Kept until the bootstrap has run: the clear password stays in memory no longer than needed.
  let admin: AdminCredentials | undefined = adminCredentials;
  return {
    install(d) {
      d.registerPermission(
        newPermissionCmdFunc("Tenant", BootstrapSystemTenant.name, trustedContextsOnly(trusted), BootstrapSystemTenant.description),
      );
      d.handleCommand(BootstrapSystemTenant, (ctx, _cmd, p) => bootstrapEvents(ctx, s, p));
    },
    async run(facade) {
      if ((await facade.loadAggregate(TenantAggregate, s.systemTenantUuid)).version === 0) {
        if (admin === undefined) throw new MnemeError("INVALID_STATE", "the bootstrap ran already on this facade");
        // The events of the bootstrap carry the admin as sender, so their history shows who they are.
        const reqCtx: RequestContext = {
          senderAccountUuid: s.adminAccountUuid,
          senderIdentityUuid: s.adminIdentityUuid,
          senderTenantUuid: s.systemTenantUuid,
          attributes: { bootstrap: true },
        };
        trusted.add(reqCtx);
        try {
          await facade.dispatch(
            BootstrapSystemTenant,
            { email: admin.email, password: admin.password, name: admin.name, tenantName: s.systemTenantName },
            { reqCtx, waitToFinish: true },
          );
        } catch (e) {
          if (!isMnemeError(e, "CONFLICT") || (await facade.loadAggregate(TenantAggregate, s.systemTenantUuid)).version === 0) throw e;
        } finally {
          trusted.delete(reqCtx);
        }
      }
      // Kept until here so a start that failed can be retried.
      admin = undefined;
    },
  };
}

/** The events of the bootstrap, or nothing when the system tenant exists. */
async function bootstrapEvents(
  ctx: CommandContext,
  s: DefaultsSettings,
  p: BootstrapSystemTenant,
): Promise<CommandHandlerResult<{ created: boolean }>> {
  const tenant = await ctx.aggregates.load(TenantAggregate, s.systemTenantUuid);
  if (tenant.version > 0) return { result: { created: false } };
  const [claim, account] = await Promise.all([
    loadEmailClaim(ctx, s, p.email),
    ctx.aggregates.load(AccountAggregate, s.adminAccountUuid),
    ctx.aggregates.load(GroupAggregate, s.systemAdminGroupUuid),
    ctx.aggregates.load(IdentityAggregate, s.adminIdentityUuid),
  ]);
  const claimUuid = claim.claimUuid;
  if (claim.accountUuid !== "" || account.version > 0) {
    throw new MnemeError("CONFLICT", "cannot bootstrap: the admin email belongs to an existing account already");
  }
  const hash = await hashPassword(p.password, s.scrypt);
  const sys = { tenantUuid: s.systemTenantUuid };
  const none = { tenantUuid: "" };
  return {
    events: [
      TenantCreated.create(s.systemTenantUuid, { name: p.tenantName, system: true }, sys),
      EmailClaimed.create(claimUuid, { accountUuid: s.adminAccountUuid, email: p.email }, none),
      AccountRegistered.create(s.adminAccountUuid, { email: p.email, name: p.name, emailClaimUuid: claimUuid }, none),
      CredentialSet.create(credentialUuidOf(s.adminAccountUuid), { accountUuid: s.adminAccountUuid, ...hash }, none),
      GroupCreated.create(
        s.systemAdminGroupUuid,
        { tenantUuid: s.systemTenantUuid, name: SYSTEM_ADMIN_GROUP_NAME, permissions: ["*"] },
        sys,
      ),
      IdentityCreated.create(s.adminIdentityUuid, { accountUuid: s.adminAccountUuid, tenantUuid: s.systemTenantUuid }, sys),
      IdentityGroupAssigned.create(s.adminIdentityUuid, { groupUuid: s.systemAdminGroupUuid }, sys),
    ],
    result: { created: true },
  };
}
