import { newUuid, nowNs } from "../model/clock.js";
import { addListener } from "../store/listeners.js";
import { MnemeError } from "../model/errors.js";
import type { Event, NewEvent, RequestContext } from "../model/types.js";
import {
  checkAggregateIdToRead,
  checkAppendTenants,
  checkEventTexts,
  checkEventVersion,
  eventFieldJson,
  expectedVersionsMap,
  globalAggregatesSet,
  withCausation,
} from "../store/append-validation.js";
import type { CommandStore } from "../store/command-store.js";
import type { AppendListener, AppendOptions, EventRepository, ReadAllOptions } from "../store/event-repository.js";
import { checkPayloadSealing, jsonEqual, type PayloadSealing } from "../store/payload-sealing.js";
import { readAllWindow } from "../store/read-all-options.js";
import type { StoreInfo } from "../store/store-info.js";
import {
  checkEventTags,
  conditionFailed,
  itemMatchSql,
  planConditions,
  type PlannedCondition,
  planItems,
  readAfter,
  type TaggedReadOptions,
  type TaggedRead,
  type TagIndexEntry,
  tagIndexRows,
  type TagQueryItem,
  typeTag,
} from "../store/event-tags.js";
import { SqliteCommandStore } from "./sqlite-command-store.js";
import { SqliteAppendWatcher, type SqliteExternalAppendListener } from "./sqlite-append-watcher.js";
import type { SqliteStoreOptions } from "./sqlite-database.js";
import { sqliteCode, toStoreError } from "./sqlite-errors.js";
import { SqliteStoreBase } from "./sqlite-store-base.js";
import { checkRemovals, type EventRemoval, type RemovesEvents } from "../store/event-removal.js";
import { removeSqliteEvents } from "./sqlite-event-removal.js";
import { chainCreatedAt, chainHash, type ChainHead, type ChainRow, GENESIS_HASH } from "../store/event-chain.js";

const MAX_BATCH_SIZE = 100_000;

/** The default period of the onExternalAppend poll (ms). */
const DEFAULT_POLL_INTERVAL_MS = 250;

/** Constructor options of {@link SqliteEventRepository}. */
export type SqliteEventRepositoryOptions = SqliteStoreOptions & {
  /**
   * How often onExternalAppend checks for appends by other connections (other
   * processes on the same file), in ms. Default 250; 0 turns it off.
   */
  readonly pollIntervalMs?: number;
};

const COLUMNS =
  "position, event_uuid, tenant_uuid, domain, name, aggregate_uuid, version, command_uuid, created_at, req_ctx, payload, event_version";

/**
 * COLUMNS as the chain reads them: created_at as SQLite's decimal text, exact
 * whatever wrote it (a store copied from Postgres holds int64s that are no
 * double, which a number would round).
 */
const CHAIN_COLUMNS = COLUMNS.replace("created_at", "CAST(created_at AS TEXT)");

/** A row as better-sqlite3 returns it in raw mode, in COLUMNS order. */
type EventRow = [number, string, string, string, string, string, number, string | null, number, string, string | null, number];

/** A validated NewEvent, serialised, waiting for its version and position. */
interface PendingEvent {
  eventUuid: string;
  tenantUuid: string;
  domain: string;
  name: string;
  aggregateUuid: string;
  version: number | undefined;
  commandUuid: string | null;
  createdAt: number;
  reqCtxJson: string;
  payloadJson: string | null;
  eventVersion: number;
  /** The checked tags, when the event's type declares tags (see event-tags.ts). */
  tags: readonly string[] | undefined;
}

/**
 * The EventStore in one SQLite table.
 *
 * - `position` is the table's INTEGER PRIMARY KEY (the rowid): SQLite gives
 *   max+1, appends are serialised by BEGIN IMMEDIATE and a rolled-back append
 *   takes no rowid, so positions are contiguous and in commit order (gap-safe).
 * - `UNIQUE (aggregate_uuid, version)` is the last line of defence against a
 *   concurrent writer in another process; versions are checked in the same
 *   write transaction first so the caller gets CONFLICT, not a driver error.
 * - `created_at` is an INTEGER: nowNs() gives integer-valued doubles near
 *   1.8e18 (> 2^53, multiples of 256). better-sqlite3 binds a number as a
 *   double, INTEGER affinity stores it as the exactly equal int64, and reading
 *   it back without safeIntegers converts that int64 to the same double, so
 *   the round trip is exact while the column stays a plain integer for SQL.
 * - payload and reqCtx are JSON text; an undefined payload is NULL.
 * - `onExternalAppend` polls `PRAGMA data_version` (see SqliteAppendWatcher),
 *   so processes sharing the file see each other's appends live.
 */
