/**
 * Fencing of event handlers across instances on one SQLite file: a batch that
 * was in flight when its instance lost the lease writes nothing, also when
 * that instance has taken the lease back meanwhile (its token is newer than
 * the batch's); each event is applied once and the checkpoint never moves
 * back. And a standby lists the holder and its position, and a command
 * waiting on an instance whose rebuild loses the lease is answered.
 */
import { describe, expect, it } from "vitest";
import { createFacade } from "mneme";
import { createSqliteBackends, type SqliteReadmodelStoreBackend } from "mneme/sqlite";
import { runnerOf } from "../../src/readmodel/base-event-handler.js";
import { Counter, Increment } from "../support/counter-domain.js";
import { gate, GatedTotals } from "../support/gated-totals.js";
import { until } from "../support/until.js";
import { expireLeases, sqliteScratch } from "../support/sqlite-scratch.js";

const scratch = sqliteScratch("sqlite-fence");

function instance(filename: string, systemEvents = false) {
  // A lease far longer than the test: nothing expires by itself, the test decides (no timing).
  const backends = createSqliteBackends({ filename, pollIntervalMs: 20, lockLeaseMs: 3_600_000 });
  const f = createFacade({ appName: "fence", ...backends, systemEvents, delivery: { lockRetryMs: 20 } });
  f.registerDomain(Counter);
  const totals = new GatedTotals(f);
  f.registerReadmodel(totals);
  scratch.keep(f);
  const backend = backends.readmodelStoreBackend as SqliteReadmodelStoreBackend;
  return { f, totals, backend, info: () => f.runtime.listEventHandlers().find((h) => h.eventHandlerName === "GatedTotals")! };
}

