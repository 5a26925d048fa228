/**
 * The `Account` domain's account commands and queries: register (anonymous),
 * change email or name, set the password, remove; get and list. Login and
 * logout are in session.ts.
 */
import { newUuid } from "../model/clock.js";
import type { CommandContext } from "../model/context.js";
import { MnemeError } from "../model/errors.js";
import type { DomainInstaller } from "../model/domain-install.js";
import type { Facade } from "../app/facade.js";
import type { NewEvent } from "../model/types.js";
import { anonymous } from "../model/permission.js";
import { ProjectionReadmodel, type ProjectionList, type ProjectionModel } from "../readmodel/projection-readmodel.js";
import {
  Account,
  AccountAggregate,
  type AccountModel,
  AccountEmailChanged,
  AccountNameChanged,
  AccountPasswordChanged,
  AccountRegistered,
  AccountRemoved,
  CredentialAggregate,
  CredentialSet,
  EmailClaimAggregate,
  EmailClaimed,
  EmailReleased,
  SessionEnded,
} from "./account-domain.js";
import type { AuthIndex } from "./auth-index.js";
import { loadEmailClaim } from "./email-claims.js";
import { credentialUuidOf, legacyEmailClaimUuidOf, normalizeEmail } from "./ids.js";
import { clearLoginFailures, noteLoginFailure, takeLoginAttempt } from "./login-limiter.js";
import { checkPasswordPolicy, hashPassword, verifyPassword } from "./password.js";
import {
  accountNameSchema,
  emailSchema,
  includeHistorySchema,
  objectSchema,
  pageProperties,
  passwordSchema,
  uuidSchema,
} from "./payload-schemas.js";
import { accountOwnerOrSystemAdministrator, systemAdministrator } from "./permission-functions.js";
import { found, listOptions } from "./query-helpers.js";
import { READMODELS } from "./readmodel-names.js";
import type { DefaultsSettings } from "./settings.js";
import type { SessionProjection } from "./session.js";

export { Account, AccountAggregate, type AccountModel } from "./account-domain.js";

/** Payload of the `Account.RegisterAccount` command. */
export interface RegisterAccount {
  email: string;
  password: string;
  name?: string;
}
/** Payload of the `Account.ChangeAccountEmail` command. */
export interface ChangeAccountEmail {
  accountUuid: string;
  email: string;
}
/** Payload of the `Account.ChangeAccountName` command. */
export interface ChangeAccountName {
  accountUuid: string;
  name: string;
}
/** `currentPassword` is required when an account changes its own password. */
export interface SetAccountPassword {
  accountUuid: string;
  password: string;
  currentPassword?: string;
}
/** Payload of the `Account.RemoveAccount` command. */
export interface RemoveAccount {
  accountUuid: string;
  /** Also erase the account's personal data (email, name): its key is deleted, every read shows "[erased]". */
  erase?: boolean;
}
/** Payload of the `Account.GetAccount` query. */
export interface GetAccount {
  accountUuid: string;
  includeHistory?: boolean;
}
/** Payload of the `Account.ListAccounts` query. */
export interface ListAccounts {
  page?: number;
  pageSize?: number;
  includeHistory?: boolean;
}
/** Payload of the `Account.GetAccountByEmail` query. */
export interface GetAccountByEmail {
  email: string;
  includeHistory?: boolean;
}

