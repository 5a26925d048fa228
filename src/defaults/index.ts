/**
 * `mneme/defaults`: the built-in domains (Tenant, Account, Session, Identity,
 * Group) and their tokens, registerDefaults, the default authorizer, the
 * credential helpers and their HTTP route module (`accountRoutes()`). Apps
 * that bring their own identity and tenancy never import it.
 */
export { registerDefaults, DEFAULT_DOMAINS } from "./register-defaults.js";
export type { DefaultsOptions, DefaultsInfo } from "./settings.js";
export { resolveCredentials, isSystemAdmin, parseSessionToken } from "./credentials.js";
export { createDefaultAuthorizer, permissionName } from "./authorizer.js";
export { resolveSender, grantsCover, type Sender } from "./sender.js";
export { systemAdministrator, accountOwnerOrSystemAdministrator } from "./permission-functions.js";
export { SYSTEM_ADMIN_GROUP_NAME, BootstrapSystemTenant } from "./bootstrap.js";
export { READMODELS as DEFAULT_READMODELS } from "./readmodel-names.js";
export { hashPassword, verifyPassword, DEFAULT_SCRYPT, type PasswordHash, type ScryptParams } from "./password.js";
export {
  Tenant,
  CreateTenant,
  RenameTenant,
  RemoveTenant,
  GetTenant,
  ListTenants,
  TenantCreated,
  TenantRenamed,
  TenantRemoved,
  TenantAggregate,
  TenantProjection,
  type TenantModel,
} from "./tenant.js";
export {
  Account,
  AccountAggregate,
  AccountRegistered,
  AccountEmailChanged,
  AccountNameChanged,
  AccountPasswordChanged,
  AccountRemoved,
  AccountErased,
  EmailClaimed,
  EmailReleased,
  CredentialSet,
  SessionStarted,
  SessionEnded,
  SessionAggregate,
  type AccountModel,
  type SessionModel,
} from "./account-domain.js";
export {
  RegisterAccount,
  ChangeAccountEmail,
  ChangeAccountName,
  SetAccountPassword,
  RemoveAccount,
  GetAccount,
  ListAccounts,
  GetAccountByEmail,
  AccountProjection,
} from "./account.js";
export { Login, Logout, SessionProjection, type LoginResult } from "./session.js";
export {
  CreateIdentity,
  RemoveIdentity,
  AssignGroup,
  UnassignGroup,
  GetIdentity,
  ListIdentities,
  ListAccountIdentities,
  IdentityProjection,
} from "./identity.js";
export {
  Identity,
  IdentityCreated,
  IdentityRemoved,
  IdentityGroupAssigned,
  IdentityGroupUnassigned,
  IdentityAggregate,
  type IdentityModel,
  type AccountIdentity,
} from "./identity-domain.js";
export {
  CreateGroup,
  RenameGroup,
  AddGroupPermission,
  RemoveGroupPermission,
  RemoveGroup,
  GetGroup,
  ListGroups,
  GroupProjection,
} from "./group.js";
export {
  Group,
  GroupCreated,
  GroupRenamed,
  GroupPermissionAdded,
  GroupPermissionRemoved,
  GroupRemoved,
  GroupAggregate,
  type GroupModel,
} from "./group-domain.js";
export { AuthIndex } from "./auth-index.js";
export { Privacy, SubjectForgotten, type SubjectForgotten as SubjectForgottenPayload } from "../privacy/privacy-domain.js";
export { AccountEraser } from "./account-eraser.js";
export { accountRoutes } from "./http-routes.js";
