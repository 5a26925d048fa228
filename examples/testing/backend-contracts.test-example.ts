/**
 * docs/testing.md's conformance-suite examples: the six suites of
 * `mneme/testing` run against backends, as you run them against your own.
 * Here the backends are mneme's memory and filesystem stores (and one broken
 * on purpose), and a backend of one's own declaring its guarantees.
 * test/project/docs-testing.unit.test.ts calls backendContracts().
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expect, it } from "vitest";
import { createFacade } from "mneme";
import { type CollectionScope, type DataStore, defineBackend, type ReadmodelCollection } from "mneme/store";
import {
  describeCacheStoreContract,
  describeCommandStoreContract,
  describeDataStoreContract,
  describeEventRepositoryContract,
  describeLogStoreContract,
  describeReadmodelStoreBackendContract,
} from "mneme/testing";
import { FilesystemDataStore, MemoryCacheStore, MemoryCommandStore, MemoryEventRepository, MemoryLogStore, MemoryReadmodelStoreBackend } from "mneme/memory";

/** Broken on purpose: `descending` is ignored by list(). The suite must catch it. */
class IgnoresDescending extends MemoryReadmodelStoreBackend {
  override collection<T>(name: string, scope?: CollectionScope): ReadmodelCollection<T> {
    const col = super.collection<T>(name, scope);
    const list = col.list.bind(col);
    col.list = (opts = {}) => list({ ...opts, descending: false });
    return col;
  }
}

export function backendContracts(): void {
  // The factory makes a fresh store for every test; the suite calls init() first and close() after.
  describeCommandStoreContract("memory", async () => new MemoryCommandStore());
  describeCacheStoreContract("memory", async () => new MemoryCacheStore());
  describeLogStoreContract("memory", async () => new MemoryLogStore());
  describeReadmodelStoreBackendContract("memory", async () => new MemoryReadmodelStoreBackend());

  // skip: tests this run leaves out, each group with its reason (shown in the skipped test's title).
  describeEventRepositoryContract("memory", async () => new MemoryEventRepository(), {
    skip: [{ reason: "a fast-check property: runs in the nightly job", tests: ["every accepted payload reads back unchanged"] }],
  });

  // cleanup: runs after each test, before close(): here it removes the directory the factory made.
  const dirs = new Map<DataStore, string>();
  describeDataStoreContract(
    "filesystem",
    async () => {
      const rootDir = await mkdtemp(join(tmpdir(), "datastore-contract-"));
      const store = new FilesystemDataStore({ rootDir, fsync: false });
      dirs.set(store, rootDir);
      return store;
    },
    {
      cleanup: async (store) => {
        await rm(dirs.get(store)!, { recursive: true, force: true });
        dirs.delete(store);
      },
    },
  );

  // expectFailures: tests that must fail on a deliberately broken store (they pass only when their body fails).
  describeReadmodelStoreBackendContract("memory, descending ignored (broken on purpose)", async () => new IgnoresDescending(), {
    expectFailures: [
      {
        reason: "list() ignores descending",
        tests: [
          "list orders by key by default",
          "list orderBy a string field; descending is the exact reverse",
          "paging with orderBy is stable: no duplicates, no gaps",
          "where combines with orderBy, offset and limit",
        ],
      },
    ],
  });

  it("declares the guarantees its stores give together, and createFacade keeps them", async () => {
    // A backend of your own: defineBackend bundles its stores and derives what they guarantee from the methods they implement.
    const backend = defineBackend(
      {
        eventRepository: new MemoryEventRepository(),
        commandStore: new MemoryCommandStore(),
        readmodelStoreBackend: new MemoryReadmodelStoreBackend(),
        logStore: new MemoryLogStore(),
      },
      async () => undefined,
    );
    expect(backend.guarantees).toEqual(["replay-with-events", "exactly-once-dispatch", "blue-green-rebuild", "tenant-scoped-readmodels"]);

    // A store of another kind that lacks one is refused, naming the guarantee, unless the loss is accepted.
    const inPlace = new IgnoresDescending();
    Object.defineProperty(inPlace, "replaceCollections", { value: undefined });
    expect(() => createFacade({ backend, readmodelStoreBackend: inPlace })).toThrow(/blue-green-rebuild/);
    const facade = createFacade({ backend, readmodelStoreBackend: inPlace, acceptLostGuarantees: ["blue-green-rebuild"] });
    expect(facade.runtime.systemInfo().guarantees).not.toContain("blue-green-rebuild");
  });
}