const ownerOrAdmin = "(the account itself, or system administrators)";
/** The `Account.RegisterAccount` command token. */
export const RegisterAccount = Account.command<RegisterAccount, { accountUuid: string }>("RegisterAccount", {
  description: "Register an account (anonymous)",
  permission: anonymous,
  // Personal data never reaches the command record in clear.
  secretFields: ["password", "email", "name"],
  schema: objectSchema({ email: emailSchema, password: passwordSchema, name: accountNameSchema }, ["email", "password"]),
});
/** The `Account.ChangeAccountEmail` command token. */
export const ChangeAccountEmail = Account.command<ChangeAccountEmail>("ChangeAccountEmail", {
  description: `Change an account's email ${ownerOrAdmin}`,
  permission: accountOwnerOrSystemAdministrator,
  secretFields: ["email"],
  schema: objectSchema({ accountUuid: uuidSchema, email: emailSchema }, ["accountUuid", "email"]),
});
/** The `Account.ChangeAccountName` command token. */
export const ChangeAccountName = Account.command<ChangeAccountName>("ChangeAccountName", {
  description: `Change an account's display name ${ownerOrAdmin}`,
  permission: accountOwnerOrSystemAdministrator,
  secretFields: ["name"],
  schema: objectSchema({ accountUuid: uuidSchema, name: accountNameSchema }, ["accountUuid", "name"]),
});
/** The `Account.SetAccountPassword` command token. */
export const SetAccountPassword = Account.command<SetAccountPassword>("SetAccountPassword", {
  description: `Set an account's password; the account itself gives its current one; other sessions end ${ownerOrAdmin}`,
  permission: accountOwnerOrSystemAdministrator,
  secretFields: ["password", "currentPassword"],
  schema: objectSchema({ accountUuid: uuidSchema, password: passwordSchema, currentPassword: { type: "string", maxLength: 1024 } }, [
    "accountUuid",
    "password",
  ]),
});
/** The `Account.RemoveAccount` command token. */
export const RemoveAccount = Account.command<RemoveAccount>("RemoveAccount", {
  description: `Remove an account: its email is freed, its sessions end; with erase, its email and name are erased ${ownerOrAdmin}`,
  permission: accountOwnerOrSystemAdministrator,
  schema: objectSchema({ accountUuid: uuidSchema, erase: { type: "boolean" } }, ["accountUuid"]),
});
/** The `Account.GetAccount` query token. */
export const GetAccount = Account.query<GetAccount, ProjectionModel<AccountModel>>("GetAccount", {
  description: `One account, with its history on request ${ownerOrAdmin}`,
  permission: accountOwnerOrSystemAdministrator,
  schema: objectSchema({ accountUuid: uuidSchema, includeHistory: includeHistorySchema }, ["accountUuid"]),
});
/** The `Account.ListAccounts` query token. */
export const ListAccounts = Account.query<ListAccounts, ProjectionList<AccountModel>>("ListAccounts", {
  description: "A page of accounts (system administrators)",
  permission: systemAdministrator,
  schema: objectSchema(pageProperties),
});
/** The `Account.GetAccountByEmail` query token. */
export const GetAccountByEmail = Account.query<GetAccountByEmail, ProjectionModel<AccountModel>>("GetAccountByEmail", {
  description: "The account of an email (system administrators)",
  permission: systemAdministrator,
  secretFields: ["email"],
  schema: objectSchema({ email: emailSchema, includeHistory: includeHistorySchema }, ["email"]),
});

/** The Account readmodel: one model per account (email, name, removed; never a hash), history on demand. */
export class AccountProjection extends ProjectionReadmodel<AccountModel> {
  constructor(facade: Facade) {
    super(facade, { aggregate: AccountAggregate, name: READMODELS.account });
  }
}

const NO_TENANT = { tenantUuid: "" };

/** The claim aggregate of an account's current email (from the state; derived from the email for accounts of older stores). */
function claimUuidOfAccount(state: AccountModel): string {
  return state.emailClaimUuid !== "" ? state.emailClaimUuid : legacyEmailClaimUuidOf(state.email);
}

async function loadLiveAccount(ctx: CommandContext, accountUuid: string) {
  const account = await ctx.aggregates.load(AccountAggregate, accountUuid);
  if (account.version === 0 || account.state.removed) throw new MnemeError("NOT_FOUND", `account ${accountUuid} does not exist`);
  return account;
}

/** SessionEnded for the account's open, unexpired sessions except `keep`. */
async function endSessions(
  ctx: CommandContext,
  state: DefaultsSettings,
  accountUuid: string,
  reason: SessionEnded["reason"],
  keep?: string,
): Promise<NewEvent[]> {
  const refs = await ctx.readmodel<AuthIndex>(READMODELS.authIndex).sessionsOf(accountUuid);
  const sessions = ctx.readmodel<SessionProjection>(READMODELS.session);
  const now = state.clock();
  const out: NewEvent[] = [];
  for (const r of refs) {
    if (r.sessionUuid === keep) continue;
    const s = await sessions.getModel(r.sessionUuid);
    if (s === undefined || s.model.endedAt !== 0 || s.model.expiresAt <= now) continue;
    out.push(SessionEnded.create(r.sessionUuid, { reason }, NO_TENANT));
  }
  return out;
}

/** `Account.RegisterAccount`: claims the email, records the account and its password hash. */
async function registerAccount(ctx: CommandContext, s: DefaultsSettings, p: RegisterAccount) {
  const email = normalizeEmail(p.email);
  checkPasswordPolicy(p.password);
  const claim = await loadEmailClaim(ctx, s, email);
  if (claim.accountUuid !== "") throw new MnemeError("CONFLICT", "an account with this email exists already");
  const claimUuid = claim.claimUuid;
  const accountUuid = newUuid();
  const hash = await hashPassword(p.password, s.scrypt);
  return {
    events: [
      EmailClaimed.create(claimUuid, { accountUuid, email }, NO_TENANT),
      AccountRegistered.create(accountUuid, { email, name: (p.name ?? "").trim(), emailClaimUuid: claimUuid }, NO_TENANT),
      CredentialSet.create(credentialUuidOf(accountUuid), { accountUuid, ...hash }, NO_TENANT),
    ],
    result: { accountUuid },
  };
}

