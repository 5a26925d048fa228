/**
 * The command pipeline (docs/architecture.md, "src/app: the composition root and its rooms"):
 * resolve, payload rules, permission, claim (or replay), schema, the
 * handler, append, record, system events, publish to the handlers, and the
 * wait of `waitToFinish`.
 */
import { sealJsonSafe } from "../store/json-safe.js";
import type { CommandHandler } from "../model/domain.js";
import type { InstalledDomain } from "../model/domain-install.js";
import { errorMessage, isMnemeError, MnemeError } from "../model/errors.js";
import type { DispatchOptions, DispatchResult, MessageRef } from "../model/facade-handle.js";
import { isPlainObject } from "../model/redact.js";
import type { CommandType } from "../model/tokens.js";
import type { CommandEnvelope, Event, NewEvent } from "../model/types.js";
import type { DispatchTrace, Telemetry } from "../observability/telemetry.js";
import type { PermissionRegistry } from "../permissions/permission-registry.js";
import { recordedCommandPayload } from "../privacy/command-payloads.js";
import type { PersonalDataProtection } from "../privacy/personal-data-protection.js";
import type { SystemEventProducer } from "../runtime/system-events.js";
import type { SchemaRegistry } from "../schema/schema-registry.js";
import type { CommandStatus } from "../store/command-store.js";
import type { AggregateCache } from "./aggregate-cache.js";
import { type AppendHost, appendCommandEvents, normaliseHandlerResult } from "./append.js";
import { HeldClaim } from "./command-claim.js";
import { type CommandContextHost, DispatchContext } from "./command-context.js";
import type { DomainRegistry } from "./domain-registry.js";
import { CommandRecords, commandLocks, type RecordedCommand } from "./idempotency.js";
import type { ReadmodelRegistry } from "./readmodel-registry.js";
import { checkPayload, messageUuid, normaliseReqCtx, notAnObject, sealedReqCtx } from "./request-input.js";
import { tenantOf } from "./tenancy.js";

/** What the pipeline needs of the facade. */
export interface DispatchHost extends AppendHost {
  readonly domains: DomainRegistry;
  readonly readmodels: ReadmodelRegistry;
  readonly records: CommandRecords;
  readonly permissions: PermissionRegistry;
  readonly schemas: SchemaRegistry;
  readonly personalData: PersonalDataProtection;
  readonly systemEvents: SystemEventProducer;
  readonly aggregateCache: AggregateCache | undefined;
  readonly contexts: CommandContextHost;
  /** NOT_STARTED unless the facade is started. */
  assertStarted(): void;
  telemetry(): Telemetry | undefined;
  /** True when the event repository tells the handlers of appends itself (onAppend). */
  pushesLocally(): boolean;
}

/** One command on its way through the pipeline. */
interface CommandRun<P> extends RecordedCommand {
  readonly envelope: CommandEnvelope<P>;
  readonly domain: InstalledDomain;
  readonly trace: DispatchTrace | undefined;
  /** What a failure records: "denied" until the permission check passed. */
  stage: CommandStatus;
  claim: HeldClaim | undefined;
  /** True while claiming or replaying: a failure there (in progress elsewhere, another request) records nothing. */
  claiming: boolean;
  ctx: DispatchContext | undefined;
  recordPayload: unknown;
}

export class Dispatcher {
  readonly #host: DispatchHost;

  constructor(host: DispatchHost) {
    this.#host = host;
  }

