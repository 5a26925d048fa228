/**
 * The property of restore under live traffic, shared by
 * test/readmodel/readmodel-restore.property.unit.test.ts (a quick run) and
 * test/readmodel/readmodel-restore.property.long.unit.test.ts (>= 1,000 interleavings):
 * random sequences of dispatches, restores (from the checkpoint or from zero),
 * stops and starts, racing each other, end in the state of a full replay with
 * every event applied exactly once to the served generation (a restore from
 * zero builds a new generation and switches to it; one that is cancelled
 * leaves the old one serving).
 */
import fc from "fast-check";
import { expect } from "vitest";
import { createFacade, type Facade, isMnemeError, type ReadmodelOption, withCatchBufferLimit, withRestoreBatchSize } from "mneme";
import { Counter, CounterTotals, Increment, Incremented } from "./counter-domain.js";

/**
 * CounterTotals that also counts, in a collection of its own (so per
 * generation, like its totals), how often each position was applied.
 */
class CountingTotals extends CounterTotals {
  constructor(facade: Facade, ...options: ReadmodelOption[]) {
    super(facade, "Totals", ...options);
    this.addDomainEventHandler(Incremented, async (_ctx, event) => {
      const times = this.collection<{ position: number; times: number }>("applied");
      const key = String(event.position);
      await times.put(key, { position: event.position, times: ((await times.get(key))?.times ?? 0) + 1 });
    });
  }

  /** The positions applied to the served generation, in order, each as often as it was applied. */
  async appliedPositions(): Promise<number[]> {
    const docs = await this.collection<{ position: number; times: number }>("applied").list({ orderBy: "position" });
    return docs.flatMap((d) => Array.from({ length: d.times }, () => d.position));
  }
}

type Op =
  | { kind: "dispatch"; counter: number; by: number; count: number }
  | { kind: "restore"; fromZero: boolean }
  | { kind: "stop" }
  | { kind: "start" }
  | { kind: "settle" };

const op: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 5,
    arbitrary: fc.record({
      kind: fc.constant("dispatch" as const),
      counter: fc.integer({ min: 0, max: 3 }),
      by: fc.integer({ min: 1, max: 9 }),
      count: fc.integer({ min: 1, max: 6 }),
    }),
  },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant("restore" as const), fromZero: fc.boolean() }) },
  { weight: 1, arbitrary: fc.constant({ kind: "stop" as const }) },
  { weight: 1, arbitrary: fc.constant({ kind: "start" as const }) },
  { weight: 1, arbitrary: fc.constant({ kind: "settle" as const }) },
);

/** Errors a racing control action may legitimately get. */
function expected(e: unknown): boolean {
  return isMnemeError(e, "INVALID_STATE") || isMnemeError(e, "RESTORE_CANCELLED");
}

export interface RestorePropertyRun {
  /** Interleavings (fast-check runs). */
  numRuns: number;
  /** Fail (not pass with fewer runs) when the runs take longer than this. */
  maxMs: number;
}

/** Checks the property over `numRuns` random interleavings; returns how many live events were caught during restorations in all. */
export async function checkRestoreUnderLiveTraffic({ numRuns, maxMs }: RestorePropertyRun): Promise<{ runs: number; caught: number }> {
  let caughtInAll = 0;
  let runs = 0;
  await fc.assert(
    fc.asyncProperty(
      fc.array(op, { minLength: 1, maxLength: 25 }),
      fc.integer({ min: 1, max: 4 }),
      fc.integer({ min: 0, max: 6 }),
      async (ops, batch, bufferLimit) => {
        runs++;
        const facade = createFacade();
        facade.registerDomain(Counter);
        const rm = new CountingTotals(facade, withRestoreBatchSize(batch), withCatchBufferLimit(bufferLimit));
        facade.registerReadmodel(rm);
        await facade.start();
        const pending: Promise<unknown>[] = [];
        const expectedTotals: Record<string, number> = {};
        for (const o of ops) {
          switch (o.kind) {
            case "dispatch":
              for (let i = 0; i < o.count; i++) {
                const id = `c${o.counter}`;
                expectedTotals[id] = (expectedTotals[id] ?? 0) + o.by;
                pending.push(facade.dispatch(Increment, { counterUuid: id, by: o.by }));
              }
              break;
            case "restore":
              pending.push(
                rm.restoreState(undefined, { fromZero: o.fromZero }).done.catch((e) => {
                  if (!expected(e)) throw e;
                }),
              );
              break;
            case "stop":
              pending.push(
                facade.runtime.controlEventHandler({ action: "stop", eventHandlerName: "Totals" }).catch((e) => {
                  if (!expected(e)) throw e;
                }),
              );
              break;
            case "start":
              pending.push(
                facade.runtime.controlEventHandler({ action: "start", eventHandlerName: "Totals" }).catch((e) => {
                  if (!expected(e)) throw e;
                }),
              );
              break;
            case "settle":
              await Promise.all(pending.splice(0));
              break;
          }
        }
        await Promise.all(pending.splice(0));
        // bring it live whatever the last action left it in (bounded), then compare with a full replay
        for (let i = 0; rm.restoring; i++) {
          if (i >= 1000) throw new Error("a restoration is still running after every control action settled");
          await new Promise((r) => setTimeout(r, 1));
        }
        if (rm.state !== "running") await facade.runtime.controlEventHandler({ action: "start", eventHandlerName: "Totals" });
        await rm.idle();
        const head = await facade.eventRepository.headPosition();
        expect(rm.lastPosition).toBe(head);
        expect(await rm.allTotals()).toEqual(expectedTotals);
        // exactly once in the served generation: every position, each once
        expect(await rm.appliedPositions()).toEqual(Array.from({ length: head }, (_, i) => i + 1));
        caughtInAll += rm.getMetrics().eventsCaught;
        // and a fresh full replay agrees
        await rm.restoreState(undefined, { fromZero: true }).done;
        expect(await rm.allTotals()).toEqual(expectedTotals);
        expect(rm.applied).toEqual(Array.from({ length: head }, (_, i) => i + 1));
        await facade.stop();
      },
    ),
    // Bounded: a run that would take longer than maxMs is interrupted and counts as a failure (never as a pass with fewer runs).
    { numRuns, interruptAfterTimeLimit: maxMs, markInterruptAsFailure: true },
  );
  return { runs, caught: caughtInAll };
}
