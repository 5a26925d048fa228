import type { EventHandlerInfo, EventHandlerMetrics } from "../model/event-handler.js";
import type { RunnerState } from "./runner-state.js";

/** A handler's record in the Runtime's listing (its info, with `restoration` during a restore from zero). */
export type EventHandlerListing = EventHandlerInfo;

/**
 * Metrics of event processing: the counters and handling times of the
 * runner's HandlerMetrics, with the position and the lag behind the head the
 * facade knows.
 * @internal
 */
export function handlerMetrics(s: RunnerState): EventHandlerMetrics {
  return s.metrics.snapshot(s.lastPosition, s.lastEventTimestamp, s.host?.knownHead() ?? s.lastPosition);
}

/**
 * The record the Runtime lists for the handler: its states and position (in
 * standby, the holder's and its checkpoint), its last error while failed, and
 * during a rebuild where the rebuild stands.
 * @internal
 */
export function handlerListing(s: RunnerState, holder: string | undefined): EventHandlerListing {
  const h = s.handler;
  const info: EventHandlerListing = {
    eventHandlerName: h.name,
    domain: h.domain,
    name: h.name,
    state: s.state,
    restorationState: s.restorationState,
    domainEvents: h
      .getDomainEvents()
      .map((t) => t.path)
      .concat(s.handlesAllEvents() ? ["*"] : []),
    lastPosition: s.lastPosition,
    lastEventTimestamp: s.lastEventTimestamp,
    hasMetrics: s.isStateRestorer,
    isStateRestorer: s.isStateRestorer,
  };
  if (holder !== undefined) info.holder = holder;
  const view = s.state === "standby" ? s.standbyView : undefined;
  if (view !== undefined) info.lastPosition = view.position;
  if (s.metrics.lastError !== undefined && s.state === "failed") {
    info.lastError = s.metrics.lastError;
    if (s.metrics.lastErrorTenantUuid !== undefined) info.lastErrorTenantUuid = s.metrics.lastErrorTenantUuid;
  }
  const integration = s.hooks.describe();
  if (integration !== undefined) info.integration = integration;
  const r = s.rebuild;
  if (r !== undefined) {
    const seconds = (performance.now() - r.startedAt) / 1000;
    info.restoration = {
      phase: r.phase,
      position: s.lastPosition,
      targetHead: Math.max(r.targetHead, s.lastPosition),
      servedPosition: r.servedPosition,
      eventsReplayed: r.replayed,
      eventsPerSecond: seconds > 0 ? r.replayed / seconds : 0,
    };
  }
  return info;
}
