import { MnemeError } from "../model/errors.js";
import { checkStoreFormat, STORE_FORMAT, type StoreFormatRecord } from "../store/store-format.js";
import { storeDigest, TableDigester, type TableDigest } from "./copy-digest.js";
import type { CopyEndpoint } from "./copy-endpoint.js";
import { CHECKPOINTS_TABLE, COPY_TABLES, type CopyRow, type CopyTable, STORE_FORMAT_TABLE } from "./copy-tables.js";
import { parsePostgresUrl, PostgresCopyEndpoint, type PostgresCopyLocation } from "./postgres-copy-endpoint.js";
import { SqliteCopyEndpoint, type SqliteCopyLocation } from "./sqlite-copy-endpoint.js";

/** A store to copy from or to: a SQLite file, or a Postgres schema. A string is a `postgres://` URL (`?schema=`, default public) or a file name. */
export type StoreLocation = string | { readonly sqlite: SqliteCopyLocation } | { readonly postgres: PostgresCopyLocation };

/** Options of {@link copyStore}. */
export interface CopyStoreOptions {
  readonly from: StoreLocation;
  readonly to: StoreLocation;
  /** Continue a copy into this target that was interrupted (refused for any other non-empty target). */
  readonly resume?: boolean;
  /** Rows per read page and per insert transaction. Default 2000. */
  readonly pageSize?: number;
  /** Told after each page copied and each table verified. */
  readonly onProgress?: (progress: CopyProgress) => void;
}

/** Where a copy is. */
export interface CopyProgress {
  readonly phase: "copy" | "verify";
  readonly table: string;
  /** Rows of this table done (read in the verify phase). */
  readonly done: number;
  /** Rows of this table in the source. */
  readonly total: number;
}

/** One table of a copy: what each side holds, and how many rows this run wrote. */
export interface CopyTableReport {
  readonly table: string;
  readonly source: TableDigest;
  readonly target: TableDigest;
  /** Rows this run inserted (fewer than the source holds when it resumed an interrupted copy). */
  readonly copied: number;
  readonly matches: boolean;
}

/** What {@link copyStore} did and found. */
export interface CopyStoreReport {
  readonly from: string;
  readonly to: string;
  /** True when an interrupted copy was continued. */
  readonly resumed: boolean;
  readonly tables: readonly CopyTableReport[];
  /** SHA-256 over every table's rows and digest, per side; equal when the copy is verified. */
  readonly sourceDigest: string;
  readonly targetDigest: string;
  /** True when every table has the same rows and digest on both sides. */
  readonly verified: boolean;
  /** Readmodels that keep SQL tables: not copied; their checkpoints are left out, so they restore from zero on the target. */
  readonly restoredFromZero: readonly string[];
  readonly seconds: number;
}

/**
 * Copies a whole store, SQLite or Postgres, into an empty SQLite file or
 * Postgres schema: events with their positions, command records, keys of
 * personal data (forgotten subjects stay forgotten), snapshots, readmodel
 * documents and checkpoints (scheduled commands, outbox entries and dead
 * letters are documents), logs and the store format record; then reads the
 * target back and compares its counts and a SHA-256 per table with the
 * source's (digested as it was read). The source is read
 * in one snapshot (writes after it began are not copied: stop the app's
 * writers first). A non-empty target is refused (CONFLICT, nothing written)
 * unless `resume` continues an interrupted copy of the same source, which
 * ends in the same state as an uninterrupted one. See docs/scaling.md.
 * @example
 * const report = await copyStore({ from: "app.db", to: "postgres://u@db:5432/app?schema=app" });
 * if (!report.verified) process.exitCode = 1;
 */
