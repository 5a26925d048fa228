import { MnemeError } from "../model/errors.js";
import { assertSqlStatement } from "../store/sql-statement-check.js";
import { quoteSqlIdentifier, type SqlResult, type SqlTableAccess } from "../store/sql-table-access.js";
import type { PgQuery } from "./postgres-pool.js";

/** What the access needs of PostgresReadmodelStoreBackend (structurally: no import back up to it). */
export interface PostgresSqlHost {
  exec<R extends object>(
    query: string | PgQuery,
    values: unknown[],
    write: boolean,
    what: string,
  ): Promise<{ rows: R[]; rowCount: number | null }>;
  /** The pg client of the running transaction, or undefined outside one. */
  transactionDriverClient(): unknown;
}

const READ = /^\s*(SELECT|VALUES|TABLE|SHOW|EXPLAIN)\b/i;

/** The part of a pg client the guard uses (`getTransactionStatus` since pg 8.11). */
interface RawPgClient {
  query(config: unknown, values?: unknown, callback?: unknown): unknown;
  getTransactionStatus?(): string | null;
}

/**
 * Throws INVALID_REQUEST when the session of `client` is no longer in a
 * transaction block (pg's ReadyForQuery status `I`): a statement ended the
 * transaction mneme opened. `T` (open) and `E` (failed, rolled back at its end) keep it.
 */
export function assertPgTransactionOpen(client: unknown): void {
  const raw = client as RawPgClient;
  const status = typeof raw.getTransactionStatus === "function" ? raw.getTransactionStatus() : undefined;
  if (status === "I")
    throw new MnemeError(
      "INVALID_REQUEST",
      "sql: a statement ended mneme's transaction: the handler's batch runs in mneme's transaction, which commits with the checkpoint",
    );
}

/**
 * A handler's statement as it is sent: checked by the lexer, and in pg's
 * extended protocol, whose Parse takes exactly one statement, so the server
 * itself refuses `SELECT 1; COMMIT` whatever the lexer read.
 */
function oneStatement(sql: string, values: readonly unknown[]): PgQuery {
  assertSqlStatement(sql, "postgres");
  return { text: sql, values: [...values], queryMode: "extended" };
}

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
    const query = oneStatement(sql, params);
    const res = await this.host.exec<R & object>(query, [...params], !READ.test(sql), "sql statement");
    return { rows: res.rows as R[], rowCount: res.rowCount ?? undefined };
  }

  /** The batch's pg client, guarded: see guardedPgClient. */
  transactionClient(): unknown {
    const raw = this.host.transactionDriverClient();
    return raw === undefined ? undefined : guardedPgClient(raw as RawPgClient);
  }
}

/**
 * The batch's pg client as a handler gets it: every `query` passes the
 * statement check and runs as one statement (extended protocol), and must
 * leave the transaction open; everything else is the client's own. A
 * submittable (a cursor, a stream) is checked and passed as it is.
 */
function guardedPgClient(raw: RawPgClient): unknown {
  const query = (config: unknown, values?: unknown, callback?: unknown): unknown => {
    const cb = (typeof values === "function" ? values : typeof callback === "function" ? callback : undefined) as
      ((e: unknown, r?: unknown) => void) | undefined;
    const text = typeof config === "string" ? config : (config as { text?: unknown } | null)?.text;
    const params = Array.isArray(values) ? (values as unknown[]) : undefined;
    let q: unknown;
    try {
      assertPgTransactionOpen(raw);
      if (typeof config === "object" && config !== null && typeof (config as { submit?: unknown }).submit === "function") {
        assertSqlStatement(text as string, "postgres");
        return raw.query(config, values, callback);
      }
      const given = (typeof config === "string" ? { text: config } : config) as { values?: unknown };
      q = { ...given, ...oneStatement(text as string, params ?? (Array.isArray(given.values) ? (given.values as unknown[]) : [])) };
    } catch (e) {
      if (cb === undefined) return Promise.reject(e as Error);
      queueMicrotask(() => cb(e));
      return undefined;
    }
    const done = (raw.query(q) as Promise<unknown>).then((r) => {
      assertPgTransactionOpen(raw);
      return r;
    });
    if (cb === undefined) return done;
    done.then(
      (r) => cb(null, r),
      (e: unknown) => cb(e),
    );
    return undefined;
  };
  return new Proxy(raw as object, {
    get(target, prop) {
      if (prop === "query") return query;
      const v = Reflect.get(target, prop, target) as unknown;
      return typeof v === "function" ? (v as (...a: unknown[]) => unknown).bind(target) : v;
    },
  });
}
