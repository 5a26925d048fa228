/**
 * Engines declare their capabilities (written in each factory, not read from
 * their stores' methods) and their guarantees follow from the declaration;
 * the memory engine's readmodel backend has a real in-process lease (fencing
 * tokens that grow with every take-over, a recorded holder, fenced commits);
 * a readmodel backend of your own without a lease is given one in-process,
 * so the runner calls lease methods unconditionally.
 */
import { describe, expect, it } from "vitest";
import { createFacade, isMnemeError } from "mneme";
import { createMemoryBackends, MemoryReadmodelStoreBackend } from "mneme/memory";
import {
  defineEngine,
  guaranteesDeclared,
  isLockLostError,
  readmodelBackendCapabilities,
  type EngineCapabilities,
  type CollectionScope,
  type ReadmodelCollection,
  type ReadmodelStoreBackend,
  type StoreInfo,
} from "mneme/store";
import { Counter, CounterTotals, Increment } from "../support/counter-domain.js";
import { leasedBackend } from "../../src/store/leased-readmodel-backend.js";
import { rejection } from "../support/rejections.js";
import { until } from "../support/until.js";

const NONE: EngineCapabilities = {
  joinsCommandStore: false,
  loadEvents: false,
  externalAppends: false,
  appendListeners: false,
  claims: false,
  replaceCollections: false,
  indexes: false,
  locks: false,
  leaseScope: "database",
  fencing: false,
  lockLossNotice: false,
  lockHolder: false,
  tenantScopes: false,
};

/** A readmodel backend of your own with no lease: the required members only, over a memory backend. */
class PlainBackend implements ReadmodelStoreBackend {
  readonly tenantScopes = true;
  readonly #inner = new MemoryReadmodelStoreBackend();
  init(): Promise<void> {
    return this.#inner.init();
  }
  collection<T>(name: string, scope?: CollectionScope): ReadmodelCollection<T> {
    return this.#inner.collection<T>(name, scope);
  }
  listCollections(): Promise<string[]> {
    return this.#inner.listCollections();
  }
  transaction<R>(fn: () => Promise<R>): Promise<R> {
    return this.#inner.transaction(fn);
  }
  getCheckpoint(handler: string): Promise<number> {
    return this.#inner.getCheckpoint(handler);
  }
  setCheckpoint(handler: string, position: number): Promise<void> {
    return this.#inner.setCheckpoint(handler, position);
  }
  info(): Promise<StoreInfo> {
    return this.#inner.info();
  }
  close(): Promise<void> {
    return this.#inner.close();
  }
}

describe("an engine", () => {
  it("declares its capabilities in its factory; its guarantees follow from them", async () => {
    const m = createMemoryBackends();
    expect(m.capabilities).toMatchObject({ locks: true, leaseScope: "process", fencing: true, claims: true, externalAppends: false });
    expect(m.guarantees).toEqual(guaranteesDeclared(m.capabilities));
    expect(m.guarantees).not.toContain("single-processor");
    expect(guaranteesDeclared({ ...m.capabilities, leaseScope: "database" })).toEqual(
      expect.arrayContaining(["single-processor", "fenced-processing"]),
    );
    await m.close();
  });

  it("is what its declaration says, not what its stores' methods suggest", async () => {
    const m = createMemoryBackends();
    // Declared without replaceCollections and tenant scopes: the stores have the methods, the engine does not offer them.
    const e = defineEngine({ ...m }, { ...m.capabilities, replaceCollections: false, tenantScopes: false }, m.close);
    expect(e.guarantees).not.toContain("blue-green-rebuild");
    expect(e.guarantees).not.toContain("tenant-scoped-readmodels");
    expect(readmodelBackendCapabilities(e.readmodelStoreBackend).replaceCollections).toBe(false);
    expect(defineEngine({ ...createMemoryBackends() }, NONE, async () => {}).guarantees).toEqual([]);
    await m.close();
  });

  it("is taken whole by createFacade, and the spread form (deprecated) still works", async () => {
    const whole = createFacade({ backend: createMemoryBackends() });
    const spread = createFacade({ ...createMemoryBackends() });
    expect(whole.runtime.systemInfo().guarantees).toEqual(spread.runtime.systemInfo().guarantees);
    await whole.start();
    await spread.start();
    await whole.stop();
    await spread.stop();
  });
});

