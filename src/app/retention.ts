import { newUuid, nowNs } from "../model/clock.js";
import type { InstalledDomain } from "../model/domain-install.js";
import { snapshotOptionsOf } from "../model/domain.js";
import { MnemeError } from "../model/errors.js";
import type { AggregateType, EventType } from "../model/tokens.js";
import type { Event, NewEvent, RequestContext } from "../model/types.js";
import type { RetentionKept, RetentionOptions, RetentionReport } from "../runtime/retention-report.js";
import type { CommandStore } from "../store/command-store.js";
import type { EventRepository } from "../store/event-repository.js";
import { canRemoveEvents, type EventRemoval, REMOVAL_RECORD, REMOVED_EVENT } from "../store/event-removal.js";
import type { LogStore } from "../store/log-store.js";
import { snapshotDigestMatches, type SnapshotStore } from "../store/snapshot-store.js";
import { canScrubStorage } from "../store/storage-scrub.js";

/** What a retention run needs of the facade. */
export interface RetentionHost {
  /** The facade's events (the removal record is appended through it). */
  readonly events: Pick<EventRepository, "append">;
  /** The stored repository (read raw, hollowed). */
  readonly stored: EventRepository;
  readonly domains: ReadonlyMap<string, InstalledDomain>;
  readonly eventTypes: ReadonlyMap<string, EventType>;
  readonly snapshotStore: SnapshotStore;
  readonly commandStore: CommandStore;
  readonly logStore: LogStore;
  /** The LogStore's retention (ms), undefined when it declares none. */
  readonly logRetainForMs: number | undefined;
  /** Every store of the facade (those that can scrub their storage are scrubbed once per file or schema). */
  stores(): readonly unknown[];
  /** Drops what this process caches of stored events (the query cache of `ctx.events`). */
  forgetCachedEvents(): void;
}

/** Who asked for the run: recorded on its removal record. */
export interface RetentionCaller {
  readonly reqCtx?: RequestContext;
  readonly commandUuid?: string;
}

const KEPT_LISTED = 100;

/**
 * A retention run (see docs/operations.md, "Retention"): finds the events
 * older than their type's `retainFor`, keeps those a live aggregate's state
 * depends on without a snapshot at or past their version, appends the
 * run's removal record (`Runtime.RetentionApplied`), then hollows the
 * others into tombstones, deletes the command records whose events are all
 * removed and the log entries older than the LogStore's retention, and has
 * the stores scrub what the deleted bytes left behind. A dry run plans and
 * reports only.
 */
export async function applyRetention(host: RetentionHost, opts: RetentionOptions = {}, by: RetentionCaller = {}): Promise<RetentionReport> {
  const dryRun = checkOptions(opts);
  const batchSize = opts.batchSize ?? 1000;
  const at = nowNs();
  const run = newUuid();
  const plan = await planRemoval(host, at);
  const removed = plan.removals;
  const byType: Record<string, number> = {};
  for (const e of plan.events) byType[`${e.domain}.${e.name}`] = (byType[`${e.domain}.${e.name}`] ?? 0) + 1;
  const report = (recordPosition: number | null, commandRecords: number, logs: RetentionReport["logs"]): RetentionReport => ({
    run,
    dryRun,
    at,
    ranBy: ranByOf(by.reqCtx),
    events: {
      removed: removed.length,
      byType: sortedRecord(byType),
      firstPosition: removed[0]?.position ?? 0,
      lastPosition: removed[removed.length - 1]?.position ?? 0,
      keptCount: plan.keptCount,
      kept: plan.kept,
    },
    commandRecords: { deleted: commandRecords },
    logs,
    recordPosition,
  });
  if (dryRun) {
    const logs = host.logRetainForMs === undefined ? null : { deleted: await countExpiredLogs(host, at), retainForMs: host.logRetainForMs };
    return report(null, await countCommandRecords(host, plan.events, new Set(removed.map((r) => r.eventUuid))), logs);
  }
  let recordPosition: number | null = null;
  if (removed.length > 0) {
    if (!canRemoveEvents(host.stored)) {
      throw new MnemeError("INVALID_STATE", "retention: this event repository cannot remove events (it offers no removeEvents)");
    }
    // The record first: a tombstone without it fails verification, so a crash mid-run must leave the record behind.
    // `Runtime.RetentionApplied` is no registered type (listings stay as they were); readers meet it by its name.
    const record: NewEvent = {
      domain: REMOVAL_RECORD.domain,
      name: REMOVAL_RECORD.name,
      aggregateUuid: run,
      tenantUuid: "",
      payload: report(null, 0, null),
      ...(by.reqCtx === undefined ? {} : { reqCtx: by.reqCtx }),
    };
    if (by.commandUuid !== undefined) record.commandUuid = by.commandUuid;
    const [stored] = await host.events.append([record], { globalAggregates: [run] });
    recordPosition = stored?.position ?? null;
    for (let i = 0; i < removed.length; i += batchSize) await host.stored.removeEvents(run, removed.slice(i, i + batchSize));
    host.forgetCachedEvents();
  }
  const commandRecords = removed.length === 0 ? 0 : await deleteCommandRecords(host, plan.events);
  const logs = host.logRetainForMs === undefined ? null : { deleted: await deleteExpiredLogs(host, at), retainForMs: host.logRetainForMs };
  if (removed.length > 0 || commandRecords > 0 || (logs?.deleted ?? 0) > 0) await scrub(host);
  const result = report(recordPosition, commandRecords, logs);
  await host.logStore.append({
    level: "info",
    source: "retention",
    message:
      `retention run ${run}: ${result.events.removed} events removed, ${result.events.keptCount} expired kept (no snapshot), ` +
      `${commandRecords} command records and ${logs?.deleted ?? 0} log entries deleted`,
    data: { run, ranBy: result.ranBy, recordPosition, byType: result.events.byType },
  });
  return result;
}

