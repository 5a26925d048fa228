/**
 * What a retention run does and reports (see docs/operations.md, "Retention"):
 * the events it removed, those it kept although expired and why, the
 * command records and log entries it deleted. The report (without the
 * listing of kept aggregates beyond its first entries) is also the payload of
 * the run's removal record, `Runtime.RetentionApplied`, in the event chain.
 */

/** Options of a retention run (`facade.applyRetention`, `Runtime.ApplyRetention`). */
export interface RetentionOptions {
  /** List what would go, change nothing. */
  readonly dryRun?: boolean;
  /** Events hollowed per transaction (default 1000). */
  readonly batchSize?: number;
}

/** An expired event that stays: a live aggregate's state depends on it and no snapshot covers it. */
export interface RetentionKept {
  readonly type: string;
  readonly aggregateUuid: string;
  /** The newest expired version of the aggregate that stays. */
  readonly version: number;
  readonly reason: string;
}

/** The report of a retention run. */
export interface RetentionReport {
  /** The run's uuid: the `run` of its tombstones and of its removal record. */
  readonly run: string;
  readonly dryRun: boolean;
  /** When it ran, ns since the epoch. */
  readonly at: number;
  /** Who ran it: the caller's account (or service), what a tool named (`reqCtx.attributes.ranBy`), else null. */
  readonly ranBy: string | null;
  readonly events: {
    /** Events removed (dry run: that would be). */
    readonly removed: number;
    readonly byType: Readonly<Record<string, number>>;
    /** The lowest and highest position removed (0 when none). */
    readonly firstPosition: number;
    readonly lastPosition: number;
    /** Expired events kept because a live aggregate depends on them without a snapshot. */
    readonly keptCount: number;
    /** The first kept aggregates (at most 100), each with why. */
    readonly kept: readonly RetentionKept[];
  };
  /** Command records deleted with the last of their events. */
  readonly commandRecords: { readonly deleted: number };
  /** LogStore entries deleted; null when the LogStore declares no retention. */
  readonly logs: { readonly deleted: number; readonly retainForMs: number } | null;
  /** The position of the run's removal record; null when nothing was removed (or a dry run). */
  readonly recordPosition: number | null;
}
