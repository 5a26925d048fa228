import { MnemeError } from "../model/errors.js";
import { AllEvents, type AllEventsType, type EventType } from "../model/tokens.js";
import type { Event } from "../model/types.js";
import type {
  DomainEventHandler,
  EventHandler,
  EventHandlerMetrics,
  EventHandlerState,
  HandlerContext,
  IntegrationInfo,
  RestorationState,
} from "../model/event-handler.js";
import { HandlerRunner } from "./handler-runner.js";

export { DEFAULT_DELIVERY, HandlerFailure, type DeliveryOptions, type HandlerHost } from "./handler-runner.js";

/**
 * A part a handler is composed of (the outbox of a process manager or
 * reactor, for one): it takes part in the handler's batches, after the
 * handler's own hooks, and in its lifecycle. Added with `addPart`.
 */
export interface HandlerPart {
  /** Inside the batch's transaction, before its events are handled. */
  beforeBatch?(events: readonly Event[]): Promise<void>;
  /** Inside the batch's transaction, after its events were handled. */
  afterBatch?(): Promise<void>;
  /** The batch was rolled back. */
  discardBatch?(): void;
  /** The handler is about to go live: started, or restored. */
  starting?(): void;
  /** The handler is being stopped (before its delivery stops). */
  stopping?(): Promise<void>;
  /** A broker part (mneme/nats, mneme/amqp): what the Runtime lists of it. */
  describe?(): IntegrationInfo | undefined;
}

/** Reads a handler's private runner; set by BaseEventHandler's static block, the only code that can. */
let runnerField: (handler: object) => HandlerRunner | undefined;
/** Reads a handler's private list of parts, likewise. */
let partsField: (handler: object) => readonly HandlerPart[] | undefined;

/**
 * Base of every event handler: its map of handler functions, and a read-only
 * view of the runner that delivers to it (live delivery in position order,
 * exactly once, a persisted checkpoint, start/stop, failure isolation and
 * metrics). The runner's state is not writable from here or from a subclass.
 * BaseReadmodel adds restoration on top.
 */
export class BaseEventHandler implements EventHandler {
  /** Set by the author in the constructor. */
  domain = "";
  /** Set by the author in the constructor; unique per facade (the eventHandlerName). */
  name = "";

  readonly #runner: HandlerRunner;
  readonly #handlers = new Map<string, DomainEventHandler[]>();
  readonly #catchAll: DomainEventHandler[] = [];
  readonly #eventTypes = new Map<string, EventType>();
  readonly #parts: HandlerPart[] = [];

