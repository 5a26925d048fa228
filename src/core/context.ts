import type { AggregateType, QueryType } from "./tokens.js";
import type { Facade } from "./facade.js";
import type { EventHandler } from "../readmodel/event-handler.js";
import type { RequestContext } from "./types.js";

/** An aggregate's state folded from its events, and its version (0: it does not exist). */
export interface LoadedAggregate<S> {
  state: S;
  version: number;
}

/** Loads aggregates by folding their events with `evolve`. */
export interface AggregateLoader {
  load<S>(aggregate: AggregateType<S>, aggregateUuid: string): Promise<LoadedAggregate<S>>;
}

/** What command and query handlers both receive. */
export interface MessageContext {
  readonly reqCtx: RequestContext;
  /**
   * Loads an aggregate. In a command, the first aggregate loaded is locked
   * in-process until the command's events are appended, and the version
   * loaded becomes the expected version of its events.
   */
  readonly aggregates: AggregateLoader;
  /** Runs a query without a permission check (the caller was checked already). */
  query<P, R>(type: QueryType<P, R>, payload: P): Promise<R>;
  readonly facade: Facade;
  /** The event handler (readmodel) registered under `name`. UNKNOWN_EVENT_HANDLER otherwise. */
  readmodel<T extends EventHandler>(name: string): T;
}

/** What a command handler receives. */
export interface CommandContext extends MessageContext {
  readonly commandUuid: string;
}

/** What a query handler receives. */
export interface QueryContext extends MessageContext {
  readonly queryUuid: string;
}
