/**
 * A restore asked for while a readmodel catches up by itself (issue 40, item
 * 4): a runner that goes live, or takes another instance's lock over, catches
 * up from its checkpoint by a restore of its own, listed as running. A
 * restore from zero asked for meanwhile (the finish step of a rolling
 * upgrade documents one) follows that catch-up instead of being refused with
 * "is restoring already". On SQLite (a real file) and Postgres (a real
 * schema), two instances each.
 */
import { afterAll, describe, expect, it } from "vitest";
import { createFacade, type Facade } from "mneme";
import { createPostgresBackends } from "mneme/postgres";
import { createSqliteBackends } from "mneme/sqlite";
import { Counter, Increment } from "../support/counter-domain.js";
import { gate, GatedTotals } from "../support/gated-totals.js";
import { DATABASE_URL, postgresScratch } from "../support/postgres-scratch.js";
import { sqliteScratch } from "../support/sqlite-scratch.js";
import { until } from "../support/until.js";

const files = sqliteScratch("restore-catch-up");
const pg = postgresScratch("mneme_rcu");
const facades: Facade[] = [];
const openAtEnd: (() => void)[] = [];
afterAll(async () => {
  for (const open of openAtEnd) open();
  for (const f of facades.reverse()) await f.stop().catch(() => undefined);
});

type Backends = () => Parameters<typeof createFacade>[0];

const places: [string, () => Backends][] = [
  [
    "SQLite",
    () => {
      const filename = files.newFile();
      return () => ({ appName: "rcu", ...createSqliteBackends({ filename, pollIntervalMs: 20 }) });
    },
  ],
  [
    "Postgres",
    () => {
      const schema = pg.newSchema();
      return () => ({ appName: "rcu", ...createPostgresBackends({ connectionString: DATABASE_URL, schema, pollIntervalMs: 20 }) });
    },
  ],
];

const tenant = { senderTenantUuid: "tenant-1" };

describe.each(places)("a restore from zero asked for while the readmodel catches up (%s)", (_name, place) => {
  it("follows the catch-up instead of being refused; every document is written once more from zero", async () => {
    const options = place();
    // One instance writes (without the readmodel), the other catches the readmodel up from zero when it starts.
    const writer = createFacade(options());
    writer.registerDomain(Counter);
    facades.push(writer);
    await writer.start();
    for (let i = 1; i <= 6; i++) await writer.dispatch(Increment, { counterUuid: `c${i % 3}`, by: i }, { reqCtx: tenant });

    const reader = createFacade(options());
    reader.registerDomain(Counter);
    const totals = new GatedTotals(reader);
    const held = gate();
    openAtEnd.push(held.open);
    const entered = gate();
    totals.holdAt = { position: 4, entered: entered.open, wait: held.wait };
    reader.registerReadmodel(totals);
    facades.push(reader);
    const started = reader.start();
    await entered.wait;
    await until(() => reader.state === "started", "the reader started (its catch-up goes on)");
    const info = () => reader.runtime.listEventHandlers().find((h) => h.eventHandlerName === "GatedTotals")!;
    expect(info()).toMatchObject({ state: "running", restorationState: "restoring" });

    // Asked for while the catch-up holds on position 4: it waits for the catch-up, then restores from zero.
    const restore = reader.runtime.controlEventHandler({ eventHandlerName: "GatedTotals", action: "restore", restoreFromZero: true });
    let settled = false;
    void restore.then(
      () => (settled = true),
      () => (settled = true),
    );
    await new Promise((r) => setTimeout(r, 50));
    expect(settled).toBe(false);
    held.open();
    await started;
    await expect(restore).resolves.toMatchObject({ state: "running" });
    expect(info()).toMatchObject({ state: "running", restorationState: "restored", lastPosition: 6 });

    // The sums, and each position applied once in the served generation.
    const expected = { c0: 3 + 6, c1: 1 + 4, c2: 2 + 5 };
    await until(async () => (await totals.total("c0")) === expected.c0, "the restored totals are served");
    for (const [counter, total] of Object.entries(expected)) expect(await totals.total(counter)).toBe(total);
    expect(await totals.appliedTimes()).toEqual({ 1: 1, 2: 1, 3: 1, 4: 1, 5: 1, 6: 1 });
  }, 60_000);
});
