/**
 * The permission matrix of the built-in domains: every built-in command and
 * query against six senders, each in a fresh world:
 *   anonymous      no credentials
 *   authenticated  a session, no identity
 *   noGrant        a member of tenant T whose groups do not grant the permission
 *   granted        a member of T whose group grants exactly `<Domain>.<Name>`
 *   otherTenant    a member of tenant U with the same grant, targeting T
 *   systemAdmin    the bootstrapped administrator
 * Every request targets tenant T (as mneme/http does from the URL) and acts on
 * T's objects or on the victim account V (a member of T).
 */
import { afterAll, describe, expect, it } from "vitest";
import { isMnemeError, type RequestContext } from "mneme";
import { makeWorld, type World } from "../support/defaults-world.js";

type Who = "anonymous" | "authenticated" | "noGrant" | "granted" | "otherTenant" | "systemAdmin";
const WHO: readonly Who[] = ["anonymous", "authenticated", "noGrant", "granted", "otherTenant", "systemAdmin"];

interface Scene {
  world: World;
  T: string;
  U: string;
  victim: { accountUuid: string; email: string; identityUuid: string };
  /** An account with a session and no identity in T (the target of CreateIdentity). */
  loner: { accountUuid: string };
  /** A group of T with no permissions (assignable by anyone allowed to assign). */
  emptyGroup: string;
  /** A group of T holding Tenant.GetTenant, assigned to the victim. */
  victimGroup: string;
  ctx: Record<Who, RequestContext>;
}

let seq = 0;

async function scene(permission: string): Promise<Scene> {
  const world = await makeWorld();
  const n = ++seq;
  const T = await world.createTenant("T");
  const U = await world.createTenant("U");
  const victimEmail = `victim${n}@example.org`;
  const victimUuid = await world.register(victimEmail);
  const victimIdentity = await world.join(victimUuid, T);
  const victimGroup = await world.createGroup(T, "victims", ["Tenant.GetTenant"]);
  await world.assign(victimIdentity, victimGroup);
  const emptyGroup = await world.createGroup(T, "empty", []);
  const lonerEmail = `loner${n}@example.org`;
  const lonerUuid = await world.register(lonerEmail);
  const authenticated = (await world.login(lonerEmail)).reqCtx;
  const noGrant = await world.member(`nogrant${n}@example.org`, T, ["Runtime.ListCommands"]);
  const granted = await world.member(`granted${n}@example.org`, T, [permission]);
  const other = await world.member(`other${n}@example.org`, U, [permission]);
  const target = (c: RequestContext): RequestContext => ({ ...c, targetTenantUuid: T });
  return {
    world,
    T,
    U,
    victim: { accountUuid: victimUuid, email: victimEmail, identityUuid: victimIdentity },
    loner: { accountUuid: lonerUuid },
    emptyGroup,
    victimGroup,
    ctx: {
      anonymous: target({}),
      authenticated: target(authenticated),
      noGrant: target(noGrant.reqCtx),
      granted: target(granted.reqCtx),
      otherTenant: target(other.reqCtx),
      systemAdmin: target(world.admin),
    },
  };
}

type Call = (s: Scene, reqCtx: RequestContext) => Promise<unknown>;
const cmd =
  (domain: string, name: string, payload: (s: Scene) => Record<string, unknown>): Call =>
  (s, reqCtx) =>
    s.world.facade.dispatch({ domain, name }, payload(s), { reqCtx, waitToFinish: true });
const qry =
  (domain: string, name: string, payload: (s: Scene) => Record<string, unknown>): Call =>
  (s, reqCtx) =>
    s.world.facade.query({ domain, name }, payload(s), { reqCtx });

/** Allowed senders, in WHO order: 1 = allowed, 0 = PERMISSION_DENIED. */
const everyone = "111111";
const sessions = "011111";
const tenantGrant = "000101";
const adminOnly = "000001";
const nobody = "000000";

