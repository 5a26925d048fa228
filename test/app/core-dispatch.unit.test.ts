/**
 * facade.dispatch: what a failing command leaves behind (nothing appended, an
 * audit record with redacted secrets), what a succeeding one appends (uuid v7,
 * ns times, reqCtx copy, versions, positions, tenant), and atomicity across aggregates.
 */
import { describe, expect, it } from "vitest";
import {
  anonymous,
  type CommandType,
  defineDomain,
  type Facade,
  MnemeError,
  type MnemeErrorCode,
  type NewEvent,
  type RequestContext,
} from "mneme";
import { type CommandRecord } from "mneme/store";
import { REDACTED } from "mneme/runtime";
import { rejection } from "../support/rejections.js";
import { startedFacades } from "../support/started-facades.js";
import { MemoryEventRepository } from "mneme/memory";

const admin: RequestContext = {
  senderAccountUuid: "acc-1",
  senderSessionUuid: "ses-1",
  senderIdentityUuid: "idn-1",
  senderTenantUuid: "ten-1",
};

interface Deposit {
  accountUuid: string;
  amount: number;
  pin?: string;
  otherUuid?: string;
}
interface Deposited {
  amount: number;
}

function bankDomain() {
  const Bank = defineDomain("Bank");
  const Deposited = Bank.event<Deposited>("Deposited");
  const Account = Bank.aggregate<{ balance: number }>("Account", {
    initialState: () => ({ balance: 0 }),
    evolve: { Deposited: (s, p: Deposited) => ({ balance: s.balance + p.amount }) },
  });
  const Deposit = Bank.command<Deposit>("Deposit", { secretFields: ["pin"] });
  Bank.handleCommand(Deposit, (_ctx, _cmd, p) => [Deposited.create(p.accountUuid, { amount: p.amount })]);
  return { Bank, Deposited, Account, Deposit };
}

const started = startedFacades();

/** Dispatches a failing command and checks that nothing was appended and what the audit trail holds. */
async function expectFailure(
  f: Facade,
  type: CommandType<any, any> | { domain: string; name: string },
  payload: unknown,
  code: MnemeErrorCode,
  opts: { reqCtx?: RequestContext; status?: "failed" | "denied" | "unrecorded"; message?: RegExp; aggregate?: string } = {},
): Promise<{ error: MnemeError; record: CommandRecord | undefined }> {
  const headBefore = await f.eventRepository.headPosition();
  const commandUuid = `cmd-${Math.random().toString(36).slice(2)}`;
  const error = await rejection(f.dispatch(type as CommandType, payload, { reqCtx: opts.reqCtx ?? admin, commandUuid }));
  expect(error.code).toBe(code);
  if (opts.message !== undefined) expect(error.message).toMatch(opts.message);
  expect(error.message.length).toBeGreaterThan(10);
  expect(await f.eventRepository.headPosition()).toBe(headBefore);
  expect(f.headPosition).toBe(headBefore);
  if (opts.aggregate !== undefined) expect(await f.eventRepository.loadAggregate(opts.aggregate)).toEqual([]);
  const record = await f.commandStore.get(commandUuid);
  if (opts.status === "unrecorded") {
    expect(record).toBeUndefined();
  } else {
    expect(record).toMatchObject({ commandUuid, status: opts.status ?? "failed", eventUuids: [], error: { code, message: error.message } });
  }
  return { error, record };
}

