/**
 * What the handlers report after a restart on a durable backend (SQLite):
 * `lastPosition` comes back with the checkpoint, and `lastEventTimestamp` (the
 * createdAt, ns, of the event at lastPosition) with it, for the built-in
 * readmodels, a readmodel of the application and a plain handler.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { AllEvents, createFacade, type Facade } from "mneme";
import { RegisterAccount, registerDefaults } from "mneme/defaults";
import { createSqliteBackends } from "mneme/sqlite";
import { Counter, CounterTotals, Increment, Note } from "../support/counter-domain.js";
import { ADMIN_EMAIL, ADMIN_PASSWORD, FAST_HASHING } from "../support/defaults-world.js";
import { BaseEventHandler } from "mneme/reactions";

const dir = mkdtempSync(join(tmpdir(), "mneme-readmodel-restart-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A plain handler (not a state restorer): it catches up from its checkpoint through start(). */
class Audit extends BaseEventHandler {
  seen = 0;
  constructor() {
    super();
    this.domain = "Counter";
    this.name = "Audit";
    this.addDomainEventHandler(AllEvents, () => {
      this.seen++;
    });
  }
}

async function open(filename: string): Promise<Facade> {
  const facade = createFacade({ appName: "restart", ...createSqliteBackends({ filename }) });
  await registerDefaults(facade, {
    admin: { email: ADMIN_EMAIL, password: ADMIN_PASSWORD },
    passwordHashing: FAST_HASHING,
    sessionSecret: "a secret of the deployment",
  });
  facade.registerDomain(Counter);
  facade.registerReadmodel(new CounterTotals(facade));
  facade.registerReadmodel(new Audit());
  await facade.start();
  return facade;
}

async function createdAtOf(facade: Facade, position: number): Promise<number> {
  for await (const batch of facade.eventRepository.readAll({ afterPosition: position - 1, untilPosition: position }))
    return batch[0]!.createdAt;
  throw new Error(`no event at position ${position}`);
}

const positions = (facade: Facade) =>
  Object.fromEntries(
    facade.runtime
      .listEventHandlers()
      .map((h) => [h.eventHandlerName, { lastPosition: h.lastPosition, lastEventTimestamp: h.lastEventTimestamp }]),
  );

describe("handler positions across a restart", () => {
  it("lastEventTimestamp survives a restart: the createdAt of the event at lastPosition, for built-in readmodels, app readmodels and plain handlers", async () => {
    const filename = join(dir, "restart.db");
    const first = await open(filename);
    await first.dispatch(RegisterAccount, { email: "sam@example.org", password: "sam-password" }, { waitToFinish: true });
    await first.dispatch(Increment, { counterUuid: "c", by: 2 }, { waitToFinish: true });
    await first.dispatch(Note, { counterUuid: "c", text: "last" }, { waitToFinish: true }); // CounterTotals does not handle it: it passes it
    const head = await first.eventRepository.headPosition();
    const before = positions(first);
    expect(Object.keys(before).length).toBeGreaterThanOrEqual(7); // the built-in readmodels, CounterTotals, Audit
    for (const [name, p] of Object.entries(before)) {
      expect(p.lastPosition, name).toBe(head);
      expect(p.lastEventTimestamp, name).toBe(await createdAtOf(first, head));
    }
    await first.stop();

    const second = await open(filename);
    const after = positions(second);
    expect(after).toEqual(before);
    for (const [name, p] of Object.entries(after)) expect(p.lastEventTimestamp, name).toBeGreaterThan(0);
    expect(second.runtime.getMetrics("CounterTotals").lastEventTimestamp).toBe(before.CounterTotals!.lastEventTimestamp);
    expect(second.readmodel("Audit", Audit).seen).toBe(0); // resumed from its checkpoint: nothing applied again
    await second.stop();
  });
});