export async function copyStore(opts: CopyStoreOptions): Promise<CopyStoreReport> {
  const started = performance.now();
  const pageSize = opts.pageSize ?? 2000;
  if (!Number.isInteger(pageSize) || pageSize < 1 || pageSize > 100_000)
    throw new MnemeError("INVALID_REQUEST", `store copy: pageSize must be an integer 1..100000, got ${String(pageSize)}`);
  const source = openEndpoint(opts.from, "source");
  let target: CopyEndpoint | undefined;
  try {
    target = openEndpoint(opts.to, "target");
    if (source.description === target.description)
      throw new MnemeError("INVALID_REQUEST", `store copy: the source and the target are the same store (${source.description})`);
    await source.beginSnapshot();
    const format = await sourceFormat(source);
    const resumed = await prepareTarget(source, target, opts.resume === true);
    const run = { source, target, pageSize, onProgress: opts.onProgress, skip: await sqlTableCheckpoints(source) };
    const copied: { table: CopyTable; source: TableDigest; copied: number }[] = [];
    for (const table of COPY_TABLES) copied.push({ table, ...(await copyTable(run, table)) });
    await target.writeStoreFormat(format);
    await target.afterRows();
    await target.writeMarker({ source: source.description, finishedAt: Date.now() });
    const tables: CopyTableReport[] = [];
    for (const c of copied) {
      const digest = await digestOf(target, c.table, (done) =>
        opts.onProgress?.({ phase: "verify", table: c.table.name, done, total: c.source.rows }),
      );
      tables.push(tableReport(c.table.name, c.source, digest, c.copied));
    }
    tables.push(tableReport(STORE_FORMAT_TABLE.name, formatDigest(format), formatDigest(await target.storeFormat()), 1));
    return {
      from: source.description,
      to: target.description,
      resumed,
      tables,
      sourceDigest: storeDigest(tables.map((t) => ({ table: t.table, digest: t.source }))),
      targetDigest: storeDigest(tables.map((t) => ({ table: t.table, digest: t.target }))),
      verified: tables.every((t) => t.matches),
      restoredFromZero: run.skip,
      seconds: (performance.now() - started) / 1000,
    };
  } finally {
    await source.close();
    await target?.close();
  }
}

