/**
 * Groups, identities and tenants under the default authorizer: wildcards,
 * store permissions only for the system tenant, nobody grants more than it
 * holds, cross-tenant payloads, protections of the bootstrap, revocation, an
 * application's own authorizer, the readmodel queries with history, and
 * registerDefaults' own checks.
 */
import { afterEach, describe, expect, it } from "vitest";
import { MnemeError, createFacade, defineDomain } from "mneme";
import {
  AddGroupPermission,
  AssignGroup,
  CreateGroup,
  CreateTenant,
  GetGroup,
  GetIdentity,
  GetTenant,
  ListGroups,
  ListIdentities,
  ListTenants,
  RemoveGroup,
  RemoveGroupPermission,
  RemoveIdentity,
  RemoveTenant,
  RenameGroup,
  RenameTenant,
  UnassignGroup,
  registerDefaults,
} from "mneme/defaults";
import { ADMIN_EMAIL, ADMIN_PASSWORD, FAST_HASHING, makeWorld, type World } from "../support/defaults-world.js";
import { outcomeCode } from "../support/rejections.js";

let world: World;
afterEach(async () => {
  await world?.facade.stop();
});

describe("groups and the default authorizer", () => {
  it("grants through Domain.* and *, but store permissions only to the system tenant", async () => {
    world = await makeWorld();
    const T = await world.createTenant("acme");
    const groupAdmin = await world.member("ga@example.org", T, ["Group.*"]);
    const root = await world.member("root@example.org", T, ["*"]);
    const f = world.facade;
    expect(await outcomeCode(f.dispatch(CreateGroup, { name: "by wildcard" }, { reqCtx: groupAdmin.reqCtx }))).toBe("ok");
    expect(await outcomeCode(f.dispatch(RenameTenant, { tenantUuid: T, name: "Acme" }, { reqCtx: groupAdmin.reqCtx }))).toBe(
      "PERMISSION_DENIED",
    );
    expect(await outcomeCode(f.dispatch(RenameTenant, { tenantUuid: T, name: "Acme" }, { reqCtx: root.reqCtx }))).toBe("ok");
    // "*" in an ordinary tenant is not enough for what system administrators do
    expect(await outcomeCode(f.runtime.stores.read("event", root.reqCtx))).toBe("PERMISSION_DENIED");
    expect(await outcomeCode(f.query({ domain: "Runtime", name: "StoreInfo" }, { store: "log" }, { reqCtx: root.reqCtx }))).toBe(
      "PERMISSION_DENIED",
    );
    expect(await outcomeCode(f.query(ListTenants, {}, { reqCtx: root.reqCtx }))).toBe("PERMISSION_DENIED");
    expect((await f.runtime.stores.read("event", world.admin, { limit: 5 })).items).toHaveLength(5);
    // a system-tenant member with just the store permission may use it; others in the system tenant may not
    const auditor = await world.member("auditor@example.org", world.ids.systemTenantUuid, ["Runtime.StoreLog.Read"]);
    expect(await outcomeCode(f.runtime.stores.read("log", auditor.reqCtx))).toBe("ok");
    expect(await outcomeCode(f.runtime.stores.read("event", auditor.reqCtx))).toBe("PERMISSION_DENIED");
  });

  it("lets nobody hand out a permission it does not hold", async () => {
    world = await makeWorld();
    const T = await world.createTenant("acme");
    const lead = await world.member("lead@example.org", T, [
      "Group.CreateGroup",
      "Group.AddGroupPermission",
      "Identity.AssignGroup",
      "Tenant.GetTenant",
    ]);
    const f = world.facade;
    const own = (
      await f.dispatch(CreateGroup, { name: "readers", permissions: ["Tenant.GetTenant"] }, { reqCtx: lead.reqCtx, waitToFinish: true })
    ).result!.groupUuid;
    expect(await outcomeCode(f.dispatch(CreateGroup, { name: "admins", permissions: ["*"] }, { reqCtx: lead.reqCtx }))).toBe(
      "PERMISSION_DENIED",
    );
    expect(
      await outcomeCode(f.dispatch(AddGroupPermission, { groupUuid: own, permission: "Tenant.RemoveTenant" }, { reqCtx: lead.reqCtx })),
    ).toBe("PERMISSION_DENIED");
    expect(await outcomeCode(f.dispatch(AddGroupPermission, { groupUuid: own, permission: "Group.*" }, { reqCtx: lead.reqCtx }))).toBe(
      "PERMISSION_DENIED",
    );
    expect(
      await outcomeCode(f.dispatch(AddGroupPermission, { groupUuid: own, permission: "Group.CreateGroup" }, { reqCtx: lead.reqCtx })),
    ).toBe("ok");
    // assigning a group counts as handing out its permissions
    const strong = await world.createGroup(T, "strong", ["Tenant.RemoveTenant"]);
    expect(
      await outcomeCode(f.dispatch(AssignGroup, { identityUuid: lead.identityUuid, groupUuid: strong }, { reqCtx: lead.reqCtx })),
    ).toBe("PERMISSION_DENIED");
    expect(await outcomeCode(f.dispatch(AssignGroup, { identityUuid: lead.identityUuid, groupUuid: own }, { reqCtx: lead.reqCtx }))).toBe(
      "ok",
    );
    expect(
      await outcomeCode(f.dispatch(AddGroupPermission, { groupUuid: own, permission: "Todo.CreateTodo" }, { reqCtx: world.admin })),
    ).toBe("VALIDATION_FAILED");
    expect(await outcomeCode(f.dispatch(AddGroupPermission, { groupUuid: own, permission: "Nope.*" }, { reqCtx: world.admin }))).toBe(
      "VALIDATION_FAILED",
    );
    expect(
      await outcomeCode(f.dispatch(AddGroupPermission, { groupUuid: own, permission: "Runtime.StoreEvent.Read" }, { reqCtx: world.admin })),
    ).toBe("ok");
  });

  it("keeps members to their tenant even when only the payload names another one", async () => {
    world = await makeWorld();
    const T = await world.createTenant("T");
    const U = await world.createTenant("U");
    const uGroup = await world.createGroup(U, "u-group", []);
    const t = await world.member("t@example.org", T, ["Group.*", "Tenant.*", "Identity.*"]);
    const f = world.facade;
    // no targetTenantUuid in the context: the handlers check the tenant of what the payload names;
    // another tenant's group answers as if it did not exist (no confirmation that it does)
    const renamed = await f.dispatch(RenameGroup, { groupUuid: uGroup, name: "mine" }, { reqCtx: t.reqCtx }).catch((e: Error) => e);
    const absent = await f
      .dispatch(RenameGroup, { groupUuid: "0190f5e4-0000-7000-8000-00000000dead", name: "mine" }, { reqCtx: t.reqCtx })
      .catch((e: Error) => e);
    expect([(renamed as { code?: string }).code, (absent as { code?: string }).code]).toEqual(["NOT_FOUND", "NOT_FOUND"]);
    expect((renamed as Error).message.replace(uGroup, "X")).toBe(
      (absent as Error).message.replace("0190f5e4-0000-7000-8000-00000000dead", "X"),
    );
    expect(await outcomeCode(f.dispatch(CreateGroup, { tenantUuid: U, name: "planted" }, { reqCtx: t.reqCtx }))).toBe("PERMISSION_DENIED");
    expect(await outcomeCode(f.dispatch(RemoveTenant, { tenantUuid: U }, { reqCtx: t.reqCtx }))).toBe("PERMISSION_DENIED");
    expect(await outcomeCode(f.query(GetGroup, { groupUuid: uGroup }, { reqCtx: t.reqCtx }))).toBe("NOT_FOUND");
    expect(await outcomeCode(f.query(ListIdentities, { tenantUuid: U }, { reqCtx: t.reqCtx }))).toBe("PERMISSION_DENIED");
    expect(
      await outcomeCode(
        f.dispatch({ domain: "Identity", name: "CreateIdentity" }, { accountUuid: t.accountUuid, tenantUuid: U }, { reqCtx: t.reqCtx }),
      ),
    ).toBe("PERMISSION_DENIED");
    // an administrator may, but not with a request that targets one tenant and names another's group
    expect(
      await outcomeCode(f.dispatch(RenameGroup, { groupUuid: uGroup, name: "x" }, { reqCtx: { ...world.admin, targetTenantUuid: T } })),
    ).toBe("NOT_FOUND");
    expect(await outcomeCode(f.dispatch(RenameGroup, { groupUuid: uGroup, name: "x" }, { reqCtx: world.admin }))).toBe("ok");
    // a group of U cannot be given to an identity of T: it answers as if the group did not exist
    expect(await outcomeCode(f.dispatch(AssignGroup, { identityUuid: t.identityUuid, groupUuid: uGroup }, { reqCtx: world.admin }))).toBe(
      "NOT_FOUND",
    );
  });

  it("refuses a context whose identity is not the sender's, or belongs to another tenant", async () => {
    world = await makeWorld();
    const T = await world.createTenant("T");
    const U = await world.createTenant("U");
    const a = await world.member("a@example.org", T, ["Tenant.GetTenant"]);
    const b = await world.member("b@example.org", T, ["Tenant.GetTenant"]);
    const f = world.facade;
    expect(await outcomeCode(f.query(GetTenant, { tenantUuid: T }, { reqCtx: a.reqCtx }))).toBe("ok");
    expect(await outcomeCode(f.query(GetTenant, { tenantUuid: T }, { reqCtx: { ...a.reqCtx, senderIdentityUuid: b.identityUuid } }))).toBe(
      "PERMISSION_DENIED",
    );
    expect(await outcomeCode(f.query(GetTenant, { tenantUuid: U }, { reqCtx: { ...a.reqCtx, senderTenantUuid: U } }))).toBe(
      "PERMISSION_DENIED",
    );
    // the bootstrapped admin's identity claimed by another account is refused too
    expect(await outcomeCode(f.query(ListTenants, {}, { reqCtx: { ...world.admin, senderAccountUuid: a.accountUuid } }))).toBe(
      "PERMISSION_DENIED",
    );
  });

  it("revokes grants when a group, a permission, an identity or a tenant goes", async () => {
    world = await makeWorld();
    const T = await world.createTenant("T");
    const m = await world.member("m@example.org", T, ["Tenant.GetTenant"]);
    const f = world.facade;
    const get = () => outcomeCode(f.query(GetTenant, { tenantUuid: T }, { reqCtx: m.reqCtx }));
    expect(await get()).toBe("ok");
    const groupUuid = (await f.query(GetIdentity, { identityUuid: m.identityUuid }, { reqCtx: world.admin })).model.groupUuids[0]!;
    await f.dispatch(RemoveGroupPermission, { groupUuid, permission: "Tenant.GetTenant" }, { reqCtx: world.admin, waitToFinish: true });
    expect(await get()).toBe("PERMISSION_DENIED");
    await f.dispatch(AddGroupPermission, { groupUuid, permission: "Tenant.*" }, { reqCtx: world.admin, waitToFinish: true });
    expect(await get()).toBe("ok");
    await f.dispatch(UnassignGroup, { identityUuid: m.identityUuid, groupUuid }, { reqCtx: world.admin, waitToFinish: true });
    expect(await get()).toBe("PERMISSION_DENIED");
    await f.dispatch(AssignGroup, { identityUuid: m.identityUuid, groupUuid }, { reqCtx: world.admin, waitToFinish: true });
    expect(await get()).toBe("ok");
    await f.dispatch(RemoveGroup, { groupUuid }, { reqCtx: world.admin, waitToFinish: true });
    expect(await get()).toBe("PERMISSION_DENIED");
    const again = await world.createGroup(T, "again", ["Tenant.GetTenant"]);
    await world.assign(m.identityUuid, again);
    expect(await get()).toBe("ok");
    await f.dispatch(RemoveIdentity, { identityUuid: m.identityUuid }, { reqCtx: world.admin, waitToFinish: true });
    expect(await get()).toBe("PERMISSION_DENIED");
  });

  it("protects the bootstrap: system tenant, system-admin group and the admin's identity", async () => {
    world = await makeWorld();
    const f = world.facade;
    const { systemTenantUuid, systemAdminGroupUuid, adminIdentityUuid } = world.ids;
    const admin = { reqCtx: world.admin };
    expect(await outcomeCode(f.dispatch(RemoveTenant, { tenantUuid: systemTenantUuid }, admin))).toBe("INVALID_ACTION");
    expect(await outcomeCode(f.dispatch(RemoveGroup, { groupUuid: systemAdminGroupUuid }, admin))).toBe("INVALID_ACTION");
    expect(await outcomeCode(f.dispatch(RemoveGroupPermission, { groupUuid: systemAdminGroupUuid, permission: "*" }, admin))).toBe(
      "INVALID_ACTION",
    );
    expect(await outcomeCode(f.dispatch(UnassignGroup, { identityUuid: adminIdentityUuid, groupUuid: systemAdminGroupUuid }, admin))).toBe(
      "INVALID_ACTION",
    );
    expect(await outcomeCode(f.dispatch(RemoveIdentity, { identityUuid: adminIdentityUuid }, admin))).toBe("INVALID_ACTION");
    const group = await f.query(GetGroup, { groupUuid: systemAdminGroupUuid, includeHistory: true }, admin);
    expect(group.model).toEqual({ tenantUuid: systemTenantUuid, name: "system-admin", permissions: ["*"], removed: false });
    expect(group.historyEvents!.map((e) => [e.domainEvtName, e.senderIdentityUuid])).toEqual([["GroupCreated", adminIdentityUuid]]);
    const tenant = await f.query(GetTenant, { tenantUuid: systemTenantUuid }, admin);
    expect(tenant.model).toEqual({ name: "system", system: true, removed: false });
  });

  it("keeps an authorizer the application installed before, after the group check", async () => {
    const facade = createFacade({
      appName: "composed",
      authorizer: (reqCtx, permission) =>
        permission.domain === "Tenant" && permission.type === "GetTenant" && reqCtx.attributes?.["mfa"] !== true
          ? new MnemeError("PERMISSION_DENIED", "needs mfa")
          : undefined,
    });
    await registerDefaults(facade, { admin: { email: ADMIN_EMAIL, password: ADMIN_PASSWORD }, passwordHashing: FAST_HASHING });
    await facade.start();
    try {
      const login = (
        await facade.dispatch(
          { domain: "Account", name: "Login" },
          { email: ADMIN_EMAIL, password: ADMIN_PASSWORD },
          { waitToFinish: true },
        )
      ).result as { sessionUuid: string; accountUuid: string; identities: { identityUuid: string; tenantUuid: string }[] };
      const id = login.identities[0]!;
      const reqCtx = {
        senderAccountUuid: login.accountUuid,
        senderSessionUuid: login.sessionUuid,
        senderIdentityUuid: id.identityUuid,
        senderTenantUuid: id.tenantUuid,
      };
      expect(await outcomeCode(facade.query(GetTenant, { tenantUuid: id.tenantUuid }, { reqCtx }))).toBe("PERMISSION_DENIED");
      expect(
        await outcomeCode(facade.query(GetTenant, { tenantUuid: id.tenantUuid }, { reqCtx: { ...reqCtx, attributes: { mfa: true } } })),
      ).toBe("ok");
    } finally {
      await facade.stop();
    }
  });

  it("serves tenants, groups and identities by tenant, paged, with history on request", async () => {
    world = await makeWorld();
    const T = await world.createTenant("T");
    const U = await world.createTenant("U");
    for (let i = 0; i < 5; i++) await world.createGroup(T, `g${i}`, []);
    await world.createGroup(U, "u", []);
    const m = await world.member("m@example.org", T, ["Group.ListGroups", "Identity.ListIdentities"]);
    await world.member("n@example.org", U, []);
    const f = world.facade;
    const groups = await f.query(ListGroups, { page: 2, pageSize: 4, includeHistory: true }, { reqCtx: m.reqCtx });
    expect(groups.total).toBe(6); // five and the member's own
    expect(groups.items).toHaveLength(2);
    expect(groups.items.every((g) => g.tenantUuid === T && g.model.tenantUuid === T)).toBe(true);
    expect(groups.items.every((g) => g.historyEvents?.[0]?.domainEvtName === "GroupCreated")).toBe(true);
    const ids = await f.query(ListIdentities, {}, { reqCtx: m.reqCtx });
    expect(ids.items.map((i) => i.aggregateUuid)).toEqual([m.identityUuid]);
    const identity = await f.query(GetIdentity, { identityUuid: m.identityUuid, includeHistory: true }, { reqCtx: world.admin });
    expect(identity.historyEvents!.map((e) => [e.domainEvtName, e.senderIdentityUuid, e.senderTenantUuid])).toEqual([
      ["IdentityCreated", world.ids.adminIdentityUuid, world.ids.systemTenantUuid],
      ["IdentityGroupAssigned", world.ids.adminIdentityUuid, world.ids.systemTenantUuid],
    ]);
    const tenants = await f.query(ListTenants, { includeHistory: true }, { reqCtx: world.admin });
    expect(tenants.items.map((t) => t.model.name)).toEqual(["system", "T", "U"]);
    expect(tenants.items.map((t) => t.tenantUuid)).toEqual([world.ids.systemTenantUuid, T, U]);
    await f.dispatch(RenameTenant, { tenantUuid: T, name: "Tee" }, { reqCtx: world.admin, waitToFinish: true });
    const t = await f.query(GetTenant, { tenantUuid: T, includeHistory: true }, { reqCtx: world.admin });
    expect(t.historyEvents!.map((e) => e.domainEvtName)).toEqual(["TenantCreated", "TenantRenamed"]);
    expect(t.createdAt).toBeLessThan(t.updatedAt);
    expect(await outcomeCode(f.query(GetTenant, { tenantUuid: "0190c0de-0000-7000-8000-000000000000" }, { reqCtx: world.admin }))).toBe(
      "NOT_FOUND",
    );
    expect(await outcomeCode(f.dispatch(CreateTenant, { name: "   " }, { reqCtx: world.admin }))).toBe("VALIDATION_FAILED");
  });
});

