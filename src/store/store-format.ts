import { MnemeError } from "../model/errors.js";

/**
 * The store format: the version of what this release writes into a database
 * (a SQLite file, a Postgres schema), kept in the store itself beside the
 * lowest format whose code may still write it. A release refuses a store that
 * names a lowest writer above its own format (STORE_TOO_NEW); it upgrades an
 * older one in place when it opens it. See docs/upgrading.md.
 *
 * | format | release | what it added that an older release would misread |
 * |---|---|---|
 * | 1 | 0.1.0 (commit 44da8f1) | (the first; keeps no format record) |
 * | 2 | 0.2.0-pre (commit 8256c9f) | event versions; personal fields of events stored encrypted (`{"$enc": ...}`) |
 * | 3 | 0.2.0 | the format record; readmodel documents carry their tenant; claims, fencing tokens, snapshot digests |
 * | 4 | 0.4.0 | the hash chain of events (a `hash` per event; see src/store/event-chain.ts) |
 *
 * Format 4 still admits writers of format 2: 0.2.0 reads everything this
 * release writes (it ignores the hash) and may run beside it. On Postgres its
 * appends are chained by the events table's trigger; on SQLite the next append
 * of this release chains them (see docs/upgrading.md).
 */
export const STORE_FORMAT = 4;

/** This release, as a store's format record names the release that last upgraded it (package.json's version). */
export const STORE_RELEASE = "0.4.0";

/**
 * The lowest format whose code may write a store this release upgraded: an
 * instance of 0.2.0 or 0.2.0-pre may still append beside this release during a rolling
 * deploy (its readmodel writes are refused by the database, see
 * docs/upgrading.md); 0.1.0 may not write at all.
 */
export const LOWEST_WRITER_FORMAT = 2;

/** The release that introduced each format. */
const RELEASES: Readonly<Record<number, string>> = Object.freeze({
  1: "0.1.0 (44da8f1)",
  2: "0.2.0-pre (8256c9f)",
  3: "0.2.0",
  4: "0.4.0",
});

/** The format record a store keeps. */
export interface StoreFormatRecord {
  /** The format the store is in (the highest format of the releases that upgraded it). */
  readonly format: number;
  /** The lowest format whose code may write the store: code of a lower format is refused. */
  readonly lowestWriterFormat: number;
  /** The release that last upgraded the store (wrote this record). */
  readonly upgradedBy: string;
  /** When it did, in ms since the epoch. */
  readonly upgradedAt: number;
}

/** A store that keeps a format record: the record as its `init()` left it (undefined before init). */
export interface StoreFormatted {
  storeFormat(): StoreFormatRecord | undefined;
}

/** The release that introduced a format ("a release of format 7" for one this release does not know). */
export function releaseOfFormat(format: number): string {
  return RELEASES[format] ?? `a release of format ${format}`;
}

/** True when `store` offers the optional {@link StoreFormatted} method. */
export function isStoreFormatted(store: unknown): store is StoreFormatted {
  return typeof store === "object" && store !== null && typeof (store as Partial<StoreFormatted>).storeFormat === "function";
}

/** Reads a stored record's columns, refusing values that are not a format record. */
export function storeFormatRecord(
  format: unknown,
  lowestWriterFormat: unknown,
  upgradedBy: unknown,
  upgradedAt: unknown,
): StoreFormatRecord {
  const f = Number(format);
  const w = Number(lowestWriterFormat);
  const at = Number(upgradedAt);
  if (!Number.isInteger(f) || f < 1 || !Number.isInteger(w) || w < 1 || w > f || typeof upgradedBy !== "string" || !Number.isFinite(at)) {
    throw new MnemeError(
      "STORE_ERROR",
      `the store's format record is damaged (format ${String(format)}, lowest writer ${String(lowestWriterFormat)}); see docs/upgrading.md`,
    );
  }
  return { format: f, lowestWriterFormat: w, upgradedBy, upgradedAt: at };
}

/**
 * Refuses a store this code may not write: STORE_TOO_NEW when the store's
 * lowest writer format is above `ownFormat` (the running release's format).
 * A store of a newer format that still admits this format passes: that is a
 * rolling deploy of the newer release, which raises the lowest writer only by
 * its documented step once every instance runs it.
 */
