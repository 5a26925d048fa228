/**
 * Erasure in readmodels keeps each document's tenant and partition, on
 * memory, SQLite (a file) and Postgres: a helpdesk of 3 tenants, tenant A's
 * listing holds 81 open tickets, 2 customers are forgotten (23 of A's tickets
 * and some of B's and C's are theirs). Before, a readmodel that overwrote its
 * copies on Privacy.SubjectForgotten (an event without a tenant) moved them to
 * tenant "" and A's listing fell from 81 to 58. Now every tenant's listing
 * keeps its count and the personal fields read "[erased]", with the plain
 * handler of the old docs, with `eraseSubjects`, and with `eraseSubjects` on a
 * readmodel of 4 partitions (each partition erases the documents of its own
 * aggregates; a plain SubjectForgotten handler is refused there). On SQLite
 * and Postgres a SQL-table readmodel's `upsert` by the forget's handler
 * updates the rows of its key in their tenants (it inserted rows in tenant
 * "" before, leaving the tenant's rows in clear).
 */
import { describe, expect, it } from "vitest";
import {
  BaseReadmodel,
  createFacade,
  defineDomain,
  type Facade,
  type FacadeOptions,
  isMnemeError,
  newUuid,
  SqlTableReadmodel,
  withPartitions,
} from "mneme";
import { SubjectForgotten } from "mneme/defaults";
import type { HandlerContext } from "mneme/reactions";
import { createPostgresBackends } from "mneme/postgres";
import { createSqliteBackends } from "mneme/sqlite";
import { postgresScratch } from "../support/postgres-scratch.js";
import { sqliteScratch } from "../support/sqlite-scratch.js";
import { until } from "../support/until.js";

interface Ticket {
  ticketUuid: string;
  customerUuid: string;
  customerName: string;
  customerEmail: string;
  title: string;
}

const ERASED = "[erased]";

function helpdesk() {
  const D = defineDomain("Helpdesk");
  const personalData = { subject: (p: Ticket) => p.customerUuid, fields: ["customerName", "customerEmail"] };
  const Open = D.command<Ticket>("OpenTicket", { personalData });
  const Opened = D.event<Ticket>("TicketOpened", { personalData });
  const T = D.aggregate<{ open: boolean }>("Ticket", {
    initialState: () => ({ open: false }),
    evolve: { TicketOpened: () => ({ open: true }) },
  });
  D.handleCommand(Open, (_ctx, _c, p) => [Opened.create(p.ticketUuid, p)]);
  return { D, Open, Opened, T };
}

type Desk = ReturnType<typeof helpdesk>;

/** The old docs' way: overwrite the copies in a plain handler of SubjectForgotten. */
class PlainTickets extends BaseReadmodel {
  readonly tickets;
  constructor(f: Facade, desk: Desk) {
    super(f);
    this.domain = "Helpdesk";
    this.name = "PlainTickets";
    this.tickets = this.collection<Ticket>("tickets");
    this.addDomainEventHandler(desk.Opened, (_ctx, _e, p) => this.tickets.put(p.ticketUuid, p));
    this.addDomainEventHandler(SubjectForgotten, async (_ctx, _e, p) => {
      for (const t of await this.tickets.list({ where: { customerUuid: p.subject } }))
        await this.tickets.put(t.ticketUuid, { ...t, customerName: ERASED, customerEmail: ERASED });
    });
  }
}

