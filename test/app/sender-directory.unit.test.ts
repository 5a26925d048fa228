/**
 * The sender directory (src/app/sender-directory.ts), on memory facades: a
 * facade linked to another reads its senders (identities, groups, tenants,
 * sessions) there, with the same checks as that facade's own (as a sharded
 * app links its shards to the home shard). A linked facade runs no bootstrap
 * of its own; without a link a facade bootstraps and reads its own readmodels.
 */
import { describe, expect, it } from "vitest";
import { authorized, createFacade, defineDomain, type Facade } from "mneme";
import { ListAccounts, Login, registerDefaults, resolveCredentials, resolveSender } from "mneme/defaults";
import { StoreInfo } from "mneme/runtime";
import { senderDirectoryOf, useSenderDirectory } from "../../src/app/sender-directory.js";
import { outcomeCode } from "../support/rejections.js";
import { ADMIN_EMAIL, ADMIN_PASSWORD, FAST_HASHING, makeWorld } from "../support/defaults-world.js";

const Notes = defineDomain("Notes", { description: "Notes of a tenant" });
const AddNote = Notes.command<{ noteUuid: string }>("AddNote", { permission: authorized });
const NoteAdded = Notes.event<Record<string, never>>("NoteAdded");

/** A facade with the built-in domains and Notes, linked to `directory` when given (another app name: its system tenant differs). */
async function shardFacade(directory?: Facade): Promise<Facade> {
  const facade = createFacade({ appName: "elsewhere" });
  if (directory !== undefined) useSenderDirectory(facade, () => directory);
  await registerDefaults(facade, { admin: { email: ADMIN_EMAIL, password: ADMIN_PASSWORD }, passwordHashing: FAST_HASHING });
  facade.registerDomain(Notes, (d) => d.handleCommand(AddNote, (_ctx, _c, p) => [NoteAdded.create(p.noteUuid, {})]));
  await facade.start();
  return facade;
}

const note = () => ({ noteUuid: crypto.randomUUID() });

describe("sender directory", () => {
  it("a linked facade authorizes, resolves credentials and knows administrators by its directory's senders", async () => {
    const home = await makeWorld();
    const shard = await shardFacade(home.facade);
    try {
      expect(senderDirectoryOf(shard)).toBe(home.facade);
      const t = await home.createTenant("T");
      const u = await home.createTenant("U");
      // The directory has no Notes domain, so its groups grant `*` or another domain's permissions.
      const alice = await home.member("alice@example.org", t, ["*"]);
      const carol = await home.member("carol@example.org", t, ["Tenant.*"]);
      const bob = await home.member("bob@example.org", u, ["*"]);
      const creds = { sessionUuid: alice.login.sessionUuid, sessionKey: alice.login.sessionKey, identityUuid: alice.identityUuid };
      expect(await resolveCredentials(shard, creds)).toEqual(alice.reqCtx);
      expect(await resolveSender(shard, alice.reqCtx)).toEqual(await resolveSender(home.facade, alice.reqCtx));

      expect(await outcomeCode(shard.dispatch(AddNote, note(), { reqCtx: alice.reqCtx }))).toBe("ok");
      expect(await outcomeCode(shard.dispatch(AddNote, note(), { reqCtx: carol.reqCtx }))).toBe("PERMISSION_DENIED");
      expect(await outcomeCode(shard.dispatch(AddNote, note(), { reqCtx: { ...bob.reqCtx, targetTenantUuid: t } }))).toBe(
        "PERMISSION_DENIED",
      );
      expect(await outcomeCode(shard.dispatch(AddNote, note(), { reqCtx: { targetTenantUuid: t } }))).toBe("PERMISSION_DENIED");
      // The administrator of the directory's system tenant (its app name's, not the shard's): across tenants, no-level
      // permissions (the authorizer) and permission functions (`systemAdministrator`).
      expect(await outcomeCode(shard.dispatch(AddNote, note(), { reqCtx: { ...home.admin, targetTenantUuid: t } }))).toBe("ok");
      expect(await outcomeCode(shard.query(StoreInfo, { store: "event" }, { reqCtx: home.admin }))).toBe("ok");
      expect(await outcomeCode(shard.query(StoreInfo, { store: "event" }, { reqCtx: bob.reqCtx }))).toBe("PERMISSION_DENIED");
      expect(await outcomeCode(shard.query(ListAccounts, {}, { reqCtx: home.admin }))).toBe("ok");
      expect(await outcomeCode(shard.query(ListAccounts, {}, { reqCtx: bob.reqCtx }))).toBe("PERMISSION_DENIED");
    } finally {
      await shard.stop();
      await home.facade.stop();
    }
  });

  it("a linked facade gets no admin of its own; an unlinked facade bootstraps and reads its own", async () => {
    const home = await makeWorld();
    const shard = await shardFacade(home.facade);
    const alone = await shardFacade();
    try {
      expect(senderDirectoryOf(alone)).toBe(alone);
      const adminLogin = (f: Facade) => f.dispatch(Login, { email: ADMIN_EMAIL, password: ADMIN_PASSWORD }, { waitToFinish: true });
      // The linked facade ran no bootstrap: no admin account in its own copy of the built-in domains.
      expect(await outcomeCode(adminLogin(shard))).toBe("UNAUTHENTICATED");
      const s = (await adminLogin(alone)).result!;
      const reqCtx = await resolveCredentials(alone, {
        sessionUuid: s.sessionUuid,
        sessionKey: s.sessionKey,
        identityUuid: s.identities[0]!.identityUuid,
      });
      expect(await outcomeCode(alone.query(StoreInfo, { store: "event" }, { reqCtx: reqCtx! }))).toBe("ok");
      // A session of the unlinked facade is unknown to the linked one's directory.
      expect(await resolveCredentials(shard, { sessionUuid: s.sessionUuid, sessionKey: s.sessionKey })).toBeUndefined();
    } finally {
      await Promise.all([shard.stop(), alone.stop(), home.facade.stop()]);
    }
  });
});
