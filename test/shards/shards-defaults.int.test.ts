/**
 * The built-in domains on a sharded app (mneme/shards + mneme/defaults):
 * accounts, identities, groups and sessions live on the home shard only, so
 * every shard's authorizer and credential resolution read senders there. A
 * tenant placed on a non-home shard works with the built-in auth (commands,
 * queries, over HTTP too), another tenant's user and anonymous callers are
 * refused, a group change on home counts on the shard at once, and a tenant
 * moved between shards keeps working.
 */
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { authorized, defineDomain, type Facade, newUuid, type ProjectionModel, ProjectionReadmodel, type RequestContext } from "mneme";
import {
  accountRoutes,
  AssignGroup,
  CreateGroup,
  CreateIdentity,
  CreateTenant,
  Login,
  Logout,
  RegisterAccount,
  registerDefaults,
  resolveCredentials,
  systemAdministrator,
  UnassignGroup,
} from "mneme/defaults";
import { createHttpHandler } from "mneme/http";
import { createShardedApp, ListShards, type ShardedApp, type ShardLocation } from "mneme/shards";
import { outcomeCode, rejectsWith } from "../support/rejections.js";
import { ADMIN_EMAIL, ADMIN_PASSWORD, FAST_HASHING } from "../support/defaults-world.js";

const DATABASE_URL = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test";
const id = newUuid().replace(/-/g, "").slice(-12);
const admin = new pg.Pool({ connectionString: DATABASE_URL, max: 3 });
admin.on("error", () => undefined);
const control = { connectionString: DATABASE_URL, schema: `sdc_${id}` };
const shards: ShardLocation[] = [
  { name: "s0", connectionString: DATABASE_URL, schema: `sd0_${id}` },
  { name: "s1", connectionString: DATABASE_URL, schema: `sd1_${id}` },
  { name: "s2", connectionString: DATABASE_URL, schema: `sd2_${id}` },
];

/** A tenant-scoped domain whose messages need a full sender and a group grant. */
const Notes = defineDomain("Notes", { description: "Notes of a tenant" });
const AddNote = Notes.command<{ noteUuid: string; text: string }>("AddNote", { permission: authorized });
const GetNote = Notes.query<{ noteUuid: string }, ProjectionModel<{ text: string }> | undefined>("GetNote", { permission: authorized });
const PinNote = Notes.command<{ noteUuid: string }>("PinNote", { permission: systemAdministrator });
const NoteAdded = Notes.event<{ text: string }>("NoteAdded");
const Note = Notes.aggregate<{ text: string }>("Note", {
  initialState: () => ({ text: "" }),
  evolve: { NoteAdded: (_s, p: { text: string }) => ({ text: p.text }) },
});

async function configure(facade: Facade): Promise<void> {
  await registerDefaults(facade, { admin: { email: ADMIN_EMAIL, password: ADMIN_PASSWORD }, passwordHashing: FAST_HASHING });
  const notes = new ProjectionReadmodel(facade, { aggregate: Note });
  facade.registerDomain(Notes, (d) => {
    d.handleCommand(AddNote, (_ctx, _c, p) => [NoteAdded.create(p.noteUuid, { text: p.text })]);
    d.handleCommand(PinNote, (_ctx, _c, p) => [NoteAdded.create(p.noteUuid, { text: "pinned" })]);
    d.handleQuery(GetNote, (ctx, _q, p) => ctx.readmodel(notes).getModel(p.noteUuid));
  });
  facade.registerReadmodel(notes);
}

let app: ShardedApp;
let adminCtx: RequestContext;
let tenantT: string;
let tenantU: string;
let alice: Awaited<ReturnType<typeof member>> & Awaited<ReturnType<typeof login>> & { reqCtx: RequestContext };
let bob: { reqCtx: RequestContext };

/** Logs in on the app (the home shard); the credentials and a resolver of them on any shard's facade, as its HTTP adapter would. */
async function login(email: string, password: string, identityUuid: string) {
  const s = (await app.dispatch(Login, { email, password }, { waitToFinish: true })).result!;
  const creds = { sessionUuid: s.sessionUuid, sessionKey: s.sessionKey, identityUuid };
  return { creds, token: s.token, resolveOn: (shard: string) => resolveCredentials(app.shard(shard), creds) };
}

