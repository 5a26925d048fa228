import { MnemeError } from "../model/errors.js";
import { nowNs } from "../model/clock.js";
import type { SystemEventKind } from "../model/system-event-kind.js";

/** The system-event kinds that report a failure, and so are kept in the failure history. */
export const FAILURE_KINDS: ReadonlySet<SystemEventKind> = new Set<SystemEventKind>(["CommandFailed", "HandlerFailed", "RestoreFailed"]);

/**
 * One failure this instance saw: the system event that reported it, without
 * the stream's id (kept whether or not the stream runs). `at` is ns since the
 * epoch; `tenantUuid` the tenant of the command or event it came from.
 */
export interface FailureEntry {
  kind: SystemEventKind;
  at: number;
  tenantUuid?: string;
  data: Record<string, unknown>;
}

/** `Runtime.ListFailures`'s filter: the effective tenant's entries unless `allTenants` (system administrators). */
export interface FailureListFilter {
  /** Only failures of this handler (`data.eventHandlerName`). */
  eventHandlerName?: string;
  /** Only failures of this tenant. */
  tenantUuid?: string;
  /** Every tenant's failures (the Runtime domain's query; system administrators only). */
  allTenants?: boolean;
  /** At most this many, newest first (1..1000; default 100). */
  limit?: number;
}

/**
 * The latest failures of this instance (failed commands, handler failures,
 * failed restores), newest first, in a bounded ring: what the dashboard's
 * "Recent failures" shows when a page opens, instead of only what its live
 * stream saw since. Recorded whether or not the system-event producer runs.
 */
export class FailureHistory {
  readonly #ring: (FailureEntry | undefined)[];
  #next = 0;
  #size = 0;

  constructor(capacity = 200) {
    if (!Number.isInteger(capacity) || capacity < 1)
      throw new MnemeError("INVALID_REQUEST", "failure history capacity must be a positive integer");
    this.#ring = new Array<FailureEntry | undefined>(capacity);
  }

  add(kind: SystemEventKind, data: Record<string, unknown>, tenantUuid?: string): void {
    this.#ring[this.#next] = tenantUuid ? { kind, at: nowNs(), tenantUuid, data } : { kind, at: nowNs(), data };
    this.#next = (this.#next + 1) % this.#ring.length;
    if (this.#size < this.#ring.length) this.#size++;
  }

  /** Newest first; a `tenantUuid` keeps only that tenant's entries. */
  list(filter: FailureListFilter = {}): FailureEntry[] {
    const limit = filter.limit ?? 100;
    if (!Number.isInteger(limit) || limit < 1 || limit > 1000)
      throw new MnemeError("INVALID_REQUEST", "limit must be an integer in 1..1000");
    if (filter.tenantUuid !== undefined && typeof filter.tenantUuid !== "string")
      throw new MnemeError("INVALID_REQUEST", "tenantUuid must be a string");
    const out: FailureEntry[] = [];
    for (let i = 1; i <= this.#size && out.length < limit; i++) {
      const e = this.#ring[(this.#next - i + this.#ring.length) % this.#ring.length]!;
      if (filter.tenantUuid !== undefined && e.tenantUuid !== filter.tenantUuid) continue;
      if (filter.eventHandlerName !== undefined && e.data.eventHandlerName !== filter.eventHandlerName) continue;
      out.push(e);
    }
    return out;
  }
}
