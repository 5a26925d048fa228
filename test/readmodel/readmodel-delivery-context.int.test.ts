/**
 * Delivery starts in the handler's own async context, not in the appender's:
 * a command dispatched from inside one handler's batch (a process manager
 * does that) must not run another handler's batch inside the first one's
 * transaction, on any backend (the backends keep their open transaction in
 * AsyncLocalStorage).
 */
import { AsyncLocalStorage } from "node:async_hooks";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { BaseReadmodel, createFacade, type Facade, type FacadeOptions } from "mneme";
import { createSqliteBackends } from "mneme/sqlite";
import { Counter, Increment, Incremented, Note, Noted } from "../support/counter-domain.js";

const dir = mkdtempSync(join(tmpdir(), "mneme-delivery-context-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Marks the async context of the reacting handler's batch. */
const insideReaction = new AsyncLocalStorage<string>();

/** On each Noted, increments a counter (the dispatch runs inside this handler's batch and its marker). */
class Reacting extends BaseReadmodel {
  constructor(facade: Facade) {
    super(facade);
    this.domain = "Counter";
    this.name = "Reacting";
    this.addDomainEventHandler(Noted, async (_ctx, e) => {
      await this.collection<{ n: number }>("seen").put(e.eventUuid, { n: 1 });
      await insideReaction.run("reacting-batch", () =>
        facade.dispatch(Increment, { counterUuid: e.aggregateUuid, by: 1 }, { commandUuid: `react-${e.eventUuid}` }),
      );
    });
  }
}

/** Records the marker it runs under for each Incremented. */
class Observer extends BaseReadmodel {
  readonly contexts: (string | undefined)[] = [];
  constructor(facade: Facade) {
    super(facade);
    this.domain = "Counter";
    this.name = "Observer";
    this.addDomainEventHandler(Incremented, async (_ctx, e) => {
      this.contexts.push(insideReaction.getStore());
      await this.collection<{ n: number }>("seen").put(e.eventUuid, { n: 1 });
    });
  }
}

describe.each<[string, () => Partial<FacadeOptions>]>([
  ["memory", () => ({})],
  ["sqlite", () => createSqliteBackends({ filename: join(dir, "context.db") })],
])("delivery context on %s", (_name, stores) => {
  it("runs a handler's batch outside the context of the handler whose batch dispatched the command", async () => {
    const f = createFacade({ appName: "delivery-context", ...stores() }).registerDomain(Counter);
    const observer = new Observer(f);
    f.registerReadmodel(new Reacting(f));
    f.registerReadmodel(observer);
    await f.start();
    try {
      for (let i = 0; i < 5; i++) await f.dispatch(Note, { counterUuid: `c${i}`, text: "hi" }, { waitToFinish: true });
      // The increments are dispatched asynchronously by Reacting: wait until the observer saw them all.
      for (let i = 0; i < 200 && observer.contexts.length < 5; i++) await new Promise((r) => setTimeout(r, 10));
      expect(observer.contexts).toEqual([undefined, undefined, undefined, undefined, undefined]);
    } finally {
      await f.stop();
    }
  });
});
