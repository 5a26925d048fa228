/**
 * Tenant isolation over memory, SQLite and Postgres: {load, append without
 * load, query get, query list, history} x {own tenant, other tenant, global
 * aggregate, administrator targeting the other tenant}. Every refusal leaves
 * the other tenant's events unchanged.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  anonymous,
  type Authorizer,
  createFacade,
  defineDomain,
  type Facade,
  type FacadeOptions,
  MnemeError,
  type ProjectionList,
  type ProjectionModel,
  ProjectionReadmodel,
  type RequestContext,
} from "mneme";
import { createPostgresBackends } from "mneme/postgres";
import { createSqliteBackends } from "mneme/sqlite";
import { rejection } from "../support/rejections.js";

interface BankState {
  exists: boolean;
  balance: number;
}
interface ProfileState {
  nick: string;
}

function bankDomain() {
  const Bank = defineDomain("Bank");
  const Open = Bank.command<{ accountUuid: string }>("Open");
  const OpenAnonymously = Bank.command<{ accountUuid: string }>("OpenAnonymously", { permission: anonymous });
  const Deposit = Bank.command<{ accountUuid: string; amount: number }>("Deposit");
  const BlindDeposit = Bank.command<{ accountUuid: string; amount: number }>("BlindDeposit");
  const Transfer = Bank.command<{ from: string; to: string; toTenant: string; amount: number }>("Transfer");
  const SetNick = Bank.command<{ profileUuid: string; nick: string }>("SetNick");
  const BlindSetNick = Bank.command<{ profileUuid: string; nick: string }>("BlindSetNick");
  const GetAccount = Bank.query<{ accountUuid: string; includeHistory?: boolean }, ProjectionModel<BankState>>("GetAccount");
  const ListAccounts = Bank.query<{ includeHistory?: boolean }, ProjectionList<BankState>>("ListAccounts");
  const GetProfile = Bank.query<{ profileUuid: string; includeHistory?: boolean }, ProjectionModel<ProfileState>>("GetProfile");
  const ListProfiles = Bank.query<Record<string, never>, ProjectionList<ProfileState>>("ListProfiles");
  const LoadAccount = Bank.query<{ accountUuid: string }, { balance: number; version: number }>("LoadAccount");
  const Opened = Bank.event<Record<string, never>>("Opened");
  const Deposited = Bank.event<{ amount: number }>("Deposited");
  const NickSet = Bank.event<{ nick: string }>("NickSet");
  const Account = Bank.aggregate<BankState>("Account", {
    initialState: () => ({ exists: false, balance: 0 }),
    evolve: { Opened: (s) => ({ ...s, exists: true }), Deposited: (s, p: { amount: number }) => ({ ...s, balance: s.balance + p.amount }) },
  });
  const Profile = Bank.aggregate<ProfileState>("Profile", {
    tenancy: "global",
    initialState: () => ({ nick: "" }),
    evolve: { NickSet: (_s, p: { nick: string }) => ({ nick: p.nick }) },
  });

  const open: Parameters<typeof Bank.handleCommand<{ accountUuid: string }>>[1] = async (ctx, _c, p) => {
    const a = await ctx.aggregates.load(Account, p.accountUuid);
    if (a.state.exists) throw new MnemeError("CONFLICT", "open already");
    return [Opened.create(p.accountUuid, {})];
  };
  Bank.handleCommand(Open, open);
  Bank.handleCommand(OpenAnonymously, open);
  Bank.handleCommand(Deposit, async (ctx, _c, p) => {
    const a = await ctx.aggregates.load(Account, p.accountUuid);
    if (!a.state.exists) throw new MnemeError("NOT_FOUND", `Bank.Account ${p.accountUuid} was not found`);
    return [Deposited.create(p.accountUuid, { amount: p.amount })];
  });
  Bank.handleCommand(BlindDeposit, (_ctx, _c, p) => [Deposited.create(p.accountUuid, { amount: p.amount })]);
  // A careless transfer: it names the other side's tenant on its event explicitly (and loads nothing).
  Bank.handleCommand(Transfer, (_ctx, _c, p) => [
    Deposited.create(p.from, { amount: -p.amount }),
    Deposited.create(p.to, { amount: p.amount }, { tenantUuid: p.toTenant }),
  ]);
  Bank.handleCommand(SetNick, async (ctx, _c, p) => {
    await ctx.aggregates.load(Profile, p.profileUuid);
    return [NickSet.create(p.profileUuid, { nick: p.nick })];
  });
  Bank.handleCommand(BlindSetNick, (_ctx, _c, p) => [NickSet.create(p.profileUuid, { nick: p.nick })]);
  const found = <T>(v: T | undefined, what: string): T => {
    if (v === undefined) throw new MnemeError("NOT_FOUND", `${what} was not found`);
    return v;
  };
  let accounts!: ProjectionReadmodel<BankState>;
  let profiles!: ProjectionReadmodel<ProfileState>;
  Bank.handleQuery(GetAccount, async (ctx, _q, p) =>
    found(await ctx.readmodel(accounts).getModel(p.accountUuid, { includeHistory: p.includeHistory === true }), p.accountUuid),
  );
  Bank.handleQuery(ListAccounts, (ctx, _q, p) => ctx.readmodel(accounts).getModelList({ includeHistory: p.includeHistory === true }));
  Bank.handleQuery(GetProfile, async (ctx, _q, p) =>
    found(await ctx.readmodel(profiles).getModel(p.profileUuid, { includeHistory: p.includeHistory === true }), p.profileUuid),
  );
  Bank.handleQuery(ListProfiles, (ctx) => ctx.readmodel(profiles).getModelList());
  Bank.handleQuery(LoadAccount, async (ctx, _q, p) => {
    const a = await ctx.aggregates.load(Account, p.accountUuid);
    return { balance: a.state.balance, version: a.version };
  });
  return {
    Bank,
    Account,
    Profile,
    Open,
    OpenAnonymously,
    Deposit,
    BlindDeposit,
    Transfer,
    SetNick,
    BlindSetNick,
    GetAccount,
    ListAccounts,
    GetProfile,
    ListProfiles,
    LoadAccount,
    attach(f: Facade) {
      accounts = new ProjectionReadmodel(f, { aggregate: Account });
      profiles = new ProjectionReadmodel(f, { aggregate: Profile });
      f.registerReadmodel(accounts);
      f.registerReadmodel(profiles);
      return { accounts, profiles };
    },
  };
}

const ADMIN_TENANT = "tenant-system";
const userOf = (tenant: string, who: string): RequestContext => ({
  senderAccountUuid: `acc-${who}`,
  senderSessionUuid: `ses-${who}`,
  senderIdentityUuid: `id-${who}`,
  senderTenantUuid: tenant,
});
const alice = userOf("tenant-a", "alice");
const bob = userOf("tenant-b", "bob");
const admin = userOf(ADMIN_TENANT, "root");
const adminInA: RequestContext = { ...admin, targetTenantUuid: "tenant-a" };

/** The RBAC stand-in: a sender may target its own tenant only; the system tenant's sender may target any. */
const authorizer: Authorizer = (reqCtx) => {
  const target = reqCtx.targetTenantUuid;
  if (target === undefined || target === reqCtx.senderTenantUuid || reqCtx.senderTenantUuid === ADMIN_TENANT) return undefined;
  return new MnemeError("PERMISSION_DENIED", `no access to tenant ${target}`);
};

