/**
 * A restore from zero builds a new generation beside the served one and
 * switches in one backend transaction: a crash or an error before the switch
 * leaves the served documents at their checkpoint (the partial generation is
 * discarded at the next start), never an emptied or partial readmodel.
 * SQLite: a real child process killed with SIGKILL while the new generation is
 * emptied, and while it is being filled, then a restart compared with a full
 * replay. Postgres: an error injected by a trigger into the switch. Memory: an
 * error thrown while the new generation is reset.
 */
import { fork } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import pg from "pg";
import { afterAll, describe, expect, it } from "vitest";
import { createFacade, type Facade, type FacadeOptions, newUuid, withReadmodelStoreBackend } from "mneme";
import { createPostgresBackends } from "mneme/postgres";
import { createSqliteBackends } from "mneme/sqlite";
import { Counter, CounterTotals, Increment, IncrementMany } from "../support/counter-domain.js";
import { MemoryReadmodelStoreBackend } from "mneme/memory";

const dir = mkdtempSync(join(tmpdir(), "mneme-restore-crash-"));
const DATABASE_URL = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test";
const admin = new pg.Pool({ connectionString: DATABASE_URL, max: 2 });
const schemas: string[] = [];
const facades: Facade[] = [];

afterAll(async () => {
  for (const f of facades) await f.stop().catch(() => undefined);
  for (const s of schemas) await admin.query(`DROP SCHEMA IF EXISTS "${s}" CASCADE`);
  await admin.end();
  rmSync(dir, { recursive: true, force: true });
});

/** Appends 3 x 10 increments over four counters (some in one command); returns the totals a full replay gives. */
async function seed(f: Facade): Promise<Record<string, number>> {
  const expected: Record<string, number> = {};
  for (let i = 0; i < 10; i++) {
    const r =
      i % 3 === 0
        ? await f.dispatch(IncrementMany, { counterUuids: ["c1", "c2", "c3"], by: i + 1 }, { waitToFinish: true })
        : await f.dispatch(Increment, { counterUuid: `c${i % 4}`, by: i + 1 }, { waitToFinish: true });
    for (const e of r.events) expected[e.aggregateUuid] = (expected[e.aggregateUuid] ?? 0) + i + 1;
  }
  return expected;
}

/** A facade with CounterTotals on the given backends plus "FullReplay": the same readmodel kept in memory, so it replays everything at start. */
async function reopen(backends: FacadeOptions): Promise<{ f: Facade; totals: CounterTotals; replay: CounterTotals }> {
  const f = createFacade({ appName: "restore-crash", ...backends });
  facades.push(f);
  f.registerDomain(Counter);
  const totals = new CounterTotals(f);
  const replay = new CounterTotals(f, "FullReplay", withReadmodelStoreBackend(new MemoryReadmodelStoreBackend()));
  f.registerReadmodel(totals);
  f.registerReadmodel(replay);
  await f.start();
  return { f, totals, replay };
}

async function expectFullReplayState(
  f: Facade,
  totals: CounterTotals,
  replay: CounterTotals,
  expected: Record<string, number>,
): Promise<void> {
  const head = await f.eventRepository.headPosition();
  expect(totals.state).toBe("running");
  expect(replay.applied).toEqual(Array.from({ length: head }, (_, i) => i + 1));
  expect(await replay.allTotals()).toEqual(expected);
  expect(await totals.allTotals()).toEqual(await replay.allTotals());
  expect(totals.lastPosition).toBe(head);
}