export class SqliteEventRepository extends SqliteStoreBase implements EventRepository, RemovesEvents {
  private readonly table: string;
  /** The tag index: (tenant_uuid, tag, position), one row per tag and one for the type of each tagged event. */
  private readonly tagTable: string;
  /** Stores tags and checks append conditions (see EventRepository.storesTags). */
  readonly storesTags = true;
  private readonly listeners = new Set<AppendListener>();
  private readonly notifyQueue: Event[][] = [];
  private notifying = false;
  private readonly insertSqls = new Map<number, string>();
  private readonly watcher: SqliteAppendWatcher;
  private commandStore: SqliteCommandStore | undefined;

  constructor(opts: SqliteEventRepositoryOptions) {
    const pollIntervalMs = opts?.pollIntervalMs ?? DEFAULT_POLL_INTERVAL_MS;
    if (!Number.isInteger(pollIntervalMs) || pollIntervalMs < 0) {
      throw new MnemeError("INVALID_REQUEST", `sqlite: pollIntervalMs must be a non-negative integer, got ${String(pollIntervalMs)}`);
    }
    super(opts);
    this.table = `${this.prefix}events`;
    this.tagTable = `${this.prefix}event_tags`;
    this.watcher = new SqliteAppendWatcher({
      pollIntervalMs,
      readDataVersion: () => (this.ready().statement("PRAGMA data_version").get() as { data_version: number }).data_version,
      readHead: () => (this.ready().statement(`SELECT MAX(position) AS p FROM ${this.table}`).get() as { p: number | null }).p ?? 0,
    });
  }

  protected createTables(): void {
    this.db.exec(`
      CREATE TABLE IF NOT EXISTS ${this.table} (
        position INTEGER PRIMARY KEY,
        event_uuid TEXT NOT NULL,
        tenant_uuid TEXT NOT NULL,
        domain TEXT NOT NULL,
        name TEXT NOT NULL,
        aggregate_uuid TEXT NOT NULL,
        version INTEGER NOT NULL,
        command_uuid TEXT,
        created_at INTEGER NOT NULL,
        req_ctx TEXT NOT NULL,
        payload TEXT,
        event_version INTEGER NOT NULL DEFAULT 1,
        hash TEXT,
        UNIQUE (aggregate_uuid, version)
      );
      CREATE UNIQUE INDEX IF NOT EXISTS ${this.table}_event_uuid ON ${this.table} (event_uuid);
      CREATE TABLE IF NOT EXISTS ${this.tagTable} (
        tenant_uuid TEXT NOT NULL,
        tag TEXT NOT NULL,
        position INTEGER NOT NULL,
        PRIMARY KEY (tenant_uuid, tag, position)
      ) WITHOUT ROWID;
    `);
    // A file made before event versions: the column is added, every stored event is version 1.
    const columns = this.db.statement(`PRAGMA table_info(${this.table})`).all() as { name: string }[];
    if (!columns.some((c) => c.name === "event_version")) {
      this.db.exec(`ALTER TABLE ${this.table} ADD COLUMN event_version INTEGER NOT NULL DEFAULT 1`);
    }
    // A file made before the hash chain: the column is added and the chain computed over the stored events,
    // in this write transaction (the store format upgrade), so no append sees a half-built chain.
    if (!columns.some((c) => c.name === "hash")) this.db.exec(`ALTER TABLE ${this.table} ADD COLUMN hash TEXT`);
    this.chainUnchained();
  }

  /** Keeps the hash chain (see src/store/event-chain.ts). */
  readonly chainsEvents = true;

  /**
   * Chains the events stored without a hash (by a release before the chain, or by an instance of one still
   * appending beside this release during a rolling deploy; they are always the newest), inside the caller's
   * write transaction. Returns the head.
   */
  private chainUnchained(): ChainHead {
    const last = this.db.statement(`SELECT position, hash FROM ${this.table} ORDER BY position DESC LIMIT 1`).get() as
      { position: number; hash: string | null } | undefined;
    if (last === undefined) return { position: 0, hash: GENESIS_HASH };
    if (last.hash !== null) return { position: last.position, hash: last.hash };
    const first = (this.db.statement(`SELECT MIN(position) AS p FROM ${this.table} WHERE hash IS NULL`).get() as { p: number }).p;
    return this.rechainFrom(first);
  }

