/**
 * Dynamic consistency boundaries on Postgres (DATABASE_URL, default
 * postgres://postgres@127.0.0.1:5432/test; schemas of its own, dropped at the
 * end): the course-subscription rule of dcb.events (a course's capacity and a
 * student's number of courses) from C = 1 and C = 16 callers, each caller
 * subscribing fresh students to courses of its own, 25 per course (no
 * conflicts: the cost of the decision, not of retries; a bounded history per
 * decision, as a real course has), three ways in interleaved rounds:
 *
 * - mneme DCB: `Subscribe` of `dcbExamples()`, two `ctx.events.fold` queries
 *   (the course's events, the student's), the append conditional on both
 *   (`mneme_append_tagged`, group commit);
 * - mneme aggregates: the same rule with a Course and a Student aggregate,
 *   both loaded (read-checked), the event appended to the course;
 * - raw pg: one transaction under the schema's advisory lock doing the same
 *   lookups on a tag table of the same shape, then the event and its tag rows;
 * - raw pg with the other storage the design allowed: the tags as a `text[]`
 *   column of the events table with a GIN index (`tags @> ARRAY[...]`), the same
 *   transaction otherwise; it shows what the tag table costs against it.
 *
 * Prints mneme's ratios against each and the load average.
 */
import { loadavg } from "node:os";
import pg from "pg";
import { createFacade, type Facade } from "../src/app/facade.js";
import { newUuid, nowNs } from "../src/model/clock.js";
import { defineDomain } from "../src/model/domain.js";
import { anonymous } from "../src/model/permission.js";
import { createPostgresBackends, type PostgresBackends } from "../src/postgres/postgres-backends.js";
import { PostgresEventRepository } from "../src/postgres/postgres-event-repository.js";
import { dcbExamples } from "../src/testing/dcb-examples.js";
import { BENCH_REQ_CTX as reqCtx, BENCH_TENANT as TENANT, type Bench, duel } from "./harness.js";

const DATABASE_URL = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test";
const CAPACITY = 1_000;
const REQ_CTX_JSON = JSON.stringify(reqCtx);

/** The rule with aggregates: a course (capacity, seats taken) and a student (courses), both loaded. */
function aggregateCourses() {
  const D = defineDomain("AggCourses");
  const CourseDefined = D.event<{ capacity: number }>("CourseDefined");
  const StudentSubscribed = D.event<{ studentId: string; courseId: string }>("StudentSubscribed");
  const Course = D.aggregate<{ capacity: number; taken: number }>("Course", {
    initialState: () => ({ capacity: 0, taken: 0 }),
    evolve: {
      CourseDefined: (s, p: { capacity: number }) => ({ ...s, capacity: p.capacity }),
      StudentSubscribed: (s) => ({ ...s, taken: s.taken + 1 }),
    },
  });
  const Student = D.aggregate<{ courses: number }>("Student", {
    initialState: () => ({ courses: 0 }),
    evolve: { StudentSubscribed: (s) => ({ courses: s.courses + 1 }) },
  });
  const DefineCourse = D.command<{ courseId: string; capacity: number }>("DefineCourse", { permission: anonymous });
  const Subscribe = D.command<{ studentId: string; courseId: string }>("Subscribe", { permission: anonymous });
  const register = (f: Facade): void => {
    f.registerDomain(D, (d) => {
      d.handleCommand(DefineCourse, (_ctx, _c, p) => [CourseDefined.create(p.courseId, { capacity: p.capacity })]);
      d.handleCommand(Subscribe, async (ctx, _c, p) => {
        const [course, student] = await Promise.all([ctx.aggregates.load(Course, p.courseId), ctx.aggregates.load(Student, p.studentId)]);
        if (course.state.taken >= course.state.capacity || student.state.courses >= 3) throw new Error("refused");
        return [StudentSubscribed.create(p.courseId, p)];
      });
    });
  };
  return { register, DefineCourse, Subscribe };
}

export default async function dcbBench(b: Bench): Promise<void> {
  const admin = new pg.Pool({ connectionString: DATABASE_URL, max: 2 });
  admin.on("error", () => {});
  try {
    await admin.query("SELECT 1");
  } catch (e) {
    console.log(`  postgres: skipped, no database at ${DATABASE_URL.replace(/:[^:@/]*@/, "@")} (${String(e)})`);
    await admin.end();
    return;
  }
  const schemas: string[] = [];
  const schemaOf = (tag: string): string => {
    const s = `mneme_bench_dcb_${tag}_${process.pid}`;
    schemas.push(s);
    return s;
  };
  try {
    for (const c of [1, 16]) await subscriptions(b, schemaOf, c);
    console.log(
      `  load average ${loadavg()
        .map((l) => l.toFixed(2))
        .join(" ")}`,
    );
  } finally {
    for (const s of schemas) await admin.query(`DROP SCHEMA IF EXISTS "${s}" CASCADE`).catch(() => undefined);
    await admin.end();
  }
}

