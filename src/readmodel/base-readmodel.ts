import { MnemeError } from "../model/errors.js";
import type { EventRepository } from "../store/event-repository.js";
import { type CollectionIndex, indexesKey, normalizeIndexes } from "../store/readmodel-indexes.js";
import type { ReadmodelCollection, ReadmodelStoreBackend } from "../store/readmodel-store-backend.js";
import { BaseEventHandler, runnerOf } from "./base-event-handler.js";
import { type CollectionTenancy, currentPrefix, type DeclaredIndexes, GenerationalCollection } from "./readmodel-generations.js";
import { assertPartitionCount } from "./partition-routing.js";
import { assertSubjectErasure, type SubjectErasure, subjectEraser } from "./subject-erasure.js";
import { withEventTenant } from "./tenant-scope.js";
import { tenantView } from "./tenant-view.js";
import type { AllEventsType, EventType } from "../model/tokens.js";
import { SubjectForgotten } from "../model/privacy-events.js";
import type { Event } from "../model/types.js";
import type { HandlerContext, MetricProvider, RestoreReport, StateRestorer } from "../model/event-handler.js";

/** Options of a readmodel's collection. */
export interface CollectionOptions {
  /**
   * `"tenant"` (the default): each document carries the tenant of the event
   * whose handler wrote it, and a tenant's view (`ctx.readmodel` in a handler,
   * `asTenant`) reads only its own. `"global"`: shared by every tenant.
   */
  readonly tenancy?: CollectionTenancy;
  /**
   * Indexes on top-level fields of the documents: a field (`"status"`) or a
   * compound (`["status", "placedAt"]`, which serves `where` on status with
   * `orderBy: "placedAt"`). SQLite and Postgres create them (led by the
   * tenant for a tenant-scoped collection) and reconcile them with this
   * declaration (created, dropped) on the collection's first use by this
   * process; `list` and `count` use them. Not unique. Omitted: the indexes
   * are left as they are; `[]`: every index of the collection is dropped.
   * See docs/readmodels.md, "Indexed collections".
   */
  readonly indexes?: readonly CollectionIndex[];
}

/** What a readmodel needs from the facade at construction. */
export interface ReadmodelFacade {
  readonly eventRepository: EventRepository;
  readonly readmodelStoreBackend: ReadmodelStoreBackend;
}

/** Configuration of a readmodel. */
export interface ReadmodelOptions {
  /** Where this readmodel's documents and checkpoint live. Default: the facade's readmodelStoreBackend. */
  readmodelStoreBackend?: ReadmodelStoreBackend;
  /** Events per replay page and transaction. */
  restoreBatchSize?: number;
  /** Live events buffered during a restoration before the store is read instead. */
  catchBufferLimit?: number;
  /** Applied as this many partitions, each with its own checkpoint and lock (see `withPartitions`). */
  partitions?: number;
}

export type ReadmodelOption = (options: ReadmodelOptions) => void;

/** Keeps this readmodel's documents and checkpoint in `backend`. */
export function withReadmodelStoreBackend(backend: ReadmodelStoreBackend): ReadmodelOption {
  return (o) => {
    o.readmodelStoreBackend = backend;
  };
}

/**
 * Applies the readmodel as `n` partitions (1..256): each event goes to the
 * partition of its aggregate (a stable hash of aggregateUuid, see
 * docs/readmodels.md), each partition has its own checkpoint and fenced lock,
 * so up to n instances apply the readmodel at once, each taking its fair
 * share; each event is applied once and each aggregate's events in order.
 * Queries read the shared documents as before. Changing n later needs a
 * restore from zero.
 * @example
 * class Orders extends BaseReadmodel {
 *   constructor(facade: Facade) { super(facade, withPartitions(4)); this.domain = "Shop"; this.name = "Orders"; }
 * }
 */
export function withPartitions(n: number): ReadmodelOption {
  assertPartitionCount(n);
  return (o) => {
    o.partitions = n;
  };
}

/**
 * Sets the replay batch size (events per page and per backend transaction).
 * A partitioned readmodel reads pages of this many events per partition (up
 * to 10,000), shared by its partitions, so each partition's transaction holds about this many.
 */
