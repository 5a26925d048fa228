import { MnemeError } from "../model/errors.js";
import { type ChainVerification, verifyEventChain } from "../store/event-chain.js";
import { withArchivedEvents } from "./archived-endpoint.js";
import { openEndpoint, type StoreLocation } from "./copy-store.js";
import { COPY_TABLES } from "./copy-tables.js";

/** Options of {@link verifyStore}. */
export interface VerifyStoreOptions {
  /** Events per page read. Default 5000. */
  readonly pageSize?: number;
  /** Told after each page with the events checked so far, the last position checked and the events the store holds. */
  readonly onProgress?: (checked: number, position: number, total: number) => void;
  /** Where the store's archive of old events is now, when it was moved after `mneme store archive`. Default: where the store recorded it. */
  readonly archiveDirectory?: string;
}

/** What {@link verifyStore} found: the store in words and the chain's verification. */
export type VerifyStoreReport = ChainVerification & { readonly store: string; readonly seconds: number };

/**
 * Verifies the hash chain of a store's events (see src/store/event-chain.ts)
 * without starting an app: a SQLite file or a Postgres schema (a
 * `postgres://` URL naming it with `?schema=`, default public), read in one
 * snapshot, page by page, recomputing every hash from the first event. The
 * library behind `mneme store verify`.
 * @example
 * const report = await verifyStore("postgres://u@db:5432/app?schema=app");
 * if (!report.ok) console.error(`broken at position ${report.position}`);
 */
export async function verifyStore(location: StoreLocation, opts: VerifyStoreOptions = {}): Promise<VerifyStoreReport> {
  const started = performance.now();
  // Archived events are verified in their files, in the one chain with the database's (see archived-endpoint.ts).
  const side = withArchivedEvents(
    openEndpoint(location, "source"),
    opts.archiveDirectory === undefined ? {} : { archiveDirectory: opts.archiveDirectory },
  );
  try {
    await side.beginSnapshot();
    if (!(await side.hasTable("events")))
      throw new MnemeError("NOT_FOUND", `store verify: ${side.description} holds no mneme events table`);
    const total = await side.count(COPY_TABLES[0]!);
    const result = await verifyEventChain(side, {
      batchSize: opts.pageSize ?? 5000,
      onProgress: (checked, position) => opts.onProgress?.(checked, position, total),
    });
    return { ...result, store: side.description, seconds: (performance.now() - started) / 1000 };
  } finally {
    await side.close();
  }
}
