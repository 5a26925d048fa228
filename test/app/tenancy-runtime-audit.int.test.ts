/**
 * The tenancy audit matrix of the Runtime: a tenant-A operator (`Runtime.*`
 * granted in tenant A) calls every Runtime message, and the HTTP GETs the
 * dashboard reads, against scheduled commands, dead letters and handler
 * errors of tenants A and B. Nothing of tenant B comes back; `allTenants`
 * works for a system administrator only. The rows are checked against the
 * Runtime domain's registry: a new Runtime message without a row fails here.
 * On memory, a SQLite file and a Postgres schema (the default authorizer of
 * registerDefaults decides).
 */
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import {
  BaseReadmodel,
  createFacade,
  defineDomain,
  type Facade,
  type FacadeOptions,
  type ReadmodelOption,
  type RequestContext,
  withPartitions,
} from "mneme";
import { accountRoutes, registerDefaults } from "mneme/defaults";
import { createHttpHandler, type HttpHandler } from "mneme/http";
import { ProcessManager, Reactor } from "mneme/reactions";
import {
  CancelScheduledCommand,
  ControlDeadLetter,
  GetClearPersonalData,
  ForgetSubject,
  ApplyRetention,
  MigratePersonalData,
  FinishRollingUpgrade,
  ControlEventHandler,
  GetMetrics,
  GetSchema,
  GetSystemInfo,
  ListCommandHandlers,
  ListCommands,
  ListDeadLetters,
  ListEventHandlers,
  ListEvents,
  ListFailures,
  ListPermissions,
  ListQueries,
  ListQueryHandlers,
  ListScheduledCommands,
  StoreDelete,
  StoreInfo,
  StoreRead,
  StoreUpdate,
  StreamSystemEvents,
  SubscribeEvents,
} from "mneme/runtime";
import { ADMIN_EMAIL, ADMIN_PASSWORD, FAST_HASHING, FakeClock, type Session, World } from "../support/defaults-world.js";
import { rejection } from "../support/rejections.js";
import { sharedPlaces } from "../support/shared-places.js";
import { IntegrationConsumer } from "../../src/integration/integration-consumer.js";
import { IntegrationPublisher } from "../../src/integration/integration-publisher.js";
import { HandTransport } from "../support/hand-transport.js";

const FAR = Date.UTC(2099, 0, 1);

function lendingDomain() {
  const Lend = defineDomain("Lend");
  const Borrow = Lend.command<{ email: string }>("Borrow");
  const Remind = Lend.command<{ email: string }>("Remind");
  // A command whose handler fails with the address in its error text (what a broker consumer's listing shows).
  const Refuse = Lend.command<{ email: string }>("Refuse");
  const Borrowed = Lend.event<{ email: string }>("Borrowed");
  Lend.handleCommand(Borrow, (_ctx, c, p) => [Borrowed.create(c.commandUuid, { email: p.email })]);
  Lend.handleCommand(Remind, () => []);
  Lend.handleCommand(Refuse, (_ctx, _c, p) => {
    throw new Error(`cannot lend to ${p.email}`);
  });
  // A handler reading a reactor's and a process manager's own lists through ctx.readmodel: the effective tenant's entries.
  const Outboxes = Lend.query<Record<string, never>, unknown[]>("Outboxes");
  Lend.handleQuery(Outboxes, async (ctx) => [
    ...(await ctx.readmodel<Reactor>("Mailer").outbox.list()),
    ...(await ctx.readmodel<ProcessManager<{ n: number }>>("Reminders").outbox.list()),
    ...(await ctx.readmodel<ProcessManager<{ n: number }>>("Reminders").listStates()),
  ]);
  return { Lend, Borrow, Remind, Refuse, Borrowed, Outboxes };
}

type Lending = ReturnType<typeof lendingDomain>;

/** A readmodel whose handler fails on the events of one e-mail address, with the address in its error text. */
class MemberLoans extends BaseReadmodel {
  constructor(facade: Facade, d: Lending, name: string, crashOn: string, ...options: ReadmodelOption[]) {
    super(facade, ...options);
    this.domain = "Lend";
    this.name = name;
    this.addDomainEventHandler(d.Borrowed, (_ctx, _e, p) => {
      if (p.email === crashOn) throw new Error(`MemberLoans cannot handle ${p.email}`);
    });
  }
}