async function member(email: string, tenantUuid: string, permissions: string[]) {
  const wait = { reqCtx: adminCtx, waitToFinish: true };
  const password = `${email}-pw`;
  const accountUuid = (await app.dispatch(RegisterAccount, { email, password }, { waitToFinish: true })).result!.accountUuid;
  const identityUuid = (await app.dispatch(CreateIdentity, { accountUuid, tenantUuid }, wait)).result!.identityUuid;
  const groupUuid = (await app.dispatch(CreateGroup, { tenantUuid, name: `${email}-group`, permissions }, wait)).result!.groupUuid;
  await app.dispatch(AssignGroup, { identityUuid, groupUuid }, wait);
  return { accountUuid, identityUuid, groupUuid, password };
}

beforeAll(async () => {
  app = createShardedApp({
    control,
    shards,
    configure,
    facadeOptions: () => ({ appName: "shardauth" }),
    backendOptions: { pollIntervalMs: 200 },
  });
  await app.start();
  const s = (await app.dispatch(Login, { email: ADMIN_EMAIL, password: ADMIN_PASSWORD }, { waitToFinish: true })).result!;
  adminCtx = (await resolveCredentials(app.shard(app.home), {
    sessionUuid: s.sessionUuid,
    sessionKey: s.sessionKey,
    identityUuid: s.identities[0]!.identityUuid,
  }))!;
  tenantT = (await app.dispatch(CreateTenant, { name: "T" }, { reqCtx: adminCtx, waitToFinish: true })).result!.tenantUuid;
  tenantU = (await app.dispatch(CreateTenant, { name: "U" }, { reqCtx: adminCtx, waitToFinish: true })).result!.tenantUuid;
  await app.placeTenant(tenantT, { shard: "s1" });
  await app.placeTenant(tenantU, { shard: "s2" });
  const a = await member("alice@example.org", tenantT, ["Notes.*"]);
  // The senders as the home shard resolves them: the checks below are the shards' authorizers'.
  const aliceLogin = await login("alice@example.org", a.password, a.identityUuid);
  alice = { ...a, ...aliceLogin, reqCtx: (await aliceLogin.resolveOn(app.home))! };
  const b = await member("bob@example.org", tenantU, ["*"]);
  bob = { reqCtx: (await (await login("bob@example.org", b.password, b.identityUuid)).resolveOn(app.home))! };
}, 120_000);

afterAll(async () => {
  await app?.stop();
  for (const s of [...shards.map((x) => x.schema), control.schema]) await admin.query(`DROP SCHEMA IF EXISTS "${s}" CASCADE`);
  await admin.end();
}, 60_000);

