/**
 * Restore of a readmodel over 1,000,000 events (BENCH_QUICK=1: 100,000) from
 * SQLite and from Postgres, next to the raw driver reading and parsing the same
 * rows in the same run; heap growth during the restore (run with --expose-gc,
 * as `npm run bench` does). Then a restore from zero of a projection whose
 * 10,000 documents live in the same database, which builds the new generation
 * beside the served one and switches (blue-green), and the switch alone.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import pg from "pg";
import {
  AllEvents,
  BaseReadmodel,
  createFacade,
  defineDomain,
  type Facade,
  newUuid,
  ProjectionReadmodel,
  withReadmodelStoreBackend,
} from "mneme";
import { createSqliteBackends } from "mneme/sqlite";
import type { EventRepository } from "mneme/store";
import { createPostgresBackends } from "mneme/postgres";
import type { Bench } from "./harness.js";
import { MemoryReadmodelStoreBackend } from "mneme/memory";

const D = defineDomain("Bench");
D.event<{ n: number }>("Added");
/** 10,000 aggregates (agg-0 .. agg-9999): the projection keeps one document each. */
const Agg = D.aggregate<{ n: number }>("Agg", {
  initialState: () => ({ n: 0 }),
  evolve: { Added: (s, p: { n: number }) => ({ n: s.n + p.n }) },
});

/** Sums payloads per tenant-less stream: a trivial readmodel whose state is one number. */
class Summer extends BaseReadmodel {
  sum = 0;
  count = 0;
  peakHeap = 0;
  constructor(f: Facade) {
    super(f, withReadmodelStoreBackend(new MemoryReadmodelStoreBackend()));
    this.domain = "Bench";
    this.name = "Summer";
    this.addDomainEventHandler(AllEvents, (_ctx, _e, p: unknown) => {
      this.sum += (p as { n: number }).n;
      if (++this.count % 10_000 === 0) this.peakHeap = Math.max(this.peakHeap, process.memoryUsage().heapUsed);
    });
  }
  protected override async resetState(): Promise<void> {
    this.sum = 0;
    this.count = 0;
  }
}

function gc(): void {
  (globalThis as { gc?: () => void }).gc?.();
}

interface Backends {
  readonly eventRepository: EventRepository;
  readonly readmodelStoreBackend: Facade["readmodelStoreBackend"];
  readonly commandStore: Facade["commandStore"];
  close(): Promise<void>;
}

/** `open` gives fresh backends on the filled database (a facade closes its stores when it stops). */
async function restoreRun(b: Bench, label: string, open: () => Backends, n: number, raw: () => Promise<number>): Promise<void> {
  const first = open();
  const repo = first.eventRepository;
  await raw(); // warm the page cache and the JIT for both sides
  const rawRow = await b.measure(
    "restore",
    `${label} raw: read + JSON.parse ${n} rows`,
    n,
    async () => {
      const c = await raw();
      if (c !== n) throw new Error(`raw read ${c}`);
    },
    "events/s",
  );
  // The readmodel stays in memory (the bench times the read and the apply, not document writes).
  const facade = createFacade({
    eventRepository: repo,
    delivery: { restoreBatchSize: 1000 },
    acceptLostGuarantees: ["atomic-command-record", "single-processor", "fenced-processing"],
  });
  facade.registerDomain(D);
  const summer = new Summer(facade);
  facade.registerReadmodel(summer);
  await facade.start(); // the first restore (from zero: no checkpoint yet)
  gc();
  const heapBefore = process.memoryUsage().heapUsed;
  summer.peakHeap = heapBefore;
  const row = await b.measure(
    "restore",
    `${label} mneme: restore fromZero of a readmodel`,
    n,
    async () => {
      await summer.restoreState(undefined, { fromZero: true }).done;
      if (summer.count !== n) throw new Error(`restored ${summer.count}`);
    },
    "events/s",
  );
  b.compare(row, rawRow);
  b.value(
    "restore",
    `${label} heap growth during the restore (peak)`,
    (summer.peakHeap - heapBefore) / 1e6,
    "MB",
    (globalThis as { gc?: unknown }).gc ? "gc before" : "no --expose-gc",
  );
  await facade.stop();
  await first.close();

  // A projection with its documents in the same database: page reads, getMany/putMany per page, the switch.
  const backends = open();
  const withDocs = createFacade({
    eventRepository: backends.eventRepository,
    readmodelStoreBackend: backends.readmodelStoreBackend,
    commandStore: backends.commandStore,
    delivery: { restoreBatchSize: 1000 },
  });
  withDocs.registerDomain(D);
  const projection = new ProjectionReadmodel(withDocs, { aggregate: Agg, name: "AggProjection" });
  withDocs.registerReadmodel(projection);
  await withDocs.start(); // the first restore fills the served generation
  const docsRow = await b.measure(
    "restore",
    `${label} mneme: restore fromZero of a projection (10,000 docs)`,
    n,
    async () => {
      await projection.restoreState(undefined, { fromZero: true }).done;
      const total = (await projection.getModelList({ pageSize: 1 })).total;
      if (total !== Math.min(n, 10_000)) throw new Error(`projected ${total}`);
    },
    "events/s",
  );
  b.compare(docsRow, rawRow);
  // The switch alone: one transaction replacing the 10,000 served documents with those of a full next generation.
  const rm = backends.readmodelStoreBackend as Backends["readmodelStoreBackend"] & {
    replaceCollections?: (moves: readonly (readonly [string, string])[]) => Promise<void>;
  };
  if (typeof rm.replaceCollections === "function") {
    const served = await rm.collection<unknown>("AggProjection:models").list();
    const keys = served.map((d) => (d as { aggregateUuid: string }).aggregateUuid);
    await rm.transaction(() => rm.collection<unknown>("AggProjection#rebuild:models").putMany(keys.map((k, i) => [k, served[i]] as const)));
    const t0 = performance.now();
    await rm.transaction(() => rm.replaceCollections!([["AggProjection:models", "AggProjection#rebuild:models"]]));
    b.value("restore", `${label} the switch of ${keys.length} documents (one transaction)`, performance.now() - t0, "ms");
  }
  await withDocs.stop();
  await backends.close();
}

