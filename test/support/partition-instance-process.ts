/**
 * An app instance in a process of its own for the partition tests and bench
 * (run with `node --import tsx`): the 4-partition PartitionedLog on the shared
 * SQLite file or Postgres schema. Reports `{ ready, instanceId }` once
 * started; `"stop"` stops it gracefully (`{ stopped }`, then exit); a test may
 * SIGKILL it at any time. `{ report: true }` answers with the partitions it runs
 * (`running`), the events it applied and the CPU time it used so far (`cpuMs`).
 * With `workMicros`, it runs the bench's CpuTotals (that much CPU per event) instead.
 * Usage: partition-instance-process.ts sqlite|postgres <file|schema> <lockRetryMs> [workMicros]
 */
import { createFacade, withPartitions } from "mneme";
import { createPostgresBackends } from "mneme/postgres";
import { createSqliteBackends } from "mneme/sqlite";
import { Counter } from "./counter-domain.js";
import { CpuTotals, PartitionedLog } from "./partitioned-log.js";

const [kind, place, retryArg, workArg] = process.argv.slice(2);
if ((kind !== "sqlite" && kind !== "postgres") || place === undefined || retryArg === undefined || process.send === undefined) {
  throw new Error("usage: partition-instance-process.ts sqlite|postgres <file|schema> <lockRetryMs> [workMicros] (forked with IPC)");
}
const DATABASE_URL = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test";
const backends =
  kind === "sqlite"
    ? createSqliteBackends({ filename: place, pollIntervalMs: 10 })
    : createPostgresBackends({ connectionString: DATABASE_URL, schema: place, poolSize: 4, pollIntervalMs: 10 });
const facade = createFacade({ appName: "partitions", ...backends, delivery: { lockRetryMs: Number(retryArg) } });
facade.registerDomain(Counter);
const rm =
  workArg === undefined
    ? new PartitionedLog(facade, "PartitionedLog", withPartitions(4))
    : new CpuTotals(facade, "PartitionedLog", withPartitions(4));
if (rm instanceof CpuTotals) rm.workMicros = Number(workArg);
facade.registerReadmodel(rm);
await facade.start();

const running = (): number[] =>
  facade.runtime
    .listEventHandlers()[0]!
    .partitions!.filter((p) => p.state === "running")
    .map((p) => p.partition);
process.on("message", (m: unknown) => {
  if (m === "stop") {
    void facade.stop().then(() => {
      process.send!({ stopped: true }, () => process.exit(0));
    });
  } else if (typeof m === "object" && m !== null && "report" in m) {
    const cpu = process.cpuUsage();
    process.send!({ running: running(), applied: rm.getMetrics().eventsProcessed, cpuMs: (cpu.user + cpu.system) / 1000 });
  }
});
process.send({ ready: true, instanceId: facade.runtime.systemInfo().instanceId });
