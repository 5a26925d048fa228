/**
 * The cost of the hash chain on the append paths, before/after in one run.
 *
 * Postgres: two schemas of the same database, one as this release makes it
 * and one whose chain trigger is dropped (the append path of the release
 * before), appended to in interleaved rounds: batches of 100, single events,
 * and 32 concurrent single appends (group commit). The ratio is with / without.
 *
 * SQLite: the chain's added work on the append path is the SHA-256 of each
 * row (the head lookup replaces lastInsertRowid); its share is the time of
 * those hashes over the same rows against the time of the appends.
 *
 * Memory: the chain is computed when asked for (stored events are frozen), so
 * the append path is unchanged; the cost of computing it is printed per event.
 *
 * Verify: events per second of `verifyEventChain` on SQLite and Postgres.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { MemoryEventRepository } from "../src/memory/index.js";
import { PostgresEventRepository } from "../src/postgres/index.js";
import { SqliteEventRepository } from "../src/sqlite/index.js";
import { chainCreatedAt, chainHash, GENESIS_HASH, verifyEventChain } from "../src/store/event-chain.js";
import { type Bench, duel, todoBatchOf100, todoEvent } from "./harness.js";

const DATABASE_URL = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test";

export default async function chainBench(b: Bench): Promise<void> {
  await sqlite(b);
  await memory(b);
  await postgres(b);
}

async function sqlite(b: Bench): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "mneme-chain-bench-"));
  try {
    const repo = new SqliteEventRepository({ filename: join(dir, "chain.db"), pollIntervalMs: 0 });
    await repo.init();
    const rounds = b.quick ? 50 : 300;
    let appendMs = 0;
    for (let r = 0; r < rounds; r++) {
      const batch = todoBatchOf100(r);
      const t0 = performance.now();
      await repo.append(batch);
      appendMs += performance.now() - t0;
    }
    const singles = b.quick ? 2000 : 10_000;
    let singleMs = 0;
    for (let i = 0; i < singles; i++) {
      const e = todoEvent(`single-${i % 100}`, i);
      const t0 = performance.now();
      await repo.append([e]);
      singleMs += performance.now() - t0;
    }
    // The same rows' hashes, as the append computes them (texts as stored).
    const rows: Parameters<typeof chainHash>[1][] = [];
    for await (const page of repo.readChain({ batchSize: 5000 })) for (const r of page) rows.push(r);
    let previous = GENESIS_HASH;
    const t0 = performance.now();
    for (const r of rows) previous = chainHash(previous, { ...r, createdAt: chainCreatedAt(Number(r.createdAt)) });
    const hashMs = performance.now() - t0;
    const perRow = hashMs / rows.length;
    b.record("chain", "sqlite: append 100-event batches (chained)", rounds * 100, appendMs / 1000, "events/s");
    b.record("chain", "sqlite: append single events (chained)", singles, singleMs / 1000, "events/s");
    b.value("chain", "sqlite: SHA-256 of a row", perRow * 1e6, "ns", `${rows.length} rows`);
    b.value("chain", "sqlite: hash share of batch appends", ((perRow * rounds * 100) / appendMs) * 100, "%");
    b.value("chain", "sqlite: hash share of single appends", ((perRow * singles) / singleMs) * 100, "%");
    const v0 = performance.now();
    const verified = await verifyEventChain(repo, { batchSize: 5000 });
    b.record("chain", "sqlite: verify", verified.checked, (performance.now() - v0) / 1000, "events/s");
    await repo.close();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

async function memory(b: Bench): Promise<void> {
  const repo = new MemoryEventRepository();
  const n = b.quick ? 20_000 : 100_000;
  for (let r = 0; r < n / 100; r++) await repo.append(todoBatchOf100(r));
  const t0 = performance.now();
  await repo.chainHead();
  b.record("chain", "memory: chain computed when asked", n, (performance.now() - t0) / 1000, "events/s");
}

async function postgres(b: Bench): Promise<void> {
  const pool = new pg.Pool({ connectionString: DATABASE_URL, max: 40 });
  const suffix = Math.random().toString(36).slice(2, 8);
  const [chained, plain] = [`bench_chain_${suffix}`, `bench_nochain_${suffix}`];
  try {
    const withChain = new PostgresEventRepository({ pool, schema: chained, pollIntervalMs: 0 });
    const without = new PostgresEventRepository({ pool, schema: plain, pollIntervalMs: 0 });
    await withChain.init();
    await without.init();
    // The append path of the release before: no trigger, no hash.
    await pool.query(`DROP TRIGGER mneme_zz_chain ON "${plain}".events`);
    const side = (repo: PostgresEventRepository, what: "batch" | "single" | "concurrent") => async (r: number) => {
      if (what === "batch") await repo.append(todoBatchOf100(r));
      else if (what === "single") await repo.append([todoEvent(`single-${r % 50}`, r)]);
      else await Promise.all(Array.from({ length: 32 }, (_, k) => repo.append([todoEvent(`c-${r}-${k}`, k)])));
    };
    const rounds = b.quick ? 40 : 200;
    await duel(
      b,
      "chain",
      "postgres append 100-event batches",
      100,
      rounds,
      side(withChain, "batch"),
      [{ name: "no chain (trigger dropped)", run: side(without, "batch") }],
      "events/s",
    );
    await duel(
      b,
      "chain",
      "postgres append single events",
      1,
      rounds * 5,
      side(withChain, "single"),
      [{ name: "no chain (trigger dropped)", run: side(without, "single") }],
      "events/s",
    );
    await duel(
      b,
      "chain",
      "postgres 32 concurrent appends (group commit)",
      32,
      rounds,
      side(withChain, "concurrent"),
      [{ name: "no chain (trigger dropped)", run: side(without, "concurrent") }],
      "events/s",
    );
    const v0 = performance.now();
    const verified = await verifyEventChain(withChain, { batchSize: 5000 });
    b.record("chain", "postgres: verify", verified.checked, (performance.now() - v0) / 1000, "events/s");
    await withChain.close();
    await without.close();
  } finally {
    for (const s of [chained, plain]) await pool.query(`DROP SCHEMA IF EXISTS "${s}" CASCADE`).catch(() => undefined);
    await pool.end();
  }
}
