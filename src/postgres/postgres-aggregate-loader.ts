import type { Event, RequestContext } from "../model/types.js";
import { withCausation } from "../store/append-validation.js";
import { statementName } from "./postgres-append-writer.js";
import { EVENT_COLUMNS } from "./postgres-append-flush-ddl.js";
import { StatementBatcher } from "./postgres-statement-batcher.js";

/** A row of the events table in EVENT_COLUMNS order (rowMode "array"). */
export type EventRow = [string, string, string, string, string, string, number, string | null, string, RequestContext, unknown, number];

/** Runs one read statement (prepared under `name` when given) and returns its rows as arrays. */
export type ReadRows = <R extends unknown[]>(text: string, values: unknown[], what: string, name?: string) => Promise<R[]>;

/** At most this many statements of loads of one repository run at once; further loads wait and go together. */
const LOADS_IN_FLIGHT = 2;
/** At most this many loads share one statement. */
const MAX_LOADS_PER_STATEMENT = 64;

interface PendingLoad {
  readonly aggregateUuid: string;
  readonly fromVersion: number;
  readonly resolve: (events: Event[]) => void;
  readonly reject: (error: unknown) => void;
}

/**
 * loadAggregate of the Postgres event repository, grouped like appends: a
 * load that finds fewer than LOADS_IN_FLIGHT statements under way is sent at
 * once (a lone caller waits for nothing); loads that arrive while they run go
 * together in one statement, each with its own rows. Many callers then cost
 * the database one statement per group instead of one per command. Each
 * load is sent after it was called, so it sees every append that completed
 * before it (each statement has a snapshot of its own, taken when it starts).
 */
export class PostgresAggregateLoader {
  private readonly single: { readonly name: string; readonly text: string };
  private readonly grouped: { readonly name: string; readonly text: string };
  private readonly batcher = new StatementBatcher<PendingLoad>(LOADS_IN_FLIGHT, MAX_LOADS_PER_STATEMENT, (group) => this.send(group));

  constructor(
    qschema: string,
    private readonly read: ReadRows,
  ) {
    this.single = {
      name: statementName("loadAggregate", qschema),
      text: `SELECT ${EVENT_COLUMNS} FROM ${qschema}.events WHERE aggregate_uuid = $1 AND version >= $2 ORDER BY version`,
    };
    const columns = EVENT_COLUMNS.split(", ")
      .map((c) => `e.${c}`)
      .join(", ");
    this.grouped = {
      name: statementName("loadAggregates", qschema),
      text:
        // LATERAL, so each aggregate is read by its index: as a plain join the planner estimated enough rows per
        // aggregate to prefer a hash join over a scan of the whole events table, which grew with the store.
        `SELECT ${columns}, u.i::integer FROM unnest($1::text[], $2::integer[]) WITH ORDINALITY AS u(a, v, i) ` +
        `CROSS JOIN LATERAL (SELECT * FROM ${qschema}.events x WHERE x.aggregate_uuid = u.a AND x.version >= u.v ORDER BY x.version) e ` +
        `ORDER BY u.i, e.version`,
    };
  }

  /** The events of one aggregate from `fromVersion` (an integer in 1..2^31-1), in version order. */
  load(aggregateUuid: string, fromVersion: number): Promise<Event[]> {
    return new Promise<Event[]>((resolve, reject) => {
      this.batcher.push({ aggregateUuid, fromVersion, resolve, reject });
    });
  }

  private async send(group: readonly PendingLoad[]): Promise<void> {
    try {
      if (group.length === 1) {
        const p = group[0] as PendingLoad;
        const rows = await this.read<EventRow>(this.single.text, [p.aggregateUuid, p.fromVersion], "loadAggregate", this.single.name);
        p.resolve(rows.map(toEvent));
        return;
      }
      const rows = await this.read<[...EventRow, number]>(
        this.grouped.text,
        [group.map((p) => p.aggregateUuid), group.map((p) => p.fromVersion)],
        "loadAggregate",
        this.grouped.name,
      );
      const events = group.map(() => [] as Event[]);
      for (const r of rows) (events[r[12] - 1] as Event[]).push(toEvent(r as unknown as EventRow));
      group.forEach((p, i) => p.resolve(events[i] as Event[]));
    } catch (e) {
      for (const p of group) p.reject(e);
    }
  }
}

/** The stored event of a row. */
export function toEvent(r: EventRow): Event {
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
