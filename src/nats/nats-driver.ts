/**
 * The NATS client, loaded when a publisher or consumer first needs it (an
 * optional peer: a missing one is a MnemeError naming the package), and the
 * errors of a broker that cannot be reached now, which cost no attempt.
 */
import type * as JetStreamModule from "@nats-io/jetstream";
import type { JetStreamClient, JetStreamManager } from "@nats-io/jetstream";
import type { MsgHdrs, NatsConnection } from "@nats-io/transport-node";
import { errorMessage, MnemeError } from "../model/errors.js";
import { NATS_JETSTREAM, NATS_TRANSPORT, requireDriver } from "../store/driver.js";

/** The application's NATS connection (`connect()` of @nats-io/transport-node): mneme uses it and never closes it. */
export type NatsConnectionLike = NatsConnection;

let jetstreamModule: typeof JetStreamModule | undefined;

function jsModule(): typeof JetStreamModule {
  jetstreamModule ??= requireDriver<typeof JetStreamModule>(NATS_JETSTREAM);
  return jetstreamModule;
}

/** The JetStream client over the application's connection. */
export function jetStreamOf(nc: NatsConnection): JetStreamClient {
  return jsModule().jetstream(nc);
}

/** The JetStream manager over the application's connection. */
export function jetStreamManagerOf(nc: NatsConnection): Promise<JetStreamManager> {
  return jsModule().jetstreamManager(nc);
}

interface TransportModule {
  headers(): MsgHdrs;
  createInbox(prefix?: string): string;
}
let transportModule: TransportModule | undefined;

function transport(): TransportModule {
  // Loaded once: a require per message costs a module resolution each time.
  transportModule ??= requireDriver<TransportModule>(NATS_TRANSPORT);
  return transportModule;
}

/** A new inbox subject of `nc` (with the connection's inbox prefix, when it has one). */
export function natsInbox(nc: NatsConnection): string {
  const prefix = (nc as { options?: { inboxPrefix?: unknown } }).options?.inboxPrefix;
  return transport().createInbox(typeof prefix === "string" ? prefix : undefined);
}

/** NATS headers from a record. */
export function natsHeaders(record: Readonly<Record<string, string>>): MsgHdrs {
  const h = transport().headers();
  for (const [k, v] of Object.entries(record)) h.set(k, v);
  return h;
}

/** A record of NATS headers (first value of each). */
export function headerRecord(h: MsgHdrs | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  if (h === undefined) return out;
  for (const k of h.keys()) out[k] = h.get(k);
  return out;
}

const BROKER_AWAY = /timeout|timed out|no responders|closed|disconnect|reconnect|connection|503|jetstream not enabled|stale/i;

/**
 * `err` as mneme reports it: UNAVAILABLE (the outbox counts no attempt, the
 * consumer tries again) when the server cannot take the request now, the
 * error itself otherwise.
 */
export function natsError(err: unknown, nc: NatsConnection, what: string): unknown {
  const name = err instanceof Error ? err.name : "";
  if (nc.isClosed() || BROKER_AWAY.test(`${name} ${errorMessage(err)}`))
    return new MnemeError("UNAVAILABLE", `${what}: the NATS server cannot be reached now (${errorMessage(err)})`, { cause: err });
  return err;
}
