import { AsyncLocalStorage } from "node:async_hooks";
import { errorMessage, isCommandInProgress, isMnemeError, MnemeError } from "../model/errors.js";
import type { Event } from "../model/types.js";
import type { ReadmodelCollection } from "../store/readmodel-store-backend.js";
import { BaseReadmodel, type ReadmodelFacade } from "../readmodel/base-readmodel.js";
import type { CommandPayloadProtection } from "../privacy/command-payloads.js";
import { collectionInScope, currentTenantScope, inTenantScope } from "../readmodel/tenant-scope.js";
import { deleteKeys } from "../readmodel/readmodel-generations.js";
import { type HandlerPart, runnerOf } from "../readmodel/base-event-handler.js";
import { backoffMs, dueOrderOf, PERMANENT_FAILURES, retryPolicy, type OutboxEntry, type RetryPolicy } from "./outbox-entry.js";
import { OutboxHandOff } from "./outbox-handoff.js";
import { type OutboxDelivery, type OutboxFilter, type OutboxHandlerOptions, reactionOptions } from "./outbox-options.js";

export { type OutboxDelivery, type OutboxFilter, type OutboxHandlerOptions, reactionOptions } from "./outbox-options.js";

/** Causes of a failed delivery that are no fault of the entry: the entry is tried again later and no attempt is counted. */
const NOT_THE_ENTRYS_FAULT = new Set(["UNAVAILABLE", "NOT_STARTED", "STORE_CLOSED"]);

/**
 * The outbox part of a process manager or reactor. The handler (a
 * BaseReadmodel: a state restorer with a durable checkpoint, listed and
 * controlled by the Runtime) records its reactions to an event here, in the
 * same transaction as its checkpoint; the outbox's worker delivers them
 * (dispatches a command, runs an effect: the handler's reaction part) at or
 * after their due time, with retries, backoff and a dead-letter list. The
 * Runtime and operators reach it as `handler.outbox`.
 *
 * The worker runs only in the instance that processes the handler (state
 * `running`: with Postgres or SQLite, the holder of its processing lock).
 *
 * Replays react to nothing: the outbox keeps a second checkpoint, the
 * reaction horizon (the last position whose reactions were recorded), which a
 * restore from zero does not reset; an event at or below it only rebuilds
 * state. So a restore from zero, or a crash and a replay, sends nothing twice
 * whether or not the command store still holds the commands sent before.
 */
export class Outbox implements HandlerPart {
  /** The retry policy of this outbox. */
  readonly retry: RetryPolicy;
  readonly #h: BaseReadmodel;
  readonly #deliver: (entry: OutboxEntry) => Promise<void>;
  readonly #payloads: CommandPayloadProtection | undefined;
  readonly #clock: () => number;
  readonly #pollMs: number;
  readonly #concurrency: number;
  /** Entries of one lane go strictly in position order: a failed entry holds the rest of its lane until it is delivered or dead. */
  readonly #ordered: boolean;
  readonly #prepare: OutboxDelivery["prepare"];
  #horizon = 0;
  /** Whether #horizon is the stored one (only the lock holder writes it; read again after a rollback or a (re)start). */
  #horizonKnown = false;
  #batchHorizon = 0;
  /**
   * The entries the batch recorded, with the tenant their event's writes carry:
   * written together when it ends (a write per tenant, not one per event).
   */
  #batchEntries = new Map<string, { entry: OutboxEntry; tenant: string | undefined }>();
  /** Whether the batch only added entries due now, none scheduled, and cancelled none: the worker may take them from memory. */
  #batchWhole = true;
  readonly #handOff = new OutboxHandOff();
  /** The last position whose reactions were written: the worker waits until the batch that wrote them has committed. */
  #emittedUpTo = 0;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #stopped = true;
  #draining: Promise<number | undefined> | undefined;
  /** Set when entries may have been added while a round was reading: the round reads again. */
  #again = false;
  /** The entries being delivered by this instance's worker. */
  readonly #inFlight = new Set<string>();
  /**
   * Runs a function in the async context the outbox was made in. The worker's timers are
   * set from inside batches (a backend transaction, a rebuild's next generation): a timer
   * keeps the context it was set in, and the worker's dispatches, and the deliveries they
   * start, must not run in it.
   */
  readonly #outside: <R>(fn: () => R) => R = AsyncLocalStorage.snapshot();

