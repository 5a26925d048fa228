import { nowNs, newUuid } from "../model/clock.js";
import { MnemeError } from "../model/errors.js";
import type { Event, NewEvent, RequestContext } from "../model/types.js";
import {
  checkAggregateIdToRead,
  checkAppendTenants,
  checkEventField,
  checkEventTexts,
  checkExpectedAggregate,
  checkEventVersion,
  globalAggregatesSet,
} from "../store/append-validation.js";
import type { AppendListener, AppendOptions, EventRepository, ReadAllOptions } from "../store/event-repository.js";
import type { StoreInfo } from "../store/store-info.js";
import {
  checkEventTags,
  conditionFailed,
  planConditions,
  planItems,
  readAfter,
  type TaggedReadOptions,
  type PlannedItem,
  rowsMatch,
  type TaggedRead,
  type TagQueryItem,
  type TagIndexEntry,
  tagIndexRows,
  tagRows,
} from "../store/event-tags.js";
import { isSealedJsonSafe, sealJsonSafe, trySealJsonSafe } from "../store/json-safe.js";
import { checkPayloadSealing, jsonEqual, type PayloadSealing } from "../store/payload-sealing.js";
import { storeClosed } from "../store/store-closed.js";
import { chainCreatedAt, chainHash, type ChainHead, type ChainRow, GENESIS_HASH } from "../store/event-chain.js";
import { checkRemovals, type EventRemoval, REMOVED_EVENT, removedPayload, type RemovesEvents } from "../store/event-removal.js";

const DEFAULT_BATCH_SIZE = 1000;
const EMPTY: readonly Event[] = Object.freeze([]);

/**
 * The in-memory EventStore: the default of `createFacade` and the backend of
 * tests. Appends run synchronously inside one call, so they are serialised and
 * atomic without locks; stored events are deeply frozen copies (the event,
 * its reqCtx and its payload), so readers share them without copying and no
 * one can change what is stored.
 */
export class MemoryEventRepository implements EventRepository, RemovesEvents {
  /** Every event in position order (position i + 1 at index i). */
  private readonly events: Event[] = [];
  private readonly byAggregate = new Map<string, Event[]>();
  /** The tag index: tenant -> tag (or type row) -> positions in order. Only events whose type declares tags are in it. */
  private readonly tagIndex = new Map<string, Map<string, number[]>>();
  /** Per tagged event's position, its index rows (see tagRows). */
  private readonly rowsAt = new Map<number, ReadonlySet<string>>();
  /** Stores tags and checks append conditions (see EventRepository.storesTags). */
  readonly storesTags = true;
  private readonly listeners = new Set<AppendListener>();
  private listening: readonly AppendListener[] = [];
  private nextPosition = 1;
  private closed = false;
  /**
   * The hash chain (see src/store/event-chain.ts): hashes[i] is the hash of the event at position i + 1. Stored
   * events are frozen, so the chain is computed when asked for (readChain, chainHead) rather than on the append
   * path; a sealing of stored payloads drops it from the first event sealed.
   */
  private readonly hashes: string[] = [];
  /** Keeps the hash chain. */
  readonly chainsEvents = true;
  /** The stored hashes of the tombstones (by index), which cannot be recomputed from their hollowed events. */
  private readonly removedHashes = new Map<number, string>();

  async init(): Promise<void> {
    this.assertOpen();
  }

