/**
 * An instance that loses a readmodel's lock steps back to standby and competes
 * for the lock again (docs/scaling.md), also when the loss is found by the
 * commit itself (the SQLite lease fence refuses a batch after another instance
 * took the lease over) or happens during a restoration. The data stays right
 * (the fence writes nothing), which is asserted first.
 */
import { describe, expect, it } from "vitest";
import { createFacade, withRestoreBatchSize } from "mneme";
import { createSqliteBackends } from "mneme/sqlite";
import { Counter, CounterTotals, Increment } from "../support/counter-domain.js";
import { until } from "../support/until.js";
import { expireLeases, sqliteScratch } from "../support/sqlite-scratch.js";

const scratch = sqliteScratch("sqlite-lockloss");

async function instance(filename: string, lockLeaseMs: number) {
  const f = createFacade({
    appName: "lock-loss",
    ...createSqliteBackends({ filename, pollIntervalMs: 20, lockLeaseMs }),
    delivery: { lockRetryMs: 50 },
  });
  f.registerDomain(Counter);
  const totals = new CounterTotals(f, "CounterTotals", withRestoreBatchSize(1000));
  f.registerReadmodel(totals);
  await f.start();
  scratch.keep(f);
  return { f, totals, state: () => f.runtime.listEventHandlers()[0]!.state };
}

describe("an instance whose lease was taken over", () => {
  it("a live batch refused by the fence: nothing written twice, and the handler stands by", async () => {
    const filename = scratch.newFile();
    const a = await instance(filename, 3_600_000); // a's heartbeat never runs here: it only learns from the fence
    const b = await instance(filename, 5000);
    for (let i = 0; i < 3; i++) await a.f.dispatch(Increment, { counterUuid: "c", by: 1 }, { waitToFinish: true });
    expireLeases(filename);
    await until(() => b.state() === "running", "b takes the expired lease");
    await b.f.dispatch(Increment, { counterUuid: "c", by: 1 }, { waitToFinish: true });
    await until(() => a.state() !== "running", "a's commit of position 4 is refused");
    expect(b.totals.applied).toEqual([4]);
    expect(await b.totals.total("c")).toBe(4);
    expect(a.state()).toBe("standby");
  });

  it("a restoration that loses the lease: the instance stands by and takes over later", async () => {
    const filename = scratch.newFile();
    const a = await instance(filename, 3_600_000);
    const b = await instance(filename, 5000);
    for (let i = 0; i < 20; i++) await a.f.dispatch(Increment, { counterUuid: "c", by: 1 }, { waitToFinish: true });
    a.totals.delayMs = 20;
    const restore = a.f.runtime
      .controlEventHandler({ action: "restore", eventHandlerName: "CounterTotals", restoreFromZero: true })
      .catch((e: unknown) => e);
    await until(() => a.totals.applied.length >= 3, "a is restoring");
    a.totals.delayMs = 400; // a stalls in the middle of its batch
    await new Promise((r) => setTimeout(r, 30));
    expireLeases(filename);
    await until(() => b.state() === "running", "b takes the expired lease");
    a.totals.delayMs = 0; // a wakes up: the rest of its batch is quick, then its commit meets the fence
    expect(await restore).toMatchObject({ code: "RESTORE_CANCELLED" });
    await until(async () => (await b.totals.total("c")) === 20, "b restores from a's last committed checkpoint");
    await b.f.stop(); // the lease is free again
    await until(() => a.state() === "running", "a takes the readmodel back");
    expect(await a.totals.total("c")).toBe(20);
  });
});
