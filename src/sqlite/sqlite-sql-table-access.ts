import { isMnemeError, MnemeError } from "../model/errors.js";
import { assertSqlStatement } from "../store/sql-statement-check.js";
import { quoteSqlIdentifier, type SqlResult, type SqlTableAccess } from "../store/sql-table-access.js";
import type { SqliteDatabase } from "./sqlite-database.js";
import type { SqliteEngineStatement } from "./sqlite-driver.js";
import { toStoreError } from "./sqlite-errors.js";

/** A statement of the application's own tables, kept for a transaction's commit. */
interface Deferred {
  readonly sql: string;
  readonly params: readonly unknown[];
}

/** What the access needs of SqliteReadmodelStoreBackend (structurally: no import back up to it). */
export interface SqliteSqlHost {
  connection(): SqliteDatabase;
  pending(): object | undefined;
  deferStatement(stmt: Deferred): boolean;
  readPending<R>(what: string, query: () => R, isolate?: boolean): R;
  write<R>(what: string, fn: (tx: unknown) => R): Promise<R>;
}

/** The SQLite drivers bind no booleans or undefined (node:sqlite of Node.js 22 and better-sqlite3 refuse them): true/false as 1/0, undefined as NULL. */
function bindable(params: readonly unknown[]): unknown[] {
  return params.map((p) => (p === true ? 1 : p === false ? 0 : p === undefined ? null : p));
}

/** SQLite's opcodes of a program that ends, begins or nests a transaction (BEGIN, COMMIT, END, ROLLBACK, SAVEPOINT, RELEASE). */
const CONTROL_OPCODES = new Set(["AutoCommit", "Savepoint"]);

/** Texts the engine said keep the transaction, per connection (bounded: cleared when full). */
const engineChecked = new WeakMap<SqliteDatabase, Set<string>>();
const ENGINE_CHECKED_MAX = 2_000;

/**
 * A handler's statement, prepared once it passed both checks: the lexer's
 * (one statement, no transaction control however written) and the engine's
 * (assertKeepsTransaction), so nothing a lexer misreads can run.
 * INVALID_REQUEST for either; a statement SQLite cannot prepare throws the driver's error.
 */
export function checkedStatement(db: SqliteDatabase, sql: string, params: readonly unknown[]): SqliteEngineStatement {
  assertSqlStatement(sql, "sqlite");
  const st = db.statement(sql);
  assertKeepsTransaction(db, sql, params);
  return st;
}

/**
 * SQLite's own answer (INVALID_REQUEST when not): the program it compiles
 * for `sql` has no AutoCommit or Savepoint opcode, the ones that begin, end
 * or nest a transaction. Asked once per text and connection.
 */
export function assertKeepsTransaction(db: SqliteDatabase, sql: string, params: readonly unknown[]): void {
  let checked = engineChecked.get(db);
  if (checked?.has(sql) === true) return;
  const ops = db.statement(`EXPLAIN ${sql}`).all(...params) as { opcode: string }[];
  if (ops.some((o) => CONTROL_OPCODES.has(o.opcode)))
    throw new MnemeError("INVALID_REQUEST", "sql: the statement would end or nest the transaction: the handler's batch runs in mneme's");
  if (checked === undefined || checked.size >= ENGINE_CHECKED_MAX) engineChecked.set(db, (checked = new Set()));
  checked.add(sql);
}

/**
 * Runs kept statements in order inside the caller's write transaction or
 * savepoint; a statement after which the transaction is no longer open (what
 * both checks of checkedStatement exist to prevent) is INVALID_REQUEST.
 */
export function runStatements(db: SqliteDatabase, statements: readonly Deferred[]): void {
  const open = db.driver.inTransaction;
  for (const { sql, params } of statements) {
    const st = checkedStatement(db, sql, params);
    if (st.reader) st.all(...params);
    else st.run(...params);
    if (open && !db.driver.inTransaction)
      throw new MnemeError("INVALID_REQUEST", "sql: a statement ended mneme's transaction: the handler's batch runs in mneme's");
  }
}

