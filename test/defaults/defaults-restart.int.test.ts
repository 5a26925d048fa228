/**
 * The built-in domains on a real SQLite file: a restart keeps accounts and
 * sessions, a second start changes nothing, and two instances bootstrapping
 * the same file at once create one system tenant.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { type Facade, createFacade } from "mneme";
import {
  ChangeAccountName,
  GetAccount,
  ListTenants,
  Login,
  type LoginResult,
  RegisterAccount,
  SetAccountPassword,
  registerDefaults,
  resolveCredentials,
} from "mneme/defaults";
import { createSqliteBackends } from "mneme/sqlite";
import { ADMIN_EMAIL, ADMIN_PASSWORD, FAST_HASHING } from "../support/defaults-world.js";

const dir = mkdtempSync(join(tmpdir(), "mneme-defaults-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

async function open(
  filename: string,
  adminPassword = ADMIN_PASSWORD,
): Promise<{ facade: Facade; ids: Awaited<ReturnType<typeof registerDefaults>> }> {
  const facade = createFacade({ appName: "restart", ...createSqliteBackends({ filename }) });
  const ids = await registerDefaults(facade, {
    admin: { email: ADMIN_EMAIL, password: adminPassword },
    passwordHashing: FAST_HASHING,
    sessionSecret: "a secret of the deployment",
  });
  return { facade, ids };
}

async function counts(facade: Facade): Promise<{ head: number; commands: number }> {
  return { head: await facade.eventRepository.headPosition(), commands: (await facade.commandStore.info()).numItems };
}

async function adminCtx(facade: Facade, login: LoginResult) {
  return resolveCredentials(facade, {
    sessionUuid: login.sessionUuid,
    sessionKey: login.sessionKey,
    identityUuid: login.identities[0]!.identityUuid,
  });
}

describe("built-in domains on SQLite", () => {
  it("keeps accounts and sessions across a restart, and a second start changes nothing", async () => {
    const file = join(dir, "restart.db");
    const first = await open(file);
    await first.facade.start();
    const accountUuid = (
      await first.facade.dispatch(RegisterAccount, { email: "sam@example.org", password: "sam-password" }, { waitToFinish: true })
    ).result!.accountUuid;
    const session = (await first.facade.dispatch(Login, { email: "sam@example.org", password: "sam-password" }, { waitToFinish: true }))
      .result!;
    const samCtx = { senderAccountUuid: accountUuid, senderSessionUuid: session.sessionUuid };
    await first.facade.dispatch(ChangeAccountName, { accountUuid, name: "Sam" }, { reqCtx: samCtx, waitToFinish: true });
    const admin = (await first.facade.dispatch(Login, { email: ADMIN_EMAIL, password: ADMIN_PASSWORD }, { waitToFinish: true })).result!;
    // the admin changes the password; the next start must not put the configured one back
    await first.facade.dispatch(
      SetAccountPassword,
      { accountUuid: first.ids.adminAccountUuid, password: "changed-admin-password", currentPassword: ADMIN_PASSWORD },
      { reqCtx: (await adminCtx(first.facade, admin))!, waitToFinish: true },
    );
    const before = await counts(first.facade);
    await first.facade.stop();

    const second = await open(file);
    expect(second.ids).toEqual(first.ids);
    await second.facade.start();
    expect(await counts(second.facade)).toEqual(before);
    const resolved = await resolveCredentials(second.facade, { sessionUuid: session.sessionUuid, sessionKey: session.sessionKey });
    expect(resolved).toEqual(samCtx);
    const item = await second.facade.query(GetAccount, { accountUuid, includeHistory: true }, { reqCtx: resolved! });
    expect(item.model).toMatchObject({ email: "sam@example.org", name: "Sam", removed: false });
    expect(item.historyEvents!.map((e) => e.domainEvtName)).toEqual(["AccountRegistered", "AccountNameChanged"]);
    const adminAgain = await adminCtx(second.facade, admin);
    expect(adminAgain?.senderTenantUuid).toBe(first.ids.systemTenantUuid);
    expect((await second.facade.query(ListTenants, {}, { reqCtx: adminAgain! })).total).toBe(1);
    await expect(second.facade.dispatch(Login, { email: ADMIN_EMAIL, password: ADMIN_PASSWORD })).rejects.toMatchObject({
      code: "UNAUTHENTICATED",
    });
    expect((await second.facade.dispatch(Login, { email: "sam@example.org", password: "sam-password" })).result!.accountUuid).toBe(
      accountUuid,
    );
    await second.facade.stop();

    // a third start with another configured admin password changes nothing either
    const third = await open(file, "yet-another-password");
    await third.facade.start();
    const after = await counts(third.facade);
    expect(after.head).toBe(before.head + 1); // Sam's second login
    await expect(third.facade.dispatch(Login, { email: ADMIN_EMAIL, password: "yet-another-password" })).rejects.toMatchObject({
      code: "UNAUTHENTICATED",
    });
    await third.facade.stop();
  });

  it("bootstraps once when two instances start on the same file at the same time", async () => {
    const file = join(dir, "race.db");
    const a = await open(file);
    const b = await open(file);
    await Promise.all([a.facade.start(), b.facade.start()]);
    const created: string[] = [];
    for await (const batch of a.facade.eventRepository.readAll())
      for (const e of batch) if (e.name === "TenantCreated") created.push(e.aggregateUuid);
    expect(created).toEqual([a.ids.systemTenantUuid]);
    // one bootstrap command succeeded; the other instance, if it got as far as appending, met a CONFLICT and accepted it
    const records = (await a.facade.commandStore.list({ limit: 100 })).items.filter((r) => r.name === "BootstrapSystemTenant");
    expect(records.filter((r) => r.status === "succeeded")).toHaveLength(1);
    expect(records.filter((r) => r.status !== "succeeded").every((r) => r.error?.code === "CONFLICT")).toBe(true);
    for (const x of [a, b]) {
      const login = (await x.facade.dispatch(Login, { email: ADMIN_EMAIL, password: ADMIN_PASSWORD })).result!;
      expect(login.accountUuid).toBe(a.ids.adminAccountUuid);
    }
    await a.facade.stop();
    await b.facade.stop();
  });
});
