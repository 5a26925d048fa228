import { expect } from "vitest";
import { newUuid } from "../model/clock.js";
import { isMnemeError } from "../model/errors.js";
import type { Event, NewEvent, RequestContext } from "../model/types.js";
import type { EventRepository } from "../store/event-repository.js";
import {
  collectPages,
  defineContract,
  expectClosedBehaviour,
  expectNoSecret,
  expectNs,
  expectRejectsWith,
  settle,
  UUID_V7,
} from "./contract-harness.js";
import { describeEventRepositoryPayloadContract } from "./event-repository-payload-contract.js";
import { describeEventPayloadSealingContract } from "./payload-sealing-contract.js";

function ev(aggregateUuid: string, extra: Partial<NewEvent> = {}): NewEvent {
  return { domain: "Test", name: "Happened", aggregateUuid, payload: { n: 0 }, ...extra };
}

/** `n` events for one aggregate, payload { n: i }. */
function evs(aggregateUuid: string, n: number, extra: Partial<NewEvent> = {}): NewEvent[] {
  return Array.from({ length: n }, (_, i) => ev(aggregateUuid, { payload: { n: i }, ...extra }));
}

async function readEverything(repo: EventRepository): Promise<Event[]> {
  return (await collectPages(repo.readAll())).flat();
}

function positions(events: readonly Event[]): number[] {
  return events.map((e) => e.position);
}

function expectStrictlyIncreasing(xs: readonly number[]): void {
  for (let i = 1; i < xs.length; i++) {
    if (!((xs[i] as number) > (xs[i - 1] as number))) expect.fail(`not strictly increasing at ${i}: ${xs[i - 1]} then ${xs[i]}`);
  }
}

/** Appends `total` events over `aggregates` aggregates in calls of `chunk`; returns them in position order. */
async function seed(repo: EventRepository, total: number, chunk = 500, aggregates = 10): Promise<Event[]> {
  const aggs = Array.from({ length: aggregates }, () => newUuid());
  const out: Event[] = [];
  for (let done = 0; done < total; done += chunk) {
    const batch: NewEvent[] = [];
    for (let i = done; i < Math.min(total, done + chunk); i++) batch.push(ev(aggs[i % aggregates] as string, { payload: { i } }));
    out.push(...(await repo.append(batch)));
  }
  return out;
}

/**
 * The EventRepository conformance suite: every backend (memory, SQLite,
 * Postgres, a user's own) must pass it. Each test gets a fresh store from
 * `factory`; the suite calls init() and close().
 *
 * @example
 * describeEventRepositoryContract("sqlite", async () => new SqliteEventRepository({ filename: tmpFile() }));
 */