/** `eraseSubjects`, optionally on partitions; records which partitions saw each forget and each document's erasures. */
class ErasedTickets extends BaseReadmodel {
  readonly tickets;
  readonly forgetSeenBy: (number | undefined)[] = [];
  readonly erasures = new Map<string, number>();
  constructor(f: Facade, desk: Desk, partitions?: number) {
    super(f, ...(partitions === undefined ? [] : [withPartitions(partitions)]));
    this.domain = "Helpdesk";
    this.name = partitions === undefined ? "ErasedTickets" : "PartitionedTickets";
    this.tickets = this.collection<Ticket>("tickets", { indexes: ["customerUuid"] });
    this.addDomainEventHandler(desk.Opened, (_ctx, _e, p) => this.tickets.put(p.ticketUuid, p));
    this.eraseSubjects(this.tickets, {
      where: (subject) => ({ customerUuid: subject }),
      keyOf: (t) => t.ticketUuid,
      erase: (t) => {
        this.erasures.set(t.ticketUuid, (this.erasures.get(t.ticketUuid) ?? 0) + 1);
        return { ...t, customerName: ERASED, customerEmail: ERASED };
      },
    });
    this.addDomainEventHandlerInEveryPartition(SubjectForgotten, (ctx: HandlerContext) => {
      this.forgetSeenBy.push(ctx.partition?.index);
    });
  }
}

interface TicketRows {
  tickets: { tenant_uuid: string; id: string; customer: string; name: string; edits: number };
}

/** The subject's rows erased with `upsert` by key in a handler of SubjectForgotten (an event without a tenant). */
class SqlTickets extends SqlTableReadmodel<TicketRows> {
  constructor(f: Facade, desk: Desk) {
    super(f, {
      tables: { tickets: {} },
      ddl: (t) => [
        `CREATE TABLE ${t("tickets")} (tenant_uuid TEXT NOT NULL, id TEXT NOT NULL, customer TEXT NOT NULL, name TEXT NOT NULL, edits INTEGER NOT NULL, PRIMARY KEY (tenant_uuid, id))`,
      ],
    });
    this.domain = "Helpdesk";
    this.name = "SqlTickets";
    this.addDomainEventHandler(desk.Opened, (_ctx, _e, p) =>
      this.sql.insert("tickets", { id: p.ticketUuid, customer: p.customerUuid, name: p.customerName, edits: 0 }),
    );
    this.addDomainEventHandler(SubjectForgotten, async (_ctx, _e, p) => {
      const rows = await this.sql.query<{ id: string }>(
        `SELECT id FROM ${this.sql.table("tickets")} WHERE customer = ${this.sql.dialect === "postgres" ? "$1" : "?"}`,
        [p.subject],
      );
      for (const r of rows) await this.sql.upsert("tickets", { id: r.id, name: ERASED, edits: 1 }, { key: ["id"], add: ["edits"] });
    });
  }

  async listing(): Promise<{ customer: string; name: string; edits: number }[]> {
    return this.sql.query(`SELECT customer, name, edits FROM ${this.sql.from("tickets")}`);
  }
}

const pg = postgresScratch("mneme_erasure");
const files = sqliteScratch("erasure");

const worlds: [string, () => FacadeOptions][] = [
  ["memory", () => ({})],
  ["sqlite", () => createSqliteBackends({ filename: files.newFile() })],
  ["postgres", () => createPostgresBackends({ pool: pg.pool, schema: pg.newSchema(), pollIntervalMs: 50 })],
];

const TENANTS = ["tenant-a", "tenant-b", "tenant-c"] as const;
/** Open tickets per tenant, and how many of them the two forgotten customers opened. */
const COUNTS = { "tenant-a": [81, 23], "tenant-b": [40, 7], "tenant-c": [30, 5] } as const;
const FORGOTTEN = ["cust-forgotten-1", "cust-forgotten-2"];

async function openTickets(f: Facade, desk: Desk): Promise<Map<string, Ticket>> {
  const all = new Map<string, Ticket>();
  for (const tenant of TENANTS) {
    const [n, theirs] = COUNTS[tenant];
    const reqCtx = { senderAccountUuid: "a", senderSessionUuid: "s", senderIdentityUuid: "i", senderTenantUuid: tenant };
    for (let i = 0; i < n; i++) {
      const customerUuid = i < theirs ? FORGOTTEN[i % 2]! : `cust-${tenant}-${i % 9}`;
      const t: Ticket = {
        ticketUuid: newUuid(),
        customerUuid,
        customerName: `Name ${customerUuid}`,
        customerEmail: `${customerUuid}@example.org`,
        title: `t${i}`,
      };
      all.set(t.ticketUuid, t);
      await f.dispatch(desk.Open, t, { reqCtx, waitToFinish: true });
    }
  }
  return all;
}

