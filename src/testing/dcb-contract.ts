import { expect } from "vitest";
import { createFacade, type Facade, type FacadeOptions } from "../app/facade.js";
import { newUuid, nowNs } from "../model/clock.js";
import { defineDomain } from "../model/domain.js";
import { isMnemeError, type MnemeError } from "../model/errors.js";
import { anonymous } from "../model/permission.js";
import type { Event, RequestContext } from "../model/types.js";
import { defineContract, deferred, expectRejectsWith } from "./contract-harness.js";
import { DCB_RULE_BROKEN, dcbExamples, type DcbExamples } from "./dcb-examples.js";
import { testReqCtx } from "./test-facade.js";

/** A started facade with the dcb.events examples and the suite's own probes, on the backend under test. */
export interface DcbWorld {
  readonly facade: Facade;
  readonly examples: DcbExamples;
  readonly probes: DcbProbes;
  /** The examples' clock (ns); `advance` moves it. */
  readonly clock: { now: number; advance(ms: number): void };
  init(): Promise<void>;
  close(): Promise<void>;
}

/** Commands whose handlers the tests hold between their read and their append. */
function dcbProbes() {
  const Probe = defineDomain("DcbProbe", { description: "Held decisions of the DCB conformance suite" });
  const Tagged = Probe.event<{ tags: string[]; note?: string }>("Tagged", {
    tags: (p) => p.tags,
    schema: { type: "object", properties: { tags: {}, note: { type: "string" } }, required: ["tags"] },
  });
  const Other = Probe.event<{ tags: string[] }>("Other", { tags: (p) => p.tags });
  const Untagged = Probe.event<{ n: number }>("Untagged");
  const Secret = Probe.event<{ email: string; tag: string }>("Secret", {
    tags: (p) => [p.tag],
    personalData: { subject: () => "subject-1", fields: ["email"] },
  });
  const Counted = Probe.event<{ n: number }>("Counted", { schema: { type: "object", properties: { n: { type: "number" } } } });
  const Counter = Probe.aggregate<number>("Counter", { initialState: () => 0, evolve: { Counted: (s: number) => s + 1 } });
  const Append = Probe.command<{ tags: string[]; other?: boolean; note?: string }>("Append", { permission: anonymous });
  /** Appends a Tagged event with `given.tags` as its tags (any value: they are not a command payload). */
  const AppendRaw = Probe.command<Record<string, never>>("AppendRaw", { permission: anonymous });
  const AppendSecret = Probe.command<{ email: string; tag: string }>("AppendSecret", { permission: anonymous });
  const Count = Probe.command<{ counterUuid: string }>("Count", { permission: anonymous });
  /** Reads `queries` (each a list of items of tags, Tagged events when `typed`), waits for `hold`, then appends a Tagged event. */
  const Decide = Probe.command<{
    queries: { items: { tags?: string[]; typed?: boolean; other?: boolean }[]; check?: boolean }[];
    counterUuid?: string;
    appendTags: string[];
  }>("Decide", { permission: anonymous });
  /** Reads `given.query` (any value). */
  const Query = Probe.command<Record<string, never>>("Query", { permission: anonymous });
  const given: { query: unknown; tags: unknown } = { query: undefined, tags: undefined };
  const hold = { next: undefined as undefined | { reached: () => void; release: Promise<void> } };
  const read: { events: Event[]; position: number }[] = [];

  const register = (facade: Facade): void => {
    facade.registerDomain(Probe, (d) => {
      d.handleCommand(Append, (_ctx, _c, p) => [
        p.other === true
          ? Other.create(newUuid(), { tags: p.tags })
          : Tagged.create(newUuid(), { tags: p.tags, ...(p.note === undefined ? {} : { note: p.note }) }),
      ]);
      d.handleCommand(AppendRaw, () => [Tagged.create(newUuid(), { tags: given.tags as string[] })]);
      d.handleCommand(AppendSecret, (_ctx, _c, p) => [Secret.create(newUuid(), p)]);
      d.handleCommand(Count, (_ctx, _c, p) => [Counted.create(p.counterUuid, { n: 1 })]);
      d.handleCommand(Query, async (ctx) => {
        await ctx.events.read(given.query as never);
        return [];
      });
      d.handleCommand(Decide, async (ctx, _c, p) => {
        if (p.counterUuid !== undefined) await ctx.aggregates.load(Counter, p.counterUuid);
        for (const q of p.queries) {
          const items = q.items.map((i) => ({
            ...(i.tags === undefined ? {} : { tags: i.tags }),
            ...(i.typed === true ? { types: [i.other === true ? Other : Tagged] } : {}),
          }));
          read.push(await ctx.events.read({ items }, q.check === undefined ? undefined : { check: q.check }));
        }
        const h = hold.next;
        if (h !== undefined) {
          hold.next = undefined;
          h.reached();
          await h.release;
        }
        return [Tagged.create(newUuid(), { tags: p.appendTags })];
      });
    });
  };
  return { register, Tagged, Other, Untagged, Secret, Counted, Append, AppendRaw, AppendSecret, Count, Decide, Query, hold, read, given };
}

