import { isMnemeError, MnemeError } from "../model/errors.js";
import { assertHandlerName } from "./readmodel-validation.js";

/** The detail message that marks a write refused by the fence of a handler's processing lock. */
const LOCK_LOST = "lock lost";

/**
 * The error of a write refused by a fence: another instance took the
 * processing lock of `handler` since this one took it, so nothing was written.
 * Backends with fencing tokens throw it from `checkFencingToken`.
 */
export function lockLostError(handler: string, why = "another instance took its processing lock"): MnemeError {
  return new MnemeError("INVALID_STATE", `the processing lock of ${handler} is no longer this instance's (${why}): nothing was written`, {
    details: [{ message: LOCK_LOST, eventHandlerName: handler }],
  });
}

/** True when `e` is a write refused because the processing lock was lost ({@link lockLostError}, SQLite's lease check). */
export function isLockLostError(e: unknown): boolean {
  if (!isMnemeError(e, "INVALID_STATE")) return false;
  const m = e.details?.[0]?.message;
  return m === LOCK_LOST || m === "lease lost";
}

/**
 * checkFencingToken's bookkeeping, the same in every backend: records that
 * the running transaction (its `fences`, undefined outside one: INVALID_REQUEST)
 * must still find `token` on `handler`'s lock when it commits.
 */
export function noteFence(fences: Map<string, number> | undefined, handler: string, token: number): void {
  assertHandlerName(handler);
  if (fences === undefined) throw new MnemeError("INVALID_REQUEST", "checkFencingToken: call it inside a transaction");
  fences.set(handler, token);
}
