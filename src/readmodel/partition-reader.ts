import type { Event } from "../model/types.js";
import type { EventRepository, ReadAllOptions } from "../store/event-repository.js";

/** What a lane reads: the pages after its position, as `readAll` gives them. */
export interface LaneRead {
  readonly afterPosition: number;
  readonly batchSize: number;
  readonly eventPaths?: string[];
  readonly signal?: AbortSignal;
}

/** A page read from the store once: the events after `after` (up to a batch), or [] at the head. */
interface SharedPage {
  readonly after: number;
  /** When its read started: an empty answer tells only readers that began before it that they are at the head. */
  readonly tick: number;
  readonly events: Promise<Event[]>;
  /** The events, once read. */
  settled: Event[] | undefined;
}

/** The largest shared page (the most events a Postgres readAll page holds). */
const MAX_SHARED_PAGE = 10_000;

/**
 * The page the lanes of an n-partition handler share: `restoreBatchSize`
 * events for each partition (each lane's transaction then holds about
 * `restoreBatchSize` of its own), up to 10,000 events, never fewer than
 * `restoreBatchSize`.
 * @internal
 */
export function sharedPageSize(restoreBatchSize: number, partitions: number): number {
  return Math.max(restoreBatchSize, Math.min(restoreBatchSize * partitions, MAX_SHARED_PAGE));
}

/**
 * Pages kept: lanes that read together are a page or two apart (their batches
 * take turns), so a few pages suffice; the events kept are bounded too.
 */
const MAX_PAGES = 8;
const MAX_KEPT_EVENTS = 40_000;

/**
 * The one read of the event store that the lanes of a partitioned handler
 * share in a process. Each lane still reads as a single runner does (pages
 * after its own checkpoint, applied in its own fenced transactions), but its
 * pages come from here: a page another lane read (or is reading) after the
 * same position is handed over instead of read again, and a lane whose
 * position falls inside a page read already gets that page's rest. Lanes that
 * run together (the usual case: they start at one checkpoint and pass every
 * event) therefore read each page once between them. A lane that is behind
 * (just taken over) finds nothing here and reads the store on its own: it
 * catches up without holding the others back, and joins their pages once it
 * reaches them. Pages are kept only while some lane reads (events read long
 * ago are not handed out later) and in a bounded number.
 *
 * Gap safety is readAll's: each page is one keyset read, a prefix of what was
 * committed; events are immutable, so a page stays true for a later reader.
 * Only "nothing after this position" ages: an empty page ends a reader's
 * iteration only when its read began after that reader did.
 * @internal
 */
export class PartitionReader {
  readonly #store: () => EventRepository;
  /** The batch size and filter of the pages kept (the same for every lane of a handler; reset when they change). */
  #shape = "";
  #pages: SharedPage[] = [];
  #tick = 0;
  #readers = 0;
  /** Pages read from the store, and pages handed over without a read (for tests). */
  readonly counts = { read: 0, shared: 0 };

  constructor(store: () => EventRepository) {
    this.#store = store;
  }

  /** The pages after `afterPosition`, in position order, ending at the head (readAll's contract, never an empty page). */
  async *pages(read: LaneRead): AsyncGenerator<Event[], void, undefined> {
    const born = ++this.#tick;
    this.#readers++;
    try {
      let after = read.afterPosition;
      for (;;) {
        if (aborted(read.signal)) return;
        const page = await this.#page(after, born, read);
        if (page.length === 0 || aborted(read.signal)) return;
        after = page[page.length - 1]!.position;
        this.#readAhead(after, read);
        yield page;
      }
    } finally {
      // No lane reads: nothing is kept for a later one.
      if (--this.#readers === 0) this.#pages = [];
    }
  }

  async #page(after: number, born: number, read: LaneRead): Promise<Event[]> {
    const shape = `${read.batchSize}|${read.eventPaths?.join("\n") ?? "*"}`;
    if (shape !== this.#shape) {
      this.#shape = shape;
      this.#pages = [];
    }
    const kept = this.#kept(after, born);
    if (kept !== undefined) {
      // A shared read that failed is this lane's to try again (and to report when it fails again).
      const events = await kept.events.catch(() => undefined);
      // An empty page read before this reader began says nothing of what committed since: read again.
      if (events !== undefined && (events.length > 0 || kept.tick > born)) {
        this.counts.shared++;
        return kept.after === after ? events : events.filter((e) => e.position > after);
      }
    }
    return this.#read(after, read).events;
  }

  /**
   * After a full page ending at `after` (more may follow), the next page is
   * read while the lanes apply this one, unless a read after `after` is kept
   * already: the lanes' transactions then overlap the store's next answer.
   */
  #readAhead(after: number, read: LaneRead): void {
    let full = false;
    for (const p of this.#pages) {
      if (p.after === after) return;
      const last = p.settled?.[p.settled.length - 1];
      if (last?.position === after && p.settled!.length === read.batchSize) full = true;
    }
    if (full && !aborted(read.signal)) this.#read(after, read).events.catch(() => undefined);
  }

  /**
   * A page that answers a read after `after`: one read after the same position
   * (still under way or done; an empty one only when it began after the
   * reader), or a non-empty one that `after` falls inside.
   */
  #kept(after: number, born: number): SharedPage | undefined {
    for (const p of this.#pages) {
      if (p.after === after && (p.tick > born || p.settled === undefined || p.settled.length > 0)) return p;
      const last = p.settled?.[p.settled.length - 1];
      if (p.after < after && last !== undefined && last.position > after) return p;
    }
    return undefined;
  }

  #read(after: number, read: LaneRead): SharedPage {
    const opts: ReadAllOptions = {
      afterPosition: after,
      batchSize: read.batchSize,
      ...(read.eventPaths === undefined ? {} : { eventPaths: read.eventPaths }),
    };
    const page: SharedPage = { after, tick: ++this.#tick, events: firstPage(this.#store(), opts), settled: undefined };
    this.counts.read++;
    page.events.then(
      (events) => {
        page.settled = events;
      },
      () => {
        this.#pages = this.#pages.filter((p) => p !== page);
      },
    );
    this.#pages = this.#pages.filter((p) => p.after !== after);
    this.#pages.push(page);
    this.#evict(read.batchSize);
    return page;
  }

  /** Drops the oldest pages beyond MAX_PAGES or MAX_KEPT_EVENTS (the newest two stay). */
  #evict(batchSize: number): void {
    let kept = 0;
    for (const p of this.#pages) kept += p.settled?.length ?? batchSize;
    while (this.#pages.length > 2 && (this.#pages.length > MAX_PAGES || kept > MAX_KEPT_EVENTS)) {
      const p = this.#pages.shift()!;
      kept -= p.settled?.length ?? batchSize;
    }
  }
}

/** One page of readAll (its first), the iteration closed after it. */
async function firstPage(store: EventRepository, opts: ReadAllOptions): Promise<Event[]> {
  const it = store.readAll(opts)[Symbol.asyncIterator]();
  try {
    const r = await it.next();
    return r.done === true ? [] : r.value;
  } finally {
    await it.return?.();
  }
}

function aborted(signal: AbortSignal | undefined): boolean {
  return signal?.aborted === true;
}
