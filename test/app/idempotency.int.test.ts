/**
 * Idempotent dispatch: a commandUuid recorded as succeeded is not run again
 * (its recorded events come back, `replayed: true`, nothing is appended); of
 * concurrent duplicates, in one facade or in two on one database, exactly one
 * appends; a failed or denied first attempt runs again; one commandUuid names
 * one request (another payload or tenant is CONFLICT). On memory, SQLite and
 * Postgres (the command store in the events' database).
 */
import { describe, expect, it } from "vitest";
import { createFacade, defineDomain, type Facade } from "mneme";
import { rejection } from "../support/rejections.js";
import { alice, bob, sharedPlaces } from "../support/shared-places.js";

/** How often the Charge handler ran, per payments() domain. */
let handlerRuns = 0;

function payments(flaky: { failuresLeft: number }) {
  const D = defineDomain("Payments");
  const Charged = D.event<{ amount: number }>("Charged");
  const Account = D.aggregate<{ total: number }>("Account", {
    initialState: () => ({ total: 0 }),
    evolve: { Charged: (s, p: { amount: number }) => ({ total: s.total + p.amount }) },
  });
  const Charge = D.command<{ accountUuid: string; amount: number; cardPin?: string }>("Charge", { secretFields: ["cardPin"] });
  D.handleCommand(Charge, async (ctx, _cmd, p) => {
    handlerRuns++;
    await ctx.aggregates.load(Account, p.accountUuid);
    if (flaky.failuresLeft > 0) {
      flaky.failuresLeft--;
      throw new Error("card network timeout");
    }
    return [Charged.create(p.accountUuid, { amount: p.amount })];
  });
  return { D, Account, Charge };
}

const places = sharedPlaces("idem");

describe.each(places)("idempotent dispatch on %s", (_name, placeOf) => {
  async function facades(n: number, flaky = { failuresLeft: 0 }) {
    const stores = placeOf();
    const d = payments(flaky);
    const fs: Facade[] = [];
    for (let i = 0; i < n; i++) {
      const f = createFacade({ appName: `idem-${i}`, ...stores() }).registerDomain(d.D);
      await f.start();
      fs.push(f);
    }
    const stop = async () => {
      for (const f of fs.reverse()) await f.stop();
    };
    return { d, fs, stop };
  }

  it("replays a succeeded command: the same events, nothing appended, replayed: true", async () => {
    const { d, fs, stop } = await facades(1);
    const [f] = fs as [Facade];
    try {
      const first = await f.dispatch(d.Charge, { accountUuid: "A", amount: 5, cardPin: "1234" }, { reqCtx: alice, commandUuid: "pay-1" });
      expect(first.replayed).toBeUndefined();
      const head = await f.eventRepository.headPosition();
      const runs = handlerRuns;
      // The secret field is redacted in the record; the replay still recognises the request.
      const again = await f.dispatch(d.Charge, { accountUuid: "A", amount: 5, cardPin: "1234" }, { reqCtx: alice, commandUuid: "pay-1" });
      expect(again.replayed).toBe(true);
      expect(handlerRuns).toBe(runs); // the handler did not run again
      expect(again.commandUuid).toBe("pay-1");
      expect(again.events.map((e) => [e.eventUuid, e.position, e.payload])).toEqual(
        first.events.map((e) => [e.eventUuid, e.position, e.payload]),
      );
      expect(await f.eventRepository.headPosition()).toBe(head);
      expect((await f.loadAggregate(d.Account, "A")).state.total).toBe(5);
      expect((await f.commandStore.get("pay-1"))?.status).toBe("succeeded");
    } finally {
      await stop();
    }
  });

  it("runs exactly one of concurrent duplicates, in one facade and across two on one database", async () => {
    const { d, fs, stop } = await facades(2);
    try {
      const results = await Promise.all(
        Array.from({ length: 12 }, (_, i) =>
          fs[i % 2]!.dispatch(d.Charge, { accountUuid: "B", amount: 7 }, { reqCtx: alice, commandUuid: "pay-2" }),
        ),
      );
      expect(results.filter((r) => r.replayed !== true)).toHaveLength(1);
      expect(new Set(results.map((r) => r.events.map((e) => e.eventUuid).join()))).toEqual(
        new Set([results[0]!.events.map((e) => e.eventUuid).join()]),
      );
      expect(results[0]!.events).toHaveLength(1);
      const stream = await fs[0]!.eventRepository.loadAggregate("B");
      expect(stream.map((e) => e.payload)).toEqual([{ amount: 7 }]);
      expect(stream[0]!.causationId).toBe("pay-2");
    } finally {
      await stop();
    }
  });

  it("runs a command again after a failed or a denied first attempt, and records the attempt that counted", async () => {
    const flaky = { failuresLeft: 1 };
    const { d, fs, stop } = await facades(1, flaky);
    const [f] = fs as [Facade];
    try {
      const failed = await rejection(f.dispatch(d.Charge, { accountUuid: "C", amount: 3 }, { reqCtx: alice, commandUuid: "pay-3" }));
      expect(failed.code).toBe("HANDLER_FAILED");
      expect((await f.commandStore.get("pay-3"))?.status).toBe("failed");
      const retried = await f.dispatch(d.Charge, { accountUuid: "C", amount: 3 }, { reqCtx: alice, commandUuid: "pay-3" });
      expect(retried.replayed).toBeUndefined();
      expect(retried.events).toHaveLength(1);
      expect((await f.commandStore.get("pay-3"))?.status).toBe("succeeded");
      expect((await f.dispatch(d.Charge, { accountUuid: "C", amount: 3 }, { reqCtx: alice, commandUuid: "pay-3" })).replayed).toBe(true);

      const denied = await rejection(f.dispatch(d.Charge, { accountUuid: "D", amount: 1 }, { commandUuid: "pay-4" }));
      expect(denied.code).toBe("PERMISSION_DENIED");
      expect((await f.commandStore.get("pay-4"))?.status).toBe("denied");
      expect((await f.dispatch(d.Charge, { accountUuid: "D", amount: 1 }, { reqCtx: alice, commandUuid: "pay-4" })).events).toHaveLength(1);
      expect((await f.loadAggregate(d.Account, "D")).state.total).toBe(1);
    } finally {
      await stop();
    }
  });

  it("refuses one commandUuid for another payload or another tenant with CONFLICT, appending nothing", async () => {
    const { d, fs, stop } = await facades(1);
    const [f] = fs as [Facade];
    try {
      await f.dispatch(d.Charge, { accountUuid: "E", amount: 10 }, { reqCtx: alice, commandUuid: "pay-5" });
      const head = await f.eventRepository.headPosition();
      const otherPayload = await rejection(f.dispatch(d.Charge, { accountUuid: "E", amount: 11 }, { reqCtx: alice, commandUuid: "pay-5" }));
      expect([otherPayload.code, otherPayload.message]).toEqual(["CONFLICT", expect.stringMatching(/recorded for another request/)]);
      const otherTenant = await rejection(f.dispatch(d.Charge, { accountUuid: "E2", amount: 10 }, { reqCtx: bob, commandUuid: "pay-5" }));
      expect(otherTenant.code).toBe("CONFLICT");
      expect(await f.eventRepository.headPosition()).toBe(head);
      expect((await f.commandStore.get("pay-5"))?.status).toBe("succeeded");
    } finally {
      await stop();
    }
  });
});
