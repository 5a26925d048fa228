import { newUuid, nowNs } from "../model/clock.js";
import { isMnemeError, MnemeError } from "../model/errors.js";
import type { Event, NewEvent, RequestContext } from "../model/types.js";
import { checkEventVersion, eventFieldJson, expectedVersionsMap, globalAggregatesSet, withCausation } from "../store/append-validation.js";
import { validateCommandRecord } from "../store/command-record-validation.js";
import type { CommandRecord, CommandStore } from "../store/command-store.js";
import type { AppendListener, AppendOptions, EventRepository, ReadAllOptions } from "../store/event-repository.js";
import { checkPayloadSealing, type PayloadSealing } from "../store/payload-sealing.js";
import { readAllWindow } from "../store/read-all-options.js";
import type { StoreInfo } from "../store/store-info.js";
import { type ExternalAppendListener, PostgresAppendWatcher } from "./postgres-append-watcher.js";
import { PostgresCommandStore } from "./postgres-command-store.js";
import { unversionedAppendBody, unversionedAppends } from "./postgres-old-writers.js";
import { isConnectionError, mapPgError, SQLSTATE_NOT_IN_TENANT, SQLSTATE_VERSION_GAP, SQLSTATE_VERSION_TAKEN } from "./postgres-errors.js";
import type { CheckedOutClient } from "./postgres-pool.js";
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

const MAX_BATCH_SIZE = 10_000;
const INT64_LIMIT = 2 ** 63;
const INT32_MAX = 2 ** 31 - 1;
/** A flush takes further waiting calls only while it holds fewer events than this (a larger single call still goes alone). */
const MAX_EVENTS_PER_COMMIT = 5_000;
const EMPTY_CTX: RequestContext = Object.freeze({});
const COLUMNS =
  "position, event_uuid, tenant_uuid, domain, name, aggregate_uuid, version, command_uuid, created_at, req_ctx, payload, event_version";
const RECORD_COLUMNS = "command_uuid, domain, name, tenant_uuid, status, created_at, record";

type Row = [string, string, string, string, string, string, number, string | null, string, RequestContext, unknown, number];

/** One row of `mneme_append_batch`: the outcome of one call. */
interface CallOutcome {
  base_position: string | null;
  versions: number[] | null;
  error_state: string | null;
  error_message: string | null;
  error_constraint: string | null;
}

/** The command record's columns, in the order of RECORD_COLUMNS. */
type RecordColumns = [string, string, string, string, string, number, string];

/** A statement of appends of this instance waiting for its reply (see `emitInCommitOrder`). */
interface InFlight {
  readonly id: number;
}

/** A committed append of this instance, not yet given to the onAppend listeners. */
interface Committed {
  readonly first: number;
  readonly events: readonly Event[];
  /** Statements in flight when this one's reply arrived: any of them may have committed before it. */
  readonly waitFor: readonly InFlight[];
}

/** An append waiting for its flush. */
interface PendingAppend {
  readonly prepared: Prepared;
  readonly record: RecordColumns | undefined;
  readonly resolve: (events: Event[]) => void;
  readonly reject: (error: unknown) => void;
}

