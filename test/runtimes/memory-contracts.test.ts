/**
 * The in-memory backend's conformance suites, on the runtime running this
 * file (Bun, Deno or Node), against the built package.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Event, NewEvent } from "mneme";
import type { AppendOptions, DataStore } from "mneme/store";
import {
  FilesystemDataStore,
  MemoryCacheStore,
  MemoryCommandStore,
  MemoryDataStore,
  MemoryEventRepository,
  MemoryLogStore,
  MemoryReadmodelStoreBackend,
  MemorySnapshotStore,
  createMemoryBackends,
} from "mneme/memory";
import {
  describeCacheStoreContract,
  describeCommandStoreContract,
  describeDataStoreContract,
  describeEventRepositoryContract,
  describeKeyStoreContract,
  describeLogStoreContract,
  describeReadmodelStoreBackendContract,
  describeSnapshotStoreContract,
} from "mneme/testing";

describeEventRepositoryContract("memory", async () => new MemoryEventRepository());
describeCommandStoreContract("memory", async () => new MemoryCommandStore());
describeDataStoreContract("memory", async () => new MemoryDataStore());
describeCacheStoreContract("memory", async () => new MemoryCacheStore());
describeLogStoreContract("memory", async () => new MemoryLogStore());
describeReadmodelStoreBackendContract("memory", async () => new MemoryReadmodelStoreBackend());
describeSnapshotStoreContract("memory", async () => new MemorySnapshotStore());
describeKeyStoreContract("createMemoryBackends().keyStore", async () => createMemoryBackends().keyStore);

const roots = new Map<DataStore, string>();
describeDataStoreContract(
  "filesystem",
  async () => {
    const root = await mkdtemp(join(tmpdir(), "mneme-rt-fs-"));
    const store = new FilesystemDataStore({ rootDir: root, fsync: false });
    roots.set(store, root);
    return store;
  },
  {
    cleanup: async (store) => {
      const root = roots.get(store);
      roots.delete(store);
      if (root !== undefined) await rm(root, { recursive: true, force: true });
    },
  },
);

/** Broken on purpose: it exempts every aggregate from the tenant rule. The suite must catch it on this runtime too. */
class WithoutTenantRule extends MemoryEventRepository {
  override append(events: readonly NewEvent[], opts: AppendOptions = {}): Promise<Event[]> {
    return super.append(events, { ...opts, globalAggregates: events.map((e) => e.aggregateUuid) });
  }
}
describeEventRepositoryContract("memory without the tenant rule (broken on purpose)", async () => new WithoutTenantRule(), {
  expectFailures: [
    {
      reason: "the store omits the tenant rule",
      tests: [
        "an event of another tenant than its aggregate's gives NOT_FOUND and writes nothing",
        "an aggregate belongs to the tenant of its first event, in the same call too; the empty tenant is a tenant",
        "aggregates in globalAggregates take events of any tenant; the others in the same call are still checked",
        "concurrent first appends of one aggregate from two tenants: one tenant's events only",
      ],
    },
  ],
});