interface Setup {
  d: Lending;
  world: World;
  http: HttpHandler;
  opA: Session;
  adminSession: Session;
  admin: RequestContext;
  tenantA: string;
  tenantB: string;
}

/**
 * The defaults plus the Lend domain, a reactor that always fails, a process manager that schedules, and three failing
 * readmodels (one partitioned, failing on tenant B's event in one of its partitions).
 */
async function setUp(stores: Partial<FacadeOptions>): Promise<Setup> {
  const d = lendingDomain();
  const clock = new FakeClock();
  const f = createFacade({ appName: "audit", systemEvents: true, ...stores });
  const ids = await registerDefaults(f, {
    admin: { email: ADMIN_EMAIL, password: ADMIN_PASSWORD, name: "Ada Admin" },
    passwordHashing: FAST_HASHING,
    clock: clock.fn,
  });
  f.registerDomain(d.Lend);
  const reactor = new Reactor(f, { name: "Mailer", domain: "Lend", retry: { maxAttempts: 1 } }).on(d.Borrowed, (e) => {
    throw new Error(`cannot mail ${e.payload.email}`);
  });
  const reminders = new ProcessManager<{ n: number }>(f, { name: "Reminders", domain: "Lend", initialState: () => ({ n: 0 }) }).on(
    d.Borrowed,
    (ctx, st, p) => {
      ctx.schedule(d.Remind, { email: p.email }, { at: FAR });
      return { n: st.n + 1 };
    },
  );
  f.registerReadmodel(reactor);
  f.registerReadmodel(reminders);
  f.registerReadmodel(new MemberLoans(f, d, "LoansA", "crash-a@example.org"));
  f.registerReadmodel(new MemberLoans(f, d, "LoansB", "crash-b@example.org"));
  f.registerReadmodel(new MemberLoans(f, d, "PartitionedLoans", "crash-b@example.org", withPartitions(2)));
  await f.start();
  const bare = new World(f, ids, clock, {});
  const adminSession = await bare.login(ADMIN_EMAIL, ADMIN_PASSWORD, ids.adminIdentityUuid);
  const world = new World(f, ids, clock, adminSession.reqCtx);

  const tenantA = await world.createTenant("A");
  const tenantB = await world.createTenant("B");
  const opA = await world.member("ops-a@example.org", tenantA, ["Runtime.*", "Lend.*"]);
  const userB = await world.member("user-b@example.org", tenantB, ["Lend.*"]);
  await f.dispatch(d.Borrow, { email: "crash-a@example.org" }, { reqCtx: opA.reqCtx, waitToFinish: true });
  await f.dispatch(d.Borrow, { email: "crash-b@example.org" }, { reqCtx: userB.reqCtx, waitToFinish: true });
  await reactor.outbox.drain();
  return {
    d,
    world,
    http: createHttpHandler(f, { modules: [accountRoutes()] }),
    opA,
    adminSession,
    admin: adminSession.reqCtx,
    tenantA,
    tenantB,
  };
}

/** Everything of tenant B that must not reach tenant A's operator. */
const B_SECRETS = ["crash-b@example.org"];

function leaksB(value: unknown, tenantB: string): string[] {
  const text = JSON.stringify(value) ?? "";
  return [...B_SECRETS, tenantB].filter((s) => text.includes(s));
}

type Row =
  | { kind: "tenant-data"; call: (s: Setup, reqCtx: RequestContext, extra: Record<string, unknown>) => Promise<unknown> }
  | { kind: "registry"; call: (s: Setup, reqCtx: RequestContext) => Promise<unknown> }
  | { kind: "administrators"; call: (s: Setup, reqCtx: RequestContext) => Promise<unknown> }
  | { kind: "permission-only"; call: (s: Setup, reqCtx: RequestContext) => Promise<unknown> };

const q = (s: Setup) => s.world.facade;

