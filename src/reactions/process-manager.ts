import { MnemeError } from "../model/errors.js";
import type { CommandRef, DispatchOptions, DispatchResult } from "../model/facade-handle.js";
import type { HandlerContext } from "../model/event-handler.js";
import type { EventType } from "../model/tokens.js";
import type { Event, RequestContext } from "../model/types.js";
import { serviceRequestContext, type ServicePrincipal } from "../model/service-principal.js";
import { jsonSafeProblem } from "../store/json-safe.js";
import type { CommandPayloadProtection } from "../privacy/command-payloads.js";
import { BaseReadmodel, type ReadmodelFacade } from "../readmodel/base-readmodel.js";
import { dueOrderOf, dueTimeOf, type OutboxEntry, type RetryPolicy } from "./outbox-entry.js";
import { commandPayloadsOf, Outbox, type OutboxHandlerOptions, reactionOptions } from "./outbox.js";
import { correlationOf, reactionCommandUuid, type ChainRequestContext } from "./reaction-ids.js";
import { registerReactionService } from "./reaction-service.js";

/** What a process manager needs of the facade: its stores and `dispatch` (the Facade has both). */
export interface ReactionFacade extends ReadmodelFacade {
  dispatch<P, R = unknown>(type: CommandRef<P, R>, payload: P, opts?: DispatchOptions): Promise<DispatchResult<R>>;
}

/** Configuration of a process manager. */
export interface ProcessManagerOptions<S> extends OutboxHandlerOptions {
  /** The state of a process that has seen no event yet. */
  readonly initialState: () => S;
  /** The process an event belongs to (its state's key). Default: the event's correlation id. */
  readonly correlate?: (event: Event) => string;
  /**
   * The request context of the commands sent for `event`; `correlationId`
   * and `causationId` are added to it. Default: the event's own (its sender,
   * targeting the event's tenant), without its target aggregate and version.
   */
  readonly reqCtx?: (event: Event) => RequestContext;
  /**
   * The service principal the commands are sent as (`servicePrincipal({ name,
   * commands })`): `{ senderService }` in the event's tenant, allowed exactly
   * its commands. Not with `reqCtx`.
   */
  readonly service?: ServicePrincipal;
}

/** What a process manager's step receives besides the state, the payload and the event. */
export interface ProcessContext extends HandlerContext {
  /** The process (the key of its state): `correlate(event)`. */
  readonly processId: string;
  /** The chain's correlation id, passed on to every command sent here. */
  readonly correlationId: string;
  /** True when the event's reactions were recorded before (a replay): what the step sends is dropped, only its state counts. */
  readonly replaying: boolean;
  /**
   * Sends a command once the event is handled (after the step's transaction
   * commits), with a deterministic commandUuid, which it returns.
   */
  dispatch<P>(type: CommandRef<P>, payload: P): string;
  /**
   * Sends a command at or after `at` (a Date or ms since the epoch): durable,
   * listed and cancellable through the Runtime. Returns its commandUuid.
   */
  schedule<P>(type: CommandRef<P>, payload: P, opts: { at: Date | number }): string;
  /** Cancels a scheduled command of this process manager that has not fired (by the uuid `schedule` returned). */
  cancelScheduled(commandUuid: string): void;
  /** Ends the process: its state is deleted after this step (a later event of it starts from `initialState`). */
  complete(): void;
}

/** One step of a process: the next state (or nothing to keep the state as it is). */
export type ProcessStep<S, P> = (ctx: ProcessContext, state: S, payload: P, event: Event<P>) => S | undefined | Promise<S | undefined>;

/** The document a process's state is kept in. */
export interface ProcessStateDocument<S> {
  processId: string;
  state: S;
  /** The position of the last event applied to it. */
  position: number;
}

