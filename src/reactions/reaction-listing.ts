/**
 * The Runtime's view of every process manager's and reactor's outbox:
 * scheduled commands (list, cancel) and dead letters (list, retry, discard),
 * over the event handlers of one facade.
 */
import { MnemeError } from "../model/errors.js";
import type { OutboxEntry } from "./outbox-entry.js";
import { isOutboxHandler, type OutboxHandler } from "./outbox.js";

/** A scheduled command as the Runtime lists it. */
export interface ScheduledCommandEntry {
  commandUuid: string;
  eventHandlerName: string;
  domain: string;
  name: string;
  payload: unknown;
  /** When it fires (or is tried next), ms since the epoch. */
  dueAt: number;
  attempts: number;
  lastError?: string;
  tenantUuid: string;
  correlationId: string;
  /** The event whose step scheduled it. */
  eventUuid: string;
}

/** A dead letter (an entry that failed its last attempt) as the Runtime lists it. */
export interface DeadLetterEntry {
  id: string;
  eventHandlerName: string;
  kind: "command" | "effect";
  /** kind "command": `Domain.Name` of the command; "effect": the event's path. */
  target: string;
  attempts: number;
  lastError?: string;
  lastAttemptAt?: number;
  tenantUuid: string;
  correlationId: string;
  eventUuid: string;
  eventPath: string;
  scheduled: boolean;
}

/** What `Runtime.ControlDeadLetter` takes: `retry` makes the entry pending again, `discard` deletes it. */
export interface DeadLetterControl {
  action: "retry" | "discard";
  id: string;
  /** The handler whose entry it is; without it every process manager and reactor is searched. */
  eventHandlerName?: string;
}

/**
 * A filter of the Runtime's lists. Through the Runtime domain the list is
 * scoped to the caller's effective tenant: `tenantUuid` may only name it, and
 * `allTenants: true` (system administrators) lists every tenant's entries.
 * A direct call on the Runtime is unscoped unless `tenantUuid` is given.
 */
export interface ReactionListFilter {
  eventHandlerName?: string;
  /** Only entries of this tenant (the tenant of the event or command they came from). */
  tenantUuid?: string;
  /** Every tenant's entries (the Runtime domain's queries; system administrators only). */
  allTenants?: boolean;
  limit?: number;
}

type Handlers = ReadonlyMap<string, object>;

function outboxHandlers(handlers: Handlers, name: string | undefined): OutboxHandler[] {
  if (name !== undefined) {
    const h = handlers.get(name);
    if (h === undefined || !isOutboxHandler(h))
      throw new MnemeError("UNKNOWN_EVENT_HANDLER", `no process manager or reactor named ${name} is registered`);
    return [h];
  }
  return [...handlers.values()].filter(isOutboxHandler);
}

function limitOf(limit: number | undefined): number {
  if (limit === undefined) return 1000;
  if (!Number.isInteger(limit) || limit < 1 || limit > 1000) throw new MnemeError("INVALID_REQUEST", "limit must be an integer in 1..1000");
  return limit;
}

function scheduledEntry(e: OutboxEntry): ScheduledCommandEntry {
  const out: ScheduledCommandEntry = {
    commandUuid: e.id,
    eventHandlerName: e.eventHandlerName,
    domain: e.command?.domain ?? "",
    name: e.command?.name ?? "",
    payload: e.command?.payload,
    dueAt: e.dueAt,
    attempts: e.attempts,
    tenantUuid: e.tenantUuid,
    correlationId: e.correlationId,
    eventUuid: e.eventUuid,
  };
  if (e.lastError !== undefined) out.lastError = e.lastError;
  return out;
}

function deadEntry(e: OutboxEntry): DeadLetterEntry {
  const out: DeadLetterEntry = {
    id: e.id,
    eventHandlerName: e.eventHandlerName,
    kind: e.kind,
    target: e.command === undefined ? e.eventPath : `${e.command.domain}.${e.command.name}`,
    attempts: e.attempts,
    tenantUuid: e.tenantUuid,
    correlationId: e.correlationId,
    eventUuid: e.eventUuid,
    eventPath: e.eventPath,
    scheduled: e.scheduled,
  };
  if (e.lastError !== undefined) out.lastError = e.lastError;
  if (e.lastAttemptAt !== undefined) out.lastAttemptAt = e.lastAttemptAt;
  return out;
}

