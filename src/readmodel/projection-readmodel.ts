import { MnemeError } from "../model/errors.js";
import type { AggregateType, AllEventsType, EventType } from "../model/tokens.js";
import type { HandlerContext } from "../model/event-handler.js";
import type { Event } from "../model/types.js";
import type { ReadmodelCollection } from "../store/readmodel-store-backend.js";
import { BaseReadmodel, type ReadmodelFacade, type ReadmodelOption } from "./base-readmodel.js";
import { BaseEventHandler, runnerOf } from "./base-event-handler.js";
import { type HistoryEventModel, toHistoryEvent } from "./history.js";
import { servedPrefix } from "./readmodel-generations.js";

/** A served model of one aggregate. `historyEvents` only when asked for. */
export interface ProjectionModel<M> {
  tenantUuid: string;
  aggregateUuid: string;
  model: M;
  version: number;
  /** ns since the epoch: the first event's createdAt. */
  createdAt: number;
  /** ns: the last event's createdAt. */
  updatedAt: number;
  historyEvents?: HistoryEventModel[];
}

/** Ordering of model lists (a whitelist). */
export type ProjectionOrderBy = "createdAt" | "updatedAt" | "version" | "aggregateUuid";
const ORDER_BY: readonly ProjectionOrderBy[] = ["createdAt", "updatedAt", "version", "aggregateUuid"];

export interface ProjectionListOptions {
  tenantUuid?: string;
  /** From 1. */
  page?: number;
  /** Default 50, max 1000. */
  pageSize?: number;
  orderBy?: ProjectionOrderBy;
  descending?: boolean;
  includeHistory?: boolean;
}

export interface ProjectionList<M> {
  items: ProjectionModel<M>[];
  total: number;
  page: number;
  pageSize: number;
}

/** Options of `getModel`. */
export interface ProjectionGetOptions {
  includeHistory?: boolean;
  /** Only a model of this tenant: another tenant's model is undefined, as if absent. */
  tenantUuid?: string;
}

/**
 * A ProjectionReadmodel as one tenant sees it (`forTenant`, and what
 * `ctx.readmodel` gives a command or query handler): models, lists, counts
 * and history of that tenant only. For a global aggregate it is unscoped.
 */
export interface ProjectionView<M> {
  /** The tenant it is limited to; undefined when unscoped (a global aggregate). */
  readonly tenantUuid: string | undefined;
  getModel(aggregateUuid: string, opts?: { includeHistory?: boolean }): Promise<ProjectionModel<M> | undefined>;
  /** A `tenantUuid` in `opts` narrows further: another tenant's gives an empty list. */
  getModelList(opts?: ProjectionListOptions): Promise<ProjectionList<M>>;
}

export interface ProjectionConfig<S, M> {
  aggregate: AggregateType<S>;
  /** Default `<Aggregate>Projection`. */
  name?: string;
  /** The model served from the state. Default: the state itself. */
  toModel?: (state: S) => M;
}

/** The stored document: the state, not the served model, so toModel may change without a restore. */
interface StoredModel<S> {
  tenantUuid: string;
  aggregateUuid: string;
  state: S;
  version: number;
  createdAt: number;
  updatedAt: number;
}

export const DEFAULT_PAGE_SIZE = 50;
export const MAX_PAGE_SIZE = 1000;

/**
 * One model per aggregate, kept current by applying each event's `evolve`
 * step once (never re-reading the aggregate's stream), with history on demand.
 * @example
 * const todos = new ProjectionReadmodel(facade, { aggregate: TodoAggregate });
 * facade.registerReadmodel(todos);
 * await todos.getModel(todoUuid, { includeHistory: true });
 */
export class ProjectionReadmodel<S, M = S> extends BaseReadmodel {
  readonly aggregate: AggregateType<S>;
  readonly #toModel: (state: S) => M;
  readonly #models: () => ReadmodelCollection<StoredModel<S>>;
  #batch = new Map<string, StoredModel<S> | undefined>();
  /** False once a handler function was added from outside (see addDomainEventHandler). */
  #ownHandlersOnly = true;
  #dirty = new Set<string>();

