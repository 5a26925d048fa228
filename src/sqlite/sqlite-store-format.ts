import { checkStoreFormat, type StoreFormatRecord, storeFormatRecord, upgradedStoreFormat } from "../store/store-format.js";
import type { SqliteDatabase } from "./sqlite-database.js";

/**
 * Creates or upgrades a store's tables inside one write transaction
 * (BEGIN IMMEDIATE: one process at a time on the file) that first checks the
 * file's store format record for the table prefix and, after `createTables`,
 * raises it to this release's: a file whose record admits no writer of this
 * format is refused (STORE_TOO_NEW) before any DDL runs, and processes opening
 * the file at once upgrade it once. Returns the record as committed.
 */
export function withStoreFormat(db: SqliteDatabase, prefix: string, createTables: () => void): StoreFormatRecord {
  const table = `${prefix}store_format`;
  return db.writeTransaction(() => {
    const stored = readStoreFormat(db, table);
    checkStoreFormat(stored, `sqlite file ${db.filename}${prefix === "" ? "" : ` (table prefix ${prefix})`}`);
    createTables();
    const record = upgradedStoreFormat(stored, Date.now());
    if (record === undefined) return stored as StoreFormatRecord;
    db.exec(`CREATE TABLE IF NOT EXISTS ${table} (
      id INTEGER PRIMARY KEY CHECK (id = 1),
      format INTEGER NOT NULL,
      lowest_writer_format INTEGER NOT NULL,
      upgraded_by TEXT NOT NULL,
      upgraded_at INTEGER NOT NULL
    )`);
    db.statement(
      `INSERT INTO ${table} (id, format, lowest_writer_format, upgraded_by, upgraded_at) VALUES (1, ?, ?, ?, ?)
       ON CONFLICT (id) DO UPDATE SET format = excluded.format, lowest_writer_format = excluded.lowest_writer_format,
         upgraded_by = excluded.upgraded_by, upgraded_at = excluded.upgraded_at`,
    ).run(record.format, record.lowestWriterFormat, record.upgradedBy, record.upgradedAt);
    return record;
  });
}

function readStoreFormat(db: SqliteDatabase, table: string): StoreFormatRecord | undefined {
  const exists = db.statement("SELECT 1 AS x FROM sqlite_master WHERE type = 'table' AND name = ?").get(table) !== undefined;
  if (!exists) return undefined;
  const r = db.driver.prepare(`SELECT format, lowest_writer_format, upgraded_by, upgraded_at FROM ${table} WHERE id = 1`).get() as
    { format: number; lowest_writer_format: number; upgraded_by: string; upgraded_at: number } | undefined;
  return r === undefined ? undefined : storeFormatRecord(r.format, r.lowest_writer_format, r.upgraded_by, r.upgraded_at);
}
