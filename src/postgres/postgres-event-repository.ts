import { newUuid, nowNs } from "../model/clock.js";
import { MnemeError } from "../model/errors.js";
import type { Event, NewEvent, RequestContext } from "../model/types.js";
import { eventFieldJson, expectedVersionsMap, globalAggregatesSet } from "../store/append-validation.js";
import { validateCommandRecord } from "../store/command-record-validation.js";
import type { CommandStore } from "../store/command-store.js";
import type { AppendListener, AppendOptions, EventRepository, ReadAllOptions } from "../store/event-repository.js";
import { readAllWindow } from "../store/read-all-options.js";
import type { StoreInfo } from "../store/store-info.js";
import { type ExternalAppendListener, PostgresAppendWatcher } from "./postgres-append-watcher.js";
import { PostgresCommandStore } from "./postgres-command-store.js";
import { mapPgError, SQLSTATE_NOT_IN_TENANT, SQLSTATE_VERSION_GAP, SQLSTATE_VERSION_TAKEN } from "./postgres-errors.js";
import { advisoryKey, runSchemaDdl } from "./postgres-schema.js";
import { PostgresStoreBase, type PostgresStoreOptions } from "./postgres-store-base.js";

/** Options of {@link PostgresEventRepository}. */
export interface PostgresEventRepositoryOptions extends PostgresStoreOptions {
  /** Period of the polling fallback behind LISTEN/NOTIFY for onExternalAppend. Default 500 ms; 0 turns polling off. */
  readonly pollIntervalMs?: number;
  /** Wait before reconnecting the LISTEN client after an error. Default 1000 ms. */
  readonly reconnectDelayMs?: number;
}

const MAX_BATCH_SIZE = 10_000;
const INT64_LIMIT = 2 ** 63;
const EMPTY_CTX: RequestContext = Object.freeze({});
const COLUMNS = "position, event_uuid, tenant_uuid, domain, name, aggregate_uuid, version, command_uuid, created_at, req_ctx, payload";

type Row = [string, string, string, string, string, string, number, string | null, string, RequestContext, unknown];

/** An append of this instance waiting for its reply (see `emitInCommitOrder`). */
interface InFlight {
  readonly id: number;
}

/** A committed append of this instance, not yet given to the onAppend listeners. */
interface Committed {
  readonly first: number;
  readonly events: readonly Event[];
  /** Appends in flight when this one's reply arrived: any of them may have committed before it. */
  readonly waitFor: readonly InFlight[];
}