/** One row per Runtime message: how tenant A's operator calls it. */
const ROWS: Record<string, Row> = {
  ListCommands: { kind: "registry", call: (s, r) => q(s).query(ListCommands, {}, { reqCtx: r }) },
  ListQueries: { kind: "registry", call: (s, r) => q(s).query(ListQueries, {}, { reqCtx: r }) },
  ListEvents: { kind: "registry", call: (s, r) => q(s).query(ListEvents, {}, { reqCtx: r }) },
  ListCommandHandlers: { kind: "registry", call: (s, r) => q(s).query(ListCommandHandlers, {}, { reqCtx: r }) },
  ListQueryHandlers: { kind: "registry", call: (s, r) => q(s).query(ListQueryHandlers, {}, { reqCtx: r }) },
  GetSystemInfo: { kind: "registry", call: (s, r) => q(s).query(GetSystemInfo, {}, { reqCtx: r }) },
  ListPermissions: { kind: "registry", call: (s, r) => q(s).query(ListPermissions, {}, { reqCtx: r }) },
  GetSchema: {
    kind: "registry",
    call: (s, r) =>
      q(s)
        .query(GetSchema, { domain: "Lend", type: "Borrow" }, { reqCtx: r })
        .catch((e) => e),
  },
  ListEventHandlers: { kind: "tenant-data", call: (s, r, x) => q(s).query(ListEventHandlers, x, { reqCtx: r }) },
  GetMetrics: { kind: "tenant-data", call: (s, r, x) => q(s).query(GetMetrics, x, { reqCtx: r }) },
  ListScheduledCommands: { kind: "tenant-data", call: (s, r, x) => q(s).query(ListScheduledCommands, x, { reqCtx: r }) },
  ListDeadLetters: { kind: "tenant-data", call: (s, r, x) => q(s).query(ListDeadLetters, x, { reqCtx: r }) },
  ListFailures: { kind: "tenant-data", call: (s, r, x) => q(s).query(ListFailures, x, { reqCtx: r }) },
  ControlEventHandler: {
    kind: "administrators",
    call: (s, r) => q(s).dispatch(ControlEventHandler, { action: "stop", eventHandlerName: "LoansB" }, { reqCtx: r }),
  },
  CancelScheduledCommand: {
    kind: "administrators",
    call: async (s, r) => {
      const [entry] = await s.world.facade.runtime.listScheduledCommands({ tenantUuid: s.tenantB });
      return q(s).dispatch(CancelScheduledCommand, { commandUuid: entry!.commandUuid }, { reqCtx: r });
    },
  },
  ControlDeadLetter: {
    kind: "administrators",
    call: async (s, r) => {
      const [entry] = await s.world.facade.runtime.listDeadLetters({ tenantUuid: s.tenantB });
      return q(s).dispatch(ControlDeadLetter, { action: "discard", id: entry!.id }, { reqCtx: r });
    },
  },
  MigratePersonalData: { kind: "administrators", call: (s, r) => q(s).dispatch(MigratePersonalData, { dryRun: true }, { reqCtx: r }) },
  FinishRollingUpgrade: { kind: "administrators", call: (s, r) => q(s).dispatch(FinishRollingUpgrade, { settleMs: 0 }, { reqCtx: r }) },
  GetClearPersonalData: { kind: "administrators", call: (s, r) => q(s).query(GetClearPersonalData, {}, { reqCtx: r }) },
  // An account's events have no tenant: only a system administrator erases it (a tenant's administrator, a subject of its own tenant alone).
  ForgetSubject: {
    kind: "administrators",
    call: (s, r) => q(s).dispatch(ForgetSubject, { subjectUuid: s.admin.senderAccountUuid! }, { reqCtx: r }),
  },
  ApplyRetention: { kind: "administrators", call: (s, r) => q(s).dispatch(ApplyRetention, { dryRun: true }, { reqCtx: r }) },
  StreamSystemEvents: { kind: "administrators", call: (s, r) => q(s).query(StreamSystemEvents, {}, { reqCtx: r }) },
  // A permission with no handler (the HTTP event subscription's first check): it answers nothing to anyone.
  SubscribeEvents: {
    kind: "permission-only",
    call: (s, r) => q(s).query(SubscribeEvents, { types: ["Loans.LoanMade"], allTenants: false }, { reqCtx: r }),
  },
  StoreInfo: { kind: "administrators", call: (s, r) => q(s).query(StoreInfo, { store: "event" }, { reqCtx: r }) },
  StoreRead: { kind: "administrators", call: (s, r) => q(s).query(StoreRead, { store: "event" }, { reqCtx: r }) },
  StoreUpdate: {
    kind: "administrators",
    call: (s, r) => q(s).dispatch(StoreUpdate, { store: "cache", key: "k", value: 1 }, { reqCtx: r }),
  },
  StoreDelete: { kind: "administrators", call: (s, r) => q(s).dispatch(StoreDelete, { store: "cache", key: "k" }, { reqCtx: r }) },
};

