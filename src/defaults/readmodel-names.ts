/** Names of the built-in readmodels (each is registered once per facade by registerDefaults). */
export const READMODELS = Object.freeze({
  tenant: "TenantProjection",
  account: "AccountProjection",
  session: "SessionProjection",
  identity: "IdentityProjection",
  group: "GroupProjection",
  authIndex: "AuthIndex",
});
