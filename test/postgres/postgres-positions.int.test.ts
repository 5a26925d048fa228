/**
 * Postgres positions are consecutive: no holes, also when the appending
 * connection dies after the append function did its work and before its
 * COMMIT (held there by a deferred trigger, or by a transaction opened by
 * hand), when connections of two instances are killed at random under load,
 * and when instances of earlier releases append through the function
 * signatures they know (kept callable) or through the sequence-based bodies
 * they put back.
 */
import pg from "pg";
import { afterEach, describe, expect, it } from "vitest";
import { isMnemeError, newUuid, type Event } from "mneme";
import { PostgresEventRepository } from "mneme/postgres";
import { advisoryKey } from "../../src/postgres/postgres-schema.js";
import { postgresScratch } from "../support/postgres-scratch.js";
import { ev } from "../support/todo-events.js";

const scratch = postgresScratch("mneme_pos");
const admin = scratch.pool;

const closers: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const c of closers.splice(0).reverse()) await c().catch(() => undefined);
});

async function repoOn(schema: string, pool: pg.Pool = scratch.newPool(4), maxAppendsPerCommit?: number): Promise<PostgresEventRepository> {
  const repo = new PostgresEventRepository({
    pool,
    schema,
    pollIntervalMs: 0,
    ...(maxAppendsPerCommit === undefined ? {} : { maxAppendsPerCommit }),
  });
  closers.push(() => repo.close());
  await repo.init();
  return repo;
}

/** Every stored position, in order. */
async function storedPositions(schema: string): Promise<number[]> {
  const { rows } = await admin.query<{ p: string }>(`SELECT position::text AS p FROM "${schema}".events ORDER BY position`);
  return rows.map((r) => Number(r.p));
}

function oneTo(n: number): number[] {
  return Array.from({ length: n }, (_, i) => i + 1);
}

