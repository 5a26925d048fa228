import { MnemeError } from "../model/errors.js";

/**
 * Removal of stored events (retention, see docs/operations.md): an expired
 * event is hollowed in place into a tombstone, never deleted, so that every
 * rule that reads an aggregate's stored rows keeps holding (the next
 * version, the tenant of version 1, a snapshot's own last event) and the
 * hash chain stays verifiable.
 *
 * A tombstone keeps the row's position, event uuid, tenant, aggregate uuid,
 * version, command uuid, creation time and stored hash; its type becomes
 * `Runtime.EventRemoved`, its request context `{}`, its payload
 * {@link RemovedEventPayload} (the former type, the run that removed it and
 * the hash of the row before it), and its tag index rows are deleted. The
 * verifier cannot recompute a tombstone's hash (the bytes it covered are
 * gone): it checks that the tombstone's `prevHash` is the hash of the link
 * before it and chains on from the stored hash, which the next event's hash
 * covers, and it requires the removal record of the run
 * (`Runtime.RetentionApplied`, appended before the run removes anything)
 * later in the chain, naming a position range that holds the tombstone.
 * A tombstone whose stored hash does follow from its row as stored (the
 * target of a store copy or a tenant move chains the rows it receives) is
 * covered by the chain like any event and needs no record.
 */
export const REMOVED_EVENT = Object.freeze({ domain: "Runtime", name: "EventRemoved" });

/** The removal record of a retention run: an event of the chain, appended before the run removes anything. */
export const REMOVAL_RECORD = Object.freeze({ domain: "Runtime", name: "RetentionApplied" });

/** The payload of a tombstone. */
export interface RemovedEventPayload {
  /** The removed event's type (`domain.name`). */
  readonly type: string;
  /** Why it was removed. */
  readonly reason: "retention";
  /** The run that removed it: the `run` of its removal record. */
  readonly run: string;
  /** The hash stored with the event before it in position order (64 zeros for the first). */
  readonly prevHash: string;
}

/** What a removal record's payload holds of the run (the whole report is `RetentionReport` of the Runtime). */
export interface RemovalRecordPayload {
  readonly run: string;
  /** The lowest and highest position the run removes (0 when none). */
  readonly events: { readonly firstPosition: number; readonly lastPosition: number };
}

/** One event to remove: its position and uuid (both must match the stored row). */
export interface EventRemoval {
  readonly position: number;
  readonly eventUuid: string;
}

/** An event repository that can hollow stored events into tombstones (see the module comment). */
export interface RemovesEvents {
  /**
   * Hollows each listed event into a tombstone of `run`, and deletes its tag
   * index rows, in one transaction under the append lock; an event already
   * removed, or whose position and uuid do not match a stored row, is
   * skipped. Resolves how many were removed.
   */
  removeEvents(run: string, removals: readonly EventRemoval[]): Promise<number>;
}

/** Whether `repo` offers {@link RemovesEvents}. */
export function canRemoveEvents(repo: unknown): repo is RemovesEvents {
  return typeof repo === "object" && repo !== null && typeof (repo as Partial<RemovesEvents>).removeEvents === "function";
}

/** Checks the arguments of `removeEvents` (INVALID_REQUEST). */
export function checkRemovals(run: unknown, removals: unknown): asserts removals is readonly EventRemoval[] {
  if (typeof run !== "string" || run === "") throw new MnemeError("INVALID_REQUEST", "removeEvents: run must be a non-empty string");
  if (!Array.isArray(removals)) throw new MnemeError("INVALID_REQUEST", "removeEvents: removals must be an array");
  for (const r of removals as unknown[]) {
    const x = r as Partial<EventRemoval> | null;
    if (
      x === null ||
      typeof x !== "object" ||
      !Number.isSafeInteger(x.position) ||
      (x.position as number) < 1 ||
      typeof x.eventUuid !== "string"
    ) {
      throw new MnemeError("INVALID_REQUEST", "removeEvents: each removal is { position: integer >= 1, eventUuid: string }");
    }
  }
}

/** The payload text of a tombstone, as every backend stores it (key order fixed). */
export function removedPayload(type: string, run: string, prevHash: string): RemovedEventPayload {
  return { type, reason: "retention", run, prevHash };
}

/** What the removal checks read of a chain row (ChainRow of src/store/event-chain.ts). */
export interface RemovalRow {
  readonly position: number;
  readonly hash: string | null;
  readonly domain: string;
  readonly name: string;
  readonly payload: string | null;
}

