/**
 * The cache of `ctx.events` reads (EventQueryCache) on every backend that
 * stores tags: a cached query reads only the matches after its position, so
 * a decision sees what another instance appended meanwhile; a decision held
 * between its cached read and its append while another instance appends a
 * match fails with CONFLICT, and its retry decides on the new history; two
 * instances whose caches were warmed on the same course race and never
 * over-subscribe it; what a handler changes in what it read never reaches
 * the cache; `readTagged`'s `after` returns only later matches.
 */
import { describe, expect, it } from "vitest";
import { anonymous, createFacade, defineDomain, isMnemeError, MnemeError, type Facade, type FacadeOptions } from "mneme";
import { dcbExamples, type DcbExamples } from "mneme/testing";
import { createMemoryBackends, MemoryEventRepository } from "mneme/memory";
import { createSqliteBackends } from "mneme/sqlite";
import { createPostgresBackends } from "mneme/postgres";
import { sqliteScratch } from "../support/sqlite-scratch.js";
import { postgresScratch } from "../support/postgres-scratch.js";

const files = sqliteScratch("dcb-cache");
const pgs = postgresScratch("dcb_cache");

type Backend = NonNullable<FacadeOptions["backend"]>;
type EventRepository = Facade["eventRepository"]["stored"];

/** Seats of a course with a gate: `hold` makes the next Subscribe wait after its read until released. */
function gatedCourses() {
  const D = defineDomain("Seats");
  const Opened = D.event<{ courseId: string; capacity: number }>("Opened", { tags: (p) => [`course:${p.courseId}`] });
  const Taken = D.event<{ courseId: string; studentId: string }>("Taken", { tags: (p) => [`course:${p.courseId}`] });
  const Open = D.command<{ courseId: string; capacity: number }>("Open", { permission: anonymous });
  const Take = D.command<{ courseId: string; studentId: string }>("Take", { permission: anonymous });
  let gate: { reached: () => void; release: Promise<void> } | undefined;
  const seen: number[] = [];
  const register = (f: Facade): void => {
    f.registerDomain(D, (d) => {
      d.handleCommand(Open, (_ctx, _c, p) => [Opened.create(`open-${p.courseId}`, p)]);
      d.handleCommand(Take, async (ctx, _c, p) => {
        const { state } = await ctx.events.fold(
          { items: [{ types: [Opened, Taken], tags: [`course:${p.courseId}`] }] },
          {
            initialState: () => ({ capacity: 0, taken: [] as string[] }),
            evolve: {
              Opened: (s, e: { capacity: number }) => ({ ...s, capacity: e.capacity }),
              Taken: (s, e: { studentId: string }) => ({ ...s, taken: [...s.taken, e.studentId] }),
            },
          },
        );
        seen.push(state.taken.length);
        const g = gate;
        if (g !== undefined) {
          gate = undefined;
          g.reached();
          await g.release;
        }
        if (state.taken.length >= state.capacity) throw new MnemeError("INVALID_REQUEST", `course ${p.courseId} is full`);
        return [Taken.create(`take-${p.courseId}-${p.studentId}`, p)];
      });
    });
  };
  /** The next Take waits after its read: `reached` resolves then; `release()` lets it go on. */
  const hold = (): { reached: Promise<void>; release: () => void } => {
    let reached!: () => void;
    let release!: () => void;
    const r = new Promise<void>((res) => (reached = res));
    gate = { reached, release: new Promise<void>((res) => (release = res)) };
    return { reached: r, release };
  };
  return { register, Open, Take, hold, seen };
}

async function started<T extends { register: (f: Facade) => void }>(backend: Backend, domain: T): Promise<Facade> {
  const f = files.keep(createFacade({ appName: "dcb-cache", backend }));
  domain.register(f);
  await f.start();
  return f;
}

/** Two instances on one store: a SQLite file, a Postgres schema. */
const shared: Array<[string, () => [Backend, Backend]]> = [
  [
    "sqlite",
    () => {
      const filename = files.newFile();
      return [createSqliteBackends({ filename, pollIntervalMs: 20 }), createSqliteBackends({ filename, pollIntervalMs: 20 })];
    },
  ],
  [
    "postgres",
    () => {
      const schema = pgs.newSchema();
      return [createPostgresBackends({ pool: pgs.newPool(6), schema }), createPostgresBackends({ pool: pgs.newPool(6), schema })];
    },
  ],
];

