import { errorMessage, isCommandInProgress, isMnemeError, MnemeError } from "../model/errors.js";
import { tenantOf } from "../model/effective-tenant.js";
import type { IntegrationInfo } from "../model/event-handler.js";
import { BaseReadmodel } from "../readmodel/base-readmodel.js";
import type { CommandPayloadProtection } from "../privacy/command-payloads.js";
import type { FieldEnvelope } from "../privacy/field-envelope.js";
import { commandPayloadsOf, Outbox, type OutboxHandlerOptions, reactionOptions } from "../reactions/outbox.js";
import { backoffMs, dueOrderOf, PERMANENT_FAILURES, type OutboxEntry } from "../reactions/outbox-entry.js";
import type { ReactionFacade } from "../reactions/process-manager.js";
import { messageCommandUuid } from "../reactions/reaction-ids.js";
import { bodyText, type CommandMapping, decodeBody, type InboundCommand, type InboundMessage } from "./integration-message.js";
import { type ConsumeTransport, type DeliveredMessage, IntegrationStats } from "./integration-transport.js";

/** Configuration of a consumer: an outbox handler's (its dead letters), with the broker's transport and the mapping to commands. */
export interface IntegrationConsumerOptions extends OutboxHandlerOptions {
  readonly transport: ConsumeTransport;
  /** Turns a message into the command it asks for; `undefined` takes it as done without one. */
  readonly toCommand: CommandMapping;
  /** The uuid namespace of the commandUuids (see `messageCommandUuid`); default mneme's. */
  readonly namespace?: string;
  /**
   * A message the broker has delivered more often than this without an
   * outcome (each time the app died or lost its connection while holding it)
   * is a dead letter at once: it may be what kills the app. Default 100.
   */
  readonly maxDeliveries?: number;
}

/**
 * A dead letter of a consumer: an outbox entry that keeps the message, so a
 * retry maps and dispatches it again. When the message was mapped to a command
 * whose type declares personal data, its body (and the payload's personal
 * fields) are kept sealed under the command's subject; entries handed out by
 * the outbox have them opened ("[erased]" once the subject was forgotten).
 */
export interface InboundEntry extends OutboxEntry {
  readonly message: {
    readonly id: string;
    readonly subject: string;
    readonly headers: Readonly<Record<string, string>>;
    readonly body: string | FieldEnvelope;
  };
}

/** Failures that are no fault of the message (the store or the facade is not there): tried again without counting an attempt. */
const NOT_THE_MESSAGES_FAULT = new Set(["UNAVAILABLE", "NOT_STARTED", "STORE_CLOSED"]);

const LAG_EVERY_MS = 250;

/**
 * Turns broker messages into commands: an event handler that handles no
 * events (listed, started and stopped like the others, and running only where
 * its processing lock is) and holds a subscription while it runs. Each
 * message's command is dispatched with `commandUuid` = a uuid v5 of the
 * message id, so a redelivered message runs nothing twice, and the message is
 * acknowledged only after the command committed or replayed. A failed
 * attempt is retried with backoff; after `retry.maxAttempts` (counted in
 * this delivery), or at once when no retry can mend it, the message
 * becomes a dead letter in this handler's outbox (listed, retried or
 * discarded through the Runtime) and is acknowledged on the broker (or
 * settled as the broker's own dead letter: `DeliveredMessage.deadLettered`).
 * mneme/nats and mneme/amqp make it with their transports.
 */
export class IntegrationConsumer extends BaseReadmodel {
  /** The outbox part: dead letters, and those an operator retried (dispatched by its worker). */
  readonly outbox: Outbox;
  readonly #facade: ReactionFacade;
  readonly #payloads: CommandPayloadProtection | undefined;
  readonly #transport: ConsumeTransport;
  readonly #toCommand: CommandMapping;
  readonly #namespace: string | undefined;
  readonly #stats: IntegrationStats;
  readonly #concurrency: number;
  readonly #pollMs: number;
  readonly #maxDeliveries: number;
  #live = false;
  #opened = false;
  #reopen: ReturnType<typeof setTimeout> | undefined;
  readonly #sleepers = new Set<() => void>();
  /** The last message of each lane being handled (see #inLane). */
  readonly #lanes = new Map<string, Promise<void>>();
  #lagAt = 0;
  #unwatch: (() => void) | undefined;

