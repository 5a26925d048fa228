import type { Event, RequestContext } from "./types.js";
import type { ReadmodelRef } from "./readmodel-handle.js";

export interface DispatchOptions {
  reqCtx?: RequestContext;
  /**
   * Resolve only after every running event handler has applied the command's events. A handler
   * in standby here (another instance holds its processing lock) is waited for until the
   * holder's checkpoint passes the events (at most `delivery.standbyWaitMs`), so a query made
   * on this instance next sees them.
   */
  waitToFinish?: boolean;
  /**
   * The command's uuid, for idempotency: a command already recorded as
   * succeeded under it is not run again; its recorded outcome comes back
   * (`replayed: true`). Omitted: a fresh uuid v7.
   */
  commandUuid?: string;
  /**
   * The payload as mneme keeps it elsewhere already, with personal values
   * sealed (a process manager's outbox entry): the command's record keeps
   * these envelopes as they are, so values sealed there stay sealed in the
   * record too, besides the fields the command type declares. Its envelopes
   * must open to `payload`, which the handler gets. For in-process callers
   * (the HTTP adapter never sets it).
   */
  storedPayload?: unknown;
}

export interface HandlerError {
  eventHandlerName: string;
  error: Error;
}

export interface DispatchResult<R = unknown> {
  commandUuid: string;
  events: Event[];
  /**
   * With waitToFinish: handlers that failed on this command's events, and handlers
   * of these events in standby here (another instance holds their processing lock)
   * whose holder had not applied them within `delivery.standbyWaitMs` (error
   * INVALID_STATE, `details[0]`: `{ state: "standby", checkpoint, position, waitedMs }`).
   */
  handlerErrors: HandlerError[];
  /** What the handler returned besides events, if anything (e.g. a session key). Never stored, so a replay has none. */
  result?: R;
  /** True when the commandUuid was recorded as succeeded already: nothing ran, `events` are the recorded ones. */
  replayed?: true;
}

export interface QueryOptions {
  reqCtx?: RequestContext;
  queryUuid?: string;
}

/** A reference to a command or query by name (e.g. from HTTP). */
export interface MessageRef {
  domain: string;
  name: string;
}

/** A command as `FacadeHandle.dispatch` takes it: its CommandType, or a MessageRef. */
export interface CommandRef<P = unknown, R = unknown> extends MessageRef {
  readonly kind?: "command";
  readonly __payload?: P;
  readonly __result?: R;
}

/** A query as `FacadeHandle.query` takes it: its QueryType, or a MessageRef. */
export interface QueryRef<P = unknown, R = unknown> extends MessageRef {
  readonly kind?: "query";
  readonly __payload?: P;
  readonly __result?: R;
}

/** The reading side of the event store, as handlers may use it (every EventRepository has it). */
export interface EventReader {
  loadAggregate(aggregateUuid: string, opts?: { fromVersion?: number }): Promise<Event[]>;
  loadAggregates(aggregateUuids: readonly string[]): Promise<Map<string, Event[]>>;
  headPosition(): Promise<number>;
}

/**
 * The facade as command and query handlers (`ctx.facade`) and permission
 * functions (`ctx.facade`) see it: dispatch, query, registered readmodels and
 * lookups in the permission registry. The Facade implements it; it is also an
 * identity, so state kept per facade can be keyed by it (a WeakMap).
 * Declared here, in the model, so that nothing below the composition root
 * (src/app) needs the Facade class.
 */
export interface FacadeHandle {
  readonly appName: string;
  dispatch<P, R = unknown>(type: CommandRef<P, R>, payload: P, opts?: DispatchOptions): Promise<DispatchResult<R>>;
  query<P, R>(type: QueryRef<P, R>, payload: P, opts?: QueryOptions): Promise<R>;
  /**
   * A registered event handler or readmodel, unscoped: by its handle, the
   * object itself, or its name; with `type`, checked with instanceof (and
   * typed by it). UNKNOWN_EVENT_HANDLER when there is none (or it is of
   * another class). By a name without `type`, `T` is the caller's word.
   */
  readmodel<T extends { readonly name: string } = { readonly name: string }>(
    ref: ReadmodelRef<T>,
    type?: abstract new (...args: any[]) => T,
  ): T;
  /** Reads of the facade's event store (its EventRepository). */
  readonly eventRepository: EventReader;
  readonly permissions: {
    has(domain: string, type: string): boolean;
    list(filter?: { domain?: string; type?: string }): readonly { readonly domain: string; readonly type: string }[];
  };
}
