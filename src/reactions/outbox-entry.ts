/**
 * What a process manager or reactor has still to do, kept in its readmodel
 * backend beside its checkpoint: a command to dispatch (now or at a given
 * time) or an external effect to run. Written in the same transaction as the
 * handler's checkpoint, so an event's reactions are recorded exactly when the
 * event counts as handled.
 */
import { MnemeError } from "../model/errors.js";
import type { ChainRequestContext } from "./reaction-ids.js";

/** `pending`: waiting for its time or its next attempt; `dead`: gave up after the last attempt (the dead-letter list). */
export type OutboxEntryStatus = "pending" | "dead";

/** A command a process manager dispatches (at once or, scheduled, at `dueAt`). */
export interface OutboxCommand {
  readonly domain: string;
  readonly name: string;
  readonly payload: unknown;
  /** Carries the chain: `correlationId` of the event, `causationId` = the event's uuid. */
  readonly reqCtx: ChainRequestContext;
}

/** One entry of a handler's outbox. Its key (`id`) is the commandUuid (commands) or the dedupe key (effects). */
export interface OutboxEntry {
  readonly id: string;
  readonly kind: "command" | "effect";
  readonly eventHandlerName: string;
  status: OutboxEntryStatus;
  /** Made by `ctx.schedule` (listed and cancellable as a scheduled command). */
  readonly scheduled: boolean;
  /** When it is due next, ms since the epoch: the scheduled time, then the next attempt's. */
  dueAt: number;
  /**
   * The order of delivery: `dueAt`, then the event's position, then the
   * entry's index among the event's reactions, as one string of fixed-width
   * digits (so every backend sorts it alike). Kept in step with `dueAt`.
   */
  dueOrder: string;
  /** The entry's index among its event's reactions. */
  readonly index: number;
  /** Failed attempts so far. */
  attempts: number;
  lastError?: string;
  /** ms since the epoch. */
  lastAttemptAt?: number;
  /** ms since the epoch. */
  readonly createdAt: number;
  /** The event it reacts to. */
  readonly eventUuid: string;
  readonly eventPath: string;
  readonly position: number;
  readonly tenantUuid: string;
  readonly correlationId: string;
  /** A process manager's process (its state's key): its entries are delivered in order. */
  readonly processId?: string;
  /** kind "command". */
  readonly command?: OutboxCommand;
}

/**
 * Retries of a failed dispatch or effect: after the n-th failure the next try
 * is due `min(maxDelayMs, initialDelayMs * 2^(n-1))` later; after
 * `maxAttempts` failures the entry is dead (kept, listed, retried or discarded
 * through the Runtime).
 */
export interface RetryPolicy {
  /** Default 5. */
  readonly maxAttempts: number;
  /** Default 100 ms. */
  readonly initialDelayMs: number;
  /** Default 60,000 ms. */
  readonly maxDelayMs: number;
}

export const DEFAULT_RETRY: RetryPolicy = Object.freeze({ maxAttempts: 5, initialDelayMs: 100, maxDelayMs: 60_000 });

/** The policy with `given` merged over the defaults; INVALID_REQUEST on a bad value. */
export function retryPolicy(given: Partial<RetryPolicy> | undefined): RetryPolicy {
  const p = { ...DEFAULT_RETRY, ...given };
  if (!Number.isInteger(p.maxAttempts) || p.maxAttempts < 1 || p.maxAttempts > 1000)
    throw new MnemeError("INVALID_REQUEST", `retry.maxAttempts must be an integer in 1..1000, got ${String(p.maxAttempts)}`);
  for (const k of ["initialDelayMs", "maxDelayMs"] as const) {
    if (!Number.isFinite(p[k]) || p[k] < 0)
      throw new MnemeError("INVALID_REQUEST", `retry.${k} must be a number >= 0, got ${String(p[k])}`);
  }
  if (p.maxDelayMs < p.initialDelayMs) throw new MnemeError("INVALID_REQUEST", "retry.maxDelayMs must be >= retry.initialDelayMs");
  return Object.freeze(p);
}

/** The wait before the next attempt after `failures` failed ones (>= 1). */
export function backoffMs(policy: RetryPolicy, failures: number): number {
  return Math.min(policy.maxDelayMs, policy.initialDelayMs * 2 ** Math.min(failures - 1, 52));
}

/**
 * Failures that no retry can mend (the command does not exist, its payload or
 * request is invalid, the sender may not send it): the entry is dead at once.
 */
export const PERMANENT_FAILURES: ReadonlySet<string> = new Set([
  "UNKNOWN_COMMAND",
  "VALIDATION_FAILED",
  "INVALID_REQUEST",
  "PERMISSION_DENIED",
  "UNAUTHENTICATED",
]);

/** A time given to `ctx.schedule`: a Date or ms since the epoch. INVALID_REQUEST otherwise. */
export function dueTimeOf(at: Date | number): number {
  const ms = at instanceof Date ? at.getTime() : at;
  if (typeof ms !== "number" || !Number.isFinite(ms) || ms < 0 || ms > 8.64e15)
    throw new MnemeError("INVALID_REQUEST", `schedule: "at" must be a valid Date or ms since the epoch, got ${String(at)}`);
  return Math.floor(ms);
}

/** The `dueOrder` of an entry due at `dueAt` (ms) for the event at `position`, `index`-th of its reactions. */
export function dueOrderOf(dueAt: number, position: number, index: number): string {
  return `${String(dueAt).padStart(16, "0")}.${String(position).padStart(16, "0")}.${String(index).padStart(6, "0")}`;
}
