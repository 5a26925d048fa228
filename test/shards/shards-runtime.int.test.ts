/**
 * The Runtime's view of a sharded app (mneme/shards): every shard's facade
 * answers `Shards.ListShards`, `Shards.ListPlacements` and `Shards.ListMoves`
 * for the whole app, to the callers its authorizer lets through (a system
 * administrator), also over HTTP; a tenant's operator is refused, without an
 * authorizer nobody sees them, and a plain facade has no such queries. Every
 * read of the sharded app asks the permission the facade's reads ask: history
 * is the query `Shards.GetHistory` on the tenant's shard. Two schemas on the
 * test server.
 */
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Authorizer, createFacade, MnemeError, newUuid, type RequestContext } from "mneme";
import { createHttpHandler } from "mneme/http";
import { createShardedApp, GetHistory, ListMoves, ListPlacements, ListShards, type ShardedApp } from "mneme/shards";
import { Account, Deposit, Entry, GetAccount, Register, configureLedger } from "../support/ledger-domain.js";
import { DATABASE_URL } from "../support/postgres-scratch.js";
import { rejection } from "../support/rejections.js";

const ADMIN: RequestContext = {
  senderAccountUuid: "acc-admin",
  senderSessionUuid: "ses-admin",
  senderIdentityUuid: "idn-admin",
  senderTenantUuid: "tenant-sys",
};
const OPERATOR: RequestContext = {
  senderAccountUuid: "acc-op",
  senderSessionUuid: "ses-op",
  senderIdentityUuid: "idn-op",
  senderTenantUuid: "t-op",
};
/** A user of a tenant: every sender field, in that tenant. */
const userOf = (tenant: string): RequestContext => ({
  senderAccountUuid: `acc-${tenant}`,
  senderSessionUuid: `ses-${tenant}`,
  senderIdentityUuid: `idn-${tenant}`,
  senderTenantUuid: tenant,
});

/**
 * The administrator may do everything; others, only in their own tenant (as
 * the default authorizer), what has a level (permissions without one are for
 * system administrators).
 */
const authorizer: Authorizer = (reqCtx, permission) => {
  if (reqCtx.senderAccountUuid === ADMIN.senderAccountUuid) return undefined;
  if (reqCtx.targetTenantUuid !== undefined && reqCtx.targetTenantUuid !== reqCtx.senderTenantUuid)
    return new MnemeError("PERMISSION_DENIED", `may act only in the sender's tenant, not in ${reqCtx.targetTenantUuid}`);
  return permission.kind !== "administrator"
    ? undefined
    : new MnemeError("PERMISSION_DENIED", `${reqCtx.senderAccountUuid ?? "anonymous"} may not ${permission.domain}.${permission.type}`);
};

const tag = newUuid().replace(/-/g, "").slice(-10);
const schemas = [`mneme_shrt_c_${tag}`, `mneme_shrt_a_${tag}`, `mneme_shrt_b_${tag}`];
const admin = new pg.Pool({ connectionString: DATABASE_URL, max: 2 });
let app: ShardedApp;
const tenants = [newUuid(), newUuid(), newUuid()];
const accountsOf = new Map<string, string[]>();

beforeAll(async () => {
  app = createShardedApp({
    control: { connectionString: DATABASE_URL, schema: schemas[0]! },
    shards: [
      { name: "a", connectionString: DATABASE_URL, schema: schemas[1]! },
      { name: "b", connectionString: DATABASE_URL, schema: schemas[2]! },
    ],
    configure: (f) => void configureLedger(f),
    facadeOptions: () => ({ authorizer }),
  });
  await app.start();
  await app.placeTenant(tenants[0]!, { shard: "a" });
  await app.placeTenant(tenants[1]!, { shard: "b" });
  await app.placeTenant(tenants[2]!, { shard: "b" });
  for (const [i, t] of tenants.entries()) {
    accountsOf.set(t, []);
    for (let k = 0; k <= i; k++) {
      const accountUuid = newUuid();
      accountsOf.get(t)!.push(accountUuid);
      await app.dispatch(Deposit, { accountUuid, amount: 1 }, { reqCtx: { senderTenantUuid: t } });
    }
  }
}, 60_000);

afterAll(async () => {
  await app?.stop();
  for (const s of schemas) await admin.query(`DROP SCHEMA IF EXISTS "${s}" CASCADE`);
  await admin.end();
});

