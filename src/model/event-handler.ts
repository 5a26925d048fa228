import type { AllEventsType, EventType } from "./tokens.js";
import type { Event } from "./types.js";

/** What a domain-event handler function receives besides the event. */
export interface HandlerContext {
  readonly eventHandlerName: string;
  /** True while the event is replayed by a restoration, false on live delivery. */
  readonly restoring: boolean;
  /**
   * The partition applying the event, on a partitioned handler (`withPartitions`) outside a restore from zero
   * (which applies every partition at once); absent otherwise.
   */
  readonly partition?: { readonly index: number; readonly count: number };
}

/** A registered handler function with its metadata (the event's path and name). */
export interface DomainEventHandler<P = any> {
  /** `Domain.Name`, or "*" for AllEvents. */
  readonly eventPath: string;
  readonly domain: string;
  readonly eventName: string;
  readonly fn: (ctx: HandlerContext, event: Event<P>, domainEvt: P) => Promise<void> | void;
  /** Delivered to every partition of a partitioned handler, not only to its aggregate's (a subject's erasure). */
  readonly everyPartition?: boolean;
}

/** Anything that reacts to domain events. BaseEventHandler and BaseReadmodel implement it. */
export interface EventHandler {
  readonly domain: string;
  readonly name: string;
  getDomainEvents(): EventType[];
  getDomainEventHandlers(typeOrPath: EventType | AllEventsType | string): DomainEventHandler[];
}

/**
 * `standby`: the handler's backend allows one processing instance at a time
 * (Postgres advisory lock) and another instance holds it; this one takes over
 * when the lock frees.
 */
export type EventHandlerState = "running" | "stopped" | "failed" | "standby";
export type RestorationState = "idle" | "restoring" | "restored" | "failed" | "cancelled";

/** What a restoration reports when done. */
export interface RestoreReport {
  eventsReplayed: number;
  eventsCaught: number;
  durationMs: number;
  eventsPerSecond: number;
  afterPosition: number;
  toPosition: number;
}

export interface EventHandlerMetrics {
  eventsProcessed: number;
  eventsFailed: number;
  eventsCaught: number;
  meanHandleMicros: number;
  p99HandleMicros: number;
  /** Head position minus lastPosition. */
  lag: number;
  lastPosition: number;
  lastEventTimestamp: number;
  lastError?: string;
  /**
   * The tenant of the event whose handling gave `lastError`; absent when the
   * error came from no event (a lost connection or lock). The Runtime shows
   * `lastError` to a tenant's operator only when it is that tenant's.
   */
  lastErrorTenantUuid?: string;
  lastRestore?: RestoreReport;
}

/**
 * Where a restore from zero stands while it builds the next generation of a
 * readmodel beside the served one (blue-green): `rebuilding` replays the
 * store, `catching-up` applies the live events caught meanwhile, `switching`
 * replaces the served generation with the new one in one transaction.
 */
export type RebuildPhase = "rebuilding" | "catching-up" | "switching";

/** A restore from zero in progress, as the Runtime lists it (`restoration` of a handler's listing). */
export interface RestorationProgress {
  phase: RebuildPhase;
  /** The position the new generation has reached. */
  position: number;
  /** The head it catches up to before the switch: the head when it started, raised by events appended since. */
  targetHead: number;
  /** The position of the served generation: what queries read until the switch. */
  servedPosition: number;
  eventsReplayed: number;
  /** Replayed events per second since the rebuild started. */
  eventsPerSecond: number;
}

/** The record `runtime.listEventHandlers()` returns per handler. */
export interface EventHandlerInfo {
  eventHandlerName: string;
  domain: string;
  name: string;
  state: EventHandlerState;
  restorationState: RestorationState;
  domainEvents: string[];
  /** The last position processed; in standby, the holder's (the shared checkpoint). */
  lastPosition: number;
  lastEventTimestamp: number;
  hasMetrics: boolean;
  isStateRestorer: boolean;
  /**
   * The instance id (the facade's `instanceId`, in the Runtime's systemInfo)
   * that processes the handler: this instance while it runs it, the lock's
   * holder while this one is in standby; absent when no one is known to.
   */
  holder?: string;
  lastError?: string;
  /** The tenant of the event whose handling gave `lastError` (absent: no event's error); see EventHandlerMetrics. */
  lastErrorTenantUuid?: string;
  /** During a restore from zero (built beside the served data, then switched): where it stands. */
  restoration?: RestorationProgress;
  /** A handler made with `withPartitions(n)`: each partition, where it runs and how far it is. */
  partitions?: PartitionInfo[];
  /** A publisher to or a consumer of a message broker (mneme/nats, mneme/amqp): its broker, lag and errors. */
  integration?: IntegrationInfo;
}

/** One partition of a partitioned handler, as the Runtime lists it. */
export interface PartitionInfo {
  /** 0..n-1: the partition of the aggregates whose uuid hashes to it (see `withPartitions`). */
  partition: number;
  /** The instance that applies it: this one, or the holder of its lock; absent when no one is known to. */
  holder?: string;
  /** Its state on this instance ("standby": another instance applies it). */
  state: EventHandlerState;
  /** The position it has passed: here its own, in standby its holder's checkpoint (written when it applies an event of its partition). */
  lastPosition: number;
}

/**
 * What the Runtime lists of a handler that links mneme to a message broker:
 * a publisher of integration events, or a consumer of messages that become commands.
 */
export interface IntegrationInfo {
  role: "publisher" | "consumer";
  /** `"nats"`, `"amqp"`, or a transport's own name. */
  broker: string;
  /** Where it publishes or consumes: a stream and durable consumer, an exchange, a queue. */
  target: string;
  /**
   * Publisher: the entries waiting in its outbox. Consumer: the messages
   * waiting on the broker, as the broker last said (-1: not known yet).
   * Both as last counted (refreshed as the handler works and when listed).
   */
  lag: number;
  /** Messages published (acknowledged by the broker) or consumed (command committed or replayed) by this instance since it started. */
  handled: number;
  /** Failed attempts by this instance since it started. */
  failures: number;
  /** Dead letters kept (as last counted). */
  deadLetters: number;
  /** Whether the transport is connected and working (a consumer's subscription is open). */
  connected: boolean;
  lastError?: string;
  /**
   * The tenant of the message or event whose handling gave `lastError` (`""`: a message whose tenant is not
   * known, e.g. its mapping failed); absent when the error came from no message (the broker went away). The
   * Runtime shows `lastError` to a tenant's operator only when it is that tenant's, as for the handler's own.
   */
  lastErrorTenantUuid?: string;
}

/** A handler that can rebuild its state from the event history. */
export interface StateRestorer {
  restoreState(ctx?: unknown, opts?: { fromZero?: boolean; signal?: AbortSignal }): { done: Promise<RestoreReport>; cancel(): void };
  readonly restorationState: RestorationState;
}

/** A handler that reports metrics. */
export interface MetricProvider {
  getMetrics(): EventHandlerMetrics;
}

export { isReadmodelHandle, type ReadmodelHandle, type ReadmodelRef } from "./readmodel-handle.js";