/**
 * The EventStore on Postgres, for many app instances on one database.
 *
 * Group commit. Appends are queued and sent by one flush at a time: a call
 * that finds no flush under way is sent at once (no timer, so a lone caller
 * waits for nothing), and the calls that arrive while a flush runs go together
 * in the next one, up to `maxAppendsPerCommit`. A flush is one statement, one
 * transaction: `mneme_append_batch(...)` takes the schema's lock, then runs
 * each call in a subtransaction of its own (a plpgsql block with an EXCEPTION
 * clause), so each call is checked (tenant rule, expected versions, given
 * versions) and written (events, and the command record when the repository
 * joined the command store) or refused whole, with its own outcome: CONFLICT,
 * NOT_FOUND, INVALID_EVENTS. Calls see the calls before them in the flush as if
 * those had committed before, which they do: the flush commits them together.
 * A failure of the whole statement (a lost connection) fails every call of the
 * flush, and nothing of it is written; a statement refused for another reason
 * is sent again call by call, so no call fails for another's value.
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
export class PostgresEventRepository extends PostgresStoreBase implements EventRepository {
  private readonly lockKey: string;
  private readonly channel: string;
  private readonly instanceId = newUuid();
  private readonly appendSql: string;
  private readonly maxAppendsPerCommit: number;
  /** True once joinCommandStore joined a command store of the same pool and schema. */
  private recordsWithAppend = false;
  private readonly listeners = new Set<AppendListener>();
  private readonly watcher: PostgresAppendWatcher;
  private readonly queue: PendingAppend[] = [];
  private flushing = false;
  private readonly sendsInFlight = new Set<InFlight>();
  private readonly committed: Committed[] = [];
  private nextSendId = 0;

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
    this.maxAppendsPerCommit = perCommit;
    this.lockKey = advisoryKey("mneme:events", this.schema);
    // NOTIFY channel names are identifiers (at most 63 bytes): long schema names are hashed.
    const channel = `mneme_events_${this.schema}`;
    this.channel = channel.length <= 63 ? channel : `mneme_events_${advisoryKey(channel).replace("-", "n")}`;
    this.appendSql =
      "SELECT base_position::text AS base_position, versions, error_state, error_message, error_constraint " +
      `FROM ${this.qschema}.mneme_append_batch(` +
      "$1::bigint, $2::text, $3::text, $4::integer[], " +
      "$5::text[], $6::text[], $7::text[], $8::text[], $9::text[], $10::integer[], $11::text[], $12::bigint[], $13::text[], $14::text[], " +
      "$15::integer[], $16::text[], $17::integer[], $18::integer[], $19::text[], " +
      "$20::text[], $21::text[], $22::text[], $23::text[], $24::text[], $25::bigint[], $26::text[], $27::integer[]) ORDER BY call_no";
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
    await this.track(() => this.runDdl((admitOldWriters) => this.ddl(admitOldWriters)));
  }

  async append(events: readonly NewEvent[], opts?: AppendOptions): Promise<Event[]> {
    return this.track(async () => {
      const prepared = prepare(events, opts);
      if (prepared.events.length === 0) return [];
      const rec = opts?.commandRecord;
      const record = rec !== undefined && this.recordsWithAppend ? recordColumns(rec) : undefined;
      return new Promise<Event[]>((resolve, reject) => {
        const pending: PendingAppend = { prepared, record, resolve, reject };
        if (this.maxAppendsPerCommit === 1) return void this.sendAlone(pending);
        this.queue.push(pending);
        if (!this.flushing) void this.flush();
      });
    });
  }

  async loadAggregate(aggregateUuid: string, opts?: { fromVersion?: number }): Promise<Event[]> {
    return this.track(async () => {
      if (typeof aggregateUuid !== "string") throw new MnemeError("INVALID_REQUEST", "loadAggregate: aggregateUuid must be a string");
      const from = opts?.fromVersion ?? 1;
      if (typeof from !== "number" || Number.isNaN(from)) {
        throw new MnemeError("INVALID_REQUEST", `loadAggregate: fromVersion must be a number, got ${String(from)}`);
      }
      const rows = await this.rows(
        `SELECT ${COLUMNS} FROM ${this.qschema}.events WHERE aggregate_uuid = $1 AND version >= $2 ORDER BY version`,
        [aggregateUuid, Math.max(1, Math.min(Math.ceil(from), 2 ** 31 - 1))],
        "loadAggregate",
      );
      return rows.map(toEvent);
    });
  }

  async loadAggregates(aggregateUuids: readonly string[]): Promise<Map<string, Event[]>> {
    return this.track(async () => {
      if (!Array.isArray(aggregateUuids) || aggregateUuids.some((u) => typeof u !== "string")) {
        throw new MnemeError("INVALID_REQUEST", "loadAggregates: aggregateUuids must be an array of strings");
      }
      const out = new Map<string, Event[]>();
      for (const id of aggregateUuids) out.set(id, []);
      if (out.size === 0) return out;
      const rows = await this.rows(
        `SELECT ${COLUMNS} FROM ${this.qschema}.events WHERE aggregate_uuid = ANY($1::text[]) ORDER BY aggregate_uuid, version`,
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
        `SELECT ${COLUMNS} FROM ${this.qschema}.events WHERE event_uuid = ANY($1::text[]) ORDER BY position`,
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
      try {
        const res = await this.poolQuery("transaction", {
          text: `UPDATE ${this.qschema}.events AS e SET payload = u.sealed
                   FROM unnest($1::text[], $2::jsonb[], $3::jsonb[]) AS u(id, stored, sealed)
                  WHERE e.event_uuid = u.id AND e.payload = u.stored`,
          values: [rewrites.map((r) => r.id), rewrites.map((r) => JSON.stringify(r.stored)), rewrites.map((r) => JSON.stringify(r.sealed))],
        });
        return res.rowCount ?? 0;
      } catch (e) {
        throw mapPgError(e, "postgres: sealStoredPayloads");
      }
    });
  }

  readAll(opts: ReadAllOptions = {}): AsyncIterable<Event[]> {
    return this.pages(opts);
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
    this.listeners.add(listener);
    return () => {
      this.listeners.delete(listener);
    };
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
    this.listeners.clear();
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
    const sql = `SELECT ${COLUMNS} FROM ${this.qschema}.events WHERE ${where} ORDER BY position LIMIT $2`;
    const signal = opts.signal;
    let after = after0;
    for (;;) {
      if (isAborted(signal) || this.isClosed) return;
      values[0] = after;
      const rows = await this.rows(sql, values, "readAll");
      if (rows.length === 0 || isAborted(signal)) return;
      const page = new Array<Event>(rows.length);
      for (let i = 0; i < rows.length; i++) page[i] = toEvent(rows[i] as Row);
      after = (page[page.length - 1] as Event).position;
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

  private async rows(text: string, values: unknown[], what: string): Promise<Row[]> {
    try {
      const res = await this.poolQuery<Row>("read", { text, values, rowMode: "array" });
      return res.rows;
    } catch (e) {
      throw mapPgError(e, `postgres: ${what}`);
    }
  }

  /**
   * Sends the queued appends, one flush at a time, until the queue is empty.
   * The calls of a flush are taken once its connection is at hand, so the
   * calls that arrived meanwhile go with it.
   */
  private async flush(): Promise<void> {
    this.flushing = true;
    try {
      while (this.queue.length > 0) {
        let client: CheckedOutClient;
        try {
          client = await this.checkout("append", "postgres: append");
        } catch (e) {
          for (const p of this.takeBatch()) p.reject(e);
          continue;
        }
        await this.send(client, this.takeBatch());
      }
    } finally {
      this.flushing = false;
    }
  }

  /** Without group commit: the call is a statement of its own, on a connection of its own. */
  private async sendAlone(p: PendingAppend): Promise<void> {
    let client: CheckedOutClient;
    try {
      client = await this.checkout("append", "postgres: append");
    } catch (e) {
      p.reject(e);
      return;
    }
    await this.send(client, [p]);
  }

  /** The next calls of the queue for one flush: up to maxAppendsPerCommit, and further ones only while under MAX_EVENTS_PER_COMMIT. */
  private takeBatch(): PendingAppend[] {
    let n = 0;
    let events = 0;
    while (n < this.queue.length && n < this.maxAppendsPerCommit) {
      const size = (this.queue[n] as PendingAppend).prepared.events.length;
      if (n > 0 && events + size > MAX_EVENTS_PER_COMMIT) break;
      events += size;
      n++;
    }
    return this.queue.splice(0, n);
  }

  /** Runs one flush on `client` (then released) and settles each of its calls. */
  private async send(client: CheckedOutClient, batch: readonly PendingAppend[]): Promise<void> {
    let outcomes: CallOutcome[];
    const token: InFlight = { id: this.nextSendId++ };
    this.sendsInFlight.add(token);
    try {
      outcomes = (await client.query<CallOutcome>({ text: this.appendSql, values: this.batchValues(batch) })).rows;
    } catch (e) {
      this.sendsInFlight.delete(token);
      this.emitInCommitOrder();
      const lost = isConnectionError(e);
      client.release(lost);
      if (batch.length > 1 && !lost && !isMnemeError(e)) {
        // The statement as a whole was refused (a value the driver or the parameters could not take): the
        // transaction rolled back, so each call is sent alone and gets its own outcome.
        for (const p of batch) await this.sendAlone(p);
        return;
      }
      // Every call of the flush fails alike; a lost connection may have committed them (see docs/scaling.md).
      for (const p of batch) p.reject(mapPgError(e, "postgres: append", "INVALID_EVENTS"));
      return;
    }
    this.sendsInFlight.delete(token);
    client.release();
    let first = 0;
    let last = 0;
    const stored: Event[][] = [];
    for (let i = 0; i < batch.length; i++) {
      const p = batch[i] as PendingAppend;
      const o = outcomes[i];
      if (o === undefined) {
        p.reject(new MnemeError("STORE_ERROR", "postgres: append returned no row for a call"));
      } else if (o.error_state !== null || o.base_position === null || o.versions === null) {
        p.reject(callError(o, p.record));
      } else {
        const events = materialise(p.prepared.events, Number(o.base_position), o.versions);
        if (first === 0) first = (events[0] as Event).position;
        last = (events[events.length - 1] as Event).position;
        stored.push(events);
        p.resolve(events);
      }
    }
    if (first > 0) this.watcher.noteOwnAppend(first, last);
    if (this.listeners.size > 0) {
      const waitFor = [...this.sendsInFlight];
      for (const events of stored) {
        insertSorted(this.committed, { first: (events[0] as Event).position, events: Object.freeze(events.slice()), waitFor });
      }
    }
    this.emitInCommitOrder();
  }

  /** The parameters of `mneme_append_batch` for the calls of one flush (see appendSql). */
  private batchValues(batch: readonly PendingAppend[]): unknown[] {
    const callEnds: number[] = [];
    const cols: unknown[][] = Array.from({ length: 10 }, () => []);
    const expEnds: number[] = [];
    const expAggs: string[] = [];
    const expVersions: number[] = [];
    const globalEnds: number[] = [];
    const globals: string[] = [];
    const recs: unknown[][] = Array.from({ length: 7 }, () => []);
    const eventVersions: number[] = [];
    for (const { prepared: p, record } of batch) {
      for (const v of p.eventVersions) eventVersions.push(v);
      for (let c = 0; c < 10; c++) {
        const target = cols[c] as unknown[];
        for (const v of p.columns[c] as unknown[]) target.push(v);
      }
      callEnds.push((cols[0] as unknown[]).length);
      expAggs.push(...p.expectedAggregates);
      expVersions.push(...p.expectedVersions);
      expEnds.push(expAggs.length);
      globals.push(...p.globalAggregates);
      globalEnds.push(globals.length);
      for (let c = 0; c < 7; c++) (recs[c] as unknown[]).push(record === undefined ? null : record[c]);
    }
    return [
      this.lockKey,
      this.channel,
      this.instanceId,
      callEnds,
      ...cols,
      expEnds,
      expAggs,
      expVersions,
      globalEnds,
      globals,
      ...recs,
      eventVersions,
    ];
  }

  /**
   * Gives committed appends to the onAppend listeners in position order. With
   * group commit one statement of this instance is in flight at a time; without
   * it, statements run on several connections and their replies may be read in
   * either order: an append's events are held back until every statement that
   * was in flight when its reply came has settled (any statement with a lower
   * position committed first, so it was in flight then, or done already).
   */
  private emitInCommitOrder(): void {
    for (;;) {
      let ready = -1;
      for (let i = this.committed.length - 1; i >= 0; i--) {
        if ((this.committed[i] as Committed).waitFor.every((t) => !this.sendsInFlight.has(t))) {
          ready = i;
          break;
        }
      }
      if (ready < 0) return;
      const batch = this.committed.splice(0, ready + 1);
      for (const c of batch) {
        for (const l of [...this.listeners]) {
          try {
            l(c.events);
          } catch {
            // The append is committed whatever a listener does.
          }
        }
      }
    }
  }

  /** The DDL; `admitOldWriters`: the schema admits 0.1.0's appends (compatibility mode, see postgres-old-writers.ts). */
  private ddl(admitOldWriters: boolean): string[] {
    const s = this.qschema;
    const seq = `${s}.events_position_seq`;
    // The head under the lock: the highest position committed (the primary key's last entry). Positions are
    // taken from the rows themselves, inside the appending transaction, so a transaction that rolls back or
    // dies before its COMMIT gives its positions back. (A sequence does not: nextval and setval are not
    // transactional.) The sequence is only kept at the head for functions of earlier releases, see below.
    const head = `SELECT coalesce(max(position), 0) FROM ${s}.events`;
    return [
      `CREATE SCHEMA IF NOT EXISTS ${s}`,
      `CREATE SEQUENCE IF NOT EXISTS ${seq} AS bigint`,
      `CREATE TABLE IF NOT EXISTS ${s}.events (
        position bigint PRIMARY KEY,
        event_uuid text NOT NULL,
        tenant_uuid text NOT NULL,
        domain text NOT NULL,
        name text NOT NULL,
        aggregate_uuid text NOT NULL,
        version integer NOT NULL CHECK (version > 0),
        command_uuid text,
        created_at bigint NOT NULL,
        req_ctx jsonb NOT NULL,
        payload jsonb NOT NULL,
        event_version integer NOT NULL DEFAULT 1 CHECK (event_version > 0),
        CONSTRAINT events_aggregate_version_key UNIQUE (aggregate_uuid, version),
        CONSTRAINT events_event_uuid_key UNIQUE (event_uuid)
      )`,
      // A schema made before event versions: every stored event is version 1.
      `ALTER TABLE ${s}.events ADD COLUMN IF NOT EXISTS event_version integer NOT NULL DEFAULT 1`,
      // An append that leaves event_version out comes from 0.1, which would misread this store: refused (admitted as
      // version 1 in compatibility mode).
      ...unversionedAppends(s, this.schema, admitOldWriters),
      // The helper of the signatures before event versions: only their own bodies called it, and those are replaced
      // below by bodies that call the current one. (The append functions of earlier releases are all kept: an
      // instance of an earlier release still calls its own during a rolling deploy.)
      `DROP FUNCTION IF EXISTS ${s}.mneme_append_one(bigint, text[], text[], text[], text[], text[], integer[], text[], bigint[], jsonb[], jsonb[], text[], integer[], text[])`,
      // One call's checks and writes, positions after p_base. It takes no lock: only the two functions below
      // call it, under the append lock.
      `CREATE OR REPLACE FUNCTION ${s}.mneme_append_one(
        p_base bigint,
        p_event_uuids text[], p_tenant_uuids text[], p_domains text[], p_names text[], p_aggregate_uuids text[],
        p_versions integer[], p_command_uuids text[], p_created_ats bigint[], p_req_ctxs jsonb[], p_payloads jsonb[],
        p_expected_aggregates text[], p_expected_versions integer[], p_global_aggregates text[], p_event_versions integer[])
      RETURNS integer[]
      LANGUAGE plpgsql VOLATILE AS $fn$
      #variable_conflict use_column
      DECLARE
        v_n integer := coalesce(cardinality(p_aggregate_uuids), 0);
        v_agg text := p_aggregate_uuids[1];
        v_owner text;
        v_cur integer;
        v_other integer;
        v_versions integer[];
        v_bad integer;
        r record;
      BEGIN
        IF v_n = 0 THEN
          RAISE EXCEPTION 'mneme_append: no events' USING ERRCODE = '22023';
        END IF;
        IF v_agg = ALL (p_aggregate_uuids) THEN
          -- One aggregate (most commands): the same rules as below, by two index lookups instead of set queries.
          IF NOT (v_agg = ANY (coalesce(p_global_aggregates, '{}'::text[]))) THEN
            SELECT f.tenant_uuid INTO v_owner FROM ${s}.events f WHERE f.aggregate_uuid = v_agg AND f.version = 1;
            IF NOT FOUND THEN
              v_owner := p_tenant_uuids[1];
            END IF;
            IF NOT (v_owner = ALL (p_tenant_uuids)) THEN
              RAISE EXCEPTION 'aggregate % was not found', v_agg USING ERRCODE = '${SQLSTATE_NOT_IN_TENANT}';
            END IF;
          END IF;
          SELECT e.version INTO v_cur FROM ${s}.events e WHERE e.aggregate_uuid = v_agg ORDER BY e.version DESC LIMIT 1;
          v_cur := coalesce(v_cur, 0);
          FOR i IN 1 .. coalesce(cardinality(p_expected_aggregates), 0) LOOP
            IF p_expected_aggregates[i] = v_agg THEN
              v_other := v_cur;
            ELSE
              v_other := NULL;
              SELECT e.version INTO v_other FROM ${s}.events e
              WHERE e.aggregate_uuid = p_expected_aggregates[i] ORDER BY e.version DESC LIMIT 1;
              v_other := coalesce(v_other, 0);
            END IF;
            IF v_other <> p_expected_versions[i] THEN
              RAISE EXCEPTION 'aggregate % is at version %, expected %', p_expected_aggregates[i], v_other, p_expected_versions[i]
                USING ERRCODE = '${SQLSTATE_VERSION_TAKEN}';
            END IF;
          END LOOP;
          FOR i IN 1 .. v_n LOOP
            v_versions := v_versions || (v_cur + i);
            IF p_versions[i] IS NOT NULL AND p_versions[i] <> v_cur + i THEN
              IF p_versions[i] < v_cur + i THEN
                RAISE EXCEPTION 'events[%]: version % of aggregate % is already taken (next is %)', i - 1, p_versions[i], v_agg, v_cur + i
                  USING ERRCODE = '${SQLSTATE_VERSION_TAKEN}';
              END IF;
              RAISE EXCEPTION 'events[%]: version % of aggregate % leaves a gap (next is %)', i - 1, p_versions[i], v_agg, v_cur + i
                USING ERRCODE = '${SQLSTATE_VERSION_GAP}';
            END IF;
          END LOOP;
        ELSE
          -- The tenant rule, before versions (a CONFLICT would tell that the aggregate exists): an aggregate
          -- belongs to the tenant of its first event, stored (version 1) or else the first of this call.
          WITH u AS (
            SELECT x.agg, x.tenant, x.ord,
                   first_value(x.tenant) OVER (PARTITION BY x.agg ORDER BY x.ord) AS call_tenant
            FROM unnest(p_aggregate_uuids, p_tenant_uuids) WITH ORDINALITY AS x(agg, tenant, ord)
            WHERE NOT (x.agg = ANY (coalesce(p_global_aggregates, '{}'::text[])))
          )
          SELECT u.agg INTO r
          FROM u LEFT JOIN ${s}.events f ON f.aggregate_uuid = u.agg AND f.version = 1
          WHERE u.tenant IS DISTINCT FROM coalesce(f.tenant_uuid, u.call_tenant)
          ORDER BY u.ord
          LIMIT 1;
          IF FOUND THEN
            RAISE EXCEPTION 'aggregate % was not found', r.agg USING ERRCODE = '${SQLSTATE_NOT_IN_TENANT}';
          END IF;

          SELECT x.agg, x.expected, coalesce(c.version, 0) AS actual INTO r
          FROM unnest(p_expected_aggregates, p_expected_versions) AS x(agg, expected)
          LEFT JOIN LATERAL (
            SELECT e.version FROM ${s}.events e WHERE e.aggregate_uuid = x.agg ORDER BY e.version DESC LIMIT 1
          ) c ON true
          WHERE coalesce(c.version, 0) <> x.expected
          LIMIT 1;
          IF FOUND THEN
            RAISE EXCEPTION 'aggregate % is at version %, expected %', r.agg, r.actual, r.expected
              USING ERRCODE = '${SQLSTATE_VERSION_TAKEN}';
          END IF;

          WITH cur AS (
            SELECT a.agg, coalesce((
              SELECT e.version FROM ${s}.events e WHERE e.aggregate_uuid = a.agg ORDER BY e.version DESC LIMIT 1
            ), 0) AS version
            FROM (SELECT DISTINCT unnest(p_aggregate_uuids) AS agg) a
          ), ranked AS (
            SELECT u.ord, u.given, (cur.version + row_number() OVER (PARTITION BY u.agg ORDER BY u.ord))::integer AS next_version
            FROM unnest(p_aggregate_uuids, p_versions) WITH ORDINALITY AS u(agg, given, ord)
            JOIN cur ON cur.agg = u.agg
          )
          SELECT array_agg(next_version ORDER BY ord),
                 min(ord) FILTER (WHERE given IS NOT NULL AND given <> next_version)
          INTO v_versions, v_bad
          FROM ranked;
          IF v_bad IS NOT NULL THEN
            IF p_versions[v_bad] < v_versions[v_bad] THEN
              RAISE EXCEPTION 'events[%]: version % of aggregate % is already taken (next is %)',
                v_bad - 1, p_versions[v_bad], p_aggregate_uuids[v_bad], v_versions[v_bad]
                USING ERRCODE = '${SQLSTATE_VERSION_TAKEN}';
            END IF;
            RAISE EXCEPTION 'events[%]: version % of aggregate % leaves a gap (next is %)',
              v_bad - 1, p_versions[v_bad], p_aggregate_uuids[v_bad], v_versions[v_bad]
              USING ERRCODE = '${SQLSTATE_VERSION_GAP}';
          END IF;
        END IF;

        INSERT INTO ${s}.events (${COLUMNS})
        SELECT p_base + u.ord, u.event_uuid, u.tenant_uuid, u.domain, u.name, u.agg, v_versions[u.ord::integer],
               u.command_uuid, u.created_at, u.req_ctx, u.payload, coalesce(p_event_versions[u.ord::integer], 1)
        FROM unnest(p_event_uuids, p_tenant_uuids, p_domains, p_names, p_aggregate_uuids, p_command_uuids,
                    p_created_ats, p_req_ctxs, p_payloads)
             WITH ORDINALITY AS u(event_uuid, tenant_uuid, domain, name, agg, command_uuid, created_at, req_ctx, payload, ord);
        RETURN v_versions;
      END
      $fn$`,
      // One append per statement (kept for instances of an earlier version during a rolling upgrade, and for
      // hand-written tools): lock, the call, the sequence moved past it, notify.
      `CREATE OR REPLACE FUNCTION ${s}.mneme_append(
        p_lock_key bigint, p_channel text, p_note text,
        p_event_uuids text[], p_tenant_uuids text[], p_domains text[], p_names text[], p_aggregate_uuids text[],
        p_versions integer[], p_command_uuids text[], p_created_ats bigint[], p_req_ctxs jsonb[], p_payloads jsonb[],
        p_expected_aggregates text[], p_expected_versions integer[], p_global_aggregates text[])
      RETURNS TABLE (base_position bigint, versions integer[])
      LANGUAGE plpgsql VOLATILE AS $fn$
      DECLARE
        v_base bigint;
        v_versions integer[];
      BEGIN
        -- Held until this transaction's commit is visible: appends are serialised in commit order.
        PERFORM pg_advisory_xact_lock(p_lock_key);
        v_base := (${head});
        v_versions := ${s}.mneme_append_one(v_base, p_event_uuids, p_tenant_uuids, p_domains, p_names, p_aggregate_uuids,
          p_versions, p_command_uuids, p_created_ats, p_req_ctxs, p_payloads, p_expected_aggregates, p_expected_versions,
          p_global_aggregates, NULL);
        PERFORM pg_notify(p_channel, p_note || ':' || (v_base + cardinality(p_aggregate_uuids))::text);
        -- For bodies of earlier releases, which take positions from the sequence (see the batch function).
        PERFORM setval('${seq}', v_base + cardinality(p_aggregate_uuids));
        RETURN QUERY SELECT v_base, v_versions;
      END
      $fn$`,
      // Group commit: several calls in one transaction, each in a subtransaction of its own (the block with an
      // EXCEPTION clause), so each is written whole or refused whole with its own SQLSTATE. A call sees the calls
      // before it. Calls are delimited by the last index of their events (p_call_ends), expected versions and
      // global aggregates likewise; p_record_* hold each call's command record (NULL: none).
      `CREATE OR REPLACE FUNCTION ${s}.mneme_append_batch(
        p_lock_key bigint, p_channel text, p_note text, p_call_ends integer[],
        p_event_uuids text[], p_tenant_uuids text[], p_domains text[], p_names text[], p_aggregate_uuids text[],
        p_versions integer[], p_command_uuids text[], p_created_ats bigint[], p_req_ctxs text[], p_payloads text[],
        p_expected_ends integer[], p_expected_aggregates text[], p_expected_versions integer[],
        p_global_ends integer[], p_global_aggregates text[],
        p_record_uuids text[], p_record_domains text[], p_record_names text[], p_record_tenants text[],
        p_record_statuses text[], p_record_created_ats bigint[], p_records text[], p_event_versions integer[])
      RETURNS TABLE (call_no integer, base_position bigint, versions integer[],
                     error_state text, error_message text, error_constraint text)
      LANGUAGE plpgsql VOLATILE AS $fn$
      DECLARE
        v_head bigint;
        v_start bigint;
        v_lo integer := 1;
        v_hi integer;
        v_elo integer := 1;
        v_glo integer := 1;
        v_count integer;
        v_versions integer[];
        v_state text;
        v_msg text;
        v_constraint text;
      BEGIN
        IF coalesce(cardinality(p_call_ends), 0) = 0 THEN
          RAISE EXCEPTION 'mneme_append_batch: no calls' USING ERRCODE = '22023';
        END IF;
        -- Held until this transaction's commit is visible: appends are serialised in commit order.
        PERFORM pg_advisory_xact_lock(p_lock_key);
        v_head := (${head});
        v_start := v_head;
        FOR i IN 1 .. cardinality(p_call_ends) LOOP
          v_hi := p_call_ends[i];
          v_count := v_hi - v_lo + 1;
          v_state := NULL;
          v_msg := NULL;
          v_constraint := NULL;
          v_versions := NULL;
          BEGIN
            v_versions := ${s}.mneme_append_one(v_head,
              p_event_uuids[v_lo:v_hi], p_tenant_uuids[v_lo:v_hi], p_domains[v_lo:v_hi], p_names[v_lo:v_hi],
              p_aggregate_uuids[v_lo:v_hi], p_versions[v_lo:v_hi], p_command_uuids[v_lo:v_hi], p_created_ats[v_lo:v_hi],
              p_req_ctxs[v_lo:v_hi]::jsonb[], p_payloads[v_lo:v_hi]::jsonb[],
              coalesce(p_expected_aggregates[v_elo:p_expected_ends[i]], '{}'), coalesce(p_expected_versions[v_elo:p_expected_ends[i]], '{}'),
              coalesce(p_global_aggregates[v_glo:p_global_ends[i]], '{}'), p_event_versions[v_lo:v_hi]);
            IF p_record_uuids[i] IS NOT NULL THEN
              INSERT INTO ${s}.commands (${RECORD_COLUMNS})
              VALUES (p_record_uuids[i], p_record_domains[i], p_record_names[i], p_record_tenants[i], p_record_statuses[i],
                      p_record_created_ats[i], p_records[i]::jsonb);
            END IF;
          EXCEPTION WHEN OTHERS THEN
            GET STACKED DIAGNOSTICS v_state = RETURNED_SQLSTATE, v_msg = MESSAGE_TEXT, v_constraint = CONSTRAINT_NAME;
          END;
          call_no := i;
          error_state := v_state;
          error_message := v_msg;
          error_constraint := nullif(v_constraint, '');
          IF v_state IS NULL THEN
            base_position := v_head;
            versions := v_versions;
            v_head := v_head + v_count;
          ELSE
            base_position := NULL;
            versions := NULL;
          END IF;
          RETURN NEXT;
          v_lo := v_hi + 1;
          v_elo := p_expected_ends[i] + 1;
          v_glo := p_global_ends[i] + 1;
        END LOOP;
        IF v_head > v_start THEN
          PERFORM pg_notify(p_channel, p_note || ':' || v_head::text);
          -- The sequence is not where positions come from any more; it is kept at the head for the bodies of
          -- earlier releases, which take their positions from it (an instance of such a release that runs init()
          -- during a rolling deploy puts them back), so theirs follow ours without a collision. setval is not
          -- undone by a rollback: after a transaction that died here, the sequence is ahead until the next
          -- append of this release sets it back.
          PERFORM setval('${seq}', v_head);
        END IF;
      END
      $fn$`,
      // The signature of 0.1: kept, so that an instance of 0.1 still running during a deploy gets a clear answer
      // rather than "function does not exist"; it refuses, since 0.1 would misread this store (see
      // postgres-old-writers.ts). (0.1's own init() puts its own body back; the events table's trigger refuses that one.)
      `CREATE OR REPLACE FUNCTION ${s}.mneme_append(
        p_lock_key bigint, p_channel text, p_note text,
        p_event_uuids text[], p_tenant_uuids text[], p_domains text[], p_names text[], p_aggregate_uuids text[],
        p_versions integer[], p_command_uuids text[], p_created_ats bigint[], p_req_ctxs jsonb[], p_payloads jsonb[],
        p_expected_aggregates text[], p_expected_versions integer[])
      RETURNS TABLE (base_position bigint, versions integer[])
      LANGUAGE plpgsql VOLATILE AS $fn$
      ${unversionedAppendBody(s, this.schema, admitOldWriters)}
      $fn$`,
      // The group commit of the release before event versions: every event of it is version 1.
      `CREATE OR REPLACE FUNCTION ${s}.mneme_append_batch(
        p_lock_key bigint, p_channel text, p_note text, p_call_ends integer[],
        p_event_uuids text[], p_tenant_uuids text[], p_domains text[], p_names text[], p_aggregate_uuids text[],
        p_versions integer[], p_command_uuids text[], p_created_ats bigint[], p_req_ctxs text[], p_payloads text[],
        p_expected_ends integer[], p_expected_aggregates text[], p_expected_versions integer[],
        p_global_ends integer[], p_global_aggregates text[],
        p_record_uuids text[], p_record_domains text[], p_record_names text[], p_record_tenants text[],
        p_record_statuses text[], p_record_created_ats bigint[], p_records text[])
      RETURNS TABLE (call_no integer, base_position bigint, versions integer[],
                     error_state text, error_message text, error_constraint text)
      LANGUAGE sql VOLATILE AS $fn$
        SELECT * FROM ${s}.mneme_append_batch(p_lock_key, p_channel, p_note, p_call_ends, p_event_uuids, p_tenant_uuids,
          p_domains, p_names, p_aggregate_uuids, p_versions, p_command_uuids, p_created_ats, p_req_ctxs, p_payloads,
          p_expected_ends, p_expected_aggregates, p_expected_versions, p_global_ends, p_global_aggregates, p_record_uuids,
          p_record_domains, p_record_names, p_record_tenants, p_record_statuses, p_record_created_ats, p_records,
          NULL::integer[])
      $fn$`,
    ];
  }
}

interface Prepared {
  readonly events: Event[];
  /** The ten event columns of the append function (event uuids ... payloads). */
  readonly columns: unknown[];
  readonly expectedAggregates: string[];
  readonly expectedVersions: number[];
  readonly globalAggregates: string[];
  /** Per event, the version of its type it is written in (1 when not given). */
  readonly eventVersions: number[];
}

/** Validates an append and fills what is missing; the versions and positions come from the database. */
function prepare(events: readonly NewEvent[], opts: AppendOptions | undefined): Prepared {
  if (!Array.isArray(events)) throw new MnemeError("INVALID_EVENTS", "append: events must be an array");
  const expected = expectedVersionsMap(opts?.expectedVersions);
  const globals = globalAggregatesSet(opts?.globalAggregates);
  const expAggs = [...expected.keys()];
  const expVersions = [...expected.values()];
  for (const [agg, v] of expected) {
    checkText(agg, "append: expectedVersions has an aggregateUuid that");
    if (v > INT32_MAX) throw new MnemeError("INVALID_EVENTS", `append: expectedVersions[${agg}] must be at most ${INT32_MAX}, got ${v}`);
  }
  const n = events.length;
  const out = new Array<Event>(n);
  const eventUuids = new Array<string>(n);
  const tenants = new Array<string>(n);
  const domains = new Array<string>(n);
  const names = new Array<string>(n);
  const aggs = new Array<string>(n);
  const versions = new Array<number | null>(n);
  const commands = new Array<string | null>(n);
  const createdAts = new Array<number>(n);
  const reqCtxs = new Array<string>(n);
  const payloads = new Array<string>(n);
  const eventVersions = new Array<number>(n);
  let lastCtxIn: RequestContext | undefined;
  let lastCtxOut: RequestContext = EMPTY_CTX;
  let lastCtxJson = "{}";
  for (let i = 0; i < n; i++) {
    const e = events[i] as NewEvent;
    if (typeof e !== "object" || e === null) throw new MnemeError("INVALID_EVENTS", `events[${i}] is not an object`);
    for (const field of ["aggregateUuid", "domain", "name"] as const) {
      if (typeof e[field] !== "string" || e[field] === "")
        throw new MnemeError("INVALID_EVENTS", `events[${i}].${field} must be a non-empty string`);
    }
    if (e.version !== undefined && (!Number.isInteger(e.version) || e.version < 1 || e.version > INT32_MAX)) {
      throw new MnemeError("INVALID_EVENTS", `events[${i}].version must be an integer in 1..${INT32_MAX}, got ${String(e.version)}`);
    }
    if (e.createdAt !== undefined && (!Number.isInteger(e.createdAt) || Math.abs(e.createdAt) >= INT64_LIMIT)) {
      throw new MnemeError("INVALID_EVENTS", `events[${i}].createdAt must be an integer number of ns, got ${String(e.createdAt)}`);
    }
    for (const field of ["eventUuid", "tenantUuid", "commandUuid"] as const) {
      const v = e[field];
      if (v !== undefined && typeof v !== "string") throw new MnemeError("INVALID_EVENTS", `events[${i}].${field} must be a string`);
    }
    if (e.eventUuid === "") throw new MnemeError("INVALID_EVENTS", `events[${i}].eventUuid must be a non-empty string`);
    checkEventVersion(e.eventVersion, i);
    if (e.eventVersion !== undefined && e.eventVersion > INT32_MAX) {
      throw new MnemeError("INVALID_EVENTS", `events[${i}].eventVersion must be at most ${INT32_MAX}`);
    }
    // Checked here, not by the database: the calls of a flush share one statement, which such a value would refuse whole.
    for (const field of ["aggregateUuid", "domain", "name", "eventUuid", "tenantUuid", "commandUuid"] as const) {
      const v = e[field];
      if (v !== undefined) checkText(v, `events[${i}].${field}`);
    }
    if (e.reqCtx !== undefined && (typeof e.reqCtx !== "object" || e.reqCtx === null || Array.isArray(e.reqCtx))) {
      throw new MnemeError("INVALID_EVENTS", `events[${i}].reqCtx must be an object`);
    }
    // Events of one command share one reqCtx: copy and serialise it once per distinct object.
    let reqCtx = EMPTY_CTX;
    let reqCtxJson = "{}";
    if (e.reqCtx !== undefined) {
      if (e.reqCtx !== lastCtxIn) {
        lastCtxIn = e.reqCtx;
        lastCtxOut = Object.freeze({ ...e.reqCtx });
        lastCtxJson = eventFieldJson(lastCtxOut, i, "reqCtx");
      }
      reqCtx = lastCtxOut;
      reqCtxJson = lastCtxJson;
    }
    const ev: Event = {
      eventUuid: e.eventUuid ?? newUuid(),
      position: 0,
      tenantUuid: e.tenantUuid ?? "",
      domain: e.domain,
      name: e.name,
      aggregateUuid: e.aggregateUuid,
      version: 0,
      createdAt: e.createdAt ?? nowNs(),
      reqCtx,
      payload: e.payload,
    };
    if (e.commandUuid !== undefined) ev.commandUuid = ev.causationId = e.commandUuid;
    const correlation = reqCtx.correlationId ?? e.commandUuid;
    if (correlation !== undefined) ev.correlationId = correlation;
    const eventVersion = e.eventVersion ?? 1;
    eventVersions[i] = eventVersion;
    if (eventVersion !== 1) ev.eventVersion = eventVersion;
    out[i] = ev;
    eventUuids[i] = ev.eventUuid;
    tenants[i] = ev.tenantUuid;
    domains[i] = ev.domain;
    names[i] = ev.name;
    aggs[i] = ev.aggregateUuid;
    versions[i] = e.version ?? null;
    commands[i] = e.commandUuid ?? null;
    createdAts[i] = ev.createdAt;
    reqCtxs[i] = reqCtxJson;
    payloads[i] = eventFieldJson(e.payload, i, "payload");
  }
  return {
    events: out,
    columns: [eventUuids, tenants, domains, names, aggs, versions, commands, createdAts, reqCtxs, payloads],
    expectedAggregates: expAggs,
    expectedVersions: expVersions,
    globalAggregates: globals === undefined ? [] : [...globals],
    eventVersions,
  };
}

/** Postgres text cannot hold U+0000: INVALID_EVENTS before anything is sent. */
function checkText(value: string, what: string): void {
  if (value.includes("\u0000")) throw new MnemeError("INVALID_EVENTS", `${what} holds U+0000, which Postgres cannot store`);
}

/** The command record's columns, checked as the command store checks them. */
function recordColumns(rec: CommandRecord): RecordColumns {
  const json = validateCommandRecord(rec);
  if (!Number.isInteger(rec.createdAt) || Math.abs(rec.createdAt) >= INT64_LIMIT) {
    throw new MnemeError("INVALID_REQUEST", "invalid command record: createdAt must be an integer number of ns");
  }
  for (const v of [rec.commandUuid, rec.domain, rec.name, rec.tenantUuid, rec.status, json]) {
    if (v.includes("\u0000")) throw new MnemeError("INVALID_REQUEST", "invalid command record: Postgres cannot store U+0000");
  }
  return [rec.commandUuid, rec.domain, rec.name, rec.tenantUuid, rec.status, rec.createdAt, json];
}

/** The MnemeError of a call the append function refused (its SQLSTATE, message and constraint). */
function callError(o: CallOutcome, record: RecordColumns | undefined): MnemeError {
  const cause = Object.assign(new Error(o.error_message ?? "append refused"), {
    code: o.error_state ?? undefined,
    constraint: o.error_constraint ?? undefined,
  });
  if (record !== undefined && o.error_state === "23505" && o.error_constraint === "commands_pkey") {
    return new MnemeError("CONFLICT", `command ${record[0]} is already recorded`, { cause });
  }
  return mapPgError(cause, "postgres: append", "INVALID_EVENTS");
}

/** Fills positions and versions assigned by the database; the events are frozen like stored ones. */
function materialise(events: Event[], base: number, versions: readonly number[]): Event[] {
  for (let i = 0; i < events.length; i++) {
    const ev = events[i] as Event;
    ev.position = base + i + 1;
    ev.version = versions[i] as number;
    Object.freeze(ev);
  }
  return events;
}

function toEvent(r: Row): Event {
  const ev: Event = {
    eventUuid: r[1],
    position: Number(r[0]),
    tenantUuid: r[2],
    domain: r[3],
    name: r[4],
    aggregateUuid: r[5],
    version: r[6],
    createdAt: Number(r[8]),
    reqCtx: r[9],
    payload: r[10],
  };
  if (r[7] !== null) ev.commandUuid = r[7];
  if (r[11] !== 1) ev.eventVersion = r[11];
  return withCausation(ev);
}

function isAborted(signal: AbortSignal | undefined): boolean {
  return signal?.aborted === true;
}

function insertSorted(list: Committed[], c: Committed): void {
  let i = list.length;
  while (i > 0 && (list[i - 1] as Committed).first > c.first) i--;
  list.splice(i, 0, c);
}
