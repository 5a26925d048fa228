import type { Kysely, KyselyModule, QueryCreator } from "./kysely-types.js";
import { isMnemeError, MnemeError } from "../model/errors.js";
import type { RestoreReport } from "../model/event-handler.js";
import type { Event } from "../model/types.js";
import {
  quoteSqlIdentifier,
  quoteSqlLiteral,
  type SqlDialect,
  type SqlResult,
  type SqlTableAccess,
  supportsSqlTables,
} from "../store/sql-table-access.js";
import { BaseReadmodel, type ReadmodelFacade, type ReadmodelOption } from "./base-readmodel.js";
import { addGenerationParticipant } from "./readmodel-generations.js";
import { type KyselyWrite, loadKysely, sqlTableKysely } from "./sql-kysely.js";
import { buildingNextGeneration, currentTenantScope } from "./tenant-scope.js";

/** How one table of a SQL-table readmodel is shared. */
export interface SqlTableDeclaration {
  /**
   * `"tenant"` (the default): the table has a `tenant_uuid` column (text, not
   * null) holding the tenant of the event whose handler wrote the row, and a
   * tenant's view of the readmodel reads only its rows. `"global"`: shared.
   */
  readonly tenancy?: "tenant" | "global";
}

/** Names for the DDL of one generation: `t("orders")` is the table, `t.id("orders_by_status")` an index or constraint name. */
export interface SqlTableNamer {
  (table: string): string;
  id(identifier: string): string;
}

/** The tables of a SQL-table readmodel and the DDL that creates one generation of them. */
export interface SqlTablesConfig {
  /** The tables, by name (letters, digits and `_`, up to 48 characters). */
  readonly tables: Readonly<Record<string, SqlTableDeclaration>>;
  /**
   * The statements that create one generation of the tables (and their
   * indexes), naming them through `t`: each generation has tables of its own
   * (`<name>__g<n>`), so a restore from zero builds the next beside the served one.
   */
  readonly ddl: (t: SqlTableNamer, dialect: SqlDialect) => readonly string[];
}

/** A row for `insert`/`upsert`: column -> value. */
export type SqlRow = Readonly<Record<string, unknown>>;

const NAME = /^[A-Za-z_][A-Za-z0-9_]{0,47}$/;
const TENANT_COLUMN = "tenant_uuid";
/** A column of a row given to insert/upsert: ASCII letters, digits and _, at most 63 (Postgres keeps 63 bytes of a name). */
const COLUMN = /^[A-Za-z_][A-Za-z0-9_]{0,62}$/;

/**
 * Refuses (INVALID_REQUEST) the column names of a row that could name a
 * column other than the one they spell, or one mneme owns: a name outside
 * COLUMN (no quoting, spaces or look-alike letters to play with), two names
 * of one column (SQLite ignores ASCII case, and with two the first wins), and
 * in a tenant table any spelling of tenant_uuid.
 */
export function checkRowColumns(table: string, columns: readonly string[], tenantTable: boolean): void {
  const seen = new Map<string, string>();
  for (const c of columns) {
    if (!COLUMN.test(c))
      throw new MnemeError(
        "INVALID_REQUEST",
        `${table}: column ${JSON.stringify(c)} must be ASCII letters, digits and _ (at most 63, not starting with a digit)`,
      );
    const folded = c.toLowerCase();
    if (tenantTable && folded === TENANT_COLUMN)
      throw new MnemeError(
        "INVALID_REQUEST",
        `${table}: a row must not give ${c}: mneme sets the ${TENANT_COLUMN} of a tenant table's row to the event's tenant`,
      );
    const other = seen.get(folded);
    if (other !== undefined)
      throw new MnemeError("INVALID_REQUEST", `${table}: columns ${other} and ${c} name one column (names ignore case in SQLite)`);
    seen.set(folded, c);
  }
}

/** FNV-1a of the DDL text, to notice a changed DDL at start. */
function hashText(text: string): string {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h.toString(16).padStart(8, "0");
}

function warn(message: string, code: string): void {
  const p = (globalThis as { process?: { emitWarning?: (m: string, o: { code: string }) => void } }).process;
  if (typeof p?.emitWarning === "function") p.emitWarning(message, { code });
}