describe("fencing on SQLite: two facades on one file", () => {
  it("a batch in flight while its lease was taken over, and taken back, writes nothing; each event applies once, the checkpoint never moves back", async () => {
    const filename = scratch.newFile();
    const a = instance(filename);
    const b = instance(filename);
    await a.f.start();
    await b.f.start();
    expect([a.info().state, b.info().state]).toEqual(["running", "standby"]);
    const counter = "c";
    await a.f.dispatch(Increment, { counterUuid: counter, by: 1 }, { waitToFinish: true });

    // The standby lists the holder and the holder's position.
    const aId = a.f.runtime.systemInfo().instanceId;
    expect(a.info().holder).toBe(aId);
    await until(() => b.info().holder === aId && b.info().lastPosition === 1, "b lists a as the holder at 1");

    // a's batch of e2 has begun when its lease runs out (a stalls) and b takes it over.
    const held = gate();
    const entered = gate();
    a.totals.holdAt = { position: 2, entered: entered.open, wait: held.wait };
    await a.f.dispatch(Increment, { counterUuid: counter, by: 10 });
    await entered.wait;
    expireLeases(filename);
    await until(() => b.info().state === "running", "b takes over");
    await b.f.dispatch(Increment, { counterUuid: counter, by: 100 }, { waitToFinish: true });
    expect(await b.backend.getCheckpoint("GatedTotals")).toBe(3);

    // b goes away; a learns it lost the lease, takes it back (a new token), and its old batch goes on.
    await b.f.stop();
    a.backend.leaseLocks.renew();
    await until(() => a.backend.heldLockNames().includes("GatedTotals"), "a takes the lease back");
    held.open();
    await until(() => a.info().state === "running" && a.info().restorationState === "restored", "a runs again");
    await runnerOf(a.totals).idle();

    expect(await a.backend.getCheckpoint("GatedTotals")).toBe(3);
    expect(await a.totals.total(counter)).toBe(111);
    expect(await a.totals.appliedTimes()).toEqual({ 1: 1, 2: 1, 3: 1 });
    await a.f.dispatch(Increment, { counterUuid: counter, by: 1000 }, { waitToFinish: true });
    expect(await a.backend.getCheckpoint("GatedTotals")).toBe(4);
    expect(await a.totals.total(counter)).toBe(1111);
    expect(await a.totals.appliedTimes()).toEqual({ 1: 1, 2: 1, 3: 1, 4: 1 });
  });

  it("a waitToFinish begun during a rebuild that then loses its lease is answered from the holder's checkpoint", async () => {
    const filename = scratch.newFile();
    const a = instance(filename, true);
    const b = instance(filename);
    await a.f.start();
    await b.f.start();
    await a.f.dispatch(Increment, { counterUuid: "c", by: 1 }, { waitToFinish: true });

    // a rebuilds from zero; its first batch is held open (a stalls).
    const held = gate();
    const entered = gate();
    a.totals.holdAt = { position: 1, entered: entered.open, wait: held.wait };
    const rebuild = runnerOf(a.totals)
      .startRestore({ fromZero: true })
      .done.catch((e: unknown) => e);
    await entered.wait;

    // A command on a waits for its event while a is still the holder: a catches it for the rebuild.
    const appended = gate();
    const off = a.f.systemEvents.subscribe((e) => {
      if (e.kind === "EventsAppended") appended.open();
    });
    const waited = a.f.dispatch(Increment, { counterUuid: "c", by: 10 }, { waitToFinish: true });
    await appended.wait; // published right before the dispatch starts waiting for the handlers
    off();

    // a's lease runs out, b takes over and applies the event; then a's held batch meets the fence.
    expireLeases(filename);
    await until(() => b.info().state === "running", "b takes over");
    await until(async () => (await b.backend.getCheckpoint("GatedTotals")) === 2, "b applies the command's event");
    held.open();
    expect(await rebuild).toMatchObject({ code: "RESTORE_CANCELLED" });
    expect(a.info().state).toBe("standby");

    // The waiting dispatch learns that the holder applied its event (it used to wait until a took the lock back).
    let bound: ReturnType<typeof setTimeout> | undefined;
    const stillWaiting = new Promise<"still waiting">((r) => (bound = setTimeout(() => r("still waiting"), 10_000)));
    const settled = await Promise.race([waited, stillWaiting]).finally(() => clearTimeout(bound));
    expect(settled).toMatchObject({ handlerErrors: [] });
    expect(await b.totals.appliedTimes()).toEqual({ 1: 1, 2: 1 });
    expect(await b.totals.total("c")).toBe(11);
  });

  it("fencing tokens grow with every take, by any instance, and survive a release (the row is kept)", async () => {
    const filename = scratch.newFile();
    const a = instance(filename);
    const b = instance(filename);
    await a.backend.init();
    await b.backend.init();
    const tokens: number[] = [];
    expect(await a.backend.tryLock("h", "A")).toBe(true);
    tokens.push(a.backend.fencingToken("h")!);
    expect(await a.backend.tryLock("h", "A")).toBe(true); // a renewal keeps it
    expect(a.backend.fencingToken("h")).toBe(tokens[0]);
    expect(await b.backend.tryLock("h", "B")).toBe(false);
    expect(b.backend.fencingToken("h")).toBeUndefined();
    expect(await b.backend.lockHolder("h")).toBe("A");
    await a.backend.unlock("h");
    expect(await b.backend.lockHolder("h")).toBeUndefined();
    expect(await b.backend.tryLock("h", "B")).toBe(true);
    tokens.push(b.backend.fencingToken("h")!);
    expireLeases(filename);
    expect(await a.backend.tryLock("h", "A")).toBe(true);
    tokens.push(a.backend.fencingToken("h")!);
    expect(tokens).toEqual([tokens[0], tokens[0]! + 1, tokens[0]! + 2]);

    // A transaction fenced by an old token writes nothing.
    await expect(
      b.backend.transaction(async () => {
        await b.backend.setCheckpoint("h", 7);
        await b.backend.checkFencingToken("h", tokens[1]!);
      }),
    ).rejects.toMatchObject({ code: "INVALID_STATE" });
    expect(await a.backend.getCheckpoint("h")).toBe(0);
    await a.backend.transaction(async () => {
      await a.backend.setCheckpoint("h", 7);
      await a.backend.checkFencingToken("h", tokens[2]!);
    });
    expect(await b.backend.getCheckpoint("h")).toBe(7);
    await expect(a.backend.checkFencingToken("h", tokens[2]!)).rejects.toMatchObject({ code: "INVALID_REQUEST" });
  });
});