const DATABASE_URL = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test";
const dir = mkdtempSync(join(tmpdir(), "mneme-tenancy-"));
const pool = new pg.Pool({ connectionString: DATABASE_URL, max: 6 });
const schema = `mneme_tenancy_${process.pid}_${Date.now().toString(36)}`;
afterAll(async () => {
  await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).catch(() => undefined);
  await pool.end();
  rmSync(dir, { recursive: true, force: true });
});

const backends: [string, () => Partial<FacadeOptions>][] = [
  ["memory", () => ({})],
  ["sqlite", () => createSqliteBackends({ filename: join(dir, "tenancy.db") })],
  ["postgres", () => createPostgresBackends({ pool, schema })],
];

describe.each(backends)("tenant isolation on %s", (_name, backendsOf) => {
  const d = bankDomain();
  let f: Facade;
  const wait = (reqCtx: RequestContext) => ({ reqCtx, waitToFinish: true });
  const eventsOf = async (agg: string) => (await f.eventRepository.loadAggregate(agg)).map((e) => [e.version, e.tenantUuid, e.payload]);

  beforeAll(async () => {
    f = createFacade({ appName: "tenancy", authorizer, ...backendsOf() });
    f.registerDomain(d.Bank);
    d.attach(f);
    await f.start();
    await f.dispatch(d.Open, { accountUuid: "acct-a" }, wait(alice));
    await f.dispatch(d.Deposit, { accountUuid: "acct-a", amount: 10 }, wait(alice));
    await f.dispatch(d.Open, { accountUuid: "acct-b" }, wait(bob));
    await f.dispatch(d.SetNick, { profileUuid: "prof-1", nick: "first" }, wait(alice));
  });
  afterAll(async () => {
    await f?.stop();
  });

  // --- load -------------------------------------------------------------------
  it("load: own tenant", async () => {
    const r = await f.dispatch(d.Deposit, { accountUuid: "acct-a", amount: 1 }, wait(alice));
    expect(r.events.map((e) => [e.version, e.tenantUuid])).toEqual([[3, "tenant-a"]]);
    expect(await f.query(d.LoadAccount, { accountUuid: "acct-a" }, { reqCtx: alice })).toEqual({ balance: 11, version: 3 });
  });

  it("load: another tenant's aggregate is NOT_FOUND, worded as if absent, and nothing is written", async () => {
    const before = await eventsOf("acct-a");
    const e = await rejection(f.dispatch(d.Deposit, { accountUuid: "acct-a", amount: 1000 }, wait(bob)));
    expect(e.code).toBe("NOT_FOUND");
    const absent = await rejection(f.dispatch(d.Deposit, { accountUuid: "acct-nowhere", amount: 1 }, wait(bob)));
    expect(absent.code).toBe("NOT_FOUND");
    expect(e.message).not.toContain("tenant");
    expect(e.message.replace("acct-a", "X")).toBe(absent.message.replace("acct-nowhere", "X"));
    expect((await rejection(f.query(d.LoadAccount, { accountUuid: "acct-a" }, { reqCtx: bob }))).code).toBe("NOT_FOUND");
    expect(await eventsOf("acct-a")).toEqual(before);
  });

  it("load: a global aggregate loads from any tenant", async () => {
    const r = await f.dispatch(d.SetNick, { profileUuid: "prof-1", nick: "by-bob" }, wait(bob));
    expect(r.events.map((e) => [e.version, e.tenantUuid])).toEqual([[2, "tenant-b"]]);
  });

  it("load: an administrator targeting the other tenant acts there", async () => {
    const r = await f.dispatch(d.Deposit, { accountUuid: "acct-a", amount: 5 }, wait(adminInA));
    expect(r.events[0]!.tenantUuid).toBe("tenant-a");
    // Untargeted, the administrator is in its own tenant like anyone: nothing crosses implicitly.
    expect((await rejection(f.dispatch(d.Deposit, { accountUuid: "acct-a", amount: 5 }, wait(admin)))).code).toBe("NOT_FOUND");
  });

  // --- append without load ----------------------------------------------------
  it("append without load: own tenant", async () => {
    const r = await f.dispatch(d.BlindDeposit, { accountUuid: "acct-b", amount: 2 }, wait(bob));
    expect(r.events[0]!.tenantUuid).toBe("tenant-b");
  });

  it("append without load: another tenant's aggregate is NOT_FOUND and nothing is written", async () => {
    const before = await eventsOf("acct-a");
    const head = await f.eventRepository.headPosition();
    const e = await rejection(f.dispatch(d.BlindDeposit, { accountUuid: "acct-a", amount: -1000 }, wait(bob)));
    expect(e.code).toBe("NOT_FOUND");
    expect(e.message).not.toContain("tenant-a");
    expect(await eventsOf("acct-a")).toEqual(before);
    expect(await f.eventRepository.headPosition()).toBe(head);
  });

  it("append without load: a global aggregate takes events from any tenant", async () => {
    const r = await f.dispatch(d.BlindSetNick, { profileUuid: "prof-1", nick: "blind" }, wait(alice));
    expect(r.events[0]!.tenantUuid).toBe("tenant-a");
  });

  it("append without load: an administrator targeting the other tenant", async () => {
    const r = await f.dispatch(d.BlindDeposit, { accountUuid: "acct-a", amount: 1 }, wait(adminInA));
    expect(r.events[0]!.tenantUuid).toBe("tenant-a");
    expect((await rejection(f.dispatch(d.BlindDeposit, { accountUuid: "acct-a", amount: 1 }, wait(admin)))).code).toBe("NOT_FOUND");
  });

  // --- query get ----------------------------------------------------------------
  it("query get: own tenant, other tenant, global, administrator targeting", async () => {
    expect((await f.query(d.GetAccount, { accountUuid: "acct-a" }, { reqCtx: alice })).tenantUuid).toBe("tenant-a");
    expect((await rejection(f.query(d.GetAccount, { accountUuid: "acct-a" }, { reqCtx: bob }))).code).toBe("NOT_FOUND");
    expect((await f.query(d.GetProfile, { profileUuid: "prof-1" }, { reqCtx: bob })).aggregateUuid).toBe("prof-1");
    expect((await f.query(d.GetAccount, { accountUuid: "acct-a" }, { reqCtx: adminInA })).model.exists).toBe(true);
    expect((await rejection(f.query(d.GetAccount, { accountUuid: "acct-a" }, { reqCtx: admin }))).code).toBe("NOT_FOUND");
  });

  // --- query list ---------------------------------------------------------------
  it("query list: each tenant lists and counts its own models only; global models are listed for all", async () => {
    const mine = await f.query(d.ListAccounts, {}, { reqCtx: alice });
    expect(mine.items.map((i) => i.aggregateUuid)).toEqual(["acct-a"]);
    expect(mine.total).toBe(1);
    const theirs = await f.query(d.ListAccounts, {}, { reqCtx: bob });
    expect(theirs.items.map((i) => i.aggregateUuid)).toEqual(["acct-b"]);
    expect(theirs.total).toBe(1);
    expect((await f.query(d.ListProfiles, {}, { reqCtx: bob })).items.map((i) => i.aggregateUuid)).toEqual(["prof-1"]);
    expect((await f.query(d.ListAccounts, {}, { reqCtx: adminInA })).items.map((i) => i.aggregateUuid)).toEqual(["acct-a"]);
    expect((await f.query(d.ListAccounts, {}, { reqCtx: admin })).total).toBe(0);
    // Trusted code outside a handler is unscoped, unless it names a tenant.
    const [accounts] = [f.readmodel<ProjectionReadmodel<BankState>>("AccountProjection")];
    expect((await accounts.getModelList()).total).toBe(2);
    expect((await accounts.forTenant("tenant-b").getModelList()).total).toBe(1);
    expect((await accounts.forTenant("tenant-b").getModelList({ tenantUuid: "tenant-a" })).total).toBe(0);
    expect(await accounts.getModel("acct-a", { tenantUuid: "tenant-b" })).toBeUndefined();
  });

  // --- history ------------------------------------------------------------------
  it("history: own tenant, other tenant, global, administrator targeting", async () => {
    const own = await f.query(d.GetAccount, { accountUuid: "acct-a", includeHistory: true }, { reqCtx: alice });
    expect(own.historyEvents!.length).toBeGreaterThanOrEqual(2);
    expect(own.historyEvents!.every((h) => h.senderTenantUuid === "tenant-a" || h.senderTenantUuid === ADMIN_TENANT)).toBe(true);
    expect((await rejection(f.query(d.GetAccount, { accountUuid: "acct-a", includeHistory: true }, { reqCtx: bob }))).code).toBe(
      "NOT_FOUND",
    );
    const listed = await f.query(d.ListAccounts, { includeHistory: true }, { reqCtx: bob });
    expect(listed.items.flatMap((i) => i.historyEvents!.map((h) => h.senderTenantUuid))).not.toContain("tenant-a");
    const global = await f.query(d.GetProfile, { profileUuid: "prof-1", includeHistory: true }, { reqCtx: bob });
    expect(global.historyEvents!.map((h) => h.senderTenantUuid)).toEqual(["tenant-a", "tenant-b", "tenant-a"]);
    expect((await f.query(d.GetAccount, { accountUuid: "acct-a", includeHistory: true }, { reqCtx: adminInA })).historyEvents!.length).toBe(
      own.historyEvents!.length,
    );
  });

  // --- bad input ----------------------------------------------------------------
  it("a mixed batch (events for aggregates of two tenants) is NOT_FOUND and appends nothing", async () => {
    const a = await eventsOf("acct-a");
    const b = await eventsOf("acct-b");
    const e = await rejection(f.dispatch(d.Transfer, { from: "acct-b", to: "acct-a", toTenant: "tenant-b", amount: 7 }, wait(bob)));
    expect(e.code).toBe("NOT_FOUND");
    expect(await eventsOf("acct-a")).toEqual(a);
    expect(await eventsOf("acct-b")).toEqual(b);
  });

  it("a tenant uuid the sender may not target is denied by the authorizer; an empty tenant is a tenant of its own", async () => {
    expect((await rejection(f.dispatch(d.Open, { accountUuid: "acct-x" }, wait({ ...bob, targetTenantUuid: "tenant-nope" })))).code).toBe(
      "PERMISSION_DENIED",
    );
    expect(await eventsOf("acct-x")).toEqual([]);
    // A command with no tenant at all (anonymous) works in the tenant "": nobody else's.
    await f.dispatch(d.OpenAnonymously, { accountUuid: "acct-none" }, { waitToFinish: true });
    expect((await f.eventRepository.loadAggregate("acct-none"))[0]!.tenantUuid).toBe("");
    expect((await rejection(f.dispatch(d.Deposit, { accountUuid: "acct-none", amount: 1 }, wait(alice)))).code).toBe("NOT_FOUND");
    expect((await rejection(f.dispatch(d.Open, { accountUuid: "acct-b" }, wait(alice)))).code).toBe("NOT_FOUND");
  });

  it("two tenants opening one aggregate uuid at the same time: one wins, the other is refused", async () => {
    const results = await Promise.allSettled([
      f.dispatch(d.BlindDeposit, { accountUuid: "acct-race", amount: 1 }, wait(alice)),
      f.dispatch(d.BlindDeposit, { accountUuid: "acct-race", amount: 2 }, wait(bob)),
    ]);
    expect(results.filter((r) => r.status === "fulfilled")).toHaveLength(1);
    const refused = results.find((r): r is PromiseRejectedResult => r.status === "rejected")!;
    expect((refused.reason as MnemeError).code).toBe("NOT_FOUND");
    expect(new Set((await f.eventRepository.loadAggregate("acct-race")).map((e) => e.tenantUuid)).size).toBe(1);
  });
});
