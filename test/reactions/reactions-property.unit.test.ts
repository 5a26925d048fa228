/**
 * Property (fast-check): whatever the interleaving of appended events,
 * restores from zero, restarts of the process manager, clock moves and
 * outbox rounds and prunings of the command store, every command a step dispatched or scheduled runs exactly
 * once (with its deterministic uuid), none before its time, and the state
 * equals a fold of every event. The command appends on every run, so a
 * second send would show.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { anonymous, createFacade, defineDomain } from "mneme";
import { ProcessManager, reactionCommandUuid } from "mneme/reactions";
import { FakeClock, settle } from "../support/reactions-world.js";

const D = defineDomain("Prop", { description: "pings and what they cause" });
const Pinged = D.event<{ n: number }>("Pinged");
const Record = D.command<{ key: string; notBefore: number }>("Record", { permission: anonymous });
const Recorded = D.event<{ key: string; notBefore: number; at: number }>("Recorded");
const LATER = 500;

type Step =
  | { kind: "ping"; count: number }
  | { kind: "restoreFromZero" }
  | { kind: "restart" }
  | { kind: "advance"; ms: number }
  | { kind: "drain" }
  | { kind: "prune" };

const step: fc.Arbitrary<Step> = fc.oneof(
  fc.record({ kind: fc.constant("ping" as const), count: fc.integer({ min: 1, max: 4 }) }),
  fc.constant({ kind: "restoreFromZero" as const }),
  fc.constant({ kind: "restart" as const }),
  fc.record({ kind: fc.constant("advance" as const), ms: fc.integer({ min: 0, max: 800 }) }),
  fc.constant({ kind: "drain" as const }),
  fc.constant({ kind: "prune" as const }),
);

describe("process manager: exactly once under restores, restarts and time", () => {
  it("sends each dispatched and scheduled command once, none early, state = fold of all events", async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(step, { minLength: 1, maxLength: 12 }), async (steps) => {
        const clock = new FakeClock(1_000_000);
        const f = createFacade({ appName: "prop" });
        let n = 0;
        const pm = new ProcessManager<{ pings: number }>(f, {
          name: "P",
          domain: "Prop",
          initialState: () => ({ pings: 0 }),
          correlate: () => "all",
          clock: clock.now,
        }).on(Pinged, (ctx, s, p) => {
          ctx.dispatch(Record, { key: `${p.n}-now`, notBefore: 0 });
          ctx.schedule(Record, { key: `${p.n}-later`, notBefore: clock.ms + LATER }, { at: clock.ms + LATER });
          return { pings: s.pings + 1 };
        });
        const dom = D;
        f.registerDomain(dom, (d) => d.handleCommand(Record, (_ctx, _c, p) => [Recorded.create("log", { ...p, at: clock.ms })]));
        f.registerReadmodel(pm);
        await f.start();
        try {
          for (const s of steps) {
            switch (s.kind) {
              case "ping":
                for (let i = 0; i < s.count; i++) {
                  await f.eventRepository.append([
                    { domain: "Prop", name: "Pinged", aggregateUuid: `p${n}`, payload: { n }, tenantUuid: "" },
                  ]);
                  n++;
                }
                await settle(f, [pm], clock.now);
                break;
              case "restoreFromZero":
                await f.runtime.controlEventHandler({ action: "restore", eventHandlerName: "P", restoreFromZero: true });
                break;
              case "restart":
                await pm.stop();
                await pm.start();
                break;
              case "advance":
                clock.advance(s.ms);
                break;
              case "drain":
                await settle(f, [pm], clock.now);
                break;
              case "prune": {
                // The command store forgets every record: only the reaction horizon keeps replays from sending again.
                const { items } = await f.commandStore.list({ limit: 1000 });
                for (const r of items) await f.commandStore.delete(r.commandUuid);
                break;
              }
            }
          }
          clock.advance(LATER + 1);
          await settle(f, [pm], clock.now);
          const pings = await f.eventRepository.loadAggregates(Array.from({ length: n }, (_, i) => `p${i}`));
          const recorded = await f.eventRepository.loadAggregate("log");
          const expected = new Map<string, string>();
          for (let i = 0; i < n; i++) {
            const ping = pings.get(`p${i}`)![0]!;
            expected.set(`${i}-now`, reactionCommandUuid("P", ping.eventUuid, 0));
            expected.set(`${i}-later`, reactionCommandUuid("P", ping.eventUuid, 1));
          }
          const got = recorded.map((e) => [(e.payload as { key: string }).key, e.commandUuid] as const);
          expect(got.length).toBe(expected.size);
          expect(new Map(got)).toEqual(expected);
          for (const e of recorded) {
            const p = e.payload as { notBefore: number; at: number };
            expect(p.at).toBeGreaterThanOrEqual(p.notBefore);
          }
          expect(await pm.getState("all")).toEqual(n === 0 ? undefined : { pings: n });
          expect(await pm.outbox.list()).toEqual([]);
        } finally {
          await f.stop();
        }
      }),
      { numRuns: 40 },
    );
  }, 120_000);
});
