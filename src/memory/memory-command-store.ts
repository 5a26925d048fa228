import { MnemeError } from "../core/errors.js";
import type { CommandListOptions, CommandRecord, CommandStore } from "../store/command-store.js";
import type { StoreInfo, StorePage } from "../store/store-info.js";
import { decodeCursor, encodeCursor, resolvePageLimit, storeClosed } from "./paging.js";

const STATUSES = new Set(["succeeded", "failed", "denied"]);

interface Row {
  createdAt: number;
  commandUuid: string;
  /** What callers get, parsed afresh each time. */
  json: string;
  /** The fields the list filters read (kept apart so filtering parses nothing). */
  domain: string;
  name: string;
  status: string;
  tenantUuid: string;
}

/**
 * The in-memory CommandStore (audit trail). Records are kept as JSON strings,
 * like a database would, so neither the caller's object nor a returned one can
 * change what is stored; listing is keyset by (createdAt, commandUuid).
 */
export class MemoryCommandStore implements CommandStore {
  /** Sorted by (createdAt, commandUuid). */
  private readonly order: Row[] = [];
  private readonly byUuid = new Map<string, Row>();
  private closed = false;

  async init(): Promise<void> {
    this.assertOpen();
  }

  async record(rec: CommandRecord): Promise<void> {
    this.assertOpen();
    validate(rec);
    if (this.byUuid.has(rec.commandUuid)) throw new MnemeError("CONFLICT", `command ${rec.commandUuid} is recorded already`);
    const json = JSON.stringify(rec);
    const row: Row = { createdAt: rec.createdAt, commandUuid: rec.commandUuid, json, domain: rec.domain, name: rec.name, status: rec.status, tenantUuid: rec.tenantUuid };
    const at = upperBound(this.order, row.createdAt, row.commandUuid);
    if (at === this.order.length) this.order.push(row);
    else this.order.splice(at, 0, row);
    this.byUuid.set(rec.commandUuid, row);
  }

  async get(commandUuid: string): Promise<CommandRecord | undefined> {
    this.assertOpen();
    const row = this.byUuid.get(commandUuid);
    return row === undefined ? undefined : (JSON.parse(row.json) as CommandRecord);
  }

  async list(opts: CommandListOptions = {}): Promise<StorePage<CommandRecord>> {
    this.assertOpen();
    const limit = resolvePageLimit(opts.limit);
    let start = 0;
    if (opts.cursor !== undefined) {
      const [createdAt, uuid] = decodeCursor(opts.cursor, "ns") as [number, string];
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
      items.push(JSON.parse(row.json) as CommandRecord);
      last = row;
    }
    return { items };
  }

  async delete(commandUuid: string): Promise<boolean> {
    this.assertOpen();
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

  async close(): Promise<void> {
    this.closed = true;
  }

  private assertOpen(): void {
    if (this.closed) throw storeClosed("MemoryCommandStore");
  }
}

/** Index of the first row that sorts after (createdAt, uuid). */
function upperBound(rows: readonly Row[], createdAt: number, uuid: string): number {
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

function validate(rec: CommandRecord): void {
  const bad = (what: string): MnemeError => new MnemeError("INVALID_REQUEST", `invalid command record: ${what}`);
  if (rec === null || typeof rec !== "object") throw bad("not an object");
  for (const f of ["commandUuid", "domain", "name"] as const) {
    if (typeof rec[f] !== "string" || rec[f] === "") throw bad(`${f} must be a non-empty string`);
  }
  if (typeof rec.tenantUuid !== "string") throw bad("tenantUuid must be a string");
  if (!STATUSES.has(rec.status)) throw bad(`status must be succeeded, failed or denied, got ${String(rec.status)}`);
  if (typeof rec.createdAt !== "number" || !Number.isFinite(rec.createdAt)) throw bad("createdAt must be a finite number (ns)");
  if (typeof rec.durationMicros !== "number" || !Number.isFinite(rec.durationMicros)) throw bad("durationMicros must be a finite number");
  if (!Array.isArray(rec.eventUuids) || rec.eventUuids.some((u) => typeof u !== "string")) throw bad("eventUuids must be an array of strings");
  if (rec.reqCtx === null || typeof rec.reqCtx !== "object") throw bad("reqCtx must be an object");
}
