import type { ArchivedRange } from "../event-archive/archive-index.js";
import type { ChainRow } from "../store/event-chain.js";
import type { StoreFormatRecord } from "../store/store-format.js";
import type { CopyRow, CopyTable } from "./copy-tables.js";

/** What a target records of a copy under way (see COPY_MARKER_TABLE). */
export interface CopyMarker {
  /** The source, as {@link CopyEndpoint.description} names it. */
  readonly source: string;
  /** When the copy finished (ms since the epoch), or null while it is under way or was interrupted. */
  readonly finishedAt: number | null;
}

/**
 * What a target records of one table's copy, in the transaction of each page
 * it inserts (see COPY_PROGRESS_TABLE), so a resume continues from what the
 * copy verifiably wrote, not from a row count anyone could have changed.
 */
export interface CopyTableProgress {
  /** Rows of the source, in key order, that the copy has gone past (inserted, or left out as forgotten). */
  readonly sourceRows: number;
  /** Rows the copy inserted into the target's table. */
  readonly written: number;
  /** The key (JSON array of its columns) of the last source row gone past. */
  readonly lastKey: string;
}

/** A progress table's row as either side reads it (bigints as text on Postgres). */
export interface ProgressRow {
  readonly table_name: string;
  readonly source_rows: number | string;
  readonly written: number | string;
  readonly last_key: string;
}

/** The progress records of a target, by table. */
export function progressByTable(rows: readonly ProgressRow[]): Map<string, CopyTableProgress> {
  return new Map(rows.map((r) => [r.table_name, { sourceRows: Number(r.source_rows), written: Number(r.written), lastKey: r.last_key }]));
}

/** The progress table's columns, as both sides select them. */
export const PROGRESS_COLUMNS = "table_name, source_rows, written, last_key";

/**
 * One side of a copy, a SQLite file or a Postgres schema: reads of a
 * consistent snapshot as a source, bulk writes as a target. Every row crosses
 * as a {@link CopyRow}, in the table's key order.
 */
export interface CopyEndpoint {
  /** The store in words, without credentials (`sqlite file app.db`, `postgres 127.0.0.1:5432/app schema public`). */
  readonly description: string;
  /** Starts the read snapshot every later read of this side sees (Postgres REPEATABLE READ, SQLite a read transaction). */
  beginSnapshot(): Promise<void>;
  /** True when the table exists (a store made by an earlier release may lack one). */
  hasTable(name: string): Promise<boolean>;
  /** The store format record, undefined when the store keeps none. */
  storeFormat(): Promise<StoreFormatRecord | undefined>;
  /** The rows of a table (0 when it does not exist). */
  count(table: CopyTable): Promise<number>;
  /** The rows of a table in key order, a page at a time. */
  rows(table: CopyTable, pageSize: number): AsyncIterable<CopyRow[]>;
  /** The events with their stored hashes in position order, a page at a time, in the read snapshot (see src/store/event-chain.ts). */
  readChain(opts?: { afterPosition?: number; batchSize?: number }): AsyncIterable<ChainRow[]>;
  /** The archived ranges of events (`mneme store archive`), in position order, in the read snapshot; empty when none. */
  archivedRanges(): Promise<ArchivedRange[]>;
  /** The readmodels that keep SQL tables (their names in the SQL-table generations table). */
  sqlTableReadmodels(): Promise<string[]>;
  /** Creates every store's tables (the stores' own init), the copy marker table and the progress table. */
  createTables(): Promise<void>;
  readMarker(): Promise<CopyMarker | undefined>;
  writeMarker(marker: CopyMarker): Promise<void>;
  /** Every table's progress record (empty when none was written). */
  readProgress(): Promise<Map<string, CopyTableProgress>>;
  /**
   * Appends rows and the table's progress record in one transaction, and
   * resolves how many rows it inserted. A key whose id the target holds as
   * forgotten is not inserted, and a forgotten-key mark inserted deletes the
   * key it names: a forgotten subject's key never comes back through a copy.
   */
  insert(table: CopyTable, rows: readonly CopyRow[], progress: { readonly sourceRows: number; readonly lastKey: string }): Promise<number>;
  /**
   * Deletes the target's keys whose ids are among `keyIds` or marked
   * forgotten in the target, lowering the keys' progress record by as many,
   * in one transaction; resolves how many it deleted.
   */
  dropForgottenKeys(keyIds: readonly string[]): Promise<number>;
  /** Writes the store format record over the one the target's init wrote. */
  writeStoreFormat(record: StoreFormatRecord): Promise<void>;
  /** After the rows: what the target keeps beside them follows them (Postgres: the position and log id sequences). */
  afterRows(): Promise<void>;
  close(): Promise<void>;
}

/** The stores of one backend, as createSqliteBackends / createPostgresBackends make them. */
interface BackendStores {
  readonly eventRepository: { init(): Promise<void> };
  readonly commandStore: { init(): Promise<void> };
  readonly snapshotStore: { init(): Promise<void> };
  readonly keyStore: { init(): Promise<void> };
  readonly readmodelStoreBackend: { init(): Promise<void> };
  readonly logStore: { init(): Promise<void> };
  readonly dataStore: { init(): Promise<void> };
  readonly cacheStore: { init(): Promise<void> };
  close(): Promise<void>;
}

/** Creates every table of a store (each store's own init(), so the DDL and format record are the release's), then closes the stores. */
export async function createStoreTables(stores: BackendStores): Promise<void> {
  try {
    for (const s of [
      stores.eventRepository,
      stores.commandStore,
      stores.snapshotStore,
      stores.keyStore,
      stores.readmodelStoreBackend,
      stores.dataStore,
      stores.cacheStore,
    ]) {
      await s.init();
    }
    await stores.logStore.init();
  } finally {
    await stores.close();
  }
}