/**
 * A readmodel whose handlers write the application's own SQL tables through
 * the batch's transaction (SQLite or Postgres readmodel backend), so table
 * writes and the checkpoint commit together, fenced like document writes.
 * Each generation has its tables (`<table>__g<n>`); a view named as the table
 * shows the served generation, so a restore from zero builds the next
 * generation beside it and switches the views in one transaction (the old
 * tables are dropped in it). Handlers write through `this.sql` (`table()`,
 * `query()`, `insert()`, `upsert()`, `client`, `kysely`); query methods read
 * through `this.sql.from()` / `this.sql.reader`, which a tenant's view
 * (`ctx.readmodel(...)`) limits to its rows.
 * @example
 * class OrdersByStatus extends SqlTableReadmodel {
 *   constructor(facade: Facade) {
 *     super(facade, { tables: { orders: {} }, ddl: (t) => [`CREATE TABLE ${t("orders")} (tenant_uuid TEXT NOT NULL, id TEXT NOT NULL, status TEXT NOT NULL, PRIMARY KEY (tenant_uuid, id))`] });
 *     this.domain = "Shop"; this.name = "OrdersByStatus";
 *     this.addDomainEventHandler(OrderPlaced, (_ctx, e) => this.sql.insert("orders", { id: e.aggregateUuid, status: "open" }));
 *   }
 *   open() { return this.sql.query(`SELECT id FROM ${this.sql.from("orders")} WHERE status = 'open'`); }
 * }
 */
export abstract class SqlTableReadmodel<DB = Record<string, Record<string, unknown>>> extends BaseReadmodel {
  readonly #config: SqlTablesConfig;
  readonly #names: readonly string[];
  readonly #ddlHash: string;
  #served = 0;
  #ready: Promise<void> | undefined;
  #kysely: KyselyModule | MnemeError | undefined;
  #writer: Kysely<DB> | undefined;
  #readerBase: Kysely<DB> | undefined;
  #sql: SqlTables<DB> | undefined;

  constructor(facade: ReadmodelFacade, config: SqlTablesConfig, ...options: ReadmodelOption[]) {
    super(facade, ...options);
    if (typeof config !== "object" || config === null || typeof config.tables !== "object" || config.tables === null)
      throw new MnemeError("INVALID_EVENT_HANDLER", "SqlTableReadmodel: config.tables must be an object of table declarations");
    if (typeof config.ddl !== "function") throw new MnemeError("INVALID_EVENT_HANDLER", "SqlTableReadmodel: config.ddl must be a function");
    const names = Object.keys(config.tables);
    if (names.length === 0) throw new MnemeError("INVALID_EVENT_HANDLER", "SqlTableReadmodel: declare at least one table");
    for (const n of names) {
      if (!NAME.test(n))
        throw new MnemeError(
          "INVALID_EVENT_HANDLER",
          `SqlTableReadmodel: table name ${JSON.stringify(n)} must be letters, digits and _ (at most 48)`,
        );
      const tenancy = config.tables[n]?.tenancy ?? "tenant";
      if (tenancy !== "tenant" && tenancy !== "global")
        throw new MnemeError("INVALID_EVENT_HANDLER", `SqlTableReadmodel: table ${n}: tenancy must be "tenant" or "global"`);
    }
    this.#config = config;
    this.#names = names;
    this.#ddlHash = hashText(JSON.stringify([this.#ddl(0, "sqlite", quoteSqlIdentifier), this.#ddl(0, "postgres", quoteSqlIdentifier)]));
  }

