/**
 * What the broker-neutral publisher and consumer need of a broker: a
 * transport publishes one message and resolves once the broker has it, or
 * runs a subscription that hands over messages and settles them. mneme/nats
 * and mneme/amqp implement these over their clients.
 */
import { errorMessage } from "../model/errors.js";
import type { IntegrationInfo } from "../model/event-handler.js";
import type { TransportMessage } from "./integration-message.js";

/** A broker to publish to. */
export interface PublishTransport {
  /** `"nats"`, `"amqp"`: as the Runtime lists it. */
  readonly broker: string;
  /** Where it publishes (a stream, an exchange), as the Runtime lists it. */
  readonly target: string;
  /**
   * Publishes `message` with its id as the broker's message id and resolves
   * once the broker has stored it (a JetStream ack, a publisher confirm).
   * Throws MnemeError UNAVAILABLE when the broker cannot take it now (no
   * attempt is counted: the outbox tries again), another error otherwise.
   */
  publish(message: TransportMessage): Promise<void>;
  /** Whether the broker is reachable: the last publish reached it, and the connection is up as far as the transport knows. */
  readonly connected: boolean;
  /**
   * Tells `listener` at once when the broker goes away (with why) and when it
   * is back (undefined), where the transport can tell without a message
   * moving (the listing's `connected` and `lastError`). Returns its remover.
   */
  onConnection?(listener: (down: Error | undefined) => void): () => void;
  /** Lets go of what the transport opened itself (the handler stopped). */
  close(): Promise<void>;
}

/** A message handed over by a subscription, with the ways to settle it on the broker. */
export interface DeliveredMessage {
  /** The message id; the transport makes one from the broker's sequence when the publisher gave none. */
  readonly id: string;
  readonly subject: string;
  readonly headers: Readonly<Record<string, string>>;
  readonly data: Uint8Array;
  /** This delivery's number (1: the first); 1 when the broker does not count. */
  readonly deliveryCount: number;
  /** Messages waiting behind it on the broker, when the broker says (the consumer's lag). */
  readonly pending?: number;
  /** Done: the broker forgets it (ack). */
  ack(): Promise<void>;
  /**
   * It became a dead letter of the consumer: settles it as the broker's dead
   * letter too (an AMQP reject, which a queue with a dead-letter exchange
   * routes there). Absent: it is acked.
   */
  deadLettered?(): Promise<void>;
  /** Not done here: the broker delivers it again (later, to this or another consumer). */
  release(): void;
  /** Still working on it: the broker waits longer before it delivers it again. */
  working(): void;
}

/** A subscription to a broker's queue or durable consumer. */
export interface ConsumeTransport {
  readonly broker: string;
  /** Where it consumes from (a stream's durable consumer, a queue). */
  readonly target: string;
  /**
   * Opens the subscription and hands every message to `handle`, at most
   * `concurrency` at once; resolves once it is open. Throws MnemeError
   * UNAVAILABLE when the broker cannot be reached.
   */
  open(handle: (message: DeliveredMessage) => Promise<void>, concurrency: number): Promise<void>;
  /** Closes it; resolves when the messages being handled are settled. */
  close(): Promise<void>;
  /** Messages waiting on the broker, as it last said (undefined: not known). */
  lag(): Promise<number | undefined>;
  /** Whether the subscription is open and its connection up. */
  readonly connected: boolean;
  /**
   * Tells `listener` at once when the broker goes away (with why) and when it
   * is back (undefined), where the transport can tell without a message
   * moving (the listing's `connected` and `lastError`). Returns its remover.
   */
  onConnection?(listener: (down: Error | undefined) => void): () => void;
}

/** Counters of a publisher or consumer, as the Runtime lists them. */
export class IntegrationStats {
  handled = 0;
  failures = 0;
  lag = -1;
  deadLetters = 0;
  lastError: string | undefined;
  /** The tenant of the message or event `lastError` came from ("" unknown); undefined: of no message (the broker). */
  lastErrorTenantUuid: string | undefined;

  constructor(
    readonly role: IntegrationInfo["role"],
    readonly broker: string,
    readonly target: string,
  ) {}

  /**
   * A failed attempt. `tenantUuid`: the tenant of the message or event it failed on ("" when not known), whose
   * data its text may carry; undefined for a failure of no message (the broker, the subscription).
   */
  failed(err: unknown, tenantUuid?: string): void {
    this.failures++;
    this.lastError = errorMessage(err);
    this.lastErrorTenantUuid = tenantUuid;
  }

  /** The broker went away: listed as the last error, not counted as a failure (no message failed). */
  wentAway(why: Error | undefined): void {
    if (why === undefined) return;
    this.lastError = errorMessage(why);
    this.lastErrorTenantUuid = undefined;
  }

  info(connected: boolean): IntegrationInfo {
    const out: IntegrationInfo = {
      role: this.role,
      broker: this.broker,
      target: this.target,
      lag: this.lag,
      handled: this.handled,
      failures: this.failures,
      deadLetters: this.deadLetters,
      connected,
    };
    if (this.lastError !== undefined) {
      out.lastError = this.lastError;
      if (this.lastErrorTenantUuid !== undefined) out.lastErrorTenantUuid = this.lastErrorTenantUuid;
    }
    return out;
  }
}
