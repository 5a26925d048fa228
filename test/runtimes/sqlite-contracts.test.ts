/**
 * The SQLite backend's conformance suites, on the runtime running this file
 * with that runtime's own SQLite (bun:sqlite on Bun, node:sqlite on Deno and
 * Node), against the built package: every test on a new database file.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll } from "vitest";
import {
  SqliteCacheStore,
  SqliteCommandStore,
  SqliteDataStore,
  SqliteEventRepository,
  SqliteKeyStore,
  SqliteLogStore,
  SqliteReadmodelStoreBackend,
  SqliteSnapshotStore,
  createSqliteBackends,
} from "mneme/sqlite";
import {
  describeCacheStoreContract,
  describeCommandStoreContract,
  describeDataStoreContract,
  describeEventRepositoryContract,
  describeKeyStoreContract,
  describeLogStoreContract,
  describeReadmodelStoreBackendContract,
  describeSnapshotStoreContract,
  describeSqlTableAccessContract,
} from "mneme/testing";
import { JSON_PARSE_KEY_SKIP } from "./known-issues.js";
import { runtimeSqliteDriver } from "./runtime.js";

const driver = runtimeSqliteDriver();
const dir = mkdtempSync(join(tmpdir(), "mneme-rt-sqlite-"));
let fileNo = 0;
const newFile = (): string => join(dir, `t${++fileNo}.db`);
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describeEventRepositoryContract(
  `SqliteEventRepository (${driver})`,
  async () => new SqliteEventRepository({ filename: newFile(), driver }),
  { skip: JSON_PARSE_KEY_SKIP },
);
describeCommandStoreContract(`SqliteCommandStore (${driver})`, async () => new SqliteCommandStore({ filename: newFile(), driver }));
describeLogStoreContract(`SqliteLogStore (${driver})`, async () => new SqliteLogStore({ filename: newFile(), driver }));
describeReadmodelStoreBackendContract(
  `SqliteReadmodelStoreBackend (${driver})`,
  async () => new SqliteReadmodelStoreBackend({ filename: newFile(), driver }),
);
describeSqlTableAccessContract(
  `SqliteReadmodelStoreBackend (${driver})`,
  async () => new SqliteReadmodelStoreBackend({ filename: newFile(), driver }),
);
describeSnapshotStoreContract(`SqliteSnapshotStore (${driver})`, async () => new SqliteSnapshotStore({ filename: newFile(), driver }));
describeKeyStoreContract(`SqliteKeyStore (${driver})`, async () => new SqliteKeyStore({ filename: newFile(), driver }));
describeDataStoreContract(`SqliteDataStore (${driver})`, async () => new SqliteDataStore({ filename: newFile(), driver }));
describeCacheStoreContract(`SqliteCacheStore (${driver})`, async () => new SqliteCacheStore({ filename: newFile(), driver }));

// Again through createSqliteBackends, whose stores share one connection: the others are closed at once,
// so the suite's close() of the tested store is the one that closes the file.
async function sharedStore<K extends "eventRepository" | "readmodelStoreBackend">(key: K) {
  const b = createSqliteBackends({ filename: newFile(), driver });
  const others = (
    [
      "eventRepository",
      "commandStore",
      "logStore",
      "readmodelStoreBackend",
      "snapshotStore",
      "keyStore",
      "dataStore",
      "cacheStore",
    ] as const
  ).filter((k) => k !== key);
  await Promise.all(others.map((k) => b[k].close()));
  return b[key];
}
describeEventRepositoryContract(`createSqliteBackends({ driver: "${driver}" }).eventRepository`, () => sharedStore("eventRepository"), {
  skip: JSON_PARSE_KEY_SKIP,
});
describeReadmodelStoreBackendContract(`createSqliteBackends({ driver: "${driver}" }).readmodelStoreBackend`, () =>
  sharedStore("readmodelStoreBackend"),
);