describe("the memory readmodel backend's lease", () => {
  it("gives a greater fencing token on every take-over and records the holder", async () => {
    const b = new MemoryReadmodelStoreBackend();
    expect(b.fencingToken("H")).toBeUndefined();
    expect(await b.tryLock("H", "instance-1")).toBe(true);
    const first = b.fencingToken("H")!;
    expect(await b.lockHolder("H")).toBe("instance-1");
    // A renewal by the holder keeps the token.
    expect(await b.tryLock("H", "instance-1")).toBe(true);
    expect(b.fencingToken("H")).toBe(first);
    await b.unlock("H");
    expect(b.fencingToken("H")).toBeUndefined();
    expect(await b.lockHolder("H")).toBeUndefined();
    expect(await b.tryLock("H", "instance-2")).toBe(true);
    expect(b.fencingToken("H")).toBeGreaterThan(first);
    expect(await b.lockHolder("H")).toBe("instance-2");
  });

  it("refuses the commit of a transaction fenced with an old token: nothing of it written", async () => {
    const b = new MemoryReadmodelStoreBackend();
    await b.tryLock("H");
    const old = b.fencingToken("H")!;
    const docs = b.collection<{ n: number }>("docs");
    await b.transaction(async () => {
      await b.checkFencingToken("H", old);
      await docs.put("a", { n: 1 });
      await b.setCheckpoint("H", 1);
    });
    await b.unlock("H");
    await b.tryLock("H");
    const e = await rejection(
      b.transaction(async () => {
        await b.checkFencingToken("H", old);
        await docs.put("b", { n: 2 });
        await b.setCheckpoint("H", 2);
      }),
    );
    expect(isLockLostError(e)).toBe(true);
    expect(await docs.get("b")).toBeUndefined();
    expect(await b.getCheckpoint("H")).toBe(1);
    // The current token commits.
    await b.transaction(async () => {
      await b.checkFencingToken("H", b.fencingToken("H")!);
      await b.setCheckpoint("H", 2);
    });
    expect(await b.getCheckpoint("H")).toBe(2);
  });

  it("keeps a facade sharing the engine applying when another lets go; a take-over after that fences the old token", async () => {
    const engine = createMemoryBackends();
    const a = createFacade({ backend: engine }).registerDomain(Counter);
    const b = createFacade({ backend: engine }).registerDomain(Counter);
    const totalsA = new CounterTotals(a);
    const totalsB = new CounterTotals(b);
    a.registerReadmodel(totalsA);
    b.registerReadmodel(totalsB);
    await b.start();
    await a.start();
    await a.dispatch(Increment, { counterUuid: "c-1", by: 1 }, { waitToFinish: true });
    await until(() => totalsB.applied.length === 1, "b applied the first event");
    const token = engine.readmodelStoreBackend.fencingToken("CounterTotals");
    expect(token).toBeDefined();
    // a stops its handler (it lets the lease go); b, one owner with it, goes on at once, not in standby.
    expect(await a.runtime.controlEventHandler({ action: "stop", eventHandlerName: "CounterTotals" })).toMatchObject({ state: "stopped" });
    expect(engine.readmodelStoreBackend.fencingToken("CounterTotals")).toBeUndefined();
    await b.dispatch(Increment, { counterUuid: "c-1", by: 2 }, { waitToFinish: true });
    expect(totalsB.applied).toEqual([1, 2]);
    expect(b.runtime.listEventHandlers().find((h) => h.name === "CounterTotals")?.state).toBe("running");
    // A take-over (a new token) refuses a transaction fenced with the old one.
    await engine.readmodelStoreBackend.tryLock("CounterTotals", "another");
    expect(engine.readmodelStoreBackend.fencingToken("CounterTotals")).toBeGreaterThan(token!);
    const e = await rejection(
      engine.readmodelStoreBackend.transaction(async () => engine.readmodelStoreBackend.checkFencingToken("CounterTotals", token!)),
    );
    expect(isLockLostError(e)).toBe(true);
    await a.stop();
    await b.stop();
  });

  it("checks fences only inside a transaction, and tells onLockLost when the backend closes", async () => {
    const b = new MemoryReadmodelStoreBackend();
    const e = await rejection(b.checkFencingToken("H", 1));
    expect(isMnemeError(e, "INVALID_REQUEST")).toBe(true);
    const lost: string[][] = [];
    b.onLockLost((names) => lost.push([...names]));
    await b.tryLock("H");
    await b.tryLock("K");
    await b.unlock("K");
    await b.close();
    expect(lost).toEqual([["H"]]);
  });
});

describe("a readmodel backend of your own without a lease", () => {
  it("is given an in-process one, decided once; the backend's own members are used for the rest", async () => {
    const raw = new PlainBackend();
    const leased = leasedBackend(raw);
    expect(leasedBackend(raw)).toBe(leased);
    expect(readmodelBackendCapabilities(leased)).toEqual(readmodelBackendCapabilities(raw));
    expect(readmodelBackendCapabilities(raw).locks).toBe(false);
    expect(await leased.tryLock("H", "me")).toBe(true);
    const old = leased.fencingToken("H")!;
    expect(await leased.lockHolder("H")).toBe("me");
    await leased.unlock("H");
    await leased.tryLock("H", "me");
    expect(leased.fencingToken("H")).toBeGreaterThan(old);
    const docs = raw.collection<{ n: number }>("docs");
    const e = await rejection(
      leased.transaction(async () => {
        await leased.checkFencingToken("H", old);
        await docs.put("x", { n: 1 });
      }),
    );
    expect(isLockLostError(e)).toBe(true);
    expect(await docs.get("x")).toBeUndefined();
  });

  it("keeps its own lock when it has one, with no fencing token when it has none", async () => {
    const held = new Set<string>();
    const raw: ReadmodelStoreBackend = Object.assign(new PlainBackend(), {
      tryLock: async (h: string) => !held.has(h) && held.add(h) !== undefined,
      unlock: async (h: string) => void held.delete(h),
    });
    const leased = leasedBackend(raw);
    expect(await leased.tryLock("H")).toBe(true);
    expect(await leased.tryLock("H")).toBe(false);
    expect(leased.fencingToken("H")).toBeUndefined();
    expect(await leased.lockHolder("H")).toBeUndefined();
    expect(typeof leased.onLockLost(() => undefined)).toBe("function");
  });

  it("serves a facade as before: its readmodel applies every event, fenced by the in-process lease", async () => {
    const backend = new PlainBackend();
    const f = createFacade({ readmodelStoreBackend: backend }).registerDomain(Counter);
    const totals = new CounterTotals(f);
    f.registerReadmodel(totals);
    await f.start();
    for (let n = 1; n <= 3; n++) await f.dispatch(Increment, { counterUuid: "c-1", by: n }, { waitToFinish: true });
    expect(await totals.total("c-1")).toBe(6);
    expect(await backend.getCheckpoint("CounterTotals")).toBe(3);
    expect(f.runtime.systemInfo().guarantees).not.toContain("single-processor");
    await f.stop();
  });
});
