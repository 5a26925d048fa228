/**
 * The built-in account's personal data: email and name are stored encrypted
 * with the account as subject (also in EmailClaimed), login and the email
 * lookup work through a keyed hash of the email, RemoveAccount { erase: true }
 * erases email and name on every read path, frees the email, and leaves no
 * trace in the SQLite file; claims of stores written before (unkeyed ids) are
 * still honoured.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { createFacade, type Event } from "mneme";
import { GetAccount, GetAccountByEmail, Login, RegisterAccount, RemoveAccount, registerDefaults } from "mneme/defaults";
import { createSqliteBackends } from "mneme/sqlite";
import type { EventRepository } from "mneme/store";
import { AccountAggregate, AccountRegistered, AccountRemoved, EmailClaimed } from "../../src/defaults/account-domain.js";
import { legacyEmailClaimUuidOf } from "../../src/defaults/ids.js";
import { ADMIN_EMAIL, ADMIN_PASSWORD, FAST_HASHING, makeWorld } from "../support/defaults-world.js";
import { rejection } from "../support/rejections.js";

const dir = mkdtempSync(join(tmpdir(), "mneme-privacy-accounts-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

async function stored(repo: EventRepository): Promise<Event[]> {
  const raw = (repo as unknown as { stored: EventRepository }).stored;
  const out: Event[] = [];
  for await (const page of raw.readAll()) out.push(...page);
  return out;
}

describe("the built-in account's personal data", () => {
  it("email and name are sealed in every event; login and the email lookup still work", async () => {
    const world = await makeWorld();
    try {
      const ann = await world.register("ann.private@example.org", "ann-password-1", "Ann Private");
      const raw = JSON.stringify(await stored(world.facade.eventRepository));
      for (const s of ["ann.private@example.org", "Ann Private", ADMIN_EMAIL, "Ada Admin"]) expect(raw).not.toContain(s);
      // The claim id is not the unkeyed hash of the email.
      expect(raw).not.toContain(legacyEmailClaimUuidOf("ann.private@example.org"));
      const session = await world.login("Ann.Private@example.org ", "ann-password-1");
      expect(session.login.accountUuid).toBe(ann);
      const byEmail = await world.facade.query(GetAccountByEmail, { email: "ann.private@example.org" }, { reqCtx: world.admin });
      expect(byEmail.model).toMatchObject({ email: "ann.private@example.org", name: "Ann Private", removed: false });
      // The command records hold no personal data either.
      const records = JSON.stringify((await world.facade.commandStore.list({ limit: 1000 })).items);
      expect(records).not.toContain("ann.private@example.org");
      expect(records).not.toContain("Ann Private");
      await expect(world.register("ann.private@example.org")).rejects.toMatchObject({ code: "CONFLICT" });
    } finally {
      await world.facade.stop();
    }
  });

  it("RemoveAccount { erase: true } erases email and name everywhere and frees the email", async () => {
    const world = await makeWorld();
    try {
      const ann = await world.register("ann.erase@example.org", "ann-password-1", "Ann Erase");
      await world.facade.dispatch(RemoveAccount, { accountUuid: ann, erase: true }, { reqCtx: world.admin, waitToFinish: true });
      const model = await world.facade.query(GetAccount, { accountUuid: ann, includeHistory: true }, { reqCtx: world.admin });
      expect(model.model).toMatchObject({ email: "[erased]", name: "[erased]", removed: true });
      const history = JSON.stringify(model.historyEvents);
      expect(history).not.toContain("ann.erase@example.org");
      expect(history).toContain("[erased]");
      const loaded = await world.facade.loadAggregate(AccountAggregate, ann);
      expect(loaded.state).toMatchObject({ email: "[erased]", name: "[erased]" });
      // The Runtime's store access (what the HTTP store routes serve) reads through the same view.
      const page = JSON.stringify((await world.facade.runtime.stores.read("event", world.admin, { limit: 1000 })).items);
      expect(page).not.toContain("ann.erase@example.org");
      expect(page).not.toContain("Ann Erase");
      expect(page).toContain("[erased]");
      expect((await rejection(world.facade.dispatch(Login, { email: "ann.erase@example.org", password: "ann-password-1" }))).code).toBe(
        "UNAUTHENTICATED",
      );
      // The email is free again, for a new account with a new key.
      const again = await world.register("ann.erase@example.org", "ann-password-2", "Ann Again");
      expect((await world.login("ann.erase@example.org", "ann-password-2")).login.accountUuid).toBe(again);
      const events: Event[] = [];
      for await (const page of world.facade.eventRepository.readAll()) events.push(...page);
      expect(events.filter((e) => e.name === "SubjectForgotten").map((e) => e.payload)).toEqual([{ subject: ann, keysDeleted: 1 }]);
      // Removal without erase keeps the data readable.
      await world.facade.dispatch(RemoveAccount, { accountUuid: again }, { reqCtx: world.admin, waitToFinish: true });
      expect((await world.facade.query(GetAccount, { accountUuid: again }, { reqCtx: world.admin })).model.email).toBe(
        "ann.erase@example.org",
      );
      // A second instance's eraser replays the removal from zero: the key is gone, nothing is forgotten twice.
      const stored = (world.facade.eventRepository as unknown as { stored: EventRepository }).stored;
      const second = createFacade({ appName: "world", eventRepository: stored, keyStore: world.facade.keyStore });
      await registerDefaults(second, {
        admin: { email: ADMIN_EMAIL, password: ADMIN_PASSWORD, name: "Ada Admin" },
        passwordHashing: FAST_HASHING,
      });
      await second.start();
      await second.dispatch(RegisterAccount, { email: "third@example.org", password: "third-password-1" }, { waitToFinish: true });
      const after: Event[] = [];
      for await (const page of world.facade.eventRepository.readAll()) after.push(...page);
      expect(after.filter((e) => e.name === "SubjectForgotten")).toHaveLength(1);
      await second.stop();
    } finally {
      await world.facade.stop();
    }
  });

  it("facade.forget(accountUuid) on a live account records AccountErased: the projection drops email and name, login still works", async () => {
    const world = await makeWorld();
    try {
      const bea = await world.register("bea.forget@example.org", "bea-password-1", "Bea Forget");
      expect((await world.facade.query(GetAccount, { accountUuid: bea }, { reqCtx: world.admin })).model.email).toBe(
        "bea.forget@example.org",
      );
      await world.facade.forget(bea);
      // The eraser runs as a handler, then the projection folds AccountErased: wait for that outcome.
      await expect
        .poll(async () => (await world.facade.query(GetAccount, { accountUuid: bea }, { reqCtx: world.admin })).model, { timeout: 10_000 })
        .toMatchObject({ email: "[erased]", name: "[erased]", removed: false });
      const events: Event[] = [];
      for await (const page of world.facade.eventRepository.readAll()) events.push(...page);
      expect(events.filter((e) => e.name === "AccountErased").map((e) => e.aggregateUuid)).toEqual([bea]);
      // The keyed claim still maps the email to the account: the person can still log in.
      expect((await world.login("bea.forget@example.org", "bea-password-1")).login.accountUuid).toBe(bea);
      // A subject that is no account is left alone.
      await world.facade.forget("not-an-account");
      await world.register("third.forget@example.org");
      const again: Event[] = [];
      for await (const page of world.facade.eventRepository.readAll()) again.push(...page);
      expect(again.filter((e) => e.name === "AccountErased")).toHaveLength(1);
    } finally {
      await world.facade.stop();
    }
  });

  it("on SQLite, an erased account leaves no trace of its email or name in the file", async () => {
    const filename = join(dir, "accounts.db");
    const facade = createFacade({ appName: "scan", ...createSqliteBackends({ filename }) });
    await registerDefaults(facade, { admin: { email: ADMIN_EMAIL, password: ADMIN_PASSWORD }, passwordHashing: FAST_HASHING });
    await facade.start();
    try {
      const r = await facade.dispatch(
        RegisterAccount,
        { email: "zed.scan@example.org", password: "zed-password-1", name: "Zed Scanned" },
        { waitToFinish: true },
      );
      const login = await facade.dispatch(Login, { email: "zed.scan@example.org", password: "zed-password-1" }, { waitToFinish: true });
      const reqCtx = { senderAccountUuid: r.result!.accountUuid, senderSessionUuid: login.result!.sessionUuid };
      await facade.dispatch(RemoveAccount, { accountUuid: r.result!.accountUuid, erase: true }, { reqCtx, waitToFinish: true });
      // The Account projection holds the erased values from the removal itself; a rebuild from zero reads erased events.
      await facade.runtime.controlEventHandler({ eventHandlerName: "AccountProjection", action: "restore", restoreFromZero: true });
    } finally {
      await facade.stop();
    }
    const bytes = Buffer.concat([filename, `${filename}-wal`].filter((f) => existsSync(f)).map((f) => readFileSync(f))).toString("latin1");
    expect(bytes).not.toContain("zed.scan@example.org");
    expect(bytes).not.toContain("Zed Scanned");
    expect(bytes).toContain("mneme_events");
  });

  it("an erasure stored before a crash (key not deleted yet) is completed by the next start", async () => {
    const filename = join(dir, "crash.db");
    const opts = { admin: { email: ADMIN_EMAIL, password: ADMIN_PASSWORD }, passwordHashing: FAST_HASHING };
    const first = createFacade({ appName: "crash", ...createSqliteBackends({ filename }) });
    await registerDefaults(first, opts);
    await first.start();
    const r = await first.dispatch(
      RegisterAccount,
      { email: "cy.crash@example.org", password: "cy-password-1", name: "Cy Crash" },
      { waitToFinish: true },
    );
    const cy = r.result!.accountUuid;
    await first.stop();
    // The removal's events were stored, then the process died before the eraser ran: written here straight to the store.
    const raw = createSqliteBackends({ filename });
    await raw.eventRepository.append([{ ...AccountRemoved.create(cy, { erased: true }), tenantUuid: "" }], { globalAggregates: [cy] });
    expect(await raw.keyStore.keyOf(cy)).toBeDefined();
    await raw.close();

    const second = createFacade({ appName: "crash", ...createSqliteBackends({ filename }) });
    await registerDefaults(second, opts);
    await second.start();
    try {
      await second.dispatch(RegisterAccount, { email: "next.crash@example.org", password: "next-password-1" }, { waitToFinish: true });
      expect(await second.keyStore.keyOf(cy)).toBeUndefined();
      expect((await second.loadAggregate(AccountAggregate, cy)).state).toMatchObject({
        email: "[erased]",
        name: "[erased]",
        removed: true,
      });
    } finally {
      await second.stop();
    }
  });

  it("a claim of a store written before claims were keyed still logs in and still blocks the email", async () => {
    const world = await makeWorld();
    try {
      // An account as an older release stored it: clear email, unkeyed claim id.
      const accountUuid = "0b9c3a1e-3f0e-4c8a-9a51-5b2f7d1c0e11";
      const claimUuid = legacyEmailClaimUuidOf("old@example.org");
      const raw = (world.facade.eventRepository as unknown as { stored: EventRepository }).stored;
      const legacy = await world.register("tmp.legacy@example.org", "old-password-1");
      // Borrow a real credential: the legacy account gets the same password hash as `legacy` (test shortcut).
      const cred = (await stored(world.facade.eventRepository)).find(
        (e) => e.name === "CredentialSet" && (e.payload as { accountUuid: string }).accountUuid === legacy,
      )!;
      const { credentialUuidOf } = await import("../../src/defaults/ids.js");
      await raw.append(
        [
          { ...EmailClaimed.create(claimUuid, { accountUuid, email: "old@example.org" }), tenantUuid: "" },
          { ...AccountRegistered.create(accountUuid, { email: "old@example.org", name: "Old" }), tenantUuid: "" },
          {
            domain: "Account",
            name: "CredentialSet",
            aggregateUuid: credentialUuidOf(accountUuid),
            payload: { ...(cred.payload as object), accountUuid },
            tenantUuid: "",
          },
        ],
        { globalAggregates: [claimUuid, accountUuid, credentialUuidOf(accountUuid)] },
      );
      expect((await world.login("old@example.org", "old-password-1")).login.accountUuid).toBe(accountUuid);
      await expect(world.register("old@example.org")).rejects.toMatchObject({ code: "CONFLICT" });
      const byEmail = await world.facade.query(GetAccountByEmail, { email: "old@example.org" }, { reqCtx: world.admin });
      expect(byEmail.model.name).toBe("Old");
    } finally {
      await world.facade.stop();
    }
  });
});