function openEndpoint(location: StoreLocation, side: "source" | "target"): CopyEndpoint {
  if (typeof location === "string") {
    if (location === "") throw new MnemeError("INVALID_REQUEST", `store copy: the ${side} is empty`);
    if (/^postgres(ql)?:\/\//i.test(location)) return new PostgresCopyEndpoint(parsePostgresUrl(location));
    const filename = location.replace(/^sqlite:/i, "");
    return side === "source" ? SqliteCopyEndpoint.source({ filename }) : SqliteCopyEndpoint.target({ filename });
  }
  if (typeof location === "object" && location !== null && "sqlite" in location)
    return side === "source" ? SqliteCopyEndpoint.source(location.sqlite) : SqliteCopyEndpoint.target(location.sqlite);
  if (typeof location === "object" && location !== null && "postgres" in location) return new PostgresCopyEndpoint(location.postgres);
  throw new MnemeError("INVALID_REQUEST", `store copy: the ${side} must be a file name, a postgres:// URL, { sqlite } or { postgres }`);
}

/** The source's format record: it must be a store of this release's format (an older one is upgraded by starting the app once). */
async function sourceFormat(source: CopyEndpoint): Promise<StoreFormatRecord> {
  const format = await source.storeFormat();
  if (format === undefined || !(await source.hasTable("events")))
    throw new MnemeError("NOT_FOUND", `store copy: ${source.description} holds no mneme store (no store format record or no events table)`);
  checkStoreFormat(format, `store copy: ${source.description}`);
  if (format.format !== STORE_FORMAT)
    throw new MnemeError(
      "INVALID_STATE",
      `store copy: ${source.description} is in store format ${format.format}; this release copies format ${STORE_FORMAT}: ` +
        "start the app on it once with this release (that upgrades it in place), then copy",
    );
  return format;
}

/**
 * Refuses a target that holds data, unless `resume` and its marker names this
 * source; creates the tables and writes the marker. True when resuming.
 */
async function prepareTarget(source: CopyEndpoint, target: CopyEndpoint, resume: boolean): Promise<boolean> {
  const marker = await target.readMarker();
  let rows = 0;
  for (const table of COPY_TABLES) rows += await target.count(table);
  if (marker !== undefined || rows > 0) {
    if (!resume)
      throw new MnemeError(
        "CONFLICT",
        `store copy: the target ${target.description} is not empty` +
          (marker === undefined
            ? "; copy into an empty store"
            : ` (a copy from ${marker.source} began there; rerun with --resume to continue it)`),
      );
    if (marker === undefined)
      throw new MnemeError(
        "CONFLICT",
        `store copy: the target ${target.description} holds data that no copy wrote; --resume continues only a copy`,
      );
    if (marker.source !== source.description)
      throw new MnemeError(
        "CONFLICT",
        `store copy: the target ${target.description} holds a copy of ${marker.source}, not of ${source.description}`,
      );
  }
  await target.createTables();
  if (marker === undefined) await target.writeMarker({ source: source.description, finishedAt: null });
  return marker !== undefined;
}

/** The checkpoints of SQL-table readmodels (their own and their next generation's): left out, so they restore from zero. */
async function sqlTableCheckpoints(source: CopyEndpoint): Promise<string[]> {
  return (await source.sqlTableReadmodels()).sort();
}

interface CopyRun {
  readonly source: CopyEndpoint;
  readonly target: CopyEndpoint;
  readonly pageSize: number;
  readonly onProgress: ((p: CopyProgress) => void) | undefined;
  readonly skip: readonly string[];
}

/**
 * Copies one table: the source's rows in key order, digested all, inserted
 * from the first the target lacks. Each page commits on its own, so a target
 * interrupted at any point holds a prefix of the source in key order, and its
 * row count says where to continue.
 */
async function copyTable(run: CopyRun, table: CopyTable): Promise<{ source: TableDigest; copied: number }> {
  const total = await run.source.count(table);
  const present = await run.target.count(table);
  const digester = new TableDigester(table);
  const keep = table === CHECKPOINTS_TABLE ? (row: CopyRow) => !isSkipped(run.skip, row[0]) : () => true;
  let seen = 0;
  let copied = 0;
  run.onProgress?.({ phase: "copy", table: table.name, done: 0, total });
  for await (const page of run.source.rows(table, run.pageSize)) {
    const fresh: CopyRow[] = [];
    for (const row of page) {
      if (!keep(row)) continue;
      digester.add(row);
      if (seen++ >= present) fresh.push(row);
    }
    if (fresh.length > 0) await run.target.insert(table, fresh);
    copied += fresh.length;
    run.onProgress?.({ phase: "copy", table: table.name, done: seen, total });
  }
  return { source: digester.finish(), copied };
}

function isSkipped(readmodels: readonly string[], handler: CopyRow[number] | undefined): boolean {
  return typeof handler === "string" && readmodels.some((r) => handler === r || handler.startsWith(`${r}#`));
}

async function digestOf(side: CopyEndpoint, table: CopyTable, progress: (done: number) => void): Promise<TableDigest> {
  const digester = new TableDigester(table);
  let done = 0;
  for await (const page of side.rows(table, 5000)) {
    for (const row of page) digester.add(row);
    done += page.length;
    progress(done);
  }
  return digester.finish();
}

function formatDigest(record: StoreFormatRecord | undefined): TableDigest {
  const digester = new TableDigester(STORE_FORMAT_TABLE);
  if (record !== undefined)
    digester.add(["1", String(record.format), String(record.lowestWriterFormat), record.upgradedBy, String(record.upgradedAt)]);
  return digester.finish();
}

function tableReport(table: string, source: TableDigest, target: TableDigest, copied: number): CopyTableReport {
  return { table, source, target, copied, matches: source.rows === target.rows && source.sha256 === target.sha256 };
}
