/**
 * The command record and idempotency on the dispatch path: the record a
 * command leaves (audit, and the outcome a duplicate replays), the look for an
 * earlier outcome under a caller's commandUuid, the replay of a succeeded one,
 * and the in-process serialisation of duplicates where the store offers no claims.
 */
import type { ReadQuery } from "./command-events.js";
import { newUuid, nowNs } from "../model/clock.js";
import { errorMessage, MnemeError } from "../model/errors.js";
import { KeyedLock } from "../model/keyed-lock.js";
import type { CommandType } from "../model/tokens.js";
import type { CommandEnvelope, Event, RequestContext } from "../model/types.js";
import type { DispatchResult } from "../model/facade-handle.js";
import { asErasedIn, withoutPersonalFields } from "../privacy/command-payloads.js";
import type { PersonalDataProtection } from "../privacy/personal-data-protection.js";
import type { CommandRecord, CommandStatus, CommandStore } from "../store/command-store.js";
import type { EventRepository } from "../store/event-repository.js";
import type { LogStore } from "../store/log-store.js";
import { type ClaimingCommandStore, claimCommand, type HeldClaim, type IdempotencyOptions } from "./command-claim.js";
import { tenantOf } from "./tenancy.js";

/** What a command's record is made of (besides its status, events and error). */
export interface RecordedCommand {
  readonly type: CommandType<any, any>;
  readonly envelope: CommandEnvelope;
  /** The request context as the events and the record keep it. */
  readonly storedCtx: RequestContext;
  /** performance.now() when the dispatch began. */
  readonly t0: number;
  /** The payload its record keeps (personal fields sealed); undefined: personal fields "[redacted]". */
  readonly recordPayload: unknown;
  /** The handler's context, once it runs: the queries it read are what it decided on. */
  readonly ctx?: { readonly queries?: { readQueries(): readonly ReadQuery[] | undefined } | undefined } | undefined;
}

/** The record of a command. */
export function commandRecord(
  c: RecordedCommand,
  status: CommandStatus,
  eventUuids: string[],
  error: MnemeError | undefined,
): CommandRecord {
  const rec: CommandRecord = {
    commandUuid: c.envelope.commandUuid,
    domain: c.envelope.domain,
    name: c.envelope.name,
    tenantUuid: tenantOf(c.storedCtx),
    reqCtx: c.storedCtx,
    payload: c.recordPayload ?? withoutPersonalFields(c.type, c.envelope.payload),
    status,
    eventUuids,
    createdAt: nowNs(),
    durationMicros: Math.round((performance.now() - c.t0) * 1000),
  };
  if (error !== undefined) rec.error = { code: error.code, message: error.message };
  const read = c.ctx?.queries?.readQueries();
  if (read !== undefined) rec.decidedOn = { queries: read.map((q) => ({ items: q.items.map((i) => ({ ...i })), position: q.position })) };
  return rec;
}

export class CommandRecords {
  constructor(
    readonly commandStore: CommandStore,
    readonly eventRepository: EventRepository,
    readonly personalData: PersonalDataProtection,
    readonly logStore: LogStore,
    /** The command store when it offers claims (exactly one run of duplicates across instances), else undefined. */
    readonly claims: ClaimingCommandStore | undefined,
    readonly idempotency: Required<IdempotencyOptions>,
    readonly instanceId: string,
  ) {}

  /** Records the command's outcome; false (logged) when the store failed: the events are committed regardless. */
  async record(c: RecordedCommand, status: CommandStatus, events: readonly Event[], error: MnemeError | undefined): Promise<boolean> {
    try {
      await this.commandStore.record(
        commandRecord(
          c,
          status,
          events.map((e) => e.eventUuid),
          error,
        ),
      );
    } catch (e) {
      // The events are committed: an audit failure must not turn success into an error. It is logged instead.
      await this.logStore
        .append({
          level: "error",
          message: `recording command ${c.envelope.commandUuid} failed: ${errorMessage(e)}`,
          source: "mneme.dispatch",
        })
        .catch(() => undefined);
      return false;
    }
    return true;
  }

