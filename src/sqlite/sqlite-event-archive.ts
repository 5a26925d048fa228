import { MnemeError } from "../model/errors.js";
import { chainCreatedAt, type ChainRow } from "../store/event-chain.js";
import type { ArchiveBlocker, ArchiveCommit, ArchivedRange, EventArchiveStore, StreamSegments } from "../event-archive/archive-index.js";
import { checkStored, refuseBlocked } from "../event-archive/archive-checks.js";
import { toStoreError } from "./sqlite-errors.js";
import { SqliteStoreBase } from "./sqlite-store-base.js";

const COLUMNS =
  "position, hash, event_uuid, tenant_uuid, domain, name, aggregate_uuid, version, command_uuid, created_at, event_version, req_ctx, payload";

type Row = [
  number,
  string | null,
  string,
  string,
  string,
  string,
  string,
  number,
  string | null,
  number | bigint,
  number,
  string,
  string | null,
];

/** Positions per statement of a commit's checks and deletes (one JSON parameter each). */
const CHUNK = 10_000;

/**
 * The archive's side in a SQLite file (see src/event-archive/): the table of
 * archived ranges (`event_archives`) and the stream index
 * (`event_archive_streams`: per aggregate and range, the segments holding its
 * archived events), and the statements `mneme store archive` runs on the
 * events table. The table of ranges is written in the write transaction that
 * deletes the archived rows, so a crash leaves either the rows or the range.
 */
export class SqliteEventArchive extends SqliteStoreBase implements EventArchiveStore {
  private readonly events: string;
  private readonly tags: string;
  private readonly archives: string;
  private readonly streams: string;

  get description(): string {
    return `sqlite file ${this.storageScope().replace(/^sqlite:/, "")}`;
  }

  constructor(opts: ConstructorParameters<typeof SqliteStoreBase>[0]) {
    super(opts);
    this.events = `${this.prefix}events`;
    this.tags = `${this.prefix}event_tags`;
    this.archives = `${this.prefix}event_archives`;
    this.streams = `${this.prefix}event_archive_streams`;
  }

  protected createTables(): void {
    this.db.exec(`
      CREATE TABLE IF NOT EXISTS ${this.archives} (
        to_position INTEGER PRIMARY KEY,
        from_position INTEGER NOT NULL,
        directory TEXT NOT NULL,
        manifest_sha256 TEXT NOT NULL,
        events INTEGER NOT NULL,
        head_position INTEGER NOT NULL,
        head_hash TEXT NOT NULL,
        archived_at INTEGER NOT NULL
      );
      CREATE TABLE IF NOT EXISTS ${this.streams} (
        aggregate_uuid TEXT NOT NULL,
        to_position INTEGER NOT NULL,
        first_segment INTEGER NOT NULL,
        last_segment INTEGER NOT NULL,
        PRIMARY KEY (aggregate_uuid, to_position)
      ) WITHOUT ROWID;
    `);
  }

  async ranges(): Promise<readonly ArchivedRange[]> {
    return this.attempt("event archive ranges", (db) => this.rangesSync(db));
  }

  private rangesSync(db = this.db): ArchivedRange[] {
    const rows = db
      .statement(
        `SELECT from_position, to_position, directory, manifest_sha256, events, head_position, head_hash FROM ${this.archives} ORDER BY to_position`,
      )
      .all() as {
      from_position: number;
      to_position: number;
      directory: string;
      manifest_sha256: string;
      events: number;
      head_position: number;
      head_hash: string;
    }[];
    return rows.map((r) => ({
      fromPosition: r.from_position,
      toPosition: r.to_position,
      directory: r.directory,
      manifestSha256: r.manifest_sha256,
      events: r.events,
      chainHead: { position: r.head_position, hash: r.head_hash },
    }));
  }

  async streamSegments(aggregateUuid: string): Promise<readonly StreamSegments[]> {
    return this.attempt("event archive streams", (db) =>
      (
        db
          .statement(`SELECT to_position, first_segment, last_segment FROM ${this.streams} WHERE aggregate_uuid = ? ORDER BY to_position`)
          .all(aggregateUuid) as { to_position: number; first_segment: number; last_segment: number }[]
      ).map((r) => ({ toPosition: r.to_position, firstSegment: r.first_segment, lastSegment: r.last_segment })),
    );
  }

  async headPosition(): Promise<number> {
    return this.attempt(
      "head position",
      (db) => (db.statement(`SELECT MAX(position) AS p FROM ${this.events}`).get() as { p: number | null }).p ?? 0,
    );
  }

