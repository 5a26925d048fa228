import { MnemeError } from "../model/errors.js";
import { checkClaimArgs, checkCommandRecordFields, sealedCommandRecord } from "../store/command-record-validation.js";
import type { CommandClaim, CommandClaimant, CommandListOptions, CommandRecord, CommandStore } from "../store/command-store.js";
import { decodeCursor, encodeCursor, pageLimit } from "../store/paging.js";
import type { StoreInfo, StorePage } from "../store/store-info.js";
import { checkPayloadSealing, jsonEqual, type PayloadSealing } from "../store/payload-sealing.js";
import { MemoryStoreBase } from "./memory-store-base.js";

interface Row {
  createdAt: number;
  commandUuid: string;
  /** What callers get: a deeply frozen copy, shared by every read. */
  record: CommandRecord;
  /** The fields the list filters read (kept apart so filtering parses nothing). */
  domain: string;
  name: string;
  status: string;
  tenantUuid: string;
}

/**
 * The in-memory CommandStore (audit trail). Records are kept as deeply frozen
 * copies that read back as their JSON would, so neither the caller's object
 * nor a returned one can change what is stored, and reads copy nothing;
 * listing is keyset by (createdAt, commandUuid).
 */
export class MemoryCommandStore extends MemoryStoreBase implements CommandStore {
  /** Sorted by (createdAt, commandUuid). */
  private readonly order: Row[] = [];
  private readonly byUuid = new Map<string, Row>();
  /** Commands being run (claimed, not recorded yet): owner and lease end (ms since the epoch). */
  private readonly claims = new Map<string, { owner: string; expiresAt: number }>();
  async record(rec: CommandRecord): Promise<void> {
    this.assertOpen();
    checkCommandRecordFields(rec);
    const record = sealedCommandRecord(rec);
    if (this.byUuid.has(rec.commandUuid)) throw new MnemeError("CONFLICT", `command ${rec.commandUuid} is recorded already`);
    const row: Row = {
      createdAt: rec.createdAt,
      commandUuid: rec.commandUuid,
      record,
      domain: rec.domain,
      name: rec.name,
      status: rec.status,
      tenantUuid: rec.tenantUuid,
    };
    const at = upperBound(this.order, row.createdAt, row.commandUuid);
    if (at === this.order.length) this.order.push(row);
    else this.order.splice(at, 0, row);
    this.byUuid.set(rec.commandUuid, row);
    // The record is the claim's resolution.
    this.claims.delete(rec.commandUuid);
  }

  /** Claims a commandUuid (see CommandStore.claim); a failed or denied record it replaces is deleted. */
  async claim(commandUuid: string, claimant: CommandClaimant): Promise<CommandClaim> {
    this.assertOpen();
    const owner = checkClaimArgs(commandUuid, claimant.owner, claimant.leaseMs);
    const row = this.byUuid.get(commandUuid);
    if (row?.status === "succeeded") return { outcome: "recorded", record: row.record };
    const now = Date.now();
    const held = this.claims.get(commandUuid);
    if (held !== undefined && held.owner !== owner && held.expiresAt >= now) {
      return { outcome: "held", owner: held.owner, expiresAt: held.expiresAt };
    }
    // Synchronous from the look to here: no other claim can come between.
    this.claims.set(commandUuid, { owner, expiresAt: now + claimant.leaseMs });
    if (row !== undefined) this.deleteRow(commandUuid);
    return { outcome: "claimed" };
  }

  async renewClaim(commandUuid: string, owner: string, leaseMs: number): Promise<boolean> {
    this.assertOpen();
    checkClaimArgs(commandUuid, owner, leaseMs);
    const held = this.claims.get(commandUuid);
    if (held?.owner !== owner) return false;
    held.expiresAt = Date.now() + leaseMs;
    return true;
  }

  async releaseClaim(commandUuid: string, owner: string): Promise<void> {
    this.assertOpen();
    checkClaimArgs(commandUuid, owner, 1);
    if (this.claims.get(commandUuid)?.owner === owner) this.claims.delete(commandUuid);
  }

  async get(commandUuid: string): Promise<CommandRecord | undefined> {
    this.assertOpen();
    const row = this.byUuid.get(commandUuid);
    return row?.record;
  }

  async list(opts: CommandListOptions = {}): Promise<StorePage<CommandRecord>> {
    this.assertOpen();
    const limit = pageLimit(opts.limit);
    let start = 0;
    if (opts.cursor !== undefined) {
      const [createdAt, uuid] = decodeCursor(opts.cursor, ["number", "string"]) as [number, string];
      start = upperBound(this.order, createdAt, uuid);
    }
    const items: CommandRecord[] = [];
    let last: Row | undefined;
    for (let i = start; i < this.order.length; i++) {
      const row = this.order[i] as Row;
      const r = row;
      if (opts.domain !== undefined && r.domain !== opts.domain) continue;
      if (opts.name !== undefined && r.name !== opts.name) continue;
      if (opts.status !== undefined && r.status !== opts.status) continue;
      if (opts.tenantUuid !== undefined && r.tenantUuid !== opts.tenantUuid) continue;
      if (items.length === limit && last !== undefined) {
        // One more match exists: this is not the last page.
        return { items, nextCursor: encodeCursor([last.createdAt, last.commandUuid]) };
      }
      items.push(row.record);
      last = row;
    }
    return { items };
  }

  /** For the personal-data migration only: see CommandStore.sealRecordPayloads. */
  async sealRecordPayloads(rewrites: readonly PayloadSealing[]): Promise<number> {
    this.assertOpen();
    checkPayloadSealing("sealRecordPayloads", rewrites, { redacts: true });
    let n = 0;
    for (const r of rewrites) {
      const row = this.byUuid.get(r.id);
      if (row === undefined) continue;
      if (!jsonEqual(row.record.payload, r.stored)) continue;
      row.record = sealedCommandRecord({ ...row.record, payload: r.sealed });
      n++;
    }
    return n;
  }

  async delete(commandUuid: string): Promise<boolean> {
    this.assertOpen();
    return this.deleteRow(commandUuid);
  }

  private deleteRow(commandUuid: string): boolean {
    const row = this.byUuid.get(commandUuid);
    if (row === undefined) return false;
    this.byUuid.delete(commandUuid);
    this.order.splice(upperBound(this.order, row.createdAt, row.commandUuid) - 1, 1);
    return true;
  }

  async info(): Promise<StoreInfo> {
    this.assertOpen();
    const last = this.order[this.order.length - 1];
    return { storeType: "memory", numItems: this.order.length, lastItemCreatedAt: last?.createdAt ?? 0, connectionInfo: "memory" };
  }
}

/** Index of the first row that sorts after (createdAt, uuid). */
function upperBound(rows: readonly Row[], createdAt: number, uuid: string): number {
  // Records arrive in time order almost always: the end is the answer without a search.
  const last = rows[rows.length - 1];
  if (last === undefined || last.createdAt < createdAt || (last.createdAt === createdAt && last.commandUuid <= uuid)) return rows.length;
  let lo = 0;
  let hi = rows.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    const r = rows[mid] as Row;
    if (r.createdAt < createdAt || (r.createdAt === createdAt && r.commandUuid <= uuid)) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}
