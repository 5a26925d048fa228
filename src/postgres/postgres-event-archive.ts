import { MnemeError } from "../model/errors.js";
import { type ChainColumns, type ChainRow, chainRowOfColumns } from "../store/event-chain.js";
import { checkStored, refuseBlocked } from "../event-archive/archive-checks.js";
import type { ArchiveBlocker, ArchiveCommit, ArchivedRange, EventArchiveStore, StreamSegments } from "../event-archive/archive-index.js";
import { mapPgError } from "./postgres-errors.js";
import { FORMAT_RECORD_TABLE } from "./postgres-old-starts.js";
import type { CheckedOutClient } from "./postgres-pool.js";
import { advisoryKey } from "./postgres-schema.js";
import { PostgresStoreBase, type PostgresStoreOptions } from "./postgres-store-base.js";

/** Qualified by the alias `e`: ORDER BY e.position then orders by the column, not by its text. */
const COLUMNS =
  "position::text, hash, event_uuid, tenant_uuid, domain, name, aggregate_uuid, version, command_uuid, created_at::text, event_version, req_ctx::text, payload::text";

type Row = ChainColumns;

type RangeRow = [string, string, string, string, string, string, string];

/** Positions per statement of a commit's checks and deletes. */
const CHUNK = 10_000;

/**
 * The archive's side in a Postgres schema (see src/event-archive/): the
 * table of archived ranges (`event_archives`), the stream index
 * (`event_archive_streams`) and the statements `mneme store archive` runs.
 * A commit and a restore each run in one transaction under the append lock
 * (the schema's `mneme:events` advisory lock), so no append interleaves
 * with the rows they delete or insert.
 */
export class PostgresEventArchive extends PostgresStoreBase implements EventArchiveStore {
  private readonly lockKey: string;

  constructor(opts: PostgresStoreOptions) {
    super(opts);
    this.lockKey = advisoryKey("mneme:events", this.schema);
  }

  get description(): string {
    return `postgres ${this.connectionInfo}`;
  }

  private t(name: string): string {
    return `${this.qschema}.${name}`;
  }

  async init(): Promise<void> {
    await this.track(() =>
      this.ensureDdl([
        `CREATE TABLE IF NOT EXISTS ${this.t("event_archives")} (
          to_position bigint PRIMARY KEY,
          from_position bigint NOT NULL,
          directory text NOT NULL,
          manifest_sha256 text NOT NULL,
          events bigint NOT NULL,
          head_position bigint NOT NULL,
          head_hash text NOT NULL,
          archived_at timestamptz NOT NULL DEFAULT now())`,
        `CREATE TABLE IF NOT EXISTS ${this.t("event_archive_streams")} (
          aggregate_uuid text NOT NULL,
          to_position bigint NOT NULL,
          first_segment integer NOT NULL,
          last_segment integer NOT NULL,
          PRIMARY KEY (aggregate_uuid, to_position))`,
      ]),
    );
  }

  private async rows<R extends unknown[]>(text: string, values: unknown[], what: string, client?: CheckedOutClient): Promise<R[]> {
    try {
      if (client !== undefined) return (await client.query<R>({ text, values, rowMode: "array" })).rows;
      return (await this.poolQuery<R>("read", { text, values, rowMode: "array" })).rows;
    } catch (e) {
      throw mapPgError(e, `postgres: ${what}`);
    }
  }

  async ranges(): Promise<readonly ArchivedRange[]> {
    return this.track(() => this.rangesOn(undefined));
  }

  private async rangesOn(client: CheckedOutClient | undefined): Promise<ArchivedRange[]> {
    const rows = await this.rows<RangeRow>(
      `SELECT a.from_position::text, a.to_position::text, a.directory, a.manifest_sha256, a.events::text, a.head_position::text, a.head_hash
         FROM ${this.t("event_archives")} a ORDER BY a.to_position`,
      [],
      "event archive ranges",
      client,
    );
    return rows.map((r) => ({
      fromPosition: Number(r[0]),
      toPosition: Number(r[1]),
      directory: r[2],
      manifestSha256: r[3],
      events: Number(r[4]),
      chainHead: { position: Number(r[5]), hash: r[6] },
    }));
  }

