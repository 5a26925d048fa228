/**
 * The optional capability of a readmodel backend on a SQL database that lets a
 * readmodel keep its data in the application's own tables (SQL-table
 * readmodels): statements run through the backend, so inside the backend's
 * running transaction (a handler's batch) they are part of it and commit with
 * the checkpoint, fenced like document writes, or not at all.
 */

/** The SQL dialect of a backend: which placeholders (`?` or `$1`) and which DDL it speaks. */
export type SqlDialect = "sqlite" | "postgres";

/** Rows of a statement, and how many rows it changed when that is known. */
export interface SqlResult<R = Record<string, unknown>> {
  readonly rows: R[];
  /** Rows changed by a write; undefined when not known (a SQLite write inside a transaction runs at its commit). */
  readonly rowCount: number | undefined;
}

/**
 * Statements in the backend's database, in the current context: inside the
 * backend's running `transaction(fn)` they join it (reads see its earlier
 * writes; a rollback undoes them), outside it each runs on its own and reads
 * see committed rows only.
 */
export interface SqlTableAccess {
  readonly dialect: SqlDialect;
  /** The quoted, qualified name of table `name` of the application (Postgres: in the backend's schema). */
  qualify(name: string): string;
  /** Runs one statement with the dialect's placeholders (`?` on SQLite, `$1` on Postgres). */
  execute<R = Record<string, unknown>>(sql: string, params?: readonly unknown[]): Promise<SqlResult<R>>;
  /**
   * The driver's object the running transaction uses: a `pg` client on
   * Postgres; on SQLite a better-sqlite3-shaped connection (`prepare(sql)`
   * with `run`, `get`, `all`) whose statements join the transaction as
   * `execute` does. Undefined outside a transaction.
   */
  transactionClient(): unknown;
  /** The schema (Postgres) or schema name (`main` on SQLite) that `qualify` puts names in. */
  readonly schema: string;
  /** The table prefix of mneme's own tables of this backend ("" on Postgres, where the schema separates them). */
  readonly tablePrefix: string;
}

/** A readmodel backend with SQL tables. */
export interface SqlTableCapable {
  sqlTables(): SqlTableAccess;
}

/** Whether `backend` offers SQL tables (it has `sqlTables()`). */
export function supportsSqlTables(backend: object): backend is SqlTableCapable {
  return typeof (backend as Partial<SqlTableCapable>).sqlTables === "function";
}

/** A quoted SQL identifier (double quotes, both dialects). */
export function quoteSqlIdentifier(name: string): string {
  return `"${name.replaceAll('"', '""')}"`;
}

/** A quoted SQL string literal (both dialects, with standard strings). */
export function quoteSqlLiteral(value: string): string {
  if (value.includes("\0")) throw new Error("a SQL string literal cannot hold NUL");
  return `'${value.replaceAll("'", "''")}'`;
}
