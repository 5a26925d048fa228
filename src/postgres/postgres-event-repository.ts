import { sha256Hex } from "../store/sha256.js";
import { newUuid } from "../model/clock.js";
import { checkAggregateIdToRead } from "../store/append-validation.js";
import { MnemeError } from "../model/errors.js";
import type { Event, NewEvent } from "../model/types.js";
import type { CommandStore } from "../store/command-store.js";
import type { AppendListener, AppendOptions, EventRepository, ReadAllOptions } from "../store/event-repository.js";
import { checkPayloadSealing, type PayloadSealing } from "../store/payload-sealing.js";
import { readAllWindow } from "../store/read-all-options.js";
import {
  itemMatchSql,
  type PlannedItem,
  planItems,
  readAfter,
  type TagIndexEntry,
  tagIndexRows,
  type TaggedRead,
  type TaggedReadOptions,
  type TagQueryItem,
} from "../store/event-tags.js";
import type { StoreInfo } from "../store/store-info.js";
import { type ChainColumns, type ChainHead, type ChainRow, chainRowOfColumns, GENESIS_HASH } from "../store/event-chain.js";
import { checkRemovals, type EventRemoval, type RemovesEvents } from "../store/event-removal.js";
import { removePostgresEvents } from "./postgres-event-removal.js";
import { prepare, recordColumns } from "./postgres-append-input.js";
import { type ExternalAppendListener, PostgresAppendWatcher } from "./postgres-append-watcher.js";
import { PostgresAppendWriter } from "./postgres-append-writer.js";
import { type EventRow, PostgresAggregateLoader, toEvent } from "./postgres-aggregate-loader.js";
import { PostgresTaggedReader } from "./postgres-tagged-reader.js";
import { PostgresCommandStore } from "./postgres-command-store.js";
import { mapPgError } from "./postgres-errors.js";
import { EVENT_COLUMNS } from "./postgres-append-flush-ddl.js";
import { eventsDdl } from "./postgres-events-ddl.js";
import type { PgQuery } from "./postgres-pool.js";
import { advisoryKey } from "./postgres-schema.js";
import { PostgresStoreBase, type PostgresStoreOptions } from "./postgres-store-base.js";

/** Options of {@link PostgresEventRepository}. */
export interface PostgresEventRepositoryOptions extends PostgresStoreOptions {
  /** Period of the polling fallback behind LISTEN/NOTIFY for onExternalAppend. Default 500 ms; 0 turns polling off. */
  readonly pollIntervalMs?: number;
  /** Wait before reconnecting the LISTEN client after an error. Default 1000 ms. */
  readonly reconnectDelayMs?: number;
  /**
   * Group commit: at most this many appends (calls) share one statement and
   * one transaction. Default 50, at most 60 (each call is a subtransaction,
   * and Postgres keeps up to 64 of a transaction's subtransaction ids in shared
   * memory). 1 turns group commit off: every append is a statement of its own.
   */
  readonly maxAppendsPerCommit?: number;
}

/** Shapes of readTagged's SQL prepared per connection at most (an application has a few); others are planned each time. */
const MAX_PREPARED_TAGGED_READS = 64;
const MAX_BATCH_SIZE = 10_000;

