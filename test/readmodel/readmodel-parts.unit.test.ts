/**
 * A handler composed of parts (BaseEventHandler.addPart): the part joins the
 * handler's batches (after the handler's own hooks, rolled back with them)
 * and its lifecycle; a tenant's view of the handler gives a tenant's view of
 * the part; the runner is reached only through runnerOf.
 */
import { describe, expect, it } from "vitest";
import { BaseReadmodel, createFacade, type Facade, isMnemeError } from "mneme";
import { BaseEventHandler } from "mneme/reactions";
import type { Event } from "mneme";
import { runnerOf, type HandlerPart } from "../../src/readmodel/base-event-handler.js";
import { currentTenantScope } from "../../src/readmodel/tenant-scope.js";
import { Counter, Increment, Incremented } from "../support/counter-domain.js";

/** Records every hook call, the handler's and its part's, in one list. */
class Recorded extends BaseReadmodel {
  readonly calls: string[] = [];
  readonly part: HandlerPart & { scopeTenant(): string | undefined };
  failOn = -1;

  constructor(f: Facade) {
    super(f);
    this.domain = "Counter";
    this.name = "Recorded";
    const calls = this.calls;
    this.part = {
      beforeBatch: async (events: readonly Event[]) => void calls.push(`part.before:${events.length}`),
      afterBatch: async () => void calls.push("part.after"),
      discardBatch: () => void calls.push("part.discard"),
      starting: () => void calls.push("part.starting"),
      stopping: async () => void calls.push("part.stopping"),
      scopeTenant: () => currentTenantScope()?.readTenantUuid,
    };
    this.addPart(this.part);
    this.addDomainEventHandler(Incremented, (_ctx, e) => {
      calls.push(`handle:${e.position}`);
      if (e.position === this.failOn) throw new Error("boom");
    });
  }

  protected override async beforeBatch(events: readonly Event[]): Promise<void> {
    this.calls.push(`own.before:${events.length}`);
  }

  protected override async afterBatch(): Promise<void> {
    this.calls.push("own.after");
  }

  protected override discardBatch(): void {
    this.calls.push("own.discard");
  }
}

async function started(): Promise<{ facade: Facade; rm: Recorded }> {
  const facade = createFacade({ appName: "parts-test" });
  facade.registerDomain(Counter);
  const rm = new Recorded(facade);
  facade.registerReadmodel(rm);
  await facade.start();
  return { facade, rm };
}

describe("a handler composed of parts", () => {
  it("runs the part's batch hooks after the handler's own, and its lifecycle hooks on start, restore and stop", async () => {
    const { facade, rm } = await started();
    expect(rm.calls).toContain("part.starting");
    rm.calls.length = 0;
    await facade.dispatch(Increment, { counterUuid: "c1", by: 1 }, { waitToFinish: true });
    expect(rm.calls).toEqual(["own.before:1", "part.before:1", "handle:1", "own.after", "part.after"]);

    rm.calls.length = 0;
    await rm.restoreState(undefined, { fromZero: true }).done;
    expect(rm.calls[0]).toBe("part.starting");
    expect(rm.calls).toContain("handle:1");

    rm.calls.length = 0;
    await rm.stop();
    expect(rm.calls[0]).toBe("part.stopping");
    await facade.stop();
  });

  it("rolls the part back with the handler when a batch fails", async () => {
    const { facade, rm } = await started();
    rm.failOn = 1;
    rm.calls.length = 0;
    const r = await facade.dispatch(Increment, { counterUuid: "c1", by: 1 }, { waitToFinish: true }).catch((e: unknown) => e);
    expect(rm.calls).toEqual(["own.before:1", "part.before:1", "handle:1", "own.discard", "part.discard"]);
    expect(rm.state).toBe("failed");
    expect(r).toBeDefined();
    await facade.stop();
  });

  it("hands out a tenant's view of a part from a tenant's view of the handler", async () => {
    const { facade, rm } = await started();
    expect(rm.part.scopeTenant()).toBeUndefined();
    expect(rm.asTenant("t-1").part.scopeTenant()).toBe("t-1");
    await facade.stop();
  });
});

describe("runnerOf", () => {
  it("gives the runner a handler holds, and refuses anything else with INVALID_EVENT_HANDLER", () => {
    const facade = createFacade();
    const a = new Recorded(facade);
    const b = new Recorded(facade);
    expect(runnerOf(a)).toBe(runnerOf(a));
    expect(runnerOf(a)).not.toBe(runnerOf(b));
    expect(runnerOf(a).state).toBe("stopped");
    for (const bad of [{}, { name: "x", domain: "y" }, Object.create(BaseEventHandler.prototype) as object]) {
      let err: unknown;
      try {
        runnerOf(bad);
      } catch (e) {
        err = e;
      }
      expect(isMnemeError(err, "INVALID_EVENT_HANDLER")).toBe(true);
    }
  });
});