  /** Recomputes the stored hashes from `from` to the head (inside the caller's write transaction); returns the head. */
  private rechainFrom(from: number): ChainHead {
    const before = this.db.statement(`SELECT hash FROM ${this.table} WHERE position < ? ORDER BY position DESC LIMIT 1`).get(from) as
      { hash: string | null } | undefined;
    if (before !== undefined && before.hash === null)
      throw new MnemeError("STORE_ERROR", `the hash chain has a hole before position ${from}`);
    let previous = before?.hash ?? GENESIS_HASH;
    let position = 0;
    const update = this.db.statement(`UPDATE ${this.table} SET hash = ? WHERE position = ?`);
    const page = this.db.rawStatement(`SELECT ${CHAIN_COLUMNS} FROM ${this.table} WHERE position >= ? ORDER BY position LIMIT 1000`);
    let after = from;
    for (;;) {
      const rows = page.all(after) as ChainEventRow[];
      for (const r of rows) {
        previous = chainHash(previous, chainRowOf(r));
        position = r[0];
        update.run(previous, position);
      }
      if (rows.length < 1000) break;
      after = position + 1;
    }
    return { position, hash: previous };
  }

  /** See ChainedEvents.chainHead: the hash stored with the highest position. */
  async chainHead(): Promise<ChainHead> {
    try {
      const last = this.ready().statement(`SELECT position, hash FROM ${this.table} ORDER BY position DESC LIMIT 1`).get() as
        { position: number; hash: string | null } | undefined;
      if (last === undefined) return { position: 0, hash: GENESIS_HASH };
      if (last.hash === null) return this.ready().writeTransaction(() => this.chainUnchained());
      return { position: last.position, hash: last.hash };
    } catch (e) {
      throw e instanceof MnemeError ? e : toStoreError(e, "chainHead");
    }
  }

  /** See ChainedEvents.readChain: keyset pages of the stored rows with their hashes. */
  readChain(opts: { afterPosition?: number; batchSize?: number } = {}): AsyncIterable<ChainRow[]> {
    return this.chainPages(opts.afterPosition ?? 0, opts.batchSize ?? 1000);
  }

  private async *chainPages(after: number, batchSize: number): AsyncGenerator<ChainRow[], void, undefined> {
    let position = after;
    for (;;) {
      let rows: ChainRowData[];
      try {
        rows = this.ready()
          .rawStatement(`SELECT ${CHAIN_COLUMNS}, hash FROM ${this.table} WHERE position > ? ORDER BY position LIMIT ?`)
          .all(position, batchSize) as ChainRowData[];
      } catch (e) {
        throw toStoreError(e, "readChain");
      }
      if (rows.length === 0) return;
      position = rows[rows.length - 1]![0];
      yield rows.map((r) => ({ ...chainRowOf(r), hash: r[12] }));
      if (rows.length < batchSize) return;
    }
  }

  async append(events: readonly NewEvent[], opts: AppendOptions = {}): Promise<Event[]> {
    return this.appendSync(events, opts);
  }

  /** For the personal-data migration only: see EventRepository.sealStoredPayloads. One write transaction. */
  async sealStoredPayloads(rewrites: readonly PayloadSealing[]): Promise<number> {
    checkPayloadSealing("sealStoredPayloads", rewrites);
    const db = this.ready();
    try {
      return db.writeTransaction(() => {
        let n = 0;
        let first = Infinity;
        for (const r of rewrites) {
          const row = db.statement(`SELECT position, payload FROM ${this.table} WHERE event_uuid = ?`).get(r.id) as
            { position: number; payload: string | null } | undefined;
          if (row === undefined || row.payload === null || !jsonEqual(JSON.parse(row.payload), r.stored)) continue;
          db.statement(`UPDATE ${this.table} SET payload = ? WHERE event_uuid = ?`).run(JSON.stringify(r.sealed), r.id);
          first = Math.min(first, row.position);
          n++;
        }
        // The one sanctioned rewrite of stored events: the chain is recomputed from the first one sealed.
        if (n > 0) this.rechainFrom(first);
        return n;
      });
    } catch (e) {
      throw e instanceof MnemeError ? e : toStoreError(e, "sealStoredPayloads");
    }
  }

  /** See RemovesEvents.removeEvents (retention): one write transaction, so no append runs meanwhile. */
  async removeEvents(run: string, removals: readonly EventRemoval[]): Promise<number> {
    checkRemovals(run, removals);
    const db = this.ready();
    try {
      return db.writeTransaction(() => removeSqliteEvents(db, this.table, this.tagTable, run, removals));
    } catch (e) {
      throw e instanceof MnemeError ? e : toStoreError(e, "removeEvents");
    }
  }

  /** Joins a SqliteCommandStore on the same connection: a command's record then commits with its events. */
  joinCommandStore(commandStore: CommandStore): boolean {
    if (!(commandStore instanceof SqliteCommandStore) || !this.sharesConnectionWith(commandStore)) return false;
    this.commandStore = commandStore;
    return true;
  }

