/**
 * The built-in domains are definitions plus an install step: importing
 * mneme/defaults attaches nothing, registerDefaults installs each domain with
 * that facade's settings, and facades (or two copies of the module) share no
 * state: sessions, secrets, clocks and the bootstrap are per facade.
 */
import { afterEach, describe, expect, it, vi } from "vitest";
import { type Facade, createFacade } from "mneme";
import { RuntimeDomain } from "mneme/runtime";
import * as defaults from "mneme/defaults";
import { DEFAULT_DOMAINS, Login, resolveCredentials, isSystemAdmin } from "mneme/defaults";
import { ADMIN_EMAIL, ADMIN_PASSWORD, FAST_HASHING, FakeClock, makeWorld, type World } from "../support/defaults-world.js";

const stops: (Facade | World)[] = [];
afterEach(async () => {
  for (const x of stops.splice(0)) await ("facade" in x ? x.facade : x).stop();
});

async function world(opts: Parameters<typeof makeWorld>[0] = {}): Promise<World> {
  const w = await makeWorld(opts);
  stops.push(w);
  return w;
}

describe("installing the built-in domains", () => {
  it("importing mneme/defaults attaches no handler to any definition", () => {
    for (const d of [...DEFAULT_DOMAINS, RuntimeDomain]) {
      expect({ domain: d.name, handlers: d.commandHandlers.size + d.queryHandlers.size }).toEqual({ domain: d.name, handlers: 0 });
    }
  });

  it("registerDefaults installs each domain's handlers in its facade, and still resolves at once with the ids", async () => {
    const f = createFacade({ appName: "installed" });
    stops.push(f);
    const ids = await defaults.registerDefaults(f, {
      admin: { email: ADMIN_EMAIL, password: ADMIN_PASSWORD },
      passwordHashing: FAST_HASHING,
    });
    expect(Object.keys(ids).sort()).toEqual(["adminAccountUuid", "adminIdentityUuid", "systemAdminGroupUuid", "systemTenantUuid"]);
    const byDomain = new Map(
      f.runtime.listCommandHandlers().map((h) => [h.commandHandlerDomain, h.domainCommandHandlers.map((c) => c.domainCmdName)]),
    );
    expect(byDomain.get("Account")).toEqual(expect.arrayContaining(["RegisterAccount", "Login", "Logout"]));
    expect(byDomain.get("Tenant")).toEqual(expect.arrayContaining(["CreateTenant", "BootstrapSystemTenant"]));
    expect(f.domains.get("Account")?.definition).toBe(defaults.Account);
  });

  it("two facades share no settings: each session opens only in its own facade, each with its own clock and limits", async () => {
    const a = await world({ facade: { appName: "same" }, defaults: { sessionSecret: "secret-of-facade-a", sessionTtlMs: 60_000 } });
    const b = await world({ facade: { appName: "same" }, defaults: { sessionSecret: "secret-of-facade-b", maxFailedLogins: 1 } });
    expect(a.ids).toEqual(b.ids);
    const inA = (await a.facade.dispatch(Login, { email: ADMIN_EMAIL, password: ADMIN_PASSWORD })).result!;
    const creds = { sessionUuid: inA.sessionUuid, sessionKey: inA.sessionKey };
    expect(await resolveCredentials(a.facade, creds)).toMatchObject({ senderSessionUuid: inA.sessionUuid });
    expect(await resolveCredentials(b.facade, creds)).toBeUndefined();
    // A's sessions last 60 s on A's clock; B's clock does not move them.
    b.clock.advanceMs(120_000);
    expect(await resolveCredentials(a.facade, creds)).toBeDefined();
    a.clock.advanceMs(61_000);
    expect(await resolveCredentials(a.facade, creds)).toBeUndefined();
    // B allows one failed login per email, A the default five.
    await expect(b.facade.dispatch(Login, { email: ADMIN_EMAIL, password: "wrong-password-1" })).rejects.toMatchObject({
      code: "UNAUTHENTICATED",
    });
    await expect(b.facade.dispatch(Login, { email: ADMIN_EMAIL, password: ADMIN_PASSWORD })).rejects.toMatchObject({
      code: "RATE_LIMITED",
    });
    await expect(a.facade.dispatch(Login, { email: ADMIN_EMAIL, password: "wrong-password-1" })).rejects.toMatchObject({
      code: "UNAUTHENTICATED",
    });
    expect((await a.facade.dispatch(Login, { email: ADMIN_EMAIL, password: ADMIN_PASSWORD })).result?.sessionKey).toEqual(
      expect.any(String),
    );
  });

  it("the helpers read what they need through the facade: a second copy of the module works on a facade the first set up", async () => {
    const clock = new FakeClock();
    const f = createFacade({ appName: "copies" });
    stops.push(f);
    const ids = await defaults.registerDefaults(f, {
      admin: { email: ADMIN_EMAIL, password: ADMIN_PASSWORD },
      passwordHashing: FAST_HASHING,
      clock: clock.fn,
    });
    await f.start();
    vi.resetModules();
    const copy = await import("../../src/defaults/index.js");
    expect(copy.resolveCredentials).not.toBe(resolveCredentials);
    const login = (await f.dispatch(copy.Login, { email: ADMIN_EMAIL, password: ADMIN_PASSWORD }, { waitToFinish: true })).result!;
    const reqCtx = await copy.resolveCredentials(f, {
      sessionUuid: login.sessionUuid,
      sessionKey: login.sessionKey,
      identityUuid: ids.adminIdentityUuid,
    });
    expect(reqCtx).toMatchObject({ senderIdentityUuid: ids.adminIdentityUuid, senderTenantUuid: ids.systemTenantUuid });
    expect(await copy.isSystemAdmin(f, reqCtx!)).toBe(true);
    expect(await isSystemAdmin(f, reqCtx!)).toBe(true);
  });

  it("without registerDefaults, the helpers say so (INVALID_STATE) and the permission functions deny", async () => {
    const f = createFacade({ appName: "bare" });
    stops.push(f);
    await f.start();
    await expect(resolveCredentials(f, { sessionUuid: "0190f5e4-0000-7000-8000-0000000000b1", sessionKey: "k" })).rejects.toMatchObject({
      code: "INVALID_STATE",
    });
    await expect(isSystemAdmin(f, {})).rejects.toMatchObject({ code: "INVALID_STATE" });
    const denied = await defaults.systemAdministrator(
      {},
      { queryUuid: "q", domain: "X", name: "Y", payload: {}, reqCtx: {} },
      { facade: f },
    );
    expect(denied).toMatchObject({ code: "PERMISSION_DENIED", message: expect.stringContaining("not registered") });
  });

  it("the bootstrap's command is refused to everyone but the facade's own bootstrap", async () => {
    const w = await world();
    await expect(
      w.facade.dispatch(
        defaults.BootstrapSystemTenant,
        { email: "x@example.org", password: "a-password-1", name: "x", tenantName: "t" },
        { reqCtx: w.admin },
      ),
    ).rejects.toMatchObject({ code: "PERMISSION_DENIED" });
  });
});