/** What {@link dcbProbes} returns. */
export type DcbProbes = ReturnType<typeof dcbProbes>;

/**
 * A world for the suite on the backend `backendOptions` gives (facade
 * options: `backend`, or the spread stores; called once per test, so each
 * test gets a fresh store). Exported for tests that race several instances.
 */
export function dcbWorld(backendOptions: Partial<FacadeOptions>, opts: { maxCoursesPerStudent?: number } = {}): DcbWorld {
  const clock = {
    now: nowNs(),
    advance(ms: number) {
      this.now += ms * 1e6;
    },
  };
  const examples = dcbExamples({ maxCoursesPerStudent: opts.maxCoursesPerStudent ?? 3, priceGraceMs: 60_000, now: () => clock.now });
  const probes = dcbProbes();
  const facade = createFacade({ appName: "mneme-dcb-contract", ...backendOptions });
  examples.register(facade);
  probes.register(facade);
  return { facade, examples, probes, clock, init: () => facade.start(), close: () => facade.stop() };
}

const reqCtx: RequestContext = testReqCtx;
const inTenant = (tenant: string): RequestContext => ({ ...testReqCtx, senderTenantUuid: tenant });

/** The stored events of `path` (every tenant), in position order. */
async function stored(w: DcbWorld, path?: string): Promise<Event[]> {
  const out: Event[] = [];
  for await (const page of w.facade.eventRepository.readAll()) {
    for (const e of page) if (path === undefined || `${e.domain}.${e.name}` === path) out.push(e);
  }
  return out;
}

function codeOf(r: PromiseSettledResult<unknown>): string {
  if (r.status === "fulfilled") return "ok";
  return isMnemeError(r.reason) ? r.reason.code : String(r.reason);
}

/** Dispatches with retries on CONFLICT (the decision is read again): what a client does. */
async function withRetries<T>(call: () => Promise<T>, attempts = 50): Promise<T> {
  for (let i = 1; ; i++) {
    try {
      return await call();
    } catch (e) {
      if (!isMnemeError(e, "CONFLICT") || i >= attempts) throw e;
    }
  }
}

/**
 * The conformance suite of dynamic consistency boundaries (`ctx.events`,
 * tags, append conditions) on a backend, built from the dcb.events examples:
 * course subscriptions with both limits, unique usernames released by
 * closing the account, consecutive invoice numbers, opt-in tokens used once,
 * prices honoured for a while; and the rules of the condition itself (held
 * decisions, tenants, validation, aggregates beside queries).
 * @example
 * describeDcbContract("sqlite", async () => dcbWorld({ backend: createSqliteBackends({ filename }) }));
 */