/**
 * The EventStore on Postgres, for many app instances on one database.
 *
 * Group commit. Appends are queued and sent by one flush at a time: a call
 * that finds no flush under way is sent at once (no timer, so a lone caller
 * waits for nothing), and the calls that arrive while a flush runs go together
 * in the next one, up to `maxAppendsPerCommit`. A flush is one statement, one
 * transaction, which takes the schema's lock, checks each call (tenant rule,
 * expected versions, given versions) and writes it (events, and the command
 * record when the repository joined the command store) or refuses it whole,
 * with its own outcome: CONFLICT, NOT_FOUND, INVALID_EVENTS. A lone call on one
 * aggregate (a sequential command) goes through `mneme_append_aggregate`, whose
 * refusal is the statement's error; any other flush through
 * `mneme_append_flush`, one outcome row per call (see
 * postgres-append-flush-ddl.ts for how it avoids a subtransaction per call).
 * Calls see the calls before them in the flush as if those had committed
 * before, which they do: the flush commits them together. A failure of the
 * whole statement (a lost connection) fails every call of the flush, and
 * nothing of it is written; a statement refused for another reason is sent
 * again call by call, so no call fails for another's value.
 *
 * Gap safety. The append function first takes `pg_advisory_xact_lock` on a key
 * of the schema, so appends (of every instance) are serialised from before
 * positions are allocated until after their commit is visible: Postgres makes a
 * commit visible (ProcArrayEndTransaction) before it releases the
 * transaction's locks. So positions are handed out in commit order and at most
 * one appender holds unpublished positions, always the highest. A reader's
 * statement snapshot therefore sees a prefix of the positions: nothing can
 * commit later with a lower position, which is what reading "below the oldest
 * in-flight append" means here. We chose this over filtering rows with
 * `tx_id < pg_snapshot_xmin(pg_current_snapshot())` because (1) the xid and a
 * sequence value are allocated independently, so without a lock like this one
 * an appender can hold an older xid and a higher position, and the filter
 * alone is not gap-safe; (2) the snapshot xmin is cluster-wide, so any long
 * write transaction (another app, a readmodel restore in this database) would
 * stall event delivery; (3) pg_notify in the append already serialises the
 * commits of appending transactions (Postgres takes a global lock in
 * PreCommit_Notify), so the lock costs little more. Group commit is what keeps
 * the lock cheap: one lock, one commit (one WAL flush) and one NOTIFY per flush
 * instead of per call. The versions are read under the lock too (each
 * statement of a VOLATILE plpgsql function has a fresh snapshot in READ
 * COMMITTED, the default isolation this relies on), so an event without
 * `version` always gets the next one and expectedVersions are checked exactly;
 * the unique (aggregate_uuid, version) index stays as a guard.
 *
 * Consecutive positions. Under the lock, the next position is the highest
 * committed one plus one, read from the table (the primary key's last entry)
 * inside the appending transaction: a refused call, a rolled-back flush or a
 * connection that dies before its COMMIT leaves no hole, because its rows,
 * and with them its positions, are gone with it. (The sequence of earlier
 * releases cannot give that: nextval and setval are not undone by a rollback.)
 * The sequence is still set to the head before each commit, for the append
 * functions of earlier releases that an older instance may call (or put back)
 * during a rolling deploy; see docs/scaling.md.
 *
 * Numbers: positions are BIGINT and read back with Number (exact below 2^53);
 * createdAt is BIGINT ns, written from an integer-valued double and read back
 * with Number, so it round-trips exactly (values above 2^53 are multiples of
 * 256 ns, as `nowNs()` makes them). Payloads and reqCtx are JSONB: key order is
 * not kept and strings holding U+0000 cannot be stored (INVALID_EVENTS).
 *
 * @example
 * const repo = new PostgresEventRepository({ pool: new pg.Pool({ connectionString }), schema: "app" });
 * await repo.init();
 */
export class PostgresEventRepository extends PostgresStoreBase implements EventRepository, RemovesEvents {
  private readonly channel: string;
  private readonly instanceId = newUuid();
  private readonly writer: PostgresAppendWriter;
  private readonly loader: PostgresAggregateLoader;
  private readonly taggedReader: PostgresTaggedReader;
  /** True once joinCommandStore joined a command store of the same pool and schema. */
  private recordsWithAppend = false;
  private readonly watcher: PostgresAppendWatcher;
  /** The append lock's key (see the class comment). */
  private readonly lockKey: string;

