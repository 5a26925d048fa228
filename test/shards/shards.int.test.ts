/**
 * Tenant shards (mneme/shards): three shards (two schemas on the main
 * Postgres, one on a second cluster made here with pg_createcluster), tenants
 * placed by the fewest-tenants rule, several callers dispatching at once.
 * Each tenant's events, records and documents are in its shard only, no
 * tenant reads another's, every readmodel equals a replay of its shard's
 * events, and requests for unplaced tenants or unknown shards are refused.
 */
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { isMnemeError, newUuid } from "mneme";
import { createShardedApp, type ShardedApp, type ShardLocation } from "mneme/shards";
import { type AccountState, Deposit, Entry, GetAccount, Account, Register, configureLedger } from "../support/ledger-domain.js";
import { clusterTools, type Node, startCluster } from "../support/pg-clusters.js";

const DATABASE_URL = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test";
const tools = clusterTools();
const skipped = tools === undefined ? " (skipped: pg_createcluster of Debian's postgresql-common is not installed)" : "";
const id = newUuid().replace(/-/g, "").slice(-12);
const admin = new pg.Pool({ connectionString: DATABASE_URL, max: 3 });
admin.on("error", () => undefined);

let cluster: Node | undefined;
let remote: pg.Pool | undefined;
let shards: ShardLocation[] = [];
const control = { connectionString: DATABASE_URL, schema: `shc_${id}` };
let app: ShardedApp;

function poolOf(shard: ShardLocation): pg.Pool {
  return shard.connectionString === DATABASE_URL ? admin : remote!;
}

beforeAll(async () => {
  if (tools === undefined) return;
  cluster = await startCluster("mneme_shards");
  remote = new pg.Pool({ connectionString: cluster.url, max: 3 });
  remote.on("error", () => undefined);
  shards = [
    { name: "s0", connectionString: DATABASE_URL, schema: `sh0_${id}` },
    { name: "s1", connectionString: DATABASE_URL, schema: `sh1_${id}` },
    { name: "s2", connectionString: cluster.url, schema: `sh2_${id}` },
  ];
  app = createShardedApp({
    control,
    shards,
    configure: (f) => void configureLedger(f),
    facadeOptions: () => ({ appName: "sharded-ledger" }),
    backendOptions: { pollIntervalMs: 200 },
  });
  await app.start();
}, 120_000);

afterAll(async () => {
  await app?.stop();
  for (const s of shards) if (s.connectionString === DATABASE_URL) await admin.query(`DROP SCHEMA IF EXISTS "${s.schema}" CASCADE`);
  await admin.query(`DROP SCHEMA IF EXISTS "${control.schema}" CASCADE`);
  await remote?.end();
  await admin.end();
  await cluster?.drop();
}, 60_000);

const reqCtxOf = (tenant: string) => ({ senderTenantUuid: tenant });
/** A user of the tenant with every sender field: history is an `authorized` query (Shards.GetHistory). */
const userOf = (tenant: string) => ({
  senderAccountUuid: `acc-${tenant}`,
  senderSessionUuid: `ses-${tenant}`,
  senderIdentityUuid: `idn-${tenant}`,
  senderTenantUuid: tenant,
});

async function rejection(p: Promise<unknown>): Promise<unknown> {
  try {
    await p;
  } catch (e) {
    return e;
  }
  throw new Error("expected a rejection");
}

