/**
 * Dynamic consistency boundaries across instances: two and three app
 * instances (facades of their own on one SQLite file or Postgres schema, one
 * of them a child process) race to subscribe students to one course. The
 * course is never over-subscribed: exactly its capacity succeeds, the others
 * get CONFLICT (retried) until the rule refuses them, also while Postgres
 * sessions of the instances are terminated at random moments. And a
 * fast-check property: random interleavings of subscribe and unsubscribe
 * leave a history that obeys both limits of the rule, and sequential
 * commands decide as the model does.
 */
import { fork } from "node:child_process";
import { fileURLToPath } from "node:url";
import fc from "fast-check";
import pg from "pg";
import { describe, expect, it } from "vitest";
import { createFacade, isMnemeError, type Event, type Facade, type FacadeOptions } from "mneme";
import { dcbExamples, type DcbExamples } from "mneme/testing";
import { createMemoryBackends } from "mneme/memory";
import { createSqliteBackends } from "mneme/sqlite";
import { createPostgresBackends } from "mneme/postgres";
import { sqliteScratch } from "../support/sqlite-scratch.js";
import { DATABASE_URL, postgresScratch } from "../support/postgres-scratch.js";

const files = sqliteScratch("dcb-instances");
const pgs = postgresScratch("dcb_instances");
const CAPACITY = 5;

interface Instance {
  readonly facade: Facade;
  readonly examples: DcbExamples;
}

async function instance(backend: NonNullable<FacadeOptions["backend"]>): Promise<Instance> {
  const facade = files.keep(createFacade({ appName: "dcb-instance", backend }));
  const examples = dcbExamples();
  examples.register(facade);
  await facade.start();
  return { facade, examples };
}

