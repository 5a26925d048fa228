import type { Event, NewEvent } from "../model/types.js";
import type { CommandRecord, CommandStore } from "./command-store.js";
import type { ChainHead, ChainRow } from "./event-chain.js";
import type { AppendCondition, TagIndexEntry, TaggedRead, TaggedReadOptions, TagQueryItem } from "./event-tags.js";
import type { PayloadSealing } from "./payload-sealing.js";
import type { StoreInfo } from "./store-info.js";

export interface AppendOptions {
  /** Per aggregate: the version the aggregate must be at (0: must not exist). CONFLICT otherwise. */
  expectedVersions?: Record<string, number>;
  /**
   * Aggregates exempt from the tenant rule (their type is declared
   * `tenancy: "global"`): events of any tenant may be appended to them.
   */
  globalAggregates?: readonly string[];
  /**
   * The command's audit record, written in the append's own transaction by a
   * repository that joined the command store (see `joinCommandStore`);
   * ignored by others. A record of a commandUuid recorded already is CONFLICT
   * and nothing of the call is written.
   */
  commandRecord?: CommandRecord;
  /**
   * Conditions on events read by a query (dynamic consistency boundaries):
   * checked in the append's ordered section, by the tag index, after the tenant
   * rule and the expected versions; an event of a condition's tenant that
   * matches one of its items and was stored after its `after` is CONFLICT
   * (details: `query`, `item`) and nothing of the call is written.
   */
  conditions?: readonly AppendCondition[];
}

export interface ReadAllOptions {
  /** A checkpoint: only events with a greater position. Default 0 (from the start). */
  afterPosition?: number;
  /** Inclusive upper bound on positions. Default: no bound. */
  untilPosition?: number;
  /** Events per yielded page. Default 1000. */
  batchSize?: number;
  tenantUuid?: string;
  /** Only events whose `${domain}.${name}` is listed. */
  eventPaths?: string[];
  /** When aborted, iteration stops (it returns; it does not throw). */
  signal?: AbortSignal;
}

/** Notified after each committed append, in commit order. */
export type AppendListener = (events: readonly Event[]) => void;

/**
 * The EventStore: append-only events, unique (aggregateUuid, version), a global
 * position strictly increasing in commit order.
 *
 * `append` semantics (every backend, checked by the conformance suite):
 * - all events of one call are written, or none;
 * - an event without `version` gets the aggregate's next version; a given
 *   `version` must be exactly the next one: a taken one gives CONFLICT, a gap
 *   gives INVALID_EVENTS;
 * - `expectedVersions[agg]` that differs from the aggregate's current version
 *   (0 when absent) gives CONFLICT;
 * - missing `eventUuid` (uuid v7), `createdAt` (ns), `tenantUuid` ("") and
 *   `reqCtx` ({}) are filled; an empty aggregateUuid, domain or name gives INVALID_EVENTS;
 * - an id or name (aggregateUuid, tenantUuid, domain, name, eventUuid,
 *   commandUuid, an expectedVersions key) holding U+0000 or a lone surrogate,
 *   or longer than 512 characters, gives INVALID_EVENTS (the payloads' string
 *   rule: Postgres would read a lone surrogate back as U+FFFD, merging
 *   aggregates); `loadAggregate` and `loadAggregates` of such an id give
 *   INVALID_REQUEST, so no lookup finds another aggregate's events;
 * - appends without expected versions never conflict with each other: 20
 *   concurrent appends to one aggregate get versions 1..20;
 * - `expectedVersions` are checked for aggregates with no event in the call too;
 * - the tenant rule: an aggregate belongs to the tenant of its first event
 *   (`tenantUuid`, "" when none). An event whose tenant differs from its
 *   aggregate's tenant (stored, or set by an earlier event of the same call)
 *   gives NOT_FOUND, worded as for an absent aggregate, and nothing of the
 *   call is written; it is checked before versions, in the append's own
 *   transaction, so two first appends of one aggregate from two tenants
 *   leave exactly one tenant's events. Aggregates in `globalAggregates` are exempt.
 * `readAll` sees events appended during the iteration, never yields an empty
 * page, and rejects a batchSize below 1 with INVALID_REQUEST.
 */