  static {
    runnerField = (handler) => (#runner in handler ? handler.#runner : undefined);
    partsField = (handler) => (#parts in handler ? handler.#parts : undefined);
  }

  constructor() {
    // Closures made here may call the protected hooks; the runner gets nothing else of the subclass.
    this.#runner = new HandlerRunner(this, {
      beforeBatch: (events) => (this.#parts.length === 0 ? this.beforeBatch(events) : this.#beforeBatch(events)),
      afterBatch: () => (this.#parts.length === 0 ? this.afterBatch() : this.#afterBatch()),
      discardBatch: () => {
        this.discardBatch();
        for (const p of this.#parts) p.discardBatch?.();
      },
      resetState: () => this.resetState(),
      starting: () => {
        for (const p of this.#parts) p.starting?.();
      },
      stopping: async () => {
        for (const p of this.#parts) await p.stopping?.();
      },
      describe: () => {
        for (const p of this.#parts) {
          const info = p.describe?.();
          if (info !== undefined) return info;
        }
        return undefined;
      },
    });
  }

  /** Composes this handler with `part`: it takes part in the batches and the lifecycle, after the handler's own hooks. */
  protected addPart(part: HandlerPart): void {
    this.#parts.push(part);
  }

  async #beforeBatch(events: readonly Event[]): Promise<void> {
    await this.beforeBatch(events);
    for (const p of this.#parts) await p.beforeBatch?.(events);
  }

  async #afterBatch(): Promise<void> {
    await this.afterBatch();
    for (const p of this.#parts) await p.afterBatch?.();
  }

  /** "running" | "stopped" | "failed" | "standby" */
  get state(): EventHandlerState {
    return this.#runner.state;
  }

  /** The position of the last event this handler has passed (applied, or skipped as not its own). */
  get lastPosition(): number {
    return this.#runner.lastPosition;
  }

  /** The createdAt (ns) of the event at `lastPosition`. */
  get lastEventTimestamp(): number {
    return this.#runner.lastEventTimestamp;
  }

  /** The live events caught by the current (or last) restoration (a copy). */
  get catchedEvents(): readonly Event[] {
    return this.#runner.catchedEvents;
  }

  /** "idle" | "restoring" | "restored" | "failed" | "cancelled" */
  get restorationState(): RestorationState {
    return this.#runner.restorationState;
  }

  /** Whether a restoration is running. */
  get restoring(): boolean {
    return this.#runner.restoring;
  }

  /**
   * Registers a handler function for one event type, or for every event with `AllEvents`.
   * @example
   * this.addDomainEventHandler(TodoCreated, async (ctx, event, todo) => { ... });
   */
  addDomainEventHandler<P>(
    type: EventType<P> | AllEventsType,
    fn: (ctx: HandlerContext, event: Event<P>, domainEvt: P) => Promise<void> | void,
  ): void {
    this.#add(type, fn, false);
  }

  /**
   * As addDomainEventHandler for one event type, delivered to every partition
   * of a partitioned handler (each with its `ctx.partition`), not only to the
   * partition of the event's aggregate: how a subject's erasure reaches the
   * documents each partition owns. On a handler without partitions, the same as addDomainEventHandler.
   */
  protected addDomainEventHandlerInEveryPartition<P>(
    type: EventType<P>,
    fn: (ctx: HandlerContext, event: Event<P>, domainEvt: P) => Promise<void> | void,
  ): void {
    if ((type as { kind?: string }).kind !== "event")
      throw new MnemeError("INVALID_EVENT_HANDLER", `${this.name || "handler"}: a handler of every partition takes an event type`);
    this.#add(type, fn, true);
  }

  #add<P>(
    type: EventType<P> | AllEventsType,
    fn: (ctx: HandlerContext, event: Event<P>, domainEvt: P) => Promise<void> | void,
    everyPartition: boolean,
  ): void {
    if (typeof fn !== "function")
      throw new MnemeError("INVALID_EVENT_HANDLER", `${this.name || "handler"}: a domain event handler must be a function`);
    if (type === AllEvents || (type as { kind?: string }).kind === "allEvents") {
      this.#catchAll.push({ eventPath: "*", domain: "*", eventName: "*", fn: fn as DomainEventHandler["fn"] });
    } else {
      const t = type as EventType<P>;
      if (t.kind !== "event")
        throw new MnemeError("INVALID_EVENT_HANDLER", `${this.name || "handler"}: addDomainEventHandler takes an event type or AllEvents`);
      const list = this.#handlers.get(t.path) ?? [];
      const h: DomainEventHandler = { eventPath: t.path, domain: t.domain, eventName: t.name, fn: fn as DomainEventHandler["fn"] };
      list.push(everyPartition ? { ...h, everyPartition } : h);
      this.#handlers.set(t.path, list);
      this.#eventTypes.set(t.path, t);
    }
    this.#runner.invalidate();
  }

  /** The handlers for an event (type or path "Domain.Name"): specific ones first, then catch-all ones. */
  getDomainEventHandlers(typeOrPath: EventType | AllEventsType | string): DomainEventHandler[] {
    const path = typeof typeOrPath === "string" ? typeOrPath : typeOrPath.path;
    if (path === "*") return [...this.#catchAll];
    return [...(this.#handlers.get(path) ?? []), ...this.#catchAll];
  }

  /** The unique event types this handler handles (AllEvents excluded). */
  getDomainEvents(): EventType[] {
    return [...this.#eventTypes.values()];
  }

  /** The handlers for a stored event, as delivery resolves them (cached per path). */
  protected handlersFor(event: Event): DomainEventHandler[] {
    return this.#runner.handlersFor(event);
  }

  /** Metrics of event processing. */
  getMetrics(): EventHandlerMetrics {
    return this.#runner.getMetrics();
  }

  /**
   * Resumes from the persisted checkpoint and goes live: catches up with the
   * store, then resolves. INVALID_STATE when running or restoring.
   */
  start(): Promise<void> {
    return this.#runner.start();
  }

  /**
   * Stops live delivery (a running restoration is cancelled) and persists the
   * checkpoint. INVALID_STATE when already stopped.
   */
  stop(): Promise<void> {
    return this.#runner.stop();
  }

  /** Resolves when live delivery has nothing queued. */
  idle(): Promise<void> {
    return this.#runner.idle();
  }

  /** Clears the handler's own state before a restoration from zero. BaseReadmodel clears its collections. */
  protected async resetState(): Promise<void> {
    /* a plain handler has no state of its own */
  }

  /** Inside the batch's transaction, before its events are handled (e.g. to prefetch documents). */
  protected async beforeBatch(_events: readonly Event[]): Promise<void> {
    /* nothing by default */
  }

  /** Inside the batch's transaction, after its events were handled (e.g. to flush a write-back cache). */
  protected async afterBatch(): Promise<void> {
    /* nothing by default */
  }

  /** The batch was rolled back: drop whatever beforeBatch/handlers buffered. */
  protected discardBatch(): void {
    /* nothing by default */
  }
}

/** Wraps a plain EventHandler object so it gets live delivery and a checkpoint. */
class EventHandlerAdapter extends BaseEventHandler {
  constructor(readonly inner: EventHandler) {
    super();
    this.domain = inner.domain;
    this.name = inner.name;
  }
  override getDomainEvents(): EventType[] {
    return this.inner.getDomainEvents();
  }
  override getDomainEventHandlers(typeOrPath: EventType | AllEventsType | string): DomainEventHandler[] {
    return this.inner.getDomainEventHandlers(typeOrPath);
  }
}

/**
 * @internal The runner of a BaseEventHandler (or BaseReadmodel): the handler holds it in a
 * private field. Not exported by the package: the facade and the Runtime use it; a subclass
 * has no way to it.
 */
export function runnerOf(handler: object): HandlerRunner {
  const runner = typeof handler === "object" && handler !== null ? runnerField(handler) : undefined;
  if (runner === undefined) throw new MnemeError("INVALID_EVENT_HANDLER", "not an event handler made by BaseEventHandler or BaseReadmodel");
  return runner;
}

/**
 * @internal Whether `value` is one of the parts `handler` was composed with
 * (`addPart`): a tenant's view of the handler gives a tenant's view of it too.
 */
export function isPartOf(handler: object, value: unknown): boolean {
  return typeof value === "object" && value !== null && partsField(handler)?.includes(value as HandlerPart) === true;
}

/**
 * @internal The BaseEventHandler that runs `handler`: the handler itself, or an
 * adapter around a plain EventHandler object.
 */
export function toBaseEventHandler(handler: EventHandler): BaseEventHandler {
  return handler instanceof BaseEventHandler ? handler : new EventHandlerAdapter(handler);
}
