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

/** Called when the connection goes down (with why) and when it is back (undefined). */
export type ConnectionListener = (down: Error | undefined) => void;

/**
 * Whether a NATS connection is up now, from its status events (one reader of
 * `status()` per connection, shared by its publishers and consumers): down
 * from the moment the client loses the server (`disconnect`, `reconnecting`,
 * `staleConnection`: the server missed the client's pings) or closes, up
 * again on `reconnect`. A consumer's pull loop or a publisher's acks say
 * nothing while no message moves; the status events do.
 */
export class NatsConnectionWatch {
  #down: Error | undefined;
  readonly #listeners = new Set<ConnectionListener>();

  constructor(private readonly nc: NatsConnection) {
    void this.#read();
  }

  /** Why the connection is down now; undefined while it is up. */
  get down(): Error | undefined {
    return this.nc.isClosed() ? (this.#down ?? new Error("the NATS connection is closed")) : this.#down;
  }

  /** Adds a listener; returns its remover. */
  listen(listener: ConnectionListener): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  async #read(): Promise<void> {
    try {
      for await (const s of this.nc.status()) {
        if (s.type === "disconnect") this.#set(new Error(`disconnected from the NATS server ${s.server}`));
        else if (s.type === "reconnecting") this.#set(this.#down ?? new Error("reconnecting to the NATS server"));
        else if (s.type === "staleConnection") this.#set(new Error("the NATS server stopped answering pings (stale connection)"));
        else if (s.type === "close") this.#set(new Error("the NATS connection is closed"));
        else if (s.type === "reconnect") this.#set(undefined);
      }
    } catch {
      // The status iterator ends with the connection: `down` then says closed.
    }
  }

  #set(down: Error | undefined): void {
    const changed = (down === undefined) !== (this.#down === undefined) || (down !== undefined && this.#down?.message !== down.message);
    this.#down = down;
    if (!changed) return;
    for (const l of this.#listeners) {
      try {
        l(down);
      } catch {
        // A listener's failure must not stop the reader.
      }
    }
  }
}

const WATCHES = new WeakMap<NatsConnection, NatsConnectionWatch>();

/** The one watch of `nc` (made on first use). */
export function connectionWatch(nc: NatsConnection): NatsConnectionWatch {
  let w = WATCHES.get(nc);
  if (w === undefined) WATCHES.set(nc, (w = new NatsConnectionWatch(nc)));
  return w;
}