export function withRestoreBatchSize(size: number): ReadmodelOption {
  if (!Number.isInteger(size) || size < 1 || size > 100_000)
    throw new MnemeError("INVALID_REQUEST", "restoreBatchSize must be an integer in 1..100000");
  return (o) => {
    o.restoreBatchSize = size;
  };
}

/** Sets how many live events a restoration buffers before it reads the store instead. */
export function withCatchBufferLimit(limit: number): ReadmodelOption {
  if (!Number.isInteger(limit) || limit < 0) throw new MnemeError("INVALID_REQUEST", "catchBufferLimit must be a non-negative integer");
  return (o) => {
    o.catchBufferLimit = limit;
  };
}

/**
 * A queryable projection of domain state: an event handler that is also a
 * state restorer and a metric provider. Extend it, set `domain` and `name`,
 * and register handlers with `addDomainEventHandler`. Delivery, checkpoints,
 * restoration and its hand-off, locks, retries and metrics are the work of an
 * internal runner; `lastPosition`, `lastEventTimestamp`, `catchedEvents` and
 * `restorationState` are read-only views of its state.
 * @example
 * class TodoList extends BaseReadmodel {
 *   constructor(facade: Facade) {
 *     super(facade);
 *     this.domain = "Todo"; this.name = "TodoList";
 *     this.addDomainEventHandler(TodoCreated, async (_ctx, e, p) => this.collection("todos").put(e.aggregateUuid, p));
 *   }
 * }
 */
export abstract class BaseReadmodel extends BaseEventHandler implements StateRestorer, MetricProvider {
  eventRepository: EventRepository;
  readmodelStoreBackend: ReadmodelStoreBackend;
  options: ReadmodelOptions;

  constructor(facade: ReadmodelFacade, ...options: ReadmodelOption[]) {
    super();
    const o: ReadmodelOptions = {};
    for (const opt of options) opt(o);
    this.options = o;
    this.eventRepository = facade.eventRepository;
    this.readmodelStoreBackend = o.readmodelStoreBackend ?? facade.readmodelStoreBackend;
    runnerOf(this).configureRestorer({
      backend: () => this.readmodelStoreBackend,
      options: () => this.options,
      restoreState: (opts) => this.restoreState(undefined, opts),
    });
    if (o.partitions !== undefined) runnerOf(this).configurePartitions(o.partitions);
  }

  /**
   * Rebuilds state from the event repository: `fromZero` builds a new
   * generation of this readmodel's collections beside the served one and
   * switches to it when complete (blue-green), else it resumes from the
   * checkpoint. `done` resolves with a report; `cancel()` makes it reject
   * with RESTORE_CANCELLED. Override to reset your own structures, then call super.
   */
  restoreState(_ctx?: unknown, opts: { fromZero?: boolean; signal?: AbortSignal } = {}): { done: Promise<RestoreReport>; cancel(): void } {
    return runnerOf(this).startRestore(opts);
  }

  /**
   * Registers a handler function as BaseEventHandler does; what it writes to
   * this readmodel's tenant-scoped collections carries the event's tenant.
   */
  override addDomainEventHandler<P>(
    type: EventType<P> | AllEventsType,
    fn: (ctx: HandlerContext, event: Event<P>, domainEvt: P) => Promise<void> | void,
  ): void {
    if (typeof fn !== "function") {
      super.addDomainEventHandler(type, fn);
      return;
    }
    if (this.options.partitions !== undefined && (type as { path?: unknown }).path === SubjectForgotten.path)
      throw new MnemeError(
        "INVALID_EVENT_HANDLER",
        `readmodel ${this.name || this.constructor.name} is partitioned: a handler of ${SubjectForgotten.path} would run in one partition and write documents other partitions own; erase with eraseSubjects(collection, { where, keyOf, erase }) (see docs/privacy.md)`,
      );
    super.addDomainEventHandler(type, (ctx, event: Event<P>, p: P) => withEventTenant(event.tenantUuid, () => fn(ctx, event, p)));
  }

