/**
 * `mneme/runtime`: the Runtime meta-domain: its definition and tokens (typed by
 * payload and result, for `facade.query(ListCommands, {})` and the like), the
 * reports it answers (lists, metrics, restorations, system events, error
 * codes), and the parts the facade composes (Runtime, the system-event
 * producer, store access, the schema and permission registries). An
 * application reaches the running ones through `facade.runtime`.
 */
export {
  Runtime,
  type ControlRequest,
  type ControlAction,
  type SystemInfo,
  type CommandListEntry,
  type QueryListEntry,
  type EventListEntry,
  type CommandHandlerListEntry,
  type QueryHandlerListEntry,
  type RuntimeHost,
  type RollingUpgradeReport,
} from "./runtime.js";
export { StoreAccess } from "./store-access.js";
export {
  RuntimeDomain,
  ListCommands,
  ListQueries,
  ListEvents,
  ListCommandHandlers,
  ListQueryHandlers,
  ListEventHandlers,
  ListPermissions,
  GetMetrics,
  GetSystemInfo,
  GetSchema,
  StreamSystemEvents,
  SubscribeEvents,
  StoreInfo,
  StoreRead,
  ControlEventHandler,
  StoreUpdate,
  StoreDelete,
  ListScheduledCommands,
  CancelScheduledCommand,
  ListDeadLetters,
  ControlDeadLetter,
  ListFailures,
  MigratePersonalData,
  FinishRollingUpgrade,
  GetClearPersonalData,
  ForgetSubject,
  ApplyRetention,
  type PermissionListEntry,
} from "./runtime-domain.js";
export type { RetentionKept, RetentionOptions, RetentionReport } from "./retention-report.js";
export type { FailureEntry, FailureListFilter } from "./failure-history.js";
export {
  SystemEventProducer,
  type SystemEvent,
  type SystemEventListener,
  type SubscribeOptions,
  type SystemEventProducerOptions,
  type SystemEventGap,
  type SystemEventGapReason,
} from "./system-events.js";
export type { SystemEventKind } from "../model/system-event-kind.js";
export type {
  RebuildPhase,
  RestorationProgress,
  RestorationState,
  RestoreReport,
  EventHandlerMetrics,
  EventHandlerInfo,
  PartitionInfo,
  EventHandlerState,
  IntegrationInfo,
} from "../model/event-handler.js";
export { SchemaRegistry, type SchemaOptions, type SchemaSource } from "../schema/schema-registry.js";
export { PermissionRegistry } from "../permissions/permission-registry.js";
export {
  storePermissionName,
  storePermissionDefinitions,
  STORE_NAMES,
  STORE_ACTIONS,
  STORE_PREFIXES,
} from "../permissions/store-permissions.js";
export {
  permissionLevelOf,
  permissionFuncOf,
  checkPermission,
  type LevelPermission,
  type CustomPermission,
  type AdministratorPermission,
  type PermissionKind,
} from "../model/permission.js";
export { errorCodeDefinition, listErrorCodes, isMnemeErrorCode, MNEME_ERROR_CODES, type ErrorCodeDefinition } from "../model/errors.js";
export { REDACTED } from "../model/redact.js";
