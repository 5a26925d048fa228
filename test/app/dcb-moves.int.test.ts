/**
 * The tag index travels with the events: a store copy (SQLite to Postgres
 * and back) and an online tenant move between shards carry it, so the
 * decisions of commands (`ctx.events`, docs/dcb.md) on the copy see what
 * they saw on the source.
 */
import { describe, expect, it } from "vitest";
import { createFacade, isMnemeError, newUuid, type Facade, type FacadeOptions } from "mneme";
import { dcbExamples, type DcbExamples } from "mneme/testing";
import { createSqliteBackends } from "mneme/sqlite";
import { createPostgresBackends } from "mneme/postgres";
import { copyStore } from "mneme/store-copy";
import { createShardedApp } from "mneme/shards";
import { sqliteScratch } from "../support/sqlite-scratch.js";
import { DATABASE_URL, postgresScratch } from "../support/postgres-scratch.js";

const files = sqliteScratch("dcb-moves");
const pgs = postgresScratch("dcb_moves");
const pgUrl = (schema: string): string => {
  const u = new URL(DATABASE_URL);
  u.searchParams.set("schema", schema);
  return u.toString();
};

async function started(backend: NonNullable<FacadeOptions["backend"]>, ex: DcbExamples): Promise<Facade> {
  const f = files.keep(createFacade({ appName: "dcb-moves", backend }));
  ex.register(f);
  await f.start();
  return f;
}

async function codeOf(p: Promise<unknown>): Promise<string> {
  try {
    await p;
    return "ok";
  } catch (e) {
    return isMnemeError(e) ? `${e.code}: ${e.message}` : String(e);
  }
}

/** What the courses' tag index answers on a facade: the positions of course c's subscriptions, and of student s1's. */
async function tagged(f: Facade, tenant: string): Promise<{ course: number; student: number }> {
  const repo = f.eventRepository;
  const course = await repo.readTagged!(tenant, [{ tags: ["course:c"], types: ["Courses.StudentSubscribed"] }]);
  const student = await repo.readTagged!(tenant, [{ tags: ["student:s1"] }]);
  return { course: course.events.length, student: student.events.length };
}

/** The decisions on a copy: the course is full, a student's own subscription is found and can be ended. */
async function expectDecisionsCarried(f: Facade, ex: DcbExamples, tenant: string): Promise<void> {
  const reqCtx = { senderTenantUuid: tenant };
  const { Subscribe, Unsubscribe, Register } = ex.commands;
  expect(await codeOf(f.dispatch(Subscribe, { studentId: "s3", courseId: "c" }, { reqCtx }))).toMatch(/DCB_RULE_BROKEN: .*is full/);
  expect(await codeOf(f.dispatch(Register, { accountId: newUuid(), username: "ann" }, { reqCtx }))).toMatch(/DCB_RULE_BROKEN: .*taken/);
  await f.dispatch(Unsubscribe, { studentId: "s1", courseId: "c" }, { reqCtx });
  await f.dispatch(Subscribe, { studentId: "s3", courseId: "c" }, { reqCtx });
}

async function seed(f: Facade, ex: DcbExamples, tenant: string): Promise<void> {
  const reqCtx = { senderTenantUuid: tenant };
  await f.dispatch(ex.commands.DefineCourse, { courseId: "c", capacity: 2 }, { reqCtx });
  await f.dispatch(ex.commands.Subscribe, { studentId: "s1", courseId: "c" }, { reqCtx });
  await f.dispatch(ex.commands.Subscribe, { studentId: "s2", courseId: "c" }, { reqCtx });
  await f.dispatch(ex.commands.Register, { accountId: newUuid(), username: "ann" }, { reqCtx });
}

describe("store copy carries the tag index", () => {
  it("SQLite to Postgres and back: the copies' queries find what the source's found, and decide alike", async () => {
    const ex = dcbExamples();
    const file = files.newFile();
    const source = await started(createSqliteBackends({ filename: file }), ex);
    await seed(source, ex, "t1");
    const before = await tagged(source, "t1");
    expect(before).toEqual({ course: 2, student: 1 });
    await source.stop();

    const schema = pgs.newSchema();
    await copyStore({ from: file, to: pgUrl(schema) });
    const onPg = await started(createPostgresBackends({ pool: pgs.pool, schema }), ex);
    expect(await tagged(onPg, "t1")).toEqual(before);
    await onPg.stop();

    const back = files.newFile();
    await copyStore({ from: pgUrl(schema), to: back });
    const onSqlite = await started(createSqliteBackends({ filename: back }), ex);
    expect(await tagged(onSqlite, "t1")).toEqual(before);
    await expectDecisionsCarried(onSqlite, ex, "t1");
    await onSqlite.stop();

    const again = await started(createPostgresBackends({ pool: pgs.pool, schema }), ex);
    await expectDecisionsCarried(again, ex, "t1");
    await again.stop();
  }, 120_000);
});

describe("a tenant move between shards carries the tag index", () => {
  it("the moved tenant's decisions on its new shard see its events", async () => {
    const ex = dcbExamples();
    const id = newUuid().replace(/-/g, "").slice(-10);
    const shards = [
      { name: "s0", connectionString: DATABASE_URL, schema: `dcbsh0_${id}` },
      { name: "s1", connectionString: DATABASE_URL, schema: `dcbsh1_${id}` },
    ];
    const app = createShardedApp({
      control: { connectionString: DATABASE_URL, schema: `dcbshc_${id}` },
      shards,
      configure: (f) => ex.register(f),
      facadeOptions: () => ({ appName: "dcb-shards" }),
      backendOptions: { pollIntervalMs: 200 },
    });
    await app.start();
    try {
      const tenant = `tenant-${id}`;
      await app.placeTenant(tenant, { shard: "s0" });
      await seed(await app.facadeFor(tenant), ex, tenant);
      const before = await tagged(app.shard("s0"), tenant);
      expect(before).toEqual({ course: 2, student: 1 });
      await app.moveTenant(tenant, "s1", { catchUpMs: 30_000 });
      expect(await tagged(app.shard("s1"), tenant)).toEqual(before);
      const reqCtx = { senderTenantUuid: tenant };
      expect(await codeOf(app.dispatch(ex.commands.Subscribe, { studentId: "s3", courseId: "c" }, { reqCtx }))).toMatch(/is full/);
      await app.dispatch(ex.commands.Unsubscribe, { studentId: "s1", courseId: "c" }, { reqCtx });
      await app.dispatch(ex.commands.Subscribe, { studentId: "s3", courseId: "c" }, { reqCtx });
      expect(await tagged(app.shard("s1"), tenant)).toEqual({ course: 3, student: 2 });
    } finally {
      await app.stop();
      for (const s of [...shards.map((x) => x.schema), `dcbshc_${id}`]) await pgs.pool.query(`DROP SCHEMA IF EXISTS "${s}" CASCADE`);
    }
  }, 120_000);
});
