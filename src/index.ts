// The root export list of mneme, name by name.
export {
  MnemeError, isMnemeError, defineErrorCode, errorCodeDefinition, listErrorCodes, isMnemeErrorCode, MNEME_ERROR_CODES,
  type MnemeErrorCode, type UserErrorCode, type ErrorCode, type ErrorCodeDefinition, type MnemeErrorDetail,
} from "./model/errors.js";
export type { RequestContext, Event, NewEvent, JsonSchema, CommandEnvelope, QueryEnvelope } from "./model/types.js";
export { eventPath } from "./model/types.js";
export { nowNs, newUuid } from "./model/clock.js";
export {
  AllEvents, type AllEventsType, type MessageType, type CommandType, type QueryType, type EventType, type AggregateType, type Evolver, type PayloadOf, type ResultOf,
} from "./model/tokens.js";
export {
  defineDomain, type Domain, type CommandHandler, type QueryHandler, type CommandHandlerResult, type MessageOptions, type AggregateOptions,
  on, type EvolveStep, type EvolveOn,
} from "./model/domain.js";
export type { CommandContext, QueryContext, MessageContext, AggregateLoader, LoadedAggregate } from "./model/context.js";
export { REDACTED } from "./model/redact.js";
export type { SystemEventKind } from "./model/system-event-kind.js";
export type {
  FacadeHandle, EventReader, DispatchOptions, DispatchResult, HandlerError, QueryOptions, MessageRef, CommandRef, QueryRef,
} from "./model/facade-handle.js";
export { Facade, createFacade, type FacadeOptions } from "./app/facade.js";

export {
  anonymous, authenticated, authorized, newPermission, newPermissionCmdFunc, permissionLevelOf, permissionFuncOf, checkPermission,
  type Permission, type LevelPermission, type CustomPermission, type AdministratorPermission, type PermissionKind,
  type PermissionFunc, type PermissionLevel, type PermissionContext,
} from "./model/permission.js";
export { PermissionRegistry, type Authorizer } from "./permissions/permission-registry.js";
export {
  registerStorePermissions, storePermissionName, storePermissionDefinitions, STORE_NAMES, STORE_ACTIONS, STORE_PREFIXES,
  type StoreName, type StoreAction,
} from "./permissions/store-permissions.js";

// StoreInfo (the type every store reports) is exported below with the Runtime domain, whose query StoreInfo answers it.
export type { StorePage, PageRequest } from "./store/store-info.js";
export type { EventRepository, AppendOptions, ReadAllOptions, AppendListener } from "./store/event-repository.js";
export type { CommandStore, CommandRecord, CommandStatus, CommandListOptions } from "./store/command-store.js";
export type { DataStore, DataEntry, DataEntryInfo } from "./store/data-store.js";
export type { CacheStore, CacheEntry } from "./store/cache-store.js";
export type { LogStore, LogEntry, NewLogEntry, LogLevel } from "./store/log-store.js";
export type { ReadmodelStoreBackend, ReadmodelCollection, ListOptions } from "./store/readmodel-store-backend.js";

export { MemoryEventRepository } from "./memory/memory-event-repository.js";
export { MemoryCommandStore } from "./memory/memory-command-store.js";
export { MemoryDataStore } from "./memory/memory-data-store.js";
export { MemoryCacheStore } from "./memory/memory-cache-store.js";
export { MemoryLogStore } from "./memory/memory-log-store.js";
export { MemoryReadmodelStoreBackend } from "./memory/memory-readmodel-store-backend.js";
export { FilesystemDataStore, type FilesystemDataStoreOptions } from "./store-fs/filesystem-data-store.js";

export type {
  EventHandler, DomainEventHandler, HandlerContext, EventHandlerState, RestorationState, RestoreReport,
  EventHandlerMetrics, EventHandlerInfo, StateRestorer, MetricProvider, ReadmodelHandle,
} from "./model/event-handler.js";
export { BaseEventHandler, type DeliveryOptions } from "./readmodel/base-event-handler.js";
export {
  BaseReadmodel, withReadmodelStoreBackend, withRestoreBatchSize, withCatchBufferLimit,
  type ReadmodelOptions, type ReadmodelOption, type ReadmodelFacade,
} from "./readmodel/base-readmodel.js";
export {
  ProjectionReadmodel, type ProjectionModel, type ProjectionList, type ProjectionListOptions, type ProjectionConfig, type ProjectionOrderBy,
} from "./readmodel/projection-readmodel.js";
export { toHistoryEvent, type HistoryEventModel } from "./readmodel/history.js";

export {
  Runtime, type ControlRequest, type ControlAction, type SystemInfo, type CommandListEntry, type QueryListEntry, type EventListEntry,
  type CommandHandlerListEntry, type QueryHandlerListEntry, type RuntimeHost,
} from "./runtime/runtime.js";
export { StoreAccess } from "./runtime/store-access.js";
// Domains: the install step, and the Runtime domain's definition and tokens (typed by payload and result).
export type { DomainInstaller, DomainInstall, InstalledDomain, TypedCommandHandler } from "./model/domain-install.js";
export {
  RuntimeDomain, ListCommands, ListQueries, ListEvents, ListCommandHandlers, ListQueryHandlers, ListEventHandlers, ListPermissions,
  GetMetrics, GetSystemInfo, GetSchema, StreamSystemEvents, StoreInfo, StoreRead, ControlEventHandler, StoreUpdate, StoreDelete,
  type PermissionListEntry,
} from "./runtime/runtime-domain.js";
export {
  SystemEventProducer, type SystemEvent, type SystemEventListener, type SubscribeOptions, type SystemEventProducerOptions,
  type SystemEventGap, type SystemEventGapReason,
} from "./runtime/system-events.js";
export { SchemaRegistry, type SchemaOptions, type SchemaSource } from "./schema/schema-registry.js";