  constructor(opts: PostgresEventRepositoryOptions) {
    super(opts);
    const poll = opts.pollIntervalMs ?? 500;
    const reconnect = opts.reconnectDelayMs ?? 1000;
    const perCommit = opts.maxAppendsPerCommit ?? 50;
    if (!Number.isInteger(poll) || poll < 0)
      throw new MnemeError("INVALID_REQUEST", `postgres: pollIntervalMs must be an integer >= 0, got ${String(poll)}`);
    if (!Number.isInteger(reconnect) || reconnect < 0) {
      throw new MnemeError("INVALID_REQUEST", `postgres: reconnectDelayMs must be an integer >= 0, got ${String(reconnect)}`);
    }
    if (!Number.isInteger(perCommit) || perCommit < 1 || perCommit > 60) {
      throw new MnemeError("INVALID_REQUEST", `postgres: maxAppendsPerCommit must be an integer in 1..60, got ${String(perCommit)}`);
    }
    // NOTIFY channel names are identifiers (at most 63 bytes): long schema names are hashed.
    const channel = `mneme_events_${this.schema}`;
    this.channel = channel.length <= 63 ? channel : `mneme_events_${advisoryKey(channel).replace("-", "n")}`;
    this.lockKey = advisoryKey("mneme:events", this.schema);
    this.writer = new PostgresAppendWriter({
      qschema: this.qschema,
      lockKey: this.lockKey,
      channel: this.channel,
      instanceId: this.instanceId,
      maxAppendsPerCommit: perCommit,
      checkout: () => this.checkout("append", "postgres: append"),
      onFlushed: (first, last) => this.watcher.noteOwnAppend(first, last),
    });
    this.loader = new PostgresAggregateLoader(this.qschema, (text, values, what, name) => this.rows(text, values, what, name));
    this.taggedReader = new PostgresTaggedReader(this.qschema, (text, values, what, name) => this.rows(text, values, what, name));
    this.watcher = new PostgresAppendWatcher({
      pool: this.pool,
      channel: this.channel,
      instanceId: this.instanceId,
      pollIntervalMs: poll,
      reconnectDelayMs: reconnect,
      readHead: () => this.readHead(),
      onStatement: this.onStatement,
    });
  }

  /**
   * Joins a PostgresCommandStore of the same pool and schema: a command's
   * record is then inserted by the append's own statement (one round trip,
   * one transaction).
   */
  joinCommandStore(commandStore: CommandStore): boolean {
    if (!(commandStore instanceof PostgresCommandStore) || !commandStore.sharesTablesWith(this.pool, this.schema)) return false;
    this.recordsWithAppend = true;
    return true;
  }

  /** Creates the schema, the events table and the append functions; idempotent, safe to run from several instances at once. */
  async init(): Promise<void> {
    await this.track(() => this.runDdl((admitOldWriters) => eventsDdl(this.qschema, this.schema, admitOldWriters)));
  }

  async append(events: readonly NewEvent[], opts?: AppendOptions): Promise<Event[]> {
    return this.track(async () => {
      const prepared = prepare(events, opts);
      if (prepared.events.length === 0) return [];
      const rec = opts?.commandRecord;
      const record = rec !== undefined && this.recordsWithAppend ? recordColumns(rec) : undefined;
      return this.writer.append(prepared, record);
    });
  }

  async loadAggregate(aggregateUuid: string, opts?: { fromVersion?: number }): Promise<Event[]> {
    return this.track(async () => {
      checkAggregateIdToRead(aggregateUuid, "loadAggregate");
      const from = opts?.fromVersion ?? 1;
      if (typeof from !== "number" || Number.isNaN(from)) {
        throw new MnemeError("INVALID_REQUEST", `loadAggregate: fromVersion must be a number, got ${String(from)}`);
      }
      return this.loader.load(aggregateUuid, Math.max(1, Math.min(Math.ceil(from), 2 ** 31 - 1)));
    });
  }

