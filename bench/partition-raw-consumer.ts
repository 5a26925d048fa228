/**
 * The raw-driver side of `bench/partitions`: a process that does by hand, with
 * pg alone, what an instance of the partitioned CpuTotals readmodel does, so
 * that the bench can show what 1 and 2 processes reach on this machine with no
 * framework at all. It reads mneme's events table in pages of 4,000 after its
 * position (the same columns, the same event filter, the same page size as the
 * partitions' shared read), keeps the events of the partitions it was given
 * (the same FNV-1a routing), and applies each partition's events of a page in
 * one transaction of its own: the partition's documents read once, ~50 us of
 * busy work per event, the documents and the partition's checkpoint written,
 * COMMIT; the partitions of a page run concurrently on the pool (so one's
 * round trips overlap another's work) while the next page is read ahead.
 * It does less than mneme does (no lock or fencing check, no undo log, no
 * metrics), so it is a ceiling, not a peer.
 * Usage (forked with IPC, `--import tsx`): partition-raw-consumer.ts <schema> <partitions, e.g. 0,1> <workMicros>
 * Reports `{ ready: true }`; `{ report: true }` answers `{ cpuMs }`.
 */
import pg from "pg";
import { partitionOf } from "../src/readmodel/partition-routing.js";
import { busy } from "../test/support/partitioned-log.js";

const [schema, partsArg, workArg] = process.argv.slice(2);
if (schema === undefined || partsArg === undefined || workArg === undefined || process.send === undefined) {
  throw new Error("usage: partition-raw-consumer.ts <schema> <partitions> <workMicros> (forked with IPC)");
}
const DATABASE_URL = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test";
const PARTITIONS = 4;
const PAGE = 4000;
const POLL_MS = 10;
const held = new Set(partsArg.split(",").map(Number));
const workMicros = Number(workArg);
const q = `"${schema}"`;
const pool = new pg.Pool({ connectionString: DATABASE_URL, max: 4 });

interface Row {
  position: string;
  aggregate_uuid: string;
  payload: { by: number };
}

function readPage(after: string): Promise<Row[]> {
  return pool
    .query<Row>(
      `SELECT position, event_uuid, tenant_uuid, domain, name, aggregate_uuid, version, command_uuid, created_at, req_ctx, payload, event_version
         FROM ${q}.events WHERE position > $1 AND (domain || '.' || name) = ANY($3::text[]) ORDER BY position LIMIT $2`,
      [after, PAGE, ["Counter.Incremented"]],
    )
    .then((r) => r.rows);
}

/** One partition's events of a page: its documents read, the work done, documents and checkpoint written, in one transaction. */
async function applyPartition(partition: number, rows: Row[], pageEnd: string): Promise<void> {
  const client = await pool.connect();
  try {
    await client.query("BEGIN");
    const keys = [...new Set(rows.map((r) => r.aggregate_uuid))];
    const found = await client.query<{ key: string; doc: { counterUuid: string; total: number } }>(
      `SELECT key, doc FROM ${q}.raw_totals WHERE key = ANY($1::text[])`,
      [keys],
    );
    const docs = new Map(found.rows.map((r) => [r.key, r.doc]));
    for (const r of rows) {
      busy(workMicros);
      const d = docs.get(r.aggregate_uuid) ?? { counterUuid: r.aggregate_uuid, total: 0 };
      d.total += r.payload.by;
      docs.set(r.aggregate_uuid, d);
    }
    await client.query(
      `INSERT INTO ${q}.raw_totals (key, doc) SELECT * FROM unnest($1::text[], $2::jsonb[])
         ON CONFLICT (key) DO UPDATE SET doc = excluded.doc`,
      [keys, keys.map((k) => JSON.stringify(docs.get(k)))],
    );
    await client.query(
      `INSERT INTO ${q}.raw_checkpoints (partition, position) VALUES ($1, $2)
         ON CONFLICT (partition) DO UPDATE SET position = excluded.position`,
      [partition, pageEnd],
    );
    await client.query("COMMIT");
  } catch (e) {
    await client.query("ROLLBACK").catch(() => undefined);
    throw e;
  } finally {
    client.release();
  }
}

async function run(): Promise<void> {
  let after = "0";
  let next = readPage(after);
  for (;;) {
    const page = await next;
    if (page.length === 0) {
      await new Promise((r) => setTimeout(r, POLL_MS));
      next = readPage(after);
      continue;
    }
    const end = page[page.length - 1]!.position;
    // Read ahead while this page is applied.
    next = readPage(end);
    const mine = new Map<number, Row[]>();
    for (const r of page) {
      const p = partitionOf(r.aggregate_uuid, PARTITIONS);
      if (!held.has(p)) continue;
      const list = mine.get(p);
      if (list === undefined) mine.set(p, [r]);
      else list.push(r);
    }
    await Promise.all([...mine].map(([p, rows]) => applyPartition(p, rows, end)));
    after = end;
  }
}

process.on("message", (m: unknown) => {
  if (typeof m === "object" && m !== null && "report" in m) {
    const cpu = process.cpuUsage();
    process.send!({ cpuMs: (cpu.user + cpu.system) / 1000 });
  }
});
await pool.query("SELECT 1");
process.send({ ready: true });
run().catch((e: unknown) => {
  console.error("partition-raw-consumer:", e);
  process.exit(1);
});