  async firstPositionAt(createdAtNs: bigint): Promise<number | undefined> {
    return this.attempt("position by date", (db) => {
      const p = (
        db.statement(`SELECT MIN(position) AS p FROM ${this.events} WHERE created_at >= ?`).get(createdAtNs) as { p: number | null }
      ).p;
      return p ?? undefined;
    });
  }

  async *archivable(after: number, to: number, pageSize: number): AsyncIterable<ChainRow[]> {
    const tagged = this.taggedIn(after, to);
    const stmt = `SELECT ${COLUMNS} FROM ${this.events} e
      WHERE e.position > ? AND e.position <= ? AND e.version > 1
        AND EXISTS (SELECT 1 FROM ${this.events} n WHERE n.aggregate_uuid = e.aggregate_uuid AND n.version = e.version + 1)
      ORDER BY e.position LIMIT ?`;
    let p = after;
    for (;;) {
      const rows = this.attempt("archivable events", (db) => db.rawStatement(stmt).all(p, to, pageSize) as Row[]);
      if (rows.length === 0) return;
      p = rows[rows.length - 1]![0];
      const page = rows.filter((r) => !tagged.has(r[0])).map(chainRow);
      if (page.length > 0) yield page;
      if (rows.length < pageSize) return;
    }
  }

  async *readChain(opts: { afterPosition?: number; batchSize?: number } = {}): AsyncIterable<ChainRow[]> {
    const batchSize = opts.batchSize ?? 1000;
    let p = opts.afterPosition ?? 0;
    for (;;) {
      const rows = this.attempt(
        "readChain",
        (db) =>
          db.rawStatement(`SELECT ${COLUMNS} FROM ${this.events} WHERE position > ? ORDER BY position LIMIT ?`).all(p, batchSize) as Row[],
      );
      if (rows.length === 0) return;
      p = rows[rows.length - 1]![0];
      yield rows.map(chainRow);
      if (rows.length < batchSize) return;
    }
  }

  private taggedIn(after: number, to: number): Set<number> {
    return this.attempt("tagged events", (db) => {
      const rows = db.rawStatement(`SELECT DISTINCT position FROM ${this.tags} WHERE position > ? AND position <= ?`).all(after, to) as [
        number,
      ][];
      return new Set(rows.map((r) => r[0]));
    });
  }

  private hasTable(name: string): boolean {
    return this.db.statement("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?").get(name) !== undefined;
  }

  async blockers(after: number, to: number): Promise<ArchiveBlocker[]> {
    return this.attempt("archive blockers", () => this.blockersSync(after, to));
  }

  private blockersSync(after: number, to: number): ArchiveBlocker[] {
    const out: ArchiveBlocker[] = [];
    const checkpoints = `${this.prefix}readmodel_checkpoints`;
    if (this.hasTable(checkpoints)) {
      const rows = this.db
        .statement(
          `SELECT handler, position FROM ${checkpoints} WHERE position < ? AND handler NOT LIKE '%#rebuild' ORDER BY handler LIMIT 100`,
        )
        .all(to) as {
        handler: string;
        position: number;
      }[];
      for (const r of rows) out.push({ kind: "checkpoint", name: r.handler, position: r.position });
    }
    const snapshots = `${this.prefix}snapshots`;
    if (this.hasTable(snapshots)) {
      const rows = this.db
        .statement(
          `SELECT s.domain, s.aggregate, s.aggregate_uuid, s.v FROM
             (SELECT domain, aggregate, aggregate_uuid, MAX(version) AS v FROM ${snapshots} GROUP BY domain, aggregate, aggregate_uuid) s
           WHERE EXISTS (SELECT 1 FROM ${this.events} e WHERE e.aggregate_uuid = s.aggregate_uuid AND e.version > s.v
                           AND e.position > ? AND e.position <= ?
                           AND EXISTS (SELECT 1 FROM ${this.events} n WHERE n.aggregate_uuid = e.aggregate_uuid AND n.version = e.version + 1))
           ORDER BY s.domain, s.aggregate, s.aggregate_uuid LIMIT 100`,
        )
        .all(after, to) as { domain: string; aggregate: string; aggregate_uuid: string; v: number }[];
      for (const r of rows) out.push({ kind: "snapshot", name: `${r.domain}.${r.aggregate} ${r.aggregate_uuid}`, position: r.v });
    }
    return out;
  }

