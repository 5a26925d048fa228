import type { QueryResult } from "pg";
import { MnemeError } from "../model/errors.js";
import {
  admitsOldWriters,
  checkRollingFrom,
  type LowestWriterChange,
  ROLLING_FROM,
  type RollingFrom,
  type StoreFormatRecord,
} from "../store/store-format.js";
import type { StoreInfo } from "../store/store-info.js";
import { mapPgError } from "./postgres-errors.js";
import {
  type CheckedOutClient,
  checkout,
  describeConnection,
  listenForPoolErrors,
  type PgClientKind,
  type PgPool,
  type PgQuery,
  type PgStatementHook,
  withClient,
} from "./postgres-pool.js";
import { currentStoreFormat, quoteIdent, runSchemaDdl, type SchemaStatements, validateSchemaName } from "./postgres-schema.js";

/** Options every Postgres store takes: the pool (owned by the caller) and the schema. */
export interface PostgresStoreOptions {
  /** The pool the store queries through; the store never ends it. */
  readonly pool: PgPool;
  /** The schema holding the store's tables (an identifier; created by init()). Default "mneme". */
  readonly schema?: string;
  /** Shown in info(); default derived from the pool's options, without the password. */
  readonly connectionInfo?: string;
  /** A testing aid for fault injection, called before every statement (see {@link PgStatementHook}); leave unset in production. */
  readonly onStatement?: PgStatementHook;
  /**
   * Enter compatibility mode for a rolling deploy from this release (docs/upgrading.md): when `init()` finds a
   * schema without a format record (one written by 0.1.0, or a new one), the schema keeps admitting the
   * writers of that release until `facade.finishRollingUpgrade()`. Ignored (with the process warning
   * `MNEME_ROLLING_ENDED`) on a schema that refuses them already. Default: none (old writers refused).
   */
  readonly rollingFrom?: RollingFrom;
}

/** The code of the process warning of a `rollingFrom` that a schema no longer honours. */
export const ROLLING_ENDED_WARNING = "MNEME_ROLLING_ENDED";
const warnedRollingEnded = new Set<string>();

/**
 * What every Postgres store shares: the pool, the validated and quoted schema,
 * STORE_CLOSED after close(), and a close() that waits for calls in flight so a
 * pool ended right after close() does not cut a running write. Every statement
 * runs on a client checked out through {@link checkout}, which survives its
 * connection dying (the call fails with UNAVAILABLE, the client is destroyed);
 * the pool gets an 'error' listener for its idle clients.
 */
export abstract class PostgresStoreBase {
  protected readonly pool: PgPool;
  protected readonly schema: string;
  /** `"schema"`, ready to prefix table names in SQL. */
  protected readonly qschema: string;
  protected readonly connectionInfo: string;
  protected readonly onStatement: PgStatementHook | undefined;
  /** The kind of client {@link query} checks out (see PgClientKind). */
  protected readonly clientKind: PgClientKind = "read";
  private closed = false;
  private closing: Promise<void> | undefined;
  private readonly inFlight = new Set<Promise<unknown>>();
  private formatRecord: StoreFormatRecord | undefined;
  private readonly rollingFrom: RollingFrom | undefined;
  private ddlStatements: SchemaStatements | undefined;
  private ddlRun: Promise<void> | undefined;

  constructor(opts: PostgresStoreOptions) {
    if (typeof opts !== "object" || opts === null || typeof opts.pool?.query !== "function" || typeof opts.pool.connect !== "function") {
      throw new MnemeError("INVALID_REQUEST", "postgres: a store needs { pool } (a pg.Pool or a pool-shaped object)");
    }
    this.pool = opts.pool;
    this.schema = validateSchemaName(opts.schema);
    this.qschema = quoteIdent(this.schema);
    this.connectionInfo = opts.connectionInfo ?? describeConnection(opts.pool, this.schema);
    if (opts.onStatement !== undefined && typeof opts.onStatement !== "function") {
      throw new MnemeError("INVALID_REQUEST", "postgres: onStatement must be a function");
    }
    this.onStatement = opts.onStatement;
    this.rollingFrom = checkRollingFrom(opts.rollingFrom, "postgres");
    listenForPoolErrors(opts.pool);
  }

