import { MnemeError } from "../model/errors.js";
import type { Event, RequestContext } from "../model/types.js";
import { withCausation } from "../store/append-validation.js";
import type { ChainRow } from "../store/event-chain.js";
import type { EventRepository, ReadAllOptions } from "../store/event-repository.js";
import type { PayloadSealing } from "../store/payload-sealing.js";
import { readAllWindow } from "../store/read-all-options.js";
import type { StoreInfo } from "../store/store-info.js";
import type { ArchivedRange, EventArchiveIndex } from "./archive-index.js";
import { ArchiveReader, type ArchiveReaderOptions } from "./archive-reader.js";

/** Options of {@link withArchivedReads}. */
export interface ArchivedReadsOptions extends ArchiveReaderOptions {
  /** How the engine hands back an event stored without payload (SQLite: undefined, Postgres: null), so archived events read the same. */
  readonly absentPayload: null | undefined;
}

/** The reads {@link withArchivedReads} answers over the archive; the repository's own, bound. */
type Inner = Required<Pick<EventRepository, "readAll" | "loadAggregate" | "loadAggregates" | "loadEvents" | "readChain" | "info">> &
  Pick<EventRepository, "sealStoredPayloads">;

/**
 * The read path over archived events: one module for every engine. Makes
 * `repo` answer `readAll`, `loadAggregate(s)`, `loadEvents`, `readChain` and
 * `info` as if the archived events were still in its table, by merging rows
 * of the archive files (see {@link ArchiveReader}) with the database's.
 * Returns the same object (the engine's own class and methods stay, so
 * `instanceof` and joined stores keep working); the repository's methods are
 * wrapped on the instance.
 *
 * - An aggregate load asks the files nothing when the versions the database
 *   holds are contiguous from the one asked for: the archive keeps each
 *   aggregate's first and newest event in the database, so a gap is the only
 *   sign of archived events. A load from a snapshot at or past the archived
 *   versions therefore never opens a file. A gap is filled from the segments
 *   the database's stream index names for the aggregate.
 * - `readAll` and `readChain` merge, page by page, the archived rows of the
 *   window with the database's rows of it; the ranges are read again after
 *   each page, and a page read while an archive or a restore committed is
 *   read again, so a reader never misses events moved under it.
 * - DCB tag reads (`readTagged`) need nothing: tagged events are never archived.
 * - `sealStoredPayloads` of an archived event is INVALID_REQUEST (files are
 *   not rewritten): restore the archive first.
 */
export function withArchivedReads<R extends EventRepository>(repo: R, index: EventArchiveIndex, opts: ArchivedReadsOptions): R {
  const inner: Inner = {
    readAll: repo.readAll.bind(repo),
    loadAggregate: repo.loadAggregate.bind(repo),
    loadAggregates: repo.loadAggregates.bind(repo),
    loadEvents: (repo.loadEvents ?? missing("loadEvents")).bind(repo),
    readChain: (repo.readChain ?? missing("readChain")).bind(repo),
    info: repo.info.bind(repo),
    ...(repo.sealStoredPayloads === undefined ? {} : { sealStoredPayloads: repo.sealStoredPayloads.bind(repo) }),
  };
  const reads = new ArchivedReads(inner, index, opts);
  const define = (name: string, value: unknown): void => {
    Object.defineProperty(repo, name, { value, configurable: true, writable: true, enumerable: false });
  };
  const innerInit = repo.init.bind(repo);
  const innerClose = repo.close.bind(repo);
  define("init", async () => {
    await innerInit();
    await index.init();
  });
  define("close", async () => {
    await index.close();
    await innerClose();
  });
  define("readAll", (o?: ReadAllOptions) => reads.readAll(o ?? {}));
  define("loadAggregate", (id: string, o?: { fromVersion?: number }) => reads.loadAggregate(id, o));
  define("loadAggregates", (ids: readonly string[]) => reads.loadAggregates(ids));
  if (repo.loadEvents !== undefined) define("loadEvents", (ids: readonly string[]) => reads.loadEvents(ids));
  if (repo.readChain !== undefined) define("readChain", (o?: { afterPosition?: number; batchSize?: number }) => reads.readChain(o ?? {}));
  define("info", () => reads.info());
  if (repo.sealStoredPayloads !== undefined) define("sealStoredPayloads", (r: readonly PayloadSealing[]) => reads.sealStoredPayloads(r));
  return repo;
}