describe("the Runtime's view of a sharded app", () => {
  it("every shard's facade lists the app's shards, placements and moves, the same from each", async () => {
    for (const name of ["a", "b"]) {
      const f = app.shard(name);
      const shards = await f.query(ListShards, {}, { reqCtx: ADMIN });
      expect(shards.map((s) => [s.name, s.home, s.tenants, s.head])).toEqual([
        ["a", true, 1, 1],
        ["b", false, 2, 5],
      ]);
      expect(shards[1]!.description).toContain(schemas[2]!);
      expect(shards[1]!.description).not.toMatch(/password/i);
      const placements = await f.query(ListPlacements, {}, { reqCtx: ADMIN });
      expect(new Map(placements.map((p) => [p.tenantUuid, [p.shard, p.state]]))).toEqual(
        new Map([
          [tenants[0]!, ["a", "active"]],
          [tenants[1]!, ["b", "active"]],
          [tenants[2]!, ["b", "active"]],
        ]),
      );
      expect(await f.query(ListMoves, {}, { reqCtx: ADMIN })).toEqual(await app.moves());
    }
    // The router answers them too (they live on the home shard).
    expect(await app.query(ListShards, {}, { reqCtx: ADMIN })).toEqual(await app.listShards());
  });

  it("refuses a caller the authorizer does not let through, and a plain facade has no such query", async () => {
    expect((await rejection(app.shard("b").query(ListPlacements, {}, { reqCtx: OPERATOR }))).code).toBe("PERMISSION_DENIED");
    expect((await rejection(app.shard("a").query(ListShards, {}, { reqCtx: { senderTenantUuid: tenants[0]! } }))).code).toBe(
      "PERMISSION_DENIED",
    );
    const plain = createFacade({ authorizer });
    await plain.start();
    try {
      expect((await rejection(plain.query(ListShards, {}, { reqCtx: ADMIN }))).code).toBe("UNKNOWN_QUERY");
    } finally {
      await plain.stop();
    }
  });

  it("is reachable over HTTP like every query", async () => {
    // A caller that presents a session is the administrator here (an app's resolver looks the session up).
    const handler = createHttpHandler(app.shard("b"), { resolveCredentials: async () => ADMIN });
    const res = await handler(
      new Request("http://app.test/api/tenants/tenant-sys/queries/Shards/ListShards", {
        method: "POST",
        body: "{}",
        headers: { "content-type": "application/json", authorization: "Bearer session-uuid.session-key" },
      }),
    );
    expect(res.status, await res.clone().text()).toBe(200);
    const body = (await res.json()) as { name: string; tenants: number }[];
    expect(body.map((s) => [s.name, s.tenants])).toEqual([
      ["a", 1],
      ["b", 2],
    ]);
  });
});

