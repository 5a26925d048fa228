/**
 * The Runtime's view of a sharded app (mneme/shards): every shard's facade
 * answers `Shards.ListShards`, `Shards.ListPlacements` and `Shards.ListMoves`
 * for the whole app, to the callers its authorizer lets through (a system
 * administrator), also over HTTP; a tenant's operator is refused, and a plain
 * facade has no such queries. Two schemas on the test server.
 */
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Authorizer, createFacade, MnemeError, newUuid, type RequestContext } from "mneme";
import { createHttpHandler } from "mneme/http";
import { createShardedApp, ListMoves, ListPlacements, ListShards, type ShardedApp } from "mneme/shards";
import { Deposit, configureLedger } from "./support/ledger-domain.js";
import { DATABASE_URL } from "./support/postgres-scratch.js";
import { rejection } from "./support/rejections.js";

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
/** The administrator may do everything; others only what needs no grant. */
const authorizer: Authorizer = (reqCtx, permission) =>
  reqCtx.senderAccountUuid === ADMIN.senderAccountUuid || permission.domain !== "Shards"
    ? undefined
    : new MnemeError("PERMISSION_DENIED", `${reqCtx.senderAccountUuid ?? "anonymous"} may not ${permission.domain}.${permission.type}`);

const tag = newUuid().replace(/-/g, "").slice(-10);
const schemas = [`mneme_shrt_c_${tag}`, `mneme_shrt_a_${tag}`, `mneme_shrt_b_${tag}`];
const admin = new pg.Pool({ connectionString: DATABASE_URL, max: 2 });
let app: ShardedApp;
const tenants = [newUuid(), newUuid(), newUuid()];

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
    for (let k = 0; k <= i; k++) await app.dispatch(Deposit, { accountUuid: newUuid(), amount: 1 }, { reqCtx: { senderTenantUuid: t } });
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
