import { existsSync } from "node:fs";
import { MnemeError } from "../model/errors.js";
import { storeFormatRecord, type StoreFormatRecord } from "../store/store-format.js";
import { createSqliteBackends } from "../sqlite/sqlite-backends.js";
import { SqliteDatabase, validateTablePrefix } from "../sqlite/sqlite-database.js";
import type { SqliteDriverName, SqliteEngineDriver } from "../sqlite/sqlite-driver.js";
import { SqliteEventRepository } from "../sqlite/sqlite-event-repository.js";
import type { ArchivedRange } from "../event-archive/archive-index.js";
import type { ChainRow } from "../store/event-chain.js";
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
  type ColumnKind,
  COPY_MARKER_TABLE,
  COPY_PROGRESS_TABLE,
  type CopyRow,
  type CopyTable,
  KEY_TABLES,
  SQL_TABLE_GENERATIONS,
  STORE_FORMAT_TABLE,
} from "./copy-tables.js";

/** Where a SQLite side of a copy is: its file and table prefix. */
export interface SqliteCopyLocation {
  readonly filename: string;
  /** Default "mneme_", as createSqliteBackends. */
  readonly tablePrefix?: string;
  /** The SQLite driver that opens the file; default as createSqliteBackends. */
  readonly driver?: SqliteDriverName;
}

type Value = string | number | bigint | Uint8Array | null;

/**
 * A SQLite file as one side of a copy. Reads run in one read transaction
 * (a WAL snapshot: appends by a running app after it began are not seen);
 * integers are read as bigint, so a 64-bit value crosses exactly. Writes are
 * a prepared INSERT run for a page of rows inside one write transaction.
 */
export class SqliteCopyEndpoint implements CopyEndpoint {
  readonly description: string;
  readonly #prefix: string;
  readonly #connection: SqliteDatabase;
  readonly #db: SqliteEngineDriver;