  /** The schema's store format record as this store's `init()` left it (undefined before; see docs/upgrading.md). */
  storeFormat(): StoreFormatRecord | undefined {
    return this.formatRecord;
  }

  /** Keeps the format record `runSchemaDdl` returned. */
  protected noteStoreFormat(record: StoreFormatRecord): void {
    this.formatRecord = record;
  }

  /**
   * Creates the schema (if missing), then runs this store's DDL with the
   * schema's format check and upgrade (see {@link runSchemaDdl}), keeping the record.
   */
  protected async runDdl(ddl: SchemaStatements): Promise<void> {
    const createSchema = `CREATE SCHEMA IF NOT EXISTS ${this.qschema}`;
    const statements: SchemaStatements =
      typeof ddl === "function" ? (admit: boolean) => [createSchema, ...ddl(admit)] : [createSchema, ...ddl];
    this.ddlStatements = statements;
    const change: LowestWriterChange = this.rollingFrom === undefined ? undefined : { admit: ROLLING_FROM[this.rollingFrom] };
    const record = await runSchemaDdl(this.pool, this.schema, statements, this.onStatement, change);
    this.noteStoreFormat(record);
    if (this.rollingFrom !== undefined && !admitsOldWriters(record)) warnRollingEnded(this.schema, this.rollingFrom, record);
  }

  /** Runs {@link runDdl} once per store, for every call that needs the tables; a failed run (the database was down) is tried again by the next call. */
  protected ensureDdl(ddl: SchemaStatements): Promise<void> {
    const run = (this.ddlRun ??= this.runDdl(ddl));
    run.catch(() => {
      if (this.ddlRun === run) this.ddlRun = undefined;
    });
    return run;
  }

  /**
   * The schema's format record as stored now (another instance may have
   * finished a rolling upgrade since `init()`); keeps it as {@link storeFormat}.
   */
  async currentStoreFormat(): Promise<StoreFormatRecord | undefined> {
    return this.track(async () => {
      const record = await currentStoreFormat(this.pool, this.schema, this.onStatement);
      if (record !== undefined) this.noteStoreFormat(record);
      return record;
    });
  }

  /**
   * Ends compatibility mode (see {@link PostgresStoreOptions.rollingFrom}): the
   * schema's lowest writer goes back to this release's, and this store's DDL
   * runs again in strict mode (old writers refused). Idempotent; a store not
   * initialised yet does nothing.
   */
  async finishRollingUpgrade(): Promise<StoreFormatRecord | undefined> {
    const statements = this.ddlStatements;
    if (statements === undefined) return this.formatRecord;
    return this.track(async () => {
      const record = await runSchemaDdl(this.pool, this.schema, statements, this.onStatement, "finish");
      this.noteStoreFormat(record);
      return record;
    });
  }

  /** True once close() was called. */
  get isClosed(): boolean {
    return this.closed;
  }

  /** Closes the store: later calls reject with STORE_CLOSED; waits for calls in flight. Idempotent. */
  close(): Promise<void> {
    this.closing ??= (async () => {
      this.closed = true;
      await this.onClose();
      while (this.inFlight.size > 0) await Promise.allSettled([...this.inFlight]);
    })();
    return this.closing;
  }

  /** Subclasses release their own resources here (dedicated clients, timers). */
  protected async onClose(): Promise<void> {}

  /** Throws STORE_CLOSED once closed. */
  protected assertOpen(): void {
    if (this.closed) throw new MnemeError("STORE_CLOSED", `postgres: ${this.constructor.name} is closed`);
  }

  /** Runs `fn` as a call close() waits for; rejects with STORE_CLOSED once closed. */
  protected track<R>(fn: () => Promise<R>): Promise<R> {
    this.assertOpen();
    const p = fn();
    this.inFlight.add(p);
    const done = (): void => {
      this.inFlight.delete(p);
    };
    p.then(done, done);
    return p;
  }