for (const [name, backends] of shared) {
  describe(`the query cache across two instances on ${name}`, () => {
    it("a cached query reads what the other instance appended since, and decides on it", async () => {
      const [ba, bb] = backends();
      const dom = gatedCourses();
      const a = await started(ba, dom);
      const b = await started(bb, dom);
      try {
        await a.dispatch(dom.Open, { courseId: "c", capacity: 3 });
        await a.dispatch(dom.Take, { courseId: "c", studentId: "a1" });
        await b.dispatch(dom.Take, { courseId: "c", studentId: "b1" });
        await b.dispatch(dom.Take, { courseId: "c", studentId: "b2" });
        // a's cache holds the course at one seat taken: its read brings it up to three, so it refuses.
        const refused = await a.dispatch(dom.Take, { courseId: "c", studentId: "a2" }).catch((e: unknown) => e);
        expect(isMnemeError(refused) && refused.message).toContain("is full");
        expect(dom.seen).toEqual([0, 1, 2, 3]);
        expect(a.eventQueryCacheStats()).toMatchObject({ size: 1, hits: 1, misses: 1 });
      } finally {
        await b.stop();
        await a.stop();
      }
    }, 60_000);

    it("a decision held after its cached read while the other instance appends a match is CONFLICT; the retry decides anew", async () => {
      const [ba, bb] = backends();
      const dom = gatedCourses();
      const a = await started(ba, dom);
      const b = await started(bb, dom);
      try {
        await a.dispatch(dom.Open, { courseId: "c", capacity: 2 });
        await a.dispatch(dom.Take, { courseId: "c", studentId: "a1" });
        const held = dom.hold();
        const taking = a.dispatch(dom.Take, { courseId: "c", studentId: "a2" }).catch((e: unknown) => e);
        await held.reached;
        // a decided on one seat taken, from its cache brought up to date; b takes the last seat meanwhile.
        await b.dispatch(dom.Take, { courseId: "c", studentId: "b1" });
        held.release();
        const conflict = await taking;
        expect(isMnemeError(conflict) && conflict.code).toBe("CONFLICT");
        // The retry reads b's seat (after the cached position) and refuses: the course is full.
        const retried = await a.dispatch(dom.Take, { courseId: "c", studentId: "a2" }).catch((e: unknown) => e);
        expect(isMnemeError(retried) && retried.message).toContain("is full");
        expect(dom.seen.slice(-2)).toEqual([1, 2]);
      } finally {
        await b.stop();
        await a.stop();
      }
    }, 60_000);

    it("the same on a course with room left: CONFLICT, then the retry succeeds", async () => {
      const [ba, bb] = backends();
      const dom = gatedCourses();
      const a = await started(ba, dom);
      const b = await started(bb, dom);
      try {
        await a.dispatch(dom.Open, { courseId: "c", capacity: 5 });
        await a.dispatch(dom.Take, { courseId: "c", studentId: "a1" });
        const held = dom.hold();
        const taking = a.dispatch(dom.Take, { courseId: "c", studentId: "a2" }).catch((e: unknown) => e);
        await held.reached;
        await b.dispatch(dom.Take, { courseId: "c", studentId: "b1" });
        held.release();
        const conflict = await taking;
        expect(isMnemeError(conflict) && conflict.code).toBe("CONFLICT");
        await a.dispatch(dom.Take, { courseId: "c", studentId: "a2" });
        expect(dom.seen.slice(-2)).toEqual([1, 2]);
      } finally {
        await b.stop();
        await a.stop();
      }
    }, 60_000);

    it("two instances with warm caches race for one course: exactly its capacity succeeds", async () => {
      const [ba, bb] = backends();
      const ex: DcbExamples = dcbExamples();
      const a = await started(ba, ex);
      const b = await started(bb, ex);
      const CAPACITY = 4;
      try {
        await a.dispatch(ex.commands.DefineCourse, { courseId: "c", capacity: CAPACITY });
        // Both caches hold the course before the race (one subscription each, then the race from there).
        await a.dispatch(ex.commands.Subscribe, { courseId: "c", studentId: "warm-a" });
        await b.dispatch(ex.commands.Subscribe, { courseId: "c", studentId: "warm-b" });
        const race = (f: Facade, prefix: string) =>
          Promise.all(
            Array.from({ length: 5 }, async (_, i) => {
              for (let attempt = 0; attempt < 100; attempt++) {
                try {
                  await f.dispatch(ex.commands.Subscribe, { courseId: "c", studentId: `${prefix}${i}` });
                  return "ok";
                } catch (e) {
                  if (!isMnemeError(e) || e.code !== "CONFLICT") return isMnemeError(e) ? e.code : String(e);
                }
              }
              return "retries exhausted";
            }),
          );
        const outcomes = [...(await race(a, "a")), ...(await Promise.all([race(a, "x"), race(b, "y")])).flat()];
        expect(outcomes.filter((o) => o === "ok")).toHaveLength(CAPACITY - 2);
        for (const o of outcomes) expect(["ok", "DCB_RULE_BROKEN"]).toContain(o);
        const subscribed = new Set<string>();
        for await (const page of a.eventRepository.readAll()) {
          for (const e of page) if (e.name === "StudentSubscribed") subscribed.add((e.payload as { studentId: string }).studentId);
        }
        expect(subscribed.size).toBe(CAPACITY);
      } finally {
        await b.stop();
        await a.stop();
      }
    }, 120_000);
  });
}