export interface EventRepository {
  init(): Promise<void>;
  append(events: readonly NewEvent[], opts?: AppendOptions): Promise<Event[]>;
  /** The aggregate's events in version order, from `fromVersion` (inclusive). */
  loadAggregate(aggregateUuid: string, opts?: { fromVersion?: number }): Promise<Event[]>;
  /** Several aggregates at once (one round trip where the backend can); absent ones map to []. */
  loadAggregates(aggregateUuids: readonly string[]): Promise<Map<string, Event[]>>;
  /** Streams keyset pages in position order; never loads the whole store; gap-safe. */
  readAll(opts?: ReadAllOptions): AsyncIterable<Event[]>;
  /** The highest position a reader can see now (0 when empty). */
  headPosition(): Promise<number>;
  info(): Promise<StoreInfo>;
  close(): Promise<void>;
  /**
   * Optional: called after each append committed through this instance, in
   * commit order. Backends that commit synchronously (memory, SQLite) notify in
   * position order; the facade uses it for live delivery.
   */
  onAppend?(listener: AppendListener): () => void;
  /**
   * Optional: when `commandStore` lives in the same database as this
   * repository, appends given `opts.commandRecord` write the record in the
   * same transaction as the events; returns true when that is so (the facade
   * then records succeeded commands only through append).
   */
  joinCommandStore?(commandStore: CommandStore): boolean;
  /**
   * Optional: called when events may have been appended elsewhere (another
   * process); the facade then pulls with `readAll`. Postgres: LISTEN/NOTIFY
   * with a polling fallback.
   */
  onExternalAppend?(listener: () => void): () => void;
  /**
   * The stored events with these uuids, in position order (uuids not found
   * are left out). dispatch uses it to hand back the events of a command that
   * was recorded already (idempotency); without it a replay has no events.
   */
  loadEvents?(eventUuids: readonly string[]): Promise<Event[]>;
  /**
   * Optional, for the personal-data migration only (`facade.migratePersonalData`):
   * rewrites stored payloads in place, replacing values stored in clear with
   * sealed envelopes; ids, positions, versions and every other column stay.
   * Each rewrite happens only while the stored payload still equals
   * `stored` (else it is skipped: another migration did it), all in one
   * transaction; resolves how many were rewritten. Anything but sealing clear
   * values (see `checkPayloadSealing` in src/store/payload-sealing.ts) is
   * refused with INVALID_REQUEST and nothing is written. Not for appending,
   * correcting or deleting events: events stay append-only.
   */
  sealStoredPayloads?(rewrites: readonly PayloadSealing[]): Promise<number>;
  /**
   * True when the repository stores event tags and checks `conditions`
   * (dynamic consistency boundaries). A repository without it is refused
   * tags and conditions (INVALID_REQUEST) rather than losing the guarantee.
   */
  readonly storesTags?: boolean;
  /**
   * The events of `tenantUuid` matching any item, in position order, read by
   * the tag index, and `position`: the store's head when it was read (at
   * least the last event's), so a condition `after: position` catches every
   * later match. `opts.after`: only the matches above that position (what a
   * cached answer read at `after` lacks). Required when `storesTags` is true.
   */
  readTagged?(tenantUuid: string, items: readonly TagQueryItem[], opts?: TaggedReadOptions): Promise<TaggedRead<Event>>;
  /**
   * Adds the tag index rows of stored events that have none yet (events
   * appended before their type declared tags; see `facade.indexEventTags`),
   * all in one transaction; rows present already are left as they are.
   * An entry whose position holds no event of its tenant is INVALID_REQUEST
   * and nothing is written. Resolves how many rows were added.
   */
  indexTags?(entries: readonly TagIndexEntry[]): Promise<number>;
  /**
   * True when every stored event carries the hash chain (tamper evidence, see
   * src/store/event-chain.ts); `readChain` and `chainHead` are then required.
   */
  readonly chainsEvents?: boolean;
  /** The stored rows of the chain (texts as stored, with their hashes) in position order, in pages. */
  readChain?(opts?: { afterPosition?: number; batchSize?: number }): AsyncIterable<ChainRow[]>;
  /** The chain's newest link (position 0 and 64 zeros when the store is empty). */
  chainHead?(): Promise<ChainHead>;
}