/** `Account.SetAccountPassword`: the owner proves the current password (counted as a login attempt); every other session ends. */
async function setAccountPassword(ctx: CommandContext, s: DefaultsSettings, p: SetAccountPassword) {
  const account = await loadLiveAccount(ctx, p.accountUuid);
  checkPasswordPolicy(p.password);
  const credentialUuid = credentialUuidOf(p.accountUuid);
  const credential = await ctx.aggregates.load(CredentialAggregate, credentialUuid);
  const self = ctx.reqCtx.senderAccountUuid === p.accountUuid;
  if (self) {
    // A stolen session must not be enough to take the account over: the current password is required,
    // and wrong guesses count against the same limit as logins.
    const attempt = await takeLoginAttempt(s, account.state.email);
    const ok = credential.state.hash !== undefined && (await verifyPassword(p.currentPassword ?? "", credential.state.hash));
    if (!ok) {
      await noteLoginFailure(s, account.state.email, attempt);
      throw new MnemeError("PERMISSION_DENIED", "the current password is wrong or missing");
    }
  }
  const hash = await hashPassword(p.password, s.scrypt);
  const ended = await endSessions(ctx, s, p.accountUuid, "password-changed", self ? ctx.reqCtx.senderSessionUuid : undefined);
  if (self) await clearLoginFailures(s, account.state.email);
  return [
    CredentialSet.create(credentialUuid, { accountUuid: p.accountUuid, ...hash }, NO_TENANT),
    AccountPasswordChanged.create(p.accountUuid, {}, NO_TENANT),
    ...ended,
  ];
}

/** Attaches the Account domain's account commands and queries in one facade, with its settings (see registerDefaults). */
export function installAccount(d: DomainInstaller, s: DefaultsSettings): void {
  d.handleCommand(RegisterAccount, (ctx, _cmd, p) => registerAccount(ctx, s, p));

  d.handleCommand(ChangeAccountEmail, async (ctx, _cmd, p) => {
    const account = await loadLiveAccount(ctx, p.accountUuid);
    const email = normalizeEmail(p.email);
    if (email === account.state.email) return [];
    const oldClaimUuid = claimUuidOfAccount(account.state);
    const [newClaim] = await Promise.all([loadEmailClaim(ctx, s, email), ctx.aggregates.load(EmailClaimAggregate, oldClaimUuid)]);
    if (newClaim.accountUuid !== "") throw new MnemeError("CONFLICT", "an account with this email exists already");
    const newClaimUuid = newClaim.claimUuid;
    return [
      EmailReleased.create(oldClaimUuid, { accountUuid: p.accountUuid }, NO_TENANT),
      EmailClaimed.create(newClaimUuid, { accountUuid: p.accountUuid, email }, NO_TENANT),
      AccountEmailChanged.create(p.accountUuid, { email, previousEmail: account.state.email, emailClaimUuid: newClaimUuid }, NO_TENANT),
    ];
  });

  d.handleCommand(ChangeAccountName, async (ctx, _cmd, p) => {
    const account = await loadLiveAccount(ctx, p.accountUuid);
    const name = p.name.trim();
    if (name === account.state.name) return [];
    return [AccountNameChanged.create(p.accountUuid, { name }, NO_TENANT)];
  });

  d.handleCommand(SetAccountPassword, (ctx, _cmd, p) => setAccountPassword(ctx, s, p));

  d.handleCommand(RemoveAccount, async (ctx, _cmd, p) => {
    if (p.accountUuid === s.adminAccountUuid)
      throw new MnemeError("INVALID_ACTION", "the bootstrapped administrator's account cannot be removed");
    const account = await loadLiveAccount(ctx, p.accountUuid);
    const claimUuid = claimUuidOfAccount(account.state);
    await ctx.aggregates.load(EmailClaimAggregate, claimUuid);
    return [
      // With erase, the AccountEraser handler deletes the account's key once this is committed.
      AccountRemoved.create(p.accountUuid, p.erase === true ? { erased: true } : {}, NO_TENANT),
      EmailReleased.create(claimUuid, { accountUuid: p.accountUuid }, NO_TENANT),
      ...(await endSessions(ctx, s, p.accountUuid, "account-removed")),
    ];
  });

  d.handleQuery(GetAccount, async (ctx, _q, p) =>
    found(
      await ctx.readmodel<AccountProjection>(READMODELS.account).getModel(p.accountUuid, { includeHistory: p.includeHistory === true }),
      `account ${p.accountUuid}`,
    ),
  );

  d.handleQuery(ListAccounts, (ctx, _q, p) => ctx.readmodel<AccountProjection>(READMODELS.account).getModelList(listOptions(p)));

  d.handleQuery(GetAccountByEmail, async (ctx, _q, p) => {
    const claim = await loadEmailClaim(ctx, s, normalizeEmail(p.email));
    if (claim.accountUuid === "") throw new MnemeError("NOT_FOUND", "no account has this email");
    return found(
      await ctx.readmodel<AccountProjection>(READMODELS.account).getModel(claim.accountUuid, { includeHistory: p.includeHistory === true }),
      "the account of this email",
    );
  });
}