  /** The SQL side of this readmodel in the current context (see SqlTables). */
  protected get sql(): SqlTables<DB> {
    return (this.#sql ??= new SqlTables<DB>(this.#port()));
  }

  /** Waits until the tables exist (created at the first start), then restores as BaseReadmodel does. */
  override restoreState(
    ctx?: unknown,
    opts: { fromZero?: boolean; signal?: AbortSignal } = {},
  ): { done: Promise<RestoreReport>; cancel(): void } {
    const ready = this.#ensureReady();
    let inner: { done: Promise<RestoreReport>; cancel(): void } | undefined;
    let cancelled = false;
    const done = ready.then(() => {
      if (cancelled) throw new MnemeError("RESTORE_CANCELLED", `restoration of ${this.name} was cancelled before it began`);
      inner = super.restoreState(ctx, opts);
      return inner.done;
    });
    done.catch(() => undefined);
    return {
      done,
      cancel: () => {
        cancelled = true;
        inner?.cancel();
      },
    };
  }

  /** Reads the served generation inside the batch's transaction (another instance may have switched it); call super when overriding. */
  protected override async beforeBatch(events: readonly Event[]): Promise<void> {
    await super.beforeBatch(events);
    await this.#ensureReady();
    this.#served = await this.#readServed();
  }

  /** A restore from zero: (re)creates the next generation's tables, inside the transaction that starts it; call super when overriding. */
  protected override async resetState(): Promise<void> {
    await super.resetState();
    await this.#ensureReady();
    const access = this.#access();
    this.#served = await this.#readServed();
    const next = this.#served + 1;
    for (const n of this.#names) await access.execute(this.#dropTable(this.#physical(n, next)));
    for (const stmt of this.#ddl(next, access.dialect, (n) => access.qualify(n))) await access.execute(stmt);
  }

  // ---- generations ------------------------------------------------------------------

  #access(): SqlTableAccess {
    const backend = this.readmodelStoreBackend;
    if (!supportsSqlTables(backend)) {
      throw new MnemeError(
        "INVALID_EVENT_HANDLER",
        `readmodel ${this.name}: its ReadmodelStoreBackend has no SQL tables (sqlTables()): a SqlTableReadmodel needs the SQLite or Postgres backend`,
      );
    }
    return backend.sqlTables();
  }

  #physical(table: string, generation: number): string {
    return `${table}__g${generation}`;
  }

  #dropTable(physical: string): string {
    const access = this.#access();
    return `DROP TABLE IF EXISTS ${access.qualify(physical)}${access.dialect === "postgres" ? " CASCADE" : ""}`;
  }

  /** The DDL of one generation; `qualify` names a table (the access's, or plain quoting for the DDL's hash). */
  #ddl(generation: number, dialect: SqlDialect, qualify: (name: string) => string): readonly string[] {
    const namer = ((table: string) => {
      if (!this.#names.includes(table))
        throw new MnemeError(
          "INVALID_EVENT_HANDLER",
          `readmodel ${this.name}: its DDL names table ${JSON.stringify(table)}, which it does not declare`,
        );
      return qualify(this.#physical(table, generation));
    }) as SqlTableNamer;
    namer.id = (identifier: string) => {
      if (!NAME.test(identifier))
        throw new MnemeError(
          "INVALID_EVENT_HANDLER",
          `readmodel ${this.name}: name ${JSON.stringify(identifier)} must be letters, digits and _ (at most 48)`,
        );
      return quoteSqlIdentifier(this.#physical(identifier, generation));
    };
    const out = this.#config.ddl(namer, dialect);
    if (!Array.isArray(out) || out.some((s) => typeof s !== "string"))
      throw new MnemeError("INVALID_EVENT_HANDLER", `readmodel ${this.name}: ddl must return an array of SQL statements`);
    return out;
  }

  #metaTable(): string {
    const access = this.#access();
    return access.qualify(`${access.tablePrefix}sql_table_generations`);
  }

  #param(i: number): string {
    return this.#access().dialect === "postgres" ? `$${i}` : "?";
  }

