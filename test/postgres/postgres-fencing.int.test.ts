/**
 * Fencing of event handlers across instances on one Postgres schema: an
 * instance whose lock connection was killed while a batch, a rebuild's switch
 * or an outbox write was in flight writes nothing once another instance took
 * the lock over; every event is applied once and the checkpoint never moves
 * back. And a standby lists the holder and its position.
 */
import { afterAll, describe, expect, it } from "vitest";
import { createFacade, type Facade } from "mneme";
import type { ReadmodelStoreBackend } from "mneme/store";
import { createPostgresBackends, type PgStatement } from "mneme/postgres";
import { Reactor } from "mneme/reactions";
import { runnerOf } from "../../src/readmodel/base-event-handler.js";
import { Counter, Increment, Incremented } from "../support/counter-domain.js";
import { gate, GatedTotals } from "../support/gated-totals.js";
import { postgresScratch } from "../support/postgres-scratch.js";
import { until } from "../support/until.js";

const pg = postgresScratch("mneme_fence");
const facades: Facade[] = [];

afterAll(async () => {
  for (const f of facades) await f.stop().catch(() => undefined);
});

interface Instance {
  f: Facade;
  backend: ReadmodelStoreBackend;
  /** The session pid of this instance's lock client (seen by the statement hook). */
  lockPid: () => number | undefined;
  /** Set to hold the next statement whose text matches, until the gate opens. */
  holdStatement: { match: (s: PgStatement) => boolean; entered: () => void; wait: Promise<void> } | undefined;
}

/**
 * One app instance on `schema`. `lockRetryMs` is how often it tries to take a
 * lock in standby: the instance whose lock connection a test kills gets a
 * longer one (1 s against 30 ms), so the other one is the instance that takes
 * over (it has tried some 30 times before the first one tries again).
 */
function instance(schema: string, setup: (f: Facade) => void, lockRetryMs = 30): Instance {
  let lockPid: number | undefined;
  const inst: Instance = {
    f: undefined as unknown as Facade,
    backend: undefined as unknown as ReadmodelStoreBackend,
    lockPid: () => lockPid,
    holdStatement: undefined,
  };
  const backends = createPostgresBackends({
    pool: pg.newPool(6),
    schema,
    pollIntervalMs: 50,
    onStatement: async (s) => {
      if (s.kind === "lock") lockPid = s.processId;
      const hold = inst.holdStatement;
      if (hold !== undefined && hold.match(s)) {
        inst.holdStatement = undefined;
        hold.entered();
        await hold.wait;
      }
    },
  });
  const f = createFacade({ appName: "fence", ...backends, delivery: { lockRetryMs } });
  f.registerDomain(Counter);
  setup(f);
  facades.push(f);
  inst.f = f;
  inst.backend = backends.readmodelStoreBackend;
  return inst;
}

/** Ends the session that holds `inst`'s advisory locks, as an outside failure would. */
async function killLockConnection(inst: Instance): Promise<void> {
  const pid = inst.lockPid();
  expect(pid).toBeTypeOf("number");
  await pg.pool.query("SELECT pg_terminate_backend($1)", [pid]);
}

const listing = (f: Facade, name: string) => f.runtime.listEventHandlers().find((h) => h.eventHandlerName === name)!;