describe("restore from zero: a crash or an error before the switch leaves the served generation whole", () => {
  for (const killAt of ["after-clear", "first-replayed"] as const) {
    it(`SQLite: a process killed with SIGKILL ${killAt === "after-clear" ? "while the new generation is emptied" : "while applying the first replayed event"} restarts into the state of a full replay, the partial generation discarded`, async () => {
      const filename = join(dir, `${killAt}.db`);
      const first = createFacade({ appName: "restore-crash", ...createSqliteBackends({ filename }) });
      first.registerDomain(Counter);
      const firstTotals = new CounterTotals(first);
      first.registerReadmodel(firstTotals);
      await first.start();
      const expected = await seed(first);
      expect(await firstTotals.allTotals()).toEqual(expected);
      await first.stop();

      const child = fork(fileURLToPath(new URL("../support/restore-crash-process.ts", import.meta.url)), [filename, killAt], {
        execArgv: ["--import", "tsx"],
        cwd: fileURLToPath(new URL("../..", import.meta.url)),
        stdio: ["ignore", "inherit", "inherit", "ipc"],
      });
      const exit = await new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve, reject) => {
        child.once("error", reject);
        child.once("exit", (code, signal) => resolve({ code, signal }));
      });
      expect(exit).toEqual({ code: null, signal: "SIGKILL" });

      const { f, totals, replay } = await reopen(createSqliteBackends({ filename }));
      await expectFullReplayState(f, totals, replay, expected);
      expect(await f.readmodelStoreBackend.getCheckpoint("CounterTotals#rebuild")).toBe(0);
      expect(await f.readmodelStoreBackend.collection("CounterTotals#rebuild:totals").count()).toBe(0);
    }, 60_000);
  }

  it("Postgres: an error in the switch (a trigger refuses it) leaves documents and checkpoint as they were; a restart equals a full replay", async () => {
    const schema = `mneme_rc_${newUuid().replace(/-/g, "").slice(-16)}`;
    schemas.push(schema);
    const backends = () => createPostgresBackends({ connectionString: DATABASE_URL, schema, poolSize: 5, pollIntervalMs: 100 });
    const first = createFacade({ appName: "restore-crash", ...backends() });
    facades.push(first);
    first.registerDomain(Counter);
    const firstTotals = new CounterTotals(first);
    first.registerReadmodel(firstTotals);
    await first.start();
    const expected = await seed(first);
    const head = await first.eventRepository.headPosition();

    // The switch resets the new generation's checkpoint from its position to 0 in its transaction.
    await admin.query(`CREATE FUNCTION "${schema}".refuse_reset() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN RAISE EXCEPTION 'injected: the checkpoint reset of % is refused', NEW.handler; END $$`);
    await admin.query(`CREATE TRIGGER refuse_reset BEFORE UPDATE ON "${schema}".readmodel_checkpoints
      FOR EACH ROW WHEN (NEW.handler = 'CounterTotals#rebuild' AND OLD.position > 0 AND NEW.position = 0)
      EXECUTE FUNCTION "${schema}".refuse_reset()`);
    await expect(firstTotals.restoreState(undefined, { fromZero: true }).done).rejects.toThrow(/injected/);
    // nothing of the switch was written: the served documents are there, at the old checkpoint
    expect(await firstTotals.allTotals()).toEqual(expected);
    // the new generation could not be discarded either (the trigger refuses that too): it is left for the restart
    expect(await first.readmodelStoreBackend.getCheckpoint("CounterTotals#rebuild")).toBe(head);
    expect(await first.readmodelStoreBackend.getCheckpoint("CounterTotals")).toBe(head);
    await first.stop();
    await admin.query(`DROP TRIGGER refuse_reset ON "${schema}".readmodel_checkpoints`);

    const { f, totals, replay } = await reopen(backends());
    await expectFullReplayState(f, totals, replay, expected);
    expect(await f.readmodelStoreBackend.getCheckpoint("CounterTotals#rebuild")).toBe(0);
    expect(await f.readmodelStoreBackend.collection("CounterTotals#rebuild:totals").count()).toBe(0);
    // and the restore from zero works once the error is gone
    await totals.restoreState(undefined, { fromZero: true }).done;
    expect(await totals.allTotals()).toEqual(expected);
  }, 60_000);

  it("memory: an error while the new generation is reset leaves the readmodel whole; start resumes into the state of a full replay", async () => {
    let failReset = false;
    class FailingReset extends CounterTotals {
      protected override async resetState(): Promise<void> {
        await super.resetState();
        if (failReset) throw new Error("injected: while the new generation is reset");
      }
    }
    const f = createFacade({ appName: "restore-crash" });
    facades.push(f);
    f.registerDomain(Counter);
    const totals = new FailingReset(f);
    f.registerReadmodel(totals);
    await f.start();
    const expected = await seed(f);
    failReset = true;
    await expect(totals.restoreState(undefined, { fromZero: true }).done).rejects.toThrow(/injected/);
    expect(totals.state).toBe("failed");
    expect(await totals.allTotals()).toEqual(expected);
    failReset = false;
    await f.runtime.controlEventHandler({ action: "start", eventHandlerName: "CounterTotals" });
    expect(totals.state).toBe("running");
    expect(await totals.allTotals()).toEqual(expected);
    await f.dispatch(Increment, { counterUuid: "c1", by: 100 }, { waitToFinish: true });
    expect(await totals.total("c1")).toBe(expected.c1! + 100);
  });
});