/**
 * Turns events into commands: per process (by default, per correlation id)
 * a state folded from its events, and steps that dispatch and schedule
 * commands. State, outbox entries and checkpoint commit in one transaction;
 * commands are dispatched afterwards by the outbox worker with deterministic
 * commandUuids (idempotent dispatch), retried with backoff and dead after
 * `retry.maxAttempts` failures. A replay (a crash, a restore from zero)
 * rebuilds the state and sends nothing. Register it like a readmodel.
 * @example
 * const fulfilment = new ProcessManager<{ paid: boolean }>(facade, {
 *   name: "Fulfilment", domain: "Orders", initialState: () => ({ paid: false }),
 *   correlate: (e) => (e.payload as { orderUuid: string }).orderUuid,
 * })
 *   .on(OrderPlaced, (ctx, s, p) => { ctx.dispatch(ReserveStock, { orderUuid: p.orderUuid }); return s; })
 *   .on(PaymentCharged, (ctx, s, p) => { ctx.dispatch(ShipOrder, { orderUuid: p.orderUuid }); return { paid: true }; });
 * facade.registerReadmodel(fulfilment);
 */
export class ProcessManager<S> extends BaseReadmodel {
  /** The outbox part: the commands this process manager sends, with their retries and dead letters (see Outbox). */
  readonly outbox: Outbox;
  readonly #facade: ReactionFacade;
  readonly #initialState: () => S;
  readonly #correlate: (event: Event) => string;
  readonly #reqCtx: ((event: Event) => RequestContext) | undefined;
  readonly #service: ServicePrincipal | undefined;
  readonly #steps = new Set<string>();