/**
 * SQL tables in the SQLite file of a readmodel backend. The stores of one file
 * share one connection, so a transaction cannot stay open across a handler's
 * awaits (other stores' writes would fall into it): inside the backend's
 * transaction a write is kept and run at its commit, in the same write
 * transaction as the document writes, the checkpoint and the fencing check;
 * a read inside it sees the kept writes (run in a throw-away savepoint first).
 * Outside a transaction statements run at once (a write after the running
 * transaction, if any).
 */
export class SqliteSqlTableAccess implements SqlTableAccess {
  readonly dialect = "sqlite" as const;
  readonly schema = "main";

  constructor(
    private readonly host: SqliteSqlHost,
    readonly tablePrefix: string,
  ) {}

  /** Quoted, not qualified: SQLite's CREATE INDEX takes no schema on its table (`main` is the file's only schema here). */
  qualify(name: string): string {
    return quoteSqlIdentifier(name);
  }

  async execute<R = Record<string, unknown>>(sql: string, params: readonly unknown[] = []): Promise<SqlResult<R>> {
    if (this.host.pending() !== undefined) return this.executeInTransaction<R>(sql, params);
    const args = bindable(params);
    const st = this.prepare(sql, args);
    if (st.readonly) {
      return { rows: this.host.readPending("sql query", () => st.all(...args)) as R[], rowCount: undefined };
    }
    return this.host.write("sql statement", () => {
      if (st.reader) {
        const rows = st.all(...args) as R[];
        return { rows, rowCount: rows.length };
      }
      return { rows: [], rowCount: st.run(...args).changes };
    });
  }

  /** Inside the backend's transaction (synchronous: what the connection of `transactionClient` runs). */
  executeInTransaction<R>(sql: string, params: readonly unknown[]): SqlResult<R> {
    assertSqlStatement(sql, "sqlite");
    const args = bindable(params);
    let st: SqliteEngineStatement | undefined;
    try {
      st = checkedStatement(this.host.connection(), sql, args);
    } catch (e) {
      if (isMnemeError(e)) throw e;
      // Its table may be created by a statement kept before it: it is prepared again at the commit, which reports any error.
      st = undefined;
    }
    if (st !== undefined && st.readonly) {
      return { rows: this.host.readPending("sql query", () => st.all(...args)) as R[], rowCount: undefined };
    }
    // Rows a write returns (RETURNING) are computed now, in a throw-away savepoint, before it is kept for the commit.
    const rows = st !== undefined && st.reader ? (this.host.readPending("sql statement", () => st.all(...args), true) as R[]) : [];
    if (!this.host.deferStatement({ sql, params: args })) throw new MnemeError("INVALID_STATE", "sql: the transaction has ended");
    return { rows, rowCount: undefined };
  }

  transactionClient(): unknown {
    if (this.host.pending() === undefined) return undefined;
    return new SqliteTransactionConnection(this);
  }

  private prepare(sql: string, args: readonly unknown[]): SqliteEngineStatement {
    try {
      return checkedStatement(this.host.connection(), sql, args);
    } catch (e) {
      if (isMnemeError(e)) throw e;
      throw toStoreError(e, "sql statement");
    }
  }
}

/**
 * The connection a SQLite batch's handlers get (better-sqlite3's shape:
 * `prepare(sql).run/get/all`, whichever driver runs the file): its statements join the batch's transaction.
 * A write's `changes` is not known before the commit (reported as 0).
 */
class SqliteTransactionConnection {
  constructor(private readonly access: SqliteSqlTableAccess) {}

  prepare(sql: string): {
    run(...params: unknown[]): { changes: number; lastInsertRowid: number };
    get(...params: unknown[]): unknown;
    all(...params: unknown[]): unknown[];
  } {
    const access = this.access;
    return {
      run: (...params) => {
        access.executeInTransaction(sql, params);
        return { changes: 0, lastInsertRowid: 0 };
      },
      get: (...params) => access.executeInTransaction(sql, params).rows[0],
      all: (...params) => access.executeInTransaction(sql, params).rows,
    };
  }
}