describe("fencing on Postgres: two instances on one schema", () => {
  it("a batch in flight when the lock connection dies writes nothing after the take-over; each event applies once, the checkpoint never moves back; the standby lists the holder", async () => {
    const schema = pg.newSchema();
    let totalsA!: GatedTotals;
    let totalsB!: GatedTotals;
    const a = instance(schema, (f) => f.registerReadmodel((totalsA = new GatedTotals(f))), 1000);
    const b = instance(schema, (f) => f.registerReadmodel((totalsB = new GatedTotals(f))));
    await a.f.start();
    await b.f.start();
    expect(listing(a.f, "GatedTotals").state).toBe("running");
    expect(listing(b.f, "GatedTotals").state).toBe("standby");
    const counter = "c1";
    await a.f.dispatch(Increment, { counterUuid: counter, by: 1 }, { waitToFinish: true });

    // The standby shows who processes the handler and where it is, not 0.
    const aId = a.f.runtime.systemInfo().instanceId;
    expect(listing(a.f, "GatedTotals").holder).toBe(aId);
    await until(
      () => listing(b.f, "GatedTotals").holder === aId && listing(b.f, "GatedTotals").lastPosition === 1,
      "b lists a as the holder at 1",
    );

    // a is slow on e2: its batch has begun when its lock connection is killed.
    const held = gate();
    const entered = gate();
    totalsA.holdAt = { position: 2, entered: entered.open, wait: held.wait };
    await a.f.dispatch(Increment, { counterUuid: counter, by: 10 });
    await entered.wait;
    await killLockConnection(a);
    await until(() => listing(b.f, "GatedTotals").state === "running", "b takes over");
    expect(listing(a.f, "GatedTotals").state).toBe("standby");
    await b.f.dispatch(Increment, { counterUuid: counter, by: 100 }, { waitToFinish: true });
    await until(async () => (await b.backend.getCheckpoint("GatedTotals")) === 3, "b applies e2 and e3");
    expect(await totalsB.total(counter)).toBe(111);

    // a's batch goes on now, and must write nothing.
    held.open();
    await runnerOf(totalsA).idle();
    expect(await b.backend.getCheckpoint("GatedTotals")).toBe(3);
    expect(await totalsB.total(counter)).toBe(111);
    expect(await totalsB.appliedTimes()).toEqual({ 1: 1, 2: 1, 3: 1 });
    expect(listing(a.f, "GatedTotals").state).toBe("standby");
    await until(() => listing(a.f, "GatedTotals").holder === b.f.runtime.systemInfo().instanceId, "a lists b as the holder");
    await until(() => listing(a.f, "GatedTotals").lastPosition === 3, "a lists b's position");

    // The next take-over starts from 3 and applies nothing twice.
    await b.f.stop();
    await until(() => listing(a.f, "GatedTotals").state === "running", "a takes over again");
    await a.f.dispatch(Increment, { counterUuid: counter, by: 1000 }, { waitToFinish: true });
    expect(await a.backend.getCheckpoint("GatedTotals")).toBe(4);
    expect(await totalsA.total(counter)).toBe(1111);
    expect(await totalsA.appliedTimes()).toEqual({ 1: 1, 2: 1, 3: 1, 4: 1 });
  });

  it("a rebuild's switch in flight when the lock connection dies writes nothing after the take-over", async () => {
    const schema = pg.newSchema();
    let totalsA!: GatedTotals;
    let totalsB!: GatedTotals;
    const a = instance(schema, (f) => f.registerReadmodel((totalsA = new GatedTotals(f))), 1000);
    const b = instance(schema, (f) => f.registerReadmodel((totalsB = new GatedTotals(f))));
    await a.f.start();
    await b.f.start();
    const counter = "c2";
    await a.f.dispatch(Increment, { counterUuid: counter, by: 1 }, { waitToFinish: true });
    await a.f.dispatch(Increment, { counterUuid: counter, by: 10 }, { waitToFinish: true });

    // a rebuilds from zero; its switch (the statement that moves the new generation in) is held.
    const held = gate();
    const entered = gate();
    a.holdStatement = {
      match: (s) => s.kind === "transaction" && /^UPDATE .*readmodel_documents SET collection/.test(s.text),
      entered: entered.open,
      wait: held.wait,
    };
    const rebuild = runnerOf(totalsA).startRestore({ fromZero: true });
    await entered.wait;
    await killLockConnection(a);
    await until(() => listing(b.f, "GatedTotals").state === "running", "b takes over");
    await b.f.dispatch(Increment, { counterUuid: counter, by: 100 }, { waitToFinish: true });
    await until(async () => (await b.backend.getCheckpoint("GatedTotals")) === 3, "b applies e3");

    held.open();
    await expect(rebuild.done).rejects.toMatchObject({ code: "RESTORE_CANCELLED" });
    expect(await b.backend.getCheckpoint("GatedTotals")).toBe(3);
    expect(await totalsB.total(counter)).toBe(111);
    expect(await totalsB.appliedTimes()).toEqual({ 1: 1, 2: 1, 3: 1 });
    await b.f.dispatch(Increment, { counterUuid: counter, by: 1000 }, { waitToFinish: true });
    expect(await totalsB.total(counter)).toBe(1111);
    expect(await b.backend.getCheckpoint("GatedTotals")).toBe(4);
  });

  it("an outbox write of an instance whose lock connection died writes nothing", async () => {
    const schema = pg.newSchema();
    const attempts: string[] = [];
    const gates = { a: gate(), b: gate() };
    const entered = { a: gate(), b: gate() };
    const reactors: Record<string, Reactor> = {};
    const make = (who: "a" | "b") =>
      instance(
        schema,
        (f) => {
          const r = new Reactor(f, { name: "Notifier", domain: "Counter", retry: { maxAttempts: 1 }, pollMs: 20 }).on(
            Incremented,
            async (e) => {
              attempts.push(`${who}:${e.position}`);
              entered[who].open();
              await gates[who].wait;
              // a's attempt fails: without the fence it would mark the entry dead (maxAttempts 1).
              if (who === "a") throw new Error("the mail server said no");
            },
          );
          reactors[who] = r;
          f.registerReadmodel(r);
        },
        who === "a" ? 1000 : 30,
      );
    const a = make("a");
    const b = make("b");
    await a.f.start();
    await b.f.start();
    expect(reactors.a!.state).toBe("running");
    await a.f.dispatch(Increment, { counterUuid: "c3", by: 1 }, { waitToFinish: true });
    await entered.a.wait; // a's worker is delivering the entry
    await killLockConnection(a);
    await until(() => reactors.b!.state === "running", "b takes over");
    await entered.b.wait; // b's worker delivers the same entry (at least once)

    gates.a.open();
    await until(() => reactors.a!.state === "standby", "a stands by");
    await reactors.a!.outbox.drain().catch(() => undefined);
    const [entry] = await reactors.b!.outbox.list();
    expect(entry).toMatchObject({ status: "pending", attempts: 0 });
    expect(entry!.lastError).toBeUndefined();

    gates.b.open();
    await until(async () => (await reactors.b!.outbox.list()).length === 0, "b's delivery removes the entry");
    expect(attempts).toEqual(["a:1", "b:1"]);
  });
});
