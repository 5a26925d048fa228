/**
 * mneme/reactions: process managers (events -> commands, with scheduled
 * commands) and reactors (events -> external effects), both event handlers
 * with an outbox in their readmodel backend. See docs/reactions.md.
 */
export {
  ProcessManager,
  type ProcessContext,
  type ProcessManagerOptions,
  type ProcessStateDocument,
  type ProcessStep,
  type ReactionFacade,
} from "./process-manager.js";
export { Reactor, type Effect, type EffectInfo, type ReactorOptions } from "./reactor.js";
export { Outbox, isOutboxHandler, type OutboxFilter, type OutboxHandler, type OutboxHandlerOptions } from "./outbox.js";
export { DEFAULT_RETRY, type OutboxCommand, type OutboxEntry, type OutboxEntryStatus, type RetryPolicy } from "./outbox-entry.js";
export { correlationOf, reactionCommandUuid, reactionDedupeKey, type ChainRequestContext } from "./reaction-ids.js";
export type { DeadLetterControl, DeadLetterEntry, ReactionListFilter, ScheduledCommandEntry } from "./reaction-listing.js";