  /**
   * The outbox of `handler`, whose name and domain `options` gives (checked by
   * `reactionOptions`); `deliver` dispatches an entry's command or runs its
   * effect, and throws to count a failed attempt. `payloads` seals the personal
   * fields of the commands kept here and opens them for listings. `delivery`:
   * ordered lanes, a page's preparation (see OutboxDelivery).
   */
  constructor(
    handler: BaseReadmodel,
    options: OutboxHandlerOptions,
    deliver: (entry: OutboxEntry) => Promise<void>,
    payloads: CommandPayloadProtection | undefined,
    delivery: OutboxDelivery = {},
  ) {
    reactionOptions(options);
    this.#ordered = delivery.ordered === true;
    this.#prepare = delivery.prepare;
    this.#h = handler;
    this.#deliver = deliver;
    this.#payloads = payloads;
    this.#concurrency = options.concurrency ?? 1;
    this.retry = retryPolicy(options.retry);
    this.#pollMs = options.pollMs ?? 1000;
    this.#clock = options.clock ?? Date.now;
  }

  /**
   * The `dueOrder` of an entry due at `dueAt`: by due time, or (ordered) by
   * position alone, so an entry put back for a later attempt stays ahead of its lane.
   */
  orderOf(dueAt: number, position: number, index: number): string {
    return dueOrderOf(this.#ordered ? 0 : dueAt, position, index);
  }

  /** The current time of this outbox's clock (ms since the epoch). */
  now(): number {
    return this.#clock();
  }

  /**
   * The outbox: outside the readmodel's generations, so a restore from zero
   * neither clears nor rebuilds it. Entries carry the tenant of their event, so
   * a tenant's view of this handler (`ctx.readmodel`) lists only its own.
   */
  #outbox(): ReadmodelCollection<OutboxEntry> {
    return collectionInScope<OutboxEntry>(this.#h.readmodelStoreBackend, `${this.#h.name}~outbox`, this.#h.name);
  }

  /** The checkpoint key of the reaction horizon. */
  #horizonKey(): string {
    return `${this.#h.name}~reacted`;
  }

  // ---------------------------------------------------------------- inside a batch

  /** Inside the handler's batch: reads the reaction horizon. */
  async beforeBatch(): Promise<void> {
    if (!this.#horizonKnown) {
      this.#horizon = await this.#h.readmodelStoreBackend.getCheckpoint(this.#horizonKey());
      this.#horizonKnown = true;
    }
    this.#batchHorizon = this.#horizon;
    this.#batchEntries = new Map();
    this.#batchWhole = true;
  }