export function checkStoreFormat(stored: StoreFormatRecord | undefined, where: string, ownFormat: number = STORE_FORMAT): void {
  if (stored === undefined || stored.lowestWriterFormat <= ownFormat) return;
  const own = ownFormat === STORE_FORMAT ? STORE_RELEASE : releaseOfFormat(ownFormat);
  throw new MnemeError(
    "STORE_TOO_NEW",
    `${where} is in store format ${stored.format}, written by mneme ${stored.upgradedBy}, which admits writers of format ` +
      `${stored.lowestWriterFormat} (mneme ${releaseOfFormat(stored.lowestWriterFormat)}) and later; this is mneme ` +
      `${own} (format ${ownFormat}), which would misread it. Run mneme ${stored.upgradedBy} or later ` +
      "on this store (a downgrade is not possible in place: restore a backup taken before the upgrade); see docs/upgrading.md, Downgrades",
  );
}

/**
 * The releases a rolling deploy of this release may start from in
 * compatibility mode (`rollingFrom`, docs/upgrading.md): their instances keep
 * writing beside this release until the rolling upgrade is finished. By the
 * format each writes.
 */
export const ROLLING_FROM = Object.freeze({ "0.1.0": 1 } as const);

/** A release a rolling deploy of this release may start from in compatibility mode. */
export type RollingFrom = keyof typeof ROLLING_FROM;

/** Checks a `rollingFrom` option: undefined or a release of {@link ROLLING_FROM}; anything else is INVALID_REQUEST. */
export function checkRollingFrom(value: unknown, where: string): RollingFrom | undefined {
  if (value === undefined || (typeof value === "string" && Object.hasOwn(ROLLING_FROM, value))) return value as RollingFrom | undefined;
  throw new MnemeError(
    "INVALID_REQUEST",
    `${where}: rollingFrom must be one of ${Object.keys(ROLLING_FROM).join(", ")} (a rolling deploy from a release whose ` +
      `instances keep writing until the upgrade is finished), got ${JSON.stringify(value)}`,
  );
}

/** True while a store admits writers of formats this release's strict mode refuses: a rolling deploy in compatibility mode. */
export function admitsOldWriters(record: StoreFormatRecord | undefined): boolean {
  return record !== undefined && record.lowestWriterFormat < LOWEST_WRITER_FORMAT;
}

/** The release whose writers a store admits in compatibility mode (undefined when it admits none beyond the strict ones). */
export function rollingFromOf(record: StoreFormatRecord | undefined): RollingFrom | undefined {
  if (!admitsOldWriters(record)) return undefined;
  const found = Object.entries(ROLLING_FROM).find(([, format]) => format >= (record as StoreFormatRecord).lowestWriterFormat);
  return found?.[0] as RollingFrom | undefined;
}

/**
 * What an `init()` does to the lowest writer beside upgrading: keep it
 * (`undefined`), enter compatibility mode for a release's writers when the
 * store has no record yet (`{ admit: format }`), or end compatibility mode
 * (`"finish"`: the lowest writer goes back to {@link LOWEST_WRITER_FORMAT}).
 */
export type LowestWriterChange = { readonly admit: number } | "finish" | undefined;

/**
 * The record to write after this release upgraded a store in place, or
 * undefined when the stored one stays (already this format or newer, and no
 * change of its lowest writer). Compatibility mode is entered only on a store
 * without a record (one written by 0.1.0 or 0.2.0-pre, or a new one): once a
 * store refused old writers, or a rolling upgrade was finished, it never
 * admits them again.
 */
export function upgradedStoreFormat(
  stored: StoreFormatRecord | undefined,
  nowMs: number,
  change?: LowestWriterChange,
): StoreFormatRecord | undefined {
  if (stored !== undefined && stored.format >= STORE_FORMAT) {
    if (change !== "finish" || !admitsOldWriters(stored)) return undefined;
    return { ...stored, lowestWriterFormat: LOWEST_WRITER_FORMAT, upgradedBy: STORE_RELEASE, upgradedAt: nowMs };
  }
  const admit = typeof change === "object" && stored === undefined ? change.admit : undefined;
  return {
    format: STORE_FORMAT,
    lowestWriterFormat: admit ?? Math.max(stored?.lowestWriterFormat ?? 1, LOWEST_WRITER_FORMAT),
    upgradedBy: STORE_RELEASE,
    upgradedAt: nowMs,
  };
}