  constructor(facade: ReadmodelFacade, config: ProjectionConfig<S, M>, ...options: ReadmodelOption[]) {
    super(facade, ...options);
    if (config.aggregate?.kind !== "aggregate")
      throw new MnemeError("INVALID_EVENT_HANDLER", "ProjectionReadmodel needs an aggregate type");
    this.aggregate = config.aggregate;
    this.domain = config.aggregate.domain;
    this.name = config.name ?? `${config.aggregate.name}Projection`;
    this.#toModel = config.toModel ?? ((s: S) => s as unknown as M);
    let coll: ReadmodelCollection<StoredModel<S>> | undefined;
    this.#models = () => (coll ??= this.collection<StoredModel<S>>("models"));
    // A ProjectionReadmodel as it comes (not a subclass, which may override the batch hooks or add parts),
    // with only its own handler functions: its batches write through the transaction handed to them.
    runnerOf(this).configureBoundBatch({
      eligible: () => this.#ownHandlersOnly && Object.getPrototypeOf(this) === ProjectionReadmodel.prototype,
      beforeBatch: (events, tx) => this.#prefetch(events, tx.collection(this.#servedModels())),
      afterBatch: (tx) => this.#flush(tx.collection(this.#servedModels())),
    });
    // Registered with a facade: handle every event the aggregate evolves, as the facade's domains define them.
    runnerOf(this).onAttach((host) => {
      if (this.getDomainEvents().length > 0) return;
      for (const key of Object.keys(this.aggregate.evolve)) {
        const path = key.includes(".") ? key : `${this.aggregate.domain}.${key}`;
        const type = host.eventType?.(path);
        if (type === undefined) {
          throw new MnemeError(
            "INVALID_EVENT_HANDLER",
            `${this.name}: the aggregate ${this.aggregate.domain}.${this.aggregate.name} evolves ${path}, which no registered domain defines`,
          );
        }
        // Registered as a plain handler function: #apply writes nothing (afterBatch does, unscoped), so the
        // tenant BaseReadmodel would set for each event's writes is of no use to it.
        BaseEventHandler.prototype.addDomainEventHandler.call(this, type, (_ctx, event) => this.#apply(event));
      }
    });
  }

  /**
   * Registers a handler function as BaseReadmodel does. A projection given
   * one of these is applied as any readmodel is (its batches told by async
   * context), since the function may write to collections.
   */
  override addDomainEventHandler<P>(
    type: EventType<P> | AllEventsType,
    fn: (ctx: HandlerContext, event: Event<P>, domainEvt: P) => Promise<void> | void,
  ): void {
    this.#ownHandlersOnly = false;
    super.addDomainEventHandler(type, fn);
  }

  /** The backend collection of the served generation's models. */
  #servedModels(): string {
    return `${servedPrefix(this.name)}models`;
  }

  protected override beforeBatch(events: readonly Event[]): Promise<void> {
    return this.#prefetch(events, this.#models());
  }

  async #prefetch(events: readonly Event[], models: ReadmodelCollection<StoredModel<S>>): Promise<void> {
    const missing: string[] = [];
    const seen = new Set<string>();
    for (const e of events) {
      if (seen.has(e.aggregateUuid) || this.#batch.has(e.aggregateUuid) || this.handlersFor(e).length === 0) continue;
      seen.add(e.aggregateUuid);
      missing.push(e.aggregateUuid);
    }
    if (missing.length === 0) return;
    const found = await models.getMany(missing);
    for (const uuid of missing) this.#batch.set(uuid, found.get(uuid));
  }

