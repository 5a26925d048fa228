/**
 * `mneme`: what an application imports on day one (at most 60 names): createFacade and its options,
 * defineDomain and the tokens it makes, the contexts handlers receive, permissions, errors, BaseReadmodel and
 * ProjectionReadmodel. Everything else has one subpath by purpose: the types of code written apart from its
 * definition (option bags, loaders, handler internals) in `mneme/types`; stores (interfaces, the memory and
 * filesystem stores) in `mneme/store`; the Runtime domain's tokens and reports in `mneme/runtime`; event handlers
 * of your own, process managers and reactors in `mneme/reactions`.
 */
export { MnemeError, isMnemeError, defineErrorCode, type MnemeErrorCode, type UserErrorCode, type ErrorCode } from "./model/errors.js";
export type { RequestContext, Event, NewEvent, JsonSchema, CommandEnvelope } from "./model/types.js";
export { nowNs, newUuid } from "./model/clock.js";
export {
  AllEvents,
  type CommandType,
  type QueryType,
  type EventType,
  type AggregateType,
  type PayloadOf,
  type ResultOf,
} from "./model/tokens.js";
export { defineDomain, on, type Domain, type CommandHandler, type QueryHandler } from "./model/domain.js";
export type { DomainInstaller } from "./model/domain-install.js";
export type { CommandContext, QueryContext, LoadedAggregate } from "./model/context.js";
export type { FacadeHandle, DispatchOptions, DispatchResult, QueryOptions } from "./model/facade-handle.js";
export { createFacade, type Facade, type FacadeOptions } from "./app/facade.js";

export {
  anonymous,
  authenticated,
  authorized,
  newPermission,
  newPermissionCmdFunc,
  type Permission,
  type PermissionFunc,
  type PermissionContext,
} from "./model/permission.js";
export type { Authorizer } from "./permissions/permission-registry.js";
export { registerStorePermissions } from "./permissions/store-permissions.js";

export type { ReadmodelHandle } from "./model/event-handler.js";
export {
  BaseReadmodel,
  withReadmodelStoreBackend,
  withRestoreBatchSize,
  withCatchBufferLimit,
  withPartitions,
  type ReadmodelOption,
} from "./readmodel/base-readmodel.js";
export {
  ProjectionReadmodel,
  type ProjectionModel,
  type ProjectionList,
  type ProjectionListOptions,
} from "./readmodel/projection-readmodel.js";
export { SqlTableReadmodel } from "./readmodel/sql-table-readmodel.js";

// The Runtime (`facade.runtime`) and the system events it streams; their tokens and reports are in mneme/runtime.
export type { Runtime } from "./runtime/runtime.js";
export type { SystemEvent } from "./runtime/system-events.js";
