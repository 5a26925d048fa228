import { MnemeError } from "../model/errors.js";
import { type ChainVerification, verifyEventChain } from "../store/event-chain.js";
import { checkStoreFormat, STORE_FORMAT, type StoreFormatRecord } from "../store/store-format.js";
import { storeDigest, TableDigester, type TableDigest } from "./copy-digest.js";
import { withArchivedEvents } from "./archived-endpoint.js";
import type { CopyEndpoint, CopyTableProgress } from "./copy-endpoint.js";
import { CHECKPOINTS_TABLE, COPY_TABLES, type CopyRow, type CopyTable, KEY_TABLES, STORE_FORMAT_TABLE } from "./copy-tables.js";
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
  /** Where the source's archive of old events is now, when it was moved after `mneme store archive`. Default: where the source recorded it. */
  readonly archiveDirectory?: string;
}

/** Where a copy is. */
export interface CopyProgress {
  /** "chain": the source's hash chain being verified before the copy, and the target's after it. */
  readonly phase: "copy" | "verify" | "chain";
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
  /**
   * The hash chain of the events on each side (see src/store/event-chain.ts): the source's verified in the
   * snapshot before anything is copied, the target's after (recomputed over the target's own stored texts,
   * so its hashes differ from the source's when the backends differ; positions are kept, so the heads'
   * positions are equal).
   */
  readonly chain: { readonly source: ChainVerification; readonly target: ChainVerification };
  /** True when every table has the same rows and digest on both sides and both chains verify up to the same position. */
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
 * ends in the same state as an uninterrupted one; a finished copy, or one
 * whose target was changed since, is never resumed (CONFLICT). A key the
 * target or the source marks forgotten is never written. See docs/scaling.md.
 * @example
 * const report = await copyStore({ from: "app.db", to: "postgres://u@db:5432/app?schema=app" });
 * if (!report.verified) process.exitCode = 1;
 */
export async function copyStore(opts: CopyStoreOptions): Promise<CopyStoreReport> {
  const started = performance.now();
  const pageSize = opts.pageSize ?? 2000;
  if (!Number.isInteger(pageSize) || pageSize < 1 || pageSize > 100_000)
    throw new MnemeError("INVALID_REQUEST", `store copy: pageSize must be an integer 1..100000, got ${String(pageSize)}`);
  const source = withArchivedEvents(
    openEndpoint(opts.from, "source"),
    opts.archiveDirectory === undefined ? {} : { archiveDirectory: opts.archiveDirectory },
  );
  let target: CopyEndpoint | undefined;
  try {
    target = openEndpoint(opts.to, "target");
    if (source.description === target.description)
      throw new MnemeError("INVALID_REQUEST", `store copy: the source and the target are the same store (${source.description})`);
    await source.beginSnapshot();
    const format = await sourceFormat(source);
    const sourceChain = await chainOf(source, "source", opts.onProgress);
    if (!sourceChain.ok)
      throw new MnemeError(
        "INVALID_STATE",
        `store copy: the hash chain of ${source.description} is broken at position ${sourceChain.position} (${sourceChain.reason}); ` +
          "nothing was copied: run `mneme store verify` on it, and restore a backup",
      );
    const progress = await prepareTarget(source, target, opts.resume === true);
    const resumed = progress !== undefined;
    const run = { source, target, pageSize, onProgress: opts.onProgress, skip: await sqlTableCheckpoints(source), progress };
    const copied: { table: CopyTable; source: TableDigest; copied: number }[] = [];
    for (const table of COPY_TABLES) copied.push({ table, ...(await copyTable(run, table)) });
    await target.writeStoreFormat(format);
    await target.afterRows();
    const targetChain = await chainOf(target, "target", opts.onProgress);
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
      chain: { source: sourceChain, target: targetChain },
      verified: tables.every((t) => t.matches) && targetChain.ok && targetChain.head.position === sourceChain.head.position,
      restoredFromZero: run.skip,
      seconds: (performance.now() - started) / 1000,
    };
  } finally {
    await source.close();
    await target?.close();
  }
}

/** Verifies a side's hash chain, streaming, with progress as the "chain" phase. */
async function chainOf(
  side: CopyEndpoint,
  which: "source" | "target",
  onProgress: ((p: CopyProgress) => void) | undefined,
): Promise<ChainVerification> {
  const total = await side.count(COPY_TABLES[0]!);
  return verifyEventChain(side, {
    batchSize: 5000,
    onProgress: (done) => onProgress?.({ phase: "chain", table: `events (${which})`, done, total }),
  });
}