export const describeDcbContract = defineContract<DcbWorld>("DCB contract", (test) => {
  test("course subscriptions: the course's capacity and the student's limit both hold", async (w) => {
    const { DefineCourse, Subscribe, Unsubscribe } = w.examples.commands;
    await w.facade.dispatch(DefineCourse, { courseId: "c1", capacity: 2 }, { reqCtx });
    await w.facade.dispatch(Subscribe, { studentId: "s1", courseId: "c1" }, { reqCtx });
    await w.facade.dispatch(Subscribe, { studentId: "s2", courseId: "c1" }, { reqCtx });
    await expectRejectsWith(() => w.facade.dispatch(Subscribe, { studentId: "s3", courseId: "c1" }, { reqCtx }), DCB_RULE_BROKEN as never);
    await w.facade.dispatch(Unsubscribe, { studentId: "s1", courseId: "c1" }, { reqCtx });
    await w.facade.dispatch(Subscribe, { studentId: "s3", courseId: "c1" }, { reqCtx });
    for (const c of ["k1", "k2", "k3", "k4"]) await w.facade.dispatch(DefineCourse, { courseId: c, capacity: 10 }, { reqCtx });
    for (const c of ["k1", "k2", "k3"]) await w.facade.dispatch(Subscribe, { studentId: "s9", courseId: c }, { reqCtx });
    const e = await expectRejectsWith(
      () => w.facade.dispatch(Subscribe, { studentId: "s9", courseId: "k4" }, { reqCtx }),
      DCB_RULE_BROKEN as never,
    );
    expect(e.message).toContain("3 courses");
    await w.facade.dispatch(Unsubscribe, { studentId: "s9", courseId: "k2" }, { reqCtx });
    await w.facade.dispatch(Subscribe, { studentId: "s9", courseId: "k4" }, { reqCtx });
  });

  test("concurrent subscriptions never over-subscribe a course; the others are CONFLICT or refused", async (w) => {
    const { DefineCourse, Subscribe } = w.examples.commands;
    await w.facade.dispatch(DefineCourse, { courseId: "hot", capacity: 3 }, { reqCtx });
    const results = await Promise.allSettled(
      Array.from({ length: 10 }, (_, i) => w.facade.dispatch(Subscribe, { studentId: `st${i}`, courseId: "hot" }, { reqCtx })),
    );
    const codes = results.map(codeOf);
    expect(codes.filter((c) => c === "ok").length).toBeLessThanOrEqual(3);
    for (const c of codes) expect(["ok", "CONFLICT", "DCB_RULE_BROKEN"]).toContain(c);
    // Retried until decided: exactly the capacity is subscribed.
    const retried = await Promise.allSettled(
      codes.map((c, i) =>
        c === "CONFLICT"
          ? withRetries(() => w.facade.dispatch(Subscribe, { studentId: `st${i}`, courseId: "hot" }, { reqCtx }))
          : Promise.resolve(),
      ),
    );
    for (const r of retried) expect(["ok", "DCB_RULE_BROKEN"]).toContain(codeOf(r));
    const subscribed = (await stored(w, "Courses.StudentSubscribed")).filter((e) => (e.payload as { courseId: string }).courseId === "hot");
    expect(subscribed).toHaveLength(3);
  });

  test("a decision held after its read fails with CONFLICT when a matching event is appended meanwhile, and writes nothing", async (w) => {
    const { Append, Decide, hold } = w.probes;
    await w.facade.dispatch(Append, { tags: ["room:1"] }, { reqCtx });
    const reached = deferred();
    const release = deferred();
    hold.next = { reached: reached.resolve, release: release.promise };
    const before = (await stored(w)).length;
    const deciding = w.facade.dispatch(
      Decide,
      { queries: [{ items: [{ tags: ["room:2"] }, { tags: ["room:1"], typed: true }] }], appendTags: ["booking:x"] },
      { reqCtx },
    );
    await reached.promise;
    await w.facade.dispatch(Append, { tags: ["room:1", "floor:3"] }, { reqCtx });
    release.resolve();
    const e = (await expectRejectsWith(() => deciding, "CONFLICT")) as MnemeError;
    expect(e.details?.[0]).toMatchObject({ query: 0, item: 1 });
    const after = await stored(w);
    expect(after).toHaveLength(before + 1);
    expect(after.some((x) => (x.payload as { tags?: string[] }).tags?.includes("booking:x") === true)).toBe(false);
  });

  test("an event that does not match (other tag, other type, other tenant) leaves the held decision to succeed", async (w) => {
    const { Append, Decide, hold } = w.probes;
    const reached = deferred();
    const release = deferred();
    hold.next = { reached: reached.resolve, release: release.promise };
    const deciding = w.facade.dispatch(
      Decide,
      { queries: [{ items: [{ tags: ["room:1", "floor:3"], typed: true }] }], appendTags: ["booking:y"] },
      { reqCtx },
    );
    await reached.promise;
    await w.facade.dispatch(Append, { tags: ["room:1"] }, { reqCtx }); // lacks floor:3
    await w.facade.dispatch(Append, { tags: ["room:1", "floor:3"], other: true }, { reqCtx }); // another type
    await w.facade.dispatch(Append, { tags: ["room:1", "floor:3"] }, { reqCtx: inTenant("another-tenant") });
    release.resolve();
    const done = await deciding;
    expect(done.events).toHaveLength(1);
  });

  test("{ check: false } opts out; with several reads every condition holds and the details name the read", async (w) => {
    const { Append, Decide, hold } = w.probes;
    for (const [check, expectCode] of [
      [false, "ok"],
      [true, "CONFLICT"],
    ] as const) {
      const reached = deferred();
      const release = deferred();
      hold.next = { reached: reached.resolve, release: release.promise };
      const deciding = w.facade.dispatch(
        Decide,
        { queries: [{ items: [{ tags: ["a:1"] }] }, { items: [{ tags: [`b:${String(check)}`] }], check }], appendTags: ["c:1"] },
        { reqCtx },
      );
      await reached.promise;
      await w.facade.dispatch(Append, { tags: [`b:${String(check)}`] }, { reqCtx });
      release.resolve();
      const [r] = await Promise.allSettled([deciding]);
      expect(codeOf(r!)).toBe(expectCode);
      if (expectCode === "CONFLICT")
        expect(((r as PromiseRejectedResult).reason as MnemeError).details?.[0]).toMatchObject({ query: 1, item: 0 });
    }
  });

  test("a query that matched nothing is guarded from the head it was read at", async (w) => {
    const { Append, Decide, hold } = w.probes;
    await w.facade.dispatch(Append, { tags: ["noise:1"] }, { reqCtx });
    const reached = deferred();
    const release = deferred();
    hold.next = { reached: reached.resolve, release: release.promise };
    const deciding = w.facade.dispatch(Decide, { queries: [{ items: [{ tags: ["fresh:1"] }] }], appendTags: ["z:1"] }, { reqCtx });
    await reached.promise;
    const seen = w.probes.read[w.probes.read.length - 1]!;
    expect(seen.events).toHaveLength(0);
    expect(seen.position).toBeGreaterThanOrEqual(1);
    await w.facade.dispatch(Append, { tags: ["fresh:1"] }, { reqCtx });
    release.resolve();
    await expectRejectsWith(() => deciding, "CONFLICT");
  });

  test("appends sent together (one commit where the store groups them) are checked in order against each other", async (w) => {
    const repo = w.facade.eventRepository;
    const tenantUuid = "t-group";
    const head = await repo.headPosition();
    const tagged = (tags: string[]) => ({ ...w.probes.Tagged.create(newUuid(), { tags }), tenantUuid, tags });
    const guard = (tag: string) => ({ conditions: [{ tenantUuid, items: [{ tags: [tag] }], after: head }] });
    // Sent in one tick: the first writes g:1; the second and fourth are guarded by it, the third by a tag no one writes.
    // The last writes g:1 in another tenant, where no condition of t-group looks.
    const results = await Promise.allSettled([
      repo.append([tagged(["g:1"])]),
      repo.append([tagged(["g:2"])], guard("g:1")),
      repo.append([tagged(["g:3"])], guard("g:9")),
      repo.append([tagged(["g:4"])], {
        conditions: [{ tenantUuid, items: [{ types: ["DcbProbe.Other"] }, { tags: ["g:1", "g:1"] }], after: head }],
      }),
      // Guarded by g:2, which the refused second call did not write.
      repo.append([{ ...tagged(["g:1"]), tenantUuid: "t-elsewhere" }], guard("g:2")),
    ]);
    expect(results.map(codeOf)).toEqual(["ok", "CONFLICT", "ok", "CONFLICT", "ok"]);
    expect(((results[3] as PromiseRejectedResult).reason as MnemeError).details?.[0]).toMatchObject({ query: 0, item: 1 });
    const read = await repo.readTagged!(tenantUuid, [{ tags: ["g:1"] }, { tags: ["g:3"] }]);
    expect(read.events.map((e) => (e.payload as { tags: string[] }).tags)).toEqual([["g:1"], ["g:3"]]);
  });

  test("the command's record notes the queries it decided on and their positions", async (w) => {
    const { Append, Decide } = w.probes;
    await w.facade.dispatch(Append, { tags: ["rec:1"] }, { reqCtx });
    const head = await w.facade.eventRepository.headPosition();
    const done = await w.facade.dispatch(
      Decide,
      {
        queries: [{ items: [{ tags: ["rec:1"], typed: true }] }, { items: [{ tags: ["rec:2"] }], check: false }],
        appendTags: ["rec:3"],
      },
      { reqCtx },
    );
    const rec = await w.facade.commandStore.get(done.commandUuid);
    expect(rec?.status).toBe("succeeded");
    expect(rec?.decidedOn).toEqual({ queries: [{ items: [{ tags: ["rec:1"], types: ["DcbProbe.Tagged"] }], position: head }] });
    const plain = await w.facade.dispatch(Append, { tags: ["rec:4"] }, { reqCtx });
    expect((await w.facade.commandStore.get(plain.commandUuid))?.decidedOn).toBeUndefined();
  });

  test("Runtime says which event types declare tags (ListEvents, GetSchema)", async (w) => {
    const entries = w.facade.runtime.listEvents();
    expect(entries.find((e) => e.domainEvtPath === "DcbProbe.Tagged")?.tagged).toBe(true);
    expect(entries.find((e) => e.domainEvtPath === "DcbProbe.Counted")?.tagged).toBeUndefined();
    expect(w.facade.runtime.getSchema({ domain: "DcbProbe", type: "Tagged" })["x-mneme-tagged"]).toBe(true);
    expect(w.facade.runtime.getSchema({ domain: "DcbProbe", type: "Counted" })["x-mneme-tagged"]).toBeUndefined();
  });

  test("events stored before their type declared tags are found once indexEventTags has run (idempotent)", async (w) => {
    const repo = w.facade.eventRepository;
    const tenantUuid = reqCtx.senderTenantUuid!;
    // As an earlier release (or the type before it declared tags) stored them: no `tags`, so no index rows.
    const old = (tags: string[]) => ({ ...w.probes.Tagged.create(newUuid(), { tags }), tenantUuid });
    await repo.append([old(["old:1"]), old(["old:1", "x:2"])]);
    await w.facade.dispatch(w.probes.Append, { tags: ["old:1"] }, { reqCtx });
    expect((await repo.readTagged!(tenantUuid, [{ tags: ["old:1"] }])).events).toHaveLength(1);
    const first = await w.facade.indexEventTags({ batchSize: 2 });
    expect(first.rowsAdded).toBe(5);
    const found = await repo.readTagged!(tenantUuid, [{ tags: ["old:1"], types: ["DcbProbe.Tagged"] }]);
    expect(found.events.map((e) => e.position)).toEqual([...found.events.map((e) => e.position)].sort((a, b) => a - b));
    expect(found.events).toHaveLength(3);
    expect((await repo.readTagged!(tenantUuid, [{ tags: ["old:1", "x:2"] }])).events).toHaveLength(1);
    expect((await w.facade.indexEventTags()).rowsAdded).toBe(0);
    await expectRejectsWith(
      () => repo.stored.indexTags!([{ position: 1, tenantUuid: "not-its-tenant", type: "DcbProbe.Tagged", tags: [] }]),
      "INVALID_REQUEST",
    );
  });

  test("aggregates and queries mix in one command: either moving is CONFLICT", async (w) => {
    const { Count, Append, Decide, hold } = w.probes;
    const counterUuid = newUuid();
    await w.facade.dispatch(Count, { counterUuid }, { reqCtx });
    for (const move of ["aggregate", "query"] as const) {
      const reached = deferred();
      const release = deferred();
      hold.next = { reached: reached.resolve, release: release.promise };
      const deciding = w.facade.dispatch(
        Decide,
        { queries: [{ items: [{ tags: ["mix:1"] }] }], counterUuid, appendTags: ["mixed:1"] },
        { reqCtx },
      );
      await reached.promise;
      if (move === "aggregate") await w.facade.dispatch(Count, { counterUuid }, { reqCtx });
      else await w.facade.dispatch(Append, { tags: ["mix:1"] }, { reqCtx });
      release.resolve();
      await expectRejectsWith(() => deciding, "CONFLICT");
    }
    const done = await w.facade.dispatch(
      Decide,
      { queries: [{ items: [{ tags: ["mix:1"] }] }], counterUuid, appendTags: ["mixed:1"] },
      { reqCtx },
    );
    expect(done.events).toHaveLength(1);
  });

  test("read returns the tenant's matching events in position order, types and tags combined", async (w) => {
    const { Append, Decide, read } = w.probes;
    await w.facade.dispatch(Append, { tags: ["k:1", "x:1"] }, { reqCtx });
    await w.facade.dispatch(Append, { tags: ["k:1"], other: true }, { reqCtx });
    await w.facade.dispatch(Append, { tags: ["k:2", "x:1"] }, { reqCtx });
    await w.facade.dispatch(Append, { tags: ["k:1", "x:1"] }, { reqCtx: inTenant("t-other") });
    await w.facade.dispatch(Append, { tags: ["k:1", "x:1", "x:1"], note: "duplicate tag" }, { reqCtx });
    await w.facade.dispatch(
      Decide,
      {
        queries: [
          { items: [{ tags: ["k:1", "x:1"] }] },
          { items: [{ tags: ["k:1"], typed: true, other: true }, { tags: ["k:2"] }] },
          { items: [{ typed: true, other: true }] },
        ],
        appendTags: ["n:1"],
      },
      { reqCtx },
    );
    const [both, either, byType] = read.slice(-3);
    const tagsOf = (r: { events: Event[] }) => r.events.map((e) => `${e.name}:${(e.payload as { tags: string[] }).tags.join(",")}`);
    expect(tagsOf(both!)).toEqual(["Tagged:k:1,x:1", "Tagged:k:1,x:1,x:1"]);
    expect(tagsOf(either!)).toEqual(["Other:k:1", "Tagged:k:2,x:1"]);
    expect(tagsOf(byType!)).toEqual(["Other:k:1"]);
    for (const r of [both!, either!, byType!]) {
      const positions = r.events.map((e) => e.position);
      expect(positions).toEqual([...positions].sort((a, b) => a - b));
      expect(r.position).toBeGreaterThanOrEqual(positions[positions.length - 1] ?? 0);
      for (const e of r.events) expect(e.tenantUuid).toBe(reqCtx.senderTenantUuid);
    }
  });

  test("unique usernames: taken while an account holds it, free again once that account is closed", async (w) => {
    const { Register, CloseAccount } = w.examples.commands;
    await w.facade.dispatch(Register, { accountId: "a1", username: "alice" }, { reqCtx });
    await expectRejectsWith(
      () => w.facade.dispatch(Register, { accountId: "a2", username: "alice" }, { reqCtx }),
      DCB_RULE_BROKEN as never,
    );
    await w.facade.dispatch(CloseAccount, { accountId: "a1" }, { reqCtx });
    await w.facade.dispatch(Register, { accountId: "a2", username: "alice" }, { reqCtx });
    const racing = await Promise.allSettled(
      ["b1", "b2", "b3", "b4"].map((a) => w.facade.dispatch(Register, { accountId: a, username: "bob" }, { reqCtx })),
    );
    expect(racing.map(codeOf).filter((c) => c === "ok")).toHaveLength(1);
    expect(
      (await stored(w, "DcbAccounts.AccountRegistered")).filter((e) => (e.payload as { username: string }).username === "bob"),
    ).toHaveLength(1);
  });

  test("invoice numbers are consecutive without gaps under concurrent creation", async (w) => {
    const { CreateInvoice } = w.examples.commands;
    const results = await Promise.all(
      Array.from({ length: 8 }, (_, i) => withRetries(() => w.facade.dispatch(CreateInvoice, { amount: i + 1 }, { reqCtx }))),
    );
    const numbers = results.map((r) => (r.result as { invoiceNumber: number }).invoiceNumber).sort((a, b) => a - b);
    expect(numbers).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
    const storedNumbers = (await stored(w, "DcbInvoices.InvoiceCreated")).map(
      (e) => (e.payload as { invoiceNumber: number }).invoiceNumber,
    );
    expect(storedNumbers).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
  });

  test("an opt-in token confirms once, even when confirmations race", async (w) => {
    const { InitiateSignUp, ConfirmSignUp } = w.examples.commands;
    await w.facade.dispatch(InitiateSignUp, { subscriberId: "sub1", token: "tok1" }, { reqCtx });
    await expectRejectsWith(() => w.facade.dispatch(ConfirmSignUp, { token: "nope" }, { reqCtx }), DCB_RULE_BROKEN as never);
    const racing = await Promise.allSettled([1, 2, 3].map(() => w.facade.dispatch(ConfirmSignUp, { token: "tok1" }, { reqCtx })));
    expect(racing.map(codeOf).filter((c) => c === "ok")).toHaveLength(1);
    await expectRejectsWith(() => w.facade.dispatch(ConfirmSignUp, { token: "tok1" }, { reqCtx }), DCB_RULE_BROKEN as never);
    expect(await stored(w, "DcbOptIn.SignUpConfirmed")).toHaveLength(1);
  });

  test("a price is honoured for a while after it changed, then no more", async (w) => {
    const { DefineProduct, ChangePrice, OrderProduct } = w.examples.commands;
    await w.facade.dispatch(DefineProduct, { productId: "p1", price: 10 }, { reqCtx });
    w.clock.now = nowNs();
    await w.facade.dispatch(ChangePrice, { productId: "p1", price: 12 }, { reqCtx });
    w.clock.now = nowNs();
    w.clock.advance(30_000);
    await w.facade.dispatch(OrderProduct, { productId: "p1", displayedPrice: 10 }, { reqCtx });
    await w.facade.dispatch(OrderProduct, { productId: "p1", displayedPrice: 12 }, { reqCtx });
    await expectRejectsWith(
      () => w.facade.dispatch(OrderProduct, { productId: "p1", displayedPrice: 11 }, { reqCtx }),
      DCB_RULE_BROKEN as never,
    );
    w.clock.advance(60_000);
    await expectRejectsWith(
      () => w.facade.dispatch(OrderProduct, { productId: "p1", displayedPrice: 10 }, { reqCtx }),
      DCB_RULE_BROKEN as never,
    );
    await w.facade.dispatch(OrderProduct, { productId: "p1", displayedPrice: 12 }, { reqCtx });
  });

  test("queries are scoped by tenant: the same course in two tenants has two capacities", async (w) => {
    const { DefineCourse, Subscribe } = w.examples.commands;
    for (const t of ["tenant-a", "tenant-b"])
      await w.facade.dispatch(DefineCourse, { courseId: "shared", capacity: 1 }, { reqCtx: inTenant(t) });
    await w.facade.dispatch(Subscribe, { studentId: "s1", courseId: "shared" }, { reqCtx: inTenant("tenant-a") });
    await w.facade.dispatch(Subscribe, { studentId: "s1", courseId: "shared" }, { reqCtx: inTenant("tenant-b") });
    await expectRejectsWith(
      () => w.facade.dispatch(Subscribe, { studentId: "s2", courseId: "shared" }, { reqCtx: inTenant("tenant-a") }),
      DCB_RULE_BROKEN as never,
    );
  });

  test("a bad query is INVALID_REQUEST", async (w) => {
    const { Query, Tagged, Untagged, given } = w.probes;
    const foreign = defineDomain("DcbForeign").event<{ a: 1 }>("Unregistered", { tags: () => [] });
    const bad: unknown[] = [
      undefined,
      {},
      { items: [] },
      { items: [{}] },
      { items: [{ tags: [] }] },
      { items: [{ types: [] }] },
      { items: [{ tags: ["no-colon"] }] },
      { items: [{ tags: [":empty-key"] }] },
      { items: [{ tags: ["k:"] }] },
      { items: [{ tags: ["k:\ud800"] }] },
      { items: [{ tags: [`k:${"x".repeat(600)}`] }] },
      { items: [{ tags: [7] }] },
      { items: [{ types: [Untagged] }] },
      { items: [{ types: [foreign] }] },
      { items: [{ types: ["DcbProbe.Tagged"] }] },
      { items: [{ types: [Tagged], where: "x" }] },
    ];
    for (const query of bad) {
      given.query = query;
      await expectRejectsWith(() => w.facade.dispatch(Query, {}, { reqCtx }), "INVALID_REQUEST");
    }
    given.query = { items: [{ types: [Tagged] }] };
    await w.facade.dispatch(Query, {}, { reqCtx });
  });

  test("a tag that cannot be stored, or carries a personal field's value, is INVALID_EVENTS and nothing is written", async (w) => {
    const { AppendRaw, AppendSecret, given } = w.probes;
    const before = (await stored(w)).length;
    for (const tags of [["no-colon"], ["k:"], [":v"], ["k:\u0000"], ["k:\udc00"], [`k:${"v".repeat(520)}`], [3], "k:v", [null]]) {
      given.tags = tags;
      const e = (await expectRejectsWith(() => w.facade.dispatch(AppendRaw, {}, { reqCtx }), "INVALID_EVENTS")) as MnemeError;
      expect(e.details?.length ?? 0).toBeGreaterThan(0);
    }
    const e = (await expectRejectsWith(
      () => w.facade.dispatch(AppendSecret, { email: "ann@example.com", tag: "email:ann@example.com" }, { reqCtx }),
      "INVALID_EVENTS",
    )) as MnemeError;
    expect(e.details?.[0]).toMatchObject({ pointer: "/0/tags/0" });
    expect((await stored(w)).length).toBe(before);
  });
});