  async append(newEvents: readonly NewEvent[], opts?: AppendOptions): Promise<Event[]> {
    this.assertOpen();
    if (!Array.isArray(newEvents)) throw new MnemeError("INVALID_EVENTS", "append takes an array of events");
    // Validate everything before touching state: a failing call writes nothing.
    const payloads = checkContents(newEvents);
    // The tenant rule comes before versions: a CONFLICT must not tell that another tenant's aggregate exists.
    checkAppendTenants(newEvents, globalAggregatesSet(opts?.globalAggregates), (agg) => this.byAggregate.get(agg)?.[0]?.tenantUuid);
    const expected = opts?.expectedVersions;
    if (expected !== undefined) this.checkExpected(expected);
    const tags = checkTagsOf(newEvents);
    const conditions = planConditions(opts?.conditions);
    const assigned = this.assignVersions(newEvents);
    if (newEvents.length === 0) return [];
    if (conditions !== undefined) {
      for (let c = 0; c < conditions.length; c++) {
        const { tenantUuid, items, after } = conditions[c]!;
        for (let k = 0; k < items.length; k++) {
          const at = this.firstMatch(tenantUuid, items[k]!, after);
          if (at !== undefined) throw conditionFailed(c, k, after, at);
        }
      }
    }
    // Commit: nothing below can fail.
    const stored = new Array<Event>(newEvents.length);
    let lastCtxIn: RequestContext | undefined;
    let lastCtxOut: RequestContext = EMPTY_CTX;
    for (let i = 0; i < newEvents.length; i++) {
      const e = newEvents[i] as NewEvent;
      // Events of one command share one reqCtx: copy it once per distinct object (a sealed one is shared as it is).
      if (e.reqCtx !== undefined && e.reqCtx !== lastCtxIn) {
        lastCtxIn = e.reqCtx;
        lastCtxOut = sealJsonSafe(e.reqCtx);
      }
      const ctx = e.reqCtx === undefined ? EMPTY_CTX : lastCtxOut;
      const ev = storedEvent(e, this.nextPosition++, assigned[i] as number, ctx, payloads[i]);
      stored[i] = ev;
      const evTags = tags?.[i];
      if (evTags !== undefined) this.index(ev, evTags);
      this.events.push(ev);
      let stream = this.byAggregate.get(ev.aggregateUuid);
      if (stream === undefined) {
        stream = [];
        this.byAggregate.set(ev.aggregateUuid, stream);
      }
      stream.push(ev);
    }
    this.notify(stored);
    // `stored` is not kept by the repository (its events are), so the caller may have the array itself.
    return stored;
  }

  /** Adds a stored event's index rows (its type and tags) under its tenant. */
  private index(ev: Event, tags: readonly string[]): void {
    this.indexRows(ev.tenantUuid, ev.position, tagRows({ domain: ev.domain, name: ev.name, tags }));
  }

  /** Adds index rows at a position (kept in position order: a backfill adds old positions). */
  private indexRows(tenantUuid: string, position: number, rows: readonly string[]): number {
    let byTag = this.tagIndex.get(tenantUuid);
    if (byTag === undefined) this.tagIndex.set(tenantUuid, (byTag = new Map()));
    const present = new Set(this.rowsAt.get(position));
    let added = 0;
    for (const row of rows) {
      if (present.has(row)) continue;
      present.add(row);
      added++;
      const positions = byTag.get(row);
      if (positions === undefined) byTag.set(row, [position]);
      else if (positions[positions.length - 1]! < position) positions.push(position);
      else positions.splice(firstPositionAfter(positions, position), 0, position);
    }
    this.rowsAt.set(position, present);
    return added;
  }

  /** See EventRepository.indexTags. */
  async indexTags(entries: readonly TagIndexEntry[]): Promise<number> {
    this.assertOpen();
    const rows = tagIndexRows(entries);
    for (const r of rows) {
      const ev = this.events[r.position - 1];
      if (ev === undefined || ev.tenantUuid !== r.tenantUuid) {
        throw new MnemeError("INVALID_REQUEST", `indexTags: no event of tenant ${JSON.stringify(r.tenantUuid)} at position ${r.position}`);
      }
    }
    let added = 0;
    for (const r of rows) added += this.indexRows(r.tenantUuid, r.position, [r.tag]);
    return added;
  }

  /** The first position after `after` of an event of the tenant matching `item`, by the tag index; undefined when none. */
  private firstMatch(tenantUuid: string, item: PlannedItem, after: number): number | undefined {
    const byTag = this.tagIndex.get(tenantUuid);
    if (byTag === undefined) return undefined;
    let first: number | undefined;
    for (const d of item.drive) {
      const positions = byTag.get(d);
      if (positions === undefined) continue;
      for (let i = firstPositionAfter(positions, after); i < positions.length; i++) {
        const p = positions[i]!;
        if (first !== undefined && p >= first) break;
        if (rowsMatch(this.rowsAt.get(p)!, item)) {
          first = p;
          break;
        }
      }
    }
    return first;
  }

