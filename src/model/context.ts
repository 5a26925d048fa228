import type { AggregateType, EventType, Evolver, QueryType } from "./tokens.js";
import type { FacadeHandle } from "./facade-handle.js";
import type { EventHandler } from "./event-handler.js";
import type { ReadmodelRef } from "./readmodel-handle.js";
import type { Event, RequestContext } from "./types.js";

/** An aggregate's state folded from its events, and its version (0: it does not exist). */
export interface LoadedAggregate<S> {
  state: S;
  version: number;
}

/** Options of `ctx.aggregates.load`. */
export interface AggregateLoadOptions {
  /**
   * In a command (default true): the version loaded is checked when the
   * command's events are appended, on every instance: if the aggregate moved
   * meanwhile, the command fails with CONFLICT and writes nothing, whether or
   * not it appends to that aggregate. `false` for a read that decides nothing
   * (a name for a message, say); an aggregate the command appends to is
   * checked at the version loaded all the same. Queries never check.
   */
  readonly check?: boolean;
}

/** Loads aggregates by folding their events with `evolve`. */
export interface AggregateLoader {
  load<S>(aggregate: AggregateType<S>, aggregateUuid: string, opts?: AggregateLoadOptions): Promise<LoadedAggregate<S>>;
}

/**
 * A readmodel that can hand out a view limited to one tenant. `ctx.readmodel`
 * in a command or query handler returns `forTenant(ctx.tenantUuid)` of such a
 * readmodel, so the obvious code reads only the caller's tenant.
 */
export interface TenantScopable<V = unknown> {
  forTenant(tenantUuid: string): V;
}

/** What `ctx.readmodel` gives for a readmodel type: its tenant view, if it has one. */
export type TenantView<T> = T extends TenantScopable<infer V> ? V : T;

/** True when `h` offers `forTenant`. */
export function isTenantScopable(h: unknown): h is TenantScopable {
  return typeof h === "object" && h !== null && typeof (h as { forTenant?: unknown }).forTenant === "function";
}

/** What command and query handlers both receive. */
export interface MessageContext {
  readonly reqCtx: RequestContext;
  /** The effective tenant: `reqCtx.targetTenantUuid ?? reqCtx.senderTenantUuid ?? ""`. */
  readonly tenantUuid: string;
  /**
   * Loads an aggregate. In a command, every aggregate loaded (unless
   * `{ check: false }`) is checked at the append: if any moved after it was
   * loaded, here or on another instance, the command fails with CONFLICT and
   * writes nothing. (The first aggregate loaded is also locked in-process, so
   * commands of one instance on it wait for each other instead of
   * conflicting.) A tenant-scoped aggregate of another tenant than
   * `tenantUuid` is NOT_FOUND.
   * @example
   * const policy = await ctx.aggregates.load(Policy, p.policyUuid);            // checked: a freeze meanwhile is CONFLICT
   * const owner = await ctx.aggregates.load(Owner, p.ownerUuid, { check: false }); // only read for a message
   */
  readonly aggregates: AggregateLoader;
  /** Runs a query without a permission check (the caller was checked already). */
  query<P, R>(type: QueryType<P, R>, payload: P): Promise<R>;
  /** The facade the handler runs in, as handlers may use it (see FacadeHandle). */
  readonly facade: FacadeHandle;
  /**
   * A registered readmodel as this tenant sees it, named as `facade.readmodel`
   * takes it (its handle, the object itself, or its name; with `type`, checked
   * with instanceof): a ProjectionReadmodel comes as a view of `tenantUuid`'s
   * models only (history included). UNKNOWN_EVENT_HANDLER when not registered.
   * @example
   * const todo = await ctx.readmodel(todos).getModel(p.todoUuid); // undefined for another tenant's todo
   */
  readmodel<T extends EventHandler = EventHandler>(ref: ReadmodelRef<T>, type?: abstract new (...args: any[]) => T): TenantView<T>;
}

/**
 * One item of a query over events: events of one of `types` (any type when
 * absent) that carry every tag of `tags`. An item names types, tags or both.
 */
export interface EventQueryItem {
  readonly types?: readonly EventType<any>[];
  readonly tags?: readonly string[];
}

/** A query over the events of the command's tenant: an event matches when it matches any item. */
export interface EventQuery {
  readonly items: readonly EventQueryItem[];
}

/** Options of `ctx.events.read` and `fold`. */
export interface EventQueryOptions {
  /**
   * Default true: the command's append is refused with CONFLICT (nothing
   * written) if an event matching the query was appended after `position`,
   * on any instance. `false` for a read that decides nothing.
   */
  readonly check?: boolean;
}

/** What `ctx.events.read` returns: the matching events in position order, and the position they are complete up to. */
export interface EventQueryRead {
  readonly events: Event[];
  /** At least the last event's position; the store's head when read (so a later match is caught). */
  readonly position: number;
}

/** How `ctx.events.fold` folds the matches: `initialState` and `evolve` as in `Domain.aggregate`. */
export interface EventQueryFold<S> {
  readonly initialState: () => S;
  /** Evolvers keyed by event path (`Domain.Name`) or name; events without one leave the state as it is. */
  readonly evolve: Readonly<Record<string, Evolver<S>>>;
}

/** What `ctx.events.fold` returns: the decision state and the position it was read at. */
export interface FoldedEvents<S> {
  readonly state: S;
  readonly position: number;
}

/**
 * `ctx.events` of a command handler: decisions over events chosen by tags
 * and types rather than by aggregate (dynamic consistency boundaries, see
 * docs/dcb.md). Every read (unless `{ check: false }`) makes the command's
 * append conditional, as `ctx.aggregates.load` does.
 * @example
 * const { state: seats } = await ctx.events.fold(
 *   { items: [{ types: [StudentSubscribed, StudentUnsubscribed], tags: [`course:${p.courseId}`] }] },
 *   { initialState: () => 0, evolve: { StudentSubscribed: (n) => n + 1, StudentUnsubscribed: (n) => n - 1 } },
 * );
 */
export interface EventQueries {
  read(query: EventQuery, opts?: EventQueryOptions): Promise<EventQueryRead>;
  fold<S>(query: EventQuery, fold: EventQueryFold<S>, opts?: EventQueryOptions): Promise<FoldedEvents<S>>;
}

/** What a command handler receives. */
export interface CommandContext extends MessageContext {
  readonly commandUuid: string;
  /** Reads and guards the tenant's events by query (see {@link EventQueries}). */
  readonly events: EventQueries;
}

/** What a query handler receives. */
export interface QueryContext extends MessageContext {
  readonly queryUuid: string;
}