  /** The schema this store writes (stores sharing it are scrubbed once): see {@link scrubStorage}. */
  storageScope(): string {
    return `postgres:${this.connectionInfo}:${this.schema}`;
  }

  /**
   * VACUUMs every table of the schema: rows deleted or updated (a forgotten
   * subject's readmodel copies, say) are pruned from their pages and indexes
   * and their space becomes reusable. It does not overwrite the bytes at once,
   * nor the write-ahead log, its archives or backups (see docs/privacy.md).
   */
  async scrubStorage(): Promise<void> {
    await this.track(async () => {
      const tables = await this.query<{ t: string }>(
        "SELECT tablename AS t FROM pg_tables WHERE schemaname = $1 ORDER BY tablename",
        [this.schema],
        "listing the tables to vacuum",
      );
      for (const { t } of tables.rows) await this.query(`VACUUM ${this.qschema}.${quoteIdent(t)}`, [], `vacuuming ${t}`);
    });
  }

  /** A StoreInfo of this store. */
  protected storeInfo(numItems: number, lastItemCreatedAt: number): StoreInfo {
    return { storeType: "postgres", numItems, lastItemCreatedAt, connectionInfo: this.connectionInfo };
  }

  /** A StoreInfo from an info query's row: `n` items and `t`, the newest item's createdAt (null when empty), both bigint as text. */
  protected storeInfoOf(row: { n: string; t: string | null } | undefined): StoreInfo {
    return this.storeInfo(Number(row?.n ?? 0), row?.t == null ? 0 : Number(row.t));
  }

  /**
   * The StoreInfo of `table` (a call close() waits for): its rows, and
   * `newest`, an SQL expression of the newest row's creation time (default:
   * the largest created_at).
   */
  protected tableInfo(table: string, what: string, newest = "max(created_at)"): Promise<StoreInfo> {
    return this.track(async () => {
      const res = await this.query<{ n: string; t: string | null }>(
        `SELECT count(*)::text AS n, (${newest})::text AS t FROM ${table}`,
        [],
        what,
      );
      return this.storeInfoOf(res.rows[0]);
    });
  }

  /** Runs one statement on a pool client; a failure becomes the MnemeError of `mapPgError`, its message starting `postgres: ${what}`. */
  protected async query<R extends object>(text: string, values: unknown[], what: string): Promise<QueryResult<R>> {
    try {
      return await this.poolQuery<R>(this.clientKind, { text, values });
    } catch (e) {
      throw mapPgError(e, `postgres: ${what}`);
    }
  }

  /** Runs one statement on a client checked out for it (destroyed when its connection failed); driver errors are thrown as they are. */
  protected poolQuery<R extends object>(kind: PgClientKind, q: PgQuery | string, values?: unknown[]): Promise<QueryResult<R>> {
    return withClient(this.pool, kind, this.onStatement, `postgres: ${kind}`, (c) => c.query<R>(q, values));
  }

  /** Checks out a client held across statements (a transaction, a session); release it with `release()`. */
  protected checkout(kind: PgClientKind, what: string, onLost?: (error: unknown) => void): Promise<CheckedOutClient> {
    return checkout(this.pool, kind, this.onStatement, what, onLost);
  }
}

/** Says once per schema and process that `rollingFrom` is not honoured: the schema refuses old writers already. */
function warnRollingEnded(schema: string, from: RollingFrom, record: StoreFormatRecord): void {
  if (warnedRollingEnded.has(schema)) return;
  warnedRollingEnded.add(schema);
  const message =
    `postgres schema ${schema}: rollingFrom "${from}" is ignored: the schema admits writers of format ${record.lowestWriterFormat} ` +
    `and later only (a rolling upgrade was finished, or an instance started without rollingFrom first); instances of mneme ${from} ` +
    "are refused. Remove the option; see docs/upgrading.md, Rolling deploys";
  if (typeof process !== "undefined" && typeof process.emitWarning === "function") {
    process.emitWarning(message, { code: ROLLING_ENDED_WARNING });
  }
}
