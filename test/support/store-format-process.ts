/**
 * One app instance starting on a store, for the concurrent-start tests of
 * test/store/store-format.int.test.ts: opens the stores (`sqlite <file>` or
 * `postgres <schema>`), prints "ready", waits for a line "go" on stdin (so
 * every process runs init() at the same moment), runs init() of every store,
 * and prints the format record each store reports, or the error's code.
 */
import { createInterface } from "node:readline";
import { isMnemeError } from "mneme";
import { createPostgresBackends } from "mneme/postgres";
import { createSqliteBackends } from "mneme/sqlite";

const [kind, target] = process.argv.slice(2);
if (target === undefined) throw new Error("usage: store-format-process sqlite <file> | postgres <schema>");
const connectionString = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test";
const stores =
  kind === "postgres"
    ? createPostgresBackends({ connectionString, schema: target, poolSize: 4, pollIntervalMs: 0 })
    : createSqliteBackends({ filename: target });
const all = [stores.eventRepository, stores.commandStore, stores.logStore, stores.readmodelStoreBackend, stores.snapshotStore];
process.stdout.write("ready\n");
const lines = createInterface({ input: process.stdin });
for await (const line of lines) {
  if (line.trim() !== "go") continue;
  try {
    await Promise.all(all.map((s) => s.init()));
    const formats = all.map((s) => (s as unknown as { storeFormat(): unknown }).storeFormat());
    process.stdout.write(`${JSON.stringify({ formats })}\n`);
  } catch (e) {
    process.stdout.write(`${JSON.stringify({ error: isMnemeError(e) ? e.code : String(e), message: String((e as Error).message) })}\n`);
  }
  break;
}
lines.close();
await stores.close();