describe("the query cache in one instance", () => {
  it("what a handler changes in the events it read never reaches the cache", async () => {
    const D = defineDomain("Mut");
    const Noted = D.event<{ k: string; n: number }>("Noted", { tags: (p) => [`k:${p.k}`] });
    const Note = D.command<{ k: string }>("Note", { permission: anonymous });
    const reads: number[][] = [];
    const f = createFacade({ appName: "dcb-cache-mut", backend: createMemoryBackends() });
    f.registerDomain(D, (d) =>
      d.handleCommand(Note, async (ctx, _c, p) => {
        const { events } = await ctx.events.read({ items: [{ tags: [`k:${p.k}`] }] });
        reads.push(events.map((e) => (e.payload as { n: number }).n));
        for (const e of events) (e.payload as { n: number }).n = -1;
        events.length = 0;
        return [Noted.create(`n-${reads.length}`, { k: p.k, n: reads.length })];
      }),
    );
    await f.start();
    try {
      for (let i = 0; i < 3; i++) await f.dispatch(Note, { k: "x" });
      expect(reads).toEqual([[], [1], [1, 2]]);
      expect(f.eventQueryCacheStats()).toMatchObject({ hits: 2, misses: 1 });
    } finally {
      await f.stop();
    }
  });

  it("eventQueryCache: false, or aggregateCache: false without it, turns the cache off; a bad bound is refused", async () => {
    const off = createFacade({ appName: "a", backend: createMemoryBackends(), eventQueryCache: false });
    const offWithAggregates = createFacade({ appName: "b", backend: createMemoryBackends(), aggregateCache: false });
    const onAlone = createFacade({
      appName: "c",
      backend: createMemoryBackends(),
      aggregateCache: false,
      eventQueryCache: { maxQueries: 2 },
    });
    expect(off.eventQueryCacheStats()).toBeUndefined();
    expect(offWithAggregates.eventQueryCacheStats()).toBeUndefined();
    expect(onAlone.eventQueryCacheStats()).toMatchObject({ size: 0, maxQueries: 2 });
    expect(() => createFacade({ appName: "d", backend: createMemoryBackends(), eventQueryCache: { maxQueries: 0 } })).toThrow(/maxQueries/);
  });

  it("least recently used queries go first beyond maxQueries, and decisions stay right", async () => {
    const dom = gatedCourses();
    const f = createFacade({ appName: "dcb-cache-lru", backend: createMemoryBackends(), eventQueryCache: { maxQueries: 2 } });
    dom.register(f);
    await f.start();
    try {
      for (const c of ["p", "q", "r"]) await f.dispatch(dom.Open, { courseId: c, capacity: 2 });
      for (const c of ["p", "q", "r", "p"]) await f.dispatch(dom.Take, { courseId: c, studentId: `s-${c}-${dom.seen.length}` });
      // p was pushed out by r, so its second read is a miss; every read saw the course's seats as they were.
      expect(dom.seen).toEqual([0, 0, 0, 1]);
      expect(f.eventQueryCacheStats()).toMatchObject({ size: 2, hits: 0, misses: 4 });
      await f.dispatch(dom.Take, { courseId: "p", studentId: "s-last" }).catch((e: unknown) => e);
      expect(dom.seen.at(-1)).toBe(2);
      expect(f.eventQueryCacheStats()).toMatchObject({ hits: 1 });
    } finally {
      await f.stop();
    }
  });
});