describe("every read of a sharded app asks the permission the facade's reads ask", () => {
  it("history refuses a sender the authorizer keeps out of the target tenant, and a reqCtx with only a target tenant", async () => {
    const [a, b] = [tenants[0]!, tenants[1]!];
    const ofB = accountsOf.get(b)![0]!;
    // The owner reads it.
    const own = await app.history(Account, ofB, { reqCtx: userOf(b) });
    expect(own.map((e) => [e.domainEvtName, e.version])).toEqual([["Deposited", 1]]);
    // A's user targeting B, and a reqCtx naming only B: refused like dispatch and query of an authorized message.
    for (const reqCtx of [{ ...userOf(a), targetTenantUuid: b }, { targetTenantUuid: b }, {}]) {
      expect((await rejection(app.history(Account, ofB, { reqCtx }))).code, JSON.stringify(reqCtx)).toBe("PERMISSION_DENIED");
      expect(
        (await rejection(app.query(GetHistory, { domain: "Ledger", aggregate: "Account", aggregateUuid: ofB }, { reqCtx }))).code,
      ).toBe("PERMISSION_DENIED");
    }
    // A's user in its own tenant: B's aggregate (on another shard) answers as an absent one, and as one of another
    // tenant on A's own shard (tenants[2] shares B's shard).
    expect((await rejection(app.history(Account, ofB, { reqCtx: userOf(a) }))).code).toBe("NOT_FOUND");
    expect((await rejection(app.history(Account, ofB, { reqCtx: userOf(tenants[2]!) }))).code).toBe("NOT_FOUND");
    expect((await rejection(app.history(Account, newUuid(), { reqCtx: userOf(b) }))).code).toBe("NOT_FOUND");
    // The query itself, routed by the aggregate's domain to B's shard.
    expect(await app.query(GetHistory, { domain: "Ledger", aggregate: "Account", aggregateUuid: ofB }, { reqCtx: userOf(b) })).toEqual(own);
    // The administrator acts in B by targeting it, as the authorizer lets it.
    expect(await app.history(Account, ofB, { reqCtx: { ...ADMIN, targetTenantUuid: b } })).toEqual(own);
    // A malformed request is the facade's INVALID_REQUEST, not a crash of the router.
    expect(
      (await rejection(app.query(GetHistory, { domain: "Ledger", aggregate: "Nope", aggregateUuid: ofB }, { reqCtx: userOf(b) }))).code,
    ).toBe("INVALID_REQUEST");
  });

  it("the history of a global aggregate (no tenant's) is an all-tenant read: the authorizer decides, as for an administrator", async () => {
    const entryUuid = newUuid();
    await app.dispatch(Register, { entryUuid, name: "shared" }, { reqCtx: userOf(tenants[0]!) });
    const denied = await rejection(app.history(Entry, entryUuid, { reqCtx: userOf(tenants[0]!) }));
    expect(denied.code).toBe("PERMISSION_DENIED");
    expect((await app.history(Entry, entryUuid, { reqCtx: ADMIN })).map((e) => e.domainEvtName)).toEqual(["Registered"]);
  });

  it("a caller the permission refuses learns nothing of placements: PERMISSION_DENIED before NOT_FOUND for an unplaced tenant", async () => {
    const nowhere = newUuid();
    expect((await rejection(app.history(Account, newUuid(), { reqCtx: { targetTenantUuid: nowhere } }))).code).toBe("PERMISSION_DENIED");
    expect((await rejection(app.history(Account, newUuid(), { reqCtx: { ...userOf(tenants[0]!), targetTenantUuid: nowhere } }))).code).toBe(
      "PERMISSION_DENIED",
    );
    // A caller the permission lets through is told the tenant is placed nowhere.
    const told = await rejection(app.history(Account, newUuid(), { reqCtx: userOf(nowhere) }));
    expect(told.code).toBe("NOT_FOUND");
    expect(told.message).toContain("placed on no shard");
    // A query whose permission is anonymous passes its check and is routed: the same answer as before.
    expect((await rejection(app.query(GetAccount, { accountUuid: newUuid() }, { reqCtx: { targetTenantUuid: nowhere } }))).code).toBe(
      "NOT_FOUND",
    );
  });
});

describe("the listings without an authorizer", () => {
  it("are granted to nobody, as the Runtime's all-tenant views", async () => {
    const bare = createShardedApp({
      control: { connectionString: DATABASE_URL, schema: `${schemas[0]!}_n` },
      shards: [{ name: "a", connectionString: DATABASE_URL, schema: `${schemas[1]!}_n` }],
      configure: (f) => void configureLedger(f),
    });
    await bare.start();
    try {
      await bare.placeTenant(tenants[0]!, { shard: "a" });
      for (const q of [ListShards, ListPlacements, ListMoves]) {
        for (const reqCtx of [userOf(tenants[0]!), ADMIN]) {
          const denied = await rejection(bare.query(q, {}, { reqCtx }));
          expect(denied.code, `${q.name} for ${String(reqCtx.senderAccountUuid)}`).toBe("PERMISSION_DENIED");
          expect(denied.message).toContain("none is installed");
          expect((await rejection(bare.shard("a").query(q, {}, { reqCtx }))).code).toBe("PERMISSION_DENIED");
        }
      }
      // Trusted code still reads them directly.
      expect((await bare.placements()).map((p) => p.tenantUuid)).toEqual([tenants[0]!]);
      // History is an ordinary authorized query: without an authorizer a full sender reads its own tenant's.
      const accountUuid = newUuid();
      await bare.dispatch(Deposit, { accountUuid, amount: 3 }, { reqCtx: userOf(tenants[0]!) });
      expect(await bare.history(Account, accountUuid, { reqCtx: userOf(tenants[0]!) })).toHaveLength(1);
      expect((await rejection(bare.history(Account, accountUuid, { reqCtx: { senderTenantUuid: tenants[0]! } }))).code).toBe(
        "PERMISSION_DENIED",
      );
      // A global aggregate's history is an all-tenant read: nobody's without an authorizer.
      const entryUuid = newUuid();
      await bare.dispatch(Register, { entryUuid, name: "x" }, { reqCtx: userOf(tenants[0]!) });
      expect((await rejection(bare.history(Entry, entryUuid, { reqCtx: userOf(tenants[0]!) }))).message).toContain("none is installed");
    } finally {
      await bare.stop();
      for (const s of [`${schemas[0]!}_n`, `${schemas[1]!}_n`]) await admin.query(`DROP SCHEMA IF EXISTS "${s}" CASCADE`);
    }
  }, 60_000);
});