/** Opens one side of a copy (or the store `mneme store verify` reads) from its location. */
export function openEndpoint(location: StoreLocation, side: "source" | "target"): CopyEndpoint {
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
 * source and says the copy never finished; creates the tables and writes the
 * marker. On resume, checks that every table holds exactly what the copy
 * wrote (a target used since, a forget included, is CONFLICT) and deletes the
 * keys the source has forgotten since. Resolves the progress to resume from,
 * or undefined for a fresh copy.
 */
async function prepareTarget(
  source: CopyEndpoint,
  target: CopyEndpoint,
  resume: boolean,
): Promise<Map<string, CopyTableProgress> | undefined> {
  const marker = await target.readMarker();
  let rows = 0;
  for (const table of COPY_TABLES) rows += await target.count(table);
  if (marker === undefined && rows === 0) {
    await target.createTables();
    await target.writeMarker({ source: source.description, finishedAt: null });
    return undefined;
  }
  if (!resume)
    throw new MnemeError(
      "CONFLICT",
      `store copy: the target ${target.description} is not empty` +
        (marker === undefined
          ? "; copy into an empty store"
          : marker.finishedAt === null
            ? ` (a copy from ${marker.source} began there; rerun with --resume to continue it)`
            : ` (it holds a finished copy of ${marker.source}); copy into an empty store`),
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
  // A finished copy may have been used since (a forget deletes a key): resuming it would write back what the target let go.
  if (marker.finishedAt !== null)
    throw new MnemeError(
      "CONFLICT",
      `store copy: the copy from ${marker.source} into ${target.description} finished at ${new Date(marker.finishedAt).toISOString()}; ` +
        "--resume continues only an interrupted copy (the target may have been used since): copy into an empty store",
    );
  await target.createTables();
  const progress = await target.readProgress();
  for (const table of COPY_TABLES) {
    const written = progress.get(table.name)?.written ?? 0;
    const holds = await target.count(table);
    if (holds !== written)
      throw new MnemeError(
        "CONFLICT",
        `store copy: the target ${target.description} holds ${holds} rows of ${table.name} where the interrupted copy wrote ${written}: ` +
          "it was changed since (by an app, or a copy of an earlier release), so it cannot be resumed: copy into an empty store",
      );
  }
  // Keys the source forgot after the interrupted run wrote them go now, before anything else is copied.
  const dropped = await target.dropForgottenKeys(await forgottenKeyIds(source));
  if (dropped > 0) return target.readProgress();
  return progress;
}

/** The key ids the source marks forgotten. */
async function forgottenKeyIds(source: CopyEndpoint): Promise<string[]> {
  const table = COPY_TABLES.find((t) => t.name === KEY_TABLES.forgotten);
  const ids: string[] = [];
  if (table === undefined) return ids;
  const at = table.columns.findIndex((c) => c.name === "key_id");
  for await (const page of source.rows(table, 5000)) for (const row of page) if (typeof row[at] === "string") ids.push(row[at]);
  return ids;
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
  /** What an interrupted copy wrote, per table (undefined for a fresh copy). */
  readonly progress: ReadonlyMap<string, CopyTableProgress> | undefined;
}

/**
 * Copies one table: the source's rows in key order, digested all, inserted
 * from the first the target's progress record has not gone past. Each page
 * commits with the record, so an interrupted copy resumes from what it
 * verifiably wrote; a source whose rows changed before that point (its row
 * there has another key) is CONFLICT.
 */
async function copyTable(run: CopyRun, table: CopyTable): Promise<{ source: TableDigest; copied: number }> {
  const total = await run.source.count(table);
  const done = run.progress?.get(table.name);
  const present = done?.sourceRows ?? 0;
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
      if (++seen > present) fresh.push(row);
      else if (seen === present && keyOf(table, row) !== done?.lastKey)
        throw new MnemeError(
          "CONFLICT",
          `store copy: ${run.source.description} changed since the interrupted copy (its ${table.name} differ before row ${present}); ` +
            "stop the app's writers and copy into an empty store",
        );
    }
    if (fresh.length > 0) copied += await run.target.insert(table, fresh, { sourceRows: seen, lastKey: keyOf(table, fresh.at(-1)!) });
    run.onProgress?.({ phase: "copy", table: table.name, done: seen, total });
  }
  if (seen < present)
    throw new MnemeError(
      "CONFLICT",
      `store copy: ${run.source.description} changed since the interrupted copy (its ${table.name} holds ${seen} rows, the copy went past ${present}); ` +
        "stop the app's writers and copy into an empty store",
    );
  return { source: digester.finish(), copied };
}

/** A row's key as the progress record keeps it. */
function keyOf(table: CopyTable, row: CopyRow): string {
  return JSON.stringify(table.key.map((i) => row[i] ?? null));
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
