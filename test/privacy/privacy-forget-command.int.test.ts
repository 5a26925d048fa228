/**
 * `Runtime.ForgetSubject { subjectUuid }` on memory, SQLite (a file) and
 * Postgres: a system administrator erases any subject; a tenant's
 * administrator (a group of its tenant holds Runtime.ForgetSubject) a subject
 * whose events are all in its tenant, and is PERMISSION_DENIED for a subject
 * with events in another tenant too, or none in its own; a plain user and an
 * anonymous caller are denied. A denial erases nothing. The SubjectForgotten
 * event records who asked and the command. Over HTTP through the generic
 * command route as well, and `mneme privacy forget` on a SQLite file.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createFacade, defineDomain, type Event, type Facade, type FacadeOptions, newUuid, type RequestContext } from "mneme";
import { accountRoutes, registerDefaults, SubjectForgotten } from "mneme/defaults";
import { createHttpHandler, type HttpHandler } from "mneme/http";
import { ForgetSubject } from "mneme/runtime";
import { createSqliteBackends } from "mneme/sqlite";
import { ADMIN_EMAIL, ADMIN_PASSWORD, FAST_HASHING, FakeClock, type Session, World } from "../support/defaults-world.js";
import { rejection } from "../support/rejections.js";
import { runProcess } from "../support/run-process.js";
import { sharedPlaces } from "../support/shared-places.js";
import { signups } from "../support/signups-app.js";
import { sqliteScratch } from "../support/sqlite-scratch.js";

interface Ticket {
  ticketUuid: string;
  customerUuid: string;
  customerEmail: string;
}

function helpdesk() {
  const D = defineDomain("Helpdesk");
  const personalData = { subject: (p: Ticket) => p.customerUuid, fields: ["customerEmail"] };
  const Open = D.command<Ticket>("OpenTicket", { personalData });
  const Opened = D.event<Ticket>("TicketOpened", { personalData });
  D.handleCommand(Open, (_ctx, _c, p) => [Opened.create(p.ticketUuid, p)]);
  return { D, Open, Opened };
}

interface Setup {
  f: Facade;
  desk: ReturnType<typeof helpdesk>;
  http: HttpHandler;
  admin: Session;
  adminA: Session;
  userA: Session;
  userB: Session;
  tenantA: string;
  tenantB: string;
}

async function setUp(stores: Partial<FacadeOptions>): Promise<Setup> {
  const desk = helpdesk();
  const clock = new FakeClock();
  const f = createFacade({ appName: "forget", ...stores });
  const ids = await registerDefaults(f, {
    admin: { email: ADMIN_EMAIL, password: ADMIN_PASSWORD, name: "Ada Admin" },
    passwordHashing: FAST_HASHING,
    clock: clock.fn,
  });
  f.registerDomain(desk.D);
  await f.start();
  const admin = await new World(f, ids, clock, {}).login(ADMIN_EMAIL, ADMIN_PASSWORD, ids.adminIdentityUuid);
  const world = new World(f, ids, clock, admin.reqCtx);
  const tenantA = await world.createTenant("A");
  const tenantB = await world.createTenant("B");
  const adminA = await world.member("admin-a@example.org", tenantA, ["Runtime.ForgetSubject", "Helpdesk.*"]);
  const userA = await world.member("user-a@example.org", tenantA, ["Helpdesk.*"]);
  const userB = await world.member("user-b@example.org", tenantB, ["Helpdesk.*"]);
  return { f, desk, http: createHttpHandler(f, { modules: [accountRoutes()] }), admin, adminA, userA, userB, tenantA, tenantB };
}

/** Opens a ticket of `customerUuid` as `who`; returns its uuid. */
async function open(s: Setup, who: Session, customerUuid: string): Promise<string> {
  const ticketUuid = newUuid();
  await s.f.dispatch(s.desk.Open, { ticketUuid, customerUuid, customerEmail: `${customerUuid}@example.org` }, { reqCtx: who.reqCtx });
  return ticketUuid;
}