describe("dispatch failures append nothing and are recorded", () => {
  it("UNKNOWN_COMMAND for an unknown token and an unknown { domain, name } ref (not recorded: there is no type to redact by)", async () => {
    const { Bank } = bankDomain();
    const f = await started((f) => f.registerDomain(Bank));
    const Stranger = defineDomain("Stranger").command("Do");
    await expectFailure(f, Stranger, {}, "UNKNOWN_COMMAND", { status: "unrecorded", message: /Stranger\.Do/ });
    await expectFailure(f, { domain: "Bank", name: "Withdraw" }, {}, "UNKNOWN_COMMAND", {
      status: "unrecorded",
      message: /Bank\.Withdraw/,
    });
    await expectFailure(f, { domain: "Nope", name: "Deposit" }, {}, "UNKNOWN_COMMAND", { status: "unrecorded" });
    // a query is not a command
    await expectFailure(f, { domain: "Runtime", name: "ListCommands" }, {}, "UNKNOWN_COMMAND", { status: "unrecorded" });
    await expectFailure(f, null as never, {}, "UNKNOWN_COMMAND", { status: "unrecorded" });
    expect((await f.commandStore.list()).items).toEqual([]);
  });

  it("a { domain, name } ref resolves to the registered command", async () => {
    const { Bank } = bankDomain();
    const f = await started((f) => f.registerDomain(Bank));
    const r = await f.dispatch({ domain: "Bank", name: "Deposit" }, { accountUuid: "a", amount: 1 }, { reqCtx: admin });
    expect(r.events.map((e) => e.name)).toEqual(["Deposited"]);
  });

  it("a command without a handler is UNKNOWN_COMMAND and recorded as failed", async () => {
    const D = defineDomain("D");
    const Orphan = D.command("Orphan");
    const f = await started((f) => f.registerDomain(D));
    await expectFailure(f, Orphan, {}, "UNKNOWN_COMMAND", { message: /no handler/ });
  });

  it.each([
    ["a string", "x"],
    ["null", null],
    ["an array", [1]],
    ["a number", 5],
    ["undefined", undefined],
    ["a Date", new Date(0)],
  ])("VALIDATION_FAILED when the payload is %s", async (_what, payload) => {
    const { Bank, Deposit } = bankDomain();
    const f = await started((f) => f.registerDomain(Bank));
    const { error } = await expectFailure(f, Deposit, payload, "VALIDATION_FAILED", { message: /Bank\.Deposit.*object/ });
    expect(error.details?.[0]).toMatchObject({ pointer: "" });
  });

  it("an empty aggregate id: INVALID_EVENTS from a returned event, INVALID_REQUEST from ctx.aggregates.load", async () => {
    const { Bank, Deposited, Account } = bankDomain();
    const EmptyEvent = Bank.command("EmptyEvent");
    Bank.handleCommand(EmptyEvent, () => [Deposited.create("", { amount: 1 })]);
    const EmptyLoad = Bank.command("EmptyLoad");
    Bank.handleCommand(EmptyLoad, async (ctx) => {
      await ctx.aggregates.load(Account, "");
      return [Deposited.create("a", { amount: 1 })];
    });
    const f = await started((f) => f.registerDomain(Bank));
    await expectFailure(f, EmptyEvent, {}, "INVALID_EVENTS", { message: /empty aggregateUuid/ });
    await expectFailure(f, EmptyLoad, {}, "INVALID_REQUEST", { message: /aggregateUuid/, aggregate: "a" });
  });

  it("a handler's MnemeError passes through unchanged; any other throw becomes HANDLER_FAILED with the cause", async () => {
    const { Bank, Deposited } = bankDomain();
    const own = new MnemeError("CONFLICT", "the account is closed");
    const plain = new TypeError("boom");
    const ThrowsOwn = Bank.command("ThrowsOwn");
    Bank.handleCommand(ThrowsOwn, async () => {
      throw own;
    });
    const ThrowsPlain = Bank.command("ThrowsPlain");
    Bank.handleCommand(ThrowsPlain, () => {
      // a synchronous throw after building events: none of them may be appended
      void Deposited.create("a", { amount: 1 });
      throw plain;
    });
    const ThrowsString = Bank.command("ThrowsString");
    Bank.handleCommand(ThrowsString, async () => {
      throw "just a string";
    });
    const f = await started((f) => f.registerDomain(Bank));
    const a = await expectFailure(f, ThrowsOwn, {}, "CONFLICT");
    expect(a.error).toBe(own);
    const b = await expectFailure(f, ThrowsPlain, {}, "HANDLER_FAILED", { message: /Bank\.ThrowsPlain.*boom/, aggregate: "a" });
    expect(b.error.cause).toBe(plain);
    const c = await expectFailure(f, ThrowsString, {}, "HANDLER_FAILED", { message: /just a string/ });
    expect(c.error.cause).toBe("just a string");
  });

  it.each<[string, unknown]>([
    ["a string", "Deposited"],
    ["a number", 1],
    ["a bare event (not in an array)", { domain: "Bank", name: "Deposited", aggregateUuid: "a", payload: { amount: 1 } }],
    ["an array with a non-event", [{ domain: "Bank", name: "Deposited", aggregateUuid: "a", payload: { amount: 1 } }, { hello: 1 }]],
    ["an array with null", [null]],
    ["an array with an event lacking payload", [{ domain: "Bank", name: "Deposited", aggregateUuid: "a" }]],
    ["{ events } that is not an array", { events: "nope" }],
    ["an object without events or result", { whatever: 1 }],
    ["an event whose aggregateUuid is not a string", [{ domain: "Bank", name: "Deposited", aggregateUuid: 7, payload: {} }]],
  ])("INVALID_EVENTS when the handler returns %s", async (_what, out) => {
    const { Bank } = bankDomain();
    const Bad = Bank.command("Bad");
    Bank.handleCommand(Bad, () => out as NewEvent[]);
    const f = await started((f) => f.registerDomain(Bank));
    await expectFailure(f, Bad, {}, "INVALID_EVENTS", { message: /Bank\.Bad/, aggregate: "a" });
  });

  it("INVALID_EVENTS for an event type that no registered domain defines, and nothing of the command is appended", async () => {
    const { Bank, Deposited } = bankDomain();
    const Unregistered = defineDomain("Ghost").event<{ x: number }>("Haunted");
    const Mixed = Bank.command("Mixed");
    Bank.handleCommand(Mixed, () => [Deposited.create("a", { amount: 1 }), Unregistered.create("a", { x: 1 })]);
    const f = await started((f) => f.registerDomain(Bank));
    await expectFailure(f, Mixed, {}, "INVALID_EVENTS", { message: /Ghost\.Haunted/, aggregate: "a" });
  });

  it("a denied command is recorded as denied, the handler never runs, secrets are redacted", async () => {
    const { Bank, Deposit } = bankDomain();
    const f = await started((f) => f.registerDomain(Bank));
    // A secret no generated value can contain (ids are hex, times digits), so the check below cannot fail by chance.
    const pin = "pin-zq 1234";
    const { record } = await expectFailure(f, Deposit, { accountUuid: "a", amount: 5, pin }, "PERMISSION_DENIED", {
      reqCtx: {},
      status: "denied",
      aggregate: "a",
    });
    expect(record!.payload).toEqual({ accountUuid: "a", amount: 5, pin: REDACTED });
    expect(JSON.stringify(await f.commandStore.list())).not.toContain(pin);
  });

  it("secret fields are redacted in failed and succeeded records alike; the handler still sees the secret", async () => {
    const Vault = defineDomain("Vault");
    const Opened = Vault.event<{ ok: boolean }>("Opened");
    const Open = Vault.command<{ vaultUuid: string; password: string; token?: string; note: string }>("Open", {
      secretFields: ["password", "token"],
    });
    const seen: string[] = [];
    Vault.handleCommand(Open, (_ctx, _cmd, p) => {
      seen.push(p.password);
      if (p.note === "fail") throw new Error("wrong password");
      return [Opened.create(p.vaultUuid, { ok: true })];
    });
    const f = await started((f) => f.registerDomain(Vault));
    await expectFailure(f, Open, { vaultUuid: "v", password: "hunter2", note: "fail" }, "HANDLER_FAILED");
    const ok = await f.dispatch(Open, { vaultUuid: "v", password: "hunter2", token: "tok", note: "ok" }, { reqCtx: admin });
    const rec = await f.commandStore.get(ok.commandUuid);
    expect(rec).toMatchObject({
      status: "succeeded",
      payload: { vaultUuid: "v", password: REDACTED, token: REDACTED, note: "ok" },
      eventUuids: [ok.events[0]!.eventUuid],
    });
    expect(rec!.error).toBeUndefined();
    expect(seen).toEqual(["hunter2", "hunter2"]);
    expect(JSON.stringify((await f.commandStore.list()).items)).not.toMatch(/hunter2|tok"/);
  });

  it("rejects a reqCtx that is not an object, a bad targetAggregateVersion and an empty commandUuid", async () => {
    const { Bank, Deposit } = bankDomain();
    const f = await started((f) => f.registerDomain(Bank));
    const e1 = await rejection(f.dispatch(Deposit, { accountUuid: "a", amount: 1 }, { reqCtx: "admin" as never }));
    expect(e1.code).toBe("INVALID_REQUEST");
    const e2 = await rejection(f.dispatch(Deposit, { accountUuid: "a", amount: 1 }, { reqCtx: admin, commandUuid: "" }));
    expect(e2.code).toBe("INVALID_REQUEST");
    for (const v of [-1, 1.5, "3", Number.NaN]) {
      const e3 = await rejection(
        f.dispatch(Deposit, { accountUuid: "a", amount: 1 }, { reqCtx: { ...admin, targetAggregateVersion: v as number } }),
      );
      expect(e3.code).toBe("INVALID_REQUEST");
      expect(e3.message).toMatch(/targetAggregateVersion/);
    }
    expect(await f.eventRepository.headPosition()).toBe(0);
  });

  it("a handler returning nothing, [] or { result } succeeds with no events and passes the result back (not stored)", async () => {
    const D = defineDomain("D");
    const Nothing = D.command("Nothing");
    D.handleCommand(Nothing, () => undefined);
    const Empty = D.command("Empty");
    D.handleCommand(Empty, () => []);
    const WithResult = D.command<object, { key: string }>("WithResult");
    D.handleCommand(WithResult, () => ({ result: { key: "session-key" } }));
    const f = await started((f) => f.registerDomain(D));
    for (const t of [Nothing, Empty]) {
      const r = await f.dispatch(t, {}, { reqCtx: admin });
      expect(r).toEqual({ commandUuid: r.commandUuid, events: [], handlerErrors: [] });
      expect((await f.commandStore.get(r.commandUuid))?.status).toBe("succeeded");
    }
    const r = await f.dispatch(WithResult, {}, { reqCtx: admin });
    expect(r.result).toEqual({ key: "session-key" });
    expect(JSON.stringify(await f.commandStore.get(r.commandUuid))).not.toContain("session-key");
  });
});

describe("events appended by dispatch", () => {
  it("carry a uuid v7, ns createdAt, a copy of reqCtx, the commandUuid, versions from 1 per aggregate and global positions", async () => {
    const { Bank, Deposited } = bankDomain();
    const Split = Bank.command<{ a: string; b: string }>("Split");
    Bank.handleCommand(Split, (_c, _m, p) => [
      Deposited.create(p.a, { amount: 1 }),
      Deposited.create(p.b, { amount: 2 }),
      Deposited.create(p.a, { amount: 3 }),
    ]);
    const f = await started((f) => f.registerDomain(Bank));
    const reqCtx: RequestContext = { ...admin, traceId: "trace-1", attributes: { ip: "127.0.0.1" } };
    const before = Date.now() * 1e6;
    const r1 = await f.dispatch(Split, { a: "A", b: "B" }, { reqCtx, commandUuid: "cmd-1" });
    const r2 = await f.dispatch(Split, { a: "A", b: "C" }, { reqCtx });
    const after = Date.now() * 1e6;
    reqCtx.traceId = "mutated after dispatch";

    const all = [...r1.events, ...r2.events];
    expect(all.map((e) => [e.aggregateUuid, e.version])).toEqual([
      ["A", 1],
      ["B", 1],
      ["A", 2],
      ["A", 3],
      ["C", 1],
      ["A", 4],
    ]);
    expect(all.map((e) => e.position)).toEqual([1, 2, 3, 4, 5, 6]);
    const uuids = new Set(all.map((e) => e.eventUuid));
    expect(uuids.size).toBe(6);
    for (const e of all) {
      expect(e.eventUuid).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
      expect(Number.isInteger(e.createdAt)).toBe(true);
      expect(e.createdAt).toBeGreaterThanOrEqual(before - 1e6);
      expect(e.createdAt).toBeLessThanOrEqual(after + 1e6);
      expect(e.reqCtx).toEqual({ ...admin, traceId: "trace-1", attributes: { ip: "127.0.0.1" } });
      expect(e.reqCtx).not.toBe(reqCtx);
      expect(e.tenantUuid).toBe("ten-1");
      expect(e.domain).toBe("Bank");
    }
    expect(r1.events.every((e) => e.commandUuid === "cmd-1")).toBe(true);
    expect(r2.events.every((e) => e.commandUuid === r2.commandUuid && e.commandUuid !== "cmd-1")).toBe(true);
    expect(r2.events[0]!.createdAt).toBeGreaterThan(r1.events[2]!.createdAt);
    // what dispatch returns is what the store holds
    expect(await f.eventRepository.loadAggregate("A")).toEqual([r1.events[0], r1.events[2], r2.events[0], r2.events[2]]);
    expect(f.headPosition).toBe(6);
    expect((await f.commandStore.get("cmd-1"))?.eventUuids).toEqual(r1.events.map((e) => e.eventUuid));
  });

  it("ignores a reqCtx or commandUuid a handler puts on its events: every event carries the command's", async () => {
    const { Bank, Deposited } = bankDomain();
    const Sneaky = Bank.command("Sneaky");
    Bank.handleCommand(Sneaky, () => [
      { ...Deposited.create("a", { amount: 1 }, { reqCtx: { senderAccountUuid: "someone-else" } }), commandUuid: "other" },
    ]);
    const f = await started((f) => f.registerDomain(Bank));
    const r = await f.dispatch(Sneaky, {}, { reqCtx: admin });
    expect(r.events[0]!.reqCtx).toEqual(admin);
    expect(r.events[0]!.commandUuid).toBe(r.commandUuid);
  });

  it("stores copies: neither the handler's payload object, the caller's payload and reqCtx nor the returned events can change what is stored", async () => {
    const { Bank, Deposited, Account } = bankDomain();
    const Echo = Bank.command<{ accountUuid: string; amount: number; nested: { tags: string[] } }>("Echo");
    // The handler hands the command payload itself to the event: the store must not keep the caller's object.
    Bank.handleCommand(Echo, (_c, _m, p) => [Deposited.create(p.accountUuid, p)]);
    const f = await started((f) => f.registerDomain(Bank));
    const reqCtx: RequestContext = { ...admin, attributes: { ip: "127.0.0.1" } };
    const payload = { accountUuid: "acc-copy", amount: 5, nested: { tags: ["a"] } };
    const r = await f.dispatch(Echo, payload, { reqCtx });

    payload.amount = 1_000;
    payload.nested.tags.push("mutated");
    (reqCtx.attributes as Record<string, unknown>).ip = "mutated";
    const returned = r.events[0]!;
    expect(() => {
      (returned.payload as { amount: number }).amount = 2_000;
    }).toThrow(TypeError);
    expect(() => {
      (returned.payload as { nested: { tags: string[] } }).nested.tags.push("x");
    }).toThrow(TypeError);
    expect(() => {
      (returned.reqCtx.attributes as Record<string, unknown>).ip = "x";
    }).toThrow(TypeError);

    const [stored] = await f.eventRepository.loadAggregate("acc-copy");
    expect(stored!.payload).toEqual({ accountUuid: "acc-copy", amount: 5, nested: { tags: ["a"] } });
    expect(stored!.reqCtx.attributes).toEqual({ ip: "127.0.0.1" });
    expect((await f.loadAggregate(Account, "acc-copy", { tenantUuid: "ten-1" })).state).toEqual({ balance: 5 });
    const record = await f.commandStore.get(r.commandUuid);
    expect(record?.payload).toEqual({ accountUuid: "acc-copy", amount: 5, nested: { tags: ["a"] } });
    expect(record?.reqCtx.attributes).toEqual({ ip: "127.0.0.1" });
  });

  it.each<[string, RequestContext, string]>([
    ["target tenant wins", { ...admin, targetTenantUuid: "t-target" }, "t-target"],
    ["sender tenant when no target", { senderTenantUuid: "t-sender" }, "t-sender"],
    ["target without sender", { targetTenantUuid: "t-target" }, "t-target"],
    ["empty string when neither", {}, ""],
  ])('tenantUuid = targetTenantUuid ?? senderTenantUuid ?? "": %s', async (_what, reqCtx, tenant) => {
    const Pub = defineDomain("Pub");
    const Said = Pub.event<object>("Said");
    const Say = Pub.command("Say", { permission: anonymous });
    Pub.handleCommand(Say, () => [Said.create("x", {})]);
    const f = await started((f) => f.registerDomain(Pub));
    const r = await f.dispatch(Say, {}, { reqCtx });
    expect(r.events[0]!.tenantUuid).toBe(tenant);
    expect((await f.commandStore.get(r.commandUuid))?.tenantUuid).toBe(tenant);
  });

  it("dispatch without reqCtx gives events an empty reqCtx (anonymous command)", async () => {
    const Pub = defineDomain("Pub");
    const Said = Pub.event<object>("Said");
    const Say = Pub.command("Say", { permission: anonymous });
    Pub.handleCommand(Say, () => [Said.create("x", {})]);
    const f = await started((f) => f.registerDomain(Pub));
    const r = await f.dispatch(Say, {});
    expect(r.events[0]).toMatchObject({ reqCtx: {}, tenantUuid: "" });
  });
});

describe("atomicity", () => {
  it("a command emitting events for two aggregates where one conflicts writes nothing", async () => {
    const { Bank, Deposited, Account } = bankDomain();
    const Transfer = Bank.command<{ from: string; to: string }>("Transfer");
    let interfere: (() => Promise<void>) | undefined;
    Bank.handleCommand(Transfer, async (ctx, _c, p) => {
      await ctx.aggregates.load(Account, p.from);
      await ctx.aggregates.load(Account, p.to);
      await interfere?.();
      return [Deposited.create(p.from, { amount: -5 }), Deposited.create(p.to, { amount: 5 })];
    });
    const repo = new MemoryEventRepository();
    const f = await started((f) => f.registerDomain(Bank), { eventRepository: repo });
    await f.dispatch(Transfer, { from: "X", to: "Y" }, { reqCtx: admin });
    // another writer (e.g. another process) moves Y between load and append
    interfere = async () => {
      await repo.append([Deposited.create("Y", { amount: 100 }, { tenantUuid: admin.senderTenantUuid! })]);
    };
    const head = await repo.headPosition();
    const e = await rejection(f.dispatch(Transfer, { from: "X", to: "Y" }, { reqCtx: admin }));
    expect(e.code).toBe("CONFLICT");
    expect(await repo.headPosition()).toBe(head + 1); // only the interfering event
    expect((await repo.loadAggregate("X")).map((ev) => ev.version)).toEqual([1]);
    expect((await repo.loadAggregate("Y")).map((ev) => ev.payload)).toEqual([{ amount: 5 }, { amount: 100 }]);
    expect((await f.loadAggregate(Account, "X")).state.balance).toBe(-5);
  });

  it("a given version that is taken gives CONFLICT and nothing of the command is written", async () => {
    const { Bank, Deposited } = bankDomain();
    const Versioned = Bank.command("Versioned");
    Bank.handleCommand(Versioned, () => [Deposited.create("N", { amount: 1 }), Deposited.create("M", { amount: 1 }, { version: 1 })]);
    const f = await started((f) => f.registerDomain(Bank));
    await f.dispatch(Versioned, {}, { reqCtx: admin });
    await expectFailure(f, Versioned, {}, "CONFLICT");
    expect((await f.eventRepository.loadAggregate("N")).length).toBe(1);
  });
});