  /** The whole append runs synchronously, so listeners see batches in commit order. */
  private appendSync(events: readonly NewEvent[], opts: AppendOptions): Event[] {
    if (!Array.isArray(events)) throw new MnemeError("INVALID_EVENTS", "append: events must be an array");
    const expected = expectedVersionsMap(opts?.expectedVersions);
    const globals = globalAggregatesSet(opts?.globalAggregates);
    const db = this.ready();
    if (events.length === 0 && expected.size === 0) return [];
    const ctxCache: ReqCtxCache = { obj: undefined, json: "{}" };
    const pending = events.map((e, i) => prepareEvent(e, i, ctxCache));
    const conditions = events.length > 0 ? planConditions(opts?.conditions) : undefined;
    const record = events.length > 0 ? opts?.commandRecord : undefined;
    const commandStore = record === undefined ? undefined : this.commandStore;

    // One indexed lookup per aggregate gives both its current version and its tenant (of version 1).
    const head = db.statement(
      `SELECT MAX(version) AS v, (SELECT tenant_uuid FROM ${this.table} WHERE aggregate_uuid = ? AND version = 1) AS t FROM ${this.table} WHERE aggregate_uuid = ?`,
    );
    const positions: number[] = new Array<number>(pending.length);
    try {
      db.writeTransaction(() => {
        const current = new Map<string, number>();
        const tenants = new Map<string, string | null>();
        const lookUp = (agg: string): void => {
          const row = head.get(agg, agg) as { v: number | null; t: string | null };
          current.set(agg, row.v ?? 0);
          tenants.set(agg, row.t);
        };
        const versionOf = (agg: string): number => {
          let v = current.get(agg);
          if (v === undefined) {
            lookUp(agg);
            v = current.get(agg)!;
          }
          return v;
        };
        checkAppendTenants(pending, globals, (agg) => {
          if (!tenants.has(agg)) lookUp(agg);
          return tenants.get(agg) ?? undefined;
        });
        for (const [agg, want] of expected) {
          const have = versionOf(agg);
          if (have !== want) {
            throw new MnemeError("CONFLICT", `aggregate ${agg} is at version ${have}, expected ${want}`, {
              details: [{ message: "version moved", aggregateUuid: agg, expectedVersion: want, actualVersion: have }],
            });
          }
        }
        for (let i = 0; i < pending.length; i++) {
          const p = pending[i] as PendingEvent;
          const next = versionOf(p.aggregateUuid) + 1;
          if (p.version === undefined) {
            p.version = next;
          } else if (p.version < next) {
            throw new MnemeError("CONFLICT", `aggregate ${p.aggregateUuid} already has version ${p.version} (events[${i}])`, {
              details: [{ message: "version taken", aggregateUuid: p.aggregateUuid, version: p.version }],
            });
          } else if (p.version > next) {
            throw new MnemeError(
              "INVALID_EVENTS",
              `events[${i}]: version ${p.version} of aggregate ${p.aggregateUuid} leaves a gap (next is ${next})`,
            );
          }
          current.set(p.aggregateUuid, p.version);
        }
        if (conditions !== undefined) this.checkConditions(conditions);
        this.insertRows(pending, positions, this.chainUnchained());
        this.insertTags(pending, positions);
        if (commandStore !== undefined && record !== undefined) commandStore.recordSync(record);
      });
    } catch (e) {
      throw appendError(e);
    }
    // Built from the stored JSON, so live listeners see exactly what a later read returns.
    const stored = pending.map((p, i) => toEvent(positions[i] as number, p));
    if (stored.length > 0) {
      this.watcher.noteOwnAppend(positions[0] as number, positions[positions.length - 1] as number);
      this.notify(stored);
    }
    return stored;
  }

  /** CONFLICT when an event matching a condition's item was stored after its position (inside the write transaction). */
  private checkConditions(conditions: readonly PlannedCondition[]): void {
    for (let c = 0; c < conditions.length; c++) {
      const { tenantUuid, items, after } = conditions[c]!;
      for (let k = 0; k < items.length; k++) {
        const values: unknown[] = [];
        const sql = `${itemMatchSql(this.tagTable, tenantUuid, items[k]!, { after }, (v) => (values.push(v), "?"))} ORDER BY t.position LIMIT 1`;
        const row = this.db.statement(sql).get(...values) as { position: number } | undefined;
        if (row !== undefined) throw conditionFailed(c, k, after, row.position);
      }
    }
  }

