/**
 * Flatness of DCB on Postgres (issue #43): the same query's read and a
 * conditional append, with 1k and with 1M events in the store, the queried
 * tag on the same 25 events in both. The filler is written by
 * `INSERT … SELECT generate_series` in the script's own schemas (each filler
 * event with its type row and a tag of its own among 10,000), then analyzed.
 *
 *   node --import tsx bench/dcb-flat.ts        (DATABASE_URL, default postgres://postgres@127.0.0.1:5432/test)
 */
import { loadavg } from "node:os";
import pg from "pg";
import { PostgresEventRepository } from "../src/postgres/postgres-event-repository.js";
import { BENCH_REQ_CTX as reqCtx, BENCH_TENANT as TENANT } from "./harness.js";

const DATABASE_URL = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test";
const ROUNDS = Number(process.env.ROUNDS ?? 300);

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] as number;
}

async function timed(n: number, f: (i: number) => Promise<unknown>): Promise<number> {
  const ms: number[] = [];
  for (let i = 0; i < n; i++) {
    const t = performance.now();
    await f(i);
    ms.push(performance.now() - t);
  }
  return median(ms);
}

async function measure(pool: pg.Pool, size: number): Promise<void> {
  const schema = `dcb_flat_${size}`;
  await pool.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
  const repo = new PostgresEventRepository({ pool, schema, pollIntervalMs: 0 });
  await repo.init();
  try {
    const t0 = performance.now();
    await pool.query(
      `INSERT INTO ${schema}.events (position, event_uuid, tenant_uuid, domain, name, aggregate_uuid, version, created_at, req_ctx, payload, event_version)
       SELECT g, 'filler-' || g, $1, 'F', 'Filler', 'filler-' || g, 1, 0, '{}'::jsonb, jsonb_build_object('n', g), 1
       FROM generate_series(1, $2::bigint) g`,
      [TENANT, size],
    );
    await pool.query(
      `INSERT INTO ${schema}.event_tags (tenant_uuid, tag, position)
       SELECT $1, ':F.Filler', g FROM generate_series(1, $2::bigint) g
       UNION ALL SELECT $1, 'filler:' || (g % 10000), g FROM generate_series(1, $2::bigint) g`,
      [TENANT, size],
    );
    await pool.query(`ANALYZE ${schema}.events`);
    await pool.query(`ANALYZE ${schema}.event_tags`);
    const fill = performance.now() - t0;
    const ev = (n: number, tags: string[]) => ({
      domain: "C",
      name: "Subscribed",
      aggregateUuid: `sub-${n}-${Math.random()}`,
      payload: { n },
      tenantUuid: TENANT,
      reqCtx,
      tags,
    });
    for (let n = 0; n < 25; n++) await repo.append([ev(n, ["course:q", `student:${n}`])]);
    const query = [{ types: ["C.Subscribed"], tags: ["course:q"] }];
    const check = (await repo.readTagged!(TENANT, query)).events.length;
    if (check !== 25) throw new Error(`expected 25 matches, got ${check}`);
    const read = await timed(ROUNDS, () => repo.readTagged!(TENANT, query));
    // 16 reads at once: after the first, they go together in one statement (PostgresTaggedReader).
    const together = await timed(ROUNDS, () => Promise.all(Array.from({ length: 16 }, () => repo.readTagged!(TENANT, query))));
    // A cached read brought up to date: the matches after the read's position (none).
    const head = await repo.headPosition();
    const readAfter = await timed(ROUNDS, () => repo.readTagged!(TENANT, query, { after: head }));
    // A conditional append whose condition holds (the new event does not match the query), after a fresh read.
    const append = await timed(ROUNDS, async (i) => {
      const { position } = await repo.readTagged!(TENANT, query, { after: head });
      await repo.append([ev(100 + i, [`student:x${i}`])], { conditions: [{ tenantUuid: TENANT, items: query, after: position }] });
    });
    const appendOnly = await timed(ROUNDS, (i) =>
      repo.append([ev(1000 + i, [`student:y${i}`])], { conditions: [{ tenantUuid: TENANT, items: query, after: head }] }),
    );
    console.log(
      `  ${String(size).padStart(8)} events (filled in ${(fill / 1000).toFixed(1)} s): read of 25 matches ${read.toFixed(3)} ms, ` +
        `16 such reads at once ${together.toFixed(3)} ms, ` +
        `read after the head ${readAfter.toFixed(3)} ms, read + conditional append ${append.toFixed(3)} ms, ` +
        `conditional append (after ${ROUNDS} appends since its position) ${appendOnly.toFixed(3)} ms (medians of ${ROUNDS})`,
    );
  } finally {
    await repo.close();
    if (process.env.KEEP !== "1") await pool.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
  }
}

const pool = new pg.Pool({ connectionString: DATABASE_URL, max: 4 });
try {
  console.log(
    `  load average ${loadavg()
      .map((x) => x.toFixed(2))
      .join(" ")}`,
  );
  for (const size of (process.argv[2] ?? "1000,1000000").split(",").map(Number)) await measure(pool, size);
  console.log(
    `  load average ${loadavg()
      .map((x) => x.toFixed(2))
      .join(" ")}`,
  );
} finally {
  await pool.end();
}
