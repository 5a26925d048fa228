import { resolve } from "node:path";
import { MnemeError } from "../model/errors.js";
import type { ChainRow } from "../store/event-chain.js";
import { refuseBlocked } from "./archive-checks.js";
import { ArchiveRangeWriter, encodeRow, readManifest, readSegment } from "./archive-format.js";
import type { ArchivedRange, EventArchiveStore } from "./archive-index.js";
import { ArchiveReader } from "./archive-reader.js";

/** Options of {@link archiveEvents}. */
export interface ArchiveEventsOptions {
  /** The boundary: events at positions below it (a number), or created before it (a Date), are archived. */
  readonly before: number | Date;
  /** The archive directory (a `range-*` directory is made in it per archive run). */
  readonly to: string;
  /** Events per segment file. Default 20000. */
  readonly segmentEvents?: number;
  /** Told after each segment written and verified. */
  readonly onProgress?: (phase: "write" | "verify", events: number) => void;
}

/** What {@link archiveEvents} did. */
export interface ArchiveEventsReport {
  readonly store: string;
  /** Events moved to the files (0: nothing to archive, see `reason`). */
  readonly archived: number;
  /** The range recorded, when events were archived. */
  readonly range?: ArchivedRange;
  readonly reason?: string;
  readonly seconds: number;
}

/**
 * Moves the events of `store` below the boundary to verified archive files
 * (the library behind `mneme store archive`):
 *
 * 1. refuses (CONFLICT naming each) while a handler's checkpoint is below the
 *    boundary or a snapshot's later events would move;
 * 2. writes the segments and the manifest into `<to>/range-<a>-<b>.partial`,
 *    each file fsynced, and renames the directory into place;
 * 3. reads every file back (SHA-256 against the manifest) and compares each
 *    archived row, field by field, with the database's;
 * 4. in one transaction: checks the blockers and the rows again, deletes the
 *    archived rows and records the range (manifest SHA-256, chain head) and
 *    its stream index.
 *
 * A process killed at any point leaves the store whole: before step 4
 * commits nothing in the database changed (the files written are not
 * referenced, and the next run writes them again); after it, the range is
 * archived. Each run archives from the end of the last range; the first and
 * newest event of each aggregate and tagged events stay in the database.
 */
export async function archiveEvents(store: EventArchiveStore, opts: ArchiveEventsOptions): Promise<ArchiveEventsReport> {
  const started = performance.now();
  const segmentEvents = opts.segmentEvents ?? 20_000;
  if (!Number.isInteger(segmentEvents) || segmentEvents < 1)
    throw new MnemeError("INVALID_REQUEST", `store archive: segmentEvents must be an integer >= 1, got ${String(segmentEvents)}`);
  if (typeof opts.to !== "string" || opts.to === "")
    throw new MnemeError("INVALID_REQUEST", "store archive: the archive directory (--to) is required");
  const done = (archived: number, extra: { range?: ArchivedRange; reason?: string }): ArchiveEventsReport => ({
    store: store.description,
    archived,
    ...extra,
    seconds: (performance.now() - started) / 1000,
  });
  await store.init();
  const after = (await store.ranges()).at(-1)?.toPosition ?? 0;
  const head = await store.headPosition();
  const before = await boundary(store, opts.before, head);
  // The newest event stays (the chain's head, which the next append links to): the range ends below it.
  const to = Math.min(before - 1, head - 1);
  if (to <= after) return done(0, { reason: `no event below position ${before} is left to archive (archived up to position ${after})` });
  refuseBlocked(await store.blockers(after, to));

  const dir = resolve(opts.to);
  const writer = new ArchiveRangeWriter(dir, after, to, store.description);
  const positions: number[] = [];
  const hashes: string[] = [];
  const streams = new Map<string, { first: number; last: number }>();
  let segment: ChainRow[] = [];
  let segmentIndex = 0;
  const flush = (): void => {
    if (segment.length === 0) return;
    writer.writeSegment(segment);
    segment = [];
    segmentIndex++;
    opts.onProgress?.("write", positions.length);
  };
  let written: { sha256: string } | undefined;
  try {
    for await (const page of store.archivable(after, to, 5000)) {
      for (const r of page) {
        if (r.hash === null)
          throw new MnemeError(
            "INVALID_STATE",
            `store archive: the event at position ${r.position} has no hash (start this release on the store first)`,
          );
        positions.push(r.position);
        hashes.push(r.hash);
        const s = streams.get(r.aggregateUuid);
        if (s === undefined) streams.set(r.aggregateUuid, { first: segmentIndex, last: segmentIndex });
        else s.last = segmentIndex;
        segment.push(r);
        if (segment.length === segmentEvents) flush();
      }
    }
    flush();
    if (positions.length === 0) {
      writer.abandon();
      return done(0, {
        reason: `every event of positions ${after + 1} to ${to} stays in the database (the first and newest of its aggregate, or tagged)`,
      });
    }
    written = writer.finish();
  } catch (e) {
    writer.abandon();
    throw e;
  }
  const manifest = readManifest(writer.directory, written.sha256);
  await verifyAgainstStore(store, writer.directory, manifest.segments, after, to, opts.onProgress);
  const range: ArchivedRange = {
    fromPosition: after,
    toPosition: to,
    directory: writer.directory,
    manifestSha256: written.sha256,
    events: positions.length,
    chainHead: manifest.chainHead,
  };
  await store.commit({ range, positions, streams }, hashes);
  return done(positions.length, { range });
}