export const describeEventRepositoryContract = defineContract<EventRepository>("EventRepository contract", (test) => {
  // --- append: positions, versions, defaults --------------------------------

  test("init is idempotent", async (repo) => {
    await repo.init();
    await repo.append([ev(newUuid())]);
    await repo.init();
    expect(await repo.headPosition()).toBeGreaterThan(0);
    expect((await repo.info()).numItems).toBe(1);
  });

  test("append of no events resolves [] and writes nothing", async (repo) => {
    expect(await repo.append([])).toEqual([]);
    expect(await repo.headPosition()).toBe(0);
    expect((await repo.info()).numItems).toBe(0);
  });

  test("append returns the events in input order with strictly increasing positions", async (repo) => {
    const a = newUuid();
    const b = newUuid();
    const first = await repo.append([ev(a, { payload: { k: 1 } }), ev(b, { payload: { k: 2 } }), ev(a, { payload: { k: 3 } })]);
    const second = await repo.append([ev(b, { payload: { k: 4 } })]);
    const third = await repo.append([ev(a, { payload: { k: 5 } }), ev(a, { payload: { k: 6 } })]);
    const all = [...first, ...second, ...third];
    expect(all.map((e) => (e.payload as { k: number }).k)).toEqual([1, 2, 3, 4, 5, 6]);
    expect(all.map((e) => e.aggregateUuid)).toEqual([a, b, a, b, a, a]);
    expect(all[0]?.position).toBeGreaterThanOrEqual(1);
    for (const e of all) expect(Number.isInteger(e.position)).toBe(true);
    expectStrictlyIncreasing(positions(all));
    expect(new Set(all.map((e) => e.eventUuid)).size).toBe(all.length);
  });

  test("versions run 1, 2, 3, ... per aggregate", async (repo) => {
    const a = newUuid();
    const b = newUuid();
    const c = newUuid();
    const r1 = await repo.append([ev(a), ev(b), ev(a), ev(c), ev(a)]);
    const r2 = await repo.append([ev(b), ev(c), ev(a)]);
    expect(r1.map((e) => e.version)).toEqual([1, 1, 2, 1, 3]);
    expect(r2.map((e) => e.version)).toEqual([2, 2, 4]);
    expect((await repo.loadAggregate(a)).map((e) => e.version)).toEqual([1, 2, 3, 4]);
    expect((await repo.loadAggregate(b)).map((e) => e.version)).toEqual([1, 2]);
    expect((await repo.loadAggregate(c)).map((e) => e.version)).toEqual([1, 2]);
  });

  test("aggregateUuid may be any non-empty string", async (repo) => {
    const ids = ["todo-1", "Ünïcode/agg 1", "x"];
    for (const id of ids) await repo.append([ev(id), ev(id)]);
    for (const id of ids)
      expect((await repo.loadAggregate(id)).map((e) => [e.aggregateUuid, e.version])).toEqual([
        [id, 1],
        [id, 2],
      ]);
  });

  test("append fills eventUuid (uuid v7), createdAt (ns), tenantUuid and reqCtx", async (repo) => {
    const [e1, e2] = await repo.append([ev(newUuid()), ev(newUuid())]);
    for (const e of [e1, e2]) {
      if (e === undefined) return expect.fail("append returned too few events");
      expect(e.eventUuid).toMatch(UUID_V7);
      expectNs(e.createdAt);
      expect(e.tenantUuid).toBe("");
      expect(e.reqCtx).toEqual({});
      expect(e.commandUuid).toBeUndefined();
      expect(e.domain).toBe("Test");
      expect(e.name).toBe("Happened");
    }
    expect(e1?.eventUuid).not.toBe(e2?.eventUuid);
    const [stored] = await repo.loadAggregate(e1?.aggregateUuid as string);
    expect(stored).toEqual(e1);
    expect(stored?.commandUuid).toBeUndefined();
  });

  test("append keeps a given eventUuid, createdAt, tenantUuid, commandUuid and reqCtx", async (repo) => {
    const agg = newUuid();
    const given = {
      eventUuid: newUuid(),
      createdAt: 1_700_000_000_123_456_000,
      tenantUuid: newUuid(),
      commandUuid: newUuid(),
      reqCtx: { senderAccountUuid: newUuid(), traceId: "trace-1" },
    };
    const [e] = await repo.append([ev(agg, given)]);
    expect(e).toMatchObject({ ...given, aggregateUuid: agg, version: 1 });
    expect(await repo.loadAggregate(agg)).toEqual([e]);
  });

  test("default createdAt does not decrease across sequential appends", async (repo) => {
    const agg = newUuid();
    const created: number[] = [];
    for (let i = 0; i < 20; i++) created.push(...(await repo.append([ev(agg), ev(newUuid())])).map((e) => e.createdAt));
    for (let i = 1; i < created.length; i++) expect(created[i]).toBeGreaterThanOrEqual(created[i - 1] as number);
  });

  test("the events append returns equal the stored ones", async (repo) => {
    const agg = newUuid();
    const appended = await repo.append([
      ev(agg, { tenantUuid: "t1", commandUuid: newUuid(), reqCtx: { traceId: "x" } }),
      ev(agg, { tenantUuid: "t1" }),
    ]);
    expect(await repo.loadAggregate(agg)).toEqual(appended);
    expect(await readEverything(repo)).toEqual(appended);
  });

  // --- append: versions and expected versions -------------------------------

  test("an explicit version equal to the next one is accepted", async (repo) => {
    const agg = newUuid();
    const r = await repo.append([ev(agg, { version: 1 }), ev(agg), ev(agg, { version: 3 })]);
    expect(r.map((e) => e.version)).toEqual([1, 2, 3]);
    expect((await repo.append([ev(agg, { version: 4 })]))[0]?.version).toBe(4);
  });

  test("an explicit version that is taken gives CONFLICT", async (repo) => {
    const agg = newUuid();
    await repo.append([ev(agg), ev(agg)]);
    await expectRejectsWith(() => repo.append([ev(agg, { version: 2 })]), "CONFLICT");
    await expectRejectsWith(() => repo.append([ev(agg, { version: 1 })]), "CONFLICT");
    // Within one call too: the second event claims the version the first one takes.
    await expectRejectsWith(() => repo.append([ev(agg), ev(agg, { version: 3 })]), "CONFLICT");
    expect((await repo.loadAggregate(agg)).map((e) => e.version)).toEqual([1, 2]);
  });

  test("an explicit version with a gap gives INVALID_EVENTS", async (repo) => {
    const agg = newUuid();
    await expectRejectsWith(() => repo.append([ev(agg, { version: 2 })]), "INVALID_EVENTS");
    await repo.append([ev(agg)]);
    await expectRejectsWith(() => repo.append([ev(agg, { version: 3 })]), "INVALID_EVENTS");
    await expectRejectsWith(() => repo.append([ev(agg), ev(agg, { version: 4 })]), "INVALID_EVENTS");
    expect((await repo.loadAggregate(agg)).map((e) => e.version)).toEqual([1]);
  });

  test("an empty aggregateUuid, domain or name gives INVALID_EVENTS", async (repo) => {
    const ok = ev(newUuid());
    await expectRejectsWith(() => repo.append([ok, ev("")]), "INVALID_EVENTS");
    await expectRejectsWith(() => repo.append([ok, ev(newUuid(), { domain: "" })]), "INVALID_EVENTS");
    await expectRejectsWith(() => repo.append([ok, ev(newUuid(), { name: "" })]), "INVALID_EVENTS");
    expect(await repo.headPosition()).toBe(0);
    expect(await repo.loadAggregate(ok.aggregateUuid)).toEqual([]);
  });

  test("ids with U+0000 or a lone surrogate, or over 512 characters, give INVALID_EVENTS; reads of them INVALID_REQUEST", async (repo) => {
    const ok = ev(newUuid());
    for (const bad of ["\ud800", "a\udc00", "\udc00\ud800", "a\u0000b", "x".repeat(513)]) {
      await expectRejectsWith(() => repo.append([ok, ev(bad)]), "INVALID_EVENTS");
      await expectRejectsWith(() => repo.append([ok, ev(newUuid(), { tenantUuid: bad })]), "INVALID_EVENTS");
      await expectRejectsWith(() => repo.append([ok, ev(newUuid(), { name: bad })]), "INVALID_EVENTS");
      await expectRejectsWith(() => repo.append([ok], { expectedVersions: { [bad]: 0 } }), "INVALID_EVENTS");
      await expectRejectsWith(() => repo.loadAggregate(bad), "INVALID_REQUEST");
      await expectRejectsWith(() => repo.loadAggregates([ok.aggregateUuid, bad]), "INVALID_REQUEST");
    }
    expect(await repo.headPosition()).toBe(0);
    // U+FFFD, a surrogate pair, a noncharacter and 512 characters are ids like any other, each its own aggregate.
    const good = ["\ufffd", "\ud83d\ude00", "\uffff", "y".repeat(512)];
    for (const id of good) await repo.append([ev(id)]);
    for (const id of good) expect((await repo.loadAggregate(id)).map((e) => e.aggregateUuid)).toEqual([id]);
  });

  test("expectedVersions 0 means the aggregate must not exist", async (repo) => {
    const agg = newUuid();
    const [e] = await repo.append([ev(agg)], { expectedVersions: { [agg]: 0 } });
    expect(e?.version).toBe(1);
    await expectRejectsWith(() => repo.append([ev(agg)], { expectedVersions: { [agg]: 0 } }), "CONFLICT");
    expect(await repo.loadAggregate(agg)).toHaveLength(1);
  });

  test("expectedVersions equal to the current version succeed; others give CONFLICT", async (repo) => {
    const agg = newUuid();
    await repo.append([ev(agg), ev(agg)]);
    await expectRejectsWith(() => repo.append([ev(agg)], { expectedVersions: { [agg]: 1 } }), "CONFLICT");
    await expectRejectsWith(() => repo.append([ev(agg)], { expectedVersions: { [agg]: 3 } }), "CONFLICT");
    const r = await repo.append([ev(agg), ev(agg)], { expectedVersions: { [agg]: 2 } });
    expect(r.map((e) => e.version)).toEqual([3, 4]);
    await expectRejectsWith(() => repo.append([ev(agg)], { expectedVersions: { [agg]: 2 } }), "CONFLICT");
  });

  test("expectedVersions of an aggregate without events in the call are checked too", async (repo) => {
    const guard = newUuid();
    const other = newUuid();
    await repo.append([ev(guard)]);
    await expectRejectsWith(() => repo.append([ev(other)], { expectedVersions: { [guard]: 0 } }), "CONFLICT");
    expect(await repo.loadAggregate(other)).toEqual([]);
    const [e] = await repo.append([ev(other)], { expectedVersions: { [guard]: 1 } });
    expect(e?.version).toBe(1);
  });

  test("expectedVersions of several aggregates without events (read checks) are each checked; a miss writes nothing and takes no position", async (repo) => {
    const [policy, ban, account, other] = [newUuid(), newUuid(), newUuid(), newUuid()];
    await repo.append([ev(policy), ev(policy), ev(account)]);
    const head = await repo.headPosition();
    // One aggregate appended to (the common command), two read, one of them stale; then the same with two appended.
    const stale: [NewEvent[], Record<string, number>][] = [
      [[ev(account)], { [account]: 1, [policy]: 1, [ban]: 0 }],
      [[ev(account)], { [account]: 1, [policy]: 2, [ban]: 1 }],
      [[ev(account), ev(other)], { [account]: 1, [policy]: 3, [ban]: 0 }],
      [[ev(other), ev(account)], { [policy]: 2, [ban]: 2 }],
    ];
    for (const [events, expectedVersions] of stale) {
      await expectRejectsWith(() => repo.append(events, { expectedVersions }), "CONFLICT");
    }
    expect(await repo.headPosition()).toBe(head);
    expect(await repo.loadAggregate(other)).toEqual([]);
    expect(await repo.loadAggregate(account)).toHaveLength(1);
    const done = await repo.append([ev(account), ev(other)], { expectedVersions: { [account]: 1, [policy]: 2, [ban]: 0 } });
    expect(done.map((e) => [e.aggregateUuid, e.version, e.position])).toEqual([
      [account, 2, head + 1],
      [other, 1, head + 2],
    ]);
    expect(await repo.loadAggregate(ban)).toEqual([]);
  });

  test("concurrent appends checking an aggregate they do not write, racing one write to it: none of them commits after that write", async (repo) => {
    const policy = newUuid();
    await repo.append([ev(policy)]);
    const accounts = Array.from({ length: 12 }, () => newUuid());
    const withdraw = (account: string) => repo.append([ev(account)], { expectedVersions: { [policy]: 1, [account]: 0 } });
    const calls = accounts.map((a, i) => (i === 6 ? repo.append([ev(policy)], { expectedVersions: { [policy]: 1 } }) : withdraw(a)));
    const results = await Promise.allSettled(calls);
    const freeze = results[6];
    if (freeze?.status !== "fulfilled") throw new Error(`the write to the checked aggregate failed: ${String(freeze?.reason)}`);
    const frozenAt = (freeze.value[0] as Event).position;
    for (const [i, r] of results.entries()) {
      if (i === 6) continue;
      if (r.status === "fulfilled") expect((r.value[0] as Event).position).toBeLessThan(frozenAt);
      else if (!isMnemeError(r.reason, "CONFLICT")) expect.fail(`expected CONFLICT, got ${String(r.reason)}`);
    }
    const written = results.filter((r) => r.status === "fulfilled").length;
    expect(await readEverything(repo)).toHaveLength(1 + written);
    // Afterwards every such append is refused until it checks the new version.
    await expectRejectsWith(() => withdraw(newUuid()), "CONFLICT");
    const fresh = newUuid();
    expect((await repo.append([ev(fresh)], { expectedVersions: { [policy]: 2, [fresh]: 0 } }))[0]?.version).toBe(1);
  });

  test("a call with one conflicting event writes nothing", async (repo) => {
    const a = newUuid();
    const b = newUuid();
    const fresh = newUuid();
    await repo.append([ev(a), ev(b)]);
    const head = await repo.headPosition();
    const before = await repo.info();
    await expectRejectsWith(() => repo.append([ev(fresh), ev(b), ev(a, { version: 1 }), ev(fresh)]), "CONFLICT");
    expect(await repo.loadAggregate(fresh)).toEqual([]);
    expect((await repo.loadAggregate(b)).map((e) => e.version)).toEqual([1]);
    expect(await repo.headPosition()).toBe(head);
    expect((await repo.info()).numItems).toBe(before.numItems);
    expect(await readEverything(repo)).toHaveLength(2);
    // The failed call left no reserved versions behind.
    expect((await repo.append([ev(fresh)]))[0]?.version).toBe(1);
  });

  test("a call failing its expectedVersions writes nothing", async (repo) => {
    const a = newUuid();
    const c = newUuid();
    const d = newUuid();
    await repo.append([ev(a)]);
    await expectRejectsWith(() => repo.append([ev(c), ev(d), ev(a)], { expectedVersions: { [c]: 0, [a]: 5 } }), "CONFLICT");
    expect(await repo.loadAggregate(c)).toEqual([]);
    expect(await repo.loadAggregate(d)).toEqual([]);
    expect(await repo.loadAggregate(a)).toHaveLength(1);
    expect(await readEverything(repo)).toHaveLength(1);
  });

  test("a call with one invalid event writes nothing", async (repo) => {
    const a = newUuid();
    await expectRejectsWith(() => repo.append([ev(a), ev(a), ev(newUuid(), { version: 7 })]), "INVALID_EVENTS");
    expect(await repo.loadAggregate(a)).toEqual([]);
    expect(await repo.headPosition()).toBe(0);
    expect((await repo.info()).numItems).toBe(0);
  });

  // --- the tenant rule ---------------------------------------------------------

  test("an event of another tenant than its aggregate's gives NOT_FOUND and writes nothing", async (repo) => {
    const agg = newUuid();
    const tenantA = newUuid();
    const tenantB = newUuid();
    await repo.append([ev(agg, { tenantUuid: tenantA })]);
    const fresh = newUuid();
    for (const [events, opts] of [
      [[ev(agg, { tenantUuid: tenantB })], undefined],
      // The tenant rule comes before versions: neither a right nor a wrong expected version tells that it exists.
      [[ev(agg, { tenantUuid: tenantB })], { expectedVersions: { [agg]: 1 } }],
      [[ev(agg, { tenantUuid: tenantB })], { expectedVersions: { [agg]: 7 } }],
      [[ev(agg, { tenantUuid: tenantB, version: 2 })], undefined],
      // A mixed batch: a new aggregate of B and A's aggregate: nothing of it.
      [[ev(fresh, { tenantUuid: tenantB }), ev(agg, { tenantUuid: tenantB })], undefined],
    ] as const) {
      const e = await expectRejectsWith(() => repo.append(events, opts), "NOT_FOUND");
      expect(e.message).not.toContain(tenantA);
      expect(e.message).not.toContain(tenantB);
    }
    expect((await repo.loadAggregate(agg)).map((e) => e.tenantUuid)).toEqual([tenantA]);
    expect(await repo.loadAggregate(fresh)).toEqual([]);
    expect(await readEverything(repo)).toHaveLength(1);
    // The owner goes on as before.
    expect((await repo.append([ev(agg, { tenantUuid: tenantA })], { expectedVersions: { [agg]: 1 } }))[0]?.version).toBe(2);
  });

  test("an aggregate belongs to the tenant of its first event, in the same call too; the empty tenant is a tenant", async (repo) => {
    const x = newUuid();
    await expectRejectsWith(() => repo.append([ev(x, { tenantUuid: "a" }), ev(x, { tenantUuid: "b" })]), "NOT_FOUND");
    expect(await repo.loadAggregate(x)).toEqual([]);
    const y = newUuid();
    await repo.append([ev(y)]);
    await expectRejectsWith(() => repo.append([ev(y, { tenantUuid: "a" })]), "NOT_FOUND");
    await repo.append([ev(y, { tenantUuid: "" }), ev(y)]);
    expect((await repo.loadAggregate(y)).map((e) => [e.version, e.tenantUuid])).toEqual([
      [1, ""],
      [2, ""],
      [3, ""],
    ]);
    expect(await readEverything(repo)).toHaveLength(3);
  });

  test("aggregates in globalAggregates take events of any tenant; the others in the same call are still checked", async (repo) => {
    const g = newUuid();
    const s = newUuid();
    await repo.append([ev(g, { tenantUuid: "a" }), ev(s, { tenantUuid: "a" })]);
    const r = await repo.append([ev(g, { tenantUuid: "b" }), ev(g, { tenantUuid: "" })], { globalAggregates: [g] });
    expect(r.map((e) => [e.version, e.tenantUuid])).toEqual([
      [2, "b"],
      [3, ""],
    ]);
    await expectRejectsWith(
      () => repo.append([ev(g, { tenantUuid: "c" }), ev(s, { tenantUuid: "c" })], { globalAggregates: [g] }),
      "NOT_FOUND",
    );
    expect((await repo.loadAggregate(g)).map((e) => e.tenantUuid)).toEqual(["a", "b", ""]);
    expect((await repo.loadAggregate(s)).map((e) => e.tenantUuid)).toEqual(["a"]);
    await expectRejectsWith(() => repo.append([ev(g)], { globalAggregates: "g" as unknown as string[] }), "INVALID_EVENTS");
  });

  test("concurrent first appends of one aggregate from two tenants: one tenant's events only", async (repo) => {
    for (let round = 0; round < 5; round++) {
      const agg = newUuid();
      const results = await Promise.allSettled(
        Array.from({ length: 12 }, (_, i) => repo.append([ev(agg, { tenantUuid: i % 2 === 0 ? "even" : "odd", payload: { i } })])),
      );
      const ok = results.filter((r): r is PromiseFulfilledResult<Event[]> => r.status === "fulfilled");
      for (const f of results) {
        if (f.status === "rejected" && !isMnemeError(f.reason, "NOT_FOUND")) expect.fail(`expected NOT_FOUND, got ${String(f.reason)}`);
      }
      expect(ok.length).toBeGreaterThanOrEqual(1);
      const stream = await repo.loadAggregate(agg);
      expect(stream).toHaveLength(ok.length);
      expect(new Set(stream.map((e) => e.tenantUuid)).size).toBe(1);
      expect(stream.map((e) => e.version)).toEqual(Array.from({ length: ok.length }, (_, i) => i + 1));
    }
  });

  // --- concurrency -------------------------------------------------------------

  test("concurrent appends with the same expected version: exactly one succeeds", async (repo) => {
    const agg = newUuid();
    await repo.append([ev(agg), ev(agg)]);
    const results = await Promise.allSettled(
      Array.from({ length: 20 }, (_, i) =>
        repo.append([ev(agg, { payload: { i } }), ev(agg, { payload: { i } })], { expectedVersions: { [agg]: 2 } }),
      ),
    );
    const ok = results.filter((r) => r.status === "fulfilled");
    const failed = results.filter((r): r is PromiseRejectedResult => r.status === "rejected");
    expect(ok).toHaveLength(1);
    for (const f of failed) {
      if (!isMnemeError(f.reason, "CONFLICT")) expect.fail(`expected CONFLICT, got ${String(f.reason)}`);
    }
    const stream = await repo.loadAggregate(agg);
    expect(stream.map((e) => e.version)).toEqual([1, 2, 3, 4]);
    const winner = (ok[0] as PromiseFulfilledResult<Event[]>).value;
    expect(stream.slice(2)).toEqual(winner);
    expect(await readEverything(repo)).toHaveLength(4);
  });

  test("concurrent appends without expected version all succeed with versions 1..n", async (repo) => {
    const agg = newUuid();
    const results = await Promise.all(Array.from({ length: 20 }, (_, i) => repo.append([ev(agg, { payload: { i } })])));
    expect(results.map((r) => r[0]?.version).sort((x, y) => (x as number) - (y as number))).toEqual(
      Array.from({ length: 20 }, (_, i) => i + 1),
    );
    const stream = await repo.loadAggregate(agg);
    expect(stream.map((e) => e.version)).toEqual(Array.from({ length: 20 }, (_, i) => i + 1));
    // Within an aggregate, version order is position order.
    expectStrictlyIncreasing(positions(stream));
    expect(new Set(stream.map((e) => (e.payload as { i: number }).i)).size).toBe(20);
  });

  test("concurrent appends to different aggregates all succeed with unique positions", async (repo) => {
    const results = await Promise.all(Array.from({ length: 20 }, () => repo.append(evs(newUuid(), 3))));
    const all = results.flat();
    expect(new Set(positions(all)).size).toBe(60);
    for (const r of results) {
      expect(r.map((e) => e.version)).toEqual([1, 2, 3]);
      expectStrictlyIncreasing(positions(r));
    }
    const read = await readEverything(repo);
    expect(read).toHaveLength(60);
    expectStrictlyIncreasing(positions(read));
  });

  test("a reader following with afterPosition misses nothing while appends run", async (repo) => {
    const committed: Event[] = [];
    let writing = true;
    const writers = Promise.all(
      Array.from({ length: 8 }, async () => {
        const agg = newUuid();
        for (let i = 0; i < 15; i++) committed.push(...(await repo.append([ev(agg, { payload: { i } }), ev(newUuid())])));
      }),
    ).finally(() => {
      writing = false;
    });
    const seen: Event[] = [];
    let checkpoint = 0;
    const follow = async (): Promise<void> => {
      for await (const page of repo.readAll({ afterPosition: checkpoint, batchSize: 7 })) {
        seen.push(...page);
        checkpoint = (page[page.length - 1] as Event).position;
      }
    };
    while (writing) {
      await follow();
      await settle();
    }
    await writers;
    await follow();
    expectStrictlyIncreasing(positions(seen));
    expect(positions(seen)).toEqual(positions(committed).sort((x, y) => x - y));
  });

  // --- loading aggregates ----------------------------------------------------------

  test("loadAggregate returns the aggregate's events in version order", async (repo) => {
    const a = newUuid();
    const b = newUuid();
    for (let i = 0; i < 5; i++) await repo.append([ev(b), ev(a, { payload: { i } })]);
    const stream = await repo.loadAggregate(a);
    expect(stream.map((e) => e.version)).toEqual([1, 2, 3, 4, 5]);
    expect(stream.map((e) => (e.payload as { i: number }).i)).toEqual([0, 1, 2, 3, 4]);
    expect(stream.every((e) => e.aggregateUuid === a)).toBe(true);
    expectStrictlyIncreasing(positions(stream));
  });

  test("loadAggregate of an unknown aggregate resolves []", async (repo) => {
    await repo.append([ev(newUuid())]);
    expect(await repo.loadAggregate(newUuid())).toEqual([]);
  });

  test("loadAggregate fromVersion is inclusive", async (repo) => {
    const agg = newUuid();
    await repo.append(evs(agg, 5));
    expect((await repo.loadAggregate(agg, { fromVersion: 3 })).map((e) => e.version)).toEqual([3, 4, 5]);
    expect((await repo.loadAggregate(agg, { fromVersion: 5 })).map((e) => e.version)).toEqual([5]);
    expect(await repo.loadAggregate(agg, { fromVersion: 6 })).toEqual([]);
    expect((await repo.loadAggregate(agg, { fromVersion: 1 })).map((e) => e.version)).toEqual([1, 2, 3, 4, 5]);
  });

  test("loadAggregates returns every requested aggregate; absent ones map to []", async (repo) => {
    const a = newUuid();
    const b = newUuid();
    const absent = newUuid();
    await repo.append([ev(a), ev(b), ev(a), ev(newUuid())]);
    const m = await repo.loadAggregates([a, absent, b]);
    expect([...m.keys()].sort()).toEqual([a, absent, b].sort());
    expect(m.get(a)?.map((e) => e.version)).toEqual([1, 2]);
    expect(m.get(b)?.map((e) => e.version)).toEqual([1]);
    expect(m.get(absent)).toEqual([]);
    expect(m.get(a)).toEqual(await repo.loadAggregate(a));
    expect((await repo.loadAggregates([])).size).toBe(0);
  });

  // --- readAll ------------------------------------------------------------------------

  test("readAll yields every event in position order", async (repo) => {
    const appended = await seed(repo, 30, 7, 4);
    const pages = await collectPages(repo.readAll());
    for (const p of pages) expect(p.length).toBeGreaterThan(0);
    expect(pages.flat()).toEqual(appended);
  });

  test("readAll of an empty store yields no page", async (repo) => {
    expect(await collectPages(repo.readAll())).toEqual([]);
    expect(await collectPages(repo.readAll({ afterPosition: 10, batchSize: 5 }))).toEqual([]);
  });

  test("readAll pages hold exactly batchSize events, except a shorter last one", async (repo) => {
    const appended = await seed(repo, 25, 25, 3);
    const pages = await collectPages(repo.readAll({ batchSize: 10 }));
    expect(pages.map((p) => p.length)).toEqual([10, 10, 5]);
    expect(pages.flat()).toEqual(appended);
    // No empty page when the count is a multiple of batchSize.
    const after = (appended[4] as Event).position;
    expect((await collectPages(repo.readAll({ batchSize: 10, afterPosition: after }))).map((p) => p.length)).toEqual([10, 10]);
    expect((await collectPages(repo.readAll({ batchSize: 1 }))).map((p) => p.length)).toEqual(Array(25).fill(1));
  });

  test("readAll afterPosition is exclusive", async (repo) => {
    const appended = await seed(repo, 12, 5, 2);
    const cut = appended[4] as Event;
    const read = (await collectPages(repo.readAll({ afterPosition: cut.position }))).flat();
    expect(read).toEqual(appended.slice(5));
    const last = appended[appended.length - 1] as Event;
    expect(await collectPages(repo.readAll({ afterPosition: last.position }))).toEqual([]);
    expect((await collectPages(repo.readAll({ afterPosition: 0 }))).flat()).toEqual(appended);
  });

  test("readAll untilPosition is inclusive", async (repo) => {
    const appended = await seed(repo, 12, 5, 2);
    const until = (appended[7] as Event).position;
    expect((await collectPages(repo.readAll({ untilPosition: until, batchSize: 3 }))).flat()).toEqual(appended.slice(0, 8));
    const after = (appended[2] as Event).position;
    const pages = await collectPages(repo.readAll({ afterPosition: after, untilPosition: until, batchSize: 2 }));
    expect(pages.map((p) => p.length)).toEqual([2, 2, 1]);
    expect(pages.flat()).toEqual(appended.slice(3, 8));
    expect(await collectPages(repo.readAll({ afterPosition: until, untilPosition: until }))).toEqual([]);
  });

  test("readAll filters by tenantUuid", async (repo) => {
    const t1 = newUuid();
    const t2 = newUuid();
    const appended: Event[] = [];
    for (let i = 0; i < 10; i++) {
      appended.push(...(await repo.append([ev(newUuid(), { tenantUuid: i % 3 === 0 ? t1 : t2 }), ev(newUuid())])));
    }
    const only1 = (await collectPages(repo.readAll({ tenantUuid: t1, batchSize: 2 }))).flat();
    expect(only1).toEqual(appended.filter((e) => e.tenantUuid === t1));
    expect(only1).toHaveLength(4);
    const none = (await collectPages(repo.readAll({ tenantUuid: "" }))).flat();
    expect(none).toEqual(appended.filter((e) => e.tenantUuid === ""));
    expect(await collectPages(repo.readAll({ tenantUuid: newUuid() }))).toEqual([]);
  });

  test("readAll filters by eventPaths and keeps pages full", async (repo) => {
    const names = ["Created", "Renamed", "Deleted"];
    const appended: Event[] = [];
    for (let i = 0; i < 30; i++) {
      appended.push(...(await repo.append([ev(newUuid(), { domain: i % 2 === 0 ? "Todo" : "Note", name: names[i % 3] as string })])));
    }
    const paths = ["Todo.Created", "Note.Deleted", "Todo.Missing"];
    const expected = appended.filter((e) => paths.includes(`${e.domain}.${e.name}`));
    expect(expected).toHaveLength(10);
    const pages = await collectPages(repo.readAll({ eventPaths: paths, batchSize: 4 }));
    expect(pages.map((p) => p.length)).toEqual([4, 4, 2]);
    expect(pages.flat()).toEqual(expected);
    expect(await collectPages(repo.readAll({ eventPaths: ["Nope.Nothing"] }))).toEqual([]);
  });

  test("readAll combines tenantUuid, eventPaths and position bounds", async (repo) => {
    const t = newUuid();
    const appended: Event[] = [];
    for (let i = 0; i < 40; i++) {
      appended.push(...(await repo.append([ev(newUuid(), { tenantUuid: i % 2 === 0 ? t : "", name: i % 4 < 2 ? "A" : "B" })])));
    }
    const after = (appended[5] as Event).position;
    const until = (appended[33] as Event).position;
    const expected = appended.filter((e) => e.position > after && e.position <= until && e.tenantUuid === t && e.name === "A");
    const got = (
      await collectPages(repo.readAll({ afterPosition: after, untilPosition: until, tenantUuid: t, eventPaths: ["Test.A"], batchSize: 3 }))
    ).flat();
    expect(got).toEqual(expected);
    expect(got.length).toBeGreaterThan(3);
  });

  test("readAll streams a large store in pages (2,500 events, batchSize 1000)", async (repo) => {
    const appended = await seed(repo, 2500, 500, 25);
    const pages = await collectPages(repo.readAll({ batchSize: 1000 }));
    expect(pages.map((p) => p.length)).toEqual([1000, 1000, 500]);
    const read = pages.flat();
    expectStrictlyIncreasing(positions(read));
    expect(positions(read)).toEqual(positions(appended));
    // The default batch size is 1000 as well.
    expect((await collectPages(repo.readAll())).map((p) => p.length)).toEqual([1000, 1000, 500]);
  }, 60_000);

  test("readAll stops when its signal is aborted mid-iteration", async (repo) => {
    await seed(repo, 2500, 500, 25);
    const ac = new AbortController();
    const pages: Event[][] = [];
    for await (const page of repo.readAll({ batchSize: 1000, signal: ac.signal })) {
      pages.push(page);
      ac.abort();
    }
    expect(pages.map((p) => p.length)).toEqual([1000]);
  }, 60_000);

  test("readAll with an already aborted signal yields nothing", async (repo) => {
    await seed(repo, 20, 20, 2);
    const ac = new AbortController();
    ac.abort();
    expect(await collectPages(repo.readAll({ signal: ac.signal }))).toEqual([]);
  });

  test("readAll is lazy: events appended during iteration are read", async (repo) => {
    const appended = await seed(repo, 250, 250, 5);
    const read: Event[] = [];
    let pageNo = 0;
    for await (const page of repo.readAll({ batchSize: 100 })) {
      read.push(...page);
      if (pageNo++ === 0) appended.push(...(await repo.append(evs(newUuid(), 10))));
    }
    expect(read).toHaveLength(260);
    expect(positions(read)).toEqual(positions(appended));
  });

  test("readAll can be abandoned after the first page", async (repo) => {
    await seed(repo, 2500, 500, 25);
    for (let i = 0; i < 25; i++) {
      let pages = 0;
      for await (const page of repo.readAll({ batchSize: 100 })) {
        expect(page).toHaveLength(100);
        pages++;
        break;
      }
      expect(pages).toBe(1);
    }
    // Abandoned readers released whatever they held: the store still reads and writes.
    const agg = newUuid();
    await repo.append([ev(agg)]);
    expect(await repo.loadAggregate(agg)).toHaveLength(1);
    expect((await collectPages(repo.readAll({ batchSize: 1000 }))).flat()).toHaveLength(2501);
  }, 60_000);

  test("readAll rejects a batchSize below 1 with INVALID_REQUEST", async (repo) => {
    await repo.append([ev(newUuid())]);
    await expectRejectsWith(() => collectPages(repo.readAll({ batchSize: 0 })), "INVALID_REQUEST");
    await expectRejectsWith(() => collectPages(repo.readAll({ batchSize: -5 })), "INVALID_REQUEST");
  });

  // --- head, info --------------------------------------------------------------------------

  test("headPosition is 0 when empty and the last position after appends", async (repo) => {
    expect(await repo.headPosition()).toBe(0);
    const r = await repo.append(evs(newUuid(), 3));
    expect(await repo.headPosition()).toBe(r[2]?.position);
    const r2 = await repo.append([ev(newUuid())]);
    expect(await repo.headPosition()).toBe(r2[0]?.position);
  });

  test("info reports numItems and lastItemCreatedAt", async (repo) => {
    const empty = await repo.info();
    expect(empty.numItems).toBe(0);
    expect(empty.lastItemCreatedAt).toBe(0);
    expect(typeof empty.storeType).toBe("string");
    expect(empty.storeType.length).toBeGreaterThan(0);
    expectNoSecret(empty.connectionInfo);
    await repo.append(evs(newUuid(), 3));
    const r = await repo.append(evs(newUuid(), 2));
    const info = await repo.info();
    expect(info.numItems).toBe(5);
    expect(info.lastItemCreatedAt).toBe(r[1]?.createdAt);
    expect(info.storeType).toBe(empty.storeType);
  });

  // --- round trips and isolation ----------------------------------------------------------

  test("payloads keep nested JSON exactly", async (repo) => {
    const payload = {
      text: 'héllo wörld — 日本語 🎉 "quoted" \\ back\nline\ttab',
      emptyString: "",
      int: 42,
      negative: -17,
      zero: 0,
      float: 3.14159,
      small: 1.5e-7,
      big: 9007199254740991,
      bool: true,
      no: false,
      nothing: null,
      list: [1, "two", null, { three: [3] }, [], {}],
      nested: { a: { b: { c: { d: ["deep"] } } } },
      emptyObject: {},
      emptyArray: [],
      "key with spaces": "ok",
      ключ: "значение",
    };
    const agg = newUuid();
    await repo.append([ev(agg, { payload })]);
    const [stored] = await repo.loadAggregate(agg);
    expect(stored?.payload).toEqual(payload);
    const read = await readEverything(repo);
    expect(read[0]?.payload).toEqual(payload);
  });

  describeEventRepositoryPayloadContract(test);
  describeEventPayloadSealingContract(test);

  test("reqCtx keeps every field", async (repo) => {
    const reqCtx: RequestContext = {
      senderAccountUuid: newUuid(),
      senderSessionUuid: newUuid(),
      senderIdentityUuid: newUuid(),
      senderTenantUuid: newUuid(),
      targetTenantUuid: newUuid(),
      targetAggregateUuid: newUuid(),
      targetAggregateVersion: 7,
      traceId: "trace-Ω",
      attributes: { ip: "127.0.0.1", tags: ["a", "b"], nested: { n: 1, ok: true, none: null } },
    };
    const agg = newUuid();
    await repo.append([ev(agg, { reqCtx }), ev(agg, { reqCtx })]);
    const stream = await repo.loadAggregate(agg);
    expect(stream.map((e) => e.reqCtx)).toEqual([reqCtx, reqCtx]);
    expect((await readEverything(repo)).map((e) => e.reqCtx)).toEqual([reqCtx, reqCtx]);
  });

  test("stored events cannot be changed through given or returned objects", async (repo) => {
    const agg = newUuid();
    const reqCtx: RequestContext = { traceId: "original" };
    const input = ev(agg, { reqCtx, tenantUuid: "t" });
    const [returned] = await repo.append([input]);
    const snapshot = structuredClone(returned);
    // Change what the caller gave.
    input.tenantUuid = "changed";
    input.name = "Changed";
    reqCtx.traceId = "changed";
    // Try to change what the store returned (frozen objects throw in strict mode: fine).
    const tamper = (e: Event | undefined): void => {
      if (e === undefined) return;
      for (const f of [
        () => Object.assign(e, { version: 99, name: "Tampered", tenantUuid: "x" }),
        () => Object.assign(e.reqCtx, { traceId: "tampered" }),
      ]) {
        try {
          f();
        } catch {
          // A frozen event is a fine way to protect the store.
        }
      }
    };
    tamper(returned);
    const [loaded] = await repo.loadAggregate(agg);
    tamper(loaded);
    for (const page of await collectPages(repo.readAll())) page.forEach(tamper);
    expect(await repo.loadAggregate(agg)).toEqual([snapshot]);
    expect(await readEverything(repo)).toEqual([snapshot]);
    expect((await repo.loadAggregates([agg])).get(agg)).toEqual([snapshot]);
  });

  // --- onAppend ---------------------------------------------------------------------------------

  test("onAppend is notified with the stored events in commit order", async (repo, ctx) => {
    if (typeof repo.onAppend !== "function") return ctx.skip("the repository has no onAppend");
    const calls: Event[][] = [];
    const off = repo.onAppend((events) => calls.push([...events]));
    const a = newUuid();
    const r1 = await repo.append([ev(a), ev(newUuid())]);
    const r2 = await repo.append([ev(a)]);
    await expectRejectsWith(() => repo.append([ev(a, { version: 1 })]), "CONFLICT");
    const r3 = await repo.append(evs(newUuid(), 3));
    await settle();
    expect(calls).toEqual([r1, r2, r3]);
    expect(calls.flat()).toEqual(await readEverything(repo));
    off();
  });

  test("onAppend sees every concurrent append exactly once", async (repo, ctx) => {
    if (typeof repo.onAppend !== "function") return ctx.skip("the repository has no onAppend");
    const calls: Event[][] = [];
    repo.onAppend((events) => calls.push([...events]));
    const results = await Promise.all(Array.from({ length: 15 }, () => repo.append(evs(newUuid(), 2))));
    await settle();
    const byPos = (x: Event[], y: Event[]): number => (x[0] as Event).position - (y[0] as Event).position;
    expect([...calls].sort(byPos)).toEqual([...results].sort(byPos));
    expect(calls.flat().length).toBe(30);
  });

  test("onAppend unsubscribe stops notifications", async (repo, ctx) => {
    if (typeof repo.onAppend !== "function") return ctx.skip("the repository has no onAppend");
    let kept = 0;
    let dropped = 0;
    repo.onAppend((events) => {
      kept += events.length;
    });
    const off = repo.onAppend((events) => {
      dropped += events.length;
    });
    await repo.append([ev(newUuid())]);
    await settle();
    off();
    await repo.append([ev(newUuid()), ev(newUuid())]);
    await settle();
    expect(kept).toBe(3);
    expect(dropped).toBe(1);
  });

  // --- close -----------------------------------------------------------------------------------

  test("close is idempotent and later calls reject with STORE_CLOSED", async (repo) => {
    await repo.append([ev(newUuid())]);
    await expectClosedBehaviour(repo, () => repo.append([ev(newUuid())]));
    await expectRejectsWith(() => repo.loadAggregate(newUuid()), "STORE_CLOSED");
    await expectRejectsWith(() => repo.headPosition(), "STORE_CLOSED");
    await expectRejectsWith(() => collectPages(repo.readAll()), "STORE_CLOSED");
  });
});