  /**
   * Claims the commandUuid before the handler runs: of duplicates on every
   * instance sharing the store, one runs; the others wait for its record and
   * replay it. The held claim, or the replayed outcome.
   */
  async claim<R>(type: CommandType<any, any>, envelope: CommandEnvelope): Promise<HeldClaim | DispatchResult<R>> {
    const claimant = {
      // The instance, and the attempt: two duplicates in one instance are two claimants too.
      owner: `${this.instanceId}/${newUuid()}`,
      leaseMs: this.idempotency.leaseMs,
      domain: type.domain,
      name: type.name,
      tenantUuid: tenantOf(envelope.reqCtx),
    };
    const got = await claimCommand(this.claims!, envelope.commandUuid, claimant, this.idempotency.waitMs, (message) =>
      this.#logClaim(message),
    );
    if ("record" in got) return this.replay<R>(type, envelope, got.record);
    return got.claim;
  }

  /**
   * What the command store holds under the envelope's commandUuid: undefined
   * when nothing; the recorded outcome (`replayed`) when it succeeded;
   * "cleared" when an earlier attempt failed or was denied (its record is
   * deleted so that this attempt records its own). A succeeded record of
   * another command, tenant or payload is CONFLICT: one commandUuid names one request.
   */
  async recorded<R>(type: CommandType<any, any>, envelope: CommandEnvelope): Promise<DispatchResult<R> | "cleared" | undefined> {
    const uuid = envelope.commandUuid;
    const rec = await this.commandStore.get(uuid);
    if (rec === undefined) return undefined;
    if (rec.status !== "succeeded") {
      // A failed or denied attempt produced nothing: this one runs and records its own outcome.
      await this.commandStore.delete(uuid);
      return "cleared";
    }
    return this.replay(type, envelope, rec);
  }

  /**
   * The outcome of a succeeded record (`replayed`, its events read back). A
   * record of another command, tenant or payload is CONFLICT: one commandUuid
   * names one request.
   */
  async replay<R>(type: CommandType<any, any>, envelope: CommandEnvelope, rec: CommandRecord): Promise<DispatchResult<R>> {
    const uuid = envelope.commandUuid;
    // Personal fields are sealed with a fresh IV each time: compared opened, and a field erased since counts as equal.
    // (Also without a declaration: a process manager's command is recorded with the values its outbox sealed.)
    const recorded = (await this.personalData.openPayload(rec.payload)).payload;
    const sameRequest =
      rec.domain === envelope.domain &&
      rec.name === envelope.name &&
      rec.tenantUuid === tenantOf(envelope.reqCtx) &&
      canonicalJson(recorded) === canonicalJson(asErasedIn(type, recorded, envelope.payload));
    if (!sameRequest) {
      throw new MnemeError(
        "CONFLICT",
        `commandUuid ${uuid} is recorded for another request (command, tenant or payload differ): one commandUuid names one command`,
      );
    }
    const events = rec.eventUuids.length === 0 ? [] : ((await this.eventRepository.loadEvents?.(rec.eventUuids)) ?? []);
    return { commandUuid: uuid, events, handlerErrors: [], replayed: true };
  }

  /** A claim that could not be renewed: logged (the record's primary key still keeps one outcome). */
  #logClaim(message: string): void {
    void this.logStore.append({ level: "warn", message, source: "mneme.dispatch" }).catch(() => undefined);
  }
}

/** Per command store (so facades sharing one serialise too): one dispatch at a time per given commandUuid. */
const COMMAND_LOCKS = new WeakMap<CommandStore, KeyedLock>();
export function commandLocks(store: CommandStore): KeyedLock {
  let locks = COMMAND_LOCKS.get(store);
  if (locks === undefined) COMMAND_LOCKS.set(store, (locks = new KeyedLock()));
  return locks;
}

/** JSON with object keys sorted: a payload read back from Postgres jsonb compares equal to the one sent. */
function canonicalJson(v: unknown): string {
  return JSON.stringify(v, (_k, x: unknown) =>
    x !== null && typeof x === "object" && !Array.isArray(x)
      ? Object.fromEntries(Object.entries(x as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
      : x,
  );
}
