/**
 * The `node:sqlite` adapter (Node.js 22.16+, Deno): SQLite without a driver
 * package. It presents node:sqlite's `DatabaseSync` with better-sqlite3's
 * semantics, which the engine is written against:
 *
 * - integers: every statement reads them as bigint (node:sqlite throws on an
 *   integer past 2^53 otherwise, and mneme's nanosecond timestamps are near
 *   1.8e18) and hands out the same double better-sqlite3 would, or the bigint
 *   itself with `safeIntegers(true)`;
 * - rows are objects with a plain prototype (node:sqlite's have none), and a
 *   missing row is `undefined`;
 * - raw rows by `setReturnArrays` where the Node.js line has it, else the
 *   object's values in column order;
 * - parameters as better-sqlite3 takes them: arrays spread in place, an
 *   object of named parameters anywhere (node:sqlite wants it first), an
 *   empty byte array an empty blob (Node.js 22 may bind it as NULL);
 * - `reader` from the statement's columns, `readonly` from its compiled
 *   program (node:sqlite exposes neither flag);
 * - `pragma()` by a PRAGMA statement, `inTransaction` by `isTransaction`;
 * - defensive mode on where the line has `enableDefensive` (better-sqlite3
 *   turns it on too), extension loading off.
 */
import { MnemeError } from "../model/errors.js";
import { loadBuiltinModule, runtimeName } from "../store/driver.js";
import {
  ENGINE_DRIVER,
  type NodeSqliteDatabaseLike,
  programWrites,
  type SqliteEngineDriver,
  type SqliteEngineStatement,
} from "./sqlite-driver.js";
import { toStoreError } from "./sqlite-errors.js";

/** node:sqlite's StatementSync, as far as it is used here. */
interface NodeStatement {
  run(...params: unknown[]): { changes: number | bigint; lastInsertRowid: number | bigint };
  get(...params: unknown[]): Record<string, unknown> | unknown[] | undefined;
  all(...params: unknown[]): (Record<string, unknown> | unknown[])[];
  iterate(...params: unknown[]): IterableIterator<Record<string, unknown> | unknown[]>;
  setReadBigInts(on: boolean): void;
  setReturnArrays?(on: boolean): void;
  columns?(): unknown[];
}

interface NodeDatabase extends NodeSqliteDatabaseLike {
  prepare(sql: string): NodeStatement;
  enableDefensive?(on: boolean): void;
}

type NodeDatabaseClass = new (path: string, options?: { timeout?: number; allowExtension?: boolean }) => NodeDatabase;

/** node:sqlite's module: `DatabaseSync`, named `Database` from Node.js 26 on (`DatabaseSync` stays as its alias there). */
interface NodeSqliteModule {
  Database?: NodeDatabaseClass;
  DatabaseSync?: NodeDatabaseClass;
}

/** node:sqlite's database class, or a MnemeError naming the runtimes that have it. */
export function loadNodeSqlite(): NodeDatabaseClass {
  const mod = loadBuiltinModule<NodeSqliteModule>("node:sqlite");
  const Database = mod?.Database ?? mod?.DatabaseSync;
  if (typeof Database !== "function")
    throw new MnemeError(
      "INVALID_REQUEST",
      `mneme/sqlite: the node:sqlite driver is not available in this runtime (${runtimeName()}): it needs Node.js 22.16 or later, or Deno 2; ` +
        'install better-sqlite3 (npm install better-sqlite3@^13) and use driver: "better-sqlite3", or on Bun driver: "bun:sqlite"',
    );
  return Database;
}

/** Opens `filename` with node:sqlite (its busy timeout set to `busyTimeoutMs`). */
export function openNodeSqlite(filename: string, busyTimeoutMs: number): SqliteEngineDriver {
  const Database = loadNodeSqlite();
  let db: NodeDatabase;
  try {
    db = new Database(filename, { timeout: busyTimeoutMs, allowExtension: false });
  } catch (e) {
    throw toStoreError(e, `opening ${filename}`);
  }
  try {
    const driver = new NodeSqliteDriver(db, filename);
    db.enableDefensive?.(true);
    return driver;
  } catch (e) {
    db.close();
    throw e;
  }
}

