import { sha256Hex } from "../store/sha256.js";
import type { Event } from "../model/types.js";
import { itemMatchSql, type PlannedItem, type TaggedRead } from "../store/event-tags.js";
import { type EventRow, type ReadRows, toEvent } from "./postgres-aggregate-loader.js";
import { EVENT_COLUMNS } from "./postgres-append-flush-ddl.js";
import { StatementBatcher } from "./postgres-statement-batcher.js";

/** At most this many statements of tag reads of one repository run at once; further reads wait and go together. */
const READS_IN_FLIGHT = 2;
/** At most this many reads share one statement. */
const MAX_READS_PER_STATEMENT = 64;
/** Shapes of grouped reads prepared per connection at most (an application has a few); others are planned each time. */
const MAX_PREPARED_SHAPES = 64;
/** The events table's columns over alias `e`, in EVENT_COLUMNS order. */
const EVENT_COLUMNS_ALIASED = EVENT_COLUMNS.split(", ")
  .map((c) => `e.${c}`)
  .join(", ");

interface PendingRead {
  readonly tenantUuid: string;
  readonly planned: readonly PlannedItem[];
  readonly after: number;
  /** The read as a statement of its own (the shape-prepared statement of readTagged). */
  readonly alone: () => Promise<TaggedRead<Event>>;
  readonly resolve: (read: TaggedRead<Event>) => void;
  readonly reject: (error: unknown) => void;
}

/** A read as a row of a grouped statement: the SQL of its items over the row's columns, and the row's values. */
interface ShapedRead {
  readonly read: PendingRead;
  /** The items' SQL over columns r.c1, r.c2, ...: the same for every read of the same shape. */
  readonly union: string;
  readonly values: readonly unknown[];
  readonly types: readonly ("text" | "bigint")[];
}

/**
 * readTagged of the Postgres event repository, grouped as aggregate loads
 * are (PostgresAggregateLoader): a read that finds fewer than
 * READS_IN_FLIGHT statements under way is sent alone; reads that arrive
 * while they run go together, one statement per shape of query (how many
 * items, tags and types: reads of one rule share it), all answered at one
 * head in one snapshot (the head and the matches up to it, as a read alone).
 * Each read is a row of `unnest` over one array parameter per value of the
 * shape, and its items are the SQL of a read alone over that row's columns,
 * so every part stays a lookup of the tag table's key. The planner sees the
 * arrays' lengths, so the plan's cost stays far below `jit_above_cost` (a
 * grouped read whose items were unpacked from `jsonb` was estimated at 100
 * rows per item and paid 190 ms of JIT compilation per statement). Each read
 * is sent after it was called, so it sees every append that completed before it.
 */
export class PostgresTaggedReader {
  private readonly tags: string;
  /** The prepared statement name of each shape's grouped SQL. */
  private readonly shapes = new Map<string, string>();
  private readonly batcher = new StatementBatcher<PendingRead>(READS_IN_FLIGHT, MAX_READS_PER_STATEMENT, (group) => this.send(group));

  constructor(
    private readonly qschema: string,
    private readonly read: ReadRows,
  ) {
    this.tags = `${qschema}.event_tags`;
  }

  /** The matches of `planned` in `tenantUuid` after `after`, and the head; `alone` is the read as a statement of its own. */
  readTagged(
    tenantUuid: string,
    planned: readonly PlannedItem[],
    after: number,
    alone: () => Promise<TaggedRead<Event>>,
  ): Promise<TaggedRead<Event>> {
    return new Promise<TaggedRead<Event>>((resolve, reject) => {
      this.batcher.push({ tenantUuid, planned, after, alone, resolve, reject });
    });
  }

  /** Sends the reads of `group`: one statement per shape, at once. */
  private async send(group: readonly PendingRead[]): Promise<void> {
    const byShape = new Map<string, ShapedRead[]>();
    for (const read of group) {
      const shaped = this.shape(read);
      const same = byShape.get(shaped.union);
      if (same === undefined) byShape.set(shaped.union, [shaped]);
      else same.push(shaped);
    }
    await Promise.all([...byShape.values()].map((reads) => this.sendShape(reads)));
  }

  private shape(read: PendingRead): ShapedRead {
    const values: unknown[] = [];
    const types: ("text" | "bigint")[] = [];
    const column = (v: unknown): string => {
      values.push(v);
      types.push(typeof v === "number" ? "bigint" : "text");
      return `r.c${values.length}`;
    };
    const union = read.planned.map((item) => itemMatchSql(this.tags, read.tenantUuid, item, { after: read.after }, column)).join(" UNION ");
    return { read, union, values, types };
  }

  private async sendShape(reads: readonly ShapedRead[]): Promise<void> {
    if (reads.length === 1) {
      const p = (reads[0] as ShapedRead).read;
      try {
        p.resolve(await p.alone());
      } catch (e) {
        p.reject(e);
      }
      return;
    }
    const first = reads[0] as ShapedRead;
    const arrays = first.types.map((type, k) => `$${k + 1}::${type}[]`).join(", ");
    const columns = first.types.map((_, k) => `c${k + 1}`).join(", ");
    const text = `WITH h AS MATERIALIZED (SELECT coalesce(max(position), 0) AS head FROM ${this.qschema}.events)
      SELECT x.*, r.i::integer, h.head::text
      FROM h CROSS JOIN unnest(${arrays}) WITH ORDINALITY AS r(${columns}, i)
      LEFT JOIN LATERAL (
        SELECT ${EVENT_COLUMNS_ALIASED} FROM ${this.qschema}.events e
        WHERE e.position <= h.head AND e.position IN (${first.union})
      ) x ON true
      ORDER BY r.i, x.position`;
    let name = this.shapes.get(first.union);
    if (name === undefined && this.shapes.size < MAX_PREPARED_SHAPES) {
      // Named by the text: readers of several repositories on one pool never give two texts one name.
      name = `mneme:read-tagged-grouped:${sha256Hex(text).slice(0, 32)}`;
      this.shapes.set(first.union, name);
    }
    try {
      const values = first.types.map((_, k) => reads.map((s) => s.values[k]));
      const rows = await this.read<[...EventRow, number, string]>(text, values, "readTagged", name);
      const events = reads.map(() => [] as Event[]);
      let head = 0;
      for (const r of rows) {
        head = Number(r[13]);
        if (r[0] != null) (events[r[12] - 1] as Event[]).push(toEvent(r.slice(0, 12) as unknown as EventRow));
      }
      reads.forEach((s, i) => s.read.resolve({ events: events[i] as Event[], position: head }));
    } catch (e) {
      for (const s of reads) s.read.reject(e);
    }
  }
}