  constructor(facade: ReactionFacade, options: ProcessManagerOptions<S>) {
    super(facade, ...reactionOptions(options));
    this.name = options.name;
    this.domain = options.domain;
    const payloads = commandPayloadsOf(facade);
    this.outbox = new Outbox(this, options, (entry) => this.#deliver(entry, payloads), payloads);
    this.addPart(this.outbox);
    if (typeof facade.dispatch !== "function")
      throw new MnemeError("INVALID_EVENT_HANDLER", `process manager ${this.name} needs a facade that dispatches`);
    if (typeof options.initialState !== "function")
      throw new MnemeError("INVALID_EVENT_HANDLER", `process manager ${this.name} needs an initialState function`);
    for (const k of ["correlate", "reqCtx"] as const) {
      if (options[k] !== undefined && typeof options[k] !== "function")
        throw new MnemeError("INVALID_EVENT_HANDLER", `process manager ${this.name}: ${k} must be a function`);
    }
    this.#facade = facade;
    this.#initialState = options.initialState;
    this.#correlate = options.correlate ?? correlationOf;
    this.#reqCtx = options.reqCtx;
    if (options.service !== undefined && options.reqCtx !== undefined)
      throw new MnemeError("INVALID_EVENT_HANDLER", `process manager ${this.name}: give service or reqCtx, not both`);
    this.#service = registerReactionService(facade, `process manager ${this.name}`, options.service);
  }

  /** The retry policy of the outbox. */
  get retry(): RetryPolicy {
    return this.outbox.retry;
  }

  /** Adds the step for events of `type` (one step per event type). */
  on<P>(type: EventType<P>, step: ProcessStep<S, P>): this {
    if (typeof step !== "function") throw new MnemeError("INVALID_EVENT_HANDLER", `${this.name}: a step must be a function`);
    if ((type as { kind?: unknown } | undefined)?.kind !== "event")
      throw new MnemeError("INVALID_EVENT_HANDLER", `${this.name}: on() takes an event type`);
    // One step per event: the index of a command in the event's reactions is what makes its uuid.
    if (this.#steps.has(type.path)) throw new MnemeError("INVALID_EVENT_HANDLER", `${this.name} has a step for ${type.path} already`);
    this.#steps.add(type.path);
    this.addDomainEventHandler(type, (hctx, event, payload) => this.#handle(hctx, event, payload, step as ProcessStep<S, unknown>));
    return this;
  }

  /** The state of process `processId`, or undefined when it has none (not started, or completed). */
  async getState(processId: string): Promise<S | undefined> {
    return (await this.collection<ProcessStateDocument<S>>("state").get(processId))?.state;
  }

  /** The processes with state, by id. */
  listStates(opts: { offset?: number; limit?: number } = {}): Promise<ProcessStateDocument<S>[]> {
    return this.collection<ProcessStateDocument<S>>("state").list(opts);
  }

  async #handle(hctx: HandlerContext, event: Event, payload: unknown, step: ProcessStep<S, unknown>): Promise<void> {
    const processId = this.#correlate(event);
    if (typeof processId !== "string" || processId === "")
      throw new MnemeError("INVALID_REQUEST", `${this.name}: correlate() must return a non-empty string for ${event.domain}.${event.name}`);
    const states = this.collection<ProcessStateDocument<S>>("state");
    const doc = await states.get(processId);
    const replaying = this.outbox.isReplay(event);
    const correlationId = correlationOf(event);
    const entries: OutboxEntry[] = [];
    const cancels: string[] = [];
    let completed = false;
    let open = true;
    const createdAt = this.outbox.now();
    // Due at the event's time (or now, by a clock behind it): a command sent "now" for an event goes
    // before anything the same step scheduled for later, however late the event is handled.
    const dueNow = Math.min(Math.floor(event.createdAt / 1e6), createdAt);
    const add = (type: CommandRef, p: unknown, dueAt: number, scheduled: boolean): string => {
      if (!open) throw new MnemeError("INVALID_STATE", `${this.name}: dispatch and schedule only while the step runs`);
      const entry = this.#entry(event, { processId, correlationId, createdAt }, commandRef(type, this.name), p, {
        dueAt,
        scheduled,
        index: entries.length,
      });
      entries.push(entry);
      return entry.id;
    };
    const ctx: ProcessContext = {
      eventHandlerName: hctx.eventHandlerName,
      restoring: hctx.restoring,
      processId,
      correlationId,
      replaying,
      dispatch: (type, p) => add(type as CommandRef, p, dueNow, false),
      schedule: (type, p, opts) =>
        add(type as CommandRef, p, dueTimeOf((opts as { at: Date | number } | undefined)?.at as Date | number), true),
      cancelScheduled: (commandUuid) => {
        if (!open) throw new MnemeError("INVALID_STATE", `${this.name}: cancelScheduled only while the step runs`);
        if (typeof commandUuid !== "string" || commandUuid === "")
          throw new MnemeError("INVALID_REQUEST", `${this.name}: cancelScheduled takes a commandUuid`);
        cancels.push(commandUuid);
      },
      complete: () => {
        completed = true;
      },
    };
    let next: S | undefined;
    try {
      const r = step(ctx, doc === undefined ? this.#initialState() : doc.state, payload, event);
      next = r instanceof Promise ? await r : r;
    } finally {
      open = false;
    }
    if (completed) {
      if (doc !== undefined) await states.delete(processId);
    } else if (next !== undefined || doc === undefined) {
      await states.put(processId, { processId, state: next ?? doc?.state ?? this.#initialState(), position: event.position });
    }
    await this.outbox.record(event, await this.#sealed(entries, event), cancels);
  }

  /** The outbox entry of a command sent by a step for `event` (its payload checked JSON-safe). */
  #entry(
    event: Event,
    process: { processId: string; correlationId: string; createdAt: number },
    ref: { domain: string; name: string },
    p: unknown,
    at: { dueAt: number; scheduled: boolean; index: number },
  ): OutboxEntry {
    const problem =
      p !== null && typeof p === "object" && !Array.isArray(p) ? jsonSafeProblem(p) : { pointer: "", message: "must be a JSON object" };
    if (problem !== undefined)
      throw new MnemeError(
        "INVALID_REQUEST",
        `${this.name}: the payload of ${ref.domain}.${ref.name} is not JSON-safe at "${problem.pointer}": ${problem.message}`,
      );
    const { dueAt, scheduled, index } = at;
    const { processId, correlationId, createdAt } = process;
    return {
      id: reactionCommandUuid(this.name, event.eventUuid, index),
      kind: "command",
      eventHandlerName: this.name,
      status: "pending",
      scheduled,
      dueAt,
      dueOrder: dueOrderOf(dueAt, event.position, index),
      index,
      attempts: 0,
      createdAt,
      eventUuid: event.eventUuid,
      eventPath: `${event.domain}.${event.name}`,
      position: event.position,
      tenantUuid: event.tenantUuid,
      correlationId,
      processId,
      command: { domain: ref.domain, name: ref.name, payload: p, reqCtx: this.#commandCtx(event, correlationId) },
    };
  }

  /** The entries with their commands' personal fields sealed, as the outbox keeps them (none for a replay: nothing is kept). */
  async #sealed(entries: OutboxEntry[], event: Event): Promise<OutboxEntry[]> {
    const payloads = commandPayloadsOf(this.#facade);
    if (payloads === undefined || entries.length === 0 || this.outbox.isReplay(event)) return entries;
    return Promise.all(
      entries.map(async (e) => {
        const c = e.command;
        if (c === undefined) return e;
        const payload = await payloads.protect(c, c.payload, c.reqCtx, event);
        return payload === c.payload ? e : { ...e, command: { ...c, payload } };
      }),
    );
  }

  #commandCtx(event: Event, correlationId: string): ChainRequestContext {
    let base: RequestContext;
    if (this.#service !== undefined) {
      base = serviceRequestContext(this.#service, event.tenantUuid);
    } else if (this.#reqCtx !== undefined) {
      base = this.#reqCtx(event);
    } else {
      // A service's grant stays with the reaction that declared it: an event a service caused passes on its tenant only.
      const { targetAggregateUuid: _u, targetAggregateVersion: _v, senderService: _s, ...rest } = event.reqCtx;
      base = event.tenantUuid === "" ? rest : { ...rest, targetTenantUuid: event.tenantUuid };
    }
    return { ...dropUndefined(base), correlationId, causationId: event.eventUuid };
  }

  /** The reaction part: dispatches the entry's command (its personal fields opened), with the entry's id as commandUuid. */
  async #deliver(entry: OutboxEntry, payloads: CommandPayloadProtection | undefined): Promise<void> {
    const c = entry.command;
    if (c === undefined) throw new MnemeError("INVALID_STATE", `outbox entry ${entry.id} of ${this.name} holds no command`);
    let payload = c.payload;
    if (payloads !== undefined) {
      const opened = await payloads.open(c.payload);
      // Sent with "[erased]" in place of an address or a name, a command would act on nonsense: it is dead-lettered instead.
      if (opened.erased > 0)
        throw new MnemeError(
          "INVALID_REQUEST",
          `${c.domain}.${c.name} is not sent: ${opened.erased} of its personal values were erased (their subject was forgotten) before it was due`,
        );
      payload = opened.payload;
    }
    await this.#facade.dispatch(
      { domain: c.domain, name: c.name },
      payload,
      // The record keeps what the outbox sealed (values copied from the event's personal fields included).
      { reqCtx: c.reqCtx, commandUuid: entry.id, ...(payload === c.payload ? {} : { storedPayload: c.payload }) },
    );
  }
}

function commandRef(type: CommandRef, handler: string): { domain: string; name: string } {
  const t = type as { kind?: unknown; domain?: unknown; name?: unknown } | undefined;
  if (typeof t?.domain !== "string" || typeof t.name !== "string" || (t.kind !== undefined && t.kind !== "command"))
    throw new MnemeError("INVALID_REQUEST", `${handler}: dispatch and schedule take a command type`);
  return { domain: t.domain, name: t.name };
}

function dropUndefined<T extends object>(o: T): T {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(o)) if (v !== undefined) out[k] = v;
  return out as T;
}
