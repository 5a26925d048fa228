/**
 * Online tenant moves (mneme/shards): a mover in a child process is
 * SIGKILLed at points of its progress (a random page of the copy, while the
 * tenant's writes are paused, right after the switch) and run again, while
 * callers keep writing to the tenant and to a neighbour on the same shard.
 * Nothing acknowledged is lost, nothing is duplicated, the target holds every
 * event of the source with the same uuids and versions, the placement names
 * the target, the source refuses the tenant's writes, and the target's
 * readmodel equals a replay.
 */
import { fileURLToPath } from "node:url";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { isMnemeError, MnemeError, newUuid } from "mneme";
import { createShardedApp, isTenantFrozenError, type ShardedApp, type ShardLocation, type TenantMoveOptions } from "mneme/shards";
import { Deposit, GetAccount, Register, configureLedger } from "../support/ledger-domain.js";
import { runKillable } from "../support/run-process.js";

const DATABASE_URL = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test";
const mover = fileURLToPath(new URL("../support/tenant-mover-process.ts", import.meta.url));
const cwd = fileURLToPath(new URL("../..", import.meta.url));
const id = newUuid().replace(/-/g, "").slice(-12);
const admin = new pg.Pool({ connectionString: DATABASE_URL, max: 3 });
admin.on("error", () => undefined);
const control = { connectionString: DATABASE_URL, schema: `smc_${id}` };
const shards: ShardLocation[] = [
  { name: "s0", connectionString: DATABASE_URL, schema: `sm0_${id}` },
  { name: "s1", connectionString: DATABASE_URL, schema: `sm1_${id}` },
];
let app: ShardedApp;

beforeAll(async () => {
  // The placements' poll is slow here: a router learns of a change by NOTIFY, or when a shard's fence refuses it.
  app = createShardedApp({
    control,
    shards,
    configure: (f) => void configureLedger(f),
    backendOptions: { pollIntervalMs: 200 },
    placementPollMs: 600_000,
  });
  await app.start();
}, 60_000);

afterAll(async () => {
  await app?.stop();
  for (const s of [...shards.map((x) => x.schema), control.schema]) await admin.query(`DROP SCHEMA IF EXISTS "${s}" CASCADE`);
  await admin.end();
}, 60_000);

const reqCtxOf = (tenant: string) => ({ senderTenantUuid: tenant });

/** Callers depositing to a tenant's accounts until stopped; every acknowledged event uuid is kept. */
function load(tenant: string, accounts: readonly string[], callers: number) {
  const acked = new Set<string>();
  let stop = false;
  const errors: unknown[] = [];
  const run = Array.from({ length: callers }, async (_, c) => {
    for (let k = 0; !stop; k++) {
      try {
        const r = await app.dispatch(
          Deposit,
          { accountUuid: accounts[(c + k) % accounts.length]!, amount: 1 },
          { reqCtx: reqCtxOf(tenant) },
        );
        for (const e of r.events) acked.add(e.eventUuid);
      } catch (e) {
        // CONFLICT: two callers raced on an account; UNAVAILABLE: the tenant stayed paused (a mover was killed in the pause).
        if (!isMnemeError(e, "CONFLICT") && !isMnemeError(e, "UNAVAILABLE")) {
          errors.push(e);
          return;
        }
        await new Promise((r) => setTimeout(r, 5));
      }
    }
  });
  return {
    acked,
    errors,
    stop: async () => {
      stop = true;
      await Promise.all(run);
    },
  };
}

async function tenantEvents(
  schema: string,
  tenant: string,
): Promise<{ event_uuid: string; aggregate_uuid: string; version: number; payload: unknown }[]> {
  const res = await admin.query<{ event_uuid: string; aggregate_uuid: string; version: number; payload: unknown }>(
    `SELECT event_uuid, aggregate_uuid, version, payload FROM "${schema}".events WHERE tenant_uuid = $1 ORDER BY aggregate_uuid, version`,
    [tenant],
  );
  return res.rows;
}