describe("readTagged after a position", () => {
  const stores: Array<[string, () => Promise<{ repo: EventRepository; stop: () => Promise<void> }>]> = [
    [
      "memory",
      async () => {
        const repo = new MemoryEventRepository();
        return { repo, stop: async () => undefined };
      },
    ],
    [
      "sqlite",
      async () => {
        const f = files.keep(createFacade({ appName: "rt", backend: createSqliteBackends({ filename: files.newFile() }) }));
        await f.start();
        return { repo: f.eventRepository.stored, stop: () => f.stop() };
      },
    ],
    [
      "postgres",
      async () => {
        const f = createFacade({ appName: "rt", backend: createPostgresBackends({ pool: pgs.pool, schema: pgs.newSchema() }) });
        await f.start();
        return { repo: f.eventRepository.stored, stop: () => f.stop() };
      },
    ],
  ];
  for (const [name, open] of stores) {
    it(`${name}: only the matches above the position, with the head; a bad position is INVALID_REQUEST`, async () => {
      const { repo, stop } = await open();
      try {
        const tenantUuid = "t1";
        const ev = (n: number, tags: string[]) => ({
          domain: "R",
          name: "E",
          aggregateUuid: `agg-${n}`,
          payload: { n },
          tenantUuid,
          reqCtx: { senderTenantUuid: tenantUuid },
          tags,
        });
        await repo.append([ev(1, ["k:a"]), ev(2, ["k:b"])]);
        const first = await repo.readTagged!(tenantUuid, [{ tags: ["k:a"] }]);
        await repo.append([ev(3, ["k:a"]), ev(4, ["k:b"]), ev(5, ["k:a"])]);
        const later = await repo.readTagged!(tenantUuid, [{ tags: ["k:a"] }], { after: first.position });
        expect(later.events.map((e) => (e.payload as { n: number }).n)).toEqual([3, 5]);
        expect(later.position).toBe(first.position + 3);
        const none = await repo.readTagged!(tenantUuid, [{ tags: ["k:a"] }], { after: later.position });
        expect(none).toEqual({ events: [], position: later.position });
        for (const after of [-1, 1.5, "2", Number.NaN]) {
          const err = await repo.readTagged!(tenantUuid, [{ tags: ["k:a"] }], { after: after as number }).catch((e: unknown) => e);
          expect(isMnemeError(err) && err.code).toBe("INVALID_REQUEST");
        }
      } finally {
        await stop();
      }
    }, 60_000);
  }
});

describe("readTagged on Postgres, reads grouped in one statement", () => {
  it("reads sent together answer as each read alone: matches, items, types, tenants and positions", async () => {
    const f = createFacade({ appName: "rt-group", backend: createPostgresBackends({ pool: pgs.pool, schema: pgs.newSchema() }) });
    await f.start();
    try {
      const repo = f.eventRepository.stored;
      const events = [];
      for (let n = 1; n <= 40; n++) {
        const tenantUuid = n % 3 === 0 ? "t2" : "t1";
        events.push({
          domain: "R",
          name: n % 2 === 0 ? "Even" : "Odd",
          aggregateUuid: `agg-${n}`,
          payload: { n },
          tenantUuid,
          reqCtx: { senderTenantUuid: tenantUuid },
          tags: [`m:${n % 4}`, `k:${n % 5}`, ...(n % 7 === 0 ? ["seven:yes"] : [])],
        });
      }
      await repo.append(events);
      const queries: Array<[string, Parameters<NonNullable<EventRepository["readTagged"]>>[1], number]> = [];
      for (const tenant of ["t1", "t2", "t3"]) {
        for (const after of [0, 10, 25, 40]) {
          queries.push([tenant, [{ tags: ["m:1"] }], after]);
          queries.push([tenant, [{ tags: ["m:2", "k:2"] }], after]);
          queries.push([tenant, [{ types: ["R.Even"], tags: ["k:3"] }], after]);
          queries.push([tenant, [{ types: ["R.Odd", "R.Even"] }, { tags: ["seven:yes"] }], after]);
          queries.push([tenant, [{ tags: ["m:0"] }, { tags: ["k:0"] }], after]);
        }
      }
      const alone = [];
      for (const [t, items, after] of queries) alone.push(await repo.readTagged!(t, items, { after }));
      const together = await Promise.all(queries.map(([t, items, after]) => repo.readTagged!(t, items, { after })));
      expect(together).toEqual(alone);
      expect(alone.some((r) => r.events.length > 3)).toBe(true);
      expect(alone.some((r) => r.events.length === 0)).toBe(true);
    } finally {
      await f.stop();
    }
  }, 60_000);
});