/** Subscribes each student, retried on CONFLICT and UNAVAILABLE, and returns the codes seen per student. */
function subscribeAll(i: Instance, courseId: string, students: readonly string[]): Promise<string[]> {
  return Promise.all(
    students.map(async (studentId) => {
      const seen: string[] = [];
      for (let attempt = 0; attempt < 200; attempt++) {
        try {
          await i.facade.dispatch(i.examples.commands.Subscribe, { studentId, courseId });
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

/** A child process instance: ready once started; `run()` lets it race and resolves its outcomes. */
function childInstance(args: readonly string[]): { ready: Promise<void>; run: () => Promise<string[]>; kill: () => void } {
  const child = fork(fileURLToPath(new URL("../support/dcb-instance-process.ts", import.meta.url)), [...args], {
    execArgv: ["--import", "tsx"],
    cwd: fileURLToPath(new URL("../..", import.meta.url)),
    stdio: ["ignore", "inherit", "inherit", "ipc"],
  });
  let readyResolve!: () => void;
  let outcomes!: (o: string[]) => void;
  const ready = new Promise<void>((r) => (readyResolve = r));
  const done = new Promise<string[]>((r) => (outcomes = r));
  const exited = new Promise<never>((_r, reject) =>
    child.once("exit", (code) => reject(new Error(`the instance process exited with ${String(code)} before reporting`))),
  );
  child.on("message", (m: { ready?: true; outcomes?: string[] }) => {
    if (m.ready === true) readyResolve();
    if (m.outcomes !== undefined) outcomes(m.outcomes);
  });
  return {
    ready: Promise.race([ready, exited]),
    run: () => {
      child.send("go");
      return Promise.race([done, exited]);
    },
    kill: () => child.kill(),
  };
}

async function subscribed(f: Facade, courseId: string): Promise<string[]> {
  const out: string[] = [];
  for await (const page of f.eventRepository.readAll({ eventPaths: ["Courses.StudentSubscribed", "Courses.StudentUnsubscribed"] })) {
    for (const e of page as Event<{ studentId: string; courseId: string }>[])
      if (e.payload.courseId === courseId) out.push(e.payload.studentId);
  }
  return out;
}

function students(prefix: string, n: number): string[] {
  return Array.from({ length: n }, (_, i) => `${prefix}${i}`);
}

/** The checks of a race: the stored history holds exactly CAPACITY distinct students; every student ended ok or refused. */
async function expectRaceOutcome(f: Facade, courseId: string, outcomes: readonly string[], exact: boolean): Promise<void> {
  const stored = await subscribed(f, courseId);
  expect(stored).toHaveLength(CAPACITY);
  expect(new Set(stored).size).toBe(CAPACITY);
  const last = outcomes.map((o) => o.split(">").pop());
  for (const l of last) expect(["ok", "DCB_RULE_BROKEN"]).toContain(l);
  const oks = last.filter((l) => l === "ok").length;
  // A terminated session may have committed an append its caller saw fail (UNAVAILABLE): the retry then finds it done.
  if (exact) expect(oks).toBe(CAPACITY);
  else expect(oks).toBeLessThanOrEqual(CAPACITY);
}

describe("DCB across instances on one SQLite file", () => {
  for (const n of [2, 3]) {
    it(`${n} instances (one a child process) race for one course: exactly its capacity succeeds`, async () => {
      const filename = files.newFile();
      const a = await instance(createSqliteBackends({ filename, pollIntervalMs: 20 }));
      const b = n === 3 ? await instance(createSqliteBackends({ filename, pollIntervalMs: 20 })) : undefined;
      await a.facade.dispatch(a.examples.commands.DefineCourse, { courseId: "c", capacity: CAPACITY });
      const child = childInstance(["sqlite", filename, "c", students("p", 6).join(",")]);
      try {
        await child.ready;
        const [fromChild, fromA, fromB] = await Promise.all([
          child.run(),
          subscribeAll(a, "c", students("a", 6)),
          b === undefined ? [] : subscribeAll(b, "c", students("b", 6)),
        ]);
        await expectRaceOutcome(a.facade, "c", [...fromChild, ...fromA, ...fromB], true);
      } finally {
        child.kill();
        await b?.facade.stop();
        await a.facade.stop();
      }
    }, 120_000);
  }
});

describe("DCB across instances on one Postgres schema", () => {
  const url = (app: string) => `${DATABASE_URL}${DATABASE_URL.includes("?") ? "&" : "?"}application_name=${app}`;

  for (const [n, killing] of [
    [2, false],
    [3, false],
    [3, true],
  ] as const) {
    it(`${n} instances (one a child process) race for one course${killing ? ", sessions terminated at random moments" : ""}: never over-subscribed`, async () => {
      const schema = pgs.newSchema();
      const tag = `dcb-race-${schema.slice(-8)}`;
      const poolA = new pg.Pool({ connectionString: url(`${tag}-a`), max: 6 });
      const poolB = new pg.Pool({ connectionString: url(`${tag}-b`), max: 6 });
      for (const p of [poolA, poolB]) p.on("error", () => undefined);
      const a = await instance(createPostgresBackends({ pool: poolA, schema }));
      const b = n === 3 ? await instance(createPostgresBackends({ pool: poolB, schema })) : undefined;
      await a.facade.dispatch(a.examples.commands.DefineCourse, { courseId: "c", capacity: CAPACITY });
      const child = childInstance(["postgres", `${url(`${tag}-child`)}#${schema}`, "c", students("p", 6).join(",")]);
      let racing = true;
      const kills: number[] = [];
      try {
        await child.ready;
        const killer = (async () => {
          while (racing && killing) {
            await new Promise((r) => setTimeout(r, 5 + Math.floor(Math.random() * 40)));
            const rows = (
              await pgs.pool.query<{ pid: number }>("SELECT pid FROM pg_stat_activity WHERE application_name LIKE $1", [`${tag}-%`])
            ).rows;
            const victim = rows[Math.floor(Math.random() * rows.length)];
            if (victim !== undefined && racing) {
              await pgs.pool.query("SELECT pg_terminate_backend($1)", [victim.pid]);
              kills.push(victim.pid);
            }
          }
        })();
        const [fromChild, fromA, fromB] = await Promise.all([
          child.run(),
          subscribeAll(a, "c", students("a", 6)),
          b === undefined ? [] : subscribeAll(b, "c", students("b", 6)),
        ]).finally(() => {
          racing = false;
        });
        await killer;
        if (killing) expect(kills.length).toBeGreaterThan(0);
        await expectRaceOutcome(a.facade, "c", [...fromChild, ...fromA, ...fromB], !killing);
      } finally {
        racing = false;
        child.kill();
        await b?.facade.stop();
        await a.facade.stop();
        await poolA.end();
        await poolB.end();
      }
    }, 180_000);
  }
});

describe("DCB property: random interleavings of subscribe and unsubscribe obey the rule", () => {
  const COURSES = ["x", "y", "z"];
  const MAX_COURSES = 2;
  const SEATS = 2;
  type Op = { kind: "sub" | "unsub"; student: string; course: string };
  const op = fc.record({
    kind: fc.constantFrom("sub" as const, "unsub" as const),
    student: fc.constantFrom("s1", "s2", "s3", "s4"),
    course: fc.constantFrom(...COURSES),
  });
  // Batches of commands: the commands of a batch run concurrently, batches one after the other.
  const batches = fc.array(fc.array(op, { minLength: 1, maxLength: 4 }), { minLength: 1, maxLength: 8 });

  /** Replays the stored history against the rule; throws at the first event the rule forbids. */
  function checkHistory(events: readonly Event[]): void {
    const seats = new Map<string, Set<string>>();
    const courses = new Map<string, Set<string>>();
    for (const e of events) {
      const { studentId, courseId } = e.payload as { studentId: string; courseId: string };
      const s = seats.get(courseId) ?? new Set<string>();
      const c = courses.get(studentId) ?? new Set<string>();
      if (e.name === "StudentSubscribed") {
        expect(s.has(studentId), `${studentId} subscribed twice to ${courseId}`).toBe(false);
        s.add(studentId);
        c.add(courseId);
        expect(s.size).toBeLessThanOrEqual(SEATS);
        expect(c.size).toBeLessThanOrEqual(MAX_COURSES);
      } else if (e.name === "StudentUnsubscribed") {
        expect(s.has(studentId), `${studentId} unsubscribed from ${courseId} without a seat`).toBe(true);
        s.delete(studentId);
        c.delete(courseId);
      }
      seats.set(courseId, s);
      courses.set(studentId, c);
    }
  }

  for (const kind of ["memory", "sqlite"] as const) {
    it(`on ${kind}`, async () => {
      await fc.assert(
        fc.asyncProperty(batches, async (plan: Op[][]) => {
          const backend = kind === "memory" ? createMemoryBackends() : createSqliteBackends({ filename: files.newFile() });
          const facade = createFacade({ appName: "dcb-property", backend });
          const ex = dcbExamples({ maxCoursesPerStudent: MAX_COURSES });
          ex.register(facade);
          await facade.start();
          try {
            for (const c of COURSES) await facade.dispatch(ex.commands.DefineCourse, { courseId: c, capacity: SEATS });
            for (const batch of plan) {
              const results = await Promise.allSettled(
                batch.map((o) =>
                  facade.dispatch(o.kind === "sub" ? ex.commands.Subscribe : ex.commands.Unsubscribe, {
                    studentId: o.student,
                    courseId: o.course,
                  }),
                ),
              );
              for (const r of results) {
                if (r.status === "rejected")
                  expect(["CONFLICT", "DCB_RULE_BROKEN"]).toContain(isMnemeError(r.reason) ? r.reason.code : String(r.reason));
              }
            }
            const history: Event[] = [];
            for await (const page of facade.eventRepository.readAll({
              eventPaths: ["Courses.StudentSubscribed", "Courses.StudentUnsubscribed"],
            }))
              history.push(...page);
            checkHistory(history);
          } finally {
            await facade.stop();
          }
        }),
        { numRuns: kind === "memory" ? 60 : 15 },
      );
    }, 180_000);
  }

  it("sequential commands decide as the model of the rule does", async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(op, { minLength: 1, maxLength: 30 }), async (ops: Op[]) => {
        const facade = createFacade({ appName: "dcb-model", backend: createMemoryBackends() });
        const ex = dcbExamples({ maxCoursesPerStudent: MAX_COURSES });
        ex.register(facade);
        await facade.start();
        try {
          for (const c of COURSES) await facade.dispatch(ex.commands.DefineCourse, { courseId: c, capacity: SEATS });
          const seats = new Map<string, Set<string>>(COURSES.map((c) => [c, new Set<string>()]));
          const taken = new Map<string, Set<string>>();
          for (const o of ops) {
            const s = seats.get(o.course)!;
            const c = taken.get(o.student) ?? new Set<string>();
            taken.set(o.student, c);
            const allowed = o.kind === "sub" ? !s.has(o.student) && s.size < SEATS && c.size < MAX_COURSES : c.has(o.course);
            const [r] = await Promise.allSettled([
              facade.dispatch(o.kind === "sub" ? ex.commands.Subscribe : ex.commands.Unsubscribe, {
                studentId: o.student,
                courseId: o.course,
              }),
            ]);
            expect(r!.status === "fulfilled", `${o.kind} ${o.student} ${o.course}`).toBe(allowed);
            if (!allowed) continue;
            if (o.kind === "sub") {
              s.add(o.student);
              c.add(o.course);
            } else {
              s.delete(o.student);
              c.delete(o.course);
            }
          }
        } finally {
          await facade.stop();
        }
      }),
      { numRuns: 50 },
    );
  }, 120_000);
});
