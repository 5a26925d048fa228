import { basename, join } from "node:path";
import type { ChainRow } from "../store/event-chain.js";
import { type ArchiveManifest, readManifest, readSegment } from "./archive-format.js";
import type { ArchivedRange } from "./archive-index.js";

/** Options of {@link ArchiveReader}. */
export interface ArchiveReaderOptions {
  /**
   * Where the archive's range directories are now, when they were moved after archiving (the directory given to
   * `--to`, holding `range-*` directories). Default: where the database recorded them.
   */
  readonly archiveDirectory?: string;
  /** Decoded segments kept in memory (a restore from zero streams through them in order). Default 8. */
  readonly cachedSegments?: number;
}

/** A decoded segment, with its rows by aggregate built on first use. */
interface DecodedSegment {
  readonly rows: ChainRow[];
  byAggregate?: Map<string, ChainRow[]>;
  byEventUuid?: Map<string, ChainRow>;
}

/**
 * Reads archived rows from the files, checking each file's SHA-256 against
 * its manifest and each manifest's against the database's record before
 * using it: a missing, moved or changed file is a STORE_ERROR naming it,
 * never fewer events. Keeps the manifests and a few decoded segments.
 */
export class ArchiveReader {
  readonly #archiveDirectory: string | undefined;
  readonly #maxSegments: number;
  readonly #manifests = new Map<string, ArchiveManifest>();
  readonly #segments = new Map<string, DecodedSegment>();

  constructor(opts: ArchiveReaderOptions = {}) {
    this.#archiveDirectory = opts.archiveDirectory;
    this.#maxSegments = Math.max(1, opts.cachedSegments ?? 8);
  }

  /** The directory a range's files are read from. */
  directoryOf(range: ArchivedRange): string {
    return this.#archiveDirectory === undefined ? range.directory : join(this.#archiveDirectory, basename(range.directory));
  }

  manifest(range: ArchivedRange): ArchiveManifest {
    const dir = this.directoryOf(range);
    const key = `${dir}\n${range.manifestSha256}`;
    let m = this.#manifests.get(key);
    if (m === undefined) {
      m = readManifest(dir, range.manifestSha256);
      this.#manifests.set(key, m);
    }
    return m;
  }

  #segment(range: ArchivedRange, index: number): DecodedSegment {
    const manifest = this.manifest(range);
    const seg = manifest.segments[index]!;
    const key = `${this.directoryOf(range)}\n${seg.file}\n${seg.sha256}`;
    let d = this.#segments.get(key);
    if (d !== undefined) {
      // Most recently used last.
      this.#segments.delete(key);
      this.#segments.set(key, d);
      return d;
    }
    d = { rows: readSegment(this.directoryOf(range), seg) };
    this.#segments.set(key, d);
    while (this.#segments.size > this.#maxSegments) this.#segments.delete(this.#segments.keys().next().value as string);
    return d;
  }

  /** Every row of a segment (checked). */
  segmentRows(range: ArchivedRange, index: number): ChainRow[] {
    return this.#segment(range, index).rows;
  }

  /**
   * Up to `limit` rows of the range with a position in (after, until] that `keep` accepts, in position order;
   * `done` when none is left in the window after them.
   */
  rowsIn(
    range: ArchivedRange,
    after: number,
    until: number,
    limit: number,
    keep: (r: ChainRow) => boolean,
  ): { rows: ChainRow[]; done: boolean } {
    const out: ChainRow[] = [];
    const segments = this.manifest(range).segments;
    for (let s = 0; s < segments.length; s++) {
      const seg = segments[s]!;
      if (seg.lastPosition <= after) continue;
      if (seg.firstPosition > until) break;
      const rows = this.#segment(range, s).rows;
      let i = firstAbove(rows, after);
      for (; i < rows.length; i++) {
        const r = rows[i]!;
        if (r.position > until) return { rows: out, done: true };
        if (!keep(r)) continue;
        if (out.length === limit) return { rows: out, done: false };
        out.push(r);
      }
    }
    return { rows: out, done: true };
  }

  /** The archived rows of an aggregate in the given segments of a range, with a version >= fromVersion. */
  aggregateRows(range: ArchivedRange, first: number, last: number, aggregateUuid: string, fromVersion: number): ChainRow[] {
    const out: ChainRow[] = [];
    for (let s = first; s <= last; s++) {
      const d = this.#segment(range, s);
      if (d.byAggregate === undefined) {
        d.byAggregate = new Map();
        for (const r of d.rows) {
          const list = d.byAggregate.get(r.aggregateUuid);
          if (list === undefined) d.byAggregate.set(r.aggregateUuid, [r]);
          else list.push(r);
        }
      }
      for (const r of d.byAggregate.get(aggregateUuid) ?? []) if (r.version >= fromVersion) out.push(r);
    }
    return out;
  }

  /** The archived rows with these event uuids (a scan of every segment of the ranges). */
  rowsByEventUuid(ranges: readonly ArchivedRange[], uuids: ReadonlySet<string>): ChainRow[] {
    const out: ChainRow[] = [];
    for (const range of ranges) {
      const n = this.manifest(range).segments.length;
      for (let s = 0; s < n && out.length < uuids.size; s++) {
        const d = this.#segment(range, s);
        if (d.byEventUuid === undefined) d.byEventUuid = new Map(d.rows.map((r) => [r.eventUuid, r]));
        for (const u of uuids) {
          const r = d.byEventUuid.get(u);
          if (r !== undefined) out.push(r);
        }
      }
    }
    return out;
  }
}

/** The index of the first row with a position above `after` (rows ascend). */
function firstAbove(rows: readonly ChainRow[], after: number): number {
  let lo = 0;
  let hi = rows.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (rows[mid]!.position <= after) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}