function missing(name: string): () => never {
  return () => {
    throw new MnemeError("STORE_ERROR", `event archive: the repository has no ${name}`);
  };
}

const MAX_BATCH_SIZE = 100_000;

/** A page source of the database's side of a window: up to `limit` items in (after, until], and whether it is exhausted. */
type WindowReader<T> = (after: number, until: number, limit: number) => Promise<{ items: T[]; done: boolean }>;

class ArchivedReads {
  readonly #inner: Inner;
  readonly #index: EventArchiveIndex;
  readonly #reader: ArchiveReader;
  readonly #absent: null | undefined;

  constructor(inner: Inner, index: EventArchiveIndex, opts: ArchivedReadsOptions) {
    this.#inner = inner;
    this.#index = index;
    this.#reader = new ArchiveReader(opts);
    this.#absent = opts.absentPayload;
  }

  toEvent(r: ChainRow): Event {
    const e: Event = {
      eventUuid: r.eventUuid,
      position: r.position,
      tenantUuid: r.tenantUuid,
      domain: r.domain,
      name: r.name,
      aggregateUuid: r.aggregateUuid,
      version: r.version,
      createdAt: Number(r.createdAt),
      reqCtx: r.reqCtx === "{}" ? {} : (JSON.parse(r.reqCtx) as RequestContext),
      payload: r.payload === null ? this.#absent : JSON.parse(r.payload),
    };
    if (r.commandUuid !== null) e.commandUuid = r.commandUuid;
    if (r.eventVersion !== 1) e.eventVersion = r.eventVersion;
    return withCausation(e);
  }

  async *readAll(opts: ReadAllOptions): AsyncGenerator<Event[], void, undefined> {
    const { afterPosition, untilPosition, batchSize } = readAllWindow(opts, MAX_BATCH_SIZE);
    const paths = opts.eventPaths === undefined ? undefined : new Set(opts.eventPaths);
    if (paths !== undefined && paths.size === 0) return;
    const tenant = opts.tenantUuid;
    const keep = (r: ChainRow): boolean =>
      (tenant === undefined || r.tenantUuid === tenant) && (paths === undefined || paths.has(`${r.domain}.${r.name}`));
    const dbWindow: WindowReader<Event> = async (after, until, limit) => {
      const it = this.#inner.readAll({ ...opts, afterPosition: after, untilPosition: until, batchSize: limit })[Symbol.asyncIterator]();
      try {
        const first = await it.next();
        const items = first.done === true ? [] : first.value;
        return { items, done: items.length < limit };
      } finally {
        await it.return?.();
      }
    };
    const above = (after: number): AsyncIterable<Event[]> =>
      this.#inner.readAll({ ...opts, afterPosition: after, ...(untilPosition === undefined ? {} : { untilPosition }), batchSize });
    yield* this.#merged(afterPosition, untilPosition, batchSize, keep, (r) => this.toEvent(r), dbWindow, above, opts.signal);
  }