const rows: [string, string, string, Call][] = [
  // Tenant
  ["Tenant", "CreateTenant", adminOnly, cmd("Tenant", "CreateTenant", () => ({ name: "new tenant" }))],
  ["Tenant", "RenameTenant", tenantGrant, cmd("Tenant", "RenameTenant", (s) => ({ tenantUuid: s.T, name: "renamed" }))],
  ["Tenant", "RemoveTenant", tenantGrant, cmd("Tenant", "RemoveTenant", (s) => ({ tenantUuid: s.T }))],
  ["Tenant", "GetTenant", tenantGrant, qry("Tenant", "GetTenant", (s) => ({ tenantUuid: s.T, includeHistory: true }))],
  ["Tenant", "ListTenants", adminOnly, qry("Tenant", "ListTenants", () => ({}))],
  [
    "Tenant",
    "BootstrapSystemTenant",
    nobody,
    cmd("Tenant", "BootstrapSystemTenant", () => ({ email: "x@example.org", password: "password-x", name: "x", tenantName: "x" })),
  ],
  // Account
  [
    "Account",
    "RegisterAccount",
    everyone,
    cmd("Account", "RegisterAccount", () => ({ email: `new${++seq}@example.org`, password: "new-password" })),
  ],
  ["Account", "Login", everyone, cmd("Account", "Login", (s) => ({ email: s.victim.email, password: `${s.victim.email}-pw` }))],
  ["Account", "Logout", sessions, cmd("Account", "Logout", () => ({}))],
  [
    "Account",
    "ChangeAccountEmail",
    adminOnly,
    cmd("Account", "ChangeAccountEmail", (s) => ({ accountUuid: s.victim.accountUuid, email: `changed${++seq}@example.org` })),
  ],
  [
    "Account",
    "ChangeAccountName",
    adminOnly,
    cmd("Account", "ChangeAccountName", (s) => ({ accountUuid: s.victim.accountUuid, name: "Changed" })),
  ],
  [
    "Account",
    "SetAccountPassword",
    adminOnly,
    cmd("Account", "SetAccountPassword", (s) => ({ accountUuid: s.victim.accountUuid, password: "a-new-password" })),
  ],
  ["Account", "RemoveAccount", adminOnly, cmd("Account", "RemoveAccount", (s) => ({ accountUuid: s.victim.accountUuid }))],
  ["Account", "GetAccount", adminOnly, qry("Account", "GetAccount", (s) => ({ accountUuid: s.victim.accountUuid, includeHistory: true }))],
  ["Account", "ListAccounts", adminOnly, qry("Account", "ListAccounts", () => ({ page: 1, pageSize: 10 }))],
  ["Account", "GetAccountByEmail", adminOnly, qry("Account", "GetAccountByEmail", (s) => ({ email: s.victim.email }))],
  // Identity
  [
    "Identity",
    "CreateIdentity",
    tenantGrant,
    cmd("Identity", "CreateIdentity", (s) => ({ accountUuid: s.loner.accountUuid, tenantUuid: s.T })),
  ],
  ["Identity", "RemoveIdentity", tenantGrant, cmd("Identity", "RemoveIdentity", (s) => ({ identityUuid: s.victim.identityUuid }))],
  [
    "Identity",
    "AssignGroup",
    tenantGrant,
    cmd("Identity", "AssignGroup", (s) => ({ identityUuid: s.victim.identityUuid, groupUuid: s.emptyGroup })),
  ],
  [
    "Identity",
    "UnassignGroup",
    tenantGrant,
    cmd("Identity", "UnassignGroup", (s) => ({ identityUuid: s.victim.identityUuid, groupUuid: s.victimGroup })),
  ],
  [
    "Identity",
    "GetIdentity",
    tenantGrant,
    qry("Identity", "GetIdentity", (s) => ({ identityUuid: s.victim.identityUuid, includeHistory: true })),
  ],
  ["Identity", "ListIdentities", tenantGrant, qry("Identity", "ListIdentities", () => ({}))],
  [
    "Identity",
    "ListAccountIdentities",
    adminOnly,
    qry("Identity", "ListAccountIdentities", (s) => ({ accountUuid: s.victim.accountUuid })),
  ],
  // Group
  ["Group", "CreateGroup", tenantGrant, cmd("Group", "CreateGroup", (s) => ({ tenantUuid: s.T, name: "created" }))],
  ["Group", "RenameGroup", tenantGrant, cmd("Group", "RenameGroup", (s) => ({ groupUuid: s.victimGroup, name: "renamed" }))],
  [
    "Group",
    "AddGroupPermission",
    tenantGrant,
    cmd("Group", "AddGroupPermission", (s) => ({ groupUuid: s.emptyGroup, permission: "Group.AddGroupPermission" })),
  ],
  [
    "Group",
    "RemoveGroupPermission",
    tenantGrant,
    cmd("Group", "RemoveGroupPermission", (s) => ({ groupUuid: s.victimGroup, permission: "Tenant.GetTenant" })),
  ],
  ["Group", "RemoveGroup", tenantGrant, cmd("Group", "RemoveGroup", (s) => ({ groupUuid: s.victimGroup }))],
  ["Group", "GetGroup", tenantGrant, qry("Group", "GetGroup", (s) => ({ groupUuid: s.victimGroup, includeHistory: true }))],
  ["Group", "ListGroups", tenantGrant, qry("Group", "ListGroups", () => ({}))],
];

describe("the permission matrix of the built-in domains", () => {
  it("covers every built-in command and query", async () => {
    const world = await makeWorld();
    const listed = [
      ...world.facade.runtime.listCommands().map((c) => `${c.domain}.${c.domainCmdName}`),
      ...world.facade.runtime.listQueries().map((q) => `${q.domain}.${q.domainQryName}`),
    ].filter((n) => /^(Tenant|Account|Identity|Group)\./.test(n));
    expect(rows.map(([d, n]) => `${d}.${n}`).sort()).toEqual(listed.sort());
    await world.facade.stop();
  });

  describe.each(rows)("%s.%s", (domain, name, expected, call) => {
    // Denied calls change nothing, so they share one scene; each allowed call gets a fresh one.
    let shared: Scene | undefined;
    afterAll(async () => {
      await shared?.world.facade.stop();
    });

    it.each(WHO.map((who, i) => [who, expected[i] === "1"] as const))("%s -> allowed: %s", async (who, allowed) => {
      const s = allowed ? await scene(`${domain}.${name}`) : (shared ??= await scene(`${domain}.${name}`));
      try {
        const outcome = await call(s, s.ctx[who]).then(
          () => "allowed",
          (e: unknown) => e,
        );
        if (allowed) {
          expect(outcome).toBe("allowed");
        } else {
          expect(isMnemeError(outcome, "PERMISSION_DENIED"), `expected PERMISSION_DENIED, got ${String(outcome)}`).toBe(true);
        }
      } finally {
        if (allowed) await s.world.facade.stop();
      }
    });
  });
});