  /** See EventRepository.readTagged. */
  async readTagged(tenantUuid: string, items: readonly TagQueryItem[], opts?: TaggedReadOptions): Promise<TaggedRead<Event>> {
    this.assertOpen();
    if (typeof tenantUuid !== "string") throw new MnemeError("INVALID_REQUEST", "readTagged: tenantUuid must be a string");
    const planned = planItems(items, "readTagged");
    const after = readAfter(opts);
    const position = this.nextPosition - 1;
    const byTag = this.tagIndex.get(tenantUuid);
    const found = new Set<number>();
    if (byTag !== undefined) {
      for (const item of planned) {
        for (const d of item.drive) {
          for (const p of byTag.get(d) ?? []) if (p > after && !found.has(p) && rowsMatch(this.rowsAt.get(p)!, item)) found.add(p);
        }
      }
    }
    const events = [...found].sort((a, b) => a - b).map((p) => this.events[p - 1]!);
    return { events, position };
  }

  /** CONFLICT unless every aggregate of `expectedVersions` is at its expected version. */
  private checkExpected(expected: Record<string, number>): void {
    for (const agg in expected) {
      if (!Object.hasOwn(expected, agg)) continue;
      const v = expected[agg] as number;
      checkExpectedAggregate(agg);
      if (!Number.isInteger(v) || v < 0) {
        throw new MnemeError("INVALID_EVENTS", `expected version of ${agg} must be an integer >= 0, got ${String(v)}`);
      }
      const current = this.byAggregate.get(agg)?.length ?? 0;
      if (current !== v) {
        throw new MnemeError("CONFLICT", `aggregate ${agg} is at version ${current}, expected ${v}`, {
          details: [{ message: "version moved", aggregateUuid: agg, expectedVersion: v, currentVersion: current }],
        });
      }
    }
  }

  /** Checks every event's fields and returns the version each gets (an event's own `version` must be the next one). */
  private assignVersions(newEvents: readonly NewEvent[]): number[] {
    const assigned = new Array<number>(newEvents.length);
    // Most appends touch one aggregate: a Map only when there are more.
    let versions: Map<string, number> | undefined;
    let onlyAgg: string | undefined;
    let onlyNext = 0;
    for (let i = 0; i < newEvents.length; i++) {
      const e = newEvents[i] as NewEvent;
      checkFields(e, i);
      const agg = e.aggregateUuid;
      const current = agg === onlyAgg ? onlyNext : (versions?.get(agg) ?? this.byAggregate.get(agg)?.length ?? 0);
      const next = current + 1;
      if (e.version !== undefined && e.version !== next) throw versionRefused(e, i, current, next);
      if (onlyAgg === undefined || agg === onlyAgg) {
        onlyAgg = agg;
        onlyNext = next;
      } else {
        (versions ??= new Map([[onlyAgg, onlyNext]])).set(agg, next);
      }
      assigned[i] = next;
    }
    return assigned;
  }

  /** For the personal-data migration only: see EventRepository.sealStoredPayloads. */
  async sealStoredPayloads(rewrites: readonly PayloadSealing[]): Promise<number> {
    this.assertOpen();
    checkPayloadSealing("sealStoredPayloads", rewrites);
    const wanted = new Map(rewrites.map((r) => [r.id, r]));
    let n = 0;
    for (let i = 0; i < this.events.length && wanted.size > 0; i++) {
      const e = this.events[i] as Event;
      const r = wanted.get(e.eventUuid);
      if (r === undefined) continue;
      wanted.delete(e.eventUuid);
      if (!jsonEqual(e.payload, r.stored)) continue;
      const next = Object.freeze({ ...e, payload: sealJsonSafe(r.sealed) });
      this.events[i] = next;
      (this.byAggregate.get(e.aggregateUuid) as Event[])[e.version - 1] = next;
      if (this.hashes.length > i) this.hashes.length = i;
      n++;
    }
    return n;
  }