  async #readServed(): Promise<number> {
    const res = await this.#access().execute<{ served: number | string }>(
      `SELECT served FROM ${this.#metaTable()} WHERE readmodel = ${this.#param(1)}`,
      [this.name],
    );
    const row = res.rows[0];
    if (row === undefined)
      throw new MnemeError("INVALID_STATE", `readmodel ${this.name}: its SQL tables are not created (no served generation)`);
    return Number(row.served);
  }

  #ensureReady(): Promise<void> {
    const ready = (this.#ready ??= this.#prepare());
    // A failed start is tried again by the next one.
    ready.catch(() => {
      if (this.#ready === ready) this.#ready = undefined;
    });
    return ready;
  }

  async #prepare(): Promise<void> {
    const access = this.#access();
    const backend = this.readmodelStoreBackend;
    addGenerationParticipant(backend, this.name, {
      switchGeneration: () => this.#switchGeneration(),
      discardNextGeneration: () => this.#discardNextGeneration(),
    });
    try {
      this.#kysely = await loadKysely();
    } catch (e) {
      this.#kysely = e as MnemeError;
    }
    const meta = `CREATE TABLE IF NOT EXISTS ${this.#metaTable()} (readmodel TEXT PRIMARY KEY, served BIGINT NOT NULL, ddl_hash TEXT NOT NULL)`;
    await access.execute(meta).catch(() => access.execute(meta)); // two instances creating it at once: the loser sees it next time
    let row = (
      await access.execute<{ served: number | string; ddl_hash: string }>(
        `SELECT served, ddl_hash FROM ${this.#metaTable()} WHERE readmodel = ${this.#param(1)}`,
        [this.name],
      )
    ).rows[0];
    if (row === undefined) {
      try {
        await backend.transaction(async () => {
          // The marker first: an instance creating them at the same time waits on it (Postgres) and then fails, as on SQLite.
          await access.execute(
            `INSERT INTO ${this.#metaTable()} (readmodel, served, ddl_hash) VALUES (${this.#param(1)}, 1, ${this.#param(2)})`,
            [this.name, this.#ddlHash],
          );
          for (const stmt of this.#ddl(1, access.dialect, (n) => access.qualify(n))) await access.execute(stmt);
          for (const stmt of this.#viewStatements(1)) await access.execute(stmt);
        });
      } catch (e) {
        row = (
          await access.execute<{ served: number | string; ddl_hash: string }>(
            `SELECT served, ddl_hash FROM ${this.#metaTable()} WHERE readmodel = ${this.#param(1)}`,
            [this.name],
          )
        ).rows[0];
        if (row === undefined) throw e;
      }
    }
    this.#served = row === undefined ? 1 : Number(row.served);
    if (row !== undefined && row.ddl_hash !== this.#ddlHash) {
      warn(
        `readmodel ${this.name}: its SQL tables were created by another DDL than the one it declares now; restore it from zero to build them with the new one (runtime.controlEventHandler({ action: "restore", eventHandlerName: "${this.name}", restoreFromZero: true }))`,
        "MNEME_SQL_TABLES_CHANGED",
      );
    }
    await this.#checkTenantColumns();
  }

  /** Every tenant table must have a tenant_uuid column: what the framework fills and tenant reads filter on. */
  async #checkTenantColumns(): Promise<void> {
    const access = this.#access();
    for (const n of this.#names) {
      if ((this.#config.tables[n]?.tenancy ?? "tenant") !== "tenant") continue;
      const physical = this.#physical(n, this.#served);
      const res =
        access.dialect === "sqlite"
          ? await access.execute(`SELECT name FROM pragma_table_info(?) WHERE name = ?`, [physical, TENANT_COLUMN])
          : await access.execute(
              `SELECT column_name FROM information_schema.columns WHERE table_schema = $1 AND table_name = $2 AND column_name = $3`,
              [access.schema, physical, TENANT_COLUMN],
            );
      if (res.rows.length === 0) {
        throw new MnemeError(
          "INVALID_EVENT_HANDLER",
          `readmodel ${this.name}: table ${n} is tenant-scoped but has no ${TENANT_COLUMN} column: add "${TENANT_COLUMN} TEXT NOT NULL" to its DDL, or declare it { tenancy: "global" }`,
        );
      }
    }
  }

  #viewStatements(generation: number): string[] {
    const access = this.#access();
    const out: string[] = [];
    for (const n of this.#names) {
      out.push(`DROP VIEW IF EXISTS ${access.qualify(n)}`);
      out.push(`CREATE VIEW ${access.qualify(n)} AS SELECT * FROM ${access.qualify(this.#physical(n, generation))}`);
    }
    return out;
  }

  /** Inside the switch's transaction: the views show the next generation, the served one's tables are dropped. */
  async #switchGeneration(): Promise<void> {
    const access = this.#access();
    const served = await this.#readServed();
    const next = served + 1;
    for (const stmt of this.#viewStatements(next)) await access.execute(stmt);
    for (const n of this.#names) await access.execute(this.#dropTable(this.#physical(n, served)));
    await access.execute(
      `UPDATE ${this.#metaTable()} SET served = ${this.#param(1)}, ddl_hash = ${this.#param(2)} WHERE readmodel = ${this.#param(3)}`,
      [next, this.#ddlHash, this.name],
    );
    this.#served = next;
  }

  /** Inside a transaction: the next generation (a cancelled, failed or crashed rebuild's) is dropped. */
  async #discardNextGeneration(): Promise<void> {
    const access = this.#access();
    const served = await this.#readServed().catch((e: unknown) => {
      if (isMnemeError(e, "INVALID_STATE")) return undefined;
      throw e;
    });
    if (served === undefined) return;
    for (const n of this.#names) await access.execute(this.#dropTable(this.#physical(n, served + 1)));
  }

  /** What SqlTables needs of this readmodel, resolved per call. */
  #port(): SqlTablesPort<DB> {
    return {
      access: () => this.#access(),
      names: this.#names,
      tenancy: (n) => this.#config.tables[n]?.tenancy ?? "tenant",
      readmodel: () => this.name,
      current: (n) => {
        const access = this.#access();
        // In a transaction (a handler's batch): the generation it writes; elsewhere the view of the served one.
        if (access.transactionClient() === undefined) return n;
        return this.#physical(n, buildingNextGeneration(this.name) ? this.#served + 1 : this.#served);
      },
      kysely: () => {
        const k = this.#kysely;
        if (k === undefined) throw new MnemeError("NOT_STARTED", `readmodel ${this.name}: its Kysely instance exists once it has started`);
        if (k instanceof MnemeError) throw k;
        return k;
      },
      writer: (make) => (this.#writer ??= make()),
      readerBase: (make) => (this.#readerBase ??= make()),
    };
  }
}

/** The part of Kysely's QueryCreator the tenant CTEs use, over table names not in the DB type. */
interface CteCreator {
  with(
    name: string,
    fn: (db: { selectFrom(t: string): { selectAll(): { where(c: string, op: "=", v: string): unknown } } }) => unknown,
  ): unknown;
}

/** @internal */
interface SqlTablesPort<DB> {
  access(): SqlTableAccess;
  readonly names: readonly string[];
  tenancy(table: string): "tenant" | "global";
  readmodel(): string;
  /** The table name a statement should use now: a generation's table in a batch, else the view. */
  current(table: string): string;
  kysely(): KyselyModule;
  writer(make: () => Kysely<DB>): Kysely<DB>;
  readerBase(make: () => Kysely<DB>): Kysely<DB>;
}

/**
 * The SQL side of a SqlTableReadmodel, resolved per call by context: in a
 * handler's batch statements join the batch's transaction and name the
 * tables of the generation being written (the next one during a restore from
 * zero); elsewhere they run on their own and name the served generation's
 * views. Reads through `from()` and `reader` in a tenant's view see only that
 * tenant's rows of tenant tables.
 */
export class SqlTables<DB> {
  readonly #port: SqlTablesPort<DB>;

  /** @internal */
  constructor(port: SqlTablesPort<DB>) {
    this.#port = port;
  }

  /** `"sqlite"` or `"postgres"`: the placeholders (`?`, `$1`) and DDL the database speaks. */
  get dialect(): SqlDialect {
    return this.#port.access().dialect;
  }

  /** The tenant of the event being handled (what `insert`/`upsert` write to tenant_uuid); undefined outside a handler. */
  get tenantUuid(): string | undefined {
    return currentTenantScope()?.writeTenantUuid;
  }

  /** The quoted, qualified name of `table` to write in a handler (the generation being written). */
  table(table: string): string {
    this.#declared(table);
    return this.#port.access().qualify(this.#port.current(table));
  }

  /**
   * `table` to read, as a FROM item aliased by its name: in a tenant's view
   * of the readmodel only that tenant's rows (of a tenant table), elsewhere
   * all of them.
   * @example
   * await this.sql.query(`SELECT status, count(*) AS n FROM ${this.sql.from("orders")} GROUP BY status`);
   */
  from(table: string): string {
    const source = this.table(table);
    const tenant = this.#readTenant(table);
    const alias = quoteSqlIdentifier(table);
    return tenant === undefined
      ? `${source} AS ${alias}`
      : `(SELECT * FROM ${source} WHERE ${TENANT_COLUMN} = ${quoteSqlLiteral(tenant)}) AS ${alias}`;
  }

  /** Runs one statement (placeholders `?` on SQLite, `$1` on Postgres): in a handler, in the batch's transaction. */
  query<R = Record<string, unknown>>(sql: string, params: readonly unknown[] = []): Promise<R[]> {
    return this.#port
      .access()
      .execute<R>(sql, params)
      .then((r) => r.rows);
  }

  /** As `query`, with the number of changed rows when known (not for a SQLite write inside a batch: it runs at the commit). */
  execute<R = Record<string, unknown>>(sql: string, params: readonly unknown[] = []): Promise<SqlResult<R>> {
    return this.#port.access().execute<R>(sql, params);
  }

  /** Inserts `row` into `table`; a tenant table's row gets the event's tenant in `tenant_uuid` (a row naming that column is INVALID_REQUEST). */
  async insert(table: string, row: SqlRow): Promise<void> {
    const full = this.#row(table, row);
    const cols = Object.keys(full);
    await this.#port.access().execute(
      `INSERT INTO ${this.table(table)} (${cols.map(quoteSqlIdentifier).join(", ")}) VALUES (${this.#placeholders(cols.length)})`,
      cols.map((c) => full[c]),
    );
  }

  /**
   * Inserts `row`, or when a row with the same `key` columns exists updates
   * its other columns (those in `add` are added to, as counters); a tenant
   * table's `key` includes tenant_uuid implicitly and its row gets the event's tenant.
   * @example
   * await this.sql.upsert("customer_summary", { customer: p.customer, orders: 1, total: p.amount }, { key: ["customer"], add: ["orders", "total"] });
   */
  async upsert(table: string, row: SqlRow, opts: { key: readonly string[]; add?: readonly string[] }): Promise<void> {
    const full = this.#row(table, row);
    const cols = Object.keys(full);
    if (typeof opts !== "object" || opts === null || !Array.isArray(opts.key) || opts.key.length === 0)
      throw new MnemeError("INVALID_REQUEST", `upsert ${table}: opts.key must be a non-empty list of column names`);
    if (opts.add !== undefined && !Array.isArray(opts.add))
      throw new MnemeError("INVALID_REQUEST", `upsert ${table}: opts.add must be a list of column names`);
    // A handler of an event without a tenant (Privacy.SubjectForgotten) updates the rows of its key in their tenants.
    if (this.tenantUuid === "" && this.#port.tenancy(table) === "tenant" && !opts.key.includes(TENANT_COLUMN))
      return this.#upsertKeepingTenants(table, full, opts);
    const key = this.#port.tenancy(table) === "tenant" && !opts.key.includes(TENANT_COLUMN) ? [TENANT_COLUMN, ...opts.key] : [...opts.key];
    for (const k of key)
      if (!cols.includes(k)) throw new MnemeError("INVALID_REQUEST", `upsert ${table}: key column ${k} is not in the row`);
    const add = new Set(opts.add ?? []);
    const target = this.table(table);
    const sets = cols
      .filter((c) => !key.includes(c))
      .map((c) => {
        const q = quoteSqlIdentifier(c);
        return add.has(c) ? `${q} = ${target}.${q} + excluded.${q}` : `${q} = excluded.${q}`;
      });
    const onConflict = sets.length === 0 ? "DO NOTHING" : `DO UPDATE SET ${sets.join(", ")}`;
    await this.#port.access().execute(
      `INSERT INTO ${target} (${cols.map(quoteSqlIdentifier).join(", ")}) VALUES (${this.#placeholders(cols.length)}) ON CONFLICT (${key.map(quoteSqlIdentifier).join(", ")}) ${onConflict}`,
      cols.map((c) => full[c]),
    );
  }

  /**
   * The driver's object of the handler's batch transaction: the `pg` client on
   * Postgres, a better-sqlite3-shaped connection on SQLite (its statements
   * join the batch, applied at its commit). Undefined outside a batch.
   */
  get client(): unknown {
    return this.#port.access().transactionClient();
  }

  /**
   * A Kysely instance (when `kysely` is installed) bound to the same
   * transaction in a handler, whose table names are those of the generation
   * being written; elsewhere it runs on its own against the served views
   * (unscoped: read tenant data through `reader`).
   */
  get kysely(): Kysely<DB> {
    const k = this.#port.kysely();
    return this.#port.writer(() =>
      sqlTableKysely<DB>(
        k,
        this.#port.access(),
        (t) => (this.#port.names.includes(t) ? this.#port.current(t) : undefined),
        (w) => this.#checkKyselyWrite(w),
      ),
    );
  }

  /**
   * Kysely for query methods: the tables of the served generation; in a
   * tenant's view only that tenant's rows of tenant tables.
   * @example
   * await this.sql.reader.selectFrom("orders").selectAll().where("status", "=", "open").execute();
   */
  get reader(): QueryCreator<DB> {
    const k = this.#port.kysely();
    const access = this.#port.access();
    const base = this.#port.readerBase(() => sqlTableKysely<DB>(k, access));
    let qc: QueryCreator<DB> = access.dialect === "postgres" ? base.withSchema(access.schema) : base;
    for (const n of this.#port.names) {
      const tenant = this.#readTenant(n);
      if (tenant === undefined) continue;
      const source = `${access.schema}.${this.#port.current(n)}`;
      // A CTE named as the table, over it (qualified, so not itself), narrowed to the tenant: the query's names stay the table's.
      qc = (qc as unknown as CteCreator).with(n, (db) =>
        db.selectFrom(source).selectAll().where(TENANT_COLUMN, "=", tenant),
      ) as QueryCreator<DB>;
    }
    return qc;
  }

  /**
   * `upsert` by a writer without a tenant: the rows of `key` are updated
   * whatever their tenant (each keeps it), and a row is inserted with tenant
   * "" only when none has the key; two statements, in order (on SQLite both
   * run at the batch's commit, so no row count decides between them).
   */
  async #upsertKeepingTenants(table: string, full: SqlRow, opts: { key: readonly string[]; add?: readonly string[] }): Promise<void> {
    const cols = Object.keys(full);
    for (const k of opts.key)
      if (!cols.includes(k)) throw new MnemeError("INVALID_REQUEST", `upsert ${table}: key column ${k} is not in the row`);
    const pg = this.#port.access().dialect === "postgres";
    const params: unknown[] = [];
    const param = (v: unknown): string => (params.push(v), pg ? `$${params.length}` : "?");
    const target = this.table(table);
    const add = new Set(opts.add ?? []);
    const sets = cols
      .filter((c) => !opts.key.includes(c) && c !== TENANT_COLUMN)
      .map((c) => {
        const q = quoteSqlIdentifier(c);
        return add.has(c) ? `${q} = ${q} + ${param(full[c])}` : `${q} = ${param(full[c])}`;
      });
    const match = () => opts.key.map((k) => `${quoteSqlIdentifier(k)} = ${param(full[k])}`).join(" AND ");
    const names = cols.map(quoteSqlIdentifier).join(", ");
    let updated: number | undefined;
    if (sets.length > 0) {
      const where = match();
      updated = (await this.#port.access().execute(`UPDATE ${target} SET ${sets.join(", ")} WHERE ${where}`, params.splice(0))).rowCount;
    }
    if (pg) {
      // Postgres runs the UPDATE at once (its count is known) and types a parameter only from an INSERT's VALUES.
      if (
        sets.length > 0
          ? (updated ?? 0) > 0
          : (await this.#port.access().execute(`SELECT 1 FROM ${target} WHERE ${match()}`, params.splice(0))).rows.length > 0
      )
        return;
      const values = cols.map((c) => param(full[c])).join(", ");
      await this.#port.access().execute(`INSERT INTO ${target} (${names}) VALUES (${values})`, params.splice(0));
      return;
    }
    const values = cols.map((c) => param(full[c])).join(", ");
    const where = match();
    await this.#port
      .access()
      .execute(
        `INSERT INTO ${target} (${names}) SELECT ${values} WHERE NOT EXISTS (SELECT 1 FROM ${target} WHERE ${where})`,
        params.splice(0),
      );
  }

  #declared(table: string): void {
    if (!this.#port.names.includes(table))
      throw new MnemeError("INVALID_REQUEST", `readmodel ${this.#port.readmodel()}: it declares no table ${JSON.stringify(table)}`);
  }

  #readTenant(table: string): string | undefined {
    if (this.#port.tenancy(table) !== "tenant") return undefined;
    return currentTenantScope()?.readTenantUuid;
  }

  /**
   * The row to write, with its tenant: the one place insert and upsert pass.
   * Its column names are checked first (see checkRowColumns); a tenant table's
   * row gets the tenant of the scope (the event's in a handler, the view's in
   * `asTenant`), never one from the data.
   */
  #row(table: string, row: SqlRow): SqlRow {
    this.#declared(table);
    if (typeof row !== "object" || row === null || Array.isArray(row) || Object.keys(row).length === 0)
      throw new MnemeError("INVALID_REQUEST", `${table}: a row must be an object of at least one column`);
    const tenantTable = this.#port.tenancy(table) === "tenant";
    checkRowColumns(table, Object.keys(row), tenantTable);
    if (!tenantTable) return row;
    const tenant = this.tenantUuid;
    if (tenant === undefined)
      throw new MnemeError(
        "INVALID_REQUEST",
        `${table}: a row of a tenant table is written in a handler (it gets the event's tenant) or in a tenant's view (asTenant); outside both nothing sets its ${TENANT_COLUMN}`,
      );
    return { ...row, [TENANT_COLUMN]: tenant };
  }

  /**
   * A Kysely write of a declared table, checked as insert/upsert rows are:
   * no two names of one column, and in a tenant table `tenant_uuid` only
   * spelled so, only in an insert, and only with the scope's tenant (an
   * update never moves a row to another tenant).
   */
  /**
   * Checks a Kysely write; answers the tenant its update or delete is held to
   * (a tenant table written by a writer with a tenant: a handler of a tenant's
   * event, a tenant's view), so it reaches no other tenant's rows. A writer
   * without one (trusted code, a handler of an event without a tenant) is not held.
   */
  #checkKyselyWrite(w: KyselyWrite): string | undefined {
    if (!this.#port.names.includes(w.table)) return undefined;
    const tenantTable = this.#port.tenancy(w.table) === "tenant";
    const owner = tenantTable && this.tenantUuid !== "" ? this.tenantUuid : undefined;
    if (w.kind === "delete") return owner;
    const seen = new Map<string, string>();
    w.columns.forEach((c, i) => {
      const folded = c.toLowerCase();
      const other = seen.get(folded);
      if (other !== undefined)
        throw new MnemeError("INVALID_REQUEST", `${w.table}: columns ${other} and ${c} name one column (names ignore case in SQLite)`);
      seen.set(folded, c);
      if (!tenantTable || folded !== TENANT_COLUMN) return;
      if (w.kind === "update" || c !== TENANT_COLUMN)
        throw new MnemeError("INVALID_REQUEST", `${w.table}: a write cannot set ${c}: a row keeps the tenant it was inserted with`);
      const tenant = this.tenantUuid;
      for (const row of w.rows)
        if (tenant === undefined || row[i] !== tenant)
          throw new MnemeError(
            "INVALID_REQUEST",
            `${w.table}: an inserted row's ${TENANT_COLUMN} must be the tenant of the event being handled (this.sql.tenantUuid)`,
          );
    });
    return w.kind === "update" ? owner : undefined;
  }

  #placeholders(n: number): string {
    const pg = this.#port.access().dialect === "postgres";
    return Array.from({ length: n }, (_, i) => (pg ? `$${i + 1}` : "?")).join(", ");
  }
}