  async streamSegments(aggregateUuid: string): Promise<readonly StreamSegments[]> {
    return this.track(async () => {
      const rows = await this.rows<[string, number, number]>(
        `SELECT s.to_position::text, s.first_segment, s.last_segment FROM ${this.t("event_archive_streams")} s WHERE s.aggregate_uuid = $1 ORDER BY s.to_position`,
        [aggregateUuid],
        "event archive streams",
      );
      return rows.map((r) => ({ toPosition: Number(r[0]), firstSegment: r[1], lastSegment: r[2] }));
    });
  }

  async headPosition(): Promise<number> {
    return this.track(async () => {
      const rows = await this.rows<[string | null]>(`SELECT max(position)::text FROM ${this.t("events")}`, [], "head position");
      return Number(rows[0]?.[0] ?? 0);
    });
  }

  async firstPositionAt(createdAtNs: bigint): Promise<number | undefined> {
    return this.track(async () => {
      const rows = await this.rows<[string | null]>(
        `SELECT min(position)::text FROM ${this.t("events")} WHERE created_at >= $1::bigint`,
        [createdAtNs.toString()],
        "position by date",
      );
      const p = rows[0]?.[0];
      return p == null ? undefined : Number(p);
    });
  }

  async *archivable(after: number, to: number, pageSize: number): AsyncIterable<ChainRow[]> {
    const taggedRows = await this.track(() =>
      this.rows<[string]>(
        `SELECT DISTINCT position::text FROM ${this.t("event_tags")} WHERE position > $1 AND position <= $2`,
        [after, to],
        "tagged events",
      ),
    );
    const tagged = new Set(taggedRows.map((r) => Number(r[0])));
    const sql = `SELECT ${COLUMNS} FROM ${this.t("events")} e
      WHERE e.position > $1 AND e.position <= $2 AND e.version > 1
        AND EXISTS (SELECT 1 FROM ${this.t("events")} n WHERE n.aggregate_uuid = e.aggregate_uuid AND n.version = e.version + 1)
      ORDER BY e.position LIMIT $3`;
    let p = after;
    for (;;) {
      const rows = await this.track(() => this.rows<Row>(sql, [p, to, pageSize], "archivable events"));
      if (rows.length === 0) return;
      p = Number(rows[rows.length - 1]![0]);
      const page = rows.map(chainRowOfColumns).filter((r) => !tagged.has(r.position));
      if (page.length > 0) yield page;
      if (rows.length < pageSize) return;
    }
  }

  async *readChain(opts: { afterPosition?: number; batchSize?: number } = {}): AsyncIterable<ChainRow[]> {
    const batchSize = opts.batchSize ?? 1000;
    let p = opts.afterPosition ?? 0;
    for (;;) {
      const rows = await this.track(() =>
        this.rows<Row>(
          `SELECT ${COLUMNS} FROM ${this.t("events")} e WHERE e.position > $1 ORDER BY e.position LIMIT $2`,
          [p, batchSize],
          "readChain",
        ),
      );
      if (rows.length === 0) return;
      const page = rows.map(chainRowOfColumns);
      p = page[page.length - 1]!.position;
      yield page;
      if (rows.length < batchSize) return;
    }
  }

  async blockers(after: number, to: number): Promise<ArchiveBlocker[]> {
    return this.track(() => this.blockersOn(undefined, after, to));
  }