async function expectErasedInPlace(rm: { asTenant(t: string): { tickets: { list(): Promise<Ticket[]> } } }, opened: Map<string, Ticket>) {
  for (const tenant of TENANTS) {
    const listing = await rm.asTenant(tenant).tickets.list();
    expect(listing.length, tenant).toBe(COUNTS[tenant][0]);
    const erased = listing.filter((t) => FORGOTTEN.includes(t.customerUuid));
    expect(erased.length, tenant).toBe(COUNTS[tenant][1]);
    for (const t of erased) expect([t.customerName, t.customerEmail]).toEqual([ERASED, ERASED]);
    for (const t of listing.filter((x) => !FORGOTTEN.includes(x.customerUuid))) expect(t).toEqual(opened.get(t.ticketUuid));
  }
  // Nothing was moved to the tenant "" of the forget event.
  expect(await rm.asTenant("").tickets.list()).toEqual([]);
}

describe.each(worlds)("erasure in readmodels on %s", (_name, stores) => {
  it("a plain SubjectForgotten handler and eraseSubjects keep every tenant's listing (81 stays 81), personal fields erased", async () => {
    const desk = helpdesk();
    const f = files.keep(createFacade({ appName: "helpdesk", ...stores() }));
    f.registerDomain(desk.D);
    const plain = new PlainTickets(f, desk);
    const erased = new ErasedTickets(f, desk);
    f.registerReadmodel(plain);
    f.registerReadmodel(erased);
    await f.start();
    try {
      const opened = await openTickets(f, desk);
      expect((await plain.asTenant("tenant-a").tickets.list()).length).toBe(81);
      for (const s of FORGOTTEN) await f.forget(s);
      expect((await f.scrubStorage()).behind).toEqual([]);
      await expectErasedInPlace(plain, opened);
      await expectErasedInPlace(erased, opened);
      expect([...erased.erasures.values()].every((n) => n === 1)).toBe(true);
      expect(erased.erasures.size).toBe(23 + 7 + 5);
    } finally {
      await f.stop();
    }
  });

  it("on a readmodel of 4 partitions every partition erases only the documents of its aggregates", async () => {
    const desk = helpdesk();
    const f = files.keep(createFacade({ appName: "helpdesk", ...stores() }));
    f.registerDomain(desk.D);
    const rm = new ErasedTickets(f, desk, 4);
    f.registerReadmodel(rm);
    await f.start();
    try {
      const opened = await openTickets(f, desk);
      for (const s of FORGOTTEN) await f.forget(s);
      expect((await f.scrubStorage()).behind).toEqual([]);
      await expectErasedInPlace(rm, opened);
      // Each forget reached the 4 partitions; each document was erased once (by its own partition).
      expect(rm.forgetSeenBy.sort()).toEqual([0, 0, 1, 1, 2, 2, 3, 3]);
      expect(rm.erasures.size).toBe(23 + 7 + 5);
      expect([...rm.erasures.values()].every((n) => n === 1)).toBe(true);
      // A restore from zero (every partition at once) erases the same documents again.
      await f.runtime.controlEventHandler({ action: "restore", eventHandlerName: rm.name, restoreFromZero: true });
      await expectErasedInPlace(rm, opened);
    } finally {
      await f.stop();
    }
  });
});

