import type { TagQueryItem } from "./event-tags.js";
import type { RequestContext } from "../model/types.js";
import type { PayloadSealing } from "./payload-sealing.js";
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
  /**
   * What the command decided on beyond aggregates: each query it read with
   * `ctx.events` (checked), as the store matched it (types as stored event
   * paths), and the position it was read at. Absent when it read none.
   */
  decidedOn?: { queries: { items: TagQueryItem[]; position: number }[] };
}

/** Who claims a commandUuid, for how long, and for which command (the claim names it while it runs). */
export interface CommandClaimant {
  /** Who claims: the facade's instanceId and its attempt (`instanceId/attempt`), so two duplicates in one process are two owners. */
  readonly owner: string;
  /** How long the claim holds unless renewed (ms): a claim of a crashed instance may be taken over after it. */
  readonly leaseMs: number;
  readonly domain: string;
  readonly name: string;
  readonly tenantUuid: string;
}

/**
 * What `claim` found: `claimed` (the caller runs the command: nothing was
 * recorded, or only a failed or denied attempt, which the claim replaces, or
 * an expired claim); `recorded` (a succeeded record: the outcome to replay);
 * `held` (another live claim: the command is in progress elsewhere).
 */
export type CommandClaim =
  | { readonly outcome: "claimed" }
  | { readonly outcome: "recorded"; readonly record: CommandRecord }
  | { readonly outcome: "held"; readonly owner: string; readonly expiresAt: number };

export interface CommandListOptions extends PageRequest {
  domain?: string;
  name?: string;
  status?: CommandStatus;
  tenantUuid?: string;
}

/** The equality filters of CommandListOptions and the column each reads, for SQL backends (see stringFilters). */
export const COMMAND_LIST_FILTERS = [
  ["domain", "domain"],
  ["name", "name"],
  ["status", "status"],
  ["tenantUuid", "tenant_uuid"],
] as const satisfies readonly (readonly [keyof CommandListOptions, string])[];

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
  /**
   * Optional (all three or none): claims, so that of concurrent duplicates of
   * one commandUuid exactly one handler runs across every instance sharing
   * the store. `claim` takes the commandUuid atomically unless a succeeded
   * record or a live claim of another owner holds it; `record` of that
   * commandUuid resolves the claim in its own write (a claim is never listed,
   * counted or returned by `get`). Without them a facade serialises
   * duplicates in its own process only.
   */
  claim?(commandUuid: string, claimant: CommandClaimant): Promise<CommandClaim>;
  /** Extends the owner's claim by `leaseMs` from now; false when the owner no longer holds it. */
  renewClaim?(commandUuid: string, owner: string, leaseMs: number): Promise<boolean>;
  /** Drops the owner's claim (nothing was recorded); a claim of another owner or a record is left alone. */
  releaseClaim?(commandUuid: string, owner: string): Promise<void>;
  /**
   * Optional, for the personal-data migration only (`facade.migratePersonalData`):
   * rewrites the payloads of records (by commandUuid) in place, replacing
   * values kept in clear with sealed envelopes or, for fields the command
   * type now lists in `secretFields`, "[redacted]"; every other part of the
   * record stays. Each rewrite happens only while the record's payload still
   * equals `stored`, all in one transaction; resolves how many were
   * rewritten. Anything else is refused with INVALID_REQUEST, nothing written.
   */
  sealRecordPayloads?(rewrites: readonly PayloadSealing[]): Promise<number>;
}