  /** The tag index rows of the tagged events just inserted (none for an append without tags). */
  private insertTags(pending: readonly PendingEvent[], positions: readonly number[]): void {
    let insert: ReturnType<typeof this.db.statement> | undefined;
    for (let i = 0; i < pending.length; i++) {
      const p = pending[i]!;
      if (p.tags === undefined) continue;
      insert ??= this.db.statement(`INSERT INTO ${this.tagTable} (tenant_uuid, tag, position) VALUES (?, ?, ?)`);
      const position = positions[i]!;
      insert.run(p.tenantUuid, typeTag(p.domain, p.name), position);
      for (const tag of p.tags) insert.run(p.tenantUuid, tag, position);
    }
  }

  /** See EventRepository.indexTags: one write transaction; rows present already are ignored. */
  async indexTags(entries: readonly TagIndexEntry[]): Promise<number> {
    const rows = tagIndexRows(entries);
    const db = this.ready();
    try {
      return db.writeTransaction(() => {
        const tenantAt = db.statement(`SELECT tenant_uuid AS t FROM ${this.table} WHERE position = ?`);
        const insert = db.statement(`INSERT OR IGNORE INTO ${this.tagTable} (tenant_uuid, tag, position) VALUES (?, ?, ?)`);
        let added = 0;
        for (const r of rows) {
          const at = tenantAt.get(r.position) as { t: string } | undefined;
          if (at === undefined || at.t !== r.tenantUuid) {
            throw new MnemeError(
              "INVALID_REQUEST",
              `indexTags: no event of tenant ${JSON.stringify(r.tenantUuid)} at position ${r.position}`,
            );
          }
          added += Number(insert.run(r.tenantUuid, r.tag, r.position).changes);
        }
        return added;
      });
    } catch (e) {
      throw e instanceof MnemeError ? e : toStoreError(e, "indexTags");
    }
  }

  /**
   * See EventRepository.readTagged: the head, then the matches up to it. Positions are given under the write
   * lock in commit order, so an append committed between the two statements lies above the head and is left out.
   */
  async readTagged(tenantUuid: string, items: readonly TagQueryItem[], opts?: TaggedReadOptions): Promise<TaggedRead<Event>> {
    if (typeof tenantUuid !== "string") throw new MnemeError("INVALID_REQUEST", "readTagged: tenantUuid must be a string");
    const planned = planItems(items, "readTagged");
    const after = readAfter(opts);
    const db = this.ready();
    try {
      const head = (db.statement(`SELECT MAX(position) AS p FROM ${this.table}`).get() as { p: number | null }).p ?? 0;
      const values: unknown[] = [];
      const bind = (v: unknown): string => (values.push(v), "?");
      const union = planned
        .map((item) => itemMatchSql(this.tagTable, tenantUuid, item, after > 0 ? { after, until: head } : { until: head }, bind))
        .join(" UNION ");
      const rows = db
        .rawStatement(`SELECT ${COLUMNS} FROM ${this.table} WHERE position IN (${union}) ORDER BY position`)
        .all(...values) as EventRow[];
      return { events: rows.map(rowToEvent), position: head };
    } catch (e) {
      throw e instanceof MnemeError ? e : toStoreError(e, "readTagged");
    }
  }

  /**
   * Inserts with multi-row INSERTs (chunks of 64/16/4/1 rows, one cached
   * statement per size): a batch of 100 costs 4 statement runs, not 100.
   * Positions follow the head (the write lock is ours, and a rolled-back
   * append leaves no row), and each row's hash follows the one before it.
   */
  private insertRows(pending: readonly PendingEvent[], positions: number[], head: ChainHead): void {
    let previous = head.hash;
    let i = 0;
    while (i < pending.length) {
      const left = pending.length - i;
      const size = left >= 64 ? 64 : left >= 16 ? 16 : left >= 4 ? 4 : 1;
      const params = new Array<unknown>(size * 13);
      for (let k = 0, j = 0; k < size; k++) {
        const p = pending[i + k] as PendingEvent;
        const position = head.position + i + k + 1;
        positions[i + k] = position;
        previous = chainHash(previous, {
          position,
          eventUuid: p.eventUuid,
          tenantUuid: p.tenantUuid,
          domain: p.domain,
          name: p.name,
          aggregateUuid: p.aggregateUuid,
          version: p.version as number,
          commandUuid: p.commandUuid,
          createdAt: chainCreatedAt(p.createdAt),
          eventVersion: p.eventVersion,
          reqCtx: p.reqCtxJson,
          payload: p.payloadJson,
        });
        params[j++] = position;
        params[j++] = p.eventUuid;
        params[j++] = p.tenantUuid;
        params[j++] = p.domain;
        params[j++] = p.name;
        params[j++] = p.aggregateUuid;
        params[j++] = p.version;
        params[j++] = p.commandUuid;
        params[j++] = p.createdAt;
        params[j++] = p.reqCtxJson;
        params[j++] = p.payloadJson;
        params[j++] = p.eventVersion;
        params[j++] = previous;
      }
      this.db.statement(this.insertSql(size)).run(params);
      i += size;
    }
  }