describe.each(worlds.filter(([n]) => n !== "memory"))("erasure in a SQL-table readmodel on %s", (_name, stores) => {
  it("an upsert by key in a SubjectForgotten handler updates the rows in their tenants", async () => {
    const desk = helpdesk();
    const f = files.keep(createFacade({ appName: "helpdesk", ...stores() }));
    f.registerDomain(desk.D);
    const rm = new SqlTickets(f, desk);
    f.registerReadmodel(rm);
    await f.start();
    try {
      await openTickets(f, desk);
      for (const s of FORGOTTEN) await f.forget(s);
      expect((await f.scrubStorage()).behind).toEqual([]);
      for (const tenant of TENANTS) {
        const rows = await rm.asTenant(tenant).listing();
        expect(rows.length, tenant).toBe(COUNTS[tenant][0]);
        const theirs = rows.filter((r) => FORGOTTEN.includes(r.customer));
        expect(theirs.length, tenant).toBe(COUNTS[tenant][1]);
        for (const r of theirs) expect([r.name, Number(r.edits)]).toEqual([ERASED, 1]);
      }
      expect(await rm.asTenant("").listing()).toEqual([]);
    } finally {
      await f.stop();
    }
  });
});

describe.each([
  [
    "sqlite",
    () => {
      const filename = files.newFile();
      return () => createSqliteBackends({ filename, pollIntervalMs: 20 });
    },
  ],
  [
    "postgres",
    () => {
      const schema = pg.newSchema();
      return () => createPostgresBackends({ pool: pg.pool, schema, pollIntervalMs: 20 });
    },
  ],
] as [string, () => () => FacadeOptions][])("erasure on a partitioned readmodel applied by two instances on %s", (_name, place) => {
  it("each instance erases the documents of the partitions it holds, every listing keeps its count", async () => {
    const stores = place();
    const desk = helpdesk();
    const start = async () => {
      const f = files.keep(createFacade({ appName: "helpdesk", ...stores() }));
      f.registerDomain(desk.D);
      const rm = new ErasedTickets(f, desk, 4);
      f.registerReadmodel(rm);
      await f.start();
      return { f, rm };
    };
    const a = await start();
    const b = await start();
    const running = (f: Facade) =>
      f.runtime
        .listEventHandlers()
        .find((h) => h.eventHandlerName === "PartitionedTickets")!
        .partitions!.filter((p) => p.state === "running").length;
    try {
      await until(() => running(a.f) === 2 && running(b.f) === 2, "two partitions each", 30_000);
      const opened = await openTickets(a.f, desk);
      for (const s of FORGOTTEN) await a.f.forget(s);
      const head = await a.f.eventRepository.headPosition();
      const passed = (f: Facade) =>
        f.runtime
          .listEventHandlers()
          .find((h) => h.eventHandlerName === "PartitionedTickets")!
          .partitions!.every((p) => p.lastPosition >= head);
      await until(() => passed(a.f) && passed(b.f), "both instances passed the forgets", 30_000);
      await expectErasedInPlace(a.rm, opened);
      // Each instance's partitions erased their own documents: together every document once, none twice.
      const erased = [...a.rm.erasures.keys(), ...b.rm.erasures.keys()];
      expect(a.rm.erasures.size > 0 && b.rm.erasures.size > 0).toBe(true);
      expect(new Set(erased).size).toBe(erased.length);
      expect(erased.length).toBe(23 + 7 + 5);
    } finally {
      await b.f.stop();
      await a.f.stop();
    }
  }, 90_000);
});

describe("a partitioned readmodel", () => {
  it("refuses a plain handler of SubjectForgotten: it would write documents other partitions own", () => {
    const desk = helpdesk();
    const f = createFacade({ appName: "helpdesk" });
    f.registerDomain(desk.D);
    class Bad extends BaseReadmodel {
      constructor() {
        super(f, withPartitions(4));
        this.domain = "Helpdesk";
        this.name = "Bad";
        this.addDomainEventHandler(SubjectForgotten, () => undefined);
      }
    }
    let error: unknown;
    try {
      new Bad();
    } catch (e) {
      error = e;
    }
    expect(isMnemeError(error, "INVALID_EVENT_HANDLER")).toBe(true);
    expect(String(error)).toContain("eraseSubjects");
  });
});