describe.skipIf(tools === undefined)(`tenant shards: three shards, two clusters${skipped}`, () => {
  it("places tenants by the fewest-tenants rule, routes several callers' commands by tenant, keeps each tenant's data in its shard", async () => {
    const tenants = Array.from({ length: 6 }, (_, i) => `tenant-${String(i)}-${id}`);
    for (const t of tenants) await app.placeTenant(t);
    const placed = new Map((await app.placements()).map((p) => [p.tenantUuid, p.shard]));
    expect([...placed.values()].sort()).toEqual(["s0", "s0", "s1", "s1", "s2", "s2"]);
    // A placed tenant keeps its shard; naming another is CONFLICT.
    expect(await app.placeTenant(tenants[0]!)).toMatchObject({ shard: placed.get(tenants[0]!) });
    const other = ["s0", "s1", "s2"].find((s) => s !== placed.get(tenants[0]!))!;
    expect(isMnemeError(await rejection(app.placeTenant(tenants[0]!, { shard: other })), "CONFLICT")).toBe(true);

    // Load: 8 callers, each of its own tenant (two share a tenant), 4 accounts per tenant, 40 deposits each caller.
    const accounts = new Map(tenants.map((t) => [t, Array.from({ length: 4 }, () => newUuid())]));
    const expected = new Map<string, number>();
    const callers = Array.from({ length: 8 }, async (_, c) => {
      const tenant = tenants[c % tenants.length]!;
      for (let k = 0; k < 40; k++) {
        const accountUuid = accounts.get(tenant)![k % 4]!;
        const amount = c * 100 + k;
        for (;;) {
          try {
            await app.dispatch(Deposit, { accountUuid, amount }, { reqCtx: reqCtxOf(tenant) });
            break;
          } catch (e) {
            if (!isMnemeError(e, "CONFLICT")) throw e; // two callers of one tenant race on an account
          }
        }
        expected.set(accountUuid, (expected.get(accountUuid) ?? 0) + amount);
      }
    });
    await Promise.all(callers);
    const last = await app.dispatch(
      Deposit,
      { accountUuid: accounts.get(tenants[0]!)![0]!, amount: 0 },
      { reqCtx: reqCtxOf(tenants[0]!), waitToFinish: true },
    );
    expect(last.events).toHaveLength(1);

    for (const shard of shards) {
      const pool = poolOf(shard);
      const mine = tenants.filter((t) => placed.get(t) === shard.name).sort();
      const ev = await pool.query<{ tenant_uuid: string }>(`SELECT DISTINCT tenant_uuid FROM "${shard.schema}".events ORDER BY 1`);
      expect(ev.rows.map((r) => r.tenant_uuid)).toEqual(mine);
      const cmd = await pool.query<{ tenant_uuid: string }>(`SELECT DISTINCT tenant_uuid FROM "${shard.schema}".commands ORDER BY 1`);
      expect(cmd.rows.map((r) => r.tenant_uuid)).toEqual(mine);
    }

    // Every account's balance through the router equals the sum dispatched, and the readmodel equals a replay of the shard's events.
    for (const [tenant, uuids] of accounts) {
      const facade = await app.facadeFor(tenant);
      for (const accountUuid of uuids) {
        const events = await facade.eventRepository.loadAggregate(accountUuid);
        const replay = events.reduce<AccountState>(
          (s, e) => ({ balance: s.balance + (e.payload as { amount: number }).amount, deposits: s.deposits + 1 }),
          {
            balance: 0,
            deposits: 0,
          },
        );
        expect(replay.balance).toBe(expected.get(accountUuid) ?? 0);
        await waitForModel(tenant, accountUuid, replay);
      }
    }
    for (const shard of shards) {
      const mine = tenants.filter((t) => placed.get(t) === shard.name).sort();
      // A projection writes its models in batches, outside a handler's tenant: the tenant is in the document.
      const docs = await poolOf(shard).query<{ tenant_uuid: string }>(
        `SELECT DISTINCT coalesce(tenant_uuid, doc->>'tenantUuid') AS tenant_uuid FROM "${shard.schema}".readmodel_documents ORDER BY 1`,
      );
      expect(docs.rows.map((r) => r.tenant_uuid)).toEqual(mine);
    }
  });

  it("no tenant reads another's data: queries and history of another tenant's aggregate answer as for an absent one", async () => {
    const [a, b] = [`reader-a-${id}`, `reader-b-${id}`];
    await app.placeTenant(a, { shard: "s0" });
    await app.placeTenant(b, { shard: "s0" });
    const accountUuid = newUuid();
    await app.dispatch(Deposit, { accountUuid, amount: 5 }, { reqCtx: reqCtxOf(a), waitToFinish: true });
    expect(await app.query(GetAccount, { accountUuid }, { reqCtx: reqCtxOf(a) })).toMatchObject({ model: { balance: 5 } });
    expect(await app.query(GetAccount, { accountUuid }, { reqCtx: reqCtxOf(b) })).toBeUndefined();
    expect(await app.history(Account, accountUuid, { reqCtx: userOf(a) })).toHaveLength(1);
    expect(isMnemeError(await rejection(app.history(Account, accountUuid, { reqCtx: userOf(b) })), "NOT_FOUND")).toBe(true);
    // b writing to a's account: NOT_FOUND, nothing written.
    expect(isMnemeError(await rejection(app.dispatch(Deposit, { accountUuid, amount: 1 }, { reqCtx: reqCtxOf(b) })), "NOT_FOUND")).toBe(
      true,
    );
    expect(await app.history(Account, accountUuid, { reqCtx: userOf(a) })).toHaveLength(1);
  });

  it("global domains live in the home shard, whatever the caller's tenant; the listing shows shards, tenants and heads", async () => {
    // Directory's aggregates are all global; Shards is the app's own listing (the same on every shard).
    expect([...app.homeDomains].sort()).toEqual(["Directory", "Shards"]);
    const tenant = `dir-${id}`;
    await app.placeTenant(tenant, { shard: "s2" });
    const entryUuid = newUuid();
    await app.dispatch(Register, { entryUuid, name: "x" }, { reqCtx: reqCtxOf(tenant) });
    expect(await app.shard("s0").loadAggregate(Entry, entryUuid)).toMatchObject({ version: 1 });
    expect(await app.shard("s2").eventRepository.loadAggregate(entryUuid)).toEqual([]);
    const listed = await app.listShards();
    expect(listed.map((s) => [s.name, s.home])).toEqual([
      ["s0", true],
      ["s1", false],
      ["s2", false],
    ]);
    for (const s of listed) {
      const res = await poolOf(shards.find((x) => x.name === s.name)!).query<{ h: string }>(
        `SELECT coalesce(max(position), 0)::text AS h FROM "${shards.find((x) => x.name === s.name)!.schema}".events`,
      );
      expect(s.head).toBe(Number(res.rows[0]!.h));
      expect(s.description).not.toContain("@");
    }
    const counts = new Map<string, number>();
    for (const p of await app.placements()) counts.set(p.shard, (counts.get(p.shard) ?? 0) + 1);
    expect(listed.map((s) => s.tenants)).toEqual(["s0", "s1", "s2"].map((n) => counts.get(n) ?? 0));
  });

  it("a tenant placed on no shard, or on a shard the app does not have, is a clear MnemeError", async () => {
    const nowhere = `nowhere-${id}`;
    const e1 = await rejection(app.dispatch(Deposit, { accountUuid: newUuid(), amount: 1 }, { reqCtx: reqCtxOf(nowhere) }));
    expect(isMnemeError(e1, "NOT_FOUND")).toBe(true);
    expect((e1 as Error).message).toContain("placed on no shard");
    const lost = `lost-${id}`;
    await admin.query(
      `INSERT INTO "${control.schema}".placements (tenant_uuid, shard, state, version, updated_at) VALUES ($1, 'gone', 'active', 1, 0)`,
      [lost],
    );
    const e2 = await rejection(app.query(GetAccount, { accountUuid: newUuid() }, { reqCtx: reqCtxOf(lost) }));
    expect(isMnemeError(e2, "INVALID_STATE")).toBe(true);
    expect((e2 as Error).message).toContain('"gone"');
    expect(isMnemeError(await rejection(app.placeTenant(`x-${id}`, { shard: "gone" })), "INVALID_STATE")).toBe(true);
    expect(() => createShardedApp({ control, shards: [], configure: () => undefined })).toThrow(/at least one shard/);
  });
});

