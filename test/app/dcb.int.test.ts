/**
 * Dynamic consistency boundaries on every backend: the DCB conformance suite
 * (the dcb.events examples) on memory, a SQLite file and a Postgres schema;
 * and `scenario` with events of tagged types.
 */
import { describe, expect, it } from "vitest";
import { createTestFacade, DCB_RULE_BROKEN, dcbExamples, describeDcbContract, dcbWorld, scenario } from "mneme/testing";
import { createMemoryBackends } from "mneme/memory";
import { createSqliteBackends } from "mneme/sqlite";
import { createPostgresBackends } from "mneme/postgres";
import { sqliteScratch } from "../support/sqlite-scratch.js";
import { postgresScratch } from "../support/postgres-scratch.js";

const files = sqliteScratch("dcb");
const pg = postgresScratch("dcb");

describeDcbContract("memory", async () => dcbWorld({ backend: createMemoryBackends() }));
describeDcbContract("sqlite", async () => dcbWorld({ backend: createSqliteBackends({ filename: files.newFile() }) }));
describeDcbContract("postgres", async () => dcbWorld({ backend: createPostgresBackends({ pool: pg.pool, schema: pg.newSchema() }) }));

describe("scenario with tagged events", () => {
  it("given events of types with tags are indexed as a command would store them, so decisions see them", async () => {
    const ex = dcbExamples();
    const f = await createTestFacade({ register: ex.register });
    try {
      const { CourseDefined, StudentSubscribed } = ex.events;
      const given = [
        CourseDefined.create("course-c", { courseId: "c", capacity: 1 }),
        StudentSubscribed.create("sub-1", { studentId: "s1", courseId: "c" }),
      ];
      const refused = await scenario(f)
        .given(given)
        .when(ex.commands.Subscribe, { studentId: "s2", courseId: "c" })
        .thenThrows(DCB_RULE_BROKEN);
      expect(refused.message).toContain("is full");
      await scenario(f)
        .when(ex.commands.Unsubscribe, { studentId: "s1", courseId: "c" })
        .then([{ domain: "Courses", name: "StudentUnsubscribed", payload: { studentId: "s1", courseId: "c" } }]);
    } finally {
      await f.stop();
    }
  });
});
