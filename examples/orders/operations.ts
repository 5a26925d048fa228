/**
 * An operator's tools for the orders example, over the Runtime domain: the
 * payment timeouts waiting to fire, cancelling one, and retrying the charges
 * that gave up. The lists need `authorized`; the actions are for
 * administrators (only the authorizer grants them).
 */
import type { Facade, RequestContext } from "mneme";
import type { DeadLetterEntry, ScheduledCommandEntry } from "mneme/reactions";
import { CancelScheduledCommand, ControlDeadLetter, ListDeadLetters, ListScheduledCommands } from "mneme/runtime";

/** The payment timeouts that have not fired, due first. */
export async function pendingTimeouts(facade: Facade, reqCtx: RequestContext): Promise<ScheduledCommandEntry[]> {
  const scheduled = await facade.query(ListScheduledCommands, { eventHandlerName: "Fulfilment" }, { reqCtx });
  return scheduled.filter((s) => s.name === "CancelOrder");
}

/** Cancels one scheduled command (NOT_FOUND when it fired or was cancelled already). */
export async function cancelTimeout(facade: Facade, reqCtx: RequestContext, commandUuid: string): Promise<ScheduledCommandEntry> {
  const { result } = await facade.dispatch(CancelScheduledCommand, { commandUuid }, { reqCtx });
  return result!;
}

/** Makes every dead charge pending again (its attempts start over); returns them. */
export async function retryDeadCharges(facade: Facade, reqCtx: RequestContext): Promise<DeadLetterEntry[]> {
  // Every tenant's (allTenants: system administrators, as the retry itself).
  const dead = await facade.query(ListDeadLetters, { eventHandlerName: "PaymentGateway", allTenants: true }, { reqCtx });
  for (const letter of dead) await facade.dispatch(ControlDeadLetter, { action: "retry", id: letter.id }, { reqCtx });
  return dead;
}
