import type { ChainHead, ChainRow } from "../store/event-chain.js";

/** One archived range as the database records it (the table `event_archives`). */
export interface ArchivedRange {
  /** Positions above this one ... */
  readonly fromPosition: number;
  /** ... up to this one (inclusive) were archived, except the events the database keeps (see docs/operations.md). */
  readonly toPosition: number;
  /** The range's directory when it was written (absolute). */
  readonly directory: string;
  /** SHA-256 of its manifest.json. */
  readonly manifestSha256: string;
  /** Events in its files. */
  readonly events: number;
  /** The hash of its last archived event. */
  readonly chainHead: ChainHead;
}

/** The archived segments holding events of one aggregate, per range (indexes into the manifest's segments). */
export interface StreamSegments {
  readonly toPosition: number;
  readonly firstSegment: number;
  readonly lastSegment: number;
}

/** What the read path asks the database about the archive (each engine answers from its two small tables). */
export interface EventArchiveIndex {
  /** The archived ranges in position order (empty when nothing is archived). */
  ranges(): Promise<readonly ArchivedRange[]>;
  /** The ranges and segments that hold archived events of the aggregate (empty: none of its events is archived). */
  streamSegments(aggregateUuid: string): Promise<readonly StreamSegments[]>;
  /** Creates the index's tables when missing (called by the event repository's init). */
  init(): Promise<void>;
  /** Closes the index (with the event repository); later calls reject with STORE_CLOSED. */
  close(): Promise<void>;
}

/**
 * A reason an archive is refused: a handler that has not read past the boundary, or a snapshot whose later
 * events would leave the database. The checkpoint of a blue-green rebuild (`<readmodel>#rebuild`) is not one:
 * a rebuild reads from zero by design, through the archive like every restore from zero.
 */
export interface ArchiveBlocker {
  readonly kind: "checkpoint" | "snapshot";
  /** The handler (readmodel, reaction) or the aggregate (`domain.aggregate uuid`). */
  readonly name: string;
  /** The handler's checkpoint, or the snapshot's version. */
  readonly position: number;
}

/** What the database records when a range is archived, in the transaction that deletes its events. */
export interface ArchiveCommit {
  readonly range: ArchivedRange;
  /** The positions of the archived events (those deleted), ascending. */
  readonly positions: readonly number[];
  /** Per aggregate with archived events: the first and last segment holding them. */
  readonly streams: ReadonlyMap<string, { first: number; last: number }>;
}

/**
 * An engine's side of archiving (SQLite file, Postgres schema): the
 * statements on its tables, used by `mneme store archive`. Everything that
 * changes the database happens in one transaction per call.
 */
export interface EventArchiveStore extends EventArchiveIndex {
  /** The store in words, without credentials. */
  readonly description: string;
  /** The highest position (0 when empty). */
  headPosition(): Promise<number>;
  /** The lowest position of an event created at or after `createdAtNs` (undefined when none). */
  firstPositionAt(createdAtNs: bigint): Promise<number | undefined>;
  /**
   * The rows an archive of (after, to] moves, in position order, in pages: every event of the window except the
   * first and the newest event of each aggregate (the tenant and version appends check) and tagged events (the
   * tag index of DCB queries points at them).
   */
  archivable(after: number, to: number, pageSize: number): AsyncIterable<ChainRow[]>;
  /** The database's rows with their hashes in position order, in pages (archived rows are not among them). */
  readChain(opts?: { afterPosition?: number; batchSize?: number }): AsyncIterable<ChainRow[]>;
  /** What refuses archiving (after, to]: handlers whose checkpoint is below `to`, snapshots whose later events it would move. */
  blockers(after: number, to: number): Promise<ArchiveBlocker[]>;
  /**
   * In one transaction: checks the blockers again, deletes exactly `positions` (CONFLICT and nothing changed
   * when one of them is gone, tagged, or no longer the event hashed in the files) and records the range and its
   * streams.
   */
  commit(commit: ArchiveCommit, hashes: readonly string[]): Promise<void>;
  /**
   * In one transaction: inserts the rows back as they were stored (positions and hashes), checks every hash
   * against the one in the files, and removes the ranges' records.
   */
  restore(ranges: readonly ArchivedRange[], rowsOf: (range: ArchivedRange) => Iterable<ChainRow[]>): Promise<number>;
}
