/**
 * Reads over an archive against the same reads from the database, in one run.
 * SQLite: two copies of one store file, one archived (every event below the
 * head moved to the files, but the first and newest of each aggregate), one
 * not. Interleaved rounds of
 *
 * - readAll from zero (what every restore from zero reads), pages of 1000;
 * - a readmodel restored from zero by a facade (a document written per
 *   event, in the runner's batches), timed from start until its checkpoint
 *   reaches the head.
 *
 * The ratio is archive / database (throughput, best of the rounds, after one
 * untimed read of each); each round opens the store anew, so the archive's
 * segments are decoded (SHA-256, gunzip, JSON) in every timed read, as in a
 * restore from zero. Also printed: the archive's own cost (events per second
 * archived, bytes per event in the files). Postgres: readAll from zero of two
 * schemas holding the same events, one archived.
 */
import { copyFileSync, mkdtempSync, readdirSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { anonymous, BaseReadmodel, createFacade, defineDomain, type NewEvent } from "../src/index.js";
import { createPostgresBackends } from "../src/postgres/index.js";
import { createSqliteBackends } from "../src/sqlite/index.js";
import { archiveStore } from "../src/store-copy/index.js";
import type { Bench } from "./harness.js";

const Counter = defineDomain("Counter");
const Incremented = Counter.event<{ by: number; note: string }>("Incremented");
Counter.command<{ id: string }>("Touch", { permission: anonymous });

class Totals extends BaseReadmodel {
  constructor(facade: ReturnType<typeof createFacade>) {
    super(facade);
    this.domain = "Counter";
    this.name = "Totals";
    this.addDomainEventHandler(Incremented, async (_ctx, event, p) => {
      const totals = this.collection<{ total: number }>("totals");
      const cur = (await totals.get(event.aggregateUuid))?.total ?? 0;
      await totals.put(event.aggregateUuid, { total: cur + p.by });
    });
  }
}

export default async function archiveBench(b: Bench): Promise<void> {
  await sqlite(b);
  await postgres(b);
}

/** Postgres: readAll from zero of one schema against an archived twin (the same events appended to both). */
async function postgres(b: Bench): Promise<void> {
  const url = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test";
  const events = b.quick ? 20_000 : 100_000;
  const suffix = Math.random().toString(36).slice(2, 10);
  const schemas = [`bench_archive_db_${suffix}`, `bench_archive_ar_${suffix}`];
  const dir = mkdtempSync(join(tmpdir(), "mneme-archive-bench-pg-"));
  const open = (schema: string) => createPostgresBackends({ connectionString: url, schema, pollIntervalMs: 0 });
  try {
    for (const schema of schemas) {
      const s = open(schema);
      await s.eventRepository.init();
      for (let i = 0; i < events; i += 500) await s.eventRepository.append(batch(i));
      await s.close();
    }
    const u = new URL(url);
    u.searchParams.set("schema", schemas[1]!);
    const report = await archiveStore(u.toString(), { before: events, to: join(dir, "archive") });
    const readAll = async (schema: string): Promise<number> => {
      const s = open(schema);
      await s.eventRepository.init();
      const t = performance.now();
      let n = 0;
      for await (const page of s.eventRepository.readAll({ batchSize: 1000 })) n += page.length;
      const seconds = (performance.now() - t) / 1000;
      await s.close();
      if (n !== events) throw new Error(`readAll read ${n} of ${events}`);
      return seconds;
    };
    await readAll(schemas[0]!);
    await readAll(schemas[1]!);
    const db: number[] = [];
    const ar: number[] = [];
    for (let r = 0; r < (b.quick ? 2 : 3); r++) {
      db.push(await readAll(schemas[0]!));
      ar.push(await readAll(schemas[1]!));
    }
    b.record("archive", "postgres: readAll from zero, database", events, Math.min(...db), "events/s");
    b.record("archive", "postgres: readAll from zero, archive", events, Math.min(...ar), "events/s");
    b.value("archive", "postgres: readAll, archive / database", Math.min(...db) / Math.min(...ar), "x", `${report.archived} archived`);
  } finally {
    const pool = new pg.Pool({ connectionString: url });
    for (const schema of schemas) await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await pool.end();
    rmSync(dir, { recursive: true, force: true });
  }
}

function batch(i: number): NewEvent[] {
  return Array.from({ length: 500 }, (_x, k) => ({
    aggregateUuid: `counter-${(i + k) % 1000}`,
    domain: "Counter",
    name: "Incremented",
    payload: { by: (i + k) % 7, note: `increment number ${i + k} of a counter` },
    reqCtx: { senderAccountUuid: "bench" },
  }));
}

async function sqlite(b: Bench): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "mneme-archive-bench-"));
  try {
    const events = b.quick ? 20_000 : 100_000;
    const db = join(dir, "db.db");
    const archived = join(dir, "archived.db");
    const stores = createSqliteBackends({ filename: db, pollIntervalMs: 0 });
    await stores.eventRepository.init();
    for (let i = 0; i < events; i += 500) {
      await stores.eventRepository.append(batch(i));
    }
    await stores.close();
    copyFileSync(db, archived);
    const files = join(dir, "archive");
    const t0 = performance.now();
    const report = await archiveStore(archived, { before: events, to: files });
    b.record("archive", "sqlite: archive (write, fsync, read back, delete)", report.archived, (performance.now() - t0) / 1000, "events/s");
    const range = join(files, readdirSync(files)[0]!);
    const bytes = readdirSync(range).reduce((n, f) => n + statSync(join(range, f)).size, 0);
    b.value("archive", "sqlite: archive file bytes per event", bytes / report.archived, "B", `${report.archived} of ${events} archived`);

    const rounds = b.quick ? 2 : 3;
    const readAll = async (file: string): Promise<number> => {
      const s = createSqliteBackends({ filename: file, pollIntervalMs: 0 });
      await s.eventRepository.init();
      const t = performance.now();
      let n = 0;
      for await (const page of s.eventRepository.readAll({ batchSize: 1000 })) n += page.length;
      const seconds = (performance.now() - t) / 1000;
      await s.close();
      if (n !== events) throw new Error(`readAll read ${n} of ${events}`);
      return seconds;
    };
    const restore = async (file: string): Promise<number> => {
      const f = createFacade({ appName: "archive-bench", ...createSqliteBackends({ filename: file, pollIntervalMs: 0 }) });
      f.registerDomain(Counter);
      f.registerReadmodel(new Totals(f));
      const t = performance.now();
      await f.start();
      for (;;) {
        const h = f.runtime.listEventHandlers().find((x) => x.eventHandlerName === "Totals");
        if (h !== undefined && h.lastPosition >= events) break;
        await new Promise((r) => setTimeout(r, 5));
      }
      const seconds = (performance.now() - t) / 1000;
      await f.stop();
      return seconds;
    };
    const times = { readDb: [] as number[], readArchive: [] as number[], restoreDb: [] as number[], restoreArchive: [] as number[] };
    // One untimed read of each first: the JIT warms both paths, not only the first one measured.
    await readAll(db);
    await readAll(archived);
    for (let r = 0; r < rounds; r++) {
      times.readDb.push(await readAll(db));
      times.readArchive.push(await readAll(archived));
      const dbCopy = join(dir, `db-${r}.db`);
      const archivedCopy = join(dir, `archived-${r}.db`);
      copyFileSync(db, dbCopy);
      copyFileSync(archived, archivedCopy);
      times.restoreDb.push(await restore(dbCopy));
      times.restoreArchive.push(await restore(archivedCopy));
    }
    const best = (xs: number[]): number => Math.min(...xs);
    b.record("archive", "sqlite: readAll from zero, database", events, best(times.readDb), "events/s");
    b.record("archive", "sqlite: readAll from zero, archive", events, best(times.readArchive), "events/s");
    b.value("archive", "sqlite: readAll, archive / database", best(times.readDb) / best(times.readArchive), "x", "throughput ratio");
    b.record("archive", "sqlite: readmodel restore from zero, database", events, best(times.restoreDb), "events/s");
    b.record("archive", "sqlite: readmodel restore from zero, archive", events, best(times.restoreArchive), "events/s");
    b.value(
      "archive",
      "sqlite: readmodel restore, archive / database",
      best(times.restoreDb) / best(times.restoreArchive),
      "x",
      "throughput ratio",
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
