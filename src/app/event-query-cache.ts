import type { Event } from "../model/types.js";
import type { TagQueryItem } from "../store/event-tags.js";

/** Options of the event query cache (`createFacade({ eventQueryCache })`). */
export interface EventQueryCacheOptions {
  /** How many queries (per tenant) it keeps, least recently used out first. Default 10,000. */
  readonly maxQueries?: number;
}

/** What the benches and tests read of the cache. */
export interface EventQueryCacheStats {
  readonly size: number;
  readonly maxQueries: number;
  /** Reads that found the query cached and read only the matches after its position. */
  readonly hits: number;
  /** Reads that found nothing cached and read every match. */
  readonly misses: number;
}

/** The matches of a query and the position they are complete up to. */
export interface CachedQuery {
  readonly events: readonly Event[];
  readonly position: number;
}

/**
 * The in-process cache of `ctx.events` reads, the analogue of the aggregate
 * cache for decisions by query: per tenant and query (its canonical key),
 * the matched events and the position they were read at. A read of a cached
 * query asks the store only for the matches after that position (one
 * indexed statement, which finds none when nothing new was appended), so it
 * stays correct when another process appended, and the command's append
 * condition is the position that read returned, as without the cache.
 * Matches never appear below a position read (events are immutable and
 * tagged when appended) except through `indexEventTags`, which clears the
 * cache. Events of types with personal data are never kept (a copy would
 * outlive forget()). Entries are never handed out: a read gets copies.
 * Bounded, least recently used out first.
 */
export class EventQueryCache {
  readonly maxQueries: number;
  /** Query key -> entry; Map order is the recency order. */
  readonly #entries = new Map<string, CachedQuery>();
  #hits = 0;
  #misses = 0;

  constructor(opts: EventQueryCacheOptions = {}) {
    const max = opts.maxQueries ?? 10_000;
    if (!Number.isSafeInteger(max) || max < 1)
      throw new RangeError(`eventQueryCache.maxQueries must be a positive integer, got ${String(max)}`);
    this.maxQueries = max;
  }

  /** The cached matches of `key` (never to be handed out as they are); undefined on a miss. */
  get(key: string): CachedQuery | undefined {
    const entry = this.#entries.get(key);
    if (entry === undefined) {
      this.#misses++;
      return undefined;
    }
    this.#hits++;
    // Most recently used goes last.
    this.#entries.delete(key);
    this.#entries.set(key, entry);
    return entry;
  }

  /** Keeps `events` as the matches of `key` up to `position`, unless an answer as recent or more is cached. */
  set(key: string, events: readonly Event[], position: number): void {
    const current = this.#entries.get(key);
    if (current !== undefined) {
      if (current.position >= position) return;
      this.#entries.delete(key);
    }
    this.#entries.set(key, { events, position });
    if (this.#entries.size > this.maxQueries) this.#entries.delete(this.#entries.keys().next().value as string);
  }

  /** Forgets everything (tag rows added to stored events, for instance). */
  clear(): void {
    this.#entries.clear();
  }

  stats(): EventQueryCacheStats {
    return { size: this.#entries.size, maxQueries: this.maxQueries, hits: this.#hits, misses: this.#misses };
  }
}

/**
 * The cache key of a query in a tenant: items as the store takes them, each
 * item's types and tags sorted (their order means nothing), items in order.
 */
export function queryKey(tenantUuid: string, items: readonly TagQueryItem[]): string {
  let key = tenantUuid;
  for (const item of items) {
    key += "\u0000";
    if (item.types !== undefined) key += `t${JSON.stringify([...item.types].sort())}`;
    if (item.tags !== undefined) key += `g${JSON.stringify([...item.tags].sort())}`;
  }
  return key;
}
