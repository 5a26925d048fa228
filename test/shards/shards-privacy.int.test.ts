/**
 * Erasure on a sharded app (two shards, schemas of one Postgres database):
 * each shard keeps its own keys, so `app.forget` and `Runtime.ForgetSubject`
 * dispatched on the app erase the subject on every shard. A tenant's
 * administrator erases a subject whose events are all in its tenant, and is
 * denied when the subject has events in a tenant of another shard too (a
 * check of its own shard alone would not see them).
 */
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Authorizer, defineDomain, type Facade, MnemeError, newUuid, type RequestContext } from "mneme";
import { ForgetSubject } from "mneme/runtime";
import { createShardedApp, type ShardedApp } from "mneme/shards";
import { DATABASE_URL } from "../support/postgres-scratch.js";
import { rejection } from "../support/rejections.js";

interface Ticket {
  ticketUuid: string;
  customerUuid: string;
  customerEmail: string;
}

const D = defineDomain("Desk");
const personalData = { subject: (p: Ticket) => p.customerUuid, fields: ["customerEmail"] };
const Open = D.command<Ticket>("OpenTicket", { personalData });
const Opened = D.event<Ticket>("TicketOpened", { personalData });
D.aggregate<{ open: boolean }>("Ticket", { initialState: () => ({ open: false }), evolve: { TicketOpened: () => ({ open: true }) } });
D.handleCommand(Open, (_ctx, _c, p) => [Opened.create(p.ticketUuid, p)]);

const ADMIN: RequestContext = { senderAccountUuid: "acc-admin", senderSessionUuid: "s", senderIdentityUuid: "i", senderTenantUuid: "sys" };
const tenants = [newUuid(), newUuid()];
const adminOf = (t: string): RequestContext => ({
  senderAccountUuid: "acc-tadmin",
  senderSessionUuid: "s",
  senderIdentityUuid: "i",
  senderTenantUuid: t,
});
const userOf = (t: string): RequestContext => ({
  senderAccountUuid: "acc-user",
  senderSessionUuid: "s",
  senderIdentityUuid: "i",
  senderTenantUuid: t,
});
/** The system administrator may everything; a tenant's administrator Runtime.ForgetSubject in its tenant; users the rest. */
const authorizer: Authorizer = (reqCtx, permission) => {
  if (reqCtx.senderAccountUuid === ADMIN.senderAccountUuid) return undefined;
  if (permission.kind === "administrator") return new MnemeError("PERMISSION_DENIED", "system administrators only");
  if (permission.domain === "Runtime" && permission.type === "ForgetSubject" && reqCtx.senderAccountUuid !== "acc-tadmin")
    return new MnemeError("PERMISSION_DENIED", "not granted");
  return undefined;
};

const tag = newUuid().replace(/-/g, "").slice(-10);
const schemas = [`mneme_shpv_c_${tag}`, `mneme_shpv_a_${tag}`, `mneme_shpv_b_${tag}`];
const admin = new pg.Pool({ connectionString: DATABASE_URL, max: 2 });
let app: ShardedApp;

beforeAll(async () => {
  app = createShardedApp({
    control: { connectionString: DATABASE_URL, schema: schemas[0]! },
    shards: [
      { name: "a", connectionString: DATABASE_URL, schema: schemas[1]! },
      { name: "b", connectionString: DATABASE_URL, schema: schemas[2]! },
    ],
    configure: (f) => void f.registerDomain(D),
    facadeOptions: () => ({ authorizer }),
  });
  await app.start();
  await app.placeTenant(tenants[0]!, { shard: "a" });
  await app.placeTenant(tenants[1]!, { shard: "b" });
}, 60_000);

afterAll(async () => {
  await app?.stop();
  for (const s of schemas) await admin.query(`DROP SCHEMA IF EXISTS "${s}" CASCADE`);
  await admin.end();
});

/** Opens a ticket of `customerUuid` in tenant `t`; its uuid. */
async function open(t: string, customerUuid: string): Promise<string> {
  const ticketUuid = newUuid();
  await app.dispatch(Open, { ticketUuid, customerUuid, customerEmail: `${customerUuid}@example.org` }, { reqCtx: userOf(t) });
  return ticketUuid;
}

async function emailOn(f: Facade, ticketUuid: string): Promise<unknown> {
  return ((await f.eventRepository.loadAggregate(ticketUuid))[0]?.payload as Ticket).customerEmail;
}

describe("forget on a sharded app", () => {
  it("app.forget erases the subject on every shard", async () => {
    const a = await open(tenants[0]!, "cust-both");
    const b = await open(tenants[1]!, "cust-both");
    expect(await app.forget("cust-both")).toEqual({ keysDeleted: 2 });
    expect(await emailOn(app.shard("a"), a)).toBe("[erased]");
    expect(await emailOn(app.shard("b"), b)).toBe("[erased]");
  });

  it("Runtime.ForgetSubject of a system administrator erases on every shard, recorded on each", async () => {
    const a = await open(tenants[0]!, "cust-both-2");
    const b = await open(tenants[1]!, "cust-both-2");
    const r = await app.dispatch(ForgetSubject, { subjectUuid: "cust-both-2" }, { reqCtx: ADMIN });
    expect(r.result).toEqual({ keysDeleted: 2 });
    expect(await emailOn(app.shard("a"), a)).toBe("[erased]");
    expect(await emailOn(app.shard("b"), b)).toBe("[erased]");
    for (const name of ["a", "b"]) {
      const events = [];
      for await (const page of app.shard(name).eventRepository.readAll({ eventPaths: ["Privacy.SubjectForgotten"] })) events.push(...page);
      const mine = events.filter((e) => (e.payload as { subject: string }).subject === "cust-both-2");
      expect(
        mine.map((e) => [e.commandUuid, e.reqCtx.senderAccountUuid]),
        name,
      ).toEqual([[r.commandUuid, "acc-admin"]]);
    }
  });

  it("a tenant's administrator erases a subject of its tenant alone, on its shard; denied when another shard's tenant has events of it", async () => {
    const only = await open(tenants[1]!, "cust-only-b");
    const r = await app.dispatch(ForgetSubject, { subjectUuid: "cust-only-b" }, { reqCtx: adminOf(tenants[1]!) });
    expect(r.result).toEqual({ keysDeleted: 1 });
    expect(await emailOn(app.shard("b"), only)).toBe("[erased]");

    const a = await open(tenants[0]!, "cust-split");
    const b = await open(tenants[1]!, "cust-split");
    expect((await rejection(app.dispatch(ForgetSubject, { subjectUuid: "cust-split" }, { reqCtx: adminOf(tenants[1]!) }))).code).toBe(
      "PERMISSION_DENIED",
    );
    expect(await emailOn(app.shard("a"), a)).toBe("cust-split@example.org");
    expect(await emailOn(app.shard("b"), b)).toBe("cust-split@example.org");
    // A plain user is denied.
    expect((await rejection(app.dispatch(ForgetSubject, { subjectUuid: "cust-split" }, { reqCtx: userOf(tenants[1]!) }))).code).toBe(
      "PERMISSION_DENIED",
    );
  });
});