  async loadAggregates(aggregateUuids: readonly string[]): Promise<Map<string, Event[]>> {
    return this.track(async () => {
      if (!Array.isArray(aggregateUuids) || aggregateUuids.some((u) => typeof u !== "string")) {
        throw new MnemeError("INVALID_REQUEST", "loadAggregates: aggregateUuids must be an array of strings");
      }
      for (const u of aggregateUuids) checkAggregateIdToRead(u, "loadAggregates");
      const out = new Map<string, Event[]>();
      for (const id of aggregateUuids) out.set(id, []);
      if (out.size === 0) return out;
      const rows = await this.rows(
        `SELECT ${EVENT_COLUMNS} FROM ${this.qschema}.events WHERE aggregate_uuid = ANY($1::text[]) ORDER BY aggregate_uuid, version`,
        [[...out.keys()]],
        "loadAggregates",
      );
      for (const r of rows) out.get(r[5])?.push(toEvent(r));
      return out;
    });
  }

  async loadEvents(eventUuids: readonly string[]): Promise<Event[]> {
    return this.track(async () => {
      if (!Array.isArray(eventUuids) || eventUuids.some((u) => typeof u !== "string")) {
        throw new MnemeError("INVALID_REQUEST", "loadEvents: eventUuids must be an array of strings");
      }
      if (eventUuids.length === 0) return [];
      const rows = await this.rows(
        `SELECT ${EVENT_COLUMNS} FROM ${this.qschema}.events WHERE event_uuid = ANY($1::text[]) ORDER BY position`,
        [[...eventUuids]],
        "loadEvents",
      );
      return rows.map(toEvent);
    });
  }

  /**
   * For the personal-data migration only: see EventRepository.sealStoredPayloads.
   * One statement: a payload is replaced only while it is still the one read (jsonb equality).
   */
  async sealStoredPayloads(rewrites: readonly PayloadSealing[]): Promise<number> {
    return this.track(async () => {
      checkPayloadSealing("sealStoredPayloads", rewrites);
      if (rewrites.length === 0) return 0;
      const client = await this.checkout("transaction", "postgres: sealStoredPayloads");
      let broken = false;
      try {
        await client.query("BEGIN");
        // The one sanctioned rewrite of stored events: under the append lock, the chain is recomputed from the
        // first event sealed, so no append chains onto a hash that is about to change.
        await client.query("SELECT pg_advisory_xact_lock($1::bigint)", [this.lockKey]);
        const res = await client.query<{ n: string; first: string | null }>({
          text: `WITH sealed AS (
                   UPDATE ${this.qschema}.events AS e SET payload = u.sealed
                     FROM unnest($1::text[], $2::jsonb[], $3::jsonb[]) AS u(id, stored, sealed)
                    WHERE e.event_uuid = u.id AND e.payload = u.stored
                   RETURNING e.position)
                 SELECT count(*)::text AS n, min(position)::text AS first FROM sealed`,
          values: [rewrites.map((r) => r.id), rewrites.map((r) => JSON.stringify(r.stored)), rewrites.map((r) => JSON.stringify(r.sealed))],
        });
        const first = res.rows[0]?.first;
        if (first != null) await client.query(`SELECT ${this.qschema}.mneme_chain_from($1::bigint)`, [first]);
        await client.query("COMMIT");
        return Number(res.rows[0]?.n ?? 0);
      } catch (e) {
        try {
          await client.query("ROLLBACK");
        } catch {
          broken = true;
        }
        throw mapPgError(e, "postgres: sealStoredPayloads");
      } finally {
        client.release(broken);
      }
    });
  }

