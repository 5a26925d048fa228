/**
 * The few parts of a better-sqlite3 `Database` that mneme uses, typed
 * structurally so a caller can pass their own instance (or a compatible driver)
 * without mneme's types depending on `@types/better-sqlite3`.
 */
export interface SqliteDriverStatement {
  run(...params: unknown[]): { changes: number; lastInsertRowid: number | bigint };
  get(...params: unknown[]): unknown;
  all(...params: unknown[]): unknown[];
  /** Rows as arrays instead of objects (faster to read back). */
  raw(toggle?: boolean): this;
}

/** A better-sqlite3 `Database`, structurally. */
export interface SqliteDriverDatabase {
  /** The file name the database was opened with. */
  readonly name: string;
  readonly open: boolean;
  readonly inTransaction: boolean;
  prepare(sql: string): SqliteDriverStatement;
  exec(sql: string): unknown;
  pragma(source: string, options?: { simple?: boolean }): unknown;
  close(): unknown;
}