/**
 * The EventStore on Postgres, for many app instances on one database.
 *
 * Gap safety. Every append runs one statement, `mneme_append(...)`, in its own
 * transaction; the function first takes `pg_advisory_xact_lock` on a key of the
 * schema, so appends (of every instance) are serialised from before positions
 * are allocated until after their commit is visible: Postgres makes a commit
 * visible (ProcArrayEndTransaction) before it releases the transaction's locks.
 * So positions are handed out in commit order and at most one appender holds
 * unpublished positions, always the highest. A reader's statement snapshot
 * therefore sees a prefix of the positions: nothing can commit later with a
 * lower position, which is what reading "below the oldest in-flight append"
 * means here. We chose this over filtering rows with
 * `tx_id < pg_snapshot_xmin(pg_current_snapshot())` because (1) the xid and a
 * sequence value are allocated independently, so without a lock like this one
 * an appender can hold an older xid and a higher position, and the filter
 * alone is not gap-safe; (2) the snapshot xmin is cluster-wide, so any long
 * write transaction (another app, a readmodel restore in this database) would
 * stall event delivery; (3) pg_notify in the append already serialises the
 * commits of appending transactions (Postgres takes a global lock in
 * PreCommit_Notify), so the lock costs little more. The versions are read under
 * the lock too (each statement of a VOLATILE plpgsql function has a fresh
 * snapshot in READ COMMITTED, the default isolation this relies on), so an
 * event without `version` always gets the next one and expectedVersions are
 * checked exactly; the unique (aggregate_uuid, version) index stays as a guard.
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
  /** The append with the command record inserted by the same statement (set by joinCommandStore). */
  private appendWithRecordSql: string | undefined;
  private readonly listeners = new Set<AppendListener>();
  private readonly watcher: PostgresAppendWatcher;
  private readonly appendsInFlight = new Set<InFlight>();
  private readonly committed: Committed[] = [];
  private nextAppendId = 0;

  constructor(opts: PostgresEventRepositoryOptions) {
    super(opts);
    const poll = opts.pollIntervalMs ?? 500;
    const reconnect = opts.reconnectDelayMs ?? 1000;
    if (!Number.isInteger(poll) || poll < 0)
      throw new MnemeError("INVALID_REQUEST", `postgres: pollIntervalMs must be an integer >= 0, got ${String(poll)}`);
    if (!Number.isInteger(reconnect) || reconnect < 0) {
      throw new MnemeError("INVALID_REQUEST", `postgres: reconnectDelayMs must be an integer >= 0, got ${String(reconnect)}`);
    }
    this.lockKey = advisoryKey("mneme:events", this.schema);
    // NOTIFY channel names are identifiers (at most 63 bytes): long schema names are hashed.
    const channel = `mneme_events_${this.schema}`;
    this.channel = channel.length <= 63 ? channel : `mneme_events_${advisoryKey(channel).replace("-", "n")}`;
    this.appendSql = `SELECT base_position::text, versions FROM ${this.appendCall()}`;
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

  private appendCall(): string {
    return (
      `${this.qschema}.mneme_append(` +
      "$1::bigint, $2::text, $3::text, $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::integer[], " +
      "$10::text[], $11::bigint[], $12::jsonb[], $13::jsonb[], $14::text[], $15::integer[], $16::text[])"
    );
  }

  /**
   * Joins a PostgresCommandStore of the same pool and schema: a command's
   * record is then inserted by the append's own statement (one round trip,
   * one transaction).
   */
  joinCommandStore(commandStore: CommandStore): boolean {
    if (!(commandStore instanceof PostgresCommandStore) || !commandStore.sharesTablesWith(this.pool, this.schema)) return false;
    // A data-modifying CTE runs once, after the append it reads from: if the append raises, nothing is inserted.
    this.appendWithRecordSql =
      `WITH a AS (SELECT base_position, versions FROM ${this.appendCall()}), ` +
      `r AS (INSERT INTO ${this.qschema}.commands (command_uuid, domain, name, tenant_uuid, status, created_at, record) ` +
      "SELECT $17, $18, $19, $20, $21, $22::bigint, $23::jsonb FROM a) " +
      "SELECT base_position::text, versions FROM a";
    return true;
  }

  /** Creates the schema, the events table and the append function; idempotent, safe to run from several instances at once. */
  async init(): Promise<void> {
    await this.track(() => runSchemaDdl(this.pool, this.schema, this.ddl(), this.onStatement));
  }

  async append(events: readonly NewEvent[], opts?: AppendOptions): Promise<Event[]> {
    return this.track(async () => {
      const prepared = prepare(events, opts);
      if (prepared.events.length === 0) return [];
      const rec = opts?.commandRecord;
      const withRecord = rec !== undefined && this.appendWithRecordSql !== undefined;
      const values = [this.lockKey, this.channel, this.instanceId, ...prepared.columns];
      if (withRecord) {
        const json = validateCommandRecord(rec);
        if (!Number.isInteger(rec.createdAt) || Math.abs(rec.createdAt) >= INT64_LIMIT) {
          throw new MnemeError("INVALID_REQUEST", "invalid command record: createdAt must be an integer number of ns");
        }
        values.push(rec.commandUuid, rec.domain, rec.name, rec.tenantUuid, rec.status, rec.createdAt, json);
      }
      const token: InFlight = { id: this.nextAppendId++ };
      this.appendsInFlight.add(token);
      let stored: Event[];
      try {
        const res = await this.poolQuery<{ base_position: string; versions: number[] }>("append", {
          text: withRecord ? (this.appendWithRecordSql as string) : this.appendSql,
          values,
        });
        const row = res.rows[0];
        if (row === undefined) throw new MnemeError("STORE_ERROR", "postgres: append returned no row");
        stored = materialise(prepared.events, Number(row.base_position), row.versions);
      } catch (e) {
        this.appendsInFlight.delete(token);
        this.emitInCommitOrder();
        const err = mapPgError(e, "postgres: append", "INVALID_EVENTS");
        if (withRecord && err.code === "CONFLICT" && /commands_pkey/.test(err.message)) {
          throw new MnemeError("CONFLICT", `command ${rec.commandUuid} is already recorded`, { cause: e });
        }
        throw err;
      }
      this.appendsInFlight.delete(token);
      const first = (stored[0] as Event).position;
      this.watcher.noteOwnAppend(first, first + stored.length - 1);
      if (this.listeners.size > 0) {
        insertSorted(this.committed, { first, events: Object.freeze(stored.slice()), waitFor: [...this.appendsInFlight] });
      }
      this.emitInCommitOrder();
      return stored;
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
   * Gives committed appends to the onAppend listeners in position order. Two
   * appends of this instance run on two connections, and their replies may be
   * read in either order; an append's events are held back until every append
   * that was in flight when its reply came has settled: any append with a lower
   * position committed first, so it was in flight then (or done already).
   */
  private emitInCommitOrder(): void {
    for (;;) {
      let ready = -1;
      for (let i = this.committed.length - 1; i >= 0; i--) {
        if ((this.committed[i] as Committed).waitFor.every((t) => !this.appendsInFlight.has(t))) {
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

  private ddl(): string[] {
    const s = this.qschema;
    return [
      `CREATE SCHEMA IF NOT EXISTS ${s}`,
      `CREATE SEQUENCE IF NOT EXISTS ${s}.events_position_seq AS bigint`,
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
        CONSTRAINT events_aggregate_version_key UNIQUE (aggregate_uuid, version),
        CONSTRAINT events_event_uuid_key UNIQUE (event_uuid)
      )`,
      // The signature of 0.1 (before the tenant rule): dropped so no caller can append around the rule.
      `DROP FUNCTION IF EXISTS ${s}.mneme_append(bigint, text, text, text[], text[], text[], text[], text[], integer[], text[], bigint[], jsonb[], jsonb[], text[], integer[])`,
      // One round trip per append: lock, check tenants and versions under the lock, allocate, insert, notify.
      `CREATE OR REPLACE FUNCTION ${s}.mneme_append(
        p_lock_key bigint, p_channel text, p_note text,
        p_event_uuids text[], p_tenant_uuids text[], p_domains text[], p_names text[], p_aggregate_uuids text[],
        p_versions integer[], p_command_uuids text[], p_created_ats bigint[], p_req_ctxs jsonb[], p_payloads jsonb[],
        p_expected_aggregates text[], p_expected_versions integer[], p_global_aggregates text[])
      RETURNS TABLE (base_position bigint, versions integer[])
      LANGUAGE plpgsql VOLATILE AS $fn$
      #variable_conflict use_column
      DECLARE
        v_count integer := coalesce(cardinality(p_aggregate_uuids), 0);
        v_versions integer[];
        v_bad integer;
        v_base bigint;
        r record;
      BEGIN
        IF v_count = 0 THEN
          RAISE EXCEPTION 'mneme_append: no events' USING ERRCODE = '22023';
        END IF;
        -- Held until this transaction's commit is visible: appends are serialised in commit order.
        PERFORM pg_advisory_xact_lock(p_lock_key);

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

        -- Under the lock nobody else draws from the sequence: the values are consecutive.
        v_base := setval('${s}.events_position_seq', nextval('${s}.events_position_seq') + v_count - 1) - v_count;

        INSERT INTO ${s}.events (${COLUMNS})
        SELECT v_base + u.ord, u.event_uuid, u.tenant_uuid, u.domain, u.name, u.agg, v_versions[u.ord::integer],
               u.command_uuid, u.created_at, u.req_ctx, u.payload
        FROM unnest(p_event_uuids, p_tenant_uuids, p_domains, p_names, p_aggregate_uuids, p_command_uuids,
                    p_created_ats, p_req_ctxs, p_payloads)
             WITH ORDINALITY AS u(event_uuid, tenant_uuid, domain, name, agg, command_uuid, created_at, req_ctx, payload, ord);

        PERFORM pg_notify(p_channel, p_note || ':' || (v_base + v_count)::text);
        RETURN QUERY SELECT v_base, v_versions;
      END
      $fn$`,
    ];
  }
}

interface Prepared {
  events: Event[];
  /** Parameters $4..$16 of the append statement. */
  columns: unknown[];
}

/** Validates an append and fills what is missing; the versions and positions come from the database. */
function prepare(events: readonly NewEvent[], opts: AppendOptions | undefined): Prepared {
  if (!Array.isArray(events)) throw new MnemeError("INVALID_EVENTS", "append: events must be an array");
  const expected = expectedVersionsMap(opts?.expectedVersions);
  const globals = globalAggregatesSet(opts?.globalAggregates);
  const expAggs = [...expected.keys()];
  const expVersions = [...expected.values()];
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
    if (e.version !== undefined && (!Number.isInteger(e.version) || e.version < 1)) {
      throw new MnemeError("INVALID_EVENTS", `events[${i}].version must be an integer >= 1, got ${String(e.version)}`);
    }
    if (e.createdAt !== undefined && (!Number.isInteger(e.createdAt) || Math.abs(e.createdAt) >= INT64_LIMIT)) {
      throw new MnemeError("INVALID_EVENTS", `events[${i}].createdAt must be an integer number of ns, got ${String(e.createdAt)}`);
    }
    for (const field of ["eventUuid", "tenantUuid", "commandUuid"] as const) {
      const v = e[field];
      if (v !== undefined && typeof v !== "string") throw new MnemeError("INVALID_EVENTS", `events[${i}].${field} must be a string`);
    }
    if (e.eventUuid === "") throw new MnemeError("INVALID_EVENTS", `events[${i}].eventUuid must be a non-empty string`);
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
    if (e.commandUuid !== undefined) ev.commandUuid = e.commandUuid;
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
    columns: [
      eventUuids,
      tenants,
      domains,
      names,
      aggs,
      versions,
      commands,
      createdAts,
      reqCtxs,
      payloads,
      expAggs,
      expVersions,
      globals === undefined ? [] : [...globals],
    ],
  };
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
  return ev;
}

function isAborted(signal: AbortSignal | undefined): boolean {
  return signal?.aborted === true;
}

function insertSorted(list: Committed[], c: Committed): void {
  let i = list.length;
  while (i > 0 && (list[i - 1] as Committed).first > c.first) i--;
  list.splice(i, 0, c);
}
