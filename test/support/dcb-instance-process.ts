/**
 * An app instance in a process of its own for test/app/dcb-instances.int.test.ts
 * (forked with `--import tsx` and an IPC channel): the dcb.events examples on
 * a shared SQLite file or Postgres schema. On "go" it subscribes its students
 * to one course, each retried on CONFLICT or UNAVAILABLE until it succeeds or
 * a rule refuses it, reports every outcome and exits.
 */
import { createFacade, isMnemeError } from "mneme";
import { dcbExamples } from "mneme/testing";
import { createSqliteBackends } from "mneme/sqlite";
import { createPostgresBackends } from "mneme/postgres";

const [kind, where, courseId, studentsArg] = process.argv.slice(2);
if (kind === undefined || where === undefined || courseId === undefined || studentsArg === undefined || process.send === undefined) {
  throw new Error("usage: dcb-instance-process.ts <sqlite|postgres> <file|connectionString#schema> <courseId> <students,...>");
}
const [connectionString, schema] = where.split("#");
const backend =
  kind === "sqlite"
    ? createSqliteBackends({ filename: where, pollIntervalMs: 20 })
    : createPostgresBackends({ connectionString: connectionString!, schema: schema! });
const facade = createFacade({ appName: "dcb-instance", backend });
const examples = dcbExamples();
examples.register(facade);
await facade.start();
const go = new Promise((resolve) => process.once("message", resolve));
process.send({ ready: true });
await go;
const outcomes = await subscribeAll(studentsArg.split(","));
await facade.stop();
process.send({ outcomes }, () => process.exit(0));

async function subscribeAll(students: readonly string[]): Promise<string[]> {
  return Promise.all(
    students.map(async (studentId) => {
      const seen: string[] = [];
      for (let attempt = 0; attempt < 200; attempt++) {
        try {
          await facade.dispatch(examples.commands.Subscribe, { studentId, courseId: courseId! });
          seen.push("ok");
          break;
        } catch (e) {
          const code = isMnemeError(e) ? e.code : String(e);
          seen.push(code);
          if (code !== "CONFLICT" && code !== "UNAVAILABLE") break;
        }
      }
      return seen.join(">");
    }),
  );
}