  private constructor(location: SqliteCopyLocation, connection: SqliteDatabase) {
    this.#prefix = validateTablePrefix(location.tablePrefix);
    this.#connection = connection;
    this.#db = connection.driver;
    this.description = `sqlite file ${location.filename}${this.#prefix === "mneme_" ? "" : ` (table prefix ${this.#prefix})`}`;
  }

  /** Opens an existing file to read (NOT_FOUND when there is none). */
  static source(location: SqliteCopyLocation): SqliteCopyEndpoint {
    if (!existsSync(location.filename))
      throw new MnemeError("NOT_FOUND", `store copy: the source file ${location.filename} does not exist`);
    return SqliteCopyEndpoint.target(location);
  }

  /** Opens (creating) a file to write. */
  static target(location: SqliteCopyLocation): SqliteCopyEndpoint {
    validateTablePrefix(location.tablePrefix);
    return new SqliteCopyEndpoint(
      location,
      SqliteDatabase.open(location.filename, location.driver === undefined ? {} : { driver: location.driver }),
    );
  }

  #table(name: string): string {
    return `"${this.#prefix}${name}"`;
  }

  async beginSnapshot(): Promise<void> {
    this.#db.exec("BEGIN");
    // The snapshot starts at the first read, not at BEGIN.
    this.#db.prepare("SELECT count(*) FROM sqlite_master").get();
  }

  async hasTable(name: string): Promise<boolean> {
    return this.#db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?").get(`${this.#prefix}${name}`) !== undefined;
  }

  async storeFormat(): Promise<StoreFormatRecord | undefined> {
    if (!(await this.hasTable(STORE_FORMAT_TABLE.name))) return undefined;
    const r = this.#db
      .prepare(`SELECT format, lowest_writer_format, upgraded_by, upgraded_at FROM ${this.#table("store_format")} WHERE id = 1`)
      .get() as { format: number; lowest_writer_format: number; upgraded_by: string; upgraded_at: number } | undefined;
    return r === undefined ? undefined : storeFormatRecord(r.format, r.lowest_writer_format, r.upgraded_by, r.upgraded_at);
  }

  async count(table: CopyTable): Promise<number> {
    if (!(await this.hasTable(table.name))) return 0;
    return (this.#db.prepare(`SELECT count(*) AS n FROM ${this.#table(table.name)}`).get() as { n: number }).n;
  }

  async *rows(table: CopyTable, pageSize: number): AsyncIterable<CopyRow[]> {
    if (!(await this.hasTable(table.name))) return;
    const cols = table.columns.map((c) => `"${c.name}"`).join(", ");
    const order = table.key.map((i) => `"${table.columns[i]?.name ?? ""}"`).join(", ");
    const stmt = this.#db
      .prepare(`SELECT ${cols} FROM ${this.#table(table.name)} ORDER BY ${order}`)
      .raw(true)
      .safeIntegers(true);
    let page: CopyRow[] = [];
    for (const raw of stmt.iterate() as Iterable<Value[]>) {
      page.push(raw.map((v) => (typeof v === "bigint" || typeof v === "number" ? String(v) : v)));
      if (page.length >= pageSize) {
        yield page;
        page = [];
      }
    }
    if (page.length > 0) yield page;
  }

  async *readChain(opts: { afterPosition?: number; batchSize?: number } = {}): AsyncIterable<ChainRow[]> {
    if (!(await this.hasTable("events"))) return;
    const batchSize = opts.batchSize ?? 1000;
    const stmt = this.#db.prepare(
      `SELECT position, hash, event_uuid, tenant_uuid, domain, name, aggregate_uuid, version, command_uuid, created_at, event_version,
              req_ctx, payload FROM ${this.#table("events")} WHERE position > ? ORDER BY position LIMIT ?`,
    );
    stmt.raw(true).safeIntegers(true);
    let after = BigInt(opts.afterPosition ?? 0);
    for (;;) {
      type Raw = [
        bigint,
        string | null,
        string,
        string,
        string,
        string,
        string,
        bigint,
        string | null,
        bigint,
        bigint,
        string,
        string | null,
      ];
      const rows = stmt.all(after, batchSize) as Raw[];
      if (rows.length === 0) return;
      after = rows[rows.length - 1]![0];
      yield rows.map((r) => ({
        position: Number(r[0]),
        hash: r[1],
        eventUuid: r[2],
        tenantUuid: r[3],
        domain: r[4],
        name: r[5],
        aggregateUuid: r[6],
        version: Number(r[7]),
        commandUuid: r[8],
        createdAt: String(r[9]),
        eventVersion: Number(r[10]),
        reqCtx: r[11],
        payload: r[12],
      }));
      if (rows.length < batchSize) return;
    }
  }

  async archivedRanges(): Promise<ArchivedRange[]> {
    if (!(await this.hasTable("event_archives"))) return [];
    const rows = this.#db
      .prepare(
        `SELECT from_position, to_position, directory, manifest_sha256, events, head_position, head_hash FROM ${this.#table("event_archives")} ORDER BY to_position`,
      )
      .raw(true)
      .all() as [number, number, string, string, number, number, string][];
    return rows.map((r) => ({
      fromPosition: Number(r[0]),
      toPosition: Number(r[1]),
      directory: r[2],
      manifestSha256: r[3],
      events: Number(r[4]),
      chainHead: { position: Number(r[5]), hash: r[6] },
    }));
  }

  async sqlTableReadmodels(): Promise<string[]> {
    if (!(await this.hasTable(SQL_TABLE_GENERATIONS))) return [];
    const rows = this.#db
      .prepare(`SELECT readmodel FROM ${this.#table(SQL_TABLE_GENERATIONS)}`)
      .raw(true)
      .all() as [string][];
    return rows.map((r) => r[0]);
  }

  async createTables(): Promise<void> {
    await createStoreTables(createSqliteBackends({ database: this.#connection.driver, tablePrefix: this.#prefix, pollIntervalMs: 0 }));
    this.#db.exec(
      `CREATE TABLE IF NOT EXISTS ${this.#table(COPY_MARKER_TABLE)} (id INTEGER PRIMARY KEY CHECK (id = 1), source TEXT NOT NULL, finished_at INTEGER);
       CREATE TABLE IF NOT EXISTS ${this.#table(COPY_PROGRESS_TABLE)} (
         table_name TEXT PRIMARY KEY, source_rows INTEGER NOT NULL, written INTEGER NOT NULL, last_key TEXT NOT NULL)`,
    );
  }

  async readProgress(): Promise<Map<string, CopyTableProgress>> {
    if (!(await this.hasTable(COPY_PROGRESS_TABLE))) return new Map();
    return progressByTable(this.#db.prepare(`SELECT ${PROGRESS_COLUMNS} FROM ${this.#table(COPY_PROGRESS_TABLE)}`).all() as ProgressRow[]);
  }

  async readMarker(): Promise<CopyMarker | undefined> {
    if (!(await this.hasTable(COPY_MARKER_TABLE))) return undefined;
    const r = this.#db.prepare(`SELECT source, finished_at FROM ${this.#table(COPY_MARKER_TABLE)} WHERE id = 1`).get() as
      { source: string; finished_at: number | null } | undefined;
    return r === undefined ? undefined : { source: r.source, finishedAt: r.finished_at };
  }

  async writeMarker(marker: CopyMarker): Promise<void> {
    this.#db
      .prepare(
        `INSERT INTO ${this.#table(COPY_MARKER_TABLE)} (id, source, finished_at) VALUES (1, ?, ?)
         ON CONFLICT (id) DO UPDATE SET source = excluded.source, finished_at = excluded.finished_at`,
      )
      .run(marker.source, marker.finishedAt);
  }

  async insert(table: CopyTable, rows: readonly CopyRow[], progress: { sourceRows: number; lastKey: string }): Promise<number> {
    const cols = table.columns.map((c) => `"${c.name}"`).join(", ");
    const values = table.columns.map(() => "?").join(", ");
    const keyId = table.columns.findIndex((c) => c.name === "key_id");
    const forgotten = this.#table(KEY_TABLES.forgotten);
    const keys = this.#table(KEY_TABLES.keys);
    // A key whose id the target marks forgotten is not written; a forgotten mark deletes the key it names.
    const stmt =
      table.name === KEY_TABLES.keys
        ? this.#db.prepare(`INSERT INTO ${keys} (${cols}) SELECT ${values} WHERE NOT EXISTS (SELECT 1 FROM ${forgotten} WHERE key_id = ?)`)
        : this.#db.prepare(`INSERT INTO ${this.#table(table.name)} (${cols}) VALUES (${values})`);
    const dropKey = table.name === KEY_TABLES.forgotten ? this.#db.prepare(`DELETE FROM ${keys} WHERE key_id = ?`) : undefined;
    const kinds = table.columns.map((c) => c.kind);
    return this.#connection.writeTransaction((): number => {
      let written = 0;
      let dropped = 0;
      for (const row of rows) {
        const params = row.map((v, i) => (typeof v === "string" ? sqliteValue(kinds[i], v) : v));
        if (table.name === KEY_TABLES.keys) params.push(row[keyId] ?? null);
        written += stmt.run(...params).changes;
        if (dropKey !== undefined) dropped += dropKey.run(row[keyId] ?? null).changes;
      }
      this.#advance(table.name, progress.sourceRows, written, progress.lastKey);
      if (dropped > 0) this.#lowerWritten(KEY_TABLES.keys, dropped);
      return written;
    });
  }

  async dropForgottenKeys(keyIds: readonly string[]): Promise<number> {
    const keys = this.#table(KEY_TABLES.keys);
    const byId = this.#db.prepare(`DELETE FROM ${keys} WHERE key_id = ?`);
    const marked = this.#db.prepare(`DELETE FROM ${keys} WHERE key_id IN (SELECT key_id FROM ${this.#table(KEY_TABLES.forgotten)})`);
    return this.#connection.writeTransaction((): number => {
      let n = marked.run().changes;
      for (const id of keyIds) n += byId.run(id).changes;
      if (n > 0) this.#lowerWritten(KEY_TABLES.keys, n);
      return n;
    });
  }

