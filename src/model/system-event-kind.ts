/** Kinds of system events. docs/runtime.md describes each payload. */
export type SystemEventKind =
  | "CommandExecuted"
  | "CommandFailed"
  | "EventsAppended"
  | "EventHandlerStateChanged"
  | "RestoreStarted"
  | "RestoreProgress"
  | "RestoreCompleted"
  | "RestoreFailed"
  | "HandlerFailed"
  | "HandlersInStandby"
  | "StoreEntryChanged"
  | "SubscriberDropped";