/** Waits until every readmodel checkpoint of the target shard (s1) is at its events' head. */
async function targetHandlersCaughtUp(): Promise<void> {
  const schema = shards[1]!.schema;
  const end = Date.now() + 30_000;
  for (;;) {
    const res = await admin.query<{ behind: string; handlers: string }>(
      `SELECT count(*) FILTER (WHERE c.position < h.head)::text AS behind, count(*)::text AS handlers
         FROM "${schema}".readmodel_checkpoints c,
              (SELECT coalesce(max(position), 0) AS head FROM "${schema}".events) h`,
    );
    if (res.rows[0]!.handlers !== "0" && res.rows[0]!.behind === "0") return;
    if (Date.now() > end) throw new Error(`the target's handlers did not catch up: ${JSON.stringify(res.rows[0])}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function runMover(opts: TenantMoveOptions, stopAt: string): Promise<string> {
  const r = await runKillable(mover, [JSON.stringify(opts), stopAt], cwd, (out) => out.includes("stopped "));
  if (!r.out.includes("stopped ") && !r.out.includes("moved "))
    throw new Error(`the mover ended with ${String(r.code ?? r.signal)}: ${r.out}`);
  if (stopAt !== "0" && r.out.includes("stopped ")) expect(r.signal).toBe("SIGKILL");
  return r.out;
}

/** What a mover process printed of its failure ("failed <json>"), if it failed. */
function failureOf(out: string): { mneme: boolean; code: unknown; message: string; stack?: string } | undefined {
  const line = out.split("\n").find((l) => l.startsWith("failed "));
  return line === undefined ? undefined : (JSON.parse(line.slice(7)) as { mneme: boolean; code: unknown; message: string });
}

describe("online tenant moves with the mover SIGKILLed and run again", () => {
  it("ends in the same state as an uninterrupted move: nothing lost, nothing duplicated, the placement switched", async () => {
    const [tenant, neighbour] = [`mover-t-${id}`, `mover-u-${id}`];
    await app.placeTenant(tenant, { shard: "s0" });
    await app.placeTenant(neighbour, { shard: "s0" });
    const accounts = Array.from({ length: 12 }, () => newUuid());
    const preload = load(tenant, accounts, 6);
    while (preload.acked.size < 1500) await new Promise((r) => setTimeout(r, 20));
    await preload.stop();
    const busy = load(tenant, accounts, 3);
    const other = load(neighbour, [newUuid(), newUuid()], 1);
    const opts: TenantMoveOptions = { control, shards, homeDomains: [...app.homeDomains], tenantUuid: tenant, to: "s1", pageSize: 200 };

    // Killed at a random page of the bulk copy, then in the pause, then right after the switch; the fourth run finishes.
    const first = await runMover(opts, String(1 + Math.floor(Math.random() * 5)));
    expect(first).toContain("stopped ");
    expect(await runMover(opts, "paused")).toContain("stopped ");
    expect((await app.placements()).find((p) => p.tenantUuid === tenant)).toMatchObject({ shard: "s0", state: "paused" });
    expect(await runMover(opts, "switched")).toContain("stopped ");
    expect((await app.placements()).find((p) => p.tenantUuid === tenant)).toMatchObject({ shard: "s1", state: "active" });
    const last = await runMover(opts, "0");
    expect(last).toContain("moved ");
    const report = JSON.parse(last.slice(last.indexOf("moved ") + 6).split("\n")[0]!) as { resumed: boolean; from: string; to: string };
    expect(report).toMatchObject({ resumed: true, from: "s0", to: "s1" });

    // Writes went on through the router after the switch.
    const ackedAtSwitch = busy.acked.size;
    while (busy.acked.size < ackedAtSwitch + 50) await new Promise((r) => setTimeout(r, 20));
    await busy.stop();
    await other.stop();
    expect(busy.errors).toEqual([]);
    expect(other.errors).toEqual([]);

    const source = await tenantEvents(shards[0]!.schema, tenant);
    const target = await tenantEvents(shards[1]!.schema, tenant);
    const acked = new Set([...preload.acked, ...busy.acked]);
    // Nothing lost, nothing duplicated: the target holds exactly the acknowledged events, each once.
    expect(new Set(target.map((e) => e.event_uuid)).size).toBe(target.length);
    expect(target.map((e) => e.event_uuid).sort()).toEqual([...acked].sort());
    // Every event of the source is in the target with its uuid, aggregate, version and payload.
    const byUuid = new Map(target.map((e) => [e.event_uuid, e]));
    for (const e of source) expect(byUuid.get(e.event_uuid)).toEqual(e);
    // Each aggregate's versions are 1..n in the target.
    const versions = new Map<string, number[]>();
    for (const e of target) versions.set(e.aggregate_uuid, [...(versions.get(e.aggregate_uuid) ?? []), e.version]);
    for (const vs of versions.values()) expect(vs).toEqual(vs.map((_, i) => i + 1));
    // The neighbour never moved, and the source refuses the moved tenant's writes.
    expect(await tenantEvents(shards[1]!.schema, neighbour)).toEqual([]);
    expect(isTenantFrozenError(await depositOnSource(tenant, accounts[0]!))).toBe(true);
    expect((await app.moves()).find((m) => m.tenantUuid === tenant)).toMatchObject({ phase: "done", fromShard: "s0", toShard: "s1" });

    // The target's readmodel equals a replay of the target's events.
    for (const accountUuid of accounts) {
      const deposits = target.filter((e) => e.aggregate_uuid === accountUuid).length;
      await until(async () => (await app.query(GetAccount, { accountUuid }, { reqCtx: reqCtxOf(tenant) }))?.model.deposits === deposits);
      expect((await app.query(GetAccount, { accountUuid }, { reqCtx: reqCtxOf(tenant) }))?.model).toEqual({ balance: deposits, deposits });
    }
  }, 180_000);
});

describe("a move whose copy differs from its source", () => {
  it("fails its verification before anything switches, leaves the tenant writable on its source, and finishes when run again after the repair", async () => {
    const tenant = `verify-t-${id}`;
    await app.placeTenant(tenant, { shard: "s0" });
    const accounts = [newUuid(), newUuid(), newUuid()];
    for (let k = 0; k < 60; k++) await app.dispatch(Deposit, { accountUuid: accounts[k % 3]!, amount: 1 }, { reqCtx: reqCtxOf(tenant) });
    // A run that stops after its first page (as a crash would), pages of 20 events.
    const stopped = await app
      .moveTenant(tenant, "s1", {
        pageSize: 20,
        onProgress: () => {
          throw new Error("stop here");
        },
      })
      .catch((e: unknown) => e);
    expect((stopped as Error).message).toBe("stop here");
    // A copied event is changed in the target: the next run's verification must see it. The target's
    // readmodels first apply the copied page as it was, so that the repair below leaves them right (a
    // projection that applied the changed payload would make the resumed move's document check fail, as
    // it should: the operator then restores the target's readmodels).
    await targetHandlersCaughtUp();
    const target = `"${shards[1]!.schema}".events`;
    const changed = await admin.query<{ event_uuid: string; payload: unknown }>(
      `SELECT event_uuid, payload FROM ${target} WHERE tenant_uuid = $1 ORDER BY position LIMIT 1`,
      [tenant],
    );
    const { event_uuid: eventUuid, payload } = changed.rows[0]!;
    await admin.query(`UPDATE ${target} SET payload = '{"amount": 1000}' WHERE event_uuid = $1`, [eventUuid]);
    const failed = await app.moveTenant(tenant, "s1", { pageSize: 20 }).catch((e: unknown) => e);
    expect(isMnemeError(failed, "INVALID_STATE")).toBe(true);
    expect((failed as Error).message).toContain("events differ");
    expect((await app.placements()).find((p) => p.tenantUuid === tenant)).toMatchObject({ shard: "s0", state: "active" });
    expect((await app.moves()).find((m) => m.tenantUuid === tenant)).toMatchObject({ phase: "failed", toShard: "s1" });
    // Still writable on its source.
    await app.dispatch(Deposit, { accountUuid: accounts[0]!, amount: 1 }, { reqCtx: reqCtxOf(tenant) });
    await admin.query(`UPDATE ${target} SET payload = $2 WHERE event_uuid = $1`, [eventUuid, JSON.stringify(payload)]);
    const report = await app.moveTenant(tenant, "s1", { pageSize: 20, catchUpMs: 30_000 });
    expect(report).toMatchObject({ resumed: true, from: "s0", to: "s1" });
    expect(report.verified.every((v) => v.source.rows === v.target.rows && v.source.md5 === v.target.md5)).toBe(true);
    expect(report.verified.find((v) => v.what === "events" && v.when === "before the pause")?.target.rows).toBeGreaterThan(0);
    expect((await app.placements()).find((p) => p.tenantUuid === tenant)).toMatchObject({ shard: "s1", state: "active" });
    expect((await tenantEvents(shards[1]!.schema, tenant)).length).toBe(61);
  }, 60_000);
});

describe("a move whose source's hash chain is broken", () => {
  it("fails before anything switches, naming the position; repaired, it moves and reports both chains", async () => {
    const [tenant, neighbour] = [`chain-t-${id}`, `chain-u-${id}`];
    await app.placeTenant(tenant, { shard: "s0" });
    await app.placeTenant(neighbour, { shard: "s0" });
    const accounts = [newUuid(), newUuid()];
    for (let k = 0; k < 30; k++) {
      const [who, account] = k === 12 ? [neighbour, newUuid()] : [tenant, accounts[k % 2]!];
      await app.dispatch(Deposit, { accountUuid: account, amount: 1 }, { reqCtx: reqCtxOf(who) });
    }
    // A neighbour's event, stored between the moved tenant's, changed behind mneme's back: the tenant's rows
    // digest the same on both sides, but the source's chain no longer holds over what the copy read.
    const source = `"${shards[0]!.schema}".events`;
    const row = await admin.query<{ position: string; payload: unknown }>(
      `SELECT position::text AS position, payload FROM ${source} WHERE tenant_uuid = $1 ORDER BY position DESC LIMIT 1`,
      [neighbour],
    );
    const { position, payload } = row.rows[0]!;
    await admin.query(`UPDATE ${source} SET payload = jsonb_set(payload, '{amount}', '1000') WHERE position = $1`, [position]);
    const failed = await app.moveTenant(tenant, "s1", { pageSize: 20 }).catch((e: unknown) => e);
    expect(isMnemeError(failed, "INVALID_STATE")).toBe(true);
    expect((failed as Error).message).toContain(`the hash chain of the source is broken at position ${position}`);
    expect((await app.placements()).find((p) => p.tenantUuid === tenant)).toMatchObject({ shard: "s0", state: "active" });
    await admin.query(`UPDATE ${source} SET payload = $2 WHERE position = $1`, [position, JSON.stringify(payload)]);
    const report = await app.moveTenant(tenant, "s1", { pageSize: 20, catchUpMs: 30_000 });
    expect((await app.placements()).find((p) => p.tenantUuid === tenant)).toMatchObject({ shard: "s1", state: "active" });
    // The source's chain verified up to the last event copied; the target's own chain (new positions) up to its head.
    expect(report.chains?.source.position).toBeGreaterThan(Number(position));
    expect(report.chains?.target.hash).toMatch(/^[0-9a-f]{64}$/);
    const head = await admin.query<{ h: string }>(`SELECT max(position)::text AS h FROM "${shards[1]!.schema}".events`);
    expect(report.chains?.target.position).toBeLessThanOrEqual(Number(head.rows[0]!.h));
    expect(report.chains?.target.position).toBeGreaterThan(0);
  }, 60_000);
});

describe("a mover killed at random points and times", () => {
  it("is run again until it finishes; every error any run saw is a MnemeError, and the move ends as an uninterrupted one", async () => {
    const tenant = `random-t-${id}`;
    await app.placeTenant(tenant, { shard: "s0" });
    const accounts = Array.from({ length: 8 }, () => newUuid());
    const preload = load(tenant, accounts, 4);
    while (preload.acked.size < 800) await new Promise((r) => setTimeout(r, 20));
    await preload.stop();
    const busy = load(tenant, accounts, 2);
    const opts: TenantMoveOptions = { control, shards, homeDomains: [...app.homeDomains], tenantUuid: tenant, to: "s1", pageSize: 100 };
    const runs: string[] = [];
    const failures: NonNullable<ReturnType<typeof failureOf>>[] = [];
    let moved = false;
    // Up to 6 killed runs: at a random step of progress (the thread blocked there), or at a random time after its start
    // (the kill lands wherever the mover is: inside a statement, a transaction, a connection's checkout).
    for (let round = 0; round < 6 && !moved; round++) {
      const atStep = Math.random() < 0.5;
      const r = atStep
        ? await runKillable(mover, [JSON.stringify(opts), String(1 + Math.floor(Math.random() * 12))], cwd, (out) =>
            out.includes("stopped "),
          )
        : await runKillable(mover, [JSON.stringify(opts), "0"], cwd, 200 + Math.floor(Math.random() * 1500));
      runs.push(`${atStep ? "step" : "time"} ${String(r.signal ?? r.code)}`);
      const failure = failureOf(r.out);
      if (failure !== undefined) failures.push(failure);
      moved = r.out.includes("moved ");
    }
    // Then run to its end (a run that failed with a MnemeError is run again, as an operator would).
    for (let k = 0; k < 3 && !moved; k++) {
      const r = await runKillable(mover, [JSON.stringify(opts), "0"], cwd);
      runs.push(`end ${String(r.signal ?? r.code)}`);
      const failure = failureOf(r.out);
      if (failure !== undefined) failures.push(failure);
      moved = r.out.includes("moved ");
    }
    for (const f of failures) expect(f.mneme, `a raw error escaped the mover: ${f.message}\n${f.stack ?? ""}`).toBe(true);
    expect(moved, runs.join(", ")).toBe(true);
    const ackedAtSwitch = busy.acked.size;
    while (busy.acked.size < ackedAtSwitch + 20) await new Promise((r) => setTimeout(r, 20));
    await busy.stop();
    expect(busy.errors).toEqual([]);
    expect((await app.placements()).find((p) => p.tenantUuid === tenant)).toMatchObject({ shard: "s1", state: "active" });
    const target = await tenantEvents(shards[1]!.schema, tenant);
    expect(target.map((e) => e.event_uuid).sort()).toEqual([...new Set([...preload.acked, ...busy.acked])].sort());
  }, 240_000);

  it("a step the database refuses stops the move with a MnemeError (not the driver's error); run again, it resumes and finishes", async () => {
    const tenant = `refused-t-${id}`;
    await app.placeTenant(tenant, { shard: "s0" });
    for (let k = 0; k < 30; k++) await app.dispatch(Deposit, { accountUuid: newUuid(), amount: 1 }, { reqCtx: reqCtxOf(tenant) });
    // The target's snapshots table is gone for a while: the verification in the pause reads it.
    const snapshots = `"${shards[1]!.schema}".snapshots`;
    await admin.query(`ALTER TABLE ${snapshots} RENAME TO snapshots_away`);
    let stopped: unknown;
    try {
      stopped = await app.moveTenant(tenant, "s1", { pageSize: 10 }).catch((e: unknown) => e);
    } finally {
      await admin.query(`ALTER TABLE "${shards[1]!.schema}".snapshots_away RENAME TO snapshots`);
    }
    expect(stopped).toBeInstanceOf(MnemeError);
    expect((stopped as MnemeError).message).toContain(`tenant move of ${tenant} stopped (run it again to resume)`);
    // Stopped in the pause: the tenant is paused and frozen on its source until the move is run again.
    expect((await app.moves()).find((m) => m.tenantUuid === tenant)).toMatchObject({ phase: "paused" });
    const report = await app.moveTenant(tenant, "s1", { pageSize: 10 });
    expect(report).toMatchObject({ resumed: true, from: "s0", to: "s1" });
    expect((await app.placements()).find((p) => p.tenantUuid === tenant)).toMatchObject({ shard: "s1", state: "active" });
    expect(await tenantEvents(shards[1]!.schema, tenant)).toHaveLength(30);
  }, 60_000);
});

describe("a tenant moved off the home shard", () => {
  it("still writes its home domains there: the source's fence refuses only what the move took away", async () => {
    const tenant = `home-t-${id}`;
    await app.placeTenant(tenant, { shard: "s0" });
    const accountUuid = newUuid();
    await app.dispatch(Deposit, { accountUuid, amount: 1 }, { reqCtx: reqCtxOf(tenant) });
    await app.dispatch(Register, { entryUuid: newUuid(), name: "before" }, { reqCtx: reqCtxOf(tenant) });
    expect(app.home).toBe("s0");
    await app.moveTenant(tenant, "s1");
    // A command of a domain whose aggregates are all global goes home, and is written there in the tenant.
    const entryUuid = newUuid();
    const r = await app.dispatch(Register, { entryUuid, name: "after" }, { reqCtx: reqCtxOf(tenant) });
    expect(r.events).toHaveLength(1);
    const home = await admin.query<{ tenant_uuid: string }>(
      `SELECT tenant_uuid FROM "${shards[0]!.schema}".events WHERE aggregate_uuid = $1`,
      [entryUuid],
    );
    expect(home.rows).toEqual([{ tenant_uuid: tenant }]);
    // Its moved domains stay refused on the source, and go to the target through the router.
    expect(isTenantFrozenError(await depositOnSource(tenant, accountUuid))).toBe(true);
    await app.dispatch(Deposit, { accountUuid, amount: 1 }, { reqCtx: reqCtxOf(tenant) });
    expect((await tenantEvents(shards[1]!.schema, tenant)).filter((e) => e.aggregate_uuid === accountUuid)).toHaveLength(2);
  }, 60_000);

  it("frozen by an earlier release (every domain refused), it gets its home domains back when an app starts on the shards", async () => {
    const tenant = `legacy-t-${id}`;
    await app.placeTenant(tenant, { shard: "s1" });
    // What a release before the fence kept domains left: a row without them.
    await admin.query(`INSERT INTO "${shards[0]!.schema}".shard_frozen_tenants (tenant_uuid, frozen_at) VALUES ($1, 0)`, [tenant]);
    await admin.query(`SELECT "${shards[0]!.schema}".mneme_fit_frozen_trigger()`);
    const before = await app.dispatch(Register, { entryUuid: newUuid(), name: "x" }, { reqCtx: reqCtxOf(tenant) }).catch((e: unknown) => e);
    expect(isTenantFrozenError(before)).toBe(true);
    const other = createShardedApp({ control, shards, configure: (f) => void configureLedger(f), placementPollMs: 600_000 });
    await other.start();
    await other.stop();
    const r = await app.dispatch(Register, { entryUuid: newUuid(), name: "x" }, { reqCtx: reqCtxOf(tenant) });
    expect(r.events).toHaveLength(1);
    const kept = await admin.query<{ kept_domains: string[] }>(
      `SELECT kept_domains FROM "${shards[0]!.schema}".shard_frozen_tenants WHERE tenant_uuid = $1`,
      [tenant],
    );
    expect(kept.rows[0]!.kept_domains).toEqual([...app.homeDomains].sort());
  }, 60_000);
});

describe("a router whose placement is stale", () => {
  it("sends a command the old shard's fence refused to the tenant's new shard", async () => {
    const tenant = `stale-t-${id}`;
    await app.placeTenant(tenant, { shard: "s0" });
    const accountUuid = newUuid();
    await app.dispatch(Deposit, { accountUuid, amount: 1 }, { reqCtx: reqCtxOf(tenant) });
    // Another process froze the tenant on s0 and switched it to s1 without a notice this router heard.
    await admin.query(`INSERT INTO "${shards[0]!.schema}".shard_frozen_tenants (tenant_uuid, frozen_at) VALUES ($1, 0)`, [tenant]);
    await admin.query(`SELECT "${shards[0]!.schema}".mneme_fit_frozen_trigger()`);
    await admin.query(
      `UPDATE "${control.schema}".placements SET shard = 's1', version = version + 1, change = nextval('"${control.schema}".placement_changes') WHERE tenant_uuid = $1`,
      [tenant],
    );
    const r = await app.dispatch(Deposit, { accountUuid: newUuid(), amount: 2 }, { reqCtx: reqCtxOf(tenant) });
    expect(r.events).toHaveLength(1);
    expect((await tenantEvents(shards[1]!.schema, tenant)).map((e) => e.event_uuid)).toEqual([r.events[0]!.eventUuid]);
    // The first attempt reached s0 (its router still had it there) and was refused by the fence, nothing written.
    const refused = await admin.query<{ status: string }>(
      `SELECT status FROM "${shards[0]!.schema}".commands WHERE tenant_uuid = $1 ORDER BY created_at`,
      [tenant],
    );
    expect(refused.rows.map((x) => x.status)).toEqual(["succeeded", "failed"]);
    expect(await tenantEvents(shards[0]!.schema, tenant)).toHaveLength(1);
  });
});

/** A deposit of the tenant sent to shard s0's facade directly (past the router): what its fence answers. */
async function depositOnSource(tenant: string, accountUuid: string): Promise<unknown> {
  return app
    .shard("s0")
    .dispatch(Deposit, { accountUuid, amount: 1 }, { reqCtx: reqCtxOf(tenant) })
    .then(
      () => undefined,
      (e: unknown) => e,
    );
}

async function until(cond: () => Promise<boolean>): Promise<void> {
  for (let i = 0; i < 1000; i++) {
    if (await cond()) return;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error("timed out waiting for the readmodel");
}
