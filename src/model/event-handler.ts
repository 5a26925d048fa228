import type { AllEventsType, EventType } from "./tokens.js";
import type { Event } from "./types.js";

/** What a domain-event handler function receives besides the event. */
export interface HandlerContext {
  readonly eventHandlerName: string;
  /** True while the event is replayed by a restoration, false on live delivery. */
  readonly restoring: boolean;
}

/** A registered handler function with its metadata (the event's path and name). */
export interface DomainEventHandler<P = any> {
  /** `Domain.Name`, or "*" for AllEvents. */
  readonly eventPath: string;
  readonly domain: string;
  readonly eventName: string;
  readonly fn: (ctx: HandlerContext, event: Event<P>, domainEvt: P) => Promise<void> | void;
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
  lastRestore?: RestoreReport;
}

/** The record `runtime.listEventHandlers()` returns per handler. */
export interface EventHandlerInfo {
  eventHandlerName: string;
  domain: string;
  name: string;
  state: EventHandlerState;
  restorationState: RestorationState;
  domainEvents: string[];
  lastPosition: number;
  lastEventTimestamp: number;
  hasMetrics: boolean;
  isStateRestorer: boolean;
  lastError?: string;
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

export { isReadmodelHandle, type ReadmodelHandle } from "./readmodel-handle.js";