  private insertSql(rows: number): string {
    let sql = this.insertSqls.get(rows);
    if (sql === undefined) {
      sql =
        `INSERT INTO ${this.table} (position, event_uuid, tenant_uuid, domain, name, aggregate_uuid, version, command_uuid, created_at, req_ctx, payload, event_version, hash) VALUES ` +
        Array.from({ length: rows }, () => "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)").join(", ");
      this.insertSqls.set(rows, sql);
    }
    return sql;
  }

  async loadAggregate(aggregateUuid: string, opts: { fromVersion?: number } = {}): Promise<Event[]> {
    checkAggregateIdToRead(aggregateUuid, "loadAggregate");
    const from = opts?.fromVersion ?? 1;
    if (typeof from !== "number" || Number.isNaN(from))
      throw new MnemeError("INVALID_REQUEST", `loadAggregate: fromVersion must be a number, got ${String(from)}`);
    const db = this.ready();
    try {
      const rows = db
        .rawStatement(`SELECT ${COLUMNS} FROM ${this.table} WHERE aggregate_uuid = ? AND version >= ? ORDER BY version`)
        .all(aggregateUuid, from) as EventRow[];
      return rows.map(rowToEvent);
    } catch (e) {
      throw toStoreError(e, "loadAggregate");
    }
  }

  async loadEvents(eventUuids: readonly string[]): Promise<Event[]> {
    if (!Array.isArray(eventUuids) || eventUuids.some((u) => typeof u !== "string")) {
      throw new MnemeError("INVALID_REQUEST", "loadEvents: eventUuids must be an array of strings");
    }
    if (eventUuids.length === 0) return [];
    const db = this.ready();
    try {
      const rows = db
        .rawStatement(`SELECT ${COLUMNS} FROM ${this.table} WHERE event_uuid IN (SELECT value FROM json_each(?)) ORDER BY position`)
        .all(JSON.stringify(eventUuids)) as EventRow[];
      return rows.map(rowToEvent);
    } catch (e) {
      throw toStoreError(e, "loadEvents");
    }
  }

  async loadAggregates(aggregateUuids: readonly string[]): Promise<Map<string, Event[]>> {
    if (!Array.isArray(aggregateUuids) || aggregateUuids.some((u) => typeof u !== "string")) {
      throw new MnemeError("INVALID_REQUEST", "loadAggregates: aggregateUuids must be an array of strings");
    }
    for (const u of aggregateUuids) checkAggregateIdToRead(u, "loadAggregates");
    const result = new Map<string, Event[]>();
    for (const u of aggregateUuids) result.set(u, []);
    if (result.size === 0) return result;
    const db = this.ready();
    let rows: EventRow[];
    try {
      // One statement whatever the list length: the ids travel as one JSON parameter.
      rows = db
        .rawStatement(
          `SELECT ${COLUMNS} FROM ${this.table}
           WHERE aggregate_uuid IN (SELECT value FROM json_each(?)) ORDER BY aggregate_uuid, version`,
        )
        .all(JSON.stringify([...result.keys()])) as EventRow[];
    } catch (e) {
      throw toStoreError(e, "loadAggregates");
    }
    for (const row of rows) (result.get(row[5]) as Event[]).push(rowToEvent(row));
    return result;
  }

  readAll(opts: ReadAllOptions = {}): AsyncIterable<Event[]> {
    return this.pages(opts ?? {});
  }

