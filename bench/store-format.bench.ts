/**
 * What the refusal of earlier releases' writers costs on Postgres (see
 * docs/upgrading.md): the events table's BEFORE INSERT trigger (its WHEN
 * clause is checked on every appended row) and the readmodel documents'
 * BEFORE INSERT OR UPDATE trigger (every document write). Each is measured
 * on a schema as init() leaves it, on one whose triggers were dropped, and
 * against raw pg doing the same single-row write, in interleaved rounds.
 */
import pg from "pg";
import { newUuid } from "mneme";
import { PostgresEventRepository, PostgresReadmodelStoreBackend } from "mneme/postgres";
import { type Bench, todoEvent } from "./harness.js";

const ROUNDS = 6;

export default async function (b: Bench): Promise<void> {
  const n = b.quick ? 200 : 1000;
  const connectionString = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test";
  const admin = new pg.Pool({ connectionString, max: 2 });
  const pools: pg.Pool[] = [];
  const schemas = ["guarded", "unguarded", "raw"].map((s) => `mneme_bench_fmt_${s}_${newUuid().replace(/-/g, "").slice(-8)}`);
  const [guarded, unguarded, raw] = schemas as [string, string, string];
  const pool = (): pg.Pool => {
    const p = new pg.Pool({ connectionString, max: 2 });
    pools.push(p);
    return p;
  };
  try {
    const repos = [guarded, unguarded].map((schema) => new PostgresEventRepository({ pool: pool(), schema, pollIntervalMs: 0 }));
    const backends = [guarded, unguarded].map((schema) => new PostgresReadmodelStoreBackend({ pool: pool(), schema }));
    for (const r of repos) await r.init();
    for (const x of backends) await x.init();
    await admin.query(`DROP TRIGGER mneme_refuse_unversioned ON "${unguarded}".events`);
    await admin.query(`DROP TRIGGER mneme_refuse_unscoped ON "${unguarded}".readmodel_documents`);
    await admin.query(`CREATE SCHEMA "${raw}"`);
    await admin.query(`CREATE TABLE "${raw}".events (LIKE "${unguarded}".events INCLUDING ALL)`);
    await admin.query(`CREATE TABLE "${raw}".docs (LIKE "${unguarded}".readmodel_documents INCLUDING ALL)`);
    const rawPool = pool();

    const appendS = [0, 0, 0];
    const putS = [0, 0, 0];
    let position = 0;
    for (let round = 0; round < ROUNDS; round++) {
      // Each round starts with another side, so no side always runs first (or last) under the same load.
      for (const side of [0, 1, 2].map((k) => (k + round) % 3)) {
        const t0 = performance.now();
        for (let i = 0; i < n; i++) {
          const e = todoEvent(`agg-${round}-${i}`, i);
          if (side < 2) await repos[side]!.append([e]);
          else
            await rawPool.query(
              `INSERT INTO "${raw}".events (position, event_uuid, tenant_uuid, domain, name, aggregate_uuid, version, created_at, req_ctx, payload, event_version)
               VALUES ($1, $2, $3, $4, $5, $6, 1, $7, $8::jsonb, $9::jsonb, 1)`,
              [
                ++position,
                newUuid(),
                e.tenantUuid,
                e.domain,
                e.name,
                e.aggregateUuid,
                Date.now() * 1e6,
                JSON.stringify(e.reqCtx),
                JSON.stringify(e.payload),
              ],
            );
        }
        appendS[side]! += (performance.now() - t0) / 1000;
        const t1 = performance.now();
        for (let i = 0; i < n; i++) {
          const doc = { title: `todo ${i}`, n: i, round };
          if (side < 2) await backends[side]!.collection<typeof doc>("Bench:docs", { writeTenantUuid: "t1" }).put(`k-${i}`, doc);
          else
            await rawPool.query(
              `INSERT INTO "${raw}".docs (collection, key, doc, updated_at, tenant_uuid) VALUES ('Bench:docs', $1, $2::jsonb, $3, 't1')
               ON CONFLICT (collection, key) DO UPDATE SET doc = EXCLUDED.doc, updated_at = EXCLUDED.updated_at`,
              [`k-${i}`, JSON.stringify(doc), Date.now() * 1e6],
            );
        }
        putS[side]! += (performance.now() - t1) / 1000;
      }
    }
    const ops = n * ROUNDS;
    const appendRows = [
      "append 1 event, guarded (as init() leaves it)",
      "append 1 event, triggers dropped",
      "raw pg INSERT of 1 event",
    ].map((name, i) => b.record("store-format", name, ops, appendS[i]!, "appends/s"));
    b.compare(appendRows[0]!, appendRows[1]!);
    b.compare(appendRows[0]!, appendRows[2]!);
    const putRows = ["document put, guarded", "document put, trigger dropped", "raw pg upsert of 1 document"].map((name, i) =>
      b.record("store-format", name, ops, putS[i]!, "puts/s"),
    );
    b.compare(putRows[0]!, putRows[1]!);
    b.compare(putRows[0]!, putRows[2]!);
    for (const r of repos) await r.close();
    for (const x of backends) await x.close();
  } finally {
    for (const s of schemas) await admin.query(`DROP SCHEMA IF EXISTS "${s}" CASCADE`);
    await Promise.all(pools.map((p) => p.end()));
    await admin.end();
  }
}