  private async blockersOn(client: CheckedOutClient | undefined, after: number, to: number): Promise<ArchiveBlocker[]> {
    const out: ArchiveBlocker[] = [];
    const exists = await this.rows<[string | null, string | null]>(
      "SELECT to_regclass($1)::text, to_regclass($2)::text",
      [this.t("readmodel_checkpoints"), this.t("snapshots")],
      "archive blockers",
      client,
    );
    if (exists[0]?.[0] != null) {
      const rows = await this.rows<[string, string]>(
        `SELECT c.handler, c.position::text FROM ${this.t("readmodel_checkpoints")} c WHERE c.position < $1 AND c.handler NOT LIKE '%#rebuild' ORDER BY c.handler LIMIT 100`,
        [to],
        "archive blockers",
        client,
      );
      for (const r of rows) out.push({ kind: "checkpoint", name: r[0], position: Number(r[1]) });
    }
    if (exists[0]?.[1] != null) {
      const rows = await this.rows<[string, string, string, number]>(
        `SELECT s.domain, s.aggregate, s.aggregate_uuid, s.v FROM
           (SELECT domain, aggregate, aggregate_uuid, max(version) AS v FROM ${this.t("snapshots")} GROUP BY domain, aggregate, aggregate_uuid) s
         WHERE EXISTS (SELECT 1 FROM ${this.t("events")} e WHERE e.aggregate_uuid = s.aggregate_uuid AND e.version > s.v
                         AND e.position > $1 AND e.position <= $2
                         AND EXISTS (SELECT 1 FROM ${this.t("events")} n WHERE n.aggregate_uuid = e.aggregate_uuid AND n.version = e.version + 1))
         ORDER BY s.domain, s.aggregate, s.aggregate_uuid LIMIT 100`,
        [after, to],
        "archive blockers",
        client,
      );
      for (const r of rows) out.push({ kind: "snapshot", name: `${r[0]}.${r[1]} ${r[2]}`, position: Number(r[3]) });
    }
    return out;
  }

  /** Runs `fn` in one transaction under the append lock. */
  private async transaction<R>(what: string, fn: (client: CheckedOutClient) => Promise<R>): Promise<R> {
    return this.track(async () => {
      const client = await this.checkout("transaction", `postgres: ${what}`);
      let broken = false;
      try {
        await client.query("BEGIN");
        await client.query("SELECT pg_advisory_xact_lock($1::bigint)", [this.lockKey]);
        const r = await fn(client);
        await client.query("COMMIT");
        return r;
      } catch (e) {
        try {
          await client.query("ROLLBACK");
        } catch {
          broken = true;
        }
        throw e instanceof MnemeError ? e : mapPgError(e, `postgres: ${what}`);
      } finally {
        client.release(broken);
      }
    });
  }

  async commit(commit: ArchiveCommit, hashes: readonly string[]): Promise<void> {
    const { range, positions, streams } = commit;
    await this.transaction("store archive", async (client) => {
      const last = (await this.rangesOn(client)).at(-1);
      if ((last?.toPosition ?? 0) !== range.fromPosition) {
        throw new MnemeError(
          "CONFLICT",
          `store archive: the archive moved on meanwhile (it ends at position ${last?.toPosition ?? 0}, not ${range.fromPosition})`,
        );
      }
      refuseBlocked(await this.blockersOn(client, range.fromPosition, range.toPosition));
      for (let i = 0; i < positions.length; i += CHUNK) {
        const chunk = positions.slice(i, i + CHUNK);
        const stored = await this.rows<[string, string | null]>(
          `SELECT e.position::text, e.hash FROM ${this.t("events")} e WHERE e.position = ANY($1::bigint[]) ORDER BY e.position`,
          [chunk],
          "store archive",
          client,
        );
        checkStored(stored, positions, hashes, i, i + chunk.length);
        const tagged = await this.rows<[string]>(
          `SELECT count(*)::text FROM ${this.t("event_tags")} WHERE position = ANY($1::bigint[])`,
          [chunk],
          "store archive",
          client,
        );
        if (Number(tagged[0]?.[0] ?? 0) > 0) {
          throw new MnemeError(
            "CONFLICT",
            "store archive: events were tagged meanwhile (tagged events stay in the database); run the archive again",
          );
        }
        await client.query(`DELETE FROM ${this.t("events")} WHERE position = ANY($1::bigint[])`, [chunk]);
      }
      await client.query(
        `INSERT INTO ${this.t("event_archives")} (to_position, from_position, directory, manifest_sha256, events, head_position, head_hash)
         VALUES ($1, $2, $3, $4, $5, $6, $7)`,
        [
          range.toPosition,
          range.fromPosition,
          range.directory,
          range.manifestSha256,
          range.events,
          range.chainHead.position,
          range.chainHead.hash,
        ],
      );
      const aggs = [...streams.keys()];
      for (let i = 0; i < aggs.length; i += CHUNK) {
        const part = aggs.slice(i, i + CHUNK);
        await client.query(
          `INSERT INTO ${this.t("event_archive_streams")} (aggregate_uuid, to_position, first_segment, last_segment)
           SELECT a, $1, f, l FROM unnest($2::text[], $3::int[], $4::int[]) AS u(a, f, l)`,
          [range.toPosition, part, part.map((a) => streams.get(a)!.first), part.map((a) => streams.get(a)!.last)],
        );
      }
      // A release before archives would read an archived store without its archived events: it is refused.
      await client.query(`UPDATE ${this.t(FORMAT_RECORD_TABLE)} SET lowest_writer_format = greatest(lowest_writer_format, 4) WHERE id = 1`);
    });
  }