  private async *pages(opts: ReadAllOptions): AsyncGenerator<Event[], void, undefined> {
    const { afterPosition: after, untilPosition: until, batchSize } = readAllWindow(opts, MAX_BATCH_SIZE);
    const paths = opts.eventPaths;
    if (paths !== undefined && paths.length === 0) return;
    const signal = opts.signal;

    // The upper bound is re-read for every page: the page query then covers exactly
    // (position, bound], so after a short page the next one starts at the bound
    // instead of rescanning a filtered tail, and events committed meanwhile show up.
    let sql = `SELECT ${COLUMNS} FROM ${this.table} WHERE position > ? AND position <= ?`;
    const fixed: unknown[] = [];
    if (opts.tenantUuid !== undefined) {
      sql += " AND tenant_uuid = ?";
      fixed.push(opts.tenantUuid);
    }
    if (paths !== undefined) {
      sql += " AND (domain || '.' || name) IN (SELECT value FROM json_each(?))";
      fixed.push(JSON.stringify(paths));
    }
    sql += " ORDER BY position LIMIT ?";
    fixed.push(batchSize);
    const headSql = `SELECT MAX(position) AS p FROM ${this.table}`;

    let position = after;
    for (;;) {
      if (signal?.aborted === true) return;
      let rows: EventRow[];
      let bound: number;
      try {
        const db = this.ready();
        const head = (db.statement(headSql).get() as { p: number | null }).p ?? 0;
        bound = until === undefined ? head : Math.min(head, until);
        if (position >= bound) return;
        rows = db.rawStatement(sql).all(position, bound, ...fixed) as EventRow[];
      } catch (e) {
        throw toStoreError(e, "readAll");
      }
      if (rows.length === 0) return;
      const page = rows.map(rowToEvent);
      // A short page means everything up to the bound was scanned.
      position = rows.length < batchSize ? bound : (page[page.length - 1] as Event).position;
      yield page;
    }
  }

  async headPosition(): Promise<number> {
    try {
      const row = this.ready().statement(`SELECT MAX(position) AS p FROM ${this.table}`).get() as { p: number | null };
      return row.p ?? 0;
    } catch (e) {
      throw toStoreError(e, "headPosition");
    }
  }

  async info(): Promise<StoreInfo> {
    return this.tableInfo(this.table, "info", { newestBy: "position" });
  }

  /**
   * Listeners run synchronously right after COMMIT. A listener that appends
   * re-entrantly is queued behind the batch being delivered, so every listener
   * sees batches in commit order. A throwing listener does not undo or fail the
   * append (it committed); its error is reported as a process warning.
   */
  onAppend(listener: AppendListener): () => void {
    return addListener(this.listeners, listener, "onAppend");
  }

  /**
   * Called when another connection to the file (another process, or another
   * createSqliteBackends in this one) appended events: every `pollIntervalMs`,
   * a check of `PRAGMA data_version` and, when it moved, of the head position.
   * Never for this connection's own appends (onAppend reports those). The
   * caller pulls with readAll; the argument is the head position seen.
   */
  onExternalAppend(listener: SqliteExternalAppendListener): () => void {
    if (typeof listener !== "function") throw new MnemeError("INVALID_REQUEST", "onExternalAppend: listener must be a function");
    try {
      this.ready();
      return this.watcher.subscribe(listener);
    } catch (e) {
      throw toStoreError(e, "onExternalAppend");
    }
  }

  /** @internal The poll's work, run now (tests drive it without timers); true when listeners were told. */
  checkExternalAppends(): boolean {
    return this.watcher.poll();
  }

  /** True while onExternalAppend polls (it has listeners and a non-zero pollIntervalMs). */
  get externalAppendWatching(): boolean {
    return this.watcher.running;
  }

  override async close(): Promise<void> {
    this.watcher.close();
    this.listeners.clear();
    await super.close();
  }

  private notify(events: Event[]): void {
    if (this.listeners.size === 0) return;
    this.notifyQueue.push(events);
    if (this.notifying) return;
    this.notifying = true;
    try {
      let batch: Event[] | undefined;
      while ((batch = this.notifyQueue.shift()) !== undefined) {
        for (const listener of [...this.listeners]) {
          try {
            listener(batch);
          } catch (e) {
            process.emitWarning(e instanceof Error ? e : new Error(String(e)), { code: "MNEME_APPEND_LISTENER_FAILED" });
          }
        }
      }
    } finally {
      this.notifying = false;
    }
  }
}

/** The events of one command share one reqCtx object: serialise it once per call. */
interface ReqCtxCache {
  obj: RequestContext | undefined;
  json: string;
}