  /**
   * Erases a forgotten subject's copies in `collection` on
   * `Privacy.SubjectForgotten`: the documents `where(subject)` finds (in
   * every tenant) are written back as `erase` returns them (undefined:
   * deleted), under their keys, each keeping its tenant; on a partitioned
   * readmodel each partition erases the documents of its own aggregates
   * (`aggregateOf`, default the key), in order with its other events. See docs/privacy.md.
   * @example
   * this.eraseSubjects(this.#tickets, {
   *   where: (subject) => ({ customerUuid: subject }),
   *   keyOf: (t) => t.ticketUuid,
   *   erase: (t) => ({ ...t, customerName: "[erased]", customerEmail: "[erased]" }),
   * });
   */
  protected eraseSubjects<T>(collection: ReadmodelCollection<T>, erasure: SubjectErasure<T>): void {
    assertSubjectErasure(this.name || this.constructor.name, collection, erasure);
    const erase = subjectEraser(collection, erasure);
    this.addDomainEventHandlerInEveryPartition(SubjectForgotten, (ctx, event, p) =>
      withEventTenant(event.tenantUuid, () => erase(ctx, event, p)),
    );
  }

  /**
   * This readmodel as `tenantUuid` sees it: its methods read only that
   * tenant's documents of its tenant-scoped collections (global collections
   * are shared) and write with that tenant. What a query or command handler
   * gets from `ctx.readmodel`; trusted code calling the readmodel itself is
   * unscoped.
   * @example
   * const mine = facade.readmodel(openTodos).asTenant(tenantUuid);
   * await mine.count();   // only tenantUuid's todos
   */
  asTenant(tenantUuid: string): this {
    if (typeof tenantUuid !== "string") throw new MnemeError("INVALID_REQUEST", "asTenant: tenantUuid must be a string");
    return tenantView(this, tenantUuid);
  }

  /**
   * Documents of this readmodel, namespaced under its name: the backend's
   * collection `<name>:<collection>`. While a restore from zero builds the
   * next generation, its handlers reach that generation through the same
   * object and every other caller the served one (see docs/readmodels.md).
   * Documents belong to the tenant of the event whose handler wrote them
   * unless `{ tenancy: "global" }` (see CollectionOptions).
   */
  protected collection<T>(name: string, options: CollectionOptions = {}): ReadmodelCollection<T> {
    if (!this.name) throw new MnemeError("INVALID_EVENT_HANDLER", "set the readmodel's name before using its collections");
    const tenancy = options?.tenancy ?? "tenant";
    if (tenancy !== "tenant" && tenancy !== "global")
      throw new MnemeError("INVALID_REQUEST", `collection ${name}: tenancy must be "tenant" or "global" (got ${JSON.stringify(tenancy)})`);
    const indexes = this.#declareIndexes(name, tenancy, options?.indexes);
    // The backend is read per call: a subclass may set readmodelStoreBackend after super().
    return new GenerationalCollection<T>(() => this.readmodelStoreBackend, this.name, name, tenancy, indexes);
  }

  /** Collection name -> its declared indexes (normalised) and their key; a later call without `indexes` inherits them. */
  readonly #declaredIndexes = new Map<string, DeclaredIndexes & { key: string }>();

  /** The indexes of collection `name`: as declared now, or earlier; INVALID_REQUEST when they differ from an earlier declaration. */
  #declareIndexes(name: string, tenancy: CollectionTenancy, declared: unknown): DeclaredIndexes | undefined {
    const earlier = this.#declaredIndexes.get(name);
    if (declared === undefined) return earlier;
    const fields = normalizeIndexes(declared, `${this.name}:${name}`);
    const tenantFirst = tenancy === "tenant";
    const key = indexesKey(fields, tenantFirst);
    if (earlier !== undefined && earlier.key !== key)
      throw new MnemeError(
        "INVALID_REQUEST",
        `readmodel ${this.name}: collection ${name} is declared with other indexes (or tenancy) than before; declare it one way`,
      );
    const out = { fields, tenantFirst, key };
    this.#declaredIndexes.set(name, out);
    return out;
  }

  /** Clears only this readmodel's own collections (during a restore from zero: those of the generation being built). */
  protected override async resetState(): Promise<void> {
    const prefix = currentPrefix(this.name);
    for (const c of await this.readmodelStoreBackend.listCollections()) {
      if (c.startsWith(prefix)) await this.readmodelStoreBackend.collection(c).clear();
    }
  }
}