async function started(
  schema: string,
  poolSize: number,
  register: (f: Facade) => void,
): Promise<{ f: Facade; backends: PostgresBackends }> {
  const backends = createPostgresBackends({ connectionString: DATABASE_URL, schema, poolSize });
  const f = createFacade({ appName: "bench-dcb", backend: backends });
  register(f);
  await f.start();
  return { f, backends };
}

/** Students per course before a caller moves on to its next course: the size of a real course's history. */
const PER_COURSE = 25;

/**
 * The courses of `c` callers: caller i subscribes PER_COURSE fresh students to its current course, then moves to
 * its next one, so each decision reads a bounded history (the course's events and the student's), as in life.
 */
class CourseRota {
  readonly #courses: string[][];
  readonly #done: number[];
  constructor(c: number, perCaller: number) {
    this.#courses = Array.from({ length: c }, () => Array.from({ length: Math.ceil(perCaller / PER_COURSE) + 1 }, () => newUuid()));
    this.#done = new Array<number>(c).fill(0);
  }
  get all(): string[] {
    return this.#courses.flat();
  }
  next(caller: number): string {
    const n = this.#done[caller]!++;
    return this.#courses[caller]![Math.floor(n / PER_COURSE)]!;
  }
}

/** `total` subscriptions from `c` callers, each on its own courses (see CourseRota), a fresh student each. */
async function callers(
  c: number,
  total: number,
  rota: CourseRota,
  subscribe: (courseId: string, studentId: string) => Promise<unknown>,
): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: c }, async (_, caller) => {
      while (next < total) {
        next++;
        await subscribe(rota.next(caller), newUuid());
      }
    }),
  );
}

async function subscriptions(b: Bench, schemaOf: (tag: string) => string, c: number): Promise<void> {
  const perC = b.quick ? 200 : 1_000;
  const rounds = 4;
  const ex = dcbExamples({ maxCoursesPerStudent: 3 });
  const agg = aggregateCourses();
  const dcb = await started(schemaOf(`q${c}`), Math.max(10, c), ex.register);
  const aggs = await started(schemaOf(`a${c}`), Math.max(10, c), agg.register);
  const rawSchema = schemaOf(`raw${c}`);
  const pool = new pg.Pool({ connectionString: DATABASE_URL, max: Math.max(2, c) });
  pool.on("error", () => {});
  const repo = new PostgresEventRepository({ pool, schema: rawSchema, pollIntervalMs: 0 });
  await repo.init();
  await repo.close();
  const warm = Math.max(50, 4 * c);
  // Each side its own rota over the same course ids (each side has its own store): a side's history is its own.
  const perCaller = Math.ceil((warm + perC) / c) + warm;
  const rotas = [
    new CourseRota(c, perCaller),
    new CourseRota(c, perCaller),
    new CourseRota(c, perCaller),
    new CourseRota(c, perCaller),
  ] as const;
  for (const courseId of rotas[0].all) await dcb.f.dispatch(ex.commands.DefineCourse, { courseId, capacity: CAPACITY }, { reqCtx });
  for (const courseId of rotas[1].all) await aggs.f.dispatch(agg.DefineCourse, { courseId, capacity: CAPACITY }, { reqCtx });
  const raw = rawSubscribe(pool, rawSchema);
  const gin = await ginSubscribe(pool, rawSchema);
  const viaDcb = (courseId: string, studentId: string) => dcb.f.dispatch(ex.commands.Subscribe, { courseId, studentId }, { reqCtx });
  const viaAggregates = (courseId: string, studentId: string) => aggs.f.dispatch(agg.Subscribe, { courseId, studentId }, { reqCtx });
  // Warm-up: connections opened, statements prepared.
  await callers(c, warm, rotas[0], viaDcb);
  await callers(c, warm, rotas[1], viaAggregates);
  await callers(c, warm, rotas[2], raw);
  await callers(c, warm, rotas[3], gin);
  await duel(
    b,
    "dcb",
    `course subscription (capacity + student limit), C = ${c}`,
    perC / rounds,
    rounds,
    () => callers(c, perC / rounds, rotas[0], viaDcb),
    [
      { name: "mneme aggregates (Course + Student loaded)", run: () => callers(c, perC / rounds, rotas[1], viaAggregates) },
      {
        name: "raw pg (advisory lock; tag lookups; INSERT event + tags; one transaction)",
        run: () => callers(c, perC / rounds, rotas[2], raw),
      },
      { name: "raw pg, tags as text[] + GIN (same transaction)", run: () => callers(c, perC / rounds, rotas[3], gin) },
    ],
    "commands/s",
  );
  for (const { f, backends } of [dcb, aggs]) {
    await f.stop();
    await backends.close();
  }
  await pool.end();
}