  constructor(facade: ReactionFacade, options: IntegrationConsumerOptions) {
    super(facade, ...reactionOptions(options));
    this.name = options.name;
    this.domain = options.domain;
    if (typeof facade.dispatch !== "function") throw new MnemeError("INVALID_REQUEST", `${options.name}: a consumer needs the facade`);
    if (typeof options.toCommand !== "function") throw new MnemeError("INVALID_REQUEST", `${options.name}: toCommand must be a function`);
    if (typeof options.transport?.open !== "function")
      throw new MnemeError("INVALID_REQUEST", `${options.name}: a consumer needs a transport`);
    if (options.namespace !== undefined) messageCommandUuid("check", options.namespace);
    const maxDeliveries = options.maxDeliveries ?? 100;
    if (!Number.isInteger(maxDeliveries) || maxDeliveries < 1)
      throw new MnemeError("INVALID_REQUEST", `maxDeliveries must be an integer >= 1, got ${String(maxDeliveries)}`);
    this.#maxDeliveries = maxDeliveries;
    this.#facade = facade;
    this.#transport = options.transport;
    this.#toCommand = options.toCommand;
    this.#namespace = options.namespace;
    this.#concurrency = options.concurrency ?? 1;
    this.#pollMs = options.pollMs ?? 1000;
    this.#stats = new IntegrationStats("consumer", this.#transport.broker, this.#transport.target);
    this.#payloads = commandPayloadsOf(facade);
    this.outbox = new Outbox(this, options, (entry) => this.#redeliver(entry as InboundEntry), this.#payloads);
    this.addPart(this.outbox);
    this.addPart({ starting: () => this.#start(), stopping: () => this.#stop(), describe: () => this.#describe() });
  }

  /** The commandUuid of the message `messageId`: a uuid v5 of it. */
  commandUuidOf(messageId: string): string {
    return messageCommandUuid(messageId, this.#namespace);
  }

  // ---------------------------------------------------------------- the subscription

  #start(): void {
    this.#live = true;
    this.#unwatch ??= this.#transport.onConnection?.((why) => this.#stats.wentAway(why));
    void this.#open();
  }

  async #open(): Promise<void> {
    this.#reopen = undefined;
    if (!this.#live || this.#opened) return;
    try {
      await this.#transport.open((m) => this.#inLane(m), this.#concurrency);
      this.#opened = true;
      if (!this.#live) await this.#transport.close();
    } catch (err) {
      // The broker is not there yet (or the stream is missing): try again while running.
      this.#stats.failed(err);
      if (this.#live) {
        const t = setTimeout(() => void this.#open(), this.#pollMs);
        (t as { unref?: () => void }).unref?.();
        this.#reopen = t;
      }
    }
  }

  async #stop(): Promise<void> {
    this.#live = false;
    this.#unwatch?.();
    this.#unwatch = undefined;
    if (this.#reopen !== undefined) clearTimeout(this.#reopen);
    this.#reopen = undefined;
    for (const wake of this.#sleepers) wake();
    if (this.#opened) {
      this.#opened = false;
      await this.#transport.close();
    }
  }

  /** Waits `ms`, or less when the consumer stops. */
  #pause(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const wake = (): void => {
        clearTimeout(t);
        this.#sleepers.delete(wake);
        resolve();
      };
      const t = setTimeout(wake, ms);
      this.#sleepers.add(wake);
    });
  }

  // ---------------------------------------------------------------- one message

  /**
   * Handles `m` after the messages of its lane that came before it: one
   * aggregate's messages (the `mneme-aggregate` header of a mneme publisher),
   * else one subject's, run one after another in delivery order; other lanes
   * side by side, up to `concurrency` messages at once.
   */
  #inLane(m: DeliveredMessage): Promise<void> {
    if (this.#concurrency === 1) return this.#handle(m);
    const key = m.headers["mneme-aggregate"] ?? `subject:${m.subject}`;
    const before = this.#lanes.get(key);
    // #handle settles every outcome itself: a lane's chain never rejects.
    const run = before === undefined ? this.#handle(m) : before.then(() => this.#handle(m));
    this.#lanes.set(key, run);
    return run.finally(() => {
      if (this.#lanes.get(key) === run) this.#lanes.delete(key);
    });
  }

  /** Handles one delivery: dispatch and ack, retry, or dead letter and ack; released to the broker when it cannot finish here. */
  async #handle(m: DeliveredMessage): Promise<void> {
    if (m.pending !== undefined) this.#stats.lag = m.pending;
    try {
      const outcome = await this.#attempts(m);
      if (outcome === "released") m.release();
      else if (outcome === "dead" && m.deadLettered !== undefined) await m.deadLettered();
      else await m.ack();
    } catch (err) {
      // The dead letter could not be written, or the ack not sent: the broker delivers the message again.
      this.#stats.failed(err);
      m.release();
    }
  }

  /** Tries the message's command until done or dead (settle it), or the consumer stops (release it). */
  async #attempts(m: DeliveredMessage): Promise<"done" | "dead" | "released"> {
    const commandUuid = this.commandUuidOf(m.id);
    // Earlier deliveries are not counted as attempts: most never reached a handler (a pull of an app that died meanwhile).
    let attempts = 0;
    if (m.deliveryCount > this.#maxDeliveries) {
      const err = new MnemeError("INVALID_STATE", `message ${m.id} was delivered ${m.deliveryCount} times without an outcome`);
      this.#stats.failed(err, "");
      await this.#deadLetter(m, undefined, err, 0, commandUuid);
      return "dead";
    }
    for (;;) {
      if (!this.#live) return "released";
      let routed: InboundCommand | undefined;
      try {
        routed = await this.#toCommand(this.#inbound(m, decodeBody(m.data, m.id)));
        if (routed !== undefined) await this.#dispatch(routed, commandUuid);
        this.#stats.handled++;
        return "done";
      } catch (err) {
        // Its text may carry the message's data: listed to the message's tenant only ("" before it was mapped).
        this.#stats.failed(err, routed === undefined ? "" : tenantOf(routed.reqCtx ?? {}));
        if (isMnemeError(err) && NOT_THE_MESSAGES_FAULT.has(err.code)) {
          await this.#pause(this.outbox.retry.initialDelayMs);
          continue;
        }
        if (isCommandInProgress(err)) {
          // Its command runs on another live instance (a dead one's claim is taken over at once): wait for its outcome, no attempt.
          await this.#pause(this.outbox.retry.initialDelayMs);
          m.working();
          continue;
        }
        attempts++;
        if (attempts >= this.outbox.retry.maxAttempts || (isMnemeError(err) && PERMANENT_FAILURES.has(err.code))) {
          await this.#deadLetter(m, routed, err, attempts, commandUuid);
          return "dead";
        }
        await this.#pause(backoffMs(this.outbox.retry, attempts));
        m.working();
      }
    }
  }

  #inbound(
    m: { id: string; subject: string; headers: Readonly<Record<string, string>>; deliveryCount: number },
    body?: unknown,
  ): InboundMessage {
    return { id: m.id, subject: m.subject, headers: m.headers, deliveryCount: m.deliveryCount, body };
  }

  async #dispatch(routed: InboundCommand, commandUuid: string): Promise<void> {
    const c = routed.command as { kind?: unknown; domain?: unknown; name?: unknown } | undefined;
    if (typeof c?.domain !== "string" || typeof c.name !== "string" || (c.kind !== undefined && c.kind !== "command"))
      throw new MnemeError("INVALID_REQUEST", `${this.name}: toCommand must return { command: a command type, payload }`);
    await this.#facade.dispatch(routed.command, routed.payload, {
      commandUuid,
      ...(routed.reqCtx === undefined ? {} : { reqCtx: routed.reqCtx }),
    });
  }

  async #deadLetter(
    m: DeliveredMessage,
    routed: InboundCommand | undefined,
    err: unknown,
    attempts: number,
    commandUuid: string,
  ): Promise<void> {
    const now = this.outbox.now();
    const reqCtx = routed?.reqCtx ?? {};
    let body: string | FieldEnvelope = bodyText(m.data);
    let payload = routed?.payload;
    // Sealed under the command's subject, so that forget reaches them; a message not mapped names no subject: kept as it came.
    if (routed !== undefined && this.#payloads !== undefined)
      ({ payload, body } = await this.#payloads.protectMessage(routed.command, routed.payload, reqCtx, body));
    const entry: InboundEntry = {
      id: commandUuid,
      kind: "command",
      eventHandlerName: this.name,
      status: "dead",
      scheduled: false,
      dueAt: now,
      dueOrder: dueOrderOf(now, 0, 0),
      index: 0,
      attempts,
      lastError: errorMessage(err),
      lastAttemptAt: now,
      createdAt: now,
      eventUuid: m.id,
      eventPath: `${this.#transport.broker}:${m.subject}`,
      position: 0,
      tenantUuid: tenantOf(reqCtx),
      correlationId: m.id,
      message: { id: m.id, subject: m.subject, headers: m.headers, body },
      ...(routed === undefined ? {} : { command: { domain: routed.command.domain, name: routed.command.name, payload, reqCtx } }),
    };
    await this.outbox.addDeadLetter(entry);
    this.#stats.deadLetters++;
  }

  /** A dead letter an operator retried: its message (opened) mapped and dispatched again, with the same commandUuid. */
  async #redeliver(entry: InboundEntry): Promise<void> {
    const m = entry.message;
    let body = m.body;
    if (typeof body !== "string") {
      const opened = this.#payloads === undefined ? undefined : await this.#payloads.open(body);
      // Its subject was forgotten after the retry was accepted: nothing left to map.
      if (opened === undefined || opened.erased > 0 || typeof opened.payload !== "string")
        throw new MnemeError("INVALID_REQUEST", `message ${m.id} is not mapped again: its body was erased (its subject was forgotten)`);
      body = opened.payload;
    }
    const routed = await this.#toCommand(this.#inbound({ ...m, deliveryCount: 1 }, decodeBody(new TextEncoder().encode(body), m.id)));
    if (routed !== undefined) await this.#dispatch(routed, entry.id);
  }

  #describe(): IntegrationInfo {
    const now = Date.now();
    if (now - this.#lagAt >= LAG_EVERY_MS && this.#opened) {
      this.#lagAt = now;
      this.#transport.lag().then(
        (lag) => {
          if (lag !== undefined) this.#stats.lag = lag;
        },
        () => undefined,
      );
    }
    return this.#stats.info(this.#opened && this.#transport.connected);
  }
}
