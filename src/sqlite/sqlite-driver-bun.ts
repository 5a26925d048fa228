/**
 * The `bun:sqlite` adapter: SQLite through Bun's own driver. Its statements
 * already read integers as better-sqlite3 does (numbers unless
 * `safeIntegers`) and carry `reader`/`readonly`; the adapter turns a missing
 * row from `null` into `undefined`, gives raw rows by `values()`, and keeps
 * the open state (Bun's Database throws once closed instead of saying so).
 */
import { MnemeError } from "../model/errors.js";
import { loadBuiltinModule, runtimeName } from "../store/driver.js";
import { type BunSqliteDatabaseLike, ENGINE_DRIVER, type SqliteEngineDriver, type SqliteEngineStatement } from "./sqlite-driver.js";
import { toStoreError } from "./sqlite-errors.js";

/** bun:sqlite's Statement, as far as it is used here. */
interface BunStatement {
  run(...params: unknown[]): { changes: number; lastInsertRowid: number | bigint };
  get(...params: unknown[]): unknown;
  all(...params: unknown[]): unknown[];
  values(...params: unknown[]): unknown[][];
  iterate?(...params: unknown[]): IterableIterator<unknown>;
  safeIntegers(on: boolean): unknown;
  readonly reader?: boolean;
  readonly readonly?: boolean;
  readonly columnNames: string[];
}

interface BunDatabase extends BunSqliteDatabaseLike {
  prepare(sql: string): BunStatement;
}

interface BunSqliteModule {
  Database: new (filename: string, options?: { create?: boolean; readwrite?: boolean }) => BunDatabase;
}

/** bun:sqlite's module, or a MnemeError saying it exists only on Bun. */
export function loadBunSqlite(): BunSqliteModule {
  const mod =
    (process.versions as Record<string, string | undefined>).bun === undefined
      ? undefined
      : loadBuiltinModule<BunSqliteModule>("bun:sqlite");
  if (mod === undefined || typeof mod.Database !== "function")
    throw new MnemeError(
      "INVALID_REQUEST",
      `mneme/sqlite: the bun:sqlite driver exists only on Bun (this is ${runtimeName()}): use driver: "node:sqlite" (Node.js 22.16+, Deno) or "better-sqlite3"`,
    );
  return mod;
}

/** Opens `filename` with bun:sqlite (the busy timeout is the engine's PRAGMA busy_timeout). */
export function openBunSqlite(filename: string): SqliteEngineDriver {
  const { Database } = loadBunSqlite();
  try {
    return new BunSqliteDriver(new Database(filename, { create: true, readwrite: true }));
  } catch (e) {
    throw toStoreError(e, `opening ${filename}`);
  }
}

/** A bun:sqlite `Database` the caller opened. */
export function wrapBunSqlite(db: BunSqliteDatabaseLike): SqliteEngineDriver {
  return new BunSqliteDriver(db as BunDatabase);
}

/** Tells a bun:sqlite `Database` by its shape. */
export function isBunSqliteDatabase(x: object): x is BunSqliteDatabaseLike {
  const d = x as Partial<BunSqliteDatabaseLike>;
  return typeof d.prepare === "function" && typeof d.query === "function" && typeof d.exec === "function" && typeof d.filename === "string";
}

class BunSqliteDriver implements SqliteEngineDriver {
  readonly [ENGINE_DRIVER] = true;
  readonly driverName = "bun:sqlite" as const;
  #open = true;

  constructor(readonly native: BunDatabase) {
    try {
      void native.inTransaction;
    } catch {
      this.#open = false;
    }
  }

  get name(): string {
    return this.native.filename;
  }

  get open(): boolean {
    return this.#open;
  }

  get inTransaction(): boolean {
    return this.#open && this.native.inTransaction;
  }

  prepare(sql: string): SqliteEngineStatement {
    return new BunSqliteStatement(this.native.prepare(sql), /^\s*EXPLAIN\b/i.test(sql));
  }

  exec(sql: string): void {
    this.native.exec(sql);
  }

  pragma(source: string, options?: { simple?: boolean }): unknown {
    const st = this.native.prepare(`PRAGMA ${source}`);
    if (options?.simple !== true) return st.all();
    return st.values()[0]?.[0];
  }

  close(): void {
    this.#open = false;
    this.native.close();
  }
}

class BunSqliteStatement implements SqliteEngineStatement {
  #raw = false;

  /**
   * `explain`: an EXPLAIN program. Read by all() or values(), Bun (1.4) leaves
   * it unreset, and SQLite then counts it as a write in progress: SAVEPOINT and
   * COMMIT fail with SQLITE_BUSY ("SQL statements in progress"). Read to the
   * end by iterate(), it is reset, so its rows are read that way.
   */
  constructor(
    private readonly st: BunStatement,
    private readonly explain = false,
  ) {}

  get reader(): boolean {
    return this.st.reader ?? this.st.columnNames.length > 0;
  }

  get readonly(): boolean {
    return this.st.readonly ?? false;
  }

  raw(toggle = true): this {
    this.#raw = toggle;
    return this;
  }

  safeIntegers(toggle = true): this {
    this.st.safeIntegers(toggle);
    return this;
  }

  run(...params: unknown[]): { changes: number; lastInsertRowid: number | bigint } {
    return this.st.run(...params);
  }

  get(...params: unknown[]): unknown {
    if (this.explain) return this.all(...params)[0];
    const row = this.#raw ? this.st.values(...params)[0] : this.st.get(...params);
    return row ?? undefined;
  }

  all(...params: unknown[]): unknown[] {
    if (this.explain && this.st.iterate !== undefined) {
      const rows = [...this.st.iterate(...params)];
      return this.#raw ? rows.map((r) => Object.values(r as Record<string, unknown>)) : rows;
    }
    return this.#raw ? this.st.values(...params) : this.st.all(...params);
  }

  *iterate(...params: unknown[]): IterableIterator<unknown> {
    if (this.#raw || this.st.iterate === undefined) {
      yield* this.all(...params);
      return;
    }
    yield* this.st.iterate(...params);
  }
}
