/**
 * Accounts of the built-in domains: registration and unique emails (also under
 * concurrency), history with the sender of each change, password changes,
 * removal, and the Account readmodel's queries.
 */
import { afterEach, describe, expect, it } from "vitest";
import {
  ChangeAccountEmail,
  ChangeAccountName,
  GetAccount,
  GetAccountByEmail,
  ListAccounts,
  Login,
  RegisterAccount,
  RemoveAccount,
  SetAccountPassword,
  resolveCredentials,
} from "mneme/defaults";
import { ADMIN_EMAIL, makeWorld, type World } from "../support/defaults-world.js";
import { outcomeCode } from "../support/rejections.js";

let world: World;
afterEach(async () => {
  await world?.facade.stop();
});

describe("accounts", () => {
  it("keeps the history of an account after three changes, with the sender identity of each", async () => {
    world = await makeWorld();
    const T = await world.createTenant("acme");
    const ann = await world.member("ann@example.org", T, []);
    // 1. the account itself, acting as its identity in T
    await world.facade.dispatch(
      ChangeAccountName,
      { accountUuid: ann.accountUuid, name: "Ann" },
      { reqCtx: ann.reqCtx, waitToFinish: true },
    );
    // 2. the system administrator
    await world.facade.dispatch(
      ChangeAccountEmail,
      { accountUuid: ann.accountUuid, email: "ann@acme.example" },
      { reqCtx: world.admin, waitToFinish: true },
    );
    // 3. the account itself again, with only a session (no identity)
    const { reqCtx: bare } = await world.login("ann@acme.example", "ann@example.org-pw");
    await world.facade.dispatch(
      SetAccountPassword,
      { accountUuid: ann.accountUuid, password: "a-better-password", currentPassword: "ann@example.org-pw" },
      { reqCtx: bare, waitToFinish: true },
    );

    const item = await world.facade.query(GetAccount, { accountUuid: ann.accountUuid, includeHistory: true }, { reqCtx: ann.reqCtx });
    expect(item.model).toMatchObject({ email: "ann@acme.example", name: "Ann", removed: false });
    expect(item.version).toBe(4);
    const h = item.historyEvents!;
    expect(h.map((e) => e.domainEvtName)).toEqual([
      "AccountRegistered",
      "AccountNameChanged",
      "AccountEmailChanged",
      "AccountPasswordChanged",
    ]);
    expect(h.map((e) => e.senderIdentityUuid)).toEqual(["", ann.identityUuid, world.ids.adminIdentityUuid, ""]);
    expect(h.map((e) => e.senderTenantUuid)).toEqual(["", T, world.ids.systemTenantUuid, ""]);
    expect(h.map((e) => e.version)).toEqual([1, 2, 3, 4]);
    // the e-mail is personal data (decrypted on read); its login claim is a keyed hash, not the address
    expect(JSON.parse(h[2]!.domainEvtData)).toEqual({
      email: "ann@acme.example",
      previousEmail: "ann@example.org",
      emailClaimUuid: expect.any(String),
    });
    // the password change is a fact in the history; its hash lives elsewhere
    expect(JSON.parse(h[3]!.domainEvtData)).toEqual({});
    expect(item.createdAt).toBe(h[0]!.createdAt);
    expect(item.updatedAt).toBe(h[3]!.createdAt);
    // without includeHistory there is no history field at all
    expect("historyEvents" in (await world.facade.query(GetAccount, { accountUuid: ann.accountUuid }, { reqCtx: ann.reqCtx }))).toBe(false);
  });

  it("makes emails unique, case-insensitively, and exactly one of concurrent registrations wins", async () => {
    world = await makeWorld();
    await world.register("bob@example.org");
    expect(await outcomeCode(world.facade.dispatch(RegisterAccount, { email: " BOB@Example.org ", password: "another-password" }))).toBe(
      "VALIDATION_FAILED",
    );
    expect(await outcomeCode(world.facade.dispatch(RegisterAccount, { email: "BOB@Example.org", password: "another-password" }))).toBe(
      "CONFLICT",
    );
    expect(await outcomeCode(world.facade.dispatch(RegisterAccount, { email: ADMIN_EMAIL, password: "another-password" }))).toBe(
      "CONFLICT",
    );

    const outcomes = await Promise.all(
      Array.from({ length: 12 }, (_, i) =>
        outcomeCode(
          world.facade.dispatch(RegisterAccount, {
            email: i % 2 === 0 ? "race@example.org" : "RACE@example.org",
            password: `password-${i}`,
          }),
        ),
      ),
    );
    expect(outcomes.filter((o) => o === "ok")).toHaveLength(1);
    expect(outcomes.filter((o) => o === "CONFLICT")).toHaveLength(11);
    const list = await world.facade.query(ListAccounts, { pageSize: 100 }, { reqCtx: world.admin });
    expect(list.items.filter((i) => i.model.email === "race@example.org")).toHaveLength(1);
  });

  it("moves the email on change: the old one is free, a taken one conflicts", async () => {
    world = await makeWorld();
    const carl = await world.register("carl@example.org");
    await world.register("dora@example.org");
    const { reqCtx } = await world.login("carl@example.org");
    expect(await outcomeCode(world.facade.dispatch(ChangeAccountEmail, { accountUuid: carl, email: "dora@example.org" }, { reqCtx }))).toBe(
      "CONFLICT",
    );
    await world.facade.dispatch(ChangeAccountEmail, { accountUuid: carl, email: "carl@new.example" }, { reqCtx, waitToFinish: true });
    expect(await outcomeCode(world.facade.dispatch(Login, { email: "carl@example.org", password: "carl@example.org-pw" }))).toBe(
      "UNAUTHENTICATED",
    );
    expect(await outcomeCode(world.facade.dispatch(Login, { email: "carl@new.example", password: "carl@example.org-pw" }))).toBe("ok");
    expect(await world.register("carl@example.org")).toMatch(/^[0-9a-f-]{36}$/);
    const byEmail = await world.facade.query(GetAccountByEmail, { email: "Carl@New.example" }, { reqCtx: world.admin });
    expect(byEmail.aggregateUuid).toBe(carl);
    expect(await outcomeCode(world.facade.query(GetAccountByEmail, { email: "nobody@example.org" }, { reqCtx: world.admin }))).toBe(
      "NOT_FOUND",
    );
  });

  it("asks an account for its current password and ends its other sessions on a password change", async () => {
    world = await makeWorld();
    const eve = await world.register("eve@example.org");
    const first = await world.login("eve@example.org");
    const second = await world.login("eve@example.org");
    const set = (reqCtx: typeof first.reqCtx, currentPassword?: string) =>
      world.facade.dispatch(
        SetAccountPassword,
        { accountUuid: eve, password: "eve-new-password", ...(currentPassword === undefined ? {} : { currentPassword }) },
        { reqCtx, waitToFinish: true },
      );
    expect(await outcomeCode(set(first.reqCtx))).toBe("PERMISSION_DENIED");
    expect(await outcomeCode(set(first.reqCtx, "not-the-password"))).toBe("PERMISSION_DENIED");
    await set(first.reqCtx, "eve@example.org-pw");
    const resolve = (l: typeof first.login) => resolveCredentials(world.facade, { sessionUuid: l.sessionUuid, sessionKey: l.sessionKey });
    expect(await resolve(first.login)).toBeDefined();
    expect(await resolve(second.login)).toBeUndefined();
    expect(await outcomeCode(world.facade.dispatch(Login, { email: "eve@example.org", password: "eve@example.org-pw" }))).toBe(
      "UNAUTHENTICATED",
    );
    expect(await outcomeCode(world.facade.dispatch(Login, { email: "eve@example.org", password: "eve-new-password" }))).toBe("ok");
    // an administrator resets it without the current one, and every session of the account ends
    await world.facade.dispatch(
      SetAccountPassword,
      { accountUuid: eve, password: "reset-by-admin" },
      { reqCtx: world.admin, waitToFinish: true },
    );
    expect(await resolve(first.login)).toBeUndefined();
  });

  it("removes an account: its sessions stop resolving, its email is free, the bootstrapped admin stays", async () => {
    world = await makeWorld();
    const fay = await world.register("fay@example.org");
    const { login, reqCtx } = await world.login("fay@example.org");
    await world.facade.dispatch(RemoveAccount, { accountUuid: fay }, { reqCtx });
    // no waitToFinish: the session is refused at once in this process
    expect(await resolveCredentials(world.facade, { sessionUuid: login.sessionUuid, sessionKey: login.sessionKey })).toBeUndefined();
    await world.register("fay@example.org", "fay-second-life");
    expect(await outcomeCode(world.facade.dispatch(Login, { email: "fay@example.org", password: "fay@example.org-pw" }))).toBe(
      "UNAUTHENTICATED",
    );
    const old = await world.facade.query(GetAccount, { accountUuid: fay, includeHistory: true }, { reqCtx: world.admin });
    expect(old.model.removed).toBe(true);
    expect(old.historyEvents!.map((e) => e.domainEvtName)).toEqual(["AccountRegistered", "AccountRemoved"]);
    expect(
      await outcomeCode(world.facade.dispatch(RemoveAccount, { accountUuid: world.ids.adminAccountUuid }, { reqCtx: world.admin })),
    ).toBe("INVALID_ACTION");
  });

  it("lets an account read and rename itself, not another account", async () => {
    world = await makeWorld();
    const gus = await world.register("gus@example.org");
    const hal = await world.register("hal@example.org");
    const { reqCtx } = await world.login("gus@example.org");
    expect((await world.facade.query(GetAccount, { accountUuid: gus }, { reqCtx })).model.email).toBe("gus@example.org");
    expect(await outcomeCode(world.facade.query(GetAccount, { accountUuid: hal }, { reqCtx }))).toBe("PERMISSION_DENIED");
    expect(await outcomeCode(world.facade.dispatch(ChangeAccountName, { accountUuid: hal, name: "Hacked" }, { reqCtx }))).toBe(
      "PERMISSION_DENIED",
    );
    await world.facade.dispatch(ChangeAccountName, { accountUuid: gus, name: "Gus" }, { reqCtx, waitToFinish: true });
    expect((await world.facade.query(GetAccount, { accountUuid: gus }, { reqCtx })).model.name).toBe("Gus");
  });

  it("pages the account list, with histories loaded for the page only", async () => {
    world = await makeWorld();
    for (let i = 0; i < 7; i++) await world.register(`user${i}@example.org`);
    const p1 = await world.facade.query(ListAccounts, { page: 1, pageSize: 3, includeHistory: true }, { reqCtx: world.admin });
    const p3 = await world.facade.query(ListAccounts, { page: 3, pageSize: 3 }, { reqCtx: world.admin });
    expect(p1.total).toBe(8); // the admin and seven users
    expect(p1.items).toHaveLength(3);
    expect(p3.items).toHaveLength(2);
    expect(p1.items[0]!.model.email).toBe(ADMIN_EMAIL);
    for (const item of p1.items) expect(item.historyEvents![0]!.domainEvtName).toBe("AccountRegistered");
    expect(p3.items.every((i) => !("historyEvents" in i))).toBe(true);
    expect(await outcomeCode(world.facade.query(ListAccounts, { pageSize: 1001 }, { reqCtx: world.admin }))).toBe("VALIDATION_FAILED");
  });
});