  /** Executes a command (see the file's head). */
  dispatch<P, R = unknown>(type: CommandType<P, R> | MessageRef, payload: P, opts: DispatchOptions): Promise<DispatchResult<R>> {
    const telemetry = this.#host.telemetry();
    if (telemetry?.active !== true) return this.#serialised(type, payload, opts, undefined);
    const t = this.#host.domains.resolveCommand(type as CommandType<any, any>);
    return telemetry.dispatch(t.domain, t.name, opts.reqCtx, (trace) => this.#serialised(type, payload, opts, trace));
  }

  #serialised<P, R>(
    type: CommandType<P, R> | MessageRef,
    payload: P,
    opts: DispatchOptions,
    trace: DispatchTrace | undefined,
  ): Promise<DispatchResult<R>> {
    // With claims, the store decides between duplicates, in this process as across instances (one bound on waiting).
    if (opts.commandUuid === undefined || this.#host.records.claims !== undefined) return this.#dispatch(type, payload, opts, false, trace);
    return this.#locked(type, payload, opts, trace);
  }

  /**
   * Without claims: duplicates of one commandUuid run one after the other here (and in every facade sharing
   * the command store): the second finds the first's record and replays it.
   */
  async #locked<P, R>(
    type: CommandType<P, R> | MessageRef,
    payload: P,
    opts: DispatchOptions,
    trace: DispatchTrace | undefined,
  ): Promise<DispatchResult<R>> {
    const release = await commandLocks(this.#host.records.commandStore).acquire(messageUuid(opts.commandUuid, "commandUuid"));
    try {
      return await this.#dispatch(type, payload, opts, false, trace);
    } finally {
      release();
    }
  }

  async #dispatch<P, R>(
    type: CommandType<P, R> | MessageRef,
    payload: P,
    opts: DispatchOptions,
    retried: boolean,
    trace: DispatchTrace | undefined,
  ): Promise<DispatchResult<R>> {
    this.#host.assertStarted();
    const run = this.#begin(type, payload, opts, trace);
    let appended: Event[] | undefined;
    let result: unknown;
    try {
      if (!isPlainObject(payload)) {
        run.stage = "failed";
        throw notAnObject(run.type);
      }
      checkPayload(run.type, payload);
      const verdict = this.#host.permissions.evaluate(run.envelope.reqCtx, run.envelope);
      const denied = verdict instanceof Promise ? await verdict : verdict;
      if (denied !== undefined) throw denied;
      run.stage = "failed";
      if (opts.commandUuid !== undefined && !retried) {
        const seen = await this.#claimOrReplay<R>(run);
        if (seen !== undefined) return seen;
      }
      const validating = this.#host.schemas.validate(run.type, payload);
      if (validating !== undefined) await validating;
      if (run.type.personalData !== undefined || opts.storedPayload !== undefined) await this.#sealRecordPayload(run, payload, opts);
      const handler = this.#handlerOf(run);
      const ctx = (run.ctx = new DispatchContext(this.#host.contexts, run.envelope.commandUuid, run.envelope.reqCtx));
      try {
        let out = handler(ctx, run.envelope, payload);
        if (out instanceof Promise) out = await out;
        let events: readonly NewEvent[];
        if (Array.isArray(out)) events = out;
        else ({ events, result } = normaliseHandlerResult(out, run.type));
        if (events.length > 0) appended = await appendCommandEvents(this.#host, events, run, ctx.loader, run.trace, ctx.queries);
      } finally {
        ctx.release();
      }
    } catch (err) {
      if (run.claiming) throw err;
      return this.#failed(run, err, type, payload, opts, retried);
    }
    // Succeeded: delivered (where the repository does not push), recorded, published, waited for.
    const events = appended ?? [];
    if (events.length > 0 && !this.#host.pushesLocally()) this.#host.readmodels.deliver(events);
    // With events, a joined repository committed the record with them already (replacing the claim).
    if (events.length > 0 && this.#host.recordsWithAppend) run.claim?.resolved();
    else if (await this.#host.records.record(run, "succeeded", events, undefined)) run.claim?.resolved();
    if (run.claim !== undefined) await run.claim.end();
    if (this.#host.systemEvents.running) this.#publishExecuted(run, events);
    const handlerErrors = opts.waitToFinish === true && events.length > 0 ? await this.#host.readmodels.waitHandlers(events) : [];
    const res: DispatchResult<R> = { commandUuid: run.envelope.commandUuid, events, handlerErrors };
    if (result !== undefined) res.result = result as R;
    return res;
  }

  /** Resolves the type, checks the request context, makes the envelope. */
  #begin<P>(type: CommandType<any, any> | MessageRef, payload: P, opts: DispatchOptions, trace: DispatchTrace | undefined): CommandRun<P> {
    const t0 = performance.now();
    const cmdType = this.#host.domains.resolveCommand(type);
    // What the events and the record keep: a deeply frozen copy taken now (the handler sees the caller's object).
    let storedCtx = trace === undefined ? sealedReqCtx(opts.reqCtx) : undefined;
    const reqCtx = storedCtx !== undefined ? opts.reqCtx! : normaliseReqCtx(opts.reqCtx);
    storedCtx ??= sealJsonSafe(trace === undefined ? reqCtx : trace.stamp(reqCtx));
    const envelope: CommandEnvelope<P> = {
      commandUuid: messageUuid(opts.commandUuid, "commandUuid"),
      domain: cmdType.domain,
      name: cmdType.name,
      payload,
      reqCtx,
    };
    trace?.began(envelope.commandUuid);
    const domain = this.#host.domains.domains.get(cmdType.domain)!;
    return {
      type: cmdType,
      envelope,
      domain,
      storedCtx,
      t0,
      trace,
      stage: "denied",
      claim: undefined,
      claiming: false,
      ctx: undefined,
      recordPayload: undefined,
    };
  }

  /** A caller's commandUuid: claimed (or, without claims, looked up); the recorded outcome when it is a duplicate. */
  async #claimOrReplay<R>(run: CommandRun<unknown>): Promise<DispatchResult<R> | undefined> {
    const records = this.#host.records;
    if (records.claims !== undefined) {
      run.claiming = true;
      const got = await records.claim<R>(run.type, run.envelope);
      if (got instanceof HeldClaim) {
        run.claim = got;
        run.claiming = false;
        return undefined;
      }
      return got;
    }
    // Without claims: a command recorded as succeeded does not run again. (Where the record commits with the
    // events, a duplicate racing this one past the look is still refused by the append.)
    const seen = await records.recorded<R>(run.type, run.envelope);
    return seen !== undefined && seen !== "cleared" ? seen : undefined;
  }

  /** The payload the record keeps (personal fields sealed). */
  async #sealRecordPayload<P>(run: CommandRun<P>, payload: P, opts: DispatchOptions): Promise<void> {
    run.recordPayload = await recordedCommandPayload(
      this.#host.personalData,
      run.type,
      payload,
      run.envelope.reqCtx,
      opts.storedPayload ?? payload,
    );
  }

  /** The command's handler: UNKNOWN_COMMAND without one. */
  #handlerOf(run: CommandRun<unknown>): CommandHandler {
    const handler = run.domain.commandHandlers.get(run.type.name);
    if (handler === undefined) throw new MnemeError("UNKNOWN_COMMAND", `command ${run.type.domain}.${run.type.name} has no handler`);
    return handler;
  }

  /** A command that failed or was denied: recorded (then retried or replayed where the append met its record), published, thrown. */
  async #failed<P, R>(
    run: CommandRun<P>,
    err: unknown,
    type: CommandType<P, R> | MessageRef,
    payload: P,
    opts: DispatchOptions,
    retried: boolean,
  ): Promise<DispatchResult<R>> {
    const { envelope, claim } = run;
    const error = isMnemeError(err)
      ? err
      : new MnemeError("HANDLER_FAILED", `command ${run.type.domain}.${run.type.name} failed: ${errorMessage(err)}`, { cause: err });
    const cache = this.#host.aggregateCache;
    // Another writer moved an aggregate this command loaded: its cached state is not worth keeping.
    if (error.code === "CONFLICT" && cache !== undefined) run.ctx?.loader?.forEachLoaded((uuid) => cache.invalidate(uuid));
    if (error.code === "CONFLICT" && opts.commandUuid !== undefined && run.stage === "failed" && this.#host.recordsWithAppend && !retried) {
      // The append met this commandUuid's record: a success (another instance, an earlier call) is replayed;
      // a failed or denied earlier attempt is cleared and the command runs once more.
      const seen = await this.#host.records.recorded<R>(run.type, envelope);
      await claim?.end();
      if (seen === "cleared") return this.#dispatch(type, payload, opts, true, run.trace);
      if (seen !== undefined) return seen;
    }
    // The failed record resolves the claim: a retry runs the command again.
    if (await this.#host.records.record(run, run.stage, [], error)) claim?.resolved();
    await claim?.end();
    // Kept in the Runtime's failure history also while the stream is stopped.
    this.#host.systemEvents.publish(
      "CommandFailed",
      {
        commandUuid: envelope.commandUuid,
        domain: run.type.domain,
        name: run.type.name,
        status: run.stage,
        code: error.code,
        error: error.message,
      },
      tenantOf(envelope.reqCtx) || undefined,
    );
    throw error;
  }

  #publishExecuted(run: CommandRun<unknown>, appended: readonly Event[]): void {
    const { envelope } = run;
    const tenant = tenantOf(envelope.reqCtx) || undefined;
    this.#host.systemEvents.publish(
      "CommandExecuted",
      {
        commandUuid: envelope.commandUuid,
        domain: run.type.domain,
        name: run.type.name,
        events: appended.length,
        durationMicros: Math.round((performance.now() - run.t0) * 1000),
      },
      tenant,
    );
    if (appended.length === 0) return;
    this.#host.systemEvents.publish(
      "EventsAppended",
      {
        commandUuid: envelope.commandUuid,
        events: appended.map((e) => ({
          eventUuid: e.eventUuid,
          path: `${e.domain}.${e.name}`,
          aggregateUuid: e.aggregateUuid,
          version: e.version,
          position: e.position,
        })),
      },
      tenant,
    );
  }
}
