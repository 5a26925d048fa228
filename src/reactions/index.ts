/**
 * `mneme/reactions`: event handlers that act rather than answer queries:
 * process managers (events -> commands, with scheduled commands) and reactors
 * (events -> external effects), both with an outbox in their readmodel
 * backend, and the base and interfaces of an event handler of your own.
 * See docs/reactions.md.
 */
export {
  ProcessManager,
  type ProcessContext,
  type ProcessManagerOptions,
  type ProcessStateDocument,
  type ProcessStep,
  type ReactionFacade,
} from "./process-manager.js";
export { servicePrincipal, type ServicePrincipal } from "../model/service-principal.js";
export { Reactor, type Effect, type EffectInfo, type ReactorOptions } from "./reactor.js";
export { Outbox, isOutboxHandler, type OutboxFilter, type OutboxHandler, type OutboxHandlerOptions } from "./outbox.js";
export { DEFAULT_RETRY, type OutboxCommand, type OutboxEntry, type OutboxEntryStatus, type RetryPolicy } from "./outbox-entry.js";
export { correlationOf, messageCommandUuid, reactionCommandUuid, reactionDedupeKey, type ChainRequestContext } from "./reaction-ids.js";
export { BaseEventHandler, type DeliveryOptions } from "../readmodel/base-event-handler.js";
export type { EventHandler, DomainEventHandler, HandlerContext, StateRestorer, MetricProvider } from "../model/event-handler.js";
export type { DeadLetterControl, DeadLetterEntry, ReactionListFilter, ScheduledCommandEntry } from "./reaction-listing.js";
