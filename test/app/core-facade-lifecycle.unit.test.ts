/**
 * Facade lifecycle: nothing runs before start(), stop() is idempotent and
 * closes every store the facade holds (a readmodel's own backend included).
 */
import { describe, expect, it, vi } from "vitest";
import { BaseReadmodel, createFacade, defineDomain, isMnemeError, type RequestContext, withReadmodelStoreBackend } from "mneme";
import {
  MemoryCacheStore,
  MemoryCommandStore,
  MemoryDataStore,
  MemoryEventRepository,
  MemoryLogStore,
  MemoryReadmodelStoreBackend,
} from "mneme/memory";
import type { ReadmodelFacade } from "mneme/types";

const admin: RequestContext = {
  senderAccountUuid: "acc-1",
  senderSessionUuid: "ses-1",
  senderIdentityUuid: "idn-1",
  senderTenantUuid: "ten-1",
};

function pingDomain() {
  const Ping = defineDomain("Ping");
  const Pinged = Ping.event<object>("Pinged");
  const DoPing = Ping.command("DoPing");
  Ping.handleCommand(DoPing, () => [Pinged.create("p", {})]);
  const Count = Ping.query<object, number>("Count");
  Ping.handleQuery(Count, async (ctx) => (await ctx.facade.eventRepository.loadAggregate("p")).length);
  return { Ping, Pinged, DoPing, Count };
}

class OwnBackendReadmodel extends BaseReadmodel {
  constructor(facade: ReadmodelFacade, backend: MemoryReadmodelStoreBackend) {
    super(facade, withReadmodelStoreBackend(backend));
    this.domain = "Ping";
    this.name = "OwnBackend";
  }
}

async function codeOf(p: Promise<unknown>): Promise<string> {
  try {
    await p;
    return "no error";
  } catch (e) {
    return isMnemeError(e) ? e.code : `not a MnemeError: ${String(e)}`;
  }
}

describe("facade lifecycle", () => {
  it("dispatch and query before start() are NOT_STARTED and run nothing", async () => {
    const { Ping, DoPing, Count } = pingDomain();
    const repo = new MemoryEventRepository();
    const f = createFacade({ eventRepository: repo }).registerDomain(Ping);
    expect(f.state).toBe("new");
    expect(await codeOf(f.dispatch(DoPing, {}, { reqCtx: admin }))).toBe("NOT_STARTED");
    expect(await codeOf(f.query(Count, {}, { reqCtx: admin }))).toBe("NOT_STARTED");
    expect(await repo.headPosition()).toBe(0);
    await f.start();
    expect(f.state).toBe("started");
    await f.dispatch(DoPing, {}, { reqCtx: admin });
    expect(await f.query(Count, {}, { reqCtx: admin })).toBe(1);
    await f.stop();
  });

  it("start() is idempotent (same promise) and cannot restart a stopped facade", async () => {
    const f = createFacade();
    const a = f.start();
    expect(f.start()).toBe(a);
    await a;
    await f.stop();
    expect(await codeOf(f.start())).toBe("INVALID_STATE");
  });

  it("after stop(), dispatch and query are NOT_STARTED (stopped), registering is INVALID_STATE", async () => {
    const { Ping, DoPing, Count } = pingDomain();
    const f = createFacade().registerDomain(Ping);
    await f.start();
    await f.stop();
    expect(f.state).toBe("stopped");
    const err = await f.dispatch(DoPing, {}, { reqCtx: admin }).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: "NOT_STARTED", message: expect.stringContaining("stopped") });
    expect(await codeOf(f.query(Count, {}, { reqCtx: admin }))).toBe("NOT_STARTED");
    expect(() => f.registerDomain(defineDomain("Late"))).toThrow(expect.objectContaining({ code: "INVALID_STATE" }));
  });

  it("stop() closes every store exactly once, is idempotent, and runs the extra close", async () => {
    const stores = {
      eventRepository: new MemoryEventRepository(),
      commandStore: new MemoryCommandStore(),
      dataStore: new MemoryDataStore(),
      cacheStore: new MemoryCacheStore(),
      logStore: new MemoryLogStore(),
      readmodelStoreBackend: new MemoryReadmodelStoreBackend(),
    };
    const own = new MemoryReadmodelStoreBackend();
    const spies = [...Object.values(stores), own].map((s) => vi.spyOn(s, "close"));
    const extra = vi.fn();
    const { Ping } = pingDomain();
    const f = createFacade({ ...stores, close: extra }).registerDomain(Ping);
    f.registerReadmodel(new OwnBackendReadmodel(f, own));
    await f.start();
    const first = f.stop();
    expect(f.stop()).toBe(first);
    await first;
    await f.stop();
    for (const s of spies) expect(s).toHaveBeenCalledTimes(1);
    expect(extra).toHaveBeenCalledTimes(1);
    // the stores are really closed
    expect(await codeOf(stores.eventRepository.headPosition())).toBe("STORE_CLOSED");
    expect(await codeOf(stores.commandStore.info())).toBe("STORE_CLOSED");
  });

  it("stop() without start() closes the stores too", async () => {
    const repo = new MemoryEventRepository();
    const spy = vi.spyOn(repo, "close");
    const f = createFacade({ eventRepository: repo });
    await f.stop();
    expect(spy).toHaveBeenCalledTimes(1);
    expect(f.state).toBe("stopped");
  });

  it("a store whose close fails: the others are still closed and stop() rejects with STORE_ERROR carrying the cause", async () => {
    const boom = new Error("disk on fire");
    const commandStore = new MemoryCommandStore();
    vi.spyOn(commandStore, "close").mockRejectedValue(boom);
    const logStore = new MemoryLogStore();
    const logClose = vi.spyOn(logStore, "close");
    const extra = vi.fn();
    const f = createFacade({ commandStore, logStore, close: extra });
    await f.start();
    const err = await f.stop().catch((e: unknown) => e);
    expect(err).toMatchObject({ code: "STORE_ERROR", cause: boom });
    expect(logClose).toHaveBeenCalledTimes(1);
    expect(extra).toHaveBeenCalledTimes(1);
    expect(f.state).toBe("stopped");
  });

  it("stop() stops the system-event producer and the running readmodels", async () => {
    const { Ping } = pingDomain();
    const f = createFacade({ systemEvents: true }).registerDomain(Ping);
    const rm = new OwnBackendReadmodel(f, new MemoryReadmodelStoreBackend());
    f.registerReadmodel(rm);
    await f.start();
    expect(f.runtime.systemEvents.running).toBe(true);
    expect(rm.state).toBe("running");
    await f.stop();
    expect(f.runtime.systemEvents.running).toBe(false);
    expect(rm.state).toBe("stopped");
  });
});