  async *readChain(opts: { afterPosition?: number; batchSize?: number }): AsyncGenerator<ChainRow[], void, undefined> {
    const batchSize = opts.batchSize ?? 1000;
    const dbWindow: WindowReader<ChainRow> = async (after, until, limit) => {
      const it = this.#inner.readChain({ afterPosition: after, batchSize: limit })[Symbol.asyncIterator]();
      try {
        const first = await it.next();
        const page = first.done === true ? [] : first.value;
        const items = page.filter((r) => r.position <= until);
        return { items, done: page.length < limit || items.length < page.length };
      } finally {
        await it.return?.();
      }
    };
    const above = (after: number): AsyncIterable<ChainRow[]> => this.#inner.readChain({ afterPosition: after, batchSize });
    yield* this.#merged(
      opts.afterPosition ?? 0,
      undefined,
      batchSize,
      () => true,
      (r) => r,
      dbWindow,
      above,
      undefined,
    );
  }

  /**
   * Pages in position order over (after, until]: windows below the archive's top merge archived rows with the
   * database's; above it, the database's own pages. The ranges are read again after each page; when they
   * changed under a page that the change concerns, the page is read again.
   */
  async *#merged<T extends { position: number }>(
    after0: number,
    until: number | undefined,
    batchSize: number,
    keep: (r: ChainRow) => boolean,
    convert: (r: ChainRow) => T,
    dbWindow: WindowReader<T>,
    above: (after: number) => AsyncIterable<T[]>,
    signal: AbortSignal | undefined,
  ): AsyncGenerator<T[], void, undefined> {
    let p = after0;
    let ranges = await this.#index.ranges();
    for (;;) {
      if (signal?.aborted === true) return;
      if (until !== undefined && p >= until) return;
      const range = ranges.find((r) => r.toPosition > p);
      if (range !== undefined) {
        const w = until === undefined ? range.toPosition : Math.min(until, range.toPosition);
        const fromFiles = this.#reader.rowsIn(range, p, w, batchSize, keep);
        // The files' rows cover (p, span] completely: the database's are read over the same span only.
        const span = fromFiles.done ? w : fromFiles.rows[fromFiles.rows.length - 1]!.position;
        const fromDb = await dbWindow(p, span, batchSize);
        const again = await this.#index.ranges();
        if (!sameRanges(ranges, again)) {
          ranges = again;
          continue;
        }
        const merged = mergeByPosition(fromFiles.rows.map(convert), fromDb.items);
        const page = merged.length > batchSize ? merged.slice(0, batchSize) : merged;
        p = fromDb.done && merged.length <= batchSize ? span : page[page.length - 1]!.position;
        if (page.length > 0) yield page;
        continue;
      }
      // Above every archived range: the database's pages, with a look at the ranges after each.
      const it = above(p)[Symbol.asyncIterator]();
      try {
        for (;;) {
          const next = await it.next();
          if (next.done === true) return;
          const again = await this.#index.ranges();
          if (!sameRanges(ranges, again)) {
            ranges = again;
            break;
          }
          const page = next.value;
          if (page.length === 0) continue;
          p = page[page.length - 1]!.position;
          yield page;
        }
      } finally {
        await it.return?.();
      }
    }
  }

  async loadAggregate(aggregateUuid: string, opts?: { fromVersion?: number }): Promise<Event[]> {
    const rows = await this.#inner.loadAggregate(aggregateUuid, opts);
    const from = Math.max(1, Math.ceil(opts?.fromVersion ?? 1));
    if (contiguous(rows, from)) return rows;
    return this.#fill(aggregateUuid, from, rows, () => this.#inner.loadAggregate(aggregateUuid, opts));
  }

  async loadAggregates(aggregateUuids: readonly string[]): Promise<Map<string, Event[]>> {
    const out = await this.#inner.loadAggregates(aggregateUuids);
    for (const [id, rows] of out) {
      if (!contiguous(rows, 1)) out.set(id, await this.#fill(id, 1, rows, () => this.#inner.loadAggregate(id)));
    }
    return out;
  }

  /** The aggregate's events from `from`: the database's rows with the archived ones in their gaps. */
  async #fill(aggregateUuid: string, from: number, rows: Event[], reread: () => Promise<Event[]>): Promise<Event[]> {
    for (let attempt = 0; ; attempt++) {
      const [ranges, streams] = await Promise.all([this.#index.ranges(), this.#index.streamSegments(aggregateUuid)]);
      const archived: Event[] = [];
      for (const s of streams) {
        const range = ranges.find((r) => r.toPosition === s.toPosition);
        if (range === undefined) continue;
        for (const r of this.#reader.aggregateRows(range, s.firstSegment, s.lastSegment, aggregateUuid, from))
          archived.push(this.toEvent(r));
      }
      const byVersion = new Map<number, Event>();
      for (const e of archived) byVersion.set(e.version, e);
      for (const e of rows) byVersion.set(e.version, e);
      const merged = [...byVersion.values()].sort((a, b) => a.version - b.version);
      if (contiguous(merged, from)) return merged;
      // A restore or an archive committed between the two reads: once more from the database.
      if (attempt >= 2) {
        throw new MnemeError(
          "STORE_ERROR",
          `event archive: versions of aggregate ${aggregateUuid} are neither in the database nor in the archive files (from version ${from})`,
        );
      }
      rows = await reread();
      if (contiguous(rows, from)) return rows;
    }
  }

  async loadEvents(eventUuids: readonly string[]): Promise<Event[]> {
    const found = await this.#inner.loadEvents(eventUuids);
    if (found.length === new Set(eventUuids).size) return found;
    const ranges = await this.#index.ranges();
    if (ranges.length === 0) return found;
    const have = new Set(found.map((e) => e.eventUuid));
    const wanted = new Set(eventUuids.filter((u) => !have.has(u)));
    const archived = this.#reader.rowsByEventUuid(ranges, wanted).map((r) => this.toEvent(r));
    return mergeByPosition(archived, found);
  }

  async info(): Promise<StoreInfo> {
    const [info, ranges] = await Promise.all([this.#inner.info(), this.#index.ranges()]);
    const archived = ranges.reduce((n, r) => n + r.events, 0);
    return archived === 0 ? info : { ...info, numItems: info.numItems + archived };
  }

  async sealStoredPayloads(rewrites: readonly PayloadSealing[]): Promise<number> {
    const ranges = await this.#index.ranges();
    if (ranges.length > 0 && Array.isArray(rewrites) && rewrites.length > 0) {
      const ids = rewrites.map((r) => r?.id).filter((id): id is string => typeof id === "string");
      const inDb = new Set((await this.#inner.loadEvents(ids)).map((e) => e.eventUuid));
      const archived = ids.filter((id) => !inDb.has(id));
      if (archived.length > 0) {
        throw new MnemeError(
          "INVALID_REQUEST",
          `sealStoredPayloads: event ${archived[0]} is archived (archive files are never rewritten); restore the archive ` +
            "(mneme store archive --restore) before migrating personal data",
          { details: archived.slice(0, 20).map((id) => ({ message: "archived", eventUuid: id })) },
        );
      }
    }
    return this.#inner.sealStoredPayloads!(rewrites);
  }
}

function sameRanges(a: readonly ArchivedRange[], b: readonly ArchivedRange[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) {
    if (a[i]!.toPosition !== b[i]!.toPosition || a[i]!.manifestSha256 !== b[i]!.manifestSha256) return false;
  }
  return true;
}

/** True when the events' versions run from `from` without a gap (no events: nothing to fill). */
function contiguous(rows: readonly Event[], from: number): boolean {
  if (rows.length === 0) return true;
  if (rows[0]!.version !== from) return false;
  for (let i = 1; i < rows.length; i++) if (rows[i]!.version !== rows[i - 1]!.version + 1) return false;
  return true;
}

/** Two position-ordered lists as one (a position in both, once). */
function mergeByPosition<T extends { position: number }>(a: readonly T[], b: readonly T[]): T[] {
  if (a.length === 0) return b.slice();
  if (b.length === 0) return a.slice();
  const out: T[] = [];
  let i = 0;
  let j = 0;
  while (i < a.length || j < b.length) {
    const x = a[i];
    const y = b[j];
    if (y === undefined || (x !== undefined && x.position < y.position)) {
      out.push(x!);
      i++;
    } else if (x === undefined || y.position < x.position) {
      out.push(y);
      j++;
    } else {
      out.push(y);
      i++;
      j++;
    }
  }
  return out;
}

/**
 * The chain rows of a store whose archived rows are in files: `readChain` of
 * the database merged with the archive's (every file checked on the way),
 * for `mneme store verify` and `mneme store copy`.
 */
export function archivedChain(
  readChain: (opts: { afterPosition?: number; batchSize?: number }) => AsyncIterable<ChainRow[]>,
  ranges: () => Promise<readonly ArchivedRange[]>,
  opts: ArchiveReaderOptions = {},
): (opts: { afterPosition?: number; batchSize?: number }) => AsyncIterable<ChainRow[]> {
  const inner: Inner = {
    readAll: missing("readAll"),
    loadAggregate: missing("loadAggregate"),
    loadAggregates: missing("loadAggregates"),
    loadEvents: missing("loadEvents"),
    info: missing("info"),
    readChain,
  };
  const index: EventArchiveIndex = {
    ranges,
    streamSegments: missing("streamSegments"),
    init: async () => undefined,
    close: async () => undefined,
  };
  const reads = new ArchivedReads(inner, index, { ...opts, absentPayload: undefined });
  return (o) => reads.readChain(o);
}