/** A node:sqlite `DatabaseSync` the caller opened. */
export function wrapNodeSqlite(db: NodeSqliteDatabaseLike): SqliteEngineDriver {
  return new NodeSqliteDriver(db as NodeDatabase, db.location() ?? ":memory:");
}

/** Tells a node:sqlite `DatabaseSync` by its shape. */
export function isNodeSqliteDatabase(x: object): x is NodeSqliteDatabaseLike {
  const d = x as Partial<NodeSqliteDatabaseLike>;
  return typeof d.prepare === "function" && typeof d.exec === "function" && typeof d.location === "function" && "isOpen" in d;
}

class NodeSqliteDriver implements SqliteEngineDriver {
  readonly [ENGINE_DRIVER] = true;
  readonly driverName = "node:sqlite" as const;

  constructor(
    readonly native: NodeDatabase,
    readonly name: string,
  ) {
    if (typeof native.isTransaction !== "boolean")
      throw new MnemeError(
        "INVALID_REQUEST",
        `mneme/sqlite: this node:sqlite (${runtimeName()}) has no isTransaction: the node:sqlite driver needs Node.js 22.16 or later`,
      );
  }

  get open(): boolean {
    return this.native.isOpen;
  }

  get inTransaction(): boolean {
    return this.native.isTransaction;
  }

  prepare(sql: string): SqliteEngineStatement {
    return new NodeSqliteStatement(this, this.native.prepare(sql), sql);
  }

  exec(sql: string): void {
    this.native.exec(sql);
  }

  pragma(source: string, options?: { simple?: boolean }): unknown {
    const st = this.prepare(`PRAGMA ${source}`);
    if (options?.simple !== true) return st.all();
    const row = st.raw(true).get() as unknown[] | undefined;
    return row?.[0];
  }

  close(): void {
    this.native.close();
  }
}

class NodeSqliteStatement implements SqliteEngineStatement {
  #raw = false;
  /** Raw rows asked for on a line without setReturnArrays: taken from the objects. */
  #rawByValues = false;
  #safe = false;
  #reader: boolean | undefined;
  #readonly: boolean | undefined;
  /** Integers are read as bigint (and converted): once one did not fit a number, or from the start (see #needsBigInts). */
  #bigints = false;

  constructor(
    private readonly db: NodeSqliteDriver,
    private readonly st: NodeStatement,
    private readonly sql: string,
  ) {}

