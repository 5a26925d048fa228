// The root export list of mneme, name by name: the framework an application is written with.
// Backend authors find the store interfaces in mneme/store; the Runtime domain's tokens and parts are in mneme/runtime.
export {
  MnemeError,
  isMnemeError,
  defineErrorCode,
  type MnemeErrorCode,
  type UserErrorCode,
  type ErrorCode,
  type MnemeErrorDetail,
} from "./model/errors.js";
export type { RequestContext, Event, NewEvent, JsonSchema, CommandEnvelope, QueryEnvelope } from "./model/types.js";
export { nowNs, newUuid } from "./model/clock.js";
export {
  AllEvents,
  type CommandType,
  type QueryType,
  type EventType,
  type AggregateType,
  type Evolver,
  type PayloadOf,
  type ResultOf,
  type CommandPersonalData,
  type CommandPersonalDataOptions,
} from "./model/tokens.js";
export {
  defineDomain,
  on,
  type Domain,
  type CommandHandler,
  type QueryHandler,
  type CommandHandlerResult,
  type MessageOptions,
  type CommandOptions,
  type AggregateOptions,
} from "./model/domain.js";
export type { DomainInstaller, DomainInstall } from "./model/domain-install.js";
export type {
  CommandContext,
  QueryContext,
  MessageContext,
  AggregateLoader,
  AggregateLoadOptions,
  LoadedAggregate,
} from "./model/context.js";
export type { FacadeHandle, DispatchOptions, DispatchResult, HandlerError, QueryOptions } from "./model/facade-handle.js";
export { Facade, createFacade, type FacadeOptions } from "./app/facade.js";

export {
  anonymous,
  authenticated,
  authorized,
  newPermission,
  newPermissionCmdFunc,
  type Permission,
  type PermissionFunc,
  type PermissionLevel,
  type PermissionContext,
} from "./model/permission.js";
export type { Authorizer } from "./permissions/permission-registry.js";
export { registerStorePermissions, type StoreName, type StoreAction } from "./permissions/store-permissions.js";

export { MemoryEventRepository } from "./memory/memory-event-repository.js";
export { MemoryCommandStore } from "./memory/memory-command-store.js";
export { MemoryDataStore } from "./memory/memory-data-store.js";
export { MemoryCacheStore } from "./memory/memory-cache-store.js";
export { MemoryLogStore } from "./memory/memory-log-store.js";
export { MemoryReadmodelStoreBackend } from "./memory/memory-readmodel-store-backend.js";
export { MemorySnapshotStore } from "./memory/memory-snapshot-store.js";
export { FilesystemDataStore } from "./store-fs/filesystem-data-store.js";

export type {
  EventHandler,
  DomainEventHandler,
  HandlerContext,
  EventHandlerState,
  RestorationState,
  RestoreReport,
  EventHandlerMetrics,
  EventHandlerInfo,
  StateRestorer,
  MetricProvider,
  ReadmodelHandle,
} from "./model/event-handler.js";
export { BaseEventHandler } from "./readmodel/base-event-handler.js";
export {
  BaseReadmodel,
  withReadmodelStoreBackend,
  withRestoreBatchSize,
  withCatchBufferLimit,
  type ReadmodelOptions,
  type ReadmodelOption,
  type ReadmodelFacade,
  type CollectionOptions,
} from "./readmodel/base-readmodel.js";
export type { CollectionIndex } from "./store/readmodel-indexes.js";
export {
  ProjectionReadmodel,
  type ProjectionModel,
  type ProjectionList,
  type ProjectionListOptions,
  type ProjectionConfig,
  type ProjectionOrderBy,
} from "./readmodel/projection-readmodel.js";
export type { HistoryEventModel } from "./readmodel/history.js";

// Runtime types an application reads (the Runtime itself is `facade.runtime`).
export type { Runtime, ControlRequest, ControlAction, SystemInfo } from "./runtime/runtime.js";
export type { SystemEvent } from "./runtime/system-events.js";
export type { SystemEventKind } from "./model/system-event-kind.js";