/** The entries of a tenant-data answer, whatever its shape (a list, one metrics record, a record by name). */
function entriesOf(v: unknown): Record<string, unknown>[] {
  if (Array.isArray(v)) return v as Record<string, unknown>[];
  const o = v as Record<string, unknown>;
  return "eventsProcessed" in o ? [o] : (Object.values(o) as Record<string, unknown>[]);
}

describe.each(sharedPlaces("tenancy_audit"))("tenancy audit of the Runtime on %s", (_name, place) => {
  let s: Setup;
  beforeAll(async () => {
    s = await setUp(place()());
  }, 60_000);
  afterAll(async () => {
    await s?.world.facade.stop();
  });

  it("has a row for every message of the Runtime domain's registry", () => {
    const registered = [
      ...s.world.facade.runtime
        .listCommands()
        .filter((c) => c.domain === "Runtime")
        .map((c) => c.domainCmdName),
      ...s.world.facade.runtime
        .listQueries()
        .filter((c) => c.domain === "Runtime")
        .map((c) => c.domainQryName),
    ].sort();
    expect(Object.keys(ROWS).sort()).toEqual(registered);
  });

  it("the data of both tenants is there (the trusted, unscoped view)", async () => {
    const rt = s.world.facade.runtime;
    expect(new Set((await rt.listScheduledCommands()).map((e) => e.tenantUuid))).toEqual(new Set([s.tenantA, s.tenantB]));
    expect(new Set((await rt.listDeadLetters()).map((e) => e.tenantUuid))).toEqual(new Set([s.tenantA, s.tenantB]));
    const loans = rt.listEventHandlers().filter((h) => h.eventHandlerName.startsWith("Loans"));
    expect(loans.map((h) => [h.eventHandlerName, h.state, h.lastErrorTenantUuid])).toEqual([
      ["LoansA", "failed", s.tenantA],
      ["LoansB", "failed", s.tenantB],
    ]);
    expect(rt.getMetrics("LoansB").lastError).toBe("MemberLoans cannot handle crash-b@example.org");
    // Both handler failures are in the failure history, each with its tenant, newest first.
    const failed = rt
      .listFailures({ allTenants: true })
      .filter((e) => e.kind === "HandlerFailed" && String(e.data.eventHandlerName).startsWith("Loans"));
    expect(failed.map((e) => [e.data.eventHandlerName, e.tenantUuid])).toEqual([
      ["LoansB", s.tenantB],
      ["LoansA", s.tenantA],
    ]);
  });

  for (const [message, row] of Object.entries(ROWS)) {
    it(`${message} (${row.kind}): nothing of tenant B reaches tenant A's operator`, async () => {
      const a = s.opA.reqCtx;
      if (row.kind === "administrators") {
        expect((await rejection(row.call(s, a))).code).toBe("PERMISSION_DENIED");
        return;
      }
      if (row.kind === "permission-only") {
        expect((await rejection(row.call(s, a))).code).toBe("UNKNOWN_QUERY");
        return;
      }
      if (row.kind === "registry") {
        expect(leaksB(await row.call(s, a), s.tenantB)).toEqual([]);
        return;
      }
      const own = await row.call(s, a, {});
      expect(leaksB(own, s.tenantB)).toEqual([]);
      // Each entry names its tenant: the caller's.
      for (const e of entriesOf(own)) if ("tenantUuid" in e) expect(e.tenantUuid).toBe(s.tenantA);
      // Another tenant or every tenant: refused, for a tenant's operator.
      expect((await rejection(row.call(s, a, { allTenants: true }))).code).toBe("PERMISSION_DENIED");
      if (message.startsWith("List") && message !== "ListEventHandlers")
        expect((await rejection(row.call(s, a, { tenantUuid: s.tenantB }))).code).toBe("PERMISSION_DENIED");
      // Targeting tenant B: refused by the authorizer.
      expect((await rejection(row.call(s, { ...a, targetTenantUuid: s.tenantB }, {}))).code).toBe("PERMISSION_DENIED");
      // Targeting no tenant ("": the effective tenant of entries without one) is another tenant too.
      expect((await rejection(row.call(s, { ...a, targetTenantUuid: "" }, {}))).code).toBe("PERMISSION_DENIED");
      // A system administrator sees every tenant with allTenants, and only its own tenant's without.
      const all = await row.call(s, s.admin, { allTenants: true });
      expect(leaksB(all, s.tenantB).length).toBeGreaterThan(0);
      expect(leaksB(await row.call(s, s.admin, {}), s.tenantB)).toEqual([]);
      // ...or tenant B's when it targets tenant B.
      expect(leaksB(await row.call(s, { ...s.admin, targetTenantUuid: s.tenantB }, {}), s.tenantB).length).toBeGreaterThan(0);
    });
  }

  it("tenant A's operator sees its own tenant's scheduled commands, dead letters and handler error", async () => {
    const a = { reqCtx: s.opA.reqCtx };
    const f = s.world.facade;
    const scheduled = await f.query(ListScheduledCommands, {}, a);
    expect(scheduled.map((e) => [e.tenantUuid, e.payload])).toEqual([[s.tenantA, { email: "crash-a@example.org" }]]);
    const dead = await f.query(ListDeadLetters, {}, a);
    expect(dead.map((e) => [e.tenantUuid, e.lastError])).toEqual([[s.tenantA, "cannot mail crash-a@example.org"]]);
    const handlers = await f.query(ListEventHandlers, {}, a);
    const byName = new Map(handlers.map((h) => [h.eventHandlerName, h]));
    expect(byName.get("LoansA")?.lastError).toBe("MemberLoans cannot handle crash-a@example.org");
    // LoansB failed on tenant B's event: its state shows, its error text does not.
    expect(byName.get("LoansB")?.state).toBe("failed");
    expect(byName.get("LoansB")?.lastError).toBeUndefined();
    const metrics = (await f.query(GetMetrics, {}, a)) as Record<string, { lastError?: string }>;
    expect(metrics.LoansA?.lastError).toBe("MemberLoans cannot handle crash-a@example.org");
    expect(metrics.LoansB?.lastError).toBeUndefined();
    expect(((await f.query(GetMetrics, { eventHandlerName: "LoansB" }, a)) as { lastError?: string }).lastError).toBeUndefined();
  });

  it("a partitioned readmodel that failed on tenant B's event: its state reaches tenant A's operator, its error text does not", async () => {
    const f = s.world.facade;
    const rt = f.runtime;
    // The trusted view: failed in one partition, on tenant B's event, with B's address in the text.
    const trusted = rt.listEventHandlers().find((h) => h.eventHandlerName === "PartitionedLoans")!;
    expect(trusted.state).toBe("failed");
    expect(trusted.partitions?.length).toBe(2);
    expect([trusted.lastErrorTenantUuid, trusted.lastError]).toEqual([s.tenantB, "MemberLoans cannot handle crash-b@example.org"]);
    expect(rt.getMetrics("PartitionedLoans").eventsFailed).toBeGreaterThan(0);
    const partitionFailures = rt.listFailures({ allTenants: true, eventHandlerName: "PartitionedLoans" });
    expect(partitionFailures.map((e) => [e.tenantUuid, typeof e.data.partition])).toContainEqual([s.tenantB, "number"]);

    const a = { reqCtx: s.opA.reqCtx };
    const listed = (await f.query(ListEventHandlers, {}, a)).find((h) => h.eventHandlerName === "PartitionedLoans")!;
    expect(listed.state).toBe("failed");
    expect(listed.lastError).toBeUndefined();
    expect(leaksB(listed, s.tenantB)).toEqual([]);
    expect(leaksB(await f.query(GetMetrics, { eventHandlerName: "PartitionedLoans" }, a), s.tenantB)).toEqual([]);
    expect(await f.query(ListFailures, { eventHandlerName: "PartitionedLoans" }, a)).toEqual([]);
    // A system administrator sees the text with allTenants.
    const wide = (await f.query(ListEventHandlers, { allTenants: true }, { reqCtx: s.admin })).find(
      (h) => h.eventHandlerName === "PartitionedLoans",
    )!;
    expect(wide.lastError).toBe("MemberLoans cannot handle crash-b@example.org");
  });

  it("a handler reading a reactor's or process manager's outbox and states through ctx.readmodel sees its tenant's only", async () => {
    const f = s.world.facade;
    const own = await f.query(s.d.Outboxes, {}, { reqCtx: s.opA.reqCtx });
    expect(own.length).toBe(3);
    expect(leaksB(own, s.tenantB)).toEqual([]);
    // Trusted code: every tenant's.
    expect(leaksB(await f.readmodel<Reactor>("Mailer").outbox.list(), s.tenantB).length).toBeGreaterThan(0);
  });

  it("store reads: an administrator reads its effective tenant's events, commands and log entries; every tenant's with allTenants", async () => {
    const f = s.world.facade;
    const read = (reqCtx: RequestContext, store: "event" | "command", extra: { allTenants?: boolean } = {}) =>
      f.query(StoreRead, { store, limit: 1000, ...extra }, { reqCtx });
    const tenantsOf = (page: { items: unknown[] }) => new Set(page.items.map((e) => (e as { tenantUuid: string }).tenantUuid));
    const sys = s.world.ids.systemTenantUuid;
    for (const store of ["event", "command"] as const) {
      // The system tenant's own entries only: an administrator's commands may name tenant B, B's data is not there.
      const own = await read(s.admin, store);
      expect(tenantsOf(own), store).toEqual(new Set([sys]));
      expect(JSON.stringify(own)).not.toContain("crash-b@example.org");
      const targeted = await read({ ...s.admin, targetTenantUuid: s.tenantB }, store);
      expect(tenantsOf(targeted), store).toEqual(new Set([s.tenantB]));
      expect(JSON.stringify(targeted)).toContain("crash-b@example.org");
      const all = await read(s.admin, store, { allTenants: true });
      expect([...tenantsOf(all)], store).toEqual(expect.arrayContaining([sys, s.tenantA, s.tenantB]));
      expect((await rejection(read(s.opA.reqCtx, store))).code).toBe("PERMISSION_DENIED");
      // Targeting "" (no tenant) is that tenant's entries only, never every tenant's (a filter of "" is a filter).
      const none = await read({ ...s.admin, targetTenantUuid: "" }, store);
      expect(
        [...tenantsOf(none)].filter((t) => t !== ""),
        store,
      ).toEqual([]);
    }
    // The log store the same way: an entry of tenant B never answers a read of "" (no tenant), nor one of tenant A.
    await f.logStore.append({ level: "warn", source: "audit", message: "of tenant B: crash-b@example.org", tenantUuid: s.tenantB });
    await f.logStore.append({ level: "info", source: "audit", message: "of no tenant" });
    const logRead = (reqCtx: RequestContext) => f.query(StoreRead, { store: "log", limit: 1000 }, { reqCtx });
    const noTenant = await logRead({ ...s.admin, targetTenantUuid: "" });
    // Entries without a tenant (the system's) are in the all-tenant view only.
    expect(noTenant.items).toEqual([]);
    const all = await f.query(StoreRead, { store: "log", limit: 1000, allTenants: true }, { reqCtx: s.admin });
    expect(all.items.map((e) => (e as { message: string }).message)).toEqual(
      expect.arrayContaining(["of no tenant", "of tenant B: crash-b@example.org"]),
    );
    expect(JSON.stringify(noTenant)).not.toContain("crash-b@example.org");
    expect(JSON.stringify(await logRead({ ...s.admin, targetTenantUuid: s.tenantA }))).not.toContain("crash-b@example.org");
    expect(JSON.stringify(await logRead({ ...s.admin, targetTenantUuid: s.tenantB }))).toContain("crash-b@example.org");
  });

  describe("HTTP GETs of the dashboard", () => {
    const get = async (path: string, who: Session | "admin", tenant: string): Promise<Response> => {
      const session = who === "admin" ? s.adminSession : who;
      const headers = {
        "x-identity-uuid": session.reqCtx.senderIdentityUuid!,
        authorization: `Bearer ${session.login.sessionUuid}.${session.login.sessionKey}`,
      };
      return s.http(new Request(`http://127.0.0.1/api/tenants/${tenant}/runtime/${path}`, { headers }));
    };
    const PATHS = [
      "commands",
      "queries",
      "events",
      "command-handlers",
      "query-handlers",
      "event-handlers",
      "permissions",
      "metrics",
      "system-info",
    ];

    const post = async (kind: "queries" | "commands", name: string, body: unknown, who: Session, tenant: string): Promise<Response> =>
      s.http(
        new Request(`http://127.0.0.1/api/tenants/${tenant}/${kind}/Runtime/${name}`, {
          method: "POST",
          headers: {
            "content-type": "application/json",
            "x-identity-uuid": who.reqCtx.senderIdentityUuid!,
            authorization: `Bearer ${who.login.sessionUuid}.${who.login.sessionKey}`,
          },
          body: JSON.stringify(body),
        }),
      );

    // What the dashboard's dead-letter, scheduled-command and failure pages send: the generic query and command routes.
    for (const name of ["ListDeadLetters", "ListScheduledCommands", "ListFailures"]) {
      it(`POST queries/Runtime/${name}: tenant A's operator gets its tenant's entries; another tenant's or every tenant's is 403`, async () => {
        const own = await post("queries", name, { limit: 1000 }, s.opA, s.tenantA);
        expect(own.status).toBe(200);
        const entries = (await own.json()) as { tenantUuid?: string }[];
        expect(entries.length).toBeGreaterThan(0);
        for (const e of entries) expect(e.tenantUuid).toBe(s.tenantA);
        expect(leaksB(entries, s.tenantB)).toEqual([]);
        expect((await post("queries", name, {}, s.opA, s.tenantB)).status).toBe(403);
        expect((await post("queries", name, { allTenants: true }, s.opA, s.tenantA)).status).toBe(403);
        expect((await post("queries", name, { tenantUuid: s.tenantB }, s.opA, s.tenantA)).status).toBe(403);
        expect((await post("queries", name, { allTenants: true, tenantUuid: s.tenantB }, s.opA, s.tenantA)).status).toBe(403);
      });
    }

    it("POST commands/Runtime/ControlDeadLetter and CancelScheduledCommand: 403 for tenant A's operator, on B's entries and on its own; B's stay", async () => {
      const rt = s.world.facade.runtime;
      const [deadB] = await rt.listDeadLetters({ tenantUuid: s.tenantB });
      const [deadA] = await rt.listDeadLetters({ tenantUuid: s.tenantA });
      const [dueB] = await rt.listScheduledCommands({ tenantUuid: s.tenantB });
      for (const tenant of [s.tenantA, s.tenantB]) {
        for (const id of [deadB!.id, deadA!.id]) {
          for (const action of ["retry", "discard"]) {
            const r = await post("commands", "ControlDeadLetter", { action, id, eventHandlerName: "Mailer" }, s.opA, tenant);
            expect(r.status).toBe(403);
          }
        }
        expect((await post("commands", "CancelScheduledCommand", { commandUuid: dueB!.commandUuid }, s.opA, tenant)).status).toBe(403);
      }
      expect((await rt.listDeadLetters({ tenantUuid: s.tenantB })).map((e) => [e.id, e.attempts])).toEqual([[deadB!.id, deadB!.attempts]]);
      expect((await rt.listScheduledCommands({ tenantUuid: s.tenantB })).map((e) => e.commandUuid)).toEqual([dueB!.commandUuid]);
    });

    for (const path of PATHS) {
      it(`GET runtime/${path}: nothing of tenant B for tenant A's operator; allTenants only for administrators`, async () => {
        const own = await get(path, s.opA, s.tenantA);
        expect(own.status).toBe(200);
        expect(leaksB(await own.json(), s.tenantB)).toEqual([]);
        expect((await get(path, s.opA, s.tenantB)).status).toBe(403);
        if (path === "event-handlers" || path === "metrics") {
          const wide = await get(`${path}?allTenants=true`, s.opA, s.tenantA);
          expect(wide.status).toBe(403);
          const adminWide = await get(`${path}?allTenants=true`, "admin", s.world.ids.systemTenantUuid);
          expect(adminWide.status).toBe(200);
          expect(leaksB(await adminWide.json(), s.tenantB).length).toBeGreaterThan(0);
        }
      });
    }
  });

  // Last: it adds a dead letter of tenant B, which the rows above count.
  it("a broker consumer that failed on tenant B's message: its listing reaches tenant A's operator without B's error text", async () => {
    const f = s.world.facade;
    const userB = await s.world.member("consumer-b@example.org", s.tenantB, ["Lend.*"]);
    const transport = new HandTransport();
    f.registerReadmodel(
      new IntegrationConsumer(f, {
        name: "LendIn",
        domain: "Lend",
        transport,
        retry: { maxAttempts: 1 },
        toCommand: (m) => ({ command: s.d.Refuse, payload: m.body as { email: string }, reqCtx: userB.reqCtx }),
      }),
    );
    await transport.opened;
    await transport.deliver("m-1", { email: "crash-b@example.org" });
    expect((await f.runtime.listDeadLetters({ eventHandlerName: "LendIn" })).map((e) => e.tenantUuid)).toEqual([s.tenantB]);
    await expectBrokerErrorOfB("LendIn", "cannot lend to crash-b@example.org");
  });

  it("a broker publisher that failed on tenant B's event: its listing reaches tenant A's operator without B's error text", async () => {
    const f = s.world.facade;
    const userB = await s.world.member("publisher-b@example.org", s.tenantB, ["Lend.*"]);
    const publisher = new IntegrationPublisher(f, {
      name: "LendOut",
      domain: "Lend",
      retry: { maxAttempts: 1 },
      transport: {
        broker: "hand",
        target: "lend-exchange",
        connected: true,
        publish: (m) => Promise.reject(new Error(`the broker refused ${new TextDecoder().decode(m.data)}`)),
        close: () => Promise.resolve(),
      },
    }).on(s.d.Borrowed, (e) => ({ subject: "lend.borrowed", body: e.payload }));
    f.registerReadmodel(publisher);
    // Live (its catch-up done), so the dispatch below waits until it recorded the new event in its outbox.
    await vi.waitFor(() => expect(publisher.state).toBe("running"), { timeout: 20_000 });
    await f.dispatch(s.d.Borrow, { email: "crash-b@example.org" }, { reqCtx: userB.reqCtx, waitToFinish: true });
    await publisher.idle();
    await publisher.outbox.drain();
    await expectBrokerErrorOfB("LendOut", "crash-b@example.org");
  });

  /**
   * The broker link's error of tenant B's message or event: in the trusted view, tenant B's view (its
   * administrator targeting B) and every tenant's; never in tenant A's operator's, which shows the counters.
   */
  async function expectBrokerErrorOfB(handler: string, text: string): Promise<void> {
    const f = s.world.facade;
    const find = (all: { eventHandlerName: string; integration?: { lastError?: string; failures: number } }[]) =>
      all.find((h) => h.eventHandlerName === handler)!.integration!;
    expect(find(f.runtime.listEventHandlers()).lastError).toContain(text);
    const listed = await f.query(ListEventHandlers, {}, { reqCtx: s.opA.reqCtx });
    expect(find(listed).failures).toBeGreaterThan(0);
    expect(find(listed).lastError).toBeUndefined();
    expect(leaksB(listed, s.tenantB)).toEqual([]);
    const asB = await f.query(ListEventHandlers, {}, { reqCtx: { ...s.admin, targetTenantUuid: s.tenantB } });
    expect(find(asB).lastError).toContain(text);
    const wide = await f.query(ListEventHandlers, { allTenants: true }, { reqCtx: s.admin });
    expect(find(wide).lastError).toContain(text);
  }
});