  async commit(commit: ArchiveCommit, hashes: readonly string[]): Promise<void> {
    const { range, positions, streams } = commit;
    const db = this.ready();
    try {
      db.writeTransaction(() => {
        const last = this.rangesSync(db).at(-1);
        if ((last?.toPosition ?? 0) !== range.fromPosition) {
          throw new MnemeError(
            "CONFLICT",
            `store archive: the archive moved on meanwhile (it ends at position ${last?.toPosition ?? 0}, not ${range.fromPosition})`,
          );
        }
        refuseBlocked(this.blockersSync(range.fromPosition, range.toPosition));
        for (let i = 0; i < positions.length; i += CHUNK) {
          const chunk = JSON.stringify(positions.slice(i, i + CHUNK));
          const stored = db
            .rawStatement(`SELECT position, hash FROM ${this.events} WHERE position IN (SELECT value FROM json_each(?)) ORDER BY position`)
            .all(chunk) as [number, string | null][];
          checkStored(stored, positions, hashes, i, Math.min(positions.length, i + CHUNK));
          const tagged = (
            db.statement(`SELECT COUNT(*) AS n FROM ${this.tags} WHERE position IN (SELECT value FROM json_each(?))`).get(chunk) as {
              n: number;
            }
          ).n;
          if (tagged > 0)
            throw new MnemeError(
              "CONFLICT",
              "store archive: events were tagged meanwhile (tagged events stay in the database); run the archive again",
            );
          db.statement(`DELETE FROM ${this.events} WHERE position IN (SELECT value FROM json_each(?))`).run(chunk);
        }
        db.statement(
          `INSERT INTO ${this.archives} (to_position, from_position, directory, manifest_sha256, events, head_position, head_hash, archived_at)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
        ).run(
          range.toPosition,
          range.fromPosition,
          range.directory,
          range.manifestSha256,
          range.events,
          range.chainHead.position,
          range.chainHead.hash,
          Date.now(),
        );
        const insert = db.statement(
          `INSERT INTO ${this.streams} (aggregate_uuid, to_position, first_segment, last_segment) VALUES (?, ?, ?, ?)`,
        );
        for (const [agg, s] of streams) insert.run(agg, range.toPosition, s.first, s.last);
        // A release before archives would read an archived store without its archived events: it is refused.
        db.statement(`UPDATE ${this.prefix}store_format SET lowest_writer_format = MAX(lowest_writer_format, 4) WHERE id = 1`).run();
      });
    } catch (e) {
      throw e instanceof MnemeError ? e : toStoreError(e, "store archive");
    }
  }

  async restore(ranges: readonly ArchivedRange[], rowsOf: (range: ArchivedRange) => Iterable<ChainRow[]>): Promise<number> {
    const db = this.ready();
    try {
      return db.writeTransaction(() => {
        const recorded = this.rangesSync(db);
        if (JSON.stringify(recorded) !== JSON.stringify(ranges)) {
          throw new MnemeError("CONFLICT", "store archive --restore: the archived ranges changed meanwhile; run the restore again");
        }
        const insert = db.statement(
          `INSERT INTO ${this.events} (position, hash, event_uuid, tenant_uuid, domain, name, aggregate_uuid, version, command_uuid, created_at,
             event_version, req_ctx, payload) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
        );
        let n = 0;
        for (const range of ranges) {
          for (const page of rowsOf(range)) {
            for (const r of page) {
              insert.run(
                r.position,
                r.hash,
                r.eventUuid,
                r.tenantUuid,
                r.domain,
                r.name,
                r.aggregateUuid,
                r.version,
                r.commandUuid,
                BigInt(r.createdAt),
                r.eventVersion,
                r.reqCtx,
                r.payload,
              );
              n++;
            }
          }
        }
        db.statement(`DELETE FROM ${this.streams}`).run();
        db.statement(`DELETE FROM ${this.archives}`).run();
        return n;
      });
    } catch (e) {
      throw e instanceof MnemeError ? e : toStoreError(e, "store archive --restore");
    }
  }
}

function chainRow(r: Row): ChainRow {
  return {
    position: r[0],
    hash: r[1],
    eventUuid: r[2],
    tenantUuid: r[3],
    domain: r[4],
    name: r[5],
    aggregateUuid: r[6],
    version: r[7],
    commandUuid: r[8],
    createdAt: typeof r[9] === "bigint" ? r[9].toString() : chainCreatedAt(r[9]),
    eventVersion: r[10],
    reqCtx: r[11],
    payload: r[12],
  };
}