/** Whether a chain row is a tombstone. */
export function isRemovedRow(row: Pick<RemovalRow, "domain" | "name">): boolean {
  return row.domain === REMOVED_EVENT.domain && row.name === REMOVED_EVENT.name;
}

/** Whether a chain row is a removal record. */
export function isRemovalRecordRow(row: Pick<RemovalRow, "domain" | "name">): boolean {
  return row.domain === REMOVAL_RECORD.domain && row.name === REMOVAL_RECORD.name;
}

/**
 * What the chain's verifier tracks of removals: the tombstones met, by run,
 * until each run's removal record confirms them.
 */
export class ChainRemovals {
  /** Tombstones by run: how many and their lowest and highest position. */
  readonly #pending = new Map<string, { count: number; first: number; last: number }>();
  #confirmed = 0;
  #byType = new Map<string, number>();

  /**
   * A tombstone met at `row`, `previous` the hash of the link before it.
   * Returns the reason it is refused, or undefined when it links.
   */
  tombstone(row: RemovalRow, previous: string): string | undefined {
    const p = parsePayload(row.payload);
    if (p === undefined || typeof p.run !== "string" || typeof p.prevHash !== "string" || typeof p.type !== "string") {
      return `position ${row.position} is a removed event without its removal details`;
    }
    if (p.prevHash !== previous) {
      return `the removed event at position ${row.position} does not link to the chain before it (its predecessor's hash differs)`;
    }
    if (row.hash === null || !/^[0-9a-f]{64}$/.test(row.hash)) return `the removed event at position ${row.position} has no hash`;
    const seen = this.#pending.get(p.run);
    if (seen === undefined) this.#pending.set(p.run, { count: 1, first: row.position, last: row.position });
    else {
      seen.count++;
      seen.last = row.position;
    }
    this.#byType.set(p.type, (this.#byType.get(p.type) ?? 0) + 1);
    return undefined;
  }

  /**
   * A tombstone whose stored hash follows from its row as stored (a copy's target chained it as it got it):
   * covered by the chain like any event, so it needs no removal record; counted by the type it had.
   */
  rechained(row: RemovalRow): void {
    const p = parsePayload(row.payload);
    const type = typeof p?.type === "string" ? p.type : "unknown";
    this.#confirmed++;
    this.#byType.set(type, (this.#byType.get(type) ?? 0) + 1);
  }

  /** A removal record met (its hash verified): confirms its run's tombstones; the reason when they are out of its range. */
  record(row: RemovalRow): string | undefined {
    const p = parsePayload(row.payload) as Partial<RemovalRecordPayload> | undefined;
    if (p === undefined || typeof p.run !== "string") return undefined;
    const seen = this.#pending.get(p.run);
    if (seen === undefined) return undefined;
    const first = p.events?.firstPosition;
    const last = p.events?.lastPosition;
    if (typeof first !== "number" || typeof last !== "number" || seen.first < first || seen.last > last) {
      return `the removal record at position ${row.position} (run ${p.run}) does not name positions ${seen.first} to ${seen.last}, which its run removed`;
    }
    this.#pending.delete(p.run);
    this.#confirmed += seen.count;
    return undefined;
  }

  /** At the end of the chain: the reason when a run's tombstones have no removal record, and the first such position. */
  unconfirmed(): { position: number; reason: string } | undefined {
    let first: { position: number; reason: string } | undefined;
    for (const [run, seen] of this.#pending) {
      if (first === undefined || seen.first < first.position) {
        first = {
          position: seen.first,
          reason: `the removed event at position ${seen.first} (run ${run}) has no removal record in the chain`,
        };
      }
    }
    return first;
  }

  /** The tombstones met: how many, and by the type each event had. */
  summary(): { removed: number; byType: Record<string, number> } {
    let removed = this.#confirmed;
    for (const s of this.#pending.values()) removed += s.count;
    return { removed, byType: Object.fromEntries([...this.#byType].sort(([a], [b]) => (a < b ? -1 : 1))) };
  }
}

function parsePayload(text: string | null): Partial<RemovedEventPayload> | undefined {
  if (text === null) return undefined;
  try {
    const v = JSON.parse(text) as unknown;
    return typeof v === "object" && v !== null && !Array.isArray(v) ? (v as Partial<RemovedEventPayload>) : undefined;
  } catch {
    return undefined;
  }
}