async function emailOf(s: Setup, ticketUuid: string): Promise<unknown> {
  const events = await s.f.eventRepository.loadAggregate(ticketUuid);
  return (events[0] as Event<Ticket>).payload.customerEmail;
}

async function forgottenEvents(f: Facade): Promise<Event[]> {
  const out: Event[] = [];
  for await (const page of f.eventRepository.readAll({ eventPaths: [SubjectForgotten.path] })) out.push(...page);
  return out;
}

const anonymous: RequestContext = {};

describe.each(sharedPlaces("forget_command"))("Runtime.ForgetSubject on %s", (_name, place) => {
  let s: Setup;
  beforeAll(async () => {
    s = await setUp(place()());
  }, 60_000);
  afterAll(async () => {
    await s?.f.stop();
  });

  const forget = (who: RequestContext, subjectUuid: string) => s.f.dispatch(ForgetSubject, { subjectUuid }, { reqCtx: who });

  it("a tenant's administrator erases a subject whose events are all in its tenant; the event records who asked", async () => {
    const t = await open(s, s.userA, "cust-only-a");
    const r = await forget(s.adminA.reqCtx, "cust-only-a");
    expect(r.result).toEqual({ keysDeleted: 1 });
    expect(await emailOf(s, t)).toBe("[erased]");
    const [e] = (await forgottenEvents(s.f)).filter((x) => (x.payload as { subject: string }).subject === "cust-only-a");
    expect(e!.reqCtx?.senderAccountUuid).toBe(s.adminA.reqCtx.senderAccountUuid);
    expect(e!.reqCtx?.senderIdentityUuid).toBe(s.adminA.reqCtx.senderIdentityUuid);
    expect(e!.commandUuid).toBe(r.commandUuid);
  });

  it("a tenant's administrator is PERMISSION_DENIED for a subject with events in another tenant too, or none in its own", async () => {
    const a = await open(s, s.userA, "cust-ab");
    const b = await open(s, s.userB, "cust-ab");
    const denied = await rejection(forget(s.adminA.reqCtx, "cust-ab"));
    expect(denied.code).toBe("PERMISSION_DENIED");
    expect(denied.message).toContain("other tenants");
    expect(await emailOf(s, a)).toBe("cust-ab@example.org");
    expect(await emailOf(s, b)).toBe("cust-ab@example.org");
    // Only in tenant B, and no events at all.
    await open(s, s.userB, "cust-only-b");
    expect((await rejection(forget(s.adminA.reqCtx, "cust-only-b"))).code).toBe("PERMISSION_DENIED");
    expect((await rejection(forget(s.adminA.reqCtx, "cust-nobody"))).code).toBe("PERMISSION_DENIED");
    // Aiming at tenant B from tenant A changes nothing.
    const aimed = { ...s.adminA.reqCtx, targetTenantUuid: s.tenantB };
    expect((await rejection(forget(aimed, "cust-only-b"))).code).toBe("PERMISSION_DENIED");
    // An account is a subject of no tenant (its events have none): a system administrator's.
    expect((await rejection(forget(s.adminA.reqCtx, s.userA.reqCtx.senderAccountUuid!))).code).toBe("PERMISSION_DENIED");
  });

  it("a system administrator erases a subject of several tenants", async () => {
    const a = await open(s, s.userA, "cust-ab2");
    const b = await open(s, s.userB, "cust-ab2");
    const r = await forget(s.admin.reqCtx, "cust-ab2");
    expect(r.result).toEqual({ keysDeleted: 1 });
    expect(await emailOf(s, a)).toBe("[erased]");
    expect(await emailOf(s, b)).toBe("[erased]");
  });

  it("a plain user and an anonymous caller are PERMISSION_DENIED, and nothing is erased", async () => {
    const t = await open(s, s.userA, "cust-plain");
    expect((await rejection(forget(s.userA.reqCtx, "cust-plain"))).code).toBe("PERMISSION_DENIED");
    expect((await rejection(forget(anonymous, "cust-plain"))).code).toBe("PERMISSION_DENIED");
    expect(await emailOf(s, t)).toBe("cust-plain@example.org");
  });

  it("checks its payload: a missing or empty subjectUuid is VALIDATION_FAILED", async () => {
    expect((await rejection(s.f.dispatch(ForgetSubject, {} as never, { reqCtx: s.admin.reqCtx }))).code).toBe("VALIDATION_FAILED");
    expect((await rejection(forget(s.admin.reqCtx, ""))).code).toBe("VALIDATION_FAILED");
  });

  it("over HTTP through the generic command route: 200 for the tenant's administrator, 403 for a plain user", async () => {
    const t = await open(s, s.userA, "cust-http");
    const post = (who: Session, subjectUuid: string) =>
      s.http(
        new Request(`http://127.0.0.1/api/tenants/${s.tenantA}/commands/Runtime/ForgetSubject`, {
          method: "POST",
          headers: {
            "content-type": "application/json",
            "x-identity-uuid": who.reqCtx.senderIdentityUuid!,
            authorization: `Bearer ${who.login.sessionUuid}.${who.login.sessionKey}`,
          },
          body: JSON.stringify({ subjectUuid }),
        }),
      );
    const plain = await post(s.userA, "cust-http");
    expect(plain.status).toBe(403);
    expect(await emailOf(s, t)).toBe("cust-http@example.org");
    const ok = await post(s.adminA, "cust-http");
    expect(ok.status).toBe(200);
    expect(((await ok.json()) as { result: unknown }).result).toEqual({ keysDeleted: 1 });
    expect(await emailOf(s, t)).toBe("[erased]");
    const anon = await s.http(
      new Request(`http://127.0.0.1/api/tenants/${s.tenantA}/commands/Runtime/ForgetSubject`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ subjectUuid: "cust-http" }),
      }),
    );
    expect([401, 403]).toContain(anon.status);
  });
});