/** Polls a database fact (not a duration) until it holds a value. */
async function until<T>(look: () => Promise<T | undefined>, what: string, tries = 1500): Promise<T> {
  for (let i = 0; i < tries; i++) {
    const v = await look();
    if (v !== undefined) return v;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error(`timed out waiting for: ${what}`);
}

/**
 * A deferred constraint trigger on the events table: at COMMIT, after the
 * append function returned (and moved whatever it moves), a transaction that
 * inserted events waits for an advisory lock the test holds while `hold` has
 * a row. So the test can kill the session exactly between the function's work
 * and its COMMIT.
 */
async function holdCommits(schema: string): Promise<{ held: pg.PoolClient; key: string; release: () => Promise<void> }> {
  const key = advisoryKey("test:hold-commit", schema);
  await admin.query(`CREATE TABLE "${schema}".hold (on_ boolean)`);
  await admin.query(`INSERT INTO "${schema}".hold VALUES (true)`);
  await admin.query(`
    CREATE FUNCTION "${schema}".hold_commit() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF EXISTS (SELECT 1 FROM "${schema}".hold) THEN
        PERFORM pg_advisory_lock_shared(${key});
        PERFORM pg_advisory_unlock_shared(${key});
      END IF;
      RETURN NULL;
    END $$`);
  await admin.query(
    `CREATE CONSTRAINT TRIGGER hold_commit AFTER INSERT ON "${schema}".events DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION "${schema}".hold_commit()`,
  );
  const held = await admin.connect();
  await held.query("SELECT pg_advisory_lock($1::bigint)", [key]);
  return {
    held,
    key,
    release: async () => {
      await admin.query(`DELETE FROM "${schema}".hold`);
      await held.query("SELECT pg_advisory_unlock($1::bigint)", [key]);
      held.release();
    },
  };
}

/** The session of this schema's append waiting at COMMIT for the test's lock. */
function waitingAtCommit(schema: string): Promise<number> {
  return until(async () => {
    const { rows } = await admin.query<{ pid: number }>(
      "SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND wait_event = 'advisory' AND query LIKE $1",
      [`%"${schema}".mneme_append%`],
    );
    return rows[0]?.pid;
  }, "an append waiting at its COMMIT");
}

async function terminate(pid: number): Promise<void> {
  await admin.query("SELECT pg_terminate_backend($1, 5000)", [pid]);
}

/** The sequence's head as functions of earlier releases read it. */
async function sequenceHead(schema: string): Promise<number> {
  const { rows } = await admin.query<{ h: string }>(
    `SELECT (CASE WHEN is_called THEN last_value ELSE last_value - 1 END)::text AS h FROM "${schema}".events_position_seq`,
  );
  return Number(rows[0]!.h);
}

/** The arguments of the 0.1 signature of mneme_append (15) for `events`, without expected versions. */
function appendArgs01(schema: string, events: { aggregateUuid: string; tenantUuid?: string }[]): unknown[] {
  return [
    advisoryKey("mneme:events", schema),
    `mneme_events_${schema}`,
    "by-hand",
    events.map(() => newUuid()),
    events.map((e) => e.tenantUuid ?? ""),
    events.map(() => "Todo"),
    events.map(() => "TodoCreated"),
    events.map((e) => e.aggregateUuid),
    events.map(() => null),
    events.map(() => null),
    events.map(() => 1),
    events.map(() => "{}"),
    events.map(() => JSON.stringify({ by: "hand" })),
    [],
    [],
  ];
}
const CALL_01 = (schema: string): string =>
  `SELECT base_position::text AS base, versions FROM "${schema}".mneme_append($1::bigint, $2::text, $3::text, $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::integer[], $10::text[], $11::bigint[], $12::jsonb[], $13::jsonb[], $14::text[], $15::integer[])`;
const CALL_WITH_GLOBALS = (schema: string): string =>
  `SELECT base_position::text AS base, versions FROM "${schema}".mneme_append($1::bigint, $2::text, $3::text, $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::integer[], $10::text[], $11::bigint[], $12::jsonb[], $13::jsonb[], $14::text[], $15::integer[], $16::text[])`;

/** The arguments of the group-commit signature before event versions (26): one call of `events`. */
function batchArgsBeforeEventVersions(schema: string, events: { aggregateUuid: string }[]): unknown[] {
  const n = events.length;
  return [
    advisoryKey("mneme:events", schema),
    `mneme_events_${schema}`,
    "by-hand",
    [n],
    events.map(() => newUuid()),
    events.map(() => ""),
    events.map(() => "Todo"),
    events.map(() => "TodoCreated"),
    events.map((e) => e.aggregateUuid),
    events.map(() => null),
    events.map(() => null),
    events.map(() => 1),
    events.map(() => "{}"),
    events.map(() => "{}"),
    [0],
    [],
    [],
    [0],
    [],
    [null],
    [null],
    [null],
    [null],
    [null],
    [null],
    [null],
  ];
}
const CALL_BATCH_BEFORE_EVENT_VERSIONS = (schema: string): string =>
  `SELECT base_position::text AS base, versions, error_state, error_message FROM "${schema}".mneme_append_batch(` +
  "$1::bigint, $2::text, $3::text, $4::integer[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[], $10::integer[], $11::text[], " +
  "$12::bigint[], $13::text[], $14::text[], $15::integer[], $16::text[], $17::integer[], $18::integer[], $19::text[], $20::text[], $21::text[], " +
  "$22::text[], $23::text[], $24::text[], $25::bigint[], $26::text[]) ORDER BY call_no";

describe("a connection that dies between the append function's work and its COMMIT", () => {
  it("group commit: the killed flush's calls fail with UNAVAILABLE, write nothing, and the next appends take the next positions", async () => {
    const schema = scratch.newSchema();
    const repo = await repoOn(schema);
    await repo.append([ev("a"), ev("b"), ev("a")]);
    const hold = await holdCommits(schema);
    // The first call goes alone (a flush starts at once when none runs); the others wait for the next flush.
    // Settled into a value at once: it rejects while the test is still killing its session.
    const killed = repo.append([ev("a"), ev("c"), ev("c"), ev("d")]).then(
      () => undefined,
      (e: unknown) => e,
    );
    const pid = await waitingAtCommit(schema);
    const behind = [repo.append([ev("a")]), repo.append([ev("e"), ev("e")]), repo.append([ev("c")])];
    await terminate(pid);
    const err = await killed;
    expect(isMnemeError(err, "UNAVAILABLE"), String(err)).toBe(true);
    await hold.release();
    const later = (await Promise.all(behind)).flat();
    expect(later.map((e) => e.position)).toEqual([4, 5, 6, 7]);
    expect(later.map((e) => [e.aggregateUuid, e.version])).toEqual([
      ["a", 3],
      ["e", 1],
      ["e", 2],
      ["c", 1],
    ]);
    expect(await storedPositions(schema)).toEqual(oneTo(7));
    expect(await repo.headPosition()).toBe(7);
    // The sequence is back at the head for functions of earlier releases.
    expect(await sequenceHead(schema)).toBe(7);
  });

  it("without group commit (one statement per append) too", async () => {
    const schema = scratch.newSchema();
    const repo = await repoOn(schema, undefined, 1);
    await repo.append([ev("a")]);
    const hold = await holdCommits(schema);
    const killed = repo.append([ev("a"), ev("b")]).then(
      () => "written",
      (e: unknown) => (isMnemeError(e) ? e.code : String(e)),
    );
    await terminate(await waitingAtCommit(schema));
    expect(await killed).toBe("UNAVAILABLE");
    await hold.release();
    const [next] = await repo.append([ev("b")]);
    expect([next?.position, next?.version]).toEqual([2, 1]);
    expect(await storedPositions(schema)).toEqual([1, 2]);
  });

  it("BEGIN, the function of 0.2 (one statement per append) by hand, the session killed before COMMIT: the next append (of any signature) takes the next position", async () => {
    const schema = scratch.newSchema();
    const repo = await repoOn(schema);
    await repo.append([ev("a"), ev("a")]);
    const client = new pg.Client({ connectionString: process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test" });
    client.on("error", () => {});
    await client.connect();
    await client.query("BEGIN");
    const { rows } = await client.query<{ base: string; versions: number[] }>(CALL_WITH_GLOBALS(schema), [
      ...appendArgs01(schema, [{ aggregateUuid: "a" }, { aggregateUuid: "x" }, { aggregateUuid: "x" }]),
      [],
    ]);
    expect(rows).toEqual([{ base: "2", versions: [3, 1, 2] }]);
    const pid = (await client.query<{ pid: number }>("SELECT pg_backend_pid() AS pid")).rows[0]!.pid;
    await terminate(pid);
    await client.end().catch(() => undefined);

    const [next] = await repo.append([ev("a")]);
    expect([next?.position, next?.version]).toEqual([3, 3]);
    const byHand = await admin.query<{ base: string; versions: number[] }>(CALL_WITH_GLOBALS(schema), [
      ...appendArgs01(schema, [{ aggregateUuid: "x" }]),
      [],
    ]);
    expect(byHand.rows).toEqual([{ base: "3", versions: [1] }]);
    expect(await storedPositions(schema)).toEqual(oneTo(4));
  });
});

describe("earlier releases appending beside this one", () => {
  it("every signature of earlier releases is callable on a schema this release made: 0.1's refuses, naming the versions; the others run the tenant rule and take the next position", async () => {
    const schema = scratch.newSchema();
    const repo = await repoOn(schema);
    const a = newUuid();
    await repo.append([ev(a, {}, { tenantUuid: "t1" })]);
    // 0.1 would misread this store (it knows no event versions, so no encrypted personal fields): its call is refused.
    const r01 = await admin.query(CALL_01(schema), appendArgs01(schema, [{ aggregateUuid: a, tenantUuid: "t1" }])).then(
      () => "written",
      (e: { code?: string; message?: string }) => `${e.code}: ${e.message}`,
    );
    expect(r01).toMatch(
      /^MN001: mneme: schema \w+ is in store format 4 \(mneme 0\.4\.0\); .*mneme 0\.1\.0 \(44da8f1\).*docs\/upgrading\.md/,
    );
    // 0.1's own body, put back by its init(), inserts without event_version: refused by the events table.
    const direct = await admin
      .query(
        `INSERT INTO "${schema}".events (position, event_uuid, tenant_uuid, domain, name, aggregate_uuid, version, command_uuid, created_at, req_ctx, payload)
         VALUES (2, 'e-01', 't1', 'Todo', 'TodoCreated', $1, 2, NULL, 1, '{}', '{}')`,
        [a],
      )
      .then(
        () => "written",
        (e: { code?: string; message?: string }) => `${e.code}: ${e.message}`,
      );
    expect(direct).toMatch(/^MN001: .*an append without event versions comes from mneme 0\.1\.0/);
    const other = await admin
      .query(CALL_WITH_GLOBALS(schema), [...appendArgs01(schema, [{ aggregateUuid: a, tenantUuid: "t2" }]), []])
      .then(
        () => "written",
        (e: { code?: string }) => e.code,
      );
    expect(other).toBe("MN404");
    // The signature with global aggregates (one statement per append).
    const r16 = await admin.query<{ base: string; versions: number[] }>(CALL_WITH_GLOBALS(schema), [
      ...appendArgs01(schema, [{ aggregateUuid: a, tenantUuid: "t2" }]),
      [a],
    ]);
    expect(r16.rows).toEqual([{ base: "1", versions: [2] }]);
    // Group commit before event versions.
    const r26 = await admin.query<{ base: string; versions: number[]; error_state: string | null }>(
      CALL_BATCH_BEFORE_EVENT_VERSIONS(schema),
      batchArgsBeforeEventVersions(schema, [{ aggregateUuid: "b" }, { aggregateUuid: "b" }]),
    );
    expect(r26.rows).toEqual([{ base: "2", versions: [1, 2], error_state: null, error_message: null }]);
    const [mine] = await repo.append([ev("b")]);
    expect([mine?.position, mine?.version]).toEqual([5, 3]);
    const events = await repo.loadAggregate("b");
    expect(events.map((e) => e.eventVersion ?? 1)).toEqual([1, 1, 1]);
    expect(await storedPositions(schema)).toEqual(oneTo(5));
  });

  it("an earlier release's sequence-based body put back by its init(): its appends and ours, concurrent, stay unique and consecutive", async () => {
    const schema = scratch.newSchema();
    const repo = await repoOn(schema);
    const seq = `"${schema}".events_position_seq`;
    // The body of the release before this one, as its init() would create it again (positions from the sequence).
    await admin.query(`
      CREATE FUNCTION "${schema}".earlier_append(p_lock_key bigint, p_aggregate text, p_n integer)
      RETURNS bigint LANGUAGE plpgsql VOLATILE AS $fn$
      DECLARE v_base bigint;
      BEGIN
        PERFORM pg_advisory_xact_lock(p_lock_key);
        v_base := (SELECT CASE WHEN is_called THEN last_value ELSE last_value - 1 END FROM ${seq});
        PERFORM "${schema}".mneme_append_one(v_base,
          (SELECT array_agg(gen_random_uuid()::text) FROM generate_series(1, p_n)),
          array_fill(''::text, ARRAY[p_n]), array_fill('Todo'::text, ARRAY[p_n]), array_fill('TodoCreated'::text, ARRAY[p_n]),
          array_fill(p_aggregate, ARRAY[p_n]), array_fill(NULL::integer, ARRAY[p_n]), array_fill(NULL::text, ARRAY[p_n]),
          array_fill(1::bigint, ARRAY[p_n]), array_fill('{}'::jsonb, ARRAY[p_n]), array_fill('{}'::jsonb, ARRAY[p_n]),
          '{}', '{}', '{}', NULL);
        PERFORM setval('${seq}', v_base + p_n);
        RETURN v_base;
      END $fn$`);
    const older = scratch.newPool(3);
    const key = advisoryKey("mneme:events", schema);
    const work: Promise<unknown>[] = [];
    for (let i = 0; i < 30; i++) {
      work.push(repo.append([ev(`new-${i % 5}`), ev(`new-${i % 5}`)]));
      work.push(older.query(`SELECT "${schema}".earlier_append($1::bigint, $2, $3)`, [key, `old-${i % 5}`, 1 + (i % 3)]));
    }
    await Promise.all(work);
    const positions = await storedPositions(schema);
    expect(positions).toEqual(oneTo(positions.length));
    expect(positions.length).toBe(30 * 2 + 10 * (1 + 2 + 3));
  });
});

describe("connections of two instances killed at random under load", () => {
  it("positions end exactly 1..head, versions dense per aggregate, every acknowledged append stored whole", async () => {
    const schema = scratch.newSchema();
    const one = await repoOn(schema, scratch.newPool(4));
    const two = await repoOn(schema, scratch.newPool(4));
    // Commits take a moment (as on a slow disk), so kills also land after the function's work, before COMMIT.
    await admin.query(`
      CREATE FUNCTION "${schema}".slow_commit() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN PERFORM pg_sleep(0.001); RETURN NULL; END $$`);
    await admin.query(
      `CREATE CONSTRAINT TRIGGER slow_commit AFTER INSERT ON "${schema}".events DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION "${schema}".slow_commit()`,
    );
    const acknowledged: Event[] = [];
    const failedUuids: string[] = [];
    let running = true;
    const writer = async (repo: PostgresEventRepository, w: number): Promise<void> => {
      for (let i = 0; i < 40; i++) {
        const events = [ev(`agg-${(w + i) % 6}`, { w, i }, { eventUuid: newUuid() }), ev(`agg-${(w + i + 1) % 6}`, { w, i })];
        try {
          acknowledged.push(...(await repo.append(events)));
        } catch (e) {
          if (!isMnemeError(e, "UNAVAILABLE")) throw e;
          failedUuids.push(events[0]!.eventUuid!);
        }
      }
    };
    let kills = 0;
    const killer = async (): Promise<void> => {
      // At most 40 kills, so the writers finish and most appends get through however slow the machine is.
      while (running && kills < 40) {
        const { rows } = await admin.query<{ pid: number }>(
          "SELECT pid FROM pg_stat_activity WHERE state = 'active' AND query LIKE $1 AND pid <> pg_backend_pid()",
          [`%"${schema}".mneme_append_%`],
        );
        const victim = rows[Math.floor(Math.random() * rows.length)];
        if (victim !== undefined) {
          const { rows: done } = await admin.query<{ ok: boolean }>("SELECT pg_terminate_backend($1) AS ok", [victim.pid]);
          if (done[0]?.ok === true) kills++;
        }
        // Often enough to hit every stage of an append, seldom enough that most appends get through.
        await new Promise((r) => setTimeout(r, 10 + Math.random() * 30));
      }
    };
    const killing = killer();
    await Promise.all([0, 1, 2, 3].flatMap((w) => [writer(one, w), writer(two, w + 4)]));
    running = false;
    await killing;
    await admin.query(`DROP TRIGGER slow_commit ON "${schema}".events`);

    const counts = `kills ${kills}, events acknowledged ${acknowledged.length}, appends failed ${failedUuids.length}`;
    expect(kills, counts).toBeGreaterThan(0);
    expect(failedUuids.length, counts).toBeGreaterThan(0);
    expect(acknowledged.length, counts).toBeGreaterThan(100);
    const all: Event[] = [];
    for await (const page of one.readAll({ batchSize: 100 })) all.push(...page);
    // A lost connection may have committed before it died (docs/scaling.md): those failed appends are stored whole.
    const stored = new Set(all.map((e) => e.eventUuid));
    const failedButStored = failedUuids.filter((u) => stored.has(u)).length;
    expect(all.map((e) => e.position)).toEqual(oneTo(all.length));
    expect(await one.headPosition()).toBe(all.length);
    expect(all.length).toBe(acknowledged.length + 2 * failedButStored);
    for (const e of acknowledged) expect(stored.has(e.eventUuid)).toBe(true);
    const versions = new Map<string, number[]>();
    for (const e of all) versions.set(e.aggregateUuid, [...(versions.get(e.aggregateUuid) ?? []), e.version]);
    for (const [agg, vs] of versions) expect(vs, agg).toEqual(oneTo(vs.length));
    // And the next append of either instance takes the next position.
    const [next] = await two.append([ev("after")]);
    expect(next?.position).toBe(all.length + 1);
  });
});