async function collect<T>(
  handlers: Handlers,
  filter: ReactionListFilter,
  list: (h: OutboxHandler, limit: number, tenant: { tenantUuid?: string }) => Promise<OutboxEntry[]>,
  map: (e: OutboxEntry) => T,
): Promise<T[]> {
  const limit = limitOf(filter.limit);
  const out: { at: number; id: string; v: T }[] = [];
  if (filter.tenantUuid !== undefined && typeof filter.tenantUuid !== "string")
    throw new MnemeError("INVALID_REQUEST", "tenantUuid must be a string");
  // Filtered by the store, so another tenant's entries never take the places of the limit.
  const tenant = filter.tenantUuid === undefined ? {} : { tenantUuid: filter.tenantUuid };
  for (const h of outboxHandlers(handlers, filter.eventHandlerName)) {
    for (const e of await list(h, limit, tenant)) {
      if (filter.tenantUuid !== undefined && e.tenantUuid !== filter.tenantUuid) continue;
      out.push({ at: e.dueAt, id: e.id, v: map(e) });
    }
  }
  out.sort((a, b) => a.at - b.at || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  return out.slice(0, limit).map((x) => x.v);
}

/** Pending scheduled commands of every process manager (or one), due first. */
export function listScheduledCommands(handlers: Handlers, filter: ReactionListFilter = {}): Promise<ScheduledCommandEntry[]> {
  return collect(
    handlers,
    filter,
    (h, limit, tenant) => h.outbox.list({ status: "pending", scheduled: true, limit, ...tenant }),
    scheduledEntry,
  );
}

/** Cancels a pending scheduled command; NOT_FOUND when no handler has it pending. Returns what was cancelled. */
export async function cancelScheduledCommand(
  handlers: Handlers,
  req: { commandUuid: string; eventHandlerName?: string },
): Promise<ScheduledCommandEntry> {
  if (typeof req.commandUuid !== "string" || req.commandUuid === "") throw new MnemeError("INVALID_REQUEST", "commandUuid is required");
  for (const h of outboxHandlers(handlers, req.eventHandlerName)) {
    const e = await h.outbox.get(req.commandUuid);
    if (e !== undefined && e.scheduled && e.status === "pending") return scheduledEntry(await h.outbox.cancelScheduled(req.commandUuid));
  }
  throw new MnemeError("NOT_FOUND", `no pending scheduled command ${req.commandUuid}`);
}

/** Dead letters of every process manager and reactor (or one), oldest due first. */
export function listDeadLetters(handlers: Handlers, filter: ReactionListFilter = {}): Promise<DeadLetterEntry[]> {
  return collect(handlers, filter, (h, limit, tenant) => h.outbox.list({ status: "dead", limit, ...tenant }), deadEntry);
}

/** Retries or discards a dead letter; INVALID_ACTION for another action, NOT_FOUND when no handler has it dead. */
export async function controlDeadLetter(handlers: Handlers, req: DeadLetterControl): Promise<DeadLetterEntry> {
  const action = (req as { action?: unknown }).action;
  if (action !== "retry" && action !== "discard")
    throw new MnemeError("INVALID_ACTION", `unknown action ${JSON.stringify(action)}: use "retry" or "discard"`);
  if (typeof req.id !== "string" || req.id === "") throw new MnemeError("INVALID_REQUEST", "id is required");
  for (const h of outboxHandlers(handlers, req.eventHandlerName)) {
    const e = await h.outbox.get(req.id);
    if (e === undefined || e.status !== "dead") continue;
    return deadEntry(action === "retry" ? await h.outbox.retryDead(req.id) : await h.outbox.discardDead(req.id));
  }
  throw new MnemeError("NOT_FOUND", `no dead letter ${req.id}`);
}
