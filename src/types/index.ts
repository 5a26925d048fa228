/**
 * `mneme/types`: type-only names for code written apart from the call that takes it: option bags of
 * defineDomain, the facade and readmodels, aggregate loaders, handler results, permission levels, the
 * readmodel's facade and collections, and error details. Nothing here runs; the values are in `mneme`.
 */
export type { MnemeErrorDetail } from "../model/errors.js";
export type { QueryEnvelope } from "../model/types.js";
export type { Evolver, CommandPersonalData, CommandPersonalDataOptions, AllEventsType, MessageType } from "../model/tokens.js";
export type {
  CommandHandlerResult,
  MessageOptions,
  CommandOptions,
  AggregateOptions,
  EvolveStep,
  EvolveOn,
  StateTypeNotGiven,
} from "../model/domain.js";
export type { DomainInstall, InstalledDomain, TypedCommandHandler } from "../model/domain-install.js";
export type {
  MessageContext,
  AggregateLoader,
  AggregateLoadOptions,
  EventQueries,
  EventQuery,
  EventQueryItem,
  EventQueryOptions,
  EventQueryRead,
  EventQueryFold,
  FoldedEvents,
} from "../model/context.js";
export type { HandlerError, EventReader, MessageRef, CommandRef, QueryRef } from "../model/facade-handle.js";
export type { PermissionLevel } from "../model/permission.js";
export type { StoreName, StoreAction } from "../permissions/store-permissions.js";
export type { ReadmodelOptions, ReadmodelFacade, CollectionOptions } from "../readmodel/base-readmodel.js";
export type { SubjectErasure } from "../readmodel/subject-erasure.js";
export type { ForgetOptions } from "../app/privacy-write.js";
export type { ProjectionConfig, ProjectionOrderBy } from "../readmodel/projection-readmodel.js";
export type { HistoryEventModel } from "../readmodel/history.js";
export type { SqlTables, SqlTablesConfig, SqlTableDeclaration, SqlTableNamer, SqlRow } from "../readmodel/sql-table-readmodel.js";
export type { StandardSchemaV1 } from "../model/standard-schema.js";
export type {
  OutboundMessage,
  MessageMapping,
  InboundMessage,
  InboundCommand,
  CommandMapping,
} from "../integration/integration-message.js";
export type { IndexEventTagsOptions, IndexEventTagsReport } from "../app/tag-index.js";