  async restore(ranges: readonly ArchivedRange[], rowsOf: (range: ArchivedRange) => Iterable<ChainRow[]>): Promise<number> {
    return this.transaction("store archive --restore", async (client) => {
      const recorded = await this.rangesOn(client);
      if (JSON.stringify(recorded) !== JSON.stringify(ranges)) {
        throw new MnemeError("CONFLICT", "store archive --restore: the archived ranges changed meanwhile; run the restore again");
      }
      let n = 0;
      for (const range of ranges) {
        for (const page of rowsOf(range)) {
          for (let i = 0; i < page.length; i += 5000) {
            const rows = page.slice(i, i + 5000);
            // The chain trigger computes each hash again from the row before it: it must come out as archived.
            const res = await client.query<{ p: string }>(
              `WITH ins AS (
                 INSERT INTO ${this.t("events")} (position, event_uuid, tenant_uuid, domain, name, aggregate_uuid, version, command_uuid,
                   created_at, event_version, req_ctx, payload)
                 SELECT p, u, t, d, nm, a, v, c, ca, ev, rc::jsonb, pl::jsonb
                   FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::int[], $8::text[],
                               $9::bigint[], $10::int[], $11::text[], $12::text[]) WITH ORDINALITY AS x(p, u, t, d, nm, a, v, c, ca, ev, rc, pl, o)
                  ORDER BY o
                 RETURNING position, hash)
               SELECT ins.position::text AS p FROM ins JOIN unnest($1::bigint[], $13::text[]) AS h(p, h) ON h.p = ins.position
                WHERE ins.hash IS DISTINCT FROM h.h`,
              [
                rows.map((r) => r.position),
                rows.map((r) => r.eventUuid),
                rows.map((r) => r.tenantUuid),
                rows.map((r) => r.domain),
                rows.map((r) => r.name),
                rows.map((r) => r.aggregateUuid),
                rows.map((r) => r.version),
                rows.map((r) => r.commandUuid),
                rows.map((r) => r.createdAt),
                rows.map((r) => r.eventVersion),
                rows.map((r) => r.reqCtx),
                rows.map((r) => r.payload),
                rows.map((r) => r.hash),
              ],
            );
            if (res.rows.length > 0) {
              throw new MnemeError(
                "STORE_ERROR",
                `store archive --restore: the event restored at position ${res.rows[0]!.p} does not hash as archived; nothing was restored`,
              );
            }
            n += rows.length;
          }
        }
      }
      await client.query(`DELETE FROM ${this.t("event_archive_streams")}`);
      await client.query(`DELETE FROM ${this.t("event_archives")}`);
      return n;
    });
  }
}
