/**
 * A property of fencing on one SQLite file: two facades, a readmodel, and a
 * random sequence of commands through either of them, leases expired (a
 * holder stalled), losses reported, handlers stopped and started, and
 * restores from zero. The shared checkpoint never moves back, and once
 * things settle every event is applied exactly once (per generation: a
 * restore from zero rebuilds the counts from 1).
 */
import Database from "better-sqlite3";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { createFacade } from "mneme";
import { createSqliteBackends, type SqliteReadmodelStoreBackend } from "mneme/sqlite";
import { runnerOf } from "../../src/readmodel/base-event-handler.js";
import { Counter, Increment } from "../support/counter-domain.js";
import { GatedTotals } from "../support/gated-totals.js";
import { until } from "../support/until.js";
import { sqliteScratch } from "../support/sqlite-scratch.js";

const scratch = sqliteScratch("fence-prop");

type Action =
  | { kind: "dispatch"; by: 0 | 1; wait: boolean }
  | { kind: "expire" }
  | { kind: "tell"; who: 0 | 1 }
  | { kind: "stopStart"; who: 0 | 1 }
  | { kind: "rebuild"; who: 0 | 1 };

const who = fc.constantFrom<0 | 1>(0, 1);
const action: fc.Arbitrary<Action> = fc.oneof(
  { weight: 5, arbitrary: fc.record({ kind: fc.constant("dispatch" as const), by: who, wait: fc.boolean() }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("expire" as const) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("tell" as const), who }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("stopStart" as const), who }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("rebuild" as const), who }) },
);

describe("fencing on SQLite, as a property", () => {
  it("across random take-overs, stops, starts and rebuilds: the checkpoint never moves back, each event applies once", async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(action, { minLength: 5, maxLength: 25 }), async (actions) => {
        const filename = scratch.newFile();
        const raw = new Database(filename, { fileMustExist: false });
        const insts = [0, 1].map(() => {
          const backends = createSqliteBackends({ filename, pollIntervalMs: 10, lockLeaseMs: 3_600_000 });
          const f = createFacade({ appName: "fence-prop", ...backends, delivery: { lockRetryMs: 10 } });
          f.registerDomain(Counter);
          const totals = new GatedTotals(f);
          totals.delayMs = 3; // batches stay in flight while the actions move the lease
          f.registerReadmodel(totals);
          scratch.keep(f);
          return { f, totals, backend: backends.readmodelStoreBackend as SqliteReadmodelStoreBackend };
        });
        // A failed run stops its facades too: left polling, they would slow the runs that shrink it.
        try {
          for (const i of insts) await i.f.start();
          let seen = 0;
          const checkpointNeverBack = async (): Promise<void> => {
            const cp = await insts[0]!.backend.getCheckpoint("GatedTotals");
            expect(cp).toBeGreaterThanOrEqual(seen);
            seen = cp;
          };
          const pending: Promise<unknown>[] = [];
          for (const a of actions) {
            if (a.kind === "dispatch") {
              const p = insts[a.by]!.f.dispatch(Increment, { counterUuid: "c", by: 1 }, { waitToFinish: a.wait });
              if (a.wait) await p;
              else {
                pending.push(p);
                await new Promise((r) => setTimeout(r, 2)); // the next action lands while its batch runs
              }
            } else if (a.kind === "expire") {
              raw.prepare("UPDATE mneme_readmodel_locks SET expires_at = 0").run();
            } else if (a.kind === "tell") {
              insts[a.who]!.backend.leaseLocks.renew();
            } else if (a.kind === "stopStart") {
              const r = runnerOf(insts[a.who]!.totals);
              await r.stop().catch(() => undefined);
              await r.start().catch(() => undefined);
            } else {
              pending.push(
                runnerOf(insts[a.who]!.totals)
                  .startRestore({ fromZero: true })
                  .done.catch(() => undefined),
              );
            }
            await checkpointNeverBack();
          }
          await Promise.all(pending);
          // Settle: someone processes the handler and has reached the head.
          const head = await insts[0]!.f.eventRepository.headPosition();
          await until(async () => {
            await checkpointNeverBack();
            return (
              insts.some((i) => runnerOf(i.totals).state === "running" && !runnerOf(i.totals).restoring) &&
              (await insts[0]!.backend.getCheckpoint("GatedTotals")) === head
            );
          }, `the checkpoint reaches ${head}`);
          const times = await insts[0]!.totals.appliedTimes();
          const expected = Object.fromEntries(Array.from({ length: head }, (_, k) => [k + 1, 1]));
          expect(times).toEqual(expected);
          expect(await insts[0]!.totals.total("c")).toBe(head);
        } finally {
          for (const i of insts) await i.f.stop().catch(() => undefined);
          raw.close();
        }
      }),
      {
        numRuns: 60,
        // Bounded, so a sequence that hangs fails with its seed and path instead of holding CI up: a run is
        // failed after 15 s (about 0.2 s is usual), and the whole property, shrinking included, after 90 s
        // (about ten times a usual run, which leaves room for other test files beside it).
        timeout: 15_000,
        interruptAfterTimeLimit: 90_000,
        markInterruptAsFailure: true,
        examples: [
          // Found by this property: a take-over started from inside a fenced-off rebuild batch's async
          // context applied the served generation's events into the next generation's collections.
          [
            [
              { kind: "rebuild", who: 0 },
              { kind: "dispatch", by: 0, wait: false },
              { kind: "dispatch", by: 0, wait: false },
              { kind: "expire" },
              { kind: "dispatch", by: 0, wait: false },
              { kind: "expire" },
            ],
          ],
          // Found by this property: a dispatch on instance 1 waited for its events while 1 was rebuilding; 1 lost
          // the lease to 0 before its switch, and the wait was never answered (it hung here about one run in four).
          [
            [
              { kind: "expire" },
              { kind: "dispatch", by: 0, wait: true },
              { kind: "expire" },
              { kind: "stopStart", who: 0 },
              { kind: "rebuild", who: 1 },
              { kind: "dispatch", by: 1, wait: true },
              { kind: "dispatch", by: 0, wait: false },
              { kind: "dispatch", by: 0, wait: false },
            ],
          ],
        ],
      },
    );
  }, 120_000);
});