  /** See RemovesEvents.removeEvents (retention): one transaction under the append lock. */
  async removeEvents(run: string, removals: readonly EventRemoval[]): Promise<number> {
    return this.track(async () => {
      checkRemovals(run, removals);
      if (removals.length === 0) return 0;
      const client = await this.checkout("transaction", "postgres: removeEvents");
      let broken = false;
      try {
        await client.query("BEGIN");
        // Under the append lock: no append chains onto a row while it is hollowed.
        await client.query("SELECT pg_advisory_xact_lock($1::bigint)", [this.lockKey]);
        const n = await removePostgresEvents(client, this.qschema, run, removals);
        await client.query("COMMIT");
        return n;
      } catch (e) {
        try {
          await client.query("ROLLBACK");
        } catch {
          broken = true;
        }
        throw mapPgError(e, "postgres: removeEvents");
      } finally {
        client.release(broken);
      }
    });
  }

  /** Keeps the hash chain (see src/store/event-chain.ts and postgres-chain-ddl.ts). */
  readonly chainsEvents = true;

  /** See ChainedEvents.chainHead: the hash stored with the highest position. */
  async chainHead(): Promise<ChainHead> {
    return this.track(async () => {
      const rows = await this.rows<[string, string | null]>(
        `SELECT e.position::text, e.hash FROM ${this.qschema}.events e ORDER BY e.position DESC LIMIT 1`,
        [],
        "chainHead",
      );
      const last = rows[0];
      if (last === undefined) return { position: 0, hash: GENESIS_HASH };
      if (last[1] === null)
        throw new MnemeError("STORE_ERROR", `postgres schema ${this.schema}: the newest event has no hash (init() builds the chain)`);
      return { position: Number(last[0]), hash: last[1] };
    });
  }

  /** See ChainedEvents.readChain: keyset pages of the stored rows as text, with their hashes. */
  readChain(opts: { afterPosition?: number; batchSize?: number } = {}): AsyncIterable<ChainRow[]> {
    return this.chainPages(opts.afterPosition ?? 0, opts.batchSize ?? 1000);
  }

  private async *chainPages(after: number, batchSize: number): AsyncGenerator<ChainRow[], void, undefined> {
    const sql =
      `SELECT position, hash, event_uuid, tenant_uuid, domain, name, aggregate_uuid, version, command_uuid, created_at::text, ` +
      `event_version, req_ctx::text, payload::text FROM ${this.qschema}.events WHERE position > $1 ORDER BY position LIMIT $2`;
    let position = after;
    for (;;) {
      this.assertOpen();
      const rows = await this.rows<ChainColumns>(sql, [position, batchSize], "readChain");
      if (rows.length === 0) return;
      const page = rows.map(chainRowOfColumns);
      position = page[page.length - 1]!.position;
      yield page;
      if (rows.length < batchSize) return;
    }
  }

  readAll(opts: ReadAllOptions = {}): AsyncIterable<Event[]> {
    return this.pages(opts);
  }

  /** Stores tags and checks append conditions (see EventRepository.storesTags). */
  readonly storesTags = true;
  /** The prepared statement name of each shape of readTagged's SQL. */
  private readonly taggedReads = new Map<string, string>();

  /** See EventRepository.indexTags: one statement, which writes nothing when an entry names no event of its tenant. */
  async indexTags(entries: readonly TagIndexEntry[]): Promise<number> {
    return this.track(async () => {
      const rows = tagIndexRows(entries);
      if (rows.length === 0) return 0;
      const s = this.qschema;
      try {
        const res = await this.poolQuery<{ bad: string | null; added: string }>("transaction", {
          text: `WITH r AS (SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[]) AS r(tenant_uuid, tag, position)),
                 bad AS (SELECT r.position FROM r LEFT JOIN ${s}.events e ON e.position = r.position
                         WHERE e.position IS NULL OR e.tenant_uuid <> r.tenant_uuid LIMIT 1),
                 ins AS (INSERT INTO ${s}.event_tags (tenant_uuid, tag, position)
                         SELECT r.tenant_uuid, r.tag, r.position FROM r WHERE NOT EXISTS (SELECT 1 FROM bad)
                         ON CONFLICT DO NOTHING RETURNING 1)
                 SELECT (SELECT position::text FROM bad) AS bad, (SELECT count(*)::text FROM ins) AS added`,
          values: [rows.map((r) => r.tenantUuid), rows.map((r) => r.tag), rows.map((r) => r.position)],
        });
        const row = res.rows[0]!;
        if (row.bad !== null) throw new MnemeError("INVALID_REQUEST", `indexTags: no event of the entry's tenant at position ${row.bad}`);
        return Number(row.added);
      } catch (e) {
        throw mapPgError(e, "postgres: indexTags");
      }
    });
  }