  #advance(table: string, sourceRows: number, written: number, lastKey: string): void {
    const progress = this.#table(COPY_PROGRESS_TABLE);
    this.#db
      .prepare(
        `INSERT INTO ${progress} (table_name, source_rows, written, last_key) VALUES (?, ?, ?, ?)
         ON CONFLICT (table_name) DO UPDATE SET source_rows = excluded.source_rows, written = written + excluded.written, last_key = excluded.last_key`,
      )
      .run(table, sourceRows, written, lastKey);
  }

  #lowerWritten(table: string, by: number): void {
    this.#db.prepare(`UPDATE ${this.#table(COPY_PROGRESS_TABLE)} SET written = written - ? WHERE table_name = ?`).run(by, table);
  }

  async writeStoreFormat(record: StoreFormatRecord): Promise<void> {
    this.#db
      .prepare(
        `UPDATE ${this.#table("store_format")} SET format = ?, lowest_writer_format = ?, upgraded_by = ?, upgraded_at = ? WHERE id = 1`,
      )
      .run(record.format, record.lowestWriterFormat, record.upgradedBy, record.upgradedAt);
  }

  async afterRows(): Promise<void> {
    // AUTOINCREMENT keeps its own high-water mark (sqlite_sequence), raised by every insert with an explicit id.
    // The copied events came without hashes (the chain is over each store's own stored texts): the event
    // repository's init chains them, as it does for a store made before the chain.
    const events = new SqliteEventRepository({ database: this.#connection.driver, tablePrefix: this.#prefix, pollIntervalMs: 0 });
    try {
      await events.init();
    } finally {
      await events.close();
    }
  }

  async close(): Promise<void> {
    if (this.#db.inTransaction) this.#db.exec("ROLLBACK");
    this.#connection.close();
  }
}

/** A value as SQLite keeps it: integers as 64-bit integers, JSON compact as mneme writes it (jsonb's text has spaces). */
function sqliteValue(kind: ColumnKind | undefined, v: string): string | bigint {
  if (kind === "int") return BigInt(v);
  return kind === "json" ? JSON.stringify(JSON.parse(v)) : v;
}
