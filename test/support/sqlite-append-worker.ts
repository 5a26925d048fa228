/**
 * Worker for test/sqlite/sqlite-backends.int.test.ts: appends to a shared SQLite file
 * from another thread (its own connection), so BEGIN IMMEDIATE, busy_timeout
 * and optimistic concurrency are exercised across connections for real.
 */
import { parentPort, workerData } from "node:worker_threads";
import { isMnemeError } from "../../src/model/errors.js";
import type { SqliteDriverName } from "../../src/sqlite/sqlite-driver.js";
import { SqliteEventRepository } from "../../src/sqlite/sqlite-event-repository.js";

const { filename, worker, rounds, driver } = workerData as {
  filename: string;
  worker: number;
  rounds: number;
  driver: SqliteDriverName;
};
const repo = new SqliteEventRepository({ filename, driver });
let conflicts = 0;
for (let i = 0; i < rounds; i++) {
  // Contended: read the version, append expecting it, retry on CONFLICT.
  for (;;) {
    const version = (await repo.loadAggregate("contended")).length;
    try {
      await repo.append([{ domain: "T", name: "Bumped", aggregateUuid: "contended", payload: { worker, i } }], {
        expectedVersions: { contended: version },
      });
      break;
    } catch (e) {
      if (!isMnemeError(e, "CONFLICT")) throw e;
      conflicts++;
    }
  }
  // Uncontended: a small batch of the worker's own aggregate.
  await repo.append([
    { domain: "T", name: "Own", aggregateUuid: `own-${worker}`, payload: { i } },
    { domain: "T", name: "Own", aggregateUuid: `own-${worker}`, payload: { i } },
  ]);
}
await repo.close();
parentPort?.postMessage({ conflicts });