  async loadAggregate(aggregateUuid: string, opts?: { fromVersion?: number }): Promise<Event[]> {
    this.assertOpen();
    checkAggregateIdToRead(aggregateUuid, "loadAggregate");
    const stream = this.byAggregate.get(aggregateUuid) ?? EMPTY;
    const from = opts?.fromVersion ?? 1;
    if (typeof from !== "number" || Number.isNaN(from)) {
      throw new MnemeError("INVALID_REQUEST", `fromVersion must be a number, got ${String(from)}`);
    }
    // Versions are dense from 1, so version v sits at index v - 1.
    return stream.slice(Math.max(0, Math.ceil(from) - 1));
  }

  async loadEvents(eventUuids: readonly string[]): Promise<Event[]> {
    this.assertOpen();
    if (!Array.isArray(eventUuids)) throw new MnemeError("INVALID_REQUEST", "loadEvents: eventUuids must be an array of strings");
    const wanted = new Set(eventUuids);
    const found: Event[] = [];
    // Newest first: a replayed command is almost always a recent one.
    for (let i = this.events.length - 1; i >= 0 && found.length < wanted.size; i--) {
      const e = this.events[i] as Event;
      if (wanted.has(e.eventUuid)) found.push(e);
    }
    return found.reverse();
  }

  async loadAggregates(aggregateUuids: readonly string[]): Promise<Map<string, Event[]>> {
    this.assertOpen();
    if (!Array.isArray(aggregateUuids))
      throw new MnemeError("INVALID_REQUEST", "loadAggregates: aggregateUuids must be an array of strings");
    for (const u of aggregateUuids) checkAggregateIdToRead(u, "loadAggregates");
    const out = new Map<string, Event[]>();
    for (const id of aggregateUuids) out.set(id, (this.byAggregate.get(id) ?? EMPTY).slice());
    return out;
  }

  readAll(opts: ReadAllOptions = {}): AsyncIterable<Event[]> {
    return this.pages(opts);
  }

  private async *pages(opts: ReadAllOptions): AsyncGenerator<Event[], void, undefined> {
    this.assertOpen();
    const batchSize = opts.batchSize ?? DEFAULT_BATCH_SIZE;
    if (!Number.isInteger(batchSize) || batchSize < 1) {
      throw new MnemeError("INVALID_REQUEST", `batchSize must be a positive integer, got ${String(batchSize)}`);
    }
    let after = opts.afterPosition ?? 0;
    const until = opts.untilPosition ?? Number.POSITIVE_INFINITY;
    if (typeof after !== "number" || Number.isNaN(after)) throw new MnemeError("INVALID_REQUEST", "afterPosition must be a number");
    if (typeof until !== "number" || Number.isNaN(until)) throw new MnemeError("INVALID_REQUEST", "untilPosition must be a number");
    const tenant = opts.tenantUuid;
    // domain -> names, so the filter needs no string building per event.
    let paths: Map<string, Set<string>> | undefined;
    if (opts.eventPaths !== undefined) {
      paths = new Map();
      for (const p of opts.eventPaths) {
        // Every split at a dot, so a dotted domain or name still matches exactly `${domain}.${name}`.
        for (let dot = p.indexOf("."); dot >= 0; dot = p.indexOf(".", dot + 1)) {
          const domain = p.slice(0, dot);
          let names = paths.get(domain);
          if (names === undefined) paths.set(domain, (names = new Set()));
          names.add(p.slice(dot + 1));
        }
      }
    }
    const signal = opts.signal;
    const events = this.events;

    for (;;) {
      if (signal?.aborted === true || this.closed) return;
      let i = firstAfter(events, after);
      if (tenant === undefined && paths === undefined) {
        // Unfiltered (a restore): a page is one slice.
        const end = Math.min(i + batchSize, until === Number.POSITIVE_INFINITY ? events.length : firstAfter(events, until));
        if (end <= i) return;
        const page = events.slice(i, end);
        after = (page[page.length - 1] as Event).position;
        yield page;
        continue;
      }
      const page: Event[] = [];
      let scannedTo = after;
      // The store is read again for every page, so events appended while the
      // caller works on a page show up in the next one.
      while (i < events.length && page.length < batchSize) {
        const e = events[i] as Event;
        if (e.position > until) break;
        scannedTo = e.position;
        i++;
        if (tenant !== undefined && e.tenantUuid !== tenant) continue;
        if (paths !== undefined && paths.get(e.domain)?.has(e.name) !== true) continue;
        page.push(e);
      }
      if (page.length === 0) return;
      after = scannedTo;
      yield page;
    }
  }

