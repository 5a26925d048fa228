import type { AggregateType, QueryType } from "./tokens.js";
import type { FacadeHandle } from "./facade-handle.js";
import type { EventHandler } from "./event-handler.js";
import type { ReadmodelRef } from "./readmodel-handle.js";
import type { RequestContext } from "./types.js";

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

/** What a command handler receives. */
export interface CommandContext extends MessageContext {
  readonly commandUuid: string;
}

/** What a query handler receives. */
export interface QueryContext extends MessageContext {
  readonly queryUuid: string;
}
