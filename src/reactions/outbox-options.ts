/** The options of an outbox and of the process managers, reactors and publishers made with one. */
import { MnemeError } from "../model/errors.js";
import type { ReadmodelStoreBackend } from "../store/readmodel-store-backend.js";
import { type ReadmodelOption, withReadmodelStoreBackend } from "../readmodel/base-readmodel.js";
import type { OutboxEntry, OutboxEntryStatus, RetryPolicy } from "./outbox-entry.js";

/** What every process manager and reactor is configured with. */
export interface OutboxHandlerOptions {
  /** The event handler's name: unique per facade, and the seed of its deterministic ids (never rename a live one). */
  readonly name: string;
  readonly domain: string;
  /** Retries of failed dispatches or effects before an entry is dead (see RetryPolicy). */
  readonly retry?: Partial<RetryPolicy>;
  /** How often the outbox is looked at besides the wake-up after each batch and at the next due time. Default 1000 ms. */
  readonly pollMs?: number;
  /**
   * How many entries the worker delivers at once. Entries of one process (one
   * correlation id for a reactor) are always delivered one after another, in
   * due order. Default 1.
   */
  readonly concurrency?: number;
  /** The clock of due times, ms since the epoch. Default `Date.now` (tests pass a fake one). */
  readonly clock?: () => number;
  /** Where the state, the outbox and the checkpoint live. Default: the facade's readmodelStoreBackend. */
  readonly readmodelStoreBackend?: ReadmodelStoreBackend;
}

/** How an outbox delivers, besides its handler's delivery function. */
export interface OutboxDelivery {
  /**
   * The entries of one lane are delivered in position order whatever fails
   * (a publisher of integration events): a failed entry keeps its place and
   * holds the entries behind it until it is delivered or dead.
   */
  readonly ordered?: boolean;
  /**
   * Called with a page's due entries before they are delivered, so the handler
   * can read what they need in one go (a publisher reads their events). A
   * failure here fails no entry: each delivery then reads for itself.
   */
  readonly prepare?: (entries: readonly OutboxEntry[]) => Promise<void>;
}

/** A filter of `outbox.list`. */
export interface OutboxFilter {
  readonly status?: OutboxEntryStatus;
  /** true: only scheduled commands; false: only the others. */
  readonly scheduled?: boolean;
  /** Only entries of this tenant (the tenant of the event they came from). */
  readonly tenantUuid?: string;
  readonly offset?: number;
  /** Default 1000. */
  readonly limit?: number;
}

/**
 * Checks the options every process manager and reactor takes (INVALID_EVENT_HANDLER,
 * INVALID_REQUEST), and returns the readmodel options they give (its backend).
 */
export function reactionOptions(options: OutboxHandlerOptions): ReadmodelOption[] {
  if (typeof options?.name !== "string" || options.name.trim() === "" || /[~#:]/.test(options.name))
    throw new MnemeError(
      "INVALID_EVENT_HANDLER",
      `a reaction handler needs a non-empty name without "~", "#" or ":", got ${JSON.stringify(options?.name)}`,
    );
  if (typeof options.domain !== "string" || options.domain === "")
    throw new MnemeError("INVALID_EVENT_HANDLER", `reaction handler ${options.name} needs a domain`);
  const pollMs = options.pollMs ?? 1000;
  if (!Number.isFinite(pollMs) || pollMs < 1)
    throw new MnemeError("INVALID_REQUEST", `pollMs must be a number >= 1, got ${String(pollMs)}`);
  if (options.clock !== undefined && typeof options.clock !== "function")
    throw new MnemeError("INVALID_REQUEST", "clock must be a function");
  const concurrency = options.concurrency ?? 1;
  if (!Number.isInteger(concurrency) || concurrency < 1 || concurrency > 64)
    throw new MnemeError("INVALID_REQUEST", `concurrency must be an integer in 1..64, got ${String(concurrency)}`);
  return options.readmodelStoreBackend === undefined ? [] : [withReadmodelStoreBackend(options.readmodelStoreBackend)];
}
