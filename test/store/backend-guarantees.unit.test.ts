/**
 * A backend declares what it guarantees, derived from what its stores
 * implement, and createFacade refuses a mix of stores that loses a guarantee
 * a given store's backend gives, naming the guarantee and the store, unless
 * the application accepts the loss (acceptLostGuarantees). In memory only;
 * SQLite and Postgres mixes are in backend-guarantees.int.test.ts.
 */
import { describe, expect, it } from "vitest";
import { anonymous, createFacade, defineDomain, type MnemeError } from "mneme";
import { createMemoryBackends, MemoryCommandStore, MemoryEventRepository, MemoryReadmodelStoreBackend } from "mneme/memory";
import { thrownWith } from "../support/rejections.js";
import { defineBackend, guaranteesOf, type CommandStore, type Guarantee } from "mneme/store";

const MEMORY: Guarantee[] = ["replay-with-events", "exactly-once-dispatch", "blue-green-rebuild", "tenant-scoped-readmodels"];

const refusal = (make: () => unknown): MnemeError => thrownWith("INVALID_REQUEST", make);

/** `store` with the named optional members removed (as a third-party store without them). */
function without<T extends object>(store: T, ...names: string[]): T {
  return Object.assign(Object.create(store) as T, Object.fromEntries(names.map((n) => [n, undefined])));
}

/**
 * A readmodel backend that keeps one instance per handler across the
 * database (its own tryLock) but has no fencing tokens: built on the memory
 * backend, it drops the in-process lease's fencing and its "process" scope.
 */
function lockingBackend(): MemoryReadmodelStoreBackend {
  const held = new Set<string>();
  return Object.assign(Object.create(new MemoryReadmodelStoreBackend()) as MemoryReadmodelStoreBackend, {
    leaseScope: "database",
    tryLock: async (h: string) => !held.has(h) && held.add(h) !== undefined,
    unlock: async (h: string) => void held.delete(h),
    fencingToken: undefined,
    checkFencingToken: undefined,
  });
}

/**
 * An event repository that writes command records with its events when the
 * command store is its own companion (as SQLite and Postgres do for a store
 * of the same database).
 */
function joiningRepository(companion: CommandStore): MemoryEventRepository {
  return Object.assign(Object.create(new MemoryEventRepository()) as MemoryEventRepository, {
    joinCommandStore: (c: CommandStore) => c === companion,
  });
}

const Ping = defineDomain("Guaranteed");
const Pinged = Ping.event<{ n: number }>("Pinged");
const PingIt = Ping.command<{ n: number }>("PingIt", { permission: anonymous });
Ping.handleCommand(PingIt, (_ctx, _c, p) => [Pinged.create("ping-1", { n: p.n })]);

describe("what a backend guarantees", () => {
  it("is derived from what the stores implement: memory keeps four, a store without a method loses its guarantee", () => {
    expect(createMemoryBackends().guarantees).toEqual(MEMORY);
    const m = createMemoryBackends();
    const plain = defineBackend(
      {
        ...m,
        readmodelStoreBackend: without(m.readmodelStoreBackend, "replaceCollections"),
        eventRepository: without(m.eventRepository, "loadEvents"),
      },
      m.close,
    );
    expect(plain.guarantees).toEqual(["exactly-once-dispatch", "tenant-scoped-readmodels"]);
    const locked = guaranteesOf({ ...m, readmodelStoreBackend: lockingBackend() });
    expect(locked).toContain("single-processor");
    expect(locked).not.toContain("fenced-processing");
  });

  it("atomic-command-record needs the event repository to join this very command store", () => {
    const own = new MemoryCommandStore();
    const repo = joiningRepository(own);
    const readmodelStoreBackend = new MemoryReadmodelStoreBackend();
    expect(guaranteesOf({ eventRepository: repo, commandStore: own, readmodelStoreBackend })).toContain("atomic-command-record");
    expect(guaranteesOf({ eventRepository: repo, commandStore: new MemoryCommandStore(), readmodelStoreBackend })).not.toContain(
      "atomic-command-record",
    );
  });

  it("refuses a command store offering some claim methods, wherever it is given", () => {
    const partial = without(new MemoryCommandStore(), "renewClaim");
    expect(refusal(() => guaranteesOf({ ...createMemoryBackends(), commandStore: partial })).message).toMatch(
      /all three or none|offer all/,
    );
    expect(refusal(() => createFacade({ commandStore: partial })).message).toMatch(/offer all/);
  });

  it("is listed in the Runtime's systemInfo", () => {
    expect(createFacade().runtime.systemInfo().guarantees).toEqual(MEMORY);
    const f = createFacade({ readmodelStoreBackend: lockingBackend() });
    expect(f.runtime.systemInfo().guarantees).toEqual([...MEMORY.slice(0, 3), "single-processor", "tenant-scoped-readmodels"]);
  });
});