describe.skipIf(tools === undefined)(`tenant shards: a move to the other cluster${skipped}`, () => {
  it("moves a tenant under load from a schema of one cluster to a shard on another; its callers go on there", async () => {
    const tenant = `traveller-${id}`;
    await app.placeTenant(tenant, { shard: "s0" });
    const accounts = Array.from({ length: 5 }, () => newUuid());
    const acked: string[] = [];
    let stop = false;
    const callers = Array.from({ length: 3 }, async (_, c) => {
      for (let k = 0; !stop || k < 30; k++) {
        try {
          const r = await app.dispatch(Deposit, { accountUuid: accounts[(c + k) % 5]!, amount: 2 }, { reqCtx: reqCtxOf(tenant) });
          acked.push(...r.events.map((e) => e.eventUuid));
        } catch (e) {
          if (!isMnemeError(e, "CONFLICT")) throw e;
        }
      }
    });
    while (acked.length < 200) await new Promise((r) => setTimeout(r, 10));
    const steps: string[] = [];
    const report = await app.moveTenant(tenant, "s2", { onProgress: (p) => steps.push(p.phase), catchUpMs: 30_000 });
    stop = true;
    await Promise.all(callers);
    expect(report).toMatchObject({ tenantUuid: tenant, from: "s0", to: "s2", resumed: false });
    expect(steps).toEqual(expect.arrayContaining(["copying", "paused", "switched", "done"]));
    expect(report.documents, JSON.stringify(report.documents)).toMatchObject({ compared: ["AccountProjection:models"] });
    expect(report.pausedMs).toBeGreaterThan(0);
    expect((await app.placements()).find((p) => p.tenantUuid === tenant)).toMatchObject({ shard: "s2", state: "active" });
    const target = await remote!.query<{ event_uuid: string }>(
      `SELECT event_uuid FROM "${shards[2]!.schema}".events WHERE tenant_uuid = $1`,
      [tenant],
    );
    expect(target.rows.map((r) => r.event_uuid).sort()).toEqual([...acked].sort());
    expect((await app.listShards()).find((s) => s.name === "s0")?.frozenTenants).toEqual([tenant]);
    for (const accountUuid of accounts) {
      const events = await (await app.facadeFor(tenant)).eventRepository.loadAggregate(accountUuid);
      await waitForModel(tenant, accountUuid, { balance: 2 * events.length, deposits: events.length });
    }
    // Run again, the finished move reports without copying anything.
    expect(await app.moveTenant(tenant, "s2")).toMatchObject({ resumed: true, copied: 0 });
    // Back to the shard that keeps its frozen copy: refused, before anything is written.
    expect(isMnemeError(await rejection(app.moveTenant(tenant, "s0")), "CONFLICT")).toBe(true);
    expect((await app.moves()).find((m) => m.tenantUuid === tenant)).toMatchObject({ phase: "done", toShard: "s2" });
  });
});

/** Polls the routed query until the readmodel shows the replayed state (a fact, not a duration). */
async function waitForModel(tenant: string, accountUuid: string, replay: AccountState): Promise<void> {
  for (let i = 0; i < 500; i++) {
    const m = await app.query(GetAccount, { accountUuid }, { reqCtx: reqCtxOf(tenant) });
    if (m !== undefined && m.model.balance === replay.balance && m.model.deposits === replay.deposits) return;
    await new Promise((r) => setTimeout(r, 10));
  }
  const m = await app.query(GetAccount, { accountUuid }, { reqCtx: reqCtxOf(tenant) });
  expect(m?.model).toEqual(replay);
}