  /**
   * Integers as bigint from the first row on: for safeIntegers, and for a
   * write that returns rows (RETURNING), which must not run twice. Other
   * statements read numbers and switch when one is too large (#read).
   */
  #needsBigInts(): boolean {
    return this.#safe || RETURNING.test(this.sql);
  }

  #useBigInts(): void {
    if (this.#bigints) return;
    this.st.setReadBigInts(true);
    this.#bigints = true;
  }

  /**
   * Reads with numbers first (no bigint per value); an integer past 2^53
   * makes node:sqlite throw ERR_OUT_OF_RANGE, and the statement, one that
   * writes nothing, runs again with bigints, for good.
   */
  #read<R>(read: () => R): R {
    if (!this.#bigints && this.#needsBigInts()) this.#useBigInts();
    if (this.#bigints) return read();
    try {
      return read();
    } catch (e) {
      if ((e as { code?: unknown } | null)?.code !== "ERR_OUT_OF_RANGE") throw e;
      this.#useBigInts();
      return read();
    }
  }

  raw(toggle = true): this {
    this.#raw = toggle;
    if (typeof this.st.setReturnArrays === "function") this.st.setReturnArrays(toggle);
    else this.#rawByValues = toggle;
    return this;
  }

  safeIntegers(toggle = true): this {
    this.#safe = toggle;
    return this;
  }

  get reader(): boolean {
    if (this.#reader === undefined) {
      this.#reader =
        typeof this.st.columns === "function" ? this.st.columns().length > 0 : this.#program().some((o) => o.opcode === "ResultRow");
    }
    return this.#reader;
  }

  get readonly(): boolean {
    this.#readonly ??= !programWrites(this.#program());
    return this.#readonly;
  }

  run(...params: unknown[]): { changes: number; lastInsertRowid: number | bigint } {
    const r = this.st.run(...spread(params));
    return { changes: Number(r.changes), lastInsertRowid: this.#safe ? BigInt(r.lastInsertRowid) : Number(r.lastInsertRowid) };
  }

  get(...params: unknown[]): unknown {
    const args = spread(params);
    const row = this.#read(() => this.st.get(...args));
    return row === undefined ? undefined : this.#row(row);
  }

  all(...params: unknown[]): unknown[] {
    const args = spread(params);
    const rows = this.#read(() => this.st.all(...args));
    for (let i = 0; i < rows.length; i++) rows[i] = this.#row(rows[i] as Record<string, unknown> | unknown[]) as Record<string, unknown>;
    return rows;
  }

  *iterate(...params: unknown[]): IterableIterator<unknown> {
    // Rows handed out one at a time cannot be read again: bigints from the start.
    this.#useBigInts();
    for (const row of this.st.iterate(...spread(params))) yield this.#row(row);
  }

  #row(row: Record<string, unknown> | unknown[]): unknown {
    if (this.#raw) {
      const values = this.#rawByValues ? Object.values(row) : (row as unknown[]);
      if (!this.#safe) for (let i = 0; i < values.length; i++) if (typeof values[i] === "bigint") values[i] = Number(values[i]);
      return values;
    }
    // node:sqlite's row has no prototype: for-in sees exactly its columns.
    const obj = row as Record<string, unknown>;
    const out: Record<string, unknown> = {};
    const safe = this.#safe;
    for (const k in obj) {
      const v = obj[k];
      out[k] = !safe && typeof v === "bigint" ? Number(v) : v;
    }
    return out;
  }

  #program(): { opcode: string; p2: number | bigint }[] {
    return this.db.native.prepare(`EXPLAIN ${this.sql}`).all() as unknown as { opcode: string; p2: number | bigint }[];
  }
}

/** A write that returns rows: read with bigints from the start, so it never runs twice. */
const RETURNING = /\bRETURNING\b/i;

/**
 * A zero-length blob that node:sqlite binds as a blob: on Node.js 22 a
 * zero-length view of an ArrayBuffer without memory (`new ArrayBuffer(0)`,
 * `TextEncoder().encode("")`) is bound as NULL, this one is not.
 */
const EMPTY_BLOB = new Uint8Array(0);

/**
 * Parameters as better-sqlite3 takes them, in node:sqlite's order: the items
 * of an array parameter bind in its place, an object of named parameters may
 * stand anywhere (node:sqlite wants it first), and an empty byte array is an
 * empty blob, never NULL.
 */
function spread(params: unknown[]): unknown[] {
  if (params.length === 1 && Array.isArray(params[0])) return spread(params[0] as unknown[]);
  // The common case (strings, numbers, null, bytes) is returned as it is, after one look at each.
  let plain = true;
  for (let i = 0; i < params.length; i++) {
    const p = params[i];
    if (typeof p === "object" && p !== null && (!ArrayBuffer.isView(p) || p.byteLength === 0)) {
      plain = false;
      break;
    }
  }
  if (plain) return params;
  let out = params.some((p) => Array.isArray(p)) ? params.flat(1) : params;
  out = out.map((p) => (ArrayBuffer.isView(p) && p.byteLength === 0 ? EMPTY_BLOB : p));
  const named = out.findIndex(isNamedParameters);
  if (named > 0) out = [out[named], ...out.slice(0, named), ...out.slice(named + 1)];
  return out;
}

function isNamedParameters(p: unknown): boolean {
  return typeof p === "object" && p !== null && !Array.isArray(p) && !ArrayBuffer.isView(p);
}