/** Who ran it: the sender's account or service, else what a tool named (`attributes.ranBy`), else null. */
function ranByOf(reqCtx: RequestContext | undefined): string | null {
  const named = reqCtx?.attributes?.ranBy;
  return reqCtx?.senderAccountUuid ?? reqCtx?.senderService ?? (typeof named === "string" ? named : null);
}

function checkOptions(opts: RetentionOptions): boolean {
  if (opts === null || typeof opts !== "object") throw new MnemeError("INVALID_REQUEST", "applyRetention: options must be an object");
  if (opts.dryRun !== undefined && typeof opts.dryRun !== "boolean") {
    throw new MnemeError("INVALID_REQUEST", "applyRetention: dryRun must be a boolean");
  }
  const b = opts.batchSize;
  if (b !== undefined && (!Number.isInteger(b) || b < 1 || b > 10_000)) {
    throw new MnemeError("INVALID_REQUEST", `applyRetention: batchSize must be an integer from 1 to 10000, got ${String(b)}`);
  }
  return opts.dryRun === true;
}

/** What a run keeps of an event it removes (not its payload: a run over millions of events holds these only). */
type Expired = Pick<Event, "position" | "eventUuid" | "domain" | "name" | "commandUuid">;

interface Plan {
  /** The events to remove, in position order. */
  readonly events: Expired[];
  readonly removals: EventRemoval[];
  readonly keptCount: number;
  readonly kept: RetentionKept[];
}

/**
 * Reads the events of the types that declare `retainFor` (by every name they were stored under), up to
 * the one before the newest (the chain's head stays: the next append chains onto it), and sorts the
 * expired ones into removed and kept.
 */
async function planRemoval(host: RetentionHost, at: number): Promise<Plan> {
  const expiring = new Map<string, EventType>();
  for (const t of host.eventTypes.values()) {
    if (t.retainForMs === undefined) continue;
    expiring.set(t.path, t);
    for (const former of t.renamedFrom) expiring.set(`${t.domain}.${former}`, t);
  }
  const events: Expired[] = [];
  const kept = new Map<string, RetentionKept>();
  let keptCount = 0;
  if (expiring.size === 0) return { events, removals: [], keptCount, kept: [] };
  const head = await host.stored.headPosition();
  const dependents = new DependentAggregates(host.domains);
  const covered = new SnapshotCover(host.snapshotStore);
  for await (const page of host.stored.readAll({ eventPaths: [...expiring.keys()], untilPosition: head - 1 })) {
    for (const e of page) {
      const type = expiring.get(`${e.domain}.${e.name}`);
      if (type === undefined || e.createdAt >= at - type.retainForMs! * 1e6) continue;
      let missing: string | undefined;
      for (const agg of dependents.of(type)) {
        if (!(await covered.covers(agg, e.aggregateUuid, e.version))) {
          missing = `${agg.domain}.${agg.name} folds it and has no snapshot at or past version ${e.version}`;
          break;
        }
      }
      if (missing === undefined) {
        events.push({
          position: e.position,
          eventUuid: e.eventUuid,
          domain: e.domain,
          name: e.name,
          ...(e.commandUuid === undefined ? {} : { commandUuid: e.commandUuid }),
        });
        continue;
      }
      keptCount++;
      const key = `${type.path} ${e.aggregateUuid}`;
      if (kept.has(key) || kept.size < KEPT_LISTED)
        kept.set(key, { type: type.path, aggregateUuid: e.aggregateUuid, version: e.version, reason: missing });
    }
  }
  return { events, removals: events.map((e) => ({ position: e.position, eventUuid: e.eventUuid })), keptCount, kept: [...kept.values()] };
}

/** The aggregate types whose evolve folds an event type (as `AggregateType.apply` finds its step). */
class DependentAggregates {
  readonly #cache = new Map<string, AggregateType[]>();
  constructor(private readonly domains: ReadonlyMap<string, InstalledDomain>) {}

