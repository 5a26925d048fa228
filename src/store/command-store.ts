import type { RequestContext } from "../model/types.js";
import type { PageRequest, StoreInfo, StorePage } from "./store-info.js";

export type CommandStatus = "succeeded" | "failed" | "denied";

/** One executed command with its outcome (the audit trail). Secret fields are already redacted. */
export interface CommandRecord {
  commandUuid: string;
  domain: string;
  name: string;
  tenantUuid: string;
  reqCtx: RequestContext;
  payload: unknown;
  status: CommandStatus;
  error?: { code: string; message: string };
  /** uuids of the events the command appended, in order. */
  eventUuids: string[];
  /** ns since the epoch. */
  createdAt: number;
  durationMicros: number;
}

export interface CommandListOptions extends PageRequest {
  domain?: string;
  name?: string;
  status?: CommandStatus;
  tenantUuid?: string;
}

/**
 * The CommandStore: every executed command with its outcome. Listing is newest
 * last, keyset by (createdAt, commandUuid). Recording a commandUuid twice gives
 * CONFLICT and keeps the first; stored records cannot be changed through the
 * given or the returned objects.
 */
export interface CommandStore {
  init(): Promise<void>;
  record(rec: CommandRecord): Promise<void>;
  get(commandUuid: string): Promise<CommandRecord | undefined>;
  list(opts?: CommandListOptions): Promise<StorePage<CommandRecord>>;
  /** True when a record was deleted. */
  delete(commandUuid: string): Promise<boolean>;
  info(): Promise<StoreInfo>;
  close(): Promise<void>;
}
