import type pg from "pg";
import type { ArchivedRange } from "../event-archive/archive-index.js";
import type { ChainRow } from "../store/event-chain.js";
import { MnemeError } from "../model/errors.js";
import { PG, requireDriver } from "../store/driver.js";
import { storeFormatRecord, type StoreFormatRecord } from "../store/store-format.js";
import { createPostgresBackends } from "../postgres/postgres-backends.js";
import { mapPgError } from "../postgres/postgres-errors.js";
import { FORMAT_RECORD_TABLE } from "../postgres/postgres-old-starts.js";
import { quoteIdent, validateSchemaName } from "../postgres/postgres-schema.js";
import {
  type CopyEndpoint,
  type CopyMarker,
  type CopyTableProgress,
  createStoreTables,
  PROGRESS_COLUMNS,
  progressByTable,
  type ProgressRow,
} from "./copy-endpoint.js";
import {
  COPY_MARKER_TABLE,
  COPY_PROGRESS_TABLE,
  type CopyColumn,
  type CopyRow,
  type CopyTable,
  KEY_TABLES,
  SQL_TABLE_GENERATIONS,
} from "./copy-tables.js";

/** Where a Postgres side of a copy is: a connection string and a schema. */
export interface PostgresCopyLocation {
  readonly connectionString: string;
  /** The schema of the store. Default "public" (as the CLI's `?schema=` parameter). */
  readonly schema?: string;
}

const ARRAY_TYPE = { int: "bigint[]", text: "text[]", json: "jsonb[]", blob: "bytea[]" } as const;

/**
 * Splits a `postgres://` URL into the connection string pg is given and the
 * schema its `schema` query parameter names (default public); the parameter
 * is removed, since the server would refuse it as a setting.
 */
export function parsePostgresUrl(url: string): PostgresCopyLocation {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch (e) {
    throw new MnemeError("INVALID_REQUEST", "store copy: not a postgres:// URL", { cause: e });
  }
  const schema = parsed.searchParams.get("schema") ?? "public";
  parsed.searchParams.delete("schema");
  return { connectionString: parsed.toString(), schema: validateSchemaName(schema) };
}

/** A row of the events table as readChain selects it. */
interface ChainRowText {
  position: string;
  hash: string | null;
  event_uuid: string;
  tenant_uuid: string;
  domain: string;
  name: string;
  aggregate_uuid: string;
  version: number;
  command_uuid: string | null;
  created_at: string;
  event_version: number;
  req_ctx: string;
  payload: string;
}

/**
 * A Postgres schema as one side of a copy. Reads run on one session in a
 * REPEATABLE READ READ ONLY transaction (one snapshot for every table) through
 * server-side cursors; text keys are ordered COLLATE "C" (code point order,
 * as SQLite's). JSON is read as jsonb's text (a space after each colon and
 * comma); the SQLite side compacts it when it writes. Writes are one INSERT ... SELECT FROM unnest(arrays) per page.
 */
export class PostgresCopyEndpoint implements CopyEndpoint {
  readonly description: string;
  readonly #schema: string;
  readonly #pool: pg.Pool;
  #reader: pg.PoolClient | undefined;
  #cursors = 0;

  constructor(location: PostgresCopyLocation) {
    this.#schema = validateSchemaName(location.schema ?? "public");
    const { Pool } = requireDriver<typeof pg>(PG);
    this.#pool = new Pool({ connectionString: location.connectionString, max: 3 });
    // An idle client that loses its connection emits 'error' on the pool; without a listener that would end the process.
    this.#pool.on("error", () => undefined);
    const u = new URL(location.connectionString);
    this.description = `postgres ${u.host}${u.pathname} schema ${this.#schema}`;
  }

