/** The JSON the dashboard reads, as docs/http.md and docs/runtime.md describe it. */

export interface Identity {
  identityUuid: string;
  tenantUuid: string;
  tenantName: string;
}

export interface LoginResult {
  sessionUuid: string;
  sessionKey: string;
  token: string;
  accountUuid: string;
  expiresAt: number;
  identities: Identity[];
}

/** What the page keeps of a sign-in: the token and the identity it acts as. */
export interface Session {
  token: string;
  email: string;
  accountUuid: string;
  expiresAt: number;
  identityUuid: string;
  tenantUuid: string;
  tenantName: string;
}

export interface ListBody<T> {
  items: T[];
  total: number;
  page: number;
  pageSize: number;
}

export type HandlerState = "running" | "stopped" | "failed" | "standby";

export interface EventHandlerInfo {
  eventHandlerName: string;
  domain: string;
  name: string;
  state: HandlerState;
  restorationState: string;
  domainEvents: string[];
  lastPosition: number;
  lastEventTimestamp: number;
  hasMetrics: boolean;
  isStateRestorer: boolean;
  /** The instance that applies the handler (this one, or the holder of its lock). */
  holder?: string;
  lastError?: string;
  /** A partitioned handler's partitions (`withPartitions`). */
  partitions?: PartitionInfo[];
  /** A publisher to or a consumer of a message broker (mneme/nats, mneme/amqp). */
  integration?: IntegrationInfo;
}

/** A publisher's or consumer's link to its broker, as the Runtime lists it (any broker). */
export interface IntegrationInfo {
  role: "publisher" | "consumer";
  broker: string;
  target: string;
  /** Publisher: entries waiting in its outbox; consumer: messages waiting on the broker (-1: not known yet). */
  lag: number;
  handled: number;
  failures: number;
  deadLetters: number;
  connected: boolean;
  lastError?: string;
}

export interface PartitionInfo {
  partition: number;
  holder?: string;
  state: HandlerState;
  lastPosition: number;
}

export interface RestoreReport {
  eventsReplayed: number;
  eventsCaught: number;
  durationMs: number;
  eventsPerSecond: number;
}

export interface EventHandlerMetrics {
  eventsProcessed: number;
  eventsFailed: number;
  eventsCaught: number;
  meanHandleMicros: number;
  p99HandleMicros: number;
  lag: number;
  lastPosition: number;
  lastEventTimestamp: number;
  lastError?: string;
  lastRestore?: RestoreReport;
}

export interface SystemInfo {
  appName: string;
  version: string;
  instanceId: string;
  startedAt: number;
  uptimeMs: number;
  nodeVersion: string;
  /** Hostname and process id of the instance (absent from servers before 0.3). */
  host?: string;
  pid?: number;
  /** The registered domains' names (absent from servers before 0.3). */
  domains?: string[];
  tenant?: string;
  stores: Record<string, string>;
  counts: Record<string, number>;
  headPosition: number;
  state: string;
  unvalidated: string[];
}

export interface CommandEntry {
  domain: string;
  domainCmdName: string;
  description: string;
  permission: string;
}

export interface QueryEntry {
  domain: string;
  domainQryName: string;
  description: string;
  permission: string;
}

export interface EventEntry {
  domain: string;
  domainEvtName: string;
  domainEvtPath: string;
  description: string;
  /** The type declares tags (DCB): queries may name it. */
  tagged?: true;
}

export interface StoreInfo {
  storeType: string;
  numItems: number;
  lastItemCreatedAt: number;
  connectionInfo: string;
}

export interface StorePage {
  items: unknown[];
  nextCursor?: string;
}

export interface SystemEvent {
  id: number;
  kind: string;
  at: number;
  tenantUuid?: string;
  data: Record<string, unknown>;
}

export interface GapInfo {
  lastEventId: number;
  reason: string;
}

/** `Runtime.ListScheduledCommands` (docs/reactions.md). */
export interface ScheduledCommandEntry {
  commandUuid: string;
  eventHandlerName: string;
  domain: string;
  name: string;
  payload: unknown;
  /** ms since the epoch. */
  dueAt: number;
  attempts: number;
  lastError?: string;
  tenantUuid: string;
  correlationId: string;
  eventUuid: string;
}

/** `Runtime.ListDeadLetters` (docs/reactions.md). */
export interface DeadLetterEntry {
  id: string;
  eventHandlerName: string;
  kind: "command" | "effect";
  target: string;
  attempts: number;
  lastError?: string;
  /** ms since the epoch. */
  lastAttemptAt?: number;
  tenantUuid: string;
  correlationId: string;
  eventUuid: string;
  eventPath: string;
  scheduled: boolean;
}

/** `Runtime.ListFailures` (docs/runtime.md): a system event without its id. */
export interface FailureEntry {
  kind: string;
  at: number;
  tenantUuid?: string;
  data: Record<string, unknown>;
}

/** `Shards.ListShards` of a sharded app (mneme/shards). */
export interface ShardInfo {
  name: string;
  description: string;
  home: boolean;
  tenants: number;
  head: number;
  frozenTenants: string[];
}

/** `Shards.ListPlacements`: where a tenant lives. */
export interface Placement {
  tenantUuid: string;
  shard: string;
  state: "active" | "paused";
  version: number;
}