  /**
   * See EventRepository.readTagged. One statement, so one snapshot: the head and the matches up to it.
   * Appends commit in position order under the append lock, so the snapshot holds every position up to the head.
   */
  async readTagged(tenantUuid: string, items: readonly TagQueryItem[], opts?: TaggedReadOptions): Promise<TaggedRead<Event>> {
    return this.track(async () => {
      if (typeof tenantUuid !== "string") throw new MnemeError("INVALID_REQUEST", "readTagged: tenantUuid must be a string");
      const planned = planItems(items, "readTagged");
      const after = readAfter(opts);
      // Alone when few reads are under way, else grouped with the reads that arrive meanwhile (PostgresTaggedReader).
      return this.taggedReader.readTagged(tenantUuid, planned, after, () => this.readTaggedAlone(tenantUuid, planned, after));
    });
  }

  /** One read of readTagged as a statement of its own, prepared per shape of query. */
  private async readTaggedAlone(tenantUuid: string, planned: readonly PlannedItem[], after: number): Promise<TaggedRead<Event>> {
    const values: unknown[] = [];
    const bind = (v: unknown): string => {
      values.push(v);
      return typeof v === "number" ? `$${values.length}::bigint` : `$${values.length}::text`;
    };
    const tags = `${this.qschema}.event_tags`;
    const union = planned.map((item) => itemMatchSql(tags, tenantUuid, item, after > 0 ? { after } : {}, bind)).join(" UNION ");
    const text = `WITH h AS MATERIALIZED (SELECT coalesce(max(position), 0) AS head FROM ${this.qschema}.events)
         SELECT e.*, h.head::text FROM h LEFT JOIN LATERAL (
           SELECT ${EVENT_COLUMNS} FROM ${this.qschema}.events
           WHERE position <= h.head AND position IN (${union}) ORDER BY position
         ) e ON true ORDER BY e.position`;
    // Prepared once per connection and shape of query (the text depends only on how many tags and types each item has).
    let name = this.taggedReads.get(text);
    if (name === undefined && this.taggedReads.size < MAX_PREPARED_TAGGED_READS) {
      // Named by the text itself: every repository on a pool (several may share one, on one schema) gives one text one name.
      name = `mneme:read-tagged:${sha256Hex(text).slice(0, 32)}`;
      this.taggedReads.set(text, name);
    }
    const rows = await this.rows<[...EventRow, string]>(text, values, "readTagged", name);
    const position = Number(rows[0]?.[12] ?? 0);
    const events = rows[0]?.[0] == null ? [] : rows.map((r) => toEvent(r.slice(0, 12) as unknown as EventRow));
    return { events, position };
  }

  async headPosition(): Promise<number> {
    return this.track(() => this.readHead());
  }

  async info(): Promise<StoreInfo> {
    return this.track(async () => {
      const res = await this.query<{ n: string; t: string | null }>(
        `SELECT count(*)::text AS n, (SELECT created_at::text FROM ${this.qschema}.events ORDER BY position DESC LIMIT 1) AS t FROM ${this.qschema}.events`,
        [],
        "info",
      );
      return this.storeInfoOf(res.rows[0]);
    });
  }

  /**
   * Called after each append committed through this instance, in commit
   * (= position) order, also when appends run concurrently on several pool
   * connections. A listener's error is swallowed: the append is committed.
   */
  onAppend(listener: AppendListener): () => void {
    if (typeof listener !== "function") throw new MnemeError("INVALID_REQUEST", "onAppend: listener must be a function");
    return this.writer.onAppend(listener);
  }