  #table(name: string): string {
    return `${quoteIdent(this.#schema)}.${quoteIdent(name)}`;
  }

  async #query<R extends pg.QueryResultRow>(text: string, values: unknown[] = [], client?: pg.PoolClient): Promise<pg.QueryResult<R>> {
    try {
      return await (client ?? this.#reader ?? this.#pool).query<R>(text, values);
    } catch (e) {
      throw mapPgError(e, `store copy: ${this.description}`);
    }
  }

  async beginSnapshot(): Promise<void> {
    this.#reader = await this.#pool.connect();
    await this.#query("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY");
  }

  async hasTable(name: string): Promise<boolean> {
    const res = await this.#query<{ t: string | null }>("SELECT to_regclass($1)::text AS t", [this.#table(name)]);
    return res.rows[0]?.t != null;
  }

  async storeFormat(): Promise<StoreFormatRecord | undefined> {
    const table = (await this.hasTable(FORMAT_RECORD_TABLE)) ? FORMAT_RECORD_TABLE : "mneme_store_format";
    if (!(await this.hasTable(table))) return undefined;
    const res = await this.#query<{ format: number; lowest_writer_format: number; upgraded_by: string; upgraded_at: string }>(
      `SELECT format, lowest_writer_format, upgraded_by, upgraded_at::text AS upgraded_at FROM ${this.#table(table)} WHERE id = 1`,
    );
    const r = res.rows[0];
    return r === undefined ? undefined : storeFormatRecord(r.format, r.lowest_writer_format, r.upgraded_by, r.upgraded_at);
  }

  async count(table: CopyTable): Promise<number> {
    if (!(await this.hasTable(this.#name(table)))) return 0;
    const res = await this.#query<{ n: string }>(`SELECT count(*)::text AS n FROM ${this.#table(this.#name(table))}`);
    return Number(res.rows[0]?.n ?? 0);
  }

  /** The format record's table is named mneme_store_format_record in Postgres (store_format in SQLite, behind the prefix). */
  #name(table: CopyTable): string {
    return table.name === "store_format" ? FORMAT_RECORD_TABLE : table.name;
  }

  async *rows(table: CopyTable, pageSize: number): AsyncIterable<CopyRow[]> {
    if (!(await this.hasTable(this.#name(table)))) return;
    const reader = this.#reader ?? (await this.#pool.connect());
    const own = this.#reader === undefined;
    const cursor = `mneme_copy_${++this.#cursors}`;
    const cols = table.columns.map((c) => selectExpr(c)).join(", ");
    const order = table.key.map((i) => orderExpr(table.columns[i])).join(", ");
    let finished = false;
    try {
      if (own) await this.#query("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", [], reader);
      await this.#query(
        `DECLARE ${cursor} NO SCROLL CURSOR FOR SELECT ${cols} FROM ${this.#table(this.#name(table))} AS src ORDER BY ${order}`,
        [],
        reader,
      );
      for (;;) {
        let res: pg.QueryResult<CopyRow>;
        try {
          res = await reader.query<CopyRow>({ text: `FETCH ${pageSize} FROM ${cursor}`, rowMode: "array" });
        } catch (e) {
          throw mapPgError(e, `store copy: reading ${table.name} of ${this.description}`);
        }
        if (res.rows.length === 0) break;
        yield res.rows;
        if (res.rows.length < pageSize) break;
      }
      await this.#query(`CLOSE ${cursor}`, [], reader);
      if (own) await this.#query("COMMIT", [], reader);
      finished = true;
    } finally {
      // A reader left early (an error, or the consumer stopped): its transaction must not go back to the pool open.
      if (own && !finished) await reader.query("ROLLBACK").catch(() => undefined);
      if (own) reader.release();
    }
  }

  async *readChain(opts: { afterPosition?: number; batchSize?: number } = {}): AsyncIterable<ChainRow[]> {
    if (!(await this.hasTable("events"))) return;
    const batchSize = opts.batchSize ?? 1000;
    let after = String(opts.afterPosition ?? 0);
    for (;;) {
      const res = await this.#query<ChainRowText>(
        `SELECT e.position::text, e.hash, e.event_uuid, e.tenant_uuid, e.domain, e.name, e.aggregate_uuid, e.version,
                e.command_uuid, e.created_at::text, e.event_version, e.req_ctx::text, e.payload::text
           FROM ${this.#table("events")} e WHERE e.position > $1::bigint ORDER BY e.position LIMIT $2`,
        [after, batchSize],
      );
      if (res.rows.length === 0) return;
      after = res.rows[res.rows.length - 1]!.position;
      yield res.rows.map((r) => ({
        position: Number(r.position),
        hash: r.hash,
        eventUuid: r.event_uuid,
        tenantUuid: r.tenant_uuid,
        domain: r.domain,
        name: r.name,
        aggregateUuid: r.aggregate_uuid,
        version: r.version,
        commandUuid: r.command_uuid,
        createdAt: r.created_at,
        eventVersion: r.event_version,
        reqCtx: r.req_ctx,
        payload: r.payload,
      }));
      if (res.rows.length < batchSize) return;
    }
  }

  async archivedRanges(): Promise<ArchivedRange[]> {
    if (!(await this.hasTable("event_archives"))) return [];
    const res = await this.#query<{ f: string; t: string; d: string; m: string; n: string; hp: string; hh: string }>(
      `SELECT from_position::text AS f, to_position::text AS t, directory AS d, manifest_sha256 AS m, events::text AS n,
              head_position::text AS hp, head_hash AS hh FROM ${this.#table("event_archives")} AS a ORDER BY a.to_position`,
    );
    return res.rows.map((r) => ({
      fromPosition: Number(r.f),
      toPosition: Number(r.t),
      directory: r.d,
      manifestSha256: r.m,
      events: Number(r.n),
      chainHead: { position: Number(r.hp), hash: r.hh },
    }));
  }

  async sqlTableReadmodels(): Promise<string[]> {
    if (!(await this.hasTable(SQL_TABLE_GENERATIONS))) return [];
    const res = await this.#query<{ readmodel: string }>(`SELECT readmodel FROM ${this.#table(SQL_TABLE_GENERATIONS)}`);
    return res.rows.map((r) => r.readmodel);
  }

  async createTables(): Promise<void> {
    await createStoreTables(createPostgresBackends({ pool: this.#pool, schema: this.#schema, pollIntervalMs: 0 }));
    await this.#query(
      `CREATE TABLE IF NOT EXISTS ${this.#table(COPY_MARKER_TABLE)} (id smallint PRIMARY KEY CHECK (id = 1), source text NOT NULL, finished_at bigint);
       CREATE TABLE IF NOT EXISTS ${this.#table(COPY_PROGRESS_TABLE)} (
         table_name text PRIMARY KEY, source_rows bigint NOT NULL, written bigint NOT NULL, last_key text NOT NULL)`,
    );
  }

  async readProgress(): Promise<Map<string, CopyTableProgress>> {
    if (!(await this.hasTable(COPY_PROGRESS_TABLE))) return new Map();
    // pg gives bigint columns as strings; progressByTable makes numbers of them.
    const res = await this.#query<ProgressRow>(`SELECT ${PROGRESS_COLUMNS} FROM ${this.#table(COPY_PROGRESS_TABLE)}`);
    return progressByTable(res.rows);
  }

  async readMarker(): Promise<CopyMarker | undefined> {
    if (!(await this.hasTable(COPY_MARKER_TABLE))) return undefined;
    const res = await this.#query<{ source: string; finished_at: string | null }>(
      `SELECT source, finished_at::text AS finished_at FROM ${this.#table(COPY_MARKER_TABLE)} WHERE id = 1`,
    );
    const r = res.rows[0];
    return r === undefined ? undefined : { source: r.source, finishedAt: r.finished_at === null ? null : Number(r.finished_at) };
  }

  async writeMarker(marker: CopyMarker): Promise<void> {
    await this.#query(
      `INSERT INTO ${this.#table(COPY_MARKER_TABLE)} (id, source, finished_at) VALUES (1, $1, $2)
       ON CONFLICT (id) DO UPDATE SET source = EXCLUDED.source, finished_at = EXCLUDED.finished_at`,
      [marker.source, marker.finishedAt],
    );
  }

  async insert(table: CopyTable, rows: readonly CopyRow[], progress: { sourceRows: number; lastKey: string }): Promise<number> {
    const names = table.columns.map((c) => quoteIdent(c.pgName ?? c.name));
    const arrays = table.columns.map((_, i) => rows.map((r) => r[i] ?? null));
    const unnest = table.columns.map((c, i) => `$${i + 1}::${ARRAY_TYPE[c.kind]}`).join(", ");
    const keys = this.#table(KEY_TABLES.keys);
    const forgotten = this.#table(KEY_TABLES.forgotten);
    // A key whose id the target marks forgotten is not written; a forgotten mark deletes the key it names.
    const unless = table.name === KEY_TABLES.keys ? ` WHERE NOT EXISTS (SELECT 1 FROM ${forgotten} f WHERE f.key_id = r.key_id)` : "";
    return this.#inTransaction(async (client) => {
      // OVERRIDING SYSTEM VALUE: the log ids are an identity column GENERATED ALWAYS, and the copy keeps them.
      const inserted = await this.#query(
        `INSERT INTO ${this.#table(table.name)} (${names.join(", ")}) OVERRIDING SYSTEM VALUE
         SELECT * FROM unnest(${unnest}) AS r(${names.join(", ")})${unless}`,
        arrays,
        client,
      );
      const written = inserted.rowCount ?? 0;
      await this.#advance(client, table.name, progress.sourceRows, written, progress.lastKey);
      if (table.name === KEY_TABLES.forgotten) {
        const keyIds = arrays[table.columns.findIndex((c) => c.name === "key_id")];
        const dropped = await this.#query(`DELETE FROM ${keys} WHERE key_id = ANY($1::text[])`, [keyIds], client);
        if ((dropped.rowCount ?? 0) > 0) await this.#lowerWritten(client, KEY_TABLES.keys, dropped.rowCount ?? 0);
      }
      return written;
    });
  }

  async dropForgottenKeys(keyIds: readonly string[]): Promise<number> {
    return this.#inTransaction(async (client) => {
      const res = await this.#query(
        `DELETE FROM ${this.#table(KEY_TABLES.keys)} WHERE key_id = ANY($1::text[])
           OR key_id IN (SELECT key_id FROM ${this.#table(KEY_TABLES.forgotten)})`,
        [keyIds],
        client,
      );
      const n = res.rowCount ?? 0;
      if (n > 0) await this.#lowerWritten(client, KEY_TABLES.keys, n);
      return n;
    });
  }

  async #inTransaction<T>(work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
    let client: pg.PoolClient;
    try {
      client = await this.#pool.connect();
    } catch (e) {
      throw mapPgError(e, `store copy: ${this.description}`);
    }
    let done = false;
    try {
      await this.#query("BEGIN", [], client);
      const out = await work(client);
      await this.#query("COMMIT", [], client);
      done = true;
      return out;
    } finally {
      if (!done) await client.query("ROLLBACK").catch(() => undefined);
      client.release();
    }
  }

  async #advance(client: pg.PoolClient, table: string, sourceRows: number, written: number, lastKey: string): Promise<void> {
    const progress = this.#table(COPY_PROGRESS_TABLE);
    await this.#query(
      `INSERT INTO ${progress} AS p (table_name, source_rows, written, last_key) VALUES ($1, $2, $3, $4)
       ON CONFLICT (table_name) DO UPDATE SET source_rows = EXCLUDED.source_rows, written = p.written + EXCLUDED.written, last_key = EXCLUDED.last_key`,
      [table, sourceRows, written, lastKey],
      client,
    );
  }

  async #lowerWritten(client: pg.PoolClient, table: string, by: number): Promise<void> {
    await this.#query(`UPDATE ${this.#table(COPY_PROGRESS_TABLE)} SET written = written - $1 WHERE table_name = $2`, [by, table], client);
  }

  async writeStoreFormat(record: StoreFormatRecord): Promise<void> {
    await this.#query(
      `UPDATE ${this.#table(FORMAT_RECORD_TABLE)} SET format = $1, lowest_writer_format = $2, upgraded_by = $3, upgraded_at = $4 WHERE id = 1`,
      [record.format, record.lowestWriterFormat, record.upgradedBy, record.upgradedAt],
    );
  }

  async afterRows(): Promise<void> {
    // The position sequence is kept at the head for append functions of earlier releases, and the log ids continue after the copied ones.
    await this.#query(
      `SELECT setval('${quoteIdent(this.#schema)}.events_position_seq', max(position)) FROM ${this.#table("events")} HAVING max(position) IS NOT NULL`,
    );
    await this.#query(`SELECT setval(pg_get_serial_sequence($1, 'id'), max(id)) FROM ${this.#table("logs")} HAVING max(id) IS NOT NULL`, [
      this.#table("logs"),
    ]);
  }

  async close(): Promise<void> {
    const reader = this.#reader;
    this.#reader = undefined;
    if (reader !== undefined) {
      await reader.query("ROLLBACK").catch(() => undefined);
      reader.release();
    }
    await this.#pool.end();
  }
}

function selectExpr(c: CopyColumn): string {
  const name = quoteIdent(c.pgName ?? c.name);
  return c.kind === "int" || c.kind === "json" ? `${name}::text` : name;
}

function orderExpr(c: CopyColumn | undefined): string {
  if (c === undefined) throw new MnemeError("INVALID_STATE", "store copy: a key column is missing");
  // Qualified: a bare name in ORDER BY would mean the output column, which is the value cast to text.
  const name = `src.${quoteIdent(c.pgName ?? c.name)}`;
  return c.kind === "text" ? `${name} COLLATE "C"` : name;
}