describe("createFacade with a backend", () => {
  it("takes a whole backend: two facades given one memory backend share its events, and stop() closes the backend", async () => {
    const backend = createMemoryBackends();
    let closed = 0;
    const counted = {
      ...backend,
      close: async () => {
        closed++;
        await backend.close();
      },
    };
    const writer = createFacade({ backend: counted }).registerDomain(Ping);
    const reader = createFacade({ backend }).registerDomain(Ping);
    expect(writer.eventRepository.stored).toBe(backend.eventRepository);
    expect(writer.commandStore).toBe(backend.commandStore);
    expect(writer.dataStore).toBe(backend.dataStore);
    await writer.start();
    await reader.start();
    const r = await writer.dispatch(PingIt, { n: 7 }, { reqCtx: {} });
    expect((await reader.eventRepository.loadAggregate("ping-1")).map((e) => e.eventUuid)).toEqual([r.events[0]!.eventUuid]);
    await writer.stop();
    expect(closed).toBe(1);
    await expect(backend.eventRepository.headPosition()).rejects.toThrow(/closed/i);
    await reader.stop();
  });

  it("runs the app's own close as well, and a store option replaces the backend's store", async () => {
    const backend = createMemoryBackends();
    const mine = new MemoryReadmodelStoreBackend();
    let own = 0;
    const f = createFacade({ backend, readmodelStoreBackend: mine, close: () => void own++ });
    expect(f.readmodelStoreBackend).toBe(mine);
    await f.start();
    await f.stop();
    expect(own).toBe(1);
    await expect(backend.commandStore.get("x")).rejects.toThrow(/closed/i);
  });

  it("refuses something that is not a backend", () => {
    expect(refusal(() => createFacade({ backend: { eventRepository: new MemoryEventRepository() } as never })).message).toMatch(
      /backend must be a backend object/,
    );
  });
});

describe("a mix that loses a guarantee", () => {
  it("is refused naming each guarantee lost and the store responsible", () => {
    const backend = createMemoryBackends();
    const e = refusal(() =>
      createFacade({ backend, readmodelStoreBackend: without(new MemoryReadmodelStoreBackend(), "replaceCollections") }),
    );
    expect(e.message).toMatch(/blue-green-rebuild/);
    expect(e.message).toMatch(/readmodelStoreBackend/);
    expect(e.message).toMatch(/acceptLostGuarantees: \["blue-green-rebuild"\]/);
    expect(e.details).toEqual([
      expect.objectContaining({ guarantee: "blue-green-rebuild", store: "readmodelStoreBackend", pointer: "/readmodelStoreBackend" }),
    ]);
  });

  it("is refused when a store of a backend is given alone and the defaults lack what its backend gives", () => {
    const backend = createMemoryBackends();
    const weakened = defineBackend({ ...backend, readmodelStoreBackend: lockingBackend() }, backend.close);
    // The event repository alone: its backend keeps one processor per handler, the default readmodel backend does not.
    const e = refusal(() => createFacade({ eventRepository: weakened.eventRepository }));
    expect(e.details?.map((d) => [d.guarantee, d.store])).toEqual([["single-processor", "readmodelStoreBackend"]]);
    expect(e.message).toMatch(
      /the backend of eventRepository .*gives it; readmodelStoreBackend \(MemoryReadmodelStoreBackend, the default\)/,
    );
  });

  it("names every guarantee lost, the command store for an unjoined record and the event repository for missing loadEvents", () => {
    const own = new MemoryCommandStore();
    const e = refusal(() =>
      createFacade({
        backend: defineBackend({ ...createMemoryBackends(), eventRepository: joiningRepository(own), commandStore: own }, async () => {}),
        commandStore: new MemoryCommandStore(),
        eventRepository: without(joiningRepository(own), "loadEvents"),
      }),
    );
    expect(e.details?.map((d) => [d.guarantee, d.store])).toEqual([
      ["atomic-command-record", "commandStore"],
      ["replay-with-events", "eventRepository"],
    ]);
    expect(e.message).toMatch(/commandStore \(MemoryCommandStore\) is not in the event repository's database/);
  });

  it("is refused when a hand-made backend declares a guarantee its stores do not keep", () => {
    const m = createMemoryBackends();
    const e = refusal(() => createFacade({ backend: { ...m, guarantees: [...m.guarantees, "fenced-processing"] } }));
    expect(e.details?.map((d) => d.guarantee)).toEqual(["fenced-processing"]);
  });

  it("is accepted when the application lists the loss, and the facade then runs", async () => {
    const plain = without(new MemoryReadmodelStoreBackend(), "replaceCollections");
    const f = createFacade({ backend: createMemoryBackends(), readmodelStoreBackend: plain, acceptLostGuarantees: ["blue-green-rebuild"] });
    f.registerDomain(Ping);
    await f.start();
    expect((await f.dispatch(PingIt, { n: 1 }, { reqCtx: {} })).events).toHaveLength(1);
    expect(f.runtime.systemInfo().guarantees).not.toContain("blue-green-rebuild");
    await f.stop();
  });

  it("refuses acceptLostGuarantees that is not a list of guarantee names", () => {
    expect(refusal(() => createFacade({ acceptLostGuarantees: ["in-place"] as never })).message).toMatch(
      /acceptLostGuarantees must be an array of "atomic-command-record"/,
    );
    expect(refusal(() => createFacade({ acceptLostGuarantees: "blue-green-rebuild" as never })).message).toMatch(/must be an array/);
  });

  it("leaves single stores made outside a backend alone when they give what they offer", () => {
    // Plain stores offer only their own side; with the memory defaults nothing they offer is lost.
    expect(() => createFacade({ readmodelStoreBackend: without(new MemoryReadmodelStoreBackend(), "replaceCollections") })).not.toThrow();
    expect(() => createFacade({ eventRepository: new MemoryEventRepository(), commandStore: new MemoryCommandStore() })).not.toThrow();
    // A repository that joins only its companion command store offers the atomic record: another command store loses it.
    const own = new MemoryCommandStore();
    expect(() => createFacade({ eventRepository: joiningRepository(own), commandStore: own })).not.toThrow();
    expect(refusal(() => createFacade({ eventRepository: joiningRepository(own) })).details?.[0]).toMatchObject({
      guarantee: "atomic-command-record",
      store: "commandStore",
    });
  });
});