  /** Computes the chain's missing hashes up to the event at index n - 1 (a tombstone keeps the hash it had). */
  private chainUpTo(n: number): void {
    for (let i = this.hashes.length; i < n; i++) {
      this.hashes.push(
        this.removedHashes.get(i) ?? chainHash(i === 0 ? GENESIS_HASH : this.hashes[i - 1]!, memoryChainRow(this.events[i]!)),
      );
    }
  }

  /** See RemovesEvents.removeEvents: each event is replaced by its tombstone (the event object dropped) and leaves the tag index. */
  async removeEvents(run: string, removals: readonly EventRemoval[]): Promise<number> {
    this.assertOpen();
    checkRemovals(run, removals);
    const at = removals
      .map((r) => ({ i: r.position - 1, r }))
      .filter(({ i, r }) => {
        const e = this.events[i];
        return e !== undefined && e.eventUuid === r.eventUuid && !(e.domain === REMOVED_EVENT.domain && e.name === REMOVED_EVENT.name);
      });
    if (at.length === 0) return 0;
    // The hashes they had, before their bytes go.
    this.chainUpTo(Math.max(...at.map(({ i }) => i)) + 1);
    for (const { i } of at.sort((a, b) => a.i - b.i)) {
      const e = this.events[i]!;
      const tombstone: Event = {
        eventUuid: e.eventUuid,
        position: e.position,
        tenantUuid: e.tenantUuid,
        domain: REMOVED_EVENT.domain,
        name: REMOVED_EVENT.name,
        aggregateUuid: e.aggregateUuid,
        version: e.version,
        createdAt: e.createdAt,
        reqCtx: EMPTY_CTX,
        payload: Object.freeze(removedPayload(`${e.domain}.${e.name}`, run, i === 0 ? GENESIS_HASH : this.hashes[i - 1]!)),
      };
      if (e.commandUuid !== undefined) tombstone.commandUuid = tombstone.causationId = e.commandUuid;
      this.removedHashes.set(i, this.hashes[i]!);
      this.events[i] = Object.freeze(tombstone);
      (this.byAggregate.get(e.aggregateUuid) as Event[])[e.version - 1] = this.events[i];
      this.unindex(e);
    }
    return at.length;
  }

  /** Takes a removed event's position out of its tenant's tag index. */
  private unindex(e: Event): void {
    const rows = this.rowsAt.get(e.position);
    if (rows === undefined) return;
    this.rowsAt.delete(e.position);
    const byTag = this.tagIndex.get(e.tenantUuid);
    for (const row of rows) {
      const positions = byTag?.get(row);
      if (positions === undefined) continue;
      const k = firstPositionAfter(positions, e.position - 1);
      if (positions[k] === e.position) positions.splice(k, 1);
      if (positions.length === 0) byTag!.delete(row);
    }
  }

  /** See ChainedEvents.chainHead. */
  async chainHead(): Promise<ChainHead> {
    this.assertOpen();
    const n = this.events.length;
    this.chainUpTo(n);
    return n === 0 ? { position: 0, hash: GENESIS_HASH } : { position: n, hash: this.hashes[n - 1]! };
  }

  /** See ChainedEvents.readChain. */
  readChain(opts: { afterPosition?: number; batchSize?: number } = {}): AsyncIterable<ChainRow[]> {
    this.assertOpen();
    return this.chainPages(Math.max(0, opts.afterPosition ?? 0), opts.batchSize ?? 1000);
  }

