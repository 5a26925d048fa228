import { assertSqlStatement, quoteSqlIdentifier, type SqlResult, type SqlTableAccess } from "../store/sql-table-access.js";

/** What the access needs of PostgresReadmodelStoreBackend (structurally: no import back up to it). */
export interface PostgresSqlHost {
  exec<R extends object>(text: string, values: unknown[], write: boolean, what: string): Promise<{ rows: R[]; rowCount: number | null }>;
  /** The pg client of the running transaction, or undefined outside one. */
  transactionDriverClient(): unknown;
}

const READ = /^\s*(SELECT|VALUES|TABLE|SHOW|EXPLAIN)\b/i;

/**
 * SQL tables in the schema of a Postgres readmodel backend: inside the
 * backend's transaction statements run on its client (BEGIN ... COMMIT with
 * the checkpoint and the fencing check); outside one on the pool, a write
 * after the running transactions.
 */
export class PostgresSqlTableAccess implements SqlTableAccess {
  readonly dialect = "postgres" as const;
  readonly tablePrefix = "";

  constructor(
    private readonly host: PostgresSqlHost,
    readonly schema: string,
  ) {}

  qualify(name: string): string {
    return `${quoteSqlIdentifier(this.schema)}.${quoteSqlIdentifier(name)}`;
  }

  async execute<R = Record<string, unknown>>(sql: string, params: readonly unknown[] = []): Promise<SqlResult<R>> {
    assertSqlStatement(sql);
    const res = await this.host.exec<R & object>(sql, [...params], !READ.test(sql), "sql statement");
    return { rows: res.rows as R[], rowCount: res.rowCount ?? undefined };
  }

  transactionClient(): unknown {
    return this.host.transactionDriverClient();
  }
}