  /**
   * Called when another instance (or process) may have appended: NOTIFY from
   * its append transaction, received on a dedicated LISTEN client, and a poll
   * of the head position as a fallback. The caller pulls with readAll; the
   * listener's argument, when present, is the last position that append wrote.
   */
  onExternalAppend(listener: ExternalAppendListener): () => void {
    if (typeof listener !== "function") throw new MnemeError("INVALID_REQUEST", "onExternalAppend: listener must be a function");
    this.assertOpen();
    return this.watcher.subscribe(listener);
  }

  /** True while the dedicated LISTEN connection of onExternalAppend is up (for health checks and tests). */
  get externalAppendListening(): boolean {
    return this.watcher.listening;
  }

  protected override async onClose(): Promise<void> {
    this.watcher.close();
    this.writer.clearListeners();
  }

  private async *pages(opts: ReadAllOptions): AsyncGenerator<Event[], void, undefined> {
    this.assertOpen();
    const { afterPosition: after0, untilPosition: until, batchSize } = readAllWindow(opts, MAX_BATCH_SIZE);
    const values: unknown[] = [0, batchSize];
    let where = "position > $1";
    if (until !== undefined) where += ` AND position <= $${values.push(until)}`;
    if (opts.tenantUuid !== undefined) where += ` AND tenant_uuid = $${values.push(opts.tenantUuid)}`;
    if (opts.eventPaths !== undefined) where += ` AND (domain || '.' || name) = ANY($${values.push(opts.eventPaths)}::text[])`;
    // Keyset pages on the primary key; each page is one statement, so each sees a prefix of the positions (see the class comment).
    const sql = `SELECT ${EVENT_COLUMNS} FROM ${this.qschema}.events WHERE ${where} ORDER BY position LIMIT $2`;
    const signal = opts.signal;
    const read = (from: number): Promise<EventRow[]> => {
      const v = values.slice();
      v[0] = from;
      return this.rows(sql, v, "readAll");
    };
    let after = after0;
    let ahead: Promise<EventRow[]> | undefined;
    for (let n = 1; ; n++) {
      if (isAborted(signal) || this.isClosed) return;
      const rows = await (ahead ?? read(after));
      ahead = undefined;
      if (rows.length === 0 || isAborted(signal)) return;
      const page = new Array<Event>(rows.length);
      for (let i = 0; i < rows.length; i++) page[i] = toEvent(rows[i] as EventRow);
      after = (page[page.length - 1] as Event).position;
      // A caller that asked for a second page reads on: from then on, the page after a full one is read while
      // the caller works on this one (the same statement, sent earlier; a page is a prefix of what committed
      // either way). A read-ahead nobody takes is dropped, its failure with it; one taken rethrows its failure.
      if (n >= 2 && rows.length === batchSize && (until === undefined || after < until)) {
        ahead = read(after);
        ahead.catch(() => undefined);
      }
      yield page;
    }
  }

  private async readHead(): Promise<number> {
    const res = await this.query<{ head: string | null }>(
      `SELECT max(position)::text AS head FROM ${this.qschema}.events`,
      [],
      "headPosition",
    );
    const head = res.rows[0]?.head;
    return head == null ? 0 : Number(head);
  }

  /** Runs a read; `name` prepares it once per connection (for the statements every command runs). */
  private async rows<R extends unknown[] = EventRow>(text: string, values: unknown[], what: string, name?: string): Promise<R[]> {
    try {
      const q: PgQuery = name === undefined ? { text, values, rowMode: "array" } : { name, text, values, rowMode: "array" };
      const res = await this.poolQuery<R>("read", q);
      return res.rows;
    } catch (e) {
      throw mapPgError(e, `postgres: ${what}`);
    }
  }
}

function isAborted(signal: AbortSignal | undefined): boolean {
  return signal?.aborted === true;
}