/**
 * The raw side: one transaction under the schema's advisory lock reads the course's and the student's events
 * through a tag table of mneme's shape (as mneme's condition and read do), decides, and writes the event at the
 * next position with its tag rows.
 */
function rawSubscribe(pool: pg.Pool, schema: string): (courseId: string, studentId: string) => Promise<void> {
  const s = `"${schema}"`;
  const lookup = `SELECT count(*)::int AS n FROM ${s}.event_tags t WHERE t.tenant_uuid = $1 AND t.tag = $2
      AND (SELECT 1 FROM ${s}.event_tags u WHERE u.tenant_uuid = $1 AND u.tag = ':Courses.StudentSubscribed' AND u.position = t.position LIMIT 1) IS NOT NULL`;
  const insert = `WITH p AS (SELECT coalesce(max(position), 0) + 1 AS position FROM ${s}.events),
      e AS (INSERT INTO ${s}.events (position, event_uuid, tenant_uuid, domain, name, aggregate_uuid, version, command_uuid, created_at, req_ctx, payload, event_version)
            SELECT p.position, $1, $2, 'Courses', 'StudentSubscribed', $1, 1, $3, $4, $5::jsonb, $6::jsonb, 1 FROM p RETURNING position)
      INSERT INTO ${s}.event_tags (tenant_uuid, tag, position)
      SELECT $2, x.tag, e.position FROM e, unnest(ARRAY[':Courses.StudentSubscribed', $7, $8]) AS x(tag)`;
  return async (courseId, studentId) => {
    const client = await pool.connect();
    try {
      await client.query("BEGIN");
      await client.query("SELECT pg_advisory_xact_lock(4242)");
      const seats = (await client.query<{ n: number }>(lookup, [TENANT, `course:${courseId}`])).rows[0]!.n;
      const mine = (await client.query<{ n: number }>(lookup, [TENANT, `student:${studentId}`])).rows[0]!.n;
      if (seats >= CAPACITY || mine >= 3) throw new Error("refused");
      const uuid = newUuid();
      await client.query(insert, [
        uuid,
        TENANT,
        newUuid(),
        nowNs(),
        REQ_CTX_JSON,
        JSON.stringify({ studentId, courseId }),
        `course:${courseId}`,
        `student:${studentId}`,
      ]);
      await client.query("COMMIT");
    } catch (e) {
      await client.query("ROLLBACK").catch(() => undefined);
      throw e;
    } finally {
      client.release();
    }
  };
}

/** The raw side with tags as a `text[]` column under a GIN index (the alternative to the tag table), same transaction. */
async function ginSubscribe(pool: pg.Pool, schema: string): Promise<(courseId: string, studentId: string) => Promise<void>> {
  const table = `"${schema}".gin_events`;
  await pool.query(`CREATE TABLE IF NOT EXISTS ${table} (
      position bigint PRIMARY KEY, event_uuid text NOT NULL, tenant_uuid text NOT NULL, domain text NOT NULL, name text NOT NULL,
      command_uuid text, created_at bigint NOT NULL, req_ctx jsonb NOT NULL, payload jsonb NOT NULL, tags text[] NOT NULL)`);
  await pool.query(`CREATE INDEX IF NOT EXISTS gin_events_tags ON ${table} USING gin (tags)`);
  const lookup = `SELECT count(*)::int AS n FROM ${table} WHERE tenant_uuid = $1 AND tags @> ARRAY[$2::text, ':Courses.StudentSubscribed']`;
  const insert = `INSERT INTO ${table} (position, event_uuid, tenant_uuid, domain, name, command_uuid, created_at, req_ctx, payload, tags)
      SELECT coalesce(max(position), 0) + 1, $1, $2, 'Courses', 'StudentSubscribed', $3, $4, $5::jsonb, $6::jsonb,
             ARRAY[':Courses.StudentSubscribed', $7::text, $8::text] FROM ${table}`;
  return async (courseId, studentId) => {
    const client = await pool.connect();
    try {
      await client.query("BEGIN");
      await client.query("SELECT pg_advisory_xact_lock(4243)");
      const seats = (await client.query<{ n: number }>(lookup, [TENANT, `course:${courseId}`])).rows[0]!.n;
      const mine = (await client.query<{ n: number }>(lookup, [TENANT, `student:${studentId}`])).rows[0]!.n;
      if (seats >= CAPACITY || mine >= 3) throw new Error("refused");
      const payload = JSON.stringify({ studentId, courseId });
      await client.query(insert, [
        newUuid(),
        TENANT,
        newUuid(),
        nowNs(),
        REQ_CTX_JSON,
        payload,
        `course:${courseId}`,
        `student:${studentId}`,
      ]);
      await client.query("COMMIT");
    } catch (e) {
      await client.query("ROLLBACK").catch(() => undefined);
      throw e;
    } finally {
      client.release();
    }
  };
}