  private async *chainPages(after: number, batchSize: number): AsyncGenerator<ChainRow[], void, undefined> {
    for (let i = after; i < this.events.length; i += batchSize) {
      this.assertOpen();
      const end = Math.min(this.events.length, i + batchSize);
      this.chainUpTo(end);
      const page: ChainRow[] = [];
      for (let k = i; k < end; k++) page.push({ ...memoryChainRow(this.events[k]!), hash: this.hashes[k]! });
      yield page;
    }
  }

  async headPosition(): Promise<number> {
    this.assertOpen();
    return this.events.length === 0 ? 0 : (this.events[this.events.length - 1] as Event).position;
  }

  async info(): Promise<StoreInfo> {
    this.assertOpen();
    const last = this.events[this.events.length - 1];
    return { storeType: "memory", numItems: this.events.length, lastItemCreatedAt: last?.createdAt ?? 0, connectionInfo: "memory" };
  }

  async close(): Promise<void> {
    this.closed = true;
    this.listeners.clear();
    this.listening = [];
  }

  /**
   * Registers a listener called synchronously after each commit, in commit
   * (= position) order. A listener must not throw: its error is swallowed so
   * one faulty listener cannot make a committed append look failed.
   */
  onAppend(listener: AppendListener): () => void {
    this.listeners.add(listener);
    this.listening = [...this.listeners];
    return () => {
      this.listeners.delete(listener);
      this.listening = [...this.listeners];
    };
  }

  private notify(events: readonly Event[]): void {
    // A copy made when listeners come and go (rarely), not per append: one that leaves mid-call is still told of this one.
    const listening = this.listening;
    if (listening.length === 0) return;
    const frozen = Object.freeze(events.slice());
    for (const l of listening) {
      try {
        l(frozen);
      } catch {
        // The append is committed whatever a listener does (see onAppend).
      }
    }
  }

  private assertOpen(): void {
    if (this.closed) throw storeClosed("MemoryEventRepository");
  }
}

const EMPTY_CTX: RequestContext = Object.freeze({});

/** A stored event as the chain sees it: its payload and reqCtx as JSON text. */
function memoryChainRow(e: Event): Omit<ChainRow, "hash"> {
  return {
    position: e.position,
    eventUuid: e.eventUuid,
    tenantUuid: e.tenantUuid,
    domain: e.domain,
    name: e.name,
    aggregateUuid: e.aggregateUuid,
    version: e.version,
    commandUuid: e.commandUuid ?? null,
    createdAt: chainCreatedAt(e.createdAt),
    eventVersion: e.eventVersion ?? 1,
    reqCtx: JSON.stringify(e.reqCtx),
    payload: e.payload === undefined ? null : JSON.stringify(e.payload),
  };
}

/**
 * The checks of every event before anything else: shape, aggregate, tenant, and the JSON-safe payload and reqCtx.
 * Returns the payloads as they are stored: deeply frozen copies, taken in the walk that checks them.
 */
function checkContents(newEvents: readonly NewEvent[]): unknown[] {
  // An array per call, not one shared: a payload's walk may run code (a Proxy's traps) that appends elsewhere.
  const payloads = new Array<unknown>(newEvents.length);
  let checkedCtx: RequestContext | undefined;
  for (let i = 0; i < newEvents.length; i++) {
    const e = newEvents[i] as NewEvent;
    if (e === null || typeof e !== "object") throw new MnemeError("INVALID_EVENTS", `event ${i} is not an object`);
    if (typeof e.aggregateUuid !== "string" || e.aggregateUuid === "") throw invalid(i, "aggregateUuid");
    if (e.tenantUuid !== undefined && typeof e.tenantUuid !== "string")
      throw new MnemeError("INVALID_EVENTS", `event ${i}: tenantUuid must be a string`);
    checkEventTexts(e, i);
    // The payload rule of every backend: what is accepted here reads back unchanged from SQLite and Postgres too.
    const payload = trySealJsonSafe(e.payload);
    if (payload === undefined) checkEventField(e.payload, i, "payload");
    payloads[i] = payload;
    if (e.reqCtx !== undefined && e.reqCtx !== checkedCtx) {
      if (!isSealedJsonSafe(e.reqCtx)) checkEventField(e.reqCtx, i, "reqCtx");
      checkedCtx = e.reqCtx;
    }
  }
  return payloads;
}