  /** Inside the handler's batch: writes its entries and moves the reaction horizon past them. */
  async afterBatch(): Promise<void> {
    // The batch before this one has committed: its entries are the worker's now.
    this.#handOff.promote(this.#h.lastPosition);
    if (this.#batchEntries.size > 0) await this.#writeBatchEntries();
    if (this.#batchHorizon > this.#horizon) {
      await this.#h.readmodelStoreBackend.setCheckpoint(this.#horizonKey(), this.#batchHorizon);
      this.#emittedUpTo = this.#batchHorizon;
      this.#horizon = this.#batchHorizon;
      this.#again = true;
      if (!this.#stopped) this.#wakeSoon(0);
    }
  }

  async #writeBatchEntries(): Promise<void> {
    const byTenant = new Map<string | undefined, [string, OutboxEntry][]>();
    const all: OutboxEntry[] = [];
    for (const [id, { entry, tenant }] of this.#batchEntries) {
      const group = byTenant.get(tenant);
      if (group === undefined) byTenant.set(tenant, [[id, entry]]);
      else group.push([id, entry]);
      all.push(entry);
    }
    this.#batchEntries = new Map();
    this.#handOff.batchWritten(this.#batchHorizon, all, this.#batchWhole);
    for (const [tenant, entries] of byTenant)
      await inTenantScope(tenant === undefined ? {} : { writeTenantUuid: tenant }, () => this.#outbox().putMany(entries));
  }

  /** The handler's batch was rolled back. */
  discardBatch(): void {
    // afterBatch may have raised it before a commit that failed: read the stored one next time.
    this.#horizonKnown = false;
    this.#batchEntries = new Map();
    // A commit that failed may have committed or not: the worker lists the store.
    this.#handOff.discard();
  }

  /** Whether `event`'s reactions were recorded before: it only rebuilds state now. Valid inside a handler function. */
  isReplay(event: Event): boolean {
    return event.position <= this.#horizon;
  }

  /**
   * Records the reactions to `event` (inside its batch's transaction): the
   * ids in `cancel` are removed, the entries added (written with the batch's
   * others when it ends). Nothing happens for a replayed event. Returns
   * whether they were recorded.
   */
  async record(event: Event, entries: readonly OutboxEntry[], cancel: readonly string[] = []): Promise<boolean> {
    if (this.isReplay(event)) return false;
    if (cancel.length > 0) {
      this.#batchWhole = false;
      const outbox = this.#outbox();
      for (const id of cancel) {
        this.#batchEntries.delete(id);
        await outbox.delete(id);
      }
    }
    return this.add(event, entries);
  }

  /** `record` without cancels, at once: the entries are written with the batch's others when it ends. */
  add(event: Event, entries: readonly OutboxEntry[]): boolean {
    if (this.isReplay(event)) return false;
    const tenant = currentTenantScope()?.writeTenantUuid;
    const now = this.#clock();
    for (const entry of entries) {
      this.#batchEntries.set(entry.id, { entry, tenant });
      // A scheduled command may be cancelled until it is sent: only the store knows whether it still is.
      if (entry.dueAt > now || entry.status !== "pending" || entry.scheduled) this.#batchWhole = false;
    }
    if (event.position > this.#batchHorizon) this.#batchHorizon = event.position;
    return true;
  }

  // ---------------------------------------------------------------- lifecycle

  /** The handler goes live (a start or a restoration): the worker runs. */
  starting(): void {
    this.#stopped = false;
    this.#horizonKnown = false;
    this.#handOff.invalidate();
    this.#wakeSoon(0);
  }

  /** The handler stops: the worker stops, after the round it is in. */
  async stopping(): Promise<void> {
    this.#stopped = true;
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
    await this.#draining?.catch(() => undefined);
  }

  #wakeSoon(ms: number): void {
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    const t = setTimeout(() => {
      this.#timer = undefined;
      void this.#outside(() => this.#tick());
    }, ms);
    (t as { unref?: () => void }).unref?.();
    this.#timer = t;
  }

  async #tick(): Promise<void> {
    if (this.#stopped) return;
    let next = this.#pollMs;
    // Another instance may process the handler meanwhile: what was handed over here may be stale then.
    if (this.#h.state !== "running") this.#handOff.invalidate();
    else {
      if (this.#h.lastPosition < this.#emittedUpTo) {
        // The batch that wrote the entries has not committed yet (or a rebuild replays below them).
        next = Math.min(this.#pollMs, 5);
      } else {
        try {
          const due = await this.#drain();
          if (due !== undefined) next = Math.max(0, Math.min(this.#pollMs, due - this.#clock()));
        } catch {
          // The outbox could not be read (the database went away): the next poll tries again.
        }
      }
    }
    if (!this.#stopped && this.#timer === undefined) this.#wakeSoon(next);
  }

  /**
   * Delivers every entry that is due now, in due order, and resolves when
   * done (an entry that fails is put back with its next due time, or dead).
   * Does nothing unless the handler is running here. The worker does this by
   * itself; tests and shutdown code may call it to wait for it.
   */
  async drain(): Promise<void> {
    await this.#drain();
  }

  #drain(): Promise<number | undefined> {
    if (this.#draining !== undefined) {
      this.#again = true;
      return this.#draining;
    }
    const run = (async () => {
      let next: number | undefined;
      do {
        this.#again = false;
        next = await this.#runDue();
      } while (this.#again && this.#h.state === "running" && !this.#stopped);
      return next;
    })().finally(() => {
      this.#draining = undefined;
    });
    this.#draining = run;
    return run;
  }

  /** Delivers the due entries; returns the due time of the next pending one, if any. */
  async #runDue(): Promise<number | undefined> {
    const outbox = this.#outbox();
    // Enough entries per page to keep every worker busy for several deliveries.
    const pageSize = Math.max(100, this.#concurrency * 16);
    let offset = 0;
    for (;;) {
      if (this.#h.state !== "running") return undefined;
      const { page, handed } = await this.#nextPage(outbox, offset, pageSize);
      const now = this.#clock();
      const { lanes, next } = this.#lanesOf(page, now);
      if (lanes.length === 0) {
        // Ordered: a full page of entries waiting for their next attempt may hide due ones behind it.
        if (!handed && this.#ordered && page.length === pageSize) {
          offset += pageSize;
          continue;
        }
        return next;
      }
      offset = 0;
      await this.#prepareAll(lanes);
      const { blocked, delivered } = await this.#deliverLanes(outbox, lanes, now);
      // A handed-over page not delivered whole left entries that only the store knows now.
      if (handed && delivered < page.length) this.#handOff.invalidate();
      if (blocked) return now + this.retry.initialDelayMs;
      if (this.#h.state !== "running") return undefined;
      // Every due entry of the page is delivered, put back for later, or dead: read on.
    }
  }

  /** The next page: the entries handed over by committed batches, or (when the store must be read) a listing. */
  async #nextPage(
    outbox: ReadmodelCollection<OutboxEntry>,
    offset: number,
    pageSize: number,
  ): Promise<{ page: OutboxEntry[]; handed: boolean }> {
    this.#handOff.promote(this.#h.lastPosition);
    const handed = this.#handOff.take(pageSize, this.#clock(), this.#pollMs);
    if (handed !== undefined) return { page: handed, handed: true };
    this.#handOff.listing(this.#clock());
    const page = await outbox.list({ where: { status: "pending" }, orderBy: "dueOrder", offset, limit: pageSize });
    if (page.length === 0 && offset === 0) this.#handOff.listedEmpty();
    return { page, handed: false };
  }

  /** Delivers the lanes side by side; `blocked` when the round must stop (a failure that is not an entry's). */
  async #deliverLanes(
    outbox: ReadmodelCollection<OutboxEntry>,
    lanes: OutboxEntry[][],
    now: number,
  ): Promise<{ blocked: boolean; delivered: number }> {
    let blocked = false;
    const delivered: string[] = [];
    const worker = async (): Promise<void> => {
      for (let lane = lanes.shift(); lane !== undefined && !blocked; lane = lanes.shift()) {
        for (const entry of lane) {
          if (blocked || this.#h.state !== "running") return;
          const outcome = await this.#attempt(outbox, entry, now);
          if (outcome === "delivered") delivered.push(entry.id);
          if (outcome === "unavailable") blocked = true;
          // Ordered: the rest of the lane waits for the entry that failed.
          if (outcome === "failed" && this.#ordered) break;
        }
      }
    };
    try {
      await Promise.all(Array.from({ length: Math.min(this.#concurrency, lanes.length) }, worker));
    } finally {
      await this.#forget(outbox, delivered);
    }
    return { blocked, delivered: delivered.length };
  }

  /**
   * The due entries of `page`, one lane per process in due order (an ordered
   * outbox leaves out a lane's entries behind one not due yet), and the
   * earliest due time among those not due.
   */
  #lanesOf(page: readonly OutboxEntry[], now: number): { lanes: OutboxEntry[][]; next: number | undefined } {
    const lanes = new Map<string, OutboxEntry[]>();
    const held = new Set<string>();
    let next: number | undefined;
    for (const e of page) {
      const key = e.processId ?? e.correlationId;
      if (e.dueAt > now) {
        next = next === undefined ? e.dueAt : Math.min(next, e.dueAt);
        if (this.#ordered) held.add(key);
        continue;
      }
      if (held.has(key)) continue;
      const lane = lanes.get(key);
      if (lane === undefined) lanes.set(key, [e]);
      else lane.push(e);
    }
    return { lanes: [...lanes.values()], next };
  }

  async #prepareAll(lanes: readonly OutboxEntry[][]): Promise<void> {
    try {
      await this.#prepare?.(lanes.flat());
    } catch {
      // Nothing read ahead: each delivery reads for itself (and fails on its own if it must).
    }
  }

  /**
   * Deletes the entries of a page that were delivered, in one fenced
   * transaction (not one per entry: a page's deliveries run side by side and
   * their writes would queue behind each other), with one statement where the
   * backend has `deleteMany`. A crash before it commits
   * delivers them again: at least once, as always (a command's replay, the
   * broker's dedupe of a message id). They stay in flight until then, so a
   * cancel cannot remove what was sent.
   */
  async #forget(outbox: ReadmodelCollection<OutboxEntry>, ids: readonly string[]): Promise<void> {
    if (ids.length === 0) return;
    try {
      await runnerOf(this.#h).fencedWrite(async () => {
        await deleteKeys(outbox, ids);
      });
    } finally {
      for (const id of ids) this.#inFlight.delete(id);
    }
  }

  /**
   * One delivery of `entry`: "unavailable" when it failed for a reason that is
   * not the entry's (stop this round), "failed" when it was put back or is dead,
   * "delivered" (still in flight: the caller deletes it with the page's others).
   */
  async #attempt(
    outbox: ReadmodelCollection<OutboxEntry>,
    entry: OutboxEntry,
    now: number,
  ): Promise<"delivered" | "failed" | "unavailable"> {
    // Until the entry is deleted or put back, a cancel in this instance is refused (it would come too late).
    this.#inFlight.add(entry.id);
    let delivered = false;
    try {
      try {
        await this.#deliver(entry);
        delivered = true;
      } catch (err) {
        if (isMnemeError(err) && NOT_THE_ENTRYS_FAULT.has(err.code)) return "unavailable";
        // Fenced like a batch: an instance that lost the handler's lock writes nothing more to its outbox.
        await runnerOf(this.#h).fencedWrite(async () => {
          // Cancelled or discarded meanwhile (by another instance): do not bring it back.
          const current = await outbox.get(entry.id);
          if (current === undefined) return;
          // In progress on another live instance (a claim that holds): no failure, tried again later without an attempt.
          const inProgress = isCommandInProgress(err);
          const attempts = inProgress ? current.attempts : current.attempts + 1;
          const dead = !inProgress && (attempts >= this.retry.maxAttempts || (isMnemeError(err) && PERMANENT_FAILURES.has(err.code)));
          const next = dead ? current.dueAt : now + backoffMs(this.retry, Math.max(1, attempts));
          await outbox.put(entry.id, {
            ...current,
            status: dead ? "dead" : "pending",
            attempts,
            lastError: errorMessage(err),
            lastAttemptAt: now,
            dueAt: next,
            dueOrder: this.orderOf(next, current.position, current.index),
          });
        });
        return "failed";
      }
      return "delivered";
    } finally {
      if (!delivered) this.#inFlight.delete(entry.id);
    }
  }

  // ---------------------------------------------------------------- the Runtime's view

  /**
   * An entry as it is handed out: every value sealed in it opened (its
   * command's personal fields, a consumer's message body), "[erased]" once
   * their subject was forgotten. The stored entry keeps them sealed.
   */
  async #opened(e: OutboxEntry): Promise<OutboxEntry>;
  async #opened(e: OutboxEntry | undefined): Promise<OutboxEntry | undefined>;
  async #opened(e: OutboxEntry | undefined): Promise<OutboxEntry | undefined> {
    if (e === undefined || this.#payloads === undefined) return e;
    return (await this.#payloads.open(e)).payload as OutboxEntry;
  }

  /** The entries of this outbox, due first (ties by id). */
  async list(filter: OutboxFilter = {}): Promise<OutboxEntry[]> {
    const where: Record<string, string | boolean> = {};
    if (filter.status !== undefined) where.status = filter.status;
    if (filter.scheduled !== undefined) where.scheduled = filter.scheduled;
    if (filter.tenantUuid !== undefined) where.tenantUuid = filter.tenantUuid;
    const page = await this.#outbox().list({ where, orderBy: "dueOrder", offset: filter.offset ?? 0, limit: filter.limit ?? 1000 });
    return Promise.all(page.map((e) => this.#opened(e)));
  }

  /** How many entries are pending, scheduled (pending and made by `ctx.schedule`) and dead. */
  async counts(): Promise<{ pending: number; scheduled: number; dead: number }> {
    const outbox = this.#outbox();
    const [pending, scheduled, dead] = await Promise.all([
      outbox.count({ status: "pending" }),
      outbox.count({ status: "pending", scheduled: true }),
      outbox.count({ status: "dead" }),
    ]);
    return { pending, scheduled, dead };
  }

  /** The entry `id`, if this handler has it. */
  async get(id: string): Promise<OutboxEntry | undefined> {
    return this.#opened(await this.#outbox().get(id));
  }

  /**
   * Cancels a pending scheduled command. NOT_FOUND unless this handler has it
   * pending; INVALID_STATE while this instance is sending it. (Another
   * instance's worker may be sending it at that moment: the command is then
   * sent and its entry is gone either way.) Returns the cancelled entry.
   */
  async cancelScheduled(commandUuid: string): Promise<OutboxEntry> {
    const outbox = this.#outbox();
    const e = await outbox.get(commandUuid);
    if (e === undefined || !e.scheduled || e.status !== "pending")
      throw new MnemeError("NOT_FOUND", `${this.#h.name} has no pending scheduled command ${commandUuid}`);
    if (this.#inFlight.has(commandUuid))
      throw new MnemeError(
        "INVALID_STATE",
        `${this.#h.name} is sending the scheduled command ${commandUuid} now: it can no longer be cancelled`,
      );
    await outbox.delete(commandUuid);
    return this.#opened(e);
  }

  /**
   * Makes a dead entry pending again, due now, with its attempts reset.
   * NOT_FOUND unless it is dead here; INVALID_STATE when some of its sealed
   * values were erased (their subject was forgotten): it could only fail again.
   */
  async retryDead(id: string): Promise<OutboxEntry> {
    const outbox = this.#outbox();
    const e = await outbox.get(id);
    if (e === undefined || e.status !== "dead") throw new MnemeError("NOT_FOUND", `${this.#h.name} has no dead entry ${id}`);
    const erased = this.#payloads === undefined ? 0 : (await this.#payloads.open(e)).erased;
    if (erased > 0)
      throw new MnemeError(
        "INVALID_STATE",
        `${this.#h.name} does not retry the dead entry ${id}: ${erased} of its personal values were erased (their subject was forgotten); discard it`,
      );
    const { lastError: _e, lastAttemptAt: _a, ...rest } = e;
    const now = this.#clock();
    const again: OutboxEntry = { ...rest, status: "pending", attempts: 0, dueAt: now, dueOrder: this.orderOf(now, e.position, e.index) };
    await outbox.put(id, again);
    this.#handOff.invalidate();
    if (!this.#stopped) this.#wakeSoon(0);
    return this.#opened(again);
  }

  /**
   * Keeps `entry` as a dead letter, outside any batch (a consumer's message
   * that failed its last attempt), fenced like the worker's writes.
   */
  async addDeadLetter(entry: OutboxEntry): Promise<void> {
    if (entry.status !== "dead") throw new MnemeError("INVALID_REQUEST", `addDeadLetter takes a dead entry, got ${entry.status}`);
    const outbox = this.#outbox();
    await runnerOf(this.#h).fencedWrite(() => outbox.put(entry.id, entry));
  }

  /** Deletes a dead entry: its command is never sent, its effect never run. NOT_FOUND unless it is dead here. */
  async discardDead(id: string): Promise<OutboxEntry> {
    const outbox = this.#outbox();
    const e = await outbox.get(id);
    if (e === undefined || e.status !== "dead") throw new MnemeError("NOT_FOUND", `${this.#h.name} has no dead entry ${id}`);
    await outbox.delete(id);
    return this.#opened(e);
  }
}

/** A process manager or reactor: a readmodel composed with an outbox part. */
export type OutboxHandler = BaseReadmodel & { readonly outbox: Outbox };

/** Whether `h` is a process manager or reactor (it has an outbox). */
export function isOutboxHandler(h: unknown): h is OutboxHandler {
  return h instanceof BaseReadmodel && (h as { outbox?: unknown }).outbox instanceof Outbox;
}

/** The facade's protection of personal fields in command payloads, when it has one. */
export function commandPayloadsOf(facade: ReadmodelFacade): CommandPayloadProtection | undefined {
  return (facade as { commandPayloads?: CommandPayloadProtection }).commandPayloads;
}
