import * as nodeCrypto from "node:crypto";
import { MnemeError } from "../model/errors.js";
import { ChainRemovals, isRemovalRecordRow, isRemovedRow } from "./event-removal.js";

/**
 * The hash chain of stored events (tamper evidence).
 *
 * Every stored event carries `hash`, the SHA-256 (lowercase hex) of the UTF-8
 * bytes of
 *
 *     previous hash "\n" position "\n"
 *     [event uuid, tenant, domain, name, aggregate uuid, command uuid] "\n"
 *     version "\n" created at "\n" event version "\n"
 *     request context as stored "\n" payload as stored
 *
 * where the bracketed list is a compact JSON array of those strings (the
 * command uuid `null` when absent; JSON.stringify's escaping, which Postgres'
 * `to_json(text)` shares for the strings mneme accepts), numbers are in
 * decimal, the request context and payload are the stored JSON texts (a
 * JSON value ends where it ends, so no separator inside them matters; `-`
 * for an absent payload), and the previous hash is that of the event stored
 * just before in position order (64 zeros, {@link GENESIS_HASH}, for the first one). The
 * payload and the request context are hashed as the store keeps them (JSON
 * text on SQLite, `jsonb::text` on Postgres), personal fields as ciphertext, so
 * forgetting a subject (which deletes its key, not its events) keeps the
 * chain valid. The tag index is not part of the chain: it is derived from the
 * payloads when they are appended.
 *
 * The hash is computed inside the append's ordered section (SQLite: the
 * write transaction; Postgres: a row trigger under the append lock), so the
 * chain follows commit order. Changing a stored byte, a position, or the
 * order of rows changes the hash of that event and, through it, of every
 * later one: {@link verifyEventChain} recomputes the chain from the start
 * and reports the first position whose stored hash does not follow.
 */
export const GENESIS_HASH = "0".repeat(64);

/** One stored event as the chain sees it: the stored texts, numbers in decimal. */
export interface ChainRow {
  readonly position: number;
  /** The stored hash (null: not chained yet, a store older than the chain before its upgrade). */
  readonly hash: string | null;
  readonly eventUuid: string;
  readonly tenantUuid: string;
  readonly domain: string;
  readonly name: string;
  readonly aggregateUuid: string;
  readonly version: number;
  readonly commandUuid: string | null;
  /** createdAt in ns, decimal (as the store keeps it: an int64). */
  readonly createdAt: string;
  readonly eventVersion: number;
  /** The request context as stored (JSON text). */
  readonly reqCtx: string;
  /** The payload as stored (JSON text), null when absent. */
  readonly payload: string | null;
}

/**
 * A chain row as the SQL readers select it, in this column order: position,
 * hash, event uuid, tenant, domain, name, aggregate uuid, version, command
 * uuid, created at, event version, request context, payload (the texts as
 * stored; position and created at as decimal text).
 */
export type ChainColumns = [
  string,
  string | null,
  string,
  string,
  string,
  string,
  string,
  number,
  string | null,
  string,
  number,
  string,
  string | null,
];

/** The ChainRow of a row selected in {@link ChainColumns} order. */
export function chainRowOfColumns(r: ChainColumns): ChainRow {
  return {
    position: Number(r[0]),
    hash: r[1],
    eventUuid: r[2],
    tenantUuid: r[3],
    domain: r[4],
    name: r[5],
    aggregateUuid: r[6],
    version: r[7],
    commandUuid: r[8],
    createdAt: r[9],
    eventVersion: r[10],
    reqCtx: r[11],
    payload: r[12],
  };
}

/** The chain's newest link: the highest chained position and its hash (position 0 and {@link GENESIS_HASH} when empty). */
export interface ChainHead {
  readonly position: number;
  readonly hash: string;
}

/** Options of {@link verifyEventChain}. */
export interface VerifyChainOptions {
  /** Rows per page read from the store. Default 1000. */
  readonly batchSize?: number;
  /** Called after each page with the rows checked so far and the last position checked. */
  readonly onProgress?: (checked: number, position: number) => void;
  /** When aborted, verification stops and reports what it checked (`complete: false`). */
  readonly signal?: AbortSignal;
  /**
   * Go on from a link this process recomputed earlier (its position and hash) instead of from the first
   * event: an incremental check of what was appended since. Never a hash read from the store.
   */
  readonly from?: ChainHead;
  /** Stop after this position (a store still being appended to). Default: the end. */
  readonly untilPosition?: number;
}

/**
 * The events removed by retention that the verifier met (see src/store/event-removal.ts): their count and the
 * type each had. Their hashes are not recomputed (the bytes they covered are gone); each links to the chain
 * before it, the next event's hash covers it, and its removal record is later in the chain.
 */
export interface ChainRemovalSummary {
  readonly removed: number;
  readonly byType: Readonly<Record<string, number>>;
}

/** The outcome of {@link verifyEventChain}. */
export type ChainVerification =
  | {
      readonly ok: true;
      readonly checked: number;
      readonly head: ChainHead;
      readonly complete: boolean;
      /** The positions that are tombstones of removed events, among those checked. */
      readonly removals: ChainRemovalSummary;
    }
  | {
      readonly ok: false;
      readonly checked: number;
      /** The first position whose stored hash does not follow from the events before it. */
      readonly position: number;
      /** The last position that verified (0: none). */
      readonly lastGoodPosition: number;
      readonly reason: string;
    };

