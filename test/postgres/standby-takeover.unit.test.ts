/**
 * A handler in standby that takes its lock over while the database is away
 * (reading its checkpoint fails with UNAVAILABLE) gives the lock back and
 * stands by again, instead of sitting `stopped` while holding the lock.
 */
import { describe, expect, it } from "vitest";
import { createFacade, MnemeError } from "mneme";
import { Counter, Increment, Incremented } from "../support/counter-domain.js";
import { MemoryReadmodelStoreBackend } from "mneme/memory";
import type { EventHandler } from "mneme/reactions";

/** A lockable backend whose lock another instance holds at first, and whose next checkpoint reads fail like a lost connection. */
class FlakyLockBackend extends MemoryReadmodelStoreBackend {
  lockFree = false;
  held = false;
  unlocks = 0;
  failCheckpointReads = 0;
  override async tryLock(): Promise<boolean> {
    if (!this.lockFree || this.held) return false;
    this.held = true;
    return true;
  }
  override async unlock(): Promise<void> {
    this.held = false;
    this.unlocks++;
  }
  override async getCheckpoint(handler: string): Promise<number> {
    if (this.failCheckpointReads > 0) {
      this.failCheckpointReads--;
      throw new MnemeError("UNAVAILABLE", "postgres: the connection was lost (injected)");
    }
    return super.getCheckpoint(handler);
  }
}

const until = async (what: string, ok: () => boolean): Promise<void> => {
  for (let i = 0; i < 500 && !ok(); i++) await new Promise((r) => setTimeout(r, 10));
  if (!ok()) throw new Error(`timed out waiting for ${what}`);
};

describe("standby take-over while the database is away", () => {
  it("gives the lock back and stands by, then takes over when the database is back", async () => {
    const backend = new FlakyLockBackend();
    const seen: number[] = [];
    const plain: EventHandler = {
      domain: "Counter",
      name: "PlainCounter",
      getDomainEvents: () => [Incremented],
      getDomainEventHandlers: (t) =>
        t === Incremented || t === "Counter.Incremented"
          ? [{ eventPath: "Counter.Incremented", domain: "Counter", eventName: "Incremented", fn: (_c, e) => void seen.push(e.position) }]
          : [],
    };
    const f = createFacade({ readmodelStoreBackend: backend, delivery: { lockRetryMs: 5 } });
    f.registerDomain(Counter).registerReadmodel(plain);
    await f.start();
    await f.dispatch(Increment, { counterUuid: "c", by: 1 });
    const info = () => f.runtime.listEventHandlers().find((h) => h.eventHandlerName === "PlainCounter")!;
    expect(info().state).toBe("standby");
    // The other instance lets go, but the database is away when this one reads its checkpoint.
    backend.failCheckpointReads = 1;
    backend.lockFree = true;
    await until("the failed take-over to give the lock back", () => backend.unlocks >= 1);
    // Then it takes over for real and catches up.
    await until("the handler to run", () => info().state === "running");
    await until("the event to be applied", () => seen.length === 1);
    expect(backend.held).toBe(true);
    await f.stop();
  });
});
