import type { EventQueries, EventQuery, EventQueryFold, EventQueryOptions, EventQueryRead, FoldedEvents } from "../model/context.js";
import { MnemeError } from "../model/errors.js";
import type { EventType, Evolver } from "../model/tokens.js";
import type { Event } from "../model/types.js";
import type { EventRepository } from "../store/event-repository.js";
import { type AppendCondition, planItems, tagProblem, type TaggedRead, type TagQueryItem } from "../store/event-tags.js";
import { type EventQueryCache, queryKey } from "./event-query-cache.js";

/** What `ctx.events` needs of the facade. */
export interface TaggedEventsHost {
  /** The event store as handlers read it (upcast, personal data opened). */
  readonly repository: EventRepository;
  /** The registered event type of a path. */
  eventType(path: string): EventType | undefined;
  /** The paths events of these types are stored under (their former names too). */
  storedPaths(paths: readonly string[]): string[];
  /** The facade's cache of query reads; undefined when it is off. */
  readonly cache?: EventQueryCache | undefined;
}

/** A query the command read with check, as the append checks it and the command's record keeps it. */
export interface ReadQuery {
  readonly items: readonly TagQueryItem[];
  readonly position: number;
}

/**
 * `ctx.events` of a command handler: reads the events of the command's
 * tenant that match a query, by the store's tag index, and remembers each
 * query read with check and the position it was read at. The append then
 * carries them as conditions, checked by the store in the append's ordered
 * section (so across instances): an event matching a query appended after
 * its position makes the command fail with CONFLICT, and nothing is written.
 */
export class CommandEvents implements EventQueries {
  #read: ReadQuery[] | undefined;

  constructor(
    private readonly host: TaggedEventsHost,
    private readonly tenantUuid: string,
  ) {}

  async read(query: EventQuery, opts?: EventQueryOptions): Promise<EventQueryRead> {
    const check = checkOption(opts, "events.read");
    const items = this.#items(query, "events.read");
    const repository = this.host.repository;
    if (repository.storesTags !== true || repository.readTagged === undefined) {
      throw new MnemeError(
        "INVALID_REQUEST",
        "events.read: the event repository stores no event tags, so no query can be read or guarded (use the memory, SQLite or Postgres repository, or aggregates)",
      );
    }
    const { events, position } = await this.#readTagged(repository, items);
    if (check) (this.#read ??= []).push({ items, position });
    return { events, position };
  }

  async fold<S>(query: EventQuery, definition: EventQueryFold<S>, opts?: EventQueryOptions): Promise<FoldedEvents<S>> {
    const { initialState, evolve } = foldOf(definition);
    const { events, position } = await this.read(query, opts);
    let state = initialState();
    for (const e of events) {
      const fn = evolve[`${e.domain}.${e.name}`] ?? evolve[e.name];
      if (fn !== undefined) state = fn(state, e.payload, e);
    }
    return { state, position };
  }

  /**
   * The query's matches and the head they were read at: through the cache
   * when it holds the query, reading only the matches after its position
   * (so the answer is as fresh as a full read); copies, never the cached events.
   */
  async #readTagged(repository: EventRepository, items: TagQueryItem[]): Promise<TaggedRead<Event>> {
    const cache = this.host.cache;
    if (cache === undefined) return repository.readTagged!(this.tenantUuid, items);
    const key = queryKey(this.tenantUuid, items);
    const cached = cache.get(key);
    const read = await repository.readTagged!(this.tenantUuid, items, cached === undefined ? undefined : { after: cached.position });
    const keep = read.events.every((e) => this.#cacheable(e));
    if (cached === undefined) {
      if (!keep) return read;
      cache.set(key, read.events, read.position);
      return { events: copyEvents(read.events), position: read.position };
    }
    const events = read.events.length === 0 ? cached.events : [...cached.events, ...read.events];
    // Kept at the newer position (also with no new match: the next read starts there); an answer with personal data is not.
    if (keep) cache.set(key, events, read.position);
    return { events: copyEvents(events), position: read.position };
  }

  /** False for an event of a type with personal data: a cached copy would outlive forget(). */
  #cacheable(e: Event): boolean {
    return this.host.eventType(`${e.domain}.${e.name}`)?.personalData === undefined;
  }

  /** The append conditions of the queries read with check; undefined when there are none. */
  conditions(): AppendCondition[] | undefined {
    return this.#read?.map(({ items, position }) => ({ tenantUuid: this.tenantUuid, items, after: position }));
  }

  /** The queries read with check and their positions (what the command decided on), for its record. */
  readQueries(): readonly ReadQuery[] | undefined {
    return this.#read;
  }