export default async function (b: Bench): Promise<void> {
  const n = b.quick ? 100_000 : 1_000_000;
  const now = Date.now() * 1e6;

  // ---- SQLite: fill with one INSERT ... SELECT over a recursive CTE (fast), through the repository's own tables.
  const dir = mkdtempSync(join(tmpdir(), "mneme-restore-"));
  const filename = join(dir, "restore.db");
  {
    const setup = createSqliteBackends({ filename });
    await setup.eventRepository.init();
    await setup.close();
    const db = new Database(filename);
    db.pragma("journal_mode = WAL");
    db.exec(`WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < ${n})
      INSERT INTO mneme_events (position, event_uuid, tenant_uuid, domain, name, aggregate_uuid, version, command_uuid, created_at, req_ctx, payload)
      SELECT i, 'e-' || i, '', 'Bench', 'Added', 'agg-' || (i % 10000), (i / 10000) + 1, NULL, ${now} + i, '{"senderTenantUuid":"t"}', '{"n":1}' FROM s`);
    db.close();
  }
  await restoreRun(
    b,
    "sqlite",
    () => createSqliteBackends({ filename }),
    n,
    async () => {
      const db = new Database(filename, { readonly: true });
      const stmt = db.prepare(
        "SELECT position, event_uuid, tenant_uuid, domain, name, aggregate_uuid, version, command_uuid, created_at, req_ctx, payload FROM mneme_events WHERE position > ? ORDER BY position LIMIT 1000",
      );
      let after = 0;
      let count = 0;
      for (;;) {
        const rows = stmt.all(after) as { position: number; req_ctx: string; payload: string }[];
        if (rows.length === 0) break;
        for (const r of rows) {
          JSON.parse(r.req_ctx);
          JSON.parse(r.payload);
          count++;
        }
        after = rows[rows.length - 1]!.position;
      }
      db.close();
      return count;
    },
  );
  rmSync(dir, { recursive: true, force: true });

  // ---- Postgres: fill with INSERT ... SELECT generate_series.
  const connectionString = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test";
  const schema = `mneme_bench_${newUuid().replace(/-/g, "").slice(-12)}`;
  const admin = new pg.Pool({ connectionString, max: 2 });
  try {
    const setup = createPostgresBackends({ connectionString, schema });
    await setup.eventRepository.init();
    await setup.close();
    await admin.query(`INSERT INTO "${schema}".events (position, event_uuid, tenant_uuid, domain, name, aggregate_uuid, version, command_uuid, created_at, req_ctx, payload, event_version)
      SELECT i, 'e-' || i, '', 'Bench', 'Added', 'agg-' || (i % 10000), (i / 10000) + 1, NULL, ${now}::bigint + i, '{"senderTenantUuid":"t"}'::jsonb, '{"n":1}'::jsonb, 1 FROM generate_series(1, ${n}) AS i`);
    await admin.query(`SELECT setval('"${schema}".events_position_seq', ${n})`);
    await admin.query(`ANALYZE "${schema}".events`);
    await restoreRun(
      b,
      "postgres",
      () => createPostgresBackends({ connectionString, schema }),
      n,
      async () => {
        const client = await admin.connect();
        let after = 0;
        let count = 0;
        try {
          for (;;) {
            const { rows } = await client.query<{ position: string }>({
              text: `SELECT position, event_uuid, tenant_uuid, domain, name, aggregate_uuid, version, command_uuid, created_at, req_ctx, payload FROM "${schema}".events WHERE position > $1 ORDER BY position LIMIT 1000`,
              values: [after],
            });
            if (rows.length === 0) break;
            count += rows.length; // pg parses jsonb columns itself
            after = Number(rows[rows.length - 1]!.position);
          }
        } finally {
          client.release();
        }
        return count;
      },
    );
  } finally {
    await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await admin.end();
  }
}
