/** The kinds of system events, in one list (a live query's `systemEvents` is checked against it). docs/runtime.md describes each payload. */
export const SYSTEM_EVENT_KINDS = Object.freeze([
  "CommandExecuted",
  "CommandFailed",
  "EventsAppended",
  "EventHandlerStateChanged",
  "RestoreStarted",
  "RestoreProgress",
  "RestoreCompleted",
  "RestoreFailed",
  "HandlerFailed",
  "HandlersInStandby",
  "StoreEntryChanged",
  "SubscriberDropped",
] as const);

/** Kinds of system events. docs/runtime.md describes each payload. */
export type SystemEventKind = (typeof SYSTEM_EVENT_KINDS)[number];