  of(type: EventType): readonly AggregateType[] {
    let found = this.#cache.get(type.path);
    if (found === undefined) {
      found = [];
      for (const d of this.domains.values()) {
        for (const agg of d.aggregates.values()) {
          const evolve = agg.evolve;
          if ((agg.domain === type.domain && Object.hasOwn(evolve, type.name)) || Object.hasOwn(evolve, type.path)) found.push(agg);
        }
      }
      this.#cache.set(type.path, found);
    }
    return found;
  }
}

/** Whether an aggregate's snapshot (of its type's current snapshotVersion, intact) is at or past a version. */
class SnapshotCover {
  readonly #versions = new Map<string, number>();
  constructor(private readonly snapshots: SnapshotStore) {}

  async covers(agg: AggregateType, aggregateUuid: string, version: number): Promise<boolean> {
    const key = `${agg.domain}.${agg.name} ${aggregateUuid}`;
    let at = this.#versions.get(key);
    if (at === undefined) {
      const { snapshotEvery, snapshotVersion } = snapshotOptionsOf(agg);
      const snap =
        snapshotEvery === undefined ? undefined : await this.snapshots.latest(agg.domain, agg.name, aggregateUuid, snapshotVersion);
      // A snapshot the loader would not fold on (no digest, or one that does not match) covers nothing.
      at = snap !== undefined && snap.digest !== undefined && snapshotDigestMatches(snap) ? snap.version : 0;
      this.#versions.set(key, at);
    }
    return at >= version;
  }
}

/** The commands whose every event is removed now or before: their records go with them. */
async function recordsToDelete(host: RetentionHost, events: readonly Expired[], removedNow: ReadonlySet<string>): Promise<string[]> {
  const load = host.stored.loadEvents?.bind(host.stored);
  // A repository that cannot load events by uuid keeps every record (what they hold is not known to be gone).
  if (load === undefined) return [];
  const commands = new Set<string>();
  for (const e of events) if (e.commandUuid !== undefined) commands.add(e.commandUuid);
  const out: string[] = [];
  for (const commandUuid of commands) {
    const rec = await host.commandStore.get(commandUuid);
    if (rec === undefined) continue;
    const stored = await load(rec.eventUuids);
    const gone = (e: Event) => removedNow.has(e.eventUuid) || (e.domain === REMOVED_EVENT.domain && e.name === REMOVED_EVENT.name);
    if (stored.length === rec.eventUuids.length && stored.every(gone)) out.push(commandUuid);
  }
  return out;
}

async function countCommandRecords(host: RetentionHost, events: readonly Expired[], removing: ReadonlySet<string>): Promise<number> {
  return (await recordsToDelete(host, events, removing)).length;
}

async function deleteCommandRecords(host: RetentionHost, events: readonly Expired[]): Promise<number> {
  let n = 0;
  for (const commandUuid of await recordsToDelete(host, events, new Set())) if (await host.commandStore.delete(commandUuid)) n++;
  return n;
}

/** The log entries older than the LogStore's retention, one page at a time (a LogStore without deleteBefore). */
async function* expiredLogs(host: RetentionHost, before: number): AsyncGenerator<number[], void, undefined> {
  let cursor: string | undefined;
  for (;;) {
    const page = await host.logStore.list({ limit: 1000, ...(cursor === undefined ? {} : { cursor }) });
    yield page.items.filter((e) => e.createdAt < before).map((e) => e.id);
    if (page.nextCursor === undefined || page.nextCursor === null) return;
    cursor = page.nextCursor;
  }
}

async function countExpiredLogs(host: RetentionHost, at: number): Promise<number> {
  let n = 0;
  for await (const ids of expiredLogs(host, at - host.logRetainForMs! * 1e6)) n += ids.length;
  return n;
}

async function deleteExpiredLogs(host: RetentionHost, at: number): Promise<number> {
  const before = at - host.logRetainForMs! * 1e6;
  if (host.logStore.deleteBefore !== undefined) return host.logStore.deleteBefore(before);
  let n = 0;
  for await (const ids of expiredLogs(host, before)) for (const id of ids) if (await host.logStore.delete(id)) n++;
  return n;
}

/** Overwrites what the deleted bytes left behind, once per file or schema. */
async function scrub(host: RetentionHost): Promise<void> {
  const scopes = new Set<string>();
  for (const store of host.stores()) {
    if (!canScrubStorage(store)) continue;
    const scope = store.storageScope();
    if (scopes.has(scope)) continue;
    scopes.add(scope);
    await store.scrubStorage();
  }
}

function sortedRecord(r: Record<string, number>): Record<string, number> {
  return Object.fromEntries(Object.entries(r).sort(([a], [b]) => (a < b ? -1 : 1)));
}
