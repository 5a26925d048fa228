import { isMnemeError, MnemeError } from "../model/errors.js";
import type { Event } from "../model/types.js";
import type { AppendListener } from "../store/event-repository.js";
import type { Prepared, RecordColumns } from "./postgres-append-input.js";
import {
  type AppendCall,
  type AppendTarget,
  aggregateOutcome,
  aggregateStatementText,
  aggregateValues,
  type CallOutcome,
  flushStatementText,
  flushValues,
  taggedStatementText,
  taggedValues,
} from "./postgres-append-statements.js";
import { isConnectionError, mapPgError } from "./postgres-errors.js";
import type { CheckedOutClient, PgQuery } from "./postgres-pool.js";

/** A flush takes further waiting calls only while it holds fewer events than this (a larger single call still goes alone). */
const MAX_EVENTS_PER_COMMIT = 5_000;

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
interface PendingAppend extends AppendCall {
  readonly resolve: (events: Event[]) => void;
  readonly reject: (error: unknown) => void;
}

/** What {@link PostgresAppendWriter} needs of its repository. */
export interface AppendWriterOptions extends AppendTarget {
  /** The schema's quoted name. */
  readonly qschema: string;
  /** At most this many calls share one statement (1: every call is a statement of its own). */
  readonly maxAppendsPerCommit: number;
  /** A client for one flush (STORE_CLOSED, UNAVAILABLE ... as MnemeErrors). */
  readonly checkout: () => Promise<CheckedOutClient>;
  /** Told of the positions each flush of this instance wrote. */
  readonly onFlushed: (first: number, last: number) => void;
}

/**
 * The group-commit writer of {@link PostgresEventRepository} (see its class
 * comment): queues appends, sends them one flush at a time as one statement
 * (`mneme_append_aggregate` or `mneme_append_flush`, see `run`), settles each
 * call with its own outcome, and gives
 * committed appends to the onAppend listeners in position order.
 */
export class PostgresAppendWriter {
  private readonly statement: { readonly name: string; readonly text: string };
  private readonly aggregateStatement: { readonly name: string; readonly text: string };
  private readonly taggedStatement: { readonly name: string; readonly text: string };
  private readonly queue: PendingAppend[] = [];
  private flushing = false;
  private readonly sendsInFlight = new Set<InFlight>();
  private readonly committed: Committed[] = [];
  private nextSendId = 0;
  private readonly listeners = new Set<AppendListener>();

  constructor(private readonly opts: AppendWriterOptions) {
    this.statement = { name: statementName("append", opts.qschema), text: flushStatementText(opts.qschema) };
    this.aggregateStatement = { name: statementName("append-aggregate", opts.qschema), text: aggregateStatementText(opts.qschema) };
    this.taggedStatement = { name: statementName("append-tagged", opts.qschema), text: taggedStatementText(opts.qschema) };
  }

  /** Queues one checked append; resolves with its stored events once committed. */
  append(prepared: Prepared, record: RecordColumns | undefined): Promise<Event[]> {
    return new Promise<Event[]>((resolve, reject) => {
      const pending: PendingAppend = { prepared, record, resolve, reject };
      if (this.opts.maxAppendsPerCommit === 1) return void this.sendAlone(pending);
      this.queue.push(pending);
      if (!this.flushing) void this.flush();
    });
  }

  /** See EventRepository.onAppend. */
  onAppend(listener: AppendListener): () => void {
    this.listeners.add(listener);
    return () => {
      this.listeners.delete(listener);
    };
  }

  /** Drops the onAppend listeners (the repository closes). */
  clearListeners(): void {
    this.listeners.clear();
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
          client = await this.opts.checkout();
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
      client = await this.opts.checkout();
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
    while (n < this.queue.length && n < this.opts.maxAppendsPerCommit) {
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
      outcomes = await this.run(client, batch);
    } catch (e) {
      this.sendsInFlight.delete(token);
      this.emitInCommitOrder();
      const lost = isConnectionError(e);
      client.release(lost);
      if (batch.length > 1 && !lost && !isMnemeError(e)) {
        // The statement as a whole was refused (a write the function's checks do not foresee, such as a
        // duplicate event uuid or command record, or a value the driver or Postgres could not take): the
        // transaction rolled back, so each call is sent alone and gets its own outcome.
        for (const p of batch) await this.sendAlone(p);
        return;
      }
      // Every call of the flush fails alike; a lost connection may have committed them (see docs/scaling.md).
      for (const p of batch) p.reject(appendError(e, p.record));
      return;
    }
    this.sendsInFlight.delete(token);
    client.release();
    this.settle(batch, outcomes);
  }

  /**
   * The flush's statement: a lone call on one aggregate (a sequential command) by
   * `mneme_append_aggregate`, whose refusal is an error of the statement; a
   * flush with tags or query conditions by `mneme_append_tagged`; any other
   * flush by `mneme_append_flush`, one outcome row per call.
   */
  private async run(client: CheckedOutClient, batch: readonly PendingAppend[]): Promise<CallOutcome[]> {
    if (batch.some((p) => p.prepared.tagged !== undefined)) {
      const q: PgQuery = { ...this.taggedStatement, values: [...flushValues(this.opts, batch), ...taggedValues(batch)] };
      return (await client.query<CallOutcome>(q)).rows;
    }
    const lone = batch.length === 1 ? (batch[0] as PendingAppend) : undefined;
    if (lone !== undefined && lone.prepared.aggregate !== undefined) {
      const q: PgQuery = { ...this.aggregateStatement, values: aggregateValues(this.opts, lone) };
      const row = (await client.query<{ r: string[] }>(q)).rows[0];
      return row === undefined ? [] : [aggregateOutcome(row.r, lone.prepared.events.length)];
    }
    const q: PgQuery = { ...this.statement, values: flushValues(this.opts, batch) };
    return (await client.query<CallOutcome>(q)).rows;
  }

  /** Settles each call of a flush with its outcome row, then gives the committed ones to the listeners. */
  private settle(batch: readonly PendingAppend[], outcomes: readonly CallOutcome[]): void {
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
    if (first > 0) this.opts.onFlushed(first, last);
    if (this.listeners.size > 0) {
      const waitFor = [...this.sendsInFlight];
      for (const events of stored) {
        insertSorted(this.committed, { first: (events[0] as Event).position, events: Object.freeze(events.slice()), waitFor });
      }
    }
    this.emitInCommitOrder();
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
}

/**
 * The name of a prepared statement of `kind` on the schema: prepared once per
 * connection, so a command does not pay for parsing and planning it again.
 * The schema is part of the name (repositories of several schemas may share a pool).
 */
export function statementName(kind: string, qschema: string): string {
  return `mneme:${kind}:${qschema}`;
}

/** The MnemeError of a call the append function refused (its SQLSTATE, message and constraint). */
function callError(o: CallOutcome, record: RecordColumns | undefined): MnemeError {
  const cause = Object.assign(new Error(o.error_message ?? "append refused"), {
    code: o.error_state ?? undefined,
    constraint: o.error_constraint ?? undefined,
  });
  return appendError(cause, record);
}

/** The MnemeError of an append that failed with `cause` (a refusal row, or the error of a call sent alone). */
function appendError(cause: unknown, record: RecordColumns | undefined): MnemeError {
  const c = cause as { code?: unknown; constraint?: unknown } | null;
  if (record !== undefined && c?.code === "23505" && c.constraint === "commands_pkey") {
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

function insertSorted(list: Committed[], c: Committed): void {
  let i = list.length;
  while (i > 0 && (list[i - 1] as Committed).first > c.first) i--;
  list.splice(i, 0, c);
}