/** A repository that keeps the chain (see EventRepository.chainsEvents). */
export interface ChainedEvents {
  readonly chainsEvents: true;
  /** The stored rows of the chain in position order, in pages of at most `batchSize`, from `afterPosition` (exclusive). */
  readChain(opts?: { afterPosition?: number; batchSize?: number }): AsyncIterable<ChainRow[]>;
  /** The chain's head (the hash stored with the highest position). */
  chainHead(): Promise<ChainHead>;
}

/** True when `repo` keeps the hash chain. */
export function isChained(repo: unknown): repo is ChainedEvents {
  return (
    typeof repo === "object" &&
    repo !== null &&
    (repo as Partial<ChainedEvents>).chainsEvents === true &&
    typeof (repo as Partial<ChainedEvents>).readChain === "function" &&
    typeof (repo as Partial<ChainedEvents>).chainHead === "function"
  );
}

/** SHA-256 hex of a string's UTF-8 bytes: the one-shot `crypto.hash` where the runtime has it (Node 21.7+), else a Hash object. */
const sha256 =
  typeof nodeCrypto.hash === "function"
    ? (text: string): string => nodeCrypto.hash("sha256", text, "hex")
    : (text: string): string => nodeCrypto.createHash("sha256").update(text, "utf8").digest("hex");

/** The text a row's hash is taken over (see the module comment). */
export function chainText(previous: string, r: Omit<ChainRow, "hash">): string {
  return (
    `${previous}\n${r.position}\n${JSON.stringify([r.eventUuid, r.tenantUuid, r.domain, r.name, r.aggregateUuid, r.commandUuid])}\n` +
    `${r.version}\n${r.createdAt}\n${r.eventVersion}\n${r.reqCtx}\n${r.payload ?? "-"}`
  );
}

/** The hash of a row following `previous`. */
export function chainHash(previous: string, r: Omit<ChainRow, "hash">): string {
  return sha256(chainText(previous, r));
}

/** createdAt as the chain writes it: the int64's decimal digits (`String` of an integer-valued double below 1e21). */
export function chainCreatedAt(createdAt: number): string {
  return Number.isSafeInteger(createdAt) ? String(createdAt) : BigInt(createdAt).toString();
}

/**
 * Recomputes the chain of `repo` from its first event and compares every
 * stored hash, streaming page by page (never the whole store in memory).
 * Resolves `ok: false` with the first position whose stored hash differs from
 * the recomputed one (a changed byte of that event, of its position, or of the
 * event before it in position order; a deleted event shows at the next one).
 * A tombstone of an event removed by retention is accepted when it links to
 * the chain before it and its run's removal record follows it in the chain
 * (checked when the verification reaches the end of the store).
 */
export async function verifyEventChain(repo: Pick<ChainedEvents, "readChain">, opts: VerifyChainOptions = {}): Promise<ChainVerification> {
  const batchSize = opts.batchSize ?? 1000;
  if (!Number.isInteger(batchSize) || batchSize < 1) {
    throw new MnemeError("INVALID_REQUEST", `verify: batchSize must be an integer >= 1, got ${String(batchSize)}`);
  }
  let previous = opts.from?.hash ?? GENESIS_HASH;
  let lastGood = opts.from?.position ?? 0;
  let checked = 0;
  const until = opts.untilPosition ?? Infinity;
  const removals = new ChainRemovals();
  const done = (complete: boolean): ChainVerification => ({
    ok: true,
    checked,
    head: { position: lastGood, hash: previous },
    complete,
    removals: removals.summary(),
  });
  for await (const page of repo.readChain({ batchSize, afterPosition: lastGood })) {
    for (const row of page) {
      if (row.position > until) return done(true);
      if (row.position <= lastGood) {
        return broken(checked, row.position, lastGood, `position ${row.position} is out of order (after ${lastGood})`);
      }
      if (row.hash === null) {
        return broken(
          checked,
          row.position,
          lastGood,
          `position ${row.position} has no hash (the store's chain was not built: open it with this release)`,
        );
      }
      const expected = chainHash(previous, row);
      if (isRemovedRow(row)) {
        if (expected === row.hash) {
          // Chained as it is stored (a copy of a store with tombstones, whose target hashed the rows it got): covered as any event.
          removals.rechained(row);
        } else {
          // Hollowed in place, its bytes gone: it must link to what is before it; the next event's hash covers its stored hash.
          const refused = removals.tombstone(row, previous);
          if (refused !== undefined) return broken(checked, row.position, lastGood, refused);
        }
        previous = row.hash;
        lastGood = row.position;
        checked++;
        continue;
      }
      if (expected !== row.hash) {
        return broken(
          checked,
          row.position,
          lastGood,
          `the hash stored at position ${row.position} does not follow from its event and the chain up to position ${lastGood}`,
        );
      }
      if (isRemovalRecordRow(row)) {
        const refused = removals.record(row);
        if (refused !== undefined) return broken(checked, row.position, lastGood, refused);
      }
      previous = expected;
      lastGood = row.position;
      checked++;
    }
    opts.onProgress?.(checked, lastGood);
    if (opts.signal?.aborted === true) return done(false);
  }
  // The whole store read: every run's tombstones need the removal record that the run appended first.
  if (opts.untilPosition === undefined) {
    const missing = removals.unconfirmed();
    if (missing !== undefined) return broken(checked, missing.position, lastGood, missing.reason);
  }
  return done(true);
}

function broken(checked: number, position: number, lastGoodPosition: number, reason: string): ChainVerification {
  return { ok: false, checked, position, lastGoodPosition, reason };
}
