/**
 * The contexts handlers get: a command's (its aggregate loader with locks
 * and read checks, queries, the tenant's readmodels) and a query's loader.
 */
import type { AggregateLoader, CommandContext, LoadedAggregate, MessageContext } from "../model/context.js";
import type { FacadeHandle } from "../model/facade-handle.js";
import type { KeyedLock } from "../model/keyed-lock.js";
import type { AggregateType, QueryType } from "../model/tokens.js";
import type { RequestContext } from "../model/types.js";
import { CommandAggregates } from "./command-aggregates.js";
import { CommandEvents, type TaggedEventsHost } from "./command-events.js";
import { tenantOf } from "./tenancy.js";

/** Folds an aggregate as the tenant may see it (NOT_FOUND for another tenant's). */
export type TenantLoad = <S>(aggregate: AggregateType<S>, aggregateUuid: string, tenantUuid: string) => Promise<LoadedAggregate<S>>;

/** What every command context of one facade shares. */
export interface CommandContextHost {
  readonly facade: FacadeHandle;
  readonly locks: KeyedLock;
  readonly load: TenantLoad;
  runQuery<P, R>(type: QueryType<P, R>, payload: P, reqCtx: RequestContext): Promise<R>;
  /** `ctx.readmodel` for a tenant. */
  readmodels(tenantUuid: string): MessageContext["readmodel"];
  /** What `ctx.events` reads by. */
  readonly taggedEvents: TaggedEventsHost;
}

/**
 * The context a command handler gets. Its loader and functions are made on first
 * use (most handlers use few of them), and stay the same objects afterwards, so
 * `const { aggregates, query } = ctx` works.
 */
export class DispatchContext implements CommandContext {
  #loader: CommandAggregates | undefined;
  #events: CommandEvents | undefined;
  #query: CommandContext["query"] | undefined;
  #readmodel: CommandContext["readmodel"] | undefined;
  readonly tenantUuid: string;

  constructor(
    readonly host: CommandContextHost,
    readonly commandUuid: string,
    readonly reqCtx: RequestContext,
  ) {
    this.tenantUuid = tenantOf(reqCtx);
  }

  get facade(): FacadeHandle {
    return this.host.facade;
  }

  get aggregates(): CommandAggregates {
    return (this.#loader ??= new CommandAggregates(
      (aggregate, aggregateUuid) => this.host.load(aggregate, aggregateUuid, this.tenantUuid),
      this.host.locks,
      this.reqCtx,
    ));
  }

  get events(): CommandEvents {
    return (this.#events ??= new CommandEvents(this.host.taggedEvents, this.tenantUuid));
  }

  /** The query reader, if the handler used one. */
  get queries(): CommandEvents | undefined {
    return this.#events;
  }

  get query(): CommandContext["query"] {
    return (this.#query ??= (type, payload) => this.host.runQuery(type, payload, this.reqCtx));
  }

  get readmodel(): CommandContext["readmodel"] {
    return (this.#readmodel ??= this.host.readmodels(this.tenantUuid));
  }

  /** The loader, if the handler used one. */
  get loader(): CommandAggregates | undefined {
    return this.#loader;
  }

  /** Releases the aggregate locks the handler took. */
  release(): void {
    this.#loader?.releaseAll();
  }
}

/** A query handler's loader: no locks, the tenant's aggregates only. */
export class QueryAggregates implements AggregateLoader {
  readonly #load: TenantLoad;
  constructor(
    load: TenantLoad,
    readonly tenantUuid: string,
  ) {
    this.#load = load;
  }
  load<S>(aggregate: AggregateType<S>, aggregateUuid: string): Promise<LoadedAggregate<S>> {
    return this.#load(aggregate, aggregateUuid, this.tenantUuid);
  }
}