  /** The query's items as the store takes them (INVALID_REQUEST for a bad query): types as stored paths. */
  #items(query: EventQuery, where: string): TagQueryItem[] {
    if (typeof query !== "object" || query === null || !Array.isArray(query.items) || query.items.length === 0) {
      throw new MnemeError(
        "INVALID_REQUEST",
        `${where}: a query is { items: [{ types?: [EventType, ...], tags?: ["key:value", ...] }, ...] } with at least one item`,
      );
    }
    const items = query.items.map((item, k) => {
      const at = `${where}: items[${k}]`;
      if (typeof item !== "object" || item === null || Array.isArray(item)) {
        throw new MnemeError("INVALID_REQUEST", `${at} must be an object { types?, tags? }`);
      }
      for (const key of Object.keys(item)) {
        if (key !== "types" && key !== "tags")
          throw new MnemeError("INVALID_REQUEST", `${at} has an unknown field ${JSON.stringify(key)} (types, tags)`);
      }
      const out: { types?: string[]; tags?: string[] } = {};
      if (item.types !== undefined) out.types = this.#storedTypes(item.types, `${at}.types`);
      if (item.tags !== undefined) {
        if (!Array.isArray(item.tags)) throw new MnemeError("INVALID_REQUEST", `${at}.tags must be an array of "key:value" strings`);
        item.tags.forEach((tag: unknown, n: number) => {
          const problem = tagProblem(tag);
          if (problem !== undefined) throw new MnemeError("INVALID_REQUEST", `${at}.tags[${n}] ${problem}`);
        });
        out.tags = [...item.tags];
      }
      return out;
    });
    // The store's own checks (an item with neither types nor tags, ...), so a bad query fails here with its words.
    planItems(items, where);
    return items;
  }

  #storedTypes(types: unknown, at: string): string[] {
    if (!Array.isArray(types) || types.length === 0)
      throw new MnemeError("INVALID_REQUEST", `${at} must be a non-empty array of event types`);
    const paths = types.map((t: unknown, n) => {
      const type = t as EventType | null;
      if (typeof type !== "object" || type === null || type.kind !== "event") {
        throw new MnemeError("INVALID_REQUEST", `${at}[${n}] must be an event type (from a domain's event())`);
      }
      if (this.host.eventType(type.path) !== type) {
        throw new MnemeError("INVALID_REQUEST", `${at}[${n}]: event ${type.path} is not registered in this facade`);
      }
      if (type.tags === undefined) {
        throw new MnemeError(
          "INVALID_REQUEST",
          `${at}[${n}]: event ${type.path} declares no tags, so no query finds its events: declare tags: (p) => [...] (even () => [])`,
        );
      }
      return type.path;
    });
    return this.host.storedPaths(paths);
  }
}

/** Private copies of cached events: a handler or an evolver that changes what it read never changes the cache. */
function copyEvents(events: readonly Event[]): Event[] {
  return events.length === 0 ? [] : structuredClone(events as Event[]);
}

function checkOption(opts: EventQueryOptions | undefined, where: string): boolean {
  if (opts === undefined) return true;
  if (typeof opts !== "object" || opts === null) throw new MnemeError("INVALID_REQUEST", `${where}: options must be an object`);
  const check: unknown = opts.check;
  if (check !== undefined && typeof check !== "boolean") {
    throw new MnemeError("INVALID_REQUEST", `${where}: check must be true or false, got ${JSON.stringify(check) ?? typeof check}`);
  }
  return check !== false;
}

/** The fold's initialState and evolvers keyed by event path or name (INVALID_REQUEST when malformed). */
function foldOf<S>(definition: EventQueryFold<S>): { initialState: () => S; evolve: Record<string, Evolver<S>> } {
  if (typeof definition !== "object" || definition === null || typeof definition.initialState !== "function") {
    throw new MnemeError(
      "INVALID_REQUEST",
      "events.fold: needs { initialState: () => state, evolve: { EventName: (state, payload, event) => state } }",
    );
  }
  const given = definition.evolve;
  if (typeof given !== "object" || given === null || Array.isArray(given)) {
    throw new MnemeError("INVALID_REQUEST", "events.fold: evolve must be an object of evolvers keyed by event name or path");
  }
  const evolve: Record<string, Evolver<S>> = Object.create(null) as Record<string, Evolver<S>>;
  for (const [key, fn] of Object.entries(given)) {
    if (typeof fn !== "function") throw new MnemeError("INVALID_REQUEST", `events.fold: evolve.${key} must be a function`);
    evolve[key] = fn as Evolver<S>;
  }
  return { initialState: definition.initialState, evolve };
}