  #apply(event: Event): void {
    const current = this.#batch.get(event.aggregateUuid);
    const state = this.aggregate.apply(current === undefined ? this.aggregate.initialState() : current.state, event);
    this.#batch.set(
      event.aggregateUuid,
      current === undefined
        ? {
            tenantUuid: event.tenantUuid,
            aggregateUuid: event.aggregateUuid,
            state,
            version: event.version,
            createdAt: event.createdAt,
            updatedAt: event.createdAt,
          }
        : {
            tenantUuid: current.tenantUuid || event.tenantUuid,
            aggregateUuid: event.aggregateUuid,
            state,
            version: event.version,
            createdAt: current.createdAt,
            updatedAt: event.createdAt,
          },
    );
    this.#dirty.add(event.aggregateUuid);
  }

  protected override afterBatch(): Promise<void> {
    return this.#flush(this.#models());
  }

  async #flush(models: ReadmodelCollection<StoredModel<S>>): Promise<void> {
    if (this.#dirty.size > 0) {
      const entries: [string, StoredModel<S>][] = [];
      for (const uuid of this.#dirty) entries.push([uuid, this.#batch.get(uuid)!]);
      await models.putMany(entries);
    }
    this.#dirty.clear();
    // keep the cache bounded: it only serves the batch
    this.#batch = new Map();
  }

  protected override discardBatch(): void {
    this.#batch = new Map();
    this.#dirty.clear();
  }

  /**
   * The model of one aggregate, or undefined. History only with
   * `includeHistory: true`, read from the event store now. Unscoped unless
   * `tenantUuid` is given (trusted code); handlers get a scoped view through `ctx.readmodel`.
   */
  async getModel(aggregateUuid: string, opts: ProjectionGetOptions = {}): Promise<ProjectionModel<M> | undefined> {
    if (typeof aggregateUuid !== "string" || aggregateUuid === "")
      throw new MnemeError("INVALID_REQUEST", "aggregateUuid must be a non-empty string");
    const tenant = opts.tenantUuid;
    if (tenant !== undefined && typeof tenant !== "string") throw new MnemeError("INVALID_REQUEST", "tenantUuid must be a string");
    const doc = await this.#models().get(aggregateUuid);
    if (doc === undefined || (tenant !== undefined && doc.tenantUuid !== tenant)) return undefined;
    const item = this.#serve(doc);
    if (opts.includeHistory === true) item.historyEvents = historyOf(await this.eventRepository.loadAggregate(aggregateUuid), tenant);
    return item;
  }

  /**
   * This projection as `tenantUuid` sees it: only that tenant's models, in
   * lists and counts too, and only that tenant's events in history. A
   * projection of a global aggregate is not limited.
   * @example
   * const mine = todos.forTenant(tenantUuid);
   * await mine.getModel(todoUuid);   // undefined when the todo belongs to another tenant
   */
  forTenant(tenantUuid: string): ProjectionView<M> {
    if (typeof tenantUuid !== "string") throw new MnemeError("INVALID_REQUEST", "forTenant: tenantUuid must be a string");
    if (this.aggregate.tenancy === "global") {
      return {
        tenantUuid: undefined,
        getModel: (uuid, opts = {}) => this.getModel(uuid, { includeHistory: opts.includeHistory === true }),
        getModelList: (opts = {}) => this.getModelList(opts),
      };
    }
    return {
      tenantUuid,
      getModel: (uuid, opts = {}) => this.getModel(uuid, { includeHistory: opts.includeHistory === true, tenantUuid }),
      getModelList: async (opts = {}) => {
        const list = await this.getModelList({ ...opts, tenantUuid });
        // Asked for another tenant than its own: nothing (after the same validation of page options).
        return opts.tenantUuid === undefined || opts.tenantUuid === tenantUuid
          ? list
          : { items: [], total: 0, page: list.page, pageSize: list.pageSize };
      },
    };
  }

  /** A page of models; with `includeHistory: true` the histories of the page are loaded in one repository call. */
  async getModelList(opts: ProjectionListOptions = {}): Promise<ProjectionList<M>> {
    const page = opts.page ?? 1;
    const pageSize = opts.pageSize ?? DEFAULT_PAGE_SIZE;
    const orderBy = opts.orderBy ?? "createdAt";
    if (!Number.isInteger(page) || page < 1)
      throw new MnemeError("INVALID_REQUEST", `page must be an integer >= 1 (got ${String(opts.page)})`);
    if (!Number.isInteger(pageSize) || pageSize < 1 || pageSize > MAX_PAGE_SIZE) {
      throw new MnemeError("INVALID_REQUEST", `pageSize must be an integer in 1..${MAX_PAGE_SIZE} (got ${String(opts.pageSize)})`);
    }
    if (!ORDER_BY.includes(orderBy))
      throw new MnemeError("INVALID_REQUEST", `orderBy must be one of ${ORDER_BY.join(", ")} (got ${String(orderBy)})`);
    if (opts.tenantUuid !== undefined && typeof opts.tenantUuid !== "string")
      throw new MnemeError("INVALID_REQUEST", "tenantUuid must be a string");
    const where = opts.tenantUuid === undefined ? undefined : { tenantUuid: opts.tenantUuid };
    const [docs, total] = await Promise.all([
      this.#models().list({
        offset: (page - 1) * pageSize,
        limit: pageSize,
        orderBy,
        descending: opts.descending === true,
        ...(where ? { where } : {}),
      }),
      this.#models().count(where),
    ]);
    const items = docs.map((d) => this.#serve(d));
    if (opts.includeHistory === true && items.length > 0) {
      const histories = await this.eventRepository.loadAggregates(items.map((i) => i.aggregateUuid));
      for (const item of items) item.historyEvents = historyOf(histories.get(item.aggregateUuid) ?? [], opts.tenantUuid);
    }
    return { items, total, page, pageSize };
  }

  #serve(doc: StoredModel<S>): ProjectionModel<M> {
    return {
      tenantUuid: doc.tenantUuid,
      aggregateUuid: doc.aggregateUuid,
      model: this.#toModel(doc.state),
      version: doc.version,
      createdAt: doc.createdAt,
      updatedAt: doc.updatedAt,
    };
  }
}

/** History events; limited to one tenant's events when `tenantUuid` is given (streams written before the tenant rule may mix tenants). */
function historyOf(events: readonly Event[], tenantUuid: string | undefined): HistoryEventModel[] {
  const out: HistoryEventModel[] = [];
  for (const e of events) if (tenantUuid === undefined || e.tenantUuid === tenantUuid) out.push(toHistoryEvent(e));
  return out;
}