describe("mneme privacy forget --app <module> <subject>", () => {
  const scratch = sqliteScratch("forget-cli");

  it("erases the subject in the app's SQLite file, records the tool as the actor, and refuses bad usage", async () => {
    const file = scratch.newFile();
    const write = createFacade({ appName: "signups", ...createSqliteBackends({ filename: file }) });
    const { D, SignUp } = signups(true);
    write.registerDomain(D);
    await write.start();
    await write.dispatch(SignUp, { personUuid: "person-1", email: "one@example.org", plan: "free" });
    await write.dispatch(SignUp, { personUuid: "person-2", email: "two@example.org", plan: "free" });
    await write.stop();

    process.env.SIGNUPS_FILE = file;
    const root = new URL("../..", import.meta.url).pathname;
    const cli = (...args: string[]) => runProcess("npx", ["tsx", "src/cli/main.ts", "privacy", ...args], root, 90_000);
    const done = await cli("forget", "--app", "test/support/signups-app.ts", "person-1");
    expect(done.code, done.stderr).toBe(0);
    expect(JSON.parse(done.stdout)).toEqual({ keysDeleted: 1 });

    const read = scratch.keep(createFacade({ appName: "signups", ...createSqliteBackends({ filename: file }) }));
    read.registerDomain(signups(true).D);
    await read.start();
    const emails = async (personUuid: string) =>
      (await read.eventRepository.loadAggregate(personUuid)).map((e) => (e.payload as { email: unknown }).email);
    expect(await emails("person-1")).toEqual(["[erased]"]);
    expect(await emails("person-2")).toEqual(["two@example.org"]);
    const [forgotten] = await forgottenEvents(read);
    expect(forgotten!.payload).toEqual({ subject: "person-1", keysDeleted: 1 });
    expect(forgotten!.reqCtx.attributes).toMatchObject({ erasedBy: "mneme privacy forget" });
    await read.stop();

    for (const args of [
      ["forget", "person-1"],
      ["forget", "--app", "test/support/signups-app.ts"],
      ["forget", "--app", "x", "a", "b"],
    ]) {
      const usage = await cli(...args);
      expect(usage.code, args.join(" ")).toBe(2);
    }
    // A subject forget refuses (mneme's own keys): exit 1 with the reason.
    const refused = await cli("forget", "--app", "test/support/signups-app.ts", "mneme:email-index");
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain("mneme:");
  }, 180_000);
});