/** The position of the boundary: a number as given, a date as the first event created at or after it. */
async function boundary(store: EventArchiveStore, before: number | Date, head: number): Promise<number> {
  if (before instanceof Date) {
    const ms = before.getTime();
    if (Number.isNaN(ms)) throw new MnemeError("INVALID_REQUEST", "store archive: --before is not a valid date");
    return (await store.firstPositionAt(BigInt(ms) * 1_000_000n)) ?? head + 1;
  }
  if (!Number.isInteger(before) || before < 1)
    throw new MnemeError("INVALID_REQUEST", `store archive: --before must be a position >= 1 or an ISO date, got ${String(before)}`);
  return before;
}

/** Reads the files back and compares every archived row with the database's row at its position. */
async function verifyAgainstStore(
  store: EventArchiveStore,
  directory: string,
  segments: ReturnType<typeof readManifest>["segments"],
  after: number,
  to: number,
  onProgress: ArchiveEventsOptions["onProgress"],
): Promise<void> {
  const db = store.readChain({ afterPosition: after, batchSize: 5000 })[Symbol.asyncIterator]();
  let page: ChainRow[] = [];
  let at = 0;
  let checked = 0;
  const nextStored = async (): Promise<ChainRow | undefined> => {
    while (at >= page.length) {
      const n = await db.next();
      if (n.done === true) return undefined;
      page = n.value;
      at = 0;
    }
    return page[at++];
  };
  try {
    for (const seg of segments) {
      for (const r of readSegment(directory, seg)) {
        let stored = await nextStored();
        while (stored !== undefined && stored.position < r.position) stored = await nextStored();
        if (stored === undefined || stored.position > to || encodeRow(stored) !== encodeRow(r)) {
          throw new MnemeError(
            "STORE_ERROR",
            `store archive: the archived event at position ${r.position} does not read back as the database holds it; nothing was removed` +
              (process.env.MNEME_DEBUG ? JSON.stringify([stored, r]) : ""),
          );
        }
        checked++;
      }
      onProgress?.("verify", checked);
    }
  } finally {
    await db.return?.();
  }
}

/** Options of {@link restoreEvents}. */
export interface RestoreEventsOptions {
  /** Where the range directories are now, when they were moved after archiving. Default: where the store recorded them. */
  readonly from?: string;
}

/** What {@link restoreEvents} did. */
export interface RestoreEventsReport {
  readonly store: string;
  readonly restored: number;
  readonly ranges: readonly ArchivedRange[];
  readonly seconds: number;
}

/**
 * Brings every archived event back into the database, as stored (positions,
 * texts, hashes), in one transaction that also drops the ranges' records:
 * the store is then what it was before the first archive. Every file is
 * read and checked (SHA-256) before anything is written; the files are left
 * in place (they are no longer referenced: delete them when you like).
 */
export async function restoreEvents(store: EventArchiveStore, opts: RestoreEventsOptions = {}): Promise<RestoreEventsReport> {
  const started = performance.now();
  await store.init();
  const ranges = await store.ranges();
  const reader = new ArchiveReader(
    opts.from === undefined ? { cachedSegments: 2 } : { archiveDirectory: resolve(opts.from), cachedSegments: 2 },
  );
  for (const range of ranges) {
    const m = reader.manifest(range);
    for (let i = 0; i < m.segments.length; i++) reader.segmentRows(range, i);
  }
  const restored =
    ranges.length === 0
      ? 0
      : await store.restore(ranges, function* (range) {
          const n = reader.manifest(range).segments.length;
          for (let i = 0; i < n; i++) yield reader.segmentRows(range, i);
        });
  return { store: store.description, restored, ranges, seconds: (performance.now() - started) / 1000 };
}
