/**
 * Sessions: login results, credentials resolution (as mneme/http uses it),
 * logout, expiry, failures that do not reveal whether an email exists, and
 * the failed-login limit (also under concurrency).
 */
import { afterEach, describe, expect, it } from "vitest";
import { isMnemeError } from "mneme";
import {
  CreateIdentity,
  Login,
  Logout,
  RemoveIdentity,
  RemoveTenant,
  isSystemAdmin,
  parseSessionToken,
  resolveCredentials,
} from "mneme/defaults";
import { makeWorld, type World } from "../support/defaults-world.js";

let world: World;
afterEach(async () => {
  await world?.facade.stop();
});

async function failure(p: Promise<unknown>): Promise<{ code: string; message: string } | "ok"> {
  return p.then(
    () => "ok" as const,
    (e: unknown) => (isMnemeError(e) ? { code: e.code, message: e.message } : { code: "?", message: String(e) }),
  );
}

describe("login and credentials", () => {
  it("returns a session, a key and a token, and the account's identities", async () => {
    world = await makeWorld();
    const T = await world.createTenant("acme");
    const ivy = await world.member("ivy@example.org", T, []);
    const { login } = await world.login("IVY@example.org ", "ivy@example.org-pw");
    expect(login.accountUuid).toBe(ivy.accountUuid);
    expect(login.sessionKey).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(login.token).toBe(`${login.sessionUuid}.${login.sessionKey}`);
    expect(parseSessionToken(login.token)).toEqual({ sessionUuid: login.sessionUuid, sessionKey: login.sessionKey });
    expect(login.identities).toEqual([{ identityUuid: ivy.identityUuid, tenantUuid: T, tenantName: "acme" }]);
    expect(login.expiresAt).toBe(world.clock.now + 24 * 3_600_000 * 1e6);
  });

  it("resolves only the right key, and the identity only when it is the account's own in a live tenant", async () => {
    world = await makeWorld();
    const T = await world.createTenant("acme");
    const jo = await world.member("jo@example.org", T, []);
    const kim = await world.member("kim@example.org", T, []);
    const { sessionUuid, sessionKey } = jo.login;
    const resolve = (c: { sessionUuid: string; sessionKey: string; identityUuid?: string }) => resolveCredentials(world.facade, c);
    expect(await resolve({ sessionUuid, sessionKey, identityUuid: jo.identityUuid })).toEqual({
      senderAccountUuid: jo.accountUuid,
      senderSessionUuid: sessionUuid,
      senderIdentityUuid: jo.identityUuid,
      senderTenantUuid: T,
    });
    const flipped = sessionKey.slice(0, -1) + (sessionKey.endsWith("A") ? "B" : "A");
    expect(await resolve({ sessionUuid, sessionKey: flipped })).toBeUndefined();
    expect(await resolve({ sessionUuid, sessionKey: "" })).toBeUndefined();
    expect(await resolve({ sessionUuid: kim.login.sessionUuid, sessionKey })).toBeUndefined();
    expect(await resolve({ sessionUuid: "not-a-uuid", sessionKey })).toBeUndefined();
    // someone else's identity is not taken on
    expect(await resolve({ sessionUuid, sessionKey, identityUuid: kim.identityUuid })).toEqual({
      senderAccountUuid: jo.accountUuid,
      senderSessionUuid: sessionUuid,
    });
    await world.facade.dispatch(RemoveIdentity, { identityUuid: jo.identityUuid }, { reqCtx: world.admin, waitToFinish: true });
    expect((await resolve({ sessionUuid, sessionKey, identityUuid: jo.identityUuid }))?.senderIdentityUuid).toBeUndefined();
    await world.facade.dispatch(
      CreateIdentity,
      { accountUuid: jo.accountUuid, tenantUuid: T },
      { reqCtx: world.admin, waitToFinish: true },
    );
    expect((await resolve({ sessionUuid, sessionKey, identityUuid: jo.identityUuid }))?.senderTenantUuid).toBe(T);
    await world.facade.dispatch(RemoveTenant, { tenantUuid: T }, { reqCtx: world.admin, waitToFinish: true });
    expect((await resolve({ sessionUuid, sessionKey, identityUuid: jo.identityUuid }))?.senderTenantUuid).toBeUndefined();
  });

  it("ends a session on logout at once, and a second logout changes nothing", async () => {
    world = await makeWorld();
    await world.register("lea@example.org");
    const { login, reqCtx } = await world.login("lea@example.org");
    const r = await world.facade.dispatch(Logout, {}, { reqCtx });
    expect(r.events.map((e) => e.name)).toEqual(["SessionEnded"]);
    expect(await resolveCredentials(world.facade, { sessionUuid: login.sessionUuid, sessionKey: login.sessionKey })).toBeUndefined();
    expect((await world.facade.dispatch(Logout, {}, { reqCtx, waitToFinish: true })).events).toEqual([]);
    expect(isMnemeError(await world.facade.dispatch(Logout, {}, {}).catch((e: unknown) => e), "PERMISSION_DENIED")).toBe(true);
  });

  it("expires sessions after the configured lifetime", async () => {
    world = await makeWorld({ defaults: { sessionTtlMs: 60_000 } });
    await world.register("max@example.org");
    const { login } = await world.login("max@example.org");
    const creds = { sessionUuid: login.sessionUuid, sessionKey: login.sessionKey };
    world.clock.advanceMs(59_999);
    expect(await resolveCredentials(world.facade, creds)).toBeDefined();
    world.clock.advanceMs(1);
    expect(await resolveCredentials(world.facade, creds)).toBeUndefined();
  });

  it("fails a login the same way whether or not the email exists", async () => {
    world = await makeWorld();
    await world.register("ned@example.org");
    const wrongPassword = await failure(world.facade.dispatch(Login, { email: "ned@example.org", password: "wrong-password" }));
    const unknownEmail = await failure(world.facade.dispatch(Login, { email: "nobody@example.org", password: "wrong-password" }));
    const malformed = await failure(world.facade.dispatch(Login, { email: "no email at all", password: "wrong-password" }));
    expect(wrongPassword).toEqual({ code: "UNAUTHENTICATED", message: "invalid email or password" });
    expect(unknownEmail).toEqual(wrongPassword);
    expect(malformed).toEqual(wrongPassword);
  });

  it("refuses logins after too many failures per email, known or not, until the window passes", async () => {
    world = await makeWorld({ defaults: { maxFailedLogins: 3, failedLoginWindowMs: 60_000 } });
    await world.register("oli@example.org");
    for (const email of ["oli@example.org", "ghost@example.org"]) {
      for (let i = 0; i < 3; i++)
        expect(await failure(world.facade.dispatch(Login, { email, password: "wrong-password" }))).toMatchObject({
          code: "UNAUTHENTICATED",
        });
      expect(await failure(world.facade.dispatch(Login, { email, password: "wrong-password" }))).toMatchObject({ code: "RATE_LIMITED" });
    }
    // even the right password is refused while the window lasts; other emails are not affected
    expect(await failure(world.facade.dispatch(Login, { email: "OLI@example.org", password: "oli@example.org-pw" }))).toMatchObject({
      code: "RATE_LIMITED",
    });
    expect(await failure(world.facade.dispatch(Login, { email: "admin@example.org", password: "admin-password-1" }))).toBe("ok");
    world.clock.advanceMs(60_000);
    expect(await failure(world.facade.dispatch(Login, { email: "oli@example.org", password: "oli@example.org-pw" }))).toBe("ok");
    const warnings = (await world.facade.logStore.list({ source: "mneme.defaults.login" })).items;
    expect(warnings).toHaveLength(2);
    expect(warnings[0]!.level).toBe("warn");
  });

  it("holds the limit under concurrent attempts, and a success clears the count", async () => {
    world = await makeWorld({ defaults: { maxFailedLogins: 5 } });
    await world.register("pam@example.org");
    const outcomes = await Promise.all(
      Array.from({ length: 20 }, () => failure(world.facade.dispatch(Login, { email: "pam@example.org", password: "wrong-password" }))),
    );
    const codes = outcomes.map((o) => (o === "ok" ? "ok" : o.code));
    expect(codes.filter((c) => c === "UNAUTHENTICATED")).toHaveLength(5);
    expect(codes.filter((c) => c === "RATE_LIMITED")).toHaveLength(15);

    world.clock.advanceMs(60_000);
    for (let i = 0; i < 4; i++) await failure(world.facade.dispatch(Login, { email: "pam@example.org", password: "wrong-password" }));
    expect(await failure(world.facade.dispatch(Login, { email: "pam@example.org", password: "pam@example.org-pw" }))).toBe("ok");
    for (let i = 0; i < 4; i++)
      expect(await failure(world.facade.dispatch(Login, { email: "pam@example.org", password: "wrong-password" }))).toMatchObject({
        code: "UNAUTHENTICATED",
      });
  });

  it("tells system administrators apart", async () => {
    world = await makeWorld();
    const T = await world.createTenant("acme");
    const all = await world.member("root@example.org", T, ["*"]);
    expect(await isSystemAdmin(world.facade, world.admin)).toBe(true);
    expect(await isSystemAdmin(world.facade, all.reqCtx)).toBe(false);
    const { senderIdentityUuid: _i, senderTenantUuid: _t, ...bare } = world.admin;
    expect(await isSystemAdmin(world.facade, bare)).toBe(false);
    expect(await isSystemAdmin(world.facade, { ...world.admin, senderAccountUuid: all.accountUuid })).toBe(false);
  });
});
