/**
 * Postgres loadAggregate under many callers: loads that arrive while others
 * run go together in one statement, each with its own events (the same
 * aggregate from different versions, aggregates without events), and a
 * grouped statement whose session dies fails each of its loads with
 * UNAVAILABLE while the next loads work.
 */
import { afterAll, describe, expect, it } from "vitest";
import { isMnemeError, type NewEvent } from "mneme";
import { PostgresEventRepository, type PgStatement } from "mneme/postgres";
import { postgresScratch } from "../support/postgres-scratch.js";

const scratch = postgresScratch("mneme_l");
const admin = scratch.pool;
const schemas: string[] = [];
const repos: PostgresEventRepository[] = [];
afterAll(async () => {
  for (const r of repos) await r.close();
});

/** A repository on a schema of its own; `hook` sees every statement it sends. */
async function newRepo(hook: (s: PgStatement) => void | Promise<void>): Promise<PostgresEventRepository> {
  const schema = scratch.newSchema();
  schemas.push(schema);
  const repo = new PostgresEventRepository({ pool: scratch.newPool(6), schema, pollIntervalMs: 0, onStatement: hook });
  repos.push(repo);
  await repo.init();
  return repo;
}

function events(aggregateUuid: string, n: number): NewEvent[] {
  return Array.from({ length: n }, (_, k) => ({ domain: "Todo", name: "TodoCreated", aggregateUuid, payload: { k } }));
}

const isGroupedLoad = (s: PgStatement): boolean => s.kind === "read" && s.text.includes("WITH ORDINALITY AS u(a, v, i)");

describe("Postgres loadAggregate from many callers", () => {
  it("loads that arrive while others run share one statement, and each gets exactly its own events", async () => {
    const reads: PgStatement[] = [];
    const repo = await newRepo((s) => {
      if (s.kind === "read") reads.push(s);
    });
    const aggs = Array.from({ length: 6 }, (_, a) => `agg-${a}`);
    for (const [a, agg] of aggs.entries()) if (a > 0) await repo.append(events(agg, a));
    reads.length = 0;
    // 24 loads in one tick (callers resumed together) share one statement.
    const asked = Array.from({ length: 24 }, (_, i) => ({ agg: aggs[i % aggs.length]!, from: 1 + (i % 3) }));
    const loaded = await Promise.all(asked.map((q) => repo.loadAggregate(q.agg, { fromVersion: q.from })));
    for (const [i, q] of asked.entries()) {
      const size = aggs.indexOf(q.agg);
      const want = Array.from({ length: Math.max(0, size - q.from + 1) }, (_, k) => q.from + k);
      expect(loaded[i]!.map((e) => e.version)).toEqual(want);
      expect(loaded[i]!.every((e) => e.aggregateUuid === q.agg)).toBe(true);
      expect(loaded[i]!.map((e) => (e.payload as { k: number }).k)).toEqual(want.map((v) => v - 1));
    }
    expect(reads.length).toBe(1);
    expect(reads.filter(isGroupedLoad).length).toBe(1);
    // A lone load afterwards is a statement of its own, and it sees what was appended before it.
    await repo.append(events("agg-0", 2));
    expect((await repo.loadAggregate("agg-0")).map((e) => e.version)).toEqual([1, 2]);
  });

  it("a grouped load whose session dies fails each of its loads with UNAVAILABLE; the next loads work", async () => {
    let armed = true;
    const repo = await newRepo(async (s) => {
      if (armed && isGroupedLoad(s) && s.processId !== undefined) {
        armed = false;
        await admin.query("SELECT pg_terminate_backend($1)", [s.processId]);
      }
    });
    await repo.append(events("a", 3));
    const outcomes = await Promise.allSettled(Array.from({ length: 8 }, () => repo.loadAggregate("a")));
    const failed = outcomes.filter((o) => o.status === "rejected");
    // The eight loads of one tick shared the statement whose session was ended.
    expect(failed.length).toBe(8);
    for (const o of failed) expect(isMnemeError((o as PromiseRejectedResult).reason, "UNAVAILABLE")).toBe(true);
    for (const o of outcomes) if (o.status === "fulfilled") expect(o.value.map((e) => e.version)).toEqual([1, 2, 3]);
    const again = await Promise.all(Array.from({ length: 8 }, () => repo.loadAggregate("a", { fromVersion: 2 })));
    for (const evs of again) expect(evs.map((e) => e.version)).toEqual([2, 3]);
  });

  it("a grouped load reads each aggregate by its index on a large store (a plain join made Postgres scan the whole table)", async () => {
    let text: string | undefined;
    const repo = await newRepo((st) => {
      if (isGroupedLoad(st)) text = st.text;
    });
    const schema = schemas[schemas.length - 1]!;
    const aggs = Array.from({ length: 300 }, (_, a) => `big-${a}`);
    for (let a = 0; a < aggs.length; a += 20) await repo.append(aggs.slice(a, a + 20).flatMap((agg) => events(agg, 100)));
    await admin.query(`ANALYZE "${schema}".events`);
    const asked = aggs.slice(0, 40);
    const loaded = await Promise.all(asked.map((agg) => repo.loadAggregate(agg)));
    for (const l of loaded) expect(l).toHaveLength(100);
    expect(text, "the loads went as a grouped statement").toBeDefined();
    const ids = asked.slice(0, 16);
    const plan = await admin.query<{ "QUERY PLAN": unknown }>(`EXPLAIN (FORMAT JSON) ${text!}`, [ids, ids.map(() => 1)]);
    const shown = JSON.stringify(plan.rows[0]!["QUERY PLAN"]);
    expect(shown).not.toContain('"Seq Scan"');
    expect(shown).toContain("events_aggregate_version_key");
  }, 60_000);
});