describe("built-in auth on a sharded app: senders live on the home shard", () => {
  it("every shard resolves a session started on home into the same full sender; a wrong key into nothing", async () => {
    expect(alice.reqCtx).toMatchObject({
      senderAccountUuid: alice.accountUuid,
      senderIdentityUuid: alice.identityUuid,
      senderTenantUuid: tenantT,
    });
    for (const shard of ["s1", "s2"]) {
      expect(await alice.resolveOn(shard)).toEqual(alice.reqCtx);
      const wrongKey = { ...alice.creds, sessionKey: "A".repeat(alice.creds.sessionKey.length) };
      expect(await resolveCredentials(app.shard(shard), wrongKey)).toBeUndefined();
      // No copy of the admin on the other shards: their bootstrap did not run.
      const direct = app.shard(shard).dispatch(Login, { email: ADMIN_EMAIL, password: ADMIN_PASSWORD });
      expect(await outcomeCode(direct)).toBe("UNAUTHENTICATED");
    }
  });

  it("a user of a tenant on a non-home shard runs its authorized command and query there", async () => {
    const noteUuid = newUuid();
    await app.dispatch(AddNote, { noteUuid, text: "on s1" }, { reqCtx: alice.reqCtx, waitToFinish: true });
    expect((await app.query(GetNote, { noteUuid }, { reqCtx: alice.reqCtx }))?.model.text).toBe("on s1");
    // The note is in T's shard, not home.
    expect((await app.shard("s1").loadAggregate(Note, noteUuid)).version).toBe(1);
    expect((await app.shard("s0").loadAggregate(Note, noteUuid)).version).toBe(0);
  });

  it("another tenant's user, anonymous callers and a forged sender are PERMISSION_DENIED on that shard", async () => {
    const noteUuid = newUuid();
    const onT = { ...bob.reqCtx, targetTenantUuid: tenantT };
    expect(await outcomeCode(app.dispatch(AddNote, { noteUuid, text: "x" }, { reqCtx: onT }))).toBe("PERMISSION_DENIED");
    expect(await outcomeCode(app.query(GetNote, { noteUuid }, { reqCtx: onT }))).toBe("PERMISSION_DENIED");
    expect(await outcomeCode(app.dispatch(AddNote, { noteUuid, text: "x" }, { reqCtx: { targetTenantUuid: tenantT } }))).toBe(
      "PERMISSION_DENIED",
    );
    // Bob's identity named with Alice's tenant: the identity does not belong to it.
    const forged = { ...bob.reqCtx, senderTenantUuid: tenantT };
    expect(await outcomeCode(app.dispatch(AddNote, { noteUuid, text: "x" }, { reqCtx: forged }))).toBe("PERMISSION_DENIED");
    expect((await app.shard("s1").loadAggregate(Note, noteUuid)).version).toBe(0);
  });

  it("the system administrator of home acts on the shard; all-tenant views on a shard are for it alone", async () => {
    const noteUuid = newUuid();
    const onT = { ...adminCtx, targetTenantUuid: tenantT };
    await app.dispatch(AddNote, { noteUuid, text: "by admin" }, { reqCtx: onT, waitToFinish: true });
    expect((await app.query(GetNote, { noteUuid }, { reqCtx: alice.reqCtx }))?.model.text).toBe("by admin");
    // Shards.ListShards has no level: the authorizer grants it to identities of home's system tenant only.
    const shards = await app.shard("s1").query(ListShards, {}, { reqCtx: adminCtx });
    expect(shards.map((x) => x.name)).toEqual(["s0", "s1", "s2"]);
    expect(await outcomeCode(app.shard("s1").query(ListShards, {}, { reqCtx: bob.reqCtx }))).toBe("PERMISSION_DENIED");
    // The permission function `systemAdministrator` asks the same, on the shard that serves the command.
    await app.dispatch(PinNote, { noteUuid }, { reqCtx: onT });
    expect(await outcomeCode(app.dispatch(PinNote, { noteUuid }, { reqCtx: alice.reqCtx }))).toBe("PERMISSION_DENIED");
  });

  it("a group change on home counts on the shard at once", async () => {
    const wait = { reqCtx: adminCtx, waitToFinish: true };
    await app.dispatch(UnassignGroup, { identityUuid: alice.identityUuid, groupUuid: alice.groupUuid }, wait);
    try {
      expect(await outcomeCode(app.dispatch(AddNote, { noteUuid: newUuid(), text: "x" }, { reqCtx: alice.reqCtx }))).toBe(
        "PERMISSION_DENIED",
      );
    } finally {
      await app.dispatch(AssignGroup, { identityUuid: alice.identityUuid, groupUuid: alice.groupUuid }, wait);
    }
    expect(await outcomeCode(app.dispatch(AddNote, { noteUuid: newUuid(), text: "y" }, { reqCtx: alice.reqCtx }))).toBe("ok");
  });

  it("over HTTP: a login on the home shard's handler, then the tenant's requests on its shard's handler", async () => {
    const homeHandler = createHttpHandler(app.shard(app.home), { modules: [accountRoutes()] });
    const shardHandler = createHttpHandler(await app.facadeFor(tenantT), { modules: [accountRoutes()] });
    const loggedIn = await homeHandler(
      new Request("http://home/api/sessions", {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ email: "alice@example.org", password: alice.password }),
      }),
    );
    expect(loggedIn.status).toBe(201);
    const { token } = (await loggedIn.json()) as { token: string };
    const noteUuid = newUuid();
    const post = (bearer: string, path = "commands/Notes/AddNote?wait=true", body: unknown = { noteUuid, text: "by http" }) =>
      shardHandler(
        new Request(`http://shard/api/tenants/${tenantT}/${path}`, {
          method: "POST",
          headers: { authorization: `Bearer ${bearer}`, "x-identity-uuid": alice.identityUuid, "content-type": "application/json" },
          body: JSON.stringify(body),
        }),
      );
    const [sessionUuid, sessionKey] = token.split(".") as [string, string];
    expect((await post(`${sessionUuid}.${"A".repeat(sessionKey.length)}`)).status).toBe(401);
    expect((await post(token)).status).toBe(200);
    expect((await app.shard("s1").loadAggregate(Note, noteUuid)).version).toBe(1);
    const read = await post(token, "queries/Notes/GetNote", { noteUuid });
    expect(read.status).toBe(200);
    expect(((await read.json()) as { model: { text: string } }).model.text).toBe("by http");
  });

  it("a second instance of the app: a login on the first counts on its shards, a logout there ends it at once", async () => {
    let app2Shard: Facade | undefined;
    const session = await login("alice@example.org", alice.password, alice.identityUuid);
    const app2 = createShardedApp({ control, shards, configure, facadeOptions: () => ({ appName: "shardauth" }) });
    await app2.start();
    try {
      const shardOfT = (await app2.placements()).find((p) => p.tenantUuid === tenantT)!.shard;
      app2Shard = app2.shard(shardOfT);
      const reqCtx = await resolveCredentials(app2.shard(shardOfT), session.creds);
      expect(reqCtx).toMatchObject({ senderIdentityUuid: alice.identityUuid, senderTenantUuid: tenantT });
      const noteUuid = newUuid();
      await app2.dispatch(AddNote, { noteUuid, text: "instance 2" }, { reqCtx: reqCtx!, waitToFinish: true });
      expect((await app2.query(GetNote, { noteUuid }, { reqCtx: reqCtx! }))?.model.text).toBe("instance 2");
      await app.dispatch(Logout, {}, { reqCtx: reqCtx! });
      expect(await resolveCredentials(app2.shard(shardOfT), session.creds)).toBeUndefined();
    } finally {
      await app2.stop();
    }
    // A shard's facade kept after its app stopped has no home to read senders from: refused, not read from its own copy.
    await rejectsWith(resolveCredentials(app2Shard!, session.creds), "NOT_STARTED");
  }, 60_000);

  it("a tenant moved to another non-home shard keeps working with the same session", async () => {
    const before = newUuid();
    await app.dispatch(AddNote, { noteUuid: before, text: "before" }, { reqCtx: alice.reqCtx, waitToFinish: true });
    await app.moveTenant(tenantT, "s2");
    expect((await app.placements()).find((p) => p.tenantUuid === tenantT)?.shard).toBe("s2");
    const after = newUuid();
    await app.dispatch(AddNote, { noteUuid: after, text: "after" }, { reqCtx: alice.reqCtx, waitToFinish: true });
    expect((await app.query(GetNote, { noteUuid: before }, { reqCtx: alice.reqCtx }))?.model.text).toBe("before");
    expect((await app.shard("s2").loadAggregate(Note, after)).version).toBe(1);
    const onT = { ...bob.reqCtx, targetTenantUuid: tenantT };
    expect(await outcomeCode(app.query(GetNote, { noteUuid: after }, { reqCtx: onT }))).toBe("PERMISSION_DENIED");
  }, 60_000);

  it("a tenant moved off the home shard: its users work on the new shard, and home still manages their groups", async () => {
    const wait = { reqCtx: adminCtx, waitToFinish: true };
    const tenantV = (await app.dispatch(CreateTenant, { name: "V" }, wait)).result!.tenantUuid;
    await app.placeTenant(tenantV, { shard: app.home });
    const v = await member("vera@example.org", tenantV, ["Notes.AddNote"]);
    const vera = (await (await login("vera@example.org", v.password, v.identityUuid)).resolveOn("s1"))!;
    const before = newUuid();
    await app.dispatch(AddNote, { noteUuid: before, text: "on home" }, { reqCtx: vera, waitToFinish: true });
    expect(await outcomeCode(app.query(GetNote, { noteUuid: before }, { reqCtx: vera }))).toBe("PERMISSION_DENIED");
    await app.moveTenant(tenantV, "s1");
    // The grant of the query is written on home after the move, and counts on s1 at once.
    const readers = (await app.dispatch(CreateGroup, { tenantUuid: tenantV, name: "readers", permissions: ["Notes.GetNote"] }, wait))
      .result!.groupUuid;
    await app.dispatch(AssignGroup, { identityUuid: v.identityUuid, groupUuid: readers }, wait);
    expect((await app.query(GetNote, { noteUuid: before }, { reqCtx: vera }))?.model.text).toBe("on home");
    const after = newUuid();
    await app.dispatch(AddNote, { noteUuid: after, text: "on s1" }, { reqCtx: vera, waitToFinish: true });
    expect((await app.shard("s1").loadAggregate(Note, after)).version).toBe(1);
    expect(
      await outcomeCode(
        app.dispatch(AddNote, { noteUuid: newUuid(), text: "x" }, { reqCtx: { ...alice.reqCtx, targetTenantUuid: tenantV } }),
      ),
    ).toBe("PERMISSION_DENIED");
  }, 60_000);
});