function prepareEvent(e: NewEvent, i: number, ctxCache: ReqCtxCache): PendingEvent {
  if (typeof e !== "object" || e === null) throw new MnemeError("INVALID_EVENTS", `events[${i}] is not an object`);
  for (const field of ["aggregateUuid", "domain", "name"] as const) {
    if (typeof e[field] !== "string" || e[field] === "")
      throw new MnemeError("INVALID_EVENTS", `events[${i}].${field} must be a non-empty string`);
  }
  optionalString(e.eventUuid, i, "eventUuid", true);
  optionalString(e.tenantUuid, i, "tenantUuid", false);
  optionalString(e.commandUuid, i, "commandUuid", true);
  checkEventTexts(e, i);
  checkEventVersion(e.eventVersion, i);
  if (e.version !== undefined && (!Number.isInteger(e.version) || e.version < 1)) {
    throw new MnemeError("INVALID_EVENTS", `events[${i}].version must be an integer >= 1, got ${String(e.version)}`);
  }
  if (e.createdAt !== undefined && !Number.isInteger(e.createdAt)) {
    throw new MnemeError("INVALID_EVENTS", `events[${i}].createdAt must be an integer number of ns, got ${String(e.createdAt)}`);
  }
  if (e.reqCtx !== undefined && (typeof e.reqCtx !== "object" || e.reqCtx === null || Array.isArray(e.reqCtx))) {
    throw new MnemeError("INVALID_EVENTS", `events[${i}].reqCtx must be an object`);
  }
  return {
    eventUuid: e.eventUuid ?? newUuid(),
    tenantUuid: e.tenantUuid ?? "",
    domain: e.domain,
    name: e.name,
    aggregateUuid: e.aggregateUuid,
    version: e.version,
    commandUuid: e.commandUuid ?? null,
    createdAt: e.createdAt ?? nowNs(),
    reqCtxJson: e.reqCtx === undefined ? "{}" : reqCtxJson(e.reqCtx, i, ctxCache),
    payloadJson: eventFieldJson(e.payload, i, "payload"),
    eventVersion: e.eventVersion ?? 1,
    tags: e.tags === undefined ? undefined : checkEventTags(e.tags, i),
  };
}

function reqCtxJson(reqCtx: RequestContext, i: number, cache: ReqCtxCache): string {
  if (reqCtx !== cache.obj) {
    cache.json = eventFieldJson(reqCtx, i, "reqCtx");
    cache.obj = reqCtx;
  }
  return cache.json;
}

function optionalString(v: unknown, i: number, field: string, nonEmpty: boolean): void {
  if (v === undefined) return;
  if (typeof v !== "string" || (nonEmpty && v === "")) {
    throw new MnemeError("INVALID_EVENTS", `events[${i}].${field} must be a ${nonEmpty ? "non-empty " : ""}string`);
  }
}

function appendError(e: unknown): MnemeError {
  // Only reachable when a writer outside this process raced us past the version check.
  if (sqliteCode(e) === "SQLITE_CONSTRAINT_UNIQUE" || sqliteCode(e) === "SQLITE_CONSTRAINT_PRIMARYKEY") {
    const msg = e instanceof Error ? e.message : "";
    return msg.includes("event_uuid")
      ? new MnemeError("CONFLICT", "append: an event with this eventUuid is already stored", { cause: e })
      : new MnemeError("CONFLICT", "append: an aggregate version is already taken", { cause: e });
  }
  return toStoreError(e, "append");
}

function parseReqCtx(json: string): RequestContext {
  return json === "{}" ? {} : (JSON.parse(json) as RequestContext);
}

function toEvent(position: number, p: PendingEvent): Event {
  const e: Event = {
    eventUuid: p.eventUuid,
    position,
    tenantUuid: p.tenantUuid,
    domain: p.domain,
    name: p.name,
    aggregateUuid: p.aggregateUuid,
    version: p.version as number,
    createdAt: p.createdAt,
    reqCtx: parseReqCtx(p.reqCtxJson),
    payload: p.payloadJson === null ? undefined : JSON.parse(p.payloadJson),
  };
  if (p.commandUuid !== null) e.commandUuid = p.commandUuid;
  if (p.eventVersion !== 1) e.eventVersion = p.eventVersion;
  return withCausation(e);
}

/** A row of CHAIN_COLUMNS: EventRow with created_at as text. */
type ChainEventRow = [number, string, string, string, string, string, number, string | null, string, string, string | null, number];

/** A row of CHAIN_COLUMNS followed by the hash. */
type ChainRowData = [...ChainEventRow, string | null];

function chainRowOf(r: ChainEventRow | ChainRowData): Omit<ChainRow, "hash"> {
  return {
    position: r[0],
    eventUuid: r[1],
    tenantUuid: r[2],
    domain: r[3],
    name: r[4],
    aggregateUuid: r[5],
    version: r[6],
    commandUuid: r[7],
    createdAt: r[8],
    eventVersion: r[11],
    reqCtx: r[9],
    payload: r[10],
  };
}

function rowToEvent(r: EventRow): Event {
  const e: Event = {
    eventUuid: r[1],
    position: r[0],
    tenantUuid: r[2],
    domain: r[3],
    name: r[4],
    aggregateUuid: r[5],
    version: r[6],
    createdAt: r[8],
    reqCtx: parseReqCtx(r[9]),
    payload: r[10] === null ? undefined : JSON.parse(r[10]),
  };
  if (r[7] !== null) e.commandUuid = r[7];
  if (r[11] !== 1) e.eventVersion = r[11];
  return withCausation(e);
}
