import type { Event } from "../model/types.js";
import type { PlannedItem, TaggedRead } from "../store/event-tags.js";
import { type EventRow, type ReadRows, toEvent } from "./postgres-aggregate-loader.js";
import { EVENT_COLUMNS } from "./postgres-append-flush-ddl.js";
import { statementName } from "./postgres-append-writer.js";

/** At most this many statements of tag reads of one repository run at once; further reads wait and go together. */
const READS_IN_FLIGHT = 2;
/** At most this many reads share one statement. */
const MAX_READS_PER_STATEMENT = 64;

interface PendingRead {
  readonly tenantUuid: string;
  readonly planned: readonly PlannedItem[];
  readonly after: number;
  /** The read as a statement of its own (the shape-prepared statement of readTagged). */
  readonly alone: () => Promise<TaggedRead<Event>>;
  readonly resolve: (read: TaggedRead<Event>) => void;
  readonly reject: (error: unknown) => void;
}

/**
 * readTagged of the Postgres event repository, grouped as aggregate loads
 * are (PostgresAggregateLoader): a read that finds fewer than
 * READS_IN_FLIGHT statements under way is sent alone; reads that arrive
 * while they run go together in one statement, each read's items a
 * parameter row, all answered at one head in one snapshot (the head and the
 * matches up to it, as a read alone). Each read is sent after it was
 * called, so it sees every append that completed before it.
 */
export class PostgresTaggedReader {
  private readonly grouped: { readonly name: string; readonly text: string };
  private readonly queue: PendingRead[] = [];
  private inFlight = 0;
  private drainScheduled = false;

  constructor(
    qschema: string,
    private readonly read: ReadRows,
  ) {
    const columns = EVENT_COLUMNS.split(", ")
      .map((c) => `x.${c}`)
      .join(", ");
    const tags = `${qschema}.event_tags`;
    this.grouped = {
      name: statementName("readTaggedGrouped", qschema),
      // Per read, the positions of its items' matches (each item: its driving rows as a range of the key after
      // the read's position, every further tag and one of the types as lookups of the whole key), then the events.
      text: `WITH h AS MATERIALIZED (SELECT coalesce(max(position), 0) AS head FROM ${qschema}.events)
        SELECT ${columns}, r.i::integer, h.head::text
        FROM h CROSS JOIN unnest($1::text[], $2::bigint[], $3::jsonb[]) WITH ORDINALITY AS r(tenant, after, items, i)
        LEFT JOIN LATERAL (
          SELECT DISTINCT m.position FROM jsonb_array_elements(r.items) AS it(v)
          CROSS JOIN LATERAL (
            SELECT t.position FROM ${tags} t
            WHERE t.tenant_uuid = r.tenant AND t.tag = ANY (ARRAY(SELECT jsonb_array_elements_text(it.v->'d')))
              AND t.position > r.after AND t.position <= h.head
              AND (SELECT count(*) FROM jsonb_array_elements_text(it.v->'r') AS g(tag) WHERE (
                SELECT 1 FROM ${tags} u WHERE u.tenant_uuid = t.tenant_uuid AND u.tag = g.tag AND u.position = t.position LIMIT 1) IS NULL) = 0
              AND (jsonb_typeof(it.v->'y') IS DISTINCT FROM 'array' OR (
                SELECT count(*) FROM jsonb_array_elements_text(it.v->'y') AS y(tag) WHERE (
                SELECT 1 FROM ${tags} u WHERE u.tenant_uuid = t.tenant_uuid AND u.tag = y.tag AND u.position = t.position LIMIT 1) IS NOT NULL) > 0)
          ) m
        ) p ON true
        LEFT JOIN ${qschema}.events x ON x.position = p.position
        ORDER BY r.i, x.position`,
    };
  }

  /** The matches of `planned` in `tenantUuid` after `after`, and the head; `alone` is the read as a statement of its own. */
  readTagged(
    tenantUuid: string,
    planned: readonly PlannedItem[],
    after: number,
    alone: () => Promise<TaggedRead<Event>>,
  ): Promise<TaggedRead<Event>> {
    return new Promise<TaggedRead<Event>>((resolve, reject) => {
      this.queue.push({ tenantUuid, planned, after, alone, resolve, reject });
      if (this.inFlight < READS_IN_FLIGHT && !this.drainScheduled) {
        // Sent after the pending callbacks of this turn: the reads of callers resumed together share one statement.
        this.drainScheduled = true;
        process.nextTick(() => {
          this.drainScheduled = false;
          void this.drain();
        });
      }
    });
  }

  private async drain(): Promise<void> {
    this.inFlight++;
    try {
      while (this.queue.length > 0) await this.send(this.queue.splice(0, MAX_READS_PER_STATEMENT));
    } finally {
      this.inFlight--;
    }
  }

  private async send(group: readonly PendingRead[]): Promise<void> {
    if (group.length === 1) {
      const p = group[0] as PendingRead;
      try {
        p.resolve(await p.alone());
      } catch (e) {
        p.reject(e);
      }
      return;
    }
    try {
      const rows = await this.read<[...EventRow, number, string]>(
        this.grouped.text,
        [
          group.map((p) => p.tenantUuid),
          group.map((p) => p.after),
          group.map((p) => JSON.stringify(p.planned.map((item) => ({ d: item.drive, r: item.rest, y: item.types ?? null })))),
        ],
        "readTagged",
        this.grouped.name,
      );
      const events = group.map(() => [] as Event[]);
      let head = 0;
      for (const r of rows) {
        head = Number(r[13]);
        if (r[0] != null) (events[r[12] - 1] as Event[]).push(toEvent(r.slice(0, 12) as unknown as EventRow));
      }
      group.forEach((p, i) => p.resolve({ events: events[i] as Event[], position: head }));
    } catch (e) {
      for (const p of group) p.reject(e);
    }
  }
}