/** The per-event field checks of an append (after the tenant and expected-version checks). */
function checkFields(e: NewEvent, i: number): void {
  if (typeof e.domain !== "string" || e.domain === "") throw invalid(i, "domain");
  if (typeof e.name !== "string" || e.name === "") throw invalid(i, "name");
  if (e.createdAt !== undefined && !Number.isFinite(e.createdAt)) {
    throw new MnemeError("INVALID_EVENTS", `event ${i}: createdAt must be a finite number (ns), got ${String(e.createdAt)}`);
  }
  if (e.eventUuid !== undefined && (typeof e.eventUuid !== "string" || e.eventUuid === "")) throw invalid(i, "eventUuid");
  if (e.commandUuid !== undefined && (typeof e.commandUuid !== "string" || e.commandUuid === "")) throw invalid(i, "commandUuid");
  if (e.reqCtx !== undefined && (e.reqCtx === null || typeof e.reqCtx !== "object"))
    throw new MnemeError("INVALID_EVENTS", `event ${i}: reqCtx must be an object`);
  checkEventVersion(e.eventVersion, i);
}

/** An event whose own `version` is not the next one: CONFLICT when it is taken, else INVALID_EVENTS. */
function versionRefused(e: NewEvent, i: number, current: number, next: number): MnemeError {
  const v = e.version as number;
  if (Number.isInteger(v) && v >= 1 && v <= current) {
    return new MnemeError("CONFLICT", `version ${v} of aggregate ${e.aggregateUuid} is taken (current ${current})`, {
      details: [{ message: "version taken", aggregateUuid: e.aggregateUuid, version: v, currentVersion: current }],
    });
  }
  return new MnemeError("INVALID_EVENTS", `event ${i}: version ${String(v)} of aggregate ${e.aggregateUuid} is not the next one (${next})`);
}

/** The stored form of a checked event: deeply frozen, its payload a frozen copy (neither appender nor reader can change it). */
function storedEvent(e: NewEvent, position: number, version: number, reqCtx: RequestContext, payload: unknown): Event {
  const ev: Event = {
    eventUuid: e.eventUuid ?? newUuid(),
    position,
    tenantUuid: e.tenantUuid ?? "",
    domain: e.domain,
    name: e.name,
    aggregateUuid: e.aggregateUuid,
    version,
    createdAt: e.createdAt ?? nowNs(),
    reqCtx,
    payload,
  };
  if (e.commandUuid !== undefined) ev.commandUuid = ev.causationId = e.commandUuid;
  const correlation = reqCtx.correlationId ?? e.commandUuid;
  if (correlation !== undefined) ev.correlationId = correlation;
  if (e.eventVersion !== undefined && e.eventVersion !== 1) ev.eventVersion = e.eventVersion;
  return Object.freeze(ev);
}

function invalid(i: number, field: string): MnemeError {
  return new MnemeError("INVALID_EVENTS", `event ${i}: ${field} must be a non-empty string`);
}

/** The checked tags of each event (undefined for an event without tags); undefined when no event has tags. */
function checkTagsOf(newEvents: readonly NewEvent[]): (readonly string[] | undefined)[] | undefined {
  let out: (readonly string[] | undefined)[] | undefined;
  for (let i = 0; i < newEvents.length; i++) {
    const tags = newEvents[i]!.tags;
    if (tags !== undefined) (out ??= new Array<readonly string[] | undefined>(newEvents.length))[i] = checkEventTags(tags, i);
  }
  return out;
}

/** Index of the first position greater than `after` in an ascending list (binary search). */
function firstPositionAfter(positions: readonly number[], after: number): number {
  let lo = 0;
  let hi = positions.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (positions[mid]! <= after) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** Index of the first event whose position is greater than `after` (binary search). */
function firstAfter(events: readonly Event[], after: number): number {
  let lo = 0;
  let hi = events.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if ((events[mid] as Event).position <= after) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}
