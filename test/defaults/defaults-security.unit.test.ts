/**
 * Secrets of the built-in domains: clear passwords and session keys appear in
 * no event, command record, log entry, readmodel document or system event, and
 * in no error message; password hashes are scrypt with a salt per hash and
 * their parameters recorded.
 */
import { afterEach, describe, expect, it } from "vitest";
import { type Facade, type SystemEvent, isMnemeError } from "mneme";
import { REDACTED } from "mneme/runtime";
import {
  ChangeAccountName,
  DEFAULT_SCRYPT,
  Login,
  Logout,
  RegisterAccount,
  SetAccountPassword,
  hashPassword,
  verifyPassword,
} from "mneme/defaults";
import { ADMIN_PASSWORD, makeWorld, type World } from "../support/defaults-world.js";

let world: World;
afterEach(async () => {
  await world?.facade.stop();
});

async function everythingStored(facade: Facade): Promise<unknown[]> {
  const out: unknown[] = [];
  for await (const batch of facade.eventRepository.readAll({ batchSize: 500 })) out.push(...batch);
  for (const store of [facade.commandStore, facade.logStore] as const) {
    let cursor: string | undefined;
    do {
      const page = await store.list({ limit: 1000, ...(cursor === undefined ? {} : { cursor }) });
      out.push(...page.items);
      cursor = page.nextCursor;
    } while (cursor !== undefined);
  }
  const cache = await facade.cacheStore.list({ limit: 1000 });
  out.push(...cache.items);
  for (const name of await facade.readmodelStoreBackend.listCollections()) {
    out.push(name, ...(await facade.readmodelStoreBackend.collection(name).list({ limit: 100_000 })));
  }
  return out;
}

describe("secrets", () => {
  it("never persists or publishes a clear password or session key", async () => {
    world = await makeWorld({ facade: { systemEvents: true }, defaults: { maxFailedLogins: 2 } });
    const published: SystemEvent[] = [];
    world.facade.runtime.systemEvents.subscribe((e) => {
      published.push(e);
    });
    const f = world.facade;
    const secrets: string[] = [ADMIN_PASSWORD];
    const errors: string[] = [];
    const attempt = (p: Promise<unknown>) =>
      p.catch((e: unknown) => {
        errors.push(isMnemeError(e) ? JSON.stringify(e.toJSON()) + String(e.stack) : String(e));
      });

    const password = "Quinn's secret 1";
    secrets.push(password);
    const quinn = (await f.dispatch(RegisterAccount, { email: "quinn@example.org", password, name: "Quinn" }, { waitToFinish: true }))
      .result!.accountUuid;
    const first = (await f.dispatch(Login, { email: "quinn@example.org", password }, { waitToFinish: true })).result!;
    secrets.push(first.sessionKey, first.token);
    const reqCtx = { senderAccountUuid: quinn, senderSessionUuid: first.sessionUuid };
    await f.dispatch(ChangeAccountName, { accountUuid: quinn, name: "Q" }, { reqCtx, waitToFinish: true });
    const wrong = "Quinn's wrong guess";
    secrets.push(wrong);
    await attempt(
      f.dispatch(SetAccountPassword, { accountUuid: quinn, password: "Quinn's next secret", currentPassword: wrong }, { reqCtx }),
    );
    const next = "Quinn's next secret";
    secrets.push(next);
    await f.dispatch(SetAccountPassword, { accountUuid: quinn, password: next, currentPassword: password }, { reqCtx, waitToFinish: true });
    for (let i = 0; i < 3; i++) await attempt(f.dispatch(Login, { email: "quinn@example.org", password: `${wrong} ${i}` }));
    for (let i = 0; i < 3; i++) secrets.push(`${wrong} ${i}`);
    await attempt(f.dispatch(Login, { email: "nobody@example.org", password: "nobody's password" }));
    secrets.push("nobody's password");
    await attempt(f.dispatch(RegisterAccount, { email: "quinn@example.org", password: "a duplicate's password" }));
    await attempt(f.dispatch(RegisterAccount, { email: "short@example.org", password: "short!!" }));
    secrets.push("a duplicate's password", "short!!");
    await f.dispatch(Logout, {}, { reqCtx, waitToFinish: true });

    const stored = JSON.stringify(await everythingStored(f));
    const events = JSON.stringify(published);
    const thrown = errors.join("\n");
    expect(errors.length).toBeGreaterThanOrEqual(6);
    expect(published.length).toBeGreaterThan(10);
    for (const secret of secrets) {
      expect(stored.includes(secret), `stored: ${secret}`).toBe(false);
      expect(events.includes(secret), `system events: ${secret}`).toBe(false);
      expect(thrown.includes(secret), `errors: ${secret}`).toBe(false);
    }
    // the command store shows that a password was given, not what it was (nor the personal e-mail and name)
    const records = (await f.commandStore.list({ limit: 1000 })).items;
    const register = records.find((r) => r.name === "RegisterAccount" && r.status === "succeeded")!;
    expect(register.payload).toEqual({ email: REDACTED, password: REDACTED, name: REDACTED });
    const change = records.find((r) => r.name === "SetAccountPassword" && r.status === "succeeded")!;
    expect(change.payload).toMatchObject({ password: REDACTED, currentPassword: REDACTED });
  });

  it("hashes with scrypt, a fresh salt each time, the parameters recorded", async () => {
    const a = await hashPassword("correct horse battery");
    const b = await hashPassword("correct horse battery");
    expect(a).toMatchObject({ algorithm: "scrypt", N: DEFAULT_SCRYPT.N, r: DEFAULT_SCRYPT.r, p: DEFAULT_SCRYPT.p, keyLength: 64 });
    expect(DEFAULT_SCRYPT).toMatchObject({ N: 32_768, r: 8, p: 1 });
    expect(Buffer.from(a.salt, "base64")).toHaveLength(16);
    expect(Buffer.from(a.hash, "base64")).toHaveLength(64);
    expect(a.salt).not.toBe(b.salt);
    expect(a.hash).not.toBe(b.hash);
    expect(await verifyPassword("correct horse battery", a)).toBe(true);
    expect(await verifyPassword("correct horse batterY", a)).toBe(false);
    expect(await verifyPassword(undefined, a)).toBe(false);
    // a hash made with other parameters still verifies: they come from the hash
    const cheap = await hashPassword("correct horse battery", { N: 1024, r: 4, p: 2 });
    expect(await verifyPassword("correct horse battery", cheap)).toBe(true);
  });

  it("stores the configured parameters with each account's hash, apart from the account's own events", async () => {
    world = await makeWorld();
    const accountUuid = await world.register("rae@example.org");
    const all: { name: string; aggregateUuid: string; payload: Record<string, unknown> }[] = [];
    for await (const batch of world.facade.eventRepository.readAll()) all.push(...(batch as typeof all));
    const credential = all.filter((e) => e.name === "CredentialSet" && e.payload["accountUuid"] === accountUuid);
    expect(credential).toHaveLength(1);
    expect(credential[0]!.payload).toMatchObject({ algorithm: "scrypt", N: 1024, r: 8, p: 1, keyLength: 64 });
    expect(credential[0]!.aggregateUuid).not.toBe(accountUuid);
    expect(all.filter((e) => e.aggregateUuid === accountUuid).map((e) => e.name)).toEqual(["AccountRegistered"]);
  });
});