describe("registerDefaults", () => {
  const admin = { email: ADMIN_EMAIL, password: ADMIN_PASSWORD };

  it("derives the same ids for the same app and admin email, and others for another app", async () => {
    const a = await registerDefaults(createFacade({ appName: "one" }), { admin: { ...admin, email: "Admin@Example.org" } });
    const b = await registerDefaults(createFacade({ appName: "one" }), { admin });
    const c = await registerDefaults(createFacade({ appName: "two" }), { admin });
    expect(a).toEqual(b);
    expect(c.systemTenantUuid).not.toBe(a.systemTenantUuid);
    expect(c.adminAccountUuid).not.toBe(a.adminAccountUuid);
  });

  it("checks its options and leaves the facade as it was on a clash", async () => {
    const f = createFacade({ appName: "checks" });
    expect(await outcomeCode(registerDefaults(f, { admin: { email: "not an email", password: ADMIN_PASSWORD } }))).toBe(
      "VALIDATION_FAILED",
    );
    expect(await outcomeCode(registerDefaults(f, { admin: { email: ADMIN_EMAIL, password: "short" } }))).toBe("VALIDATION_FAILED");
    expect(await outcomeCode(registerDefaults(f, { admin, passwordHashing: { N: 1000 } }))).toBe("INVALID_REQUEST");
    expect(await outcomeCode(registerDefaults(f, { admin, sessionSecret: "too short" }))).toBe("INVALID_REQUEST");
    f.registerDomain(defineDomain("Group"));
    expect(await outcomeCode(registerDefaults(f, { admin }))).toBe("INVALID_DOMAIN");
    expect(f.domains.has("Tenant")).toBe(false);

    const g = createFacade({ appName: "checks" });
    await registerDefaults(g, { admin, passwordHashing: FAST_HASHING });
    expect(await outcomeCode(registerDefaults(g, { admin }))).toBe("INVALID_DOMAIN");
    await g.start();
    expect(await outcomeCode(registerDefaults(createFacade(), { admin }).then(() => registerDefaults(g, { admin })))).toBe("INVALID_STATE");
    await g.stop();
  });
});
