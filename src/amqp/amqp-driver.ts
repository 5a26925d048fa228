/**
 * amqplib, loaded only when mneme makes the connection itself (an optional
 * peer: a missing one is a MnemeError naming the package), the channel a
 * publisher or consumer works on (made again after the broker or the
 * connection went away), and the errors of a broker that cannot be reached
 * now, which cost no attempt.
 */
import type * as Amqplib from "amqplib";
import type { Channel, ConfirmChannel } from "amqplib";
import { errorMessage, MnemeError } from "../model/errors.js";
import { AMQPLIB, requireDriver } from "../store/driver.js";

/**
 * The application's AMQP connection: `connect(url, { recovery: { ... } })`
 * of amqplib (a recovering one, so channels can be made again after the
 * broker restarted), or a plain one. mneme uses it and never closes it.
 */
export interface AmqpConnectionLike {
  createChannel(): Promise<Channel>;
  createConfirmChannel(): Promise<ConfirmChannel>;
}

/** How mneme reconnects a connection it made from a URL: quickly at first, every 5 s at most. */
const RECOVERY = { initialDelay: 100, maxDelay: 5000, waitForConnect: false } as const;

/** A connection or a URL, checked at construction (INVALID_REQUEST otherwise, or when a URL is given and amqplib is not installed). */
export function checkConnection(connection: unknown, name: string): AmqpConnectionLike | string {
  if (typeof connection === "string" && /^amqps?:\/\//.test(connection)) {
    // Loaded now, so a missing amqplib is an error of the constructor, not of every later attempt.
    requireDriver(AMQPLIB);
    return connection;
  }
  const c = connection as Partial<AmqpConnectionLike> | undefined;
  if (typeof c?.createChannel === "function" && typeof c.createConfirmChannel === "function") return c as AmqpConnectionLike;
  throw new MnemeError("INVALID_REQUEST", `${name}: connection must be an amqplib connection or an amqp:// URL`);
}

/** The exchange types mneme declares. */
export const EXCHANGE_TYPES: ReadonlySet<string> = new Set(["direct", "topic", "fanout", "headers"]);

/** AMQP reply codes of a channel the server closed for what was asked (not found, access refused, precondition failed, ...). */
const REFUSED_CODES = new Set([403, 404, 405, 406, 530, 540]);

/**
 * `err` as mneme reports it: the server's refusal (a missing exchange or
 * queue, a queue declared otherwise) as it is, so it counts an attempt;
 * anything else (a lost connection, a closed channel, a refused socket, a
 * timeout) is UNAVAILABLE: the outbox counts no attempt, the consumer opens again.
 */
export function amqpError(err: unknown, what: string): unknown {
  if (err instanceof MnemeError) return err;
  const code = (err as { code?: unknown } | undefined)?.code;
  if (typeof code === "number" && REFUSED_CODES.has(code)) return err;
  return new MnemeError("UNAVAILABLE", `${what}: the AMQP broker cannot be reached now (${errorMessage(err)})`, { cause: err });
}

/** Rejects with UNAVAILABLE when `p` has not settled after `ms`. */
export function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const t = setTimeout(() => reject(new MnemeError("UNAVAILABLE", `${what}: no answer from the AMQP broker within ${ms} ms`)), ms);
    p.then(
      (v) => {
        clearTimeout(t);
        resolve(v);
      },
      (e: unknown) => {
        clearTimeout(t);
        reject(e instanceof Error ? e : new Error(String(e)));
      },
    );
  });
}

/** A header table as strings (AMQP headers may be numbers, booleans, buffers). */
export function headerRecord(h: Readonly<Record<string, unknown>> | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(h ?? {})) {
    if (v === undefined || v === null) continue;
    out[k] = Buffer.isBuffer(v) ? v.toString("utf8") : typeof v === "object" ? JSON.stringify(v) : String(v as string | number);
  }
  return out;
}

type Owned = AmqpConnectionLike & { close(): Promise<void>; on(event: "error", listener: (err: Error) => void): unknown };

/**
 * The one channel a publisher (a confirm channel) or a consumer works on.
 * It is made when first needed and made again after it closed, with `setup`
 * run on each new one (declarations, prefetch, the subscription). A URL is
 * connected by mneme (with amqplib's recovery) and closed by `close()`.
 */
export class AmqpChannelLink<C extends Channel> {
  readonly #source: AmqpConnectionLike | string;
  readonly #confirm: boolean;
  readonly #setup: (channel: C) => Promise<void>;
  readonly #onClosed: (channel: C) => void;
  #owned: Owned | undefined;
  #channel: C | undefined;
  #opening: Promise<C> | undefined;
  #closed = false;
  readonly #reasons = new WeakMap<C, unknown>();
  readonly #listeners = new Set<(down: Error | undefined) => void>();

  constructor(
    source: AmqpConnectionLike | string,
    confirm: boolean,
    setup: (channel: C) => Promise<void>,
    onClosed: (channel: C) => void = () => undefined,
  ) {
    this.#source = source;
    this.#confirm = confirm;
    this.#setup = setup;
    this.#onClosed = onClosed;
  }

  /** The open channel, if any. */
  get current(): C | undefined {
    return this.#channel;
  }

  /** Why the server closed `channel` (a 404 of a missing exchange, ...), if it did. */
  reasonOf(channel: C | undefined): unknown {
    return channel === undefined ? undefined : this.#reasons.get(channel);
  }

  /** The open channel, or a new one; UNAVAILABLE when the broker has not given one within `timeoutMs` (it is kept when it comes later). */
  channel(timeoutMs: number, what: string): Promise<C> {
    if (this.#channel !== undefined) return Promise.resolve(this.#channel);
    this.#closed = false;
    this.#opening ??= this.#open().finally(() => (this.#opening = undefined));
    return within(this.#opening, timeoutMs, what);
  }

  async #open(): Promise<C> {
    const conn = this.#connection();
    const ch = (await (this.#confirm ? conn.createConfirmChannel() : conn.createChannel())) as C;
    // Without a listener an 'error' event would be thrown; the server's reason is kept for the failure that follows.
    ch.on("error", (err: unknown) => this.#reasons.set(ch, err));
    ch.on("close", () => {
      if (this.#channel !== ch) return;
      this.#channel = undefined;
      if (this.#closed) return;
      const reason = this.#reasons.get(ch);
      this.#tell(
        reason instanceof Error
          ? reason
          : new Error("the channel to the AMQP broker closed (the broker went away, or the connection was lost)"),
      );
      this.#onClosed(ch);
    });
    try {
      await this.#setup(ch);
    } catch (err) {
      await ch.close().catch(() => undefined);
      throw this.#reasons.get(ch) ?? err;
    }
    if (this.#closed) {
      await ch.close().catch(() => undefined);
      throw new MnemeError("UNAVAILABLE", "the channel was closed while it was opened");
    }
    this.#channel = ch;
    this.#tell(undefined);
    return ch;
  }

  /** Tells `listener` when an open channel closes under its user (with why) and when a new one opens (undefined); returns its remover. */
  listen(listener: (down: Error | undefined) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  #tell(down: Error | undefined): void {
    for (const l of this.#listeners) {
      try {
        l(down);
      } catch {
        // A listener's failure must not break the channel's events.
      }
    }
  }

  #connection(): AmqpConnectionLike {
    if (typeof this.#source !== "string") return this.#source;
    if (this.#owned === undefined) {
      const amqp = requireDriver<typeof Amqplib>(AMQPLIB);
      // With waitForConnect false, connect() resolves at once; channels wait for the (re)connection.
      const model = amqp.connect(this.#source, { recovery: RECOVERY }) as unknown as Promise<Owned>;
      this.#owned = lazyConnection(model);
    }
    return this.#owned;
  }

  /** Closes the channel (and the connection mneme made); a later `channel()` opens again. */
  async close(): Promise<void> {
    // A channel still being made is closed when it comes (see #open): waiting for it could wait for the broker.
    this.#closed = true;
    const ch = this.#channel;
    this.#channel = undefined;
    if (ch !== undefined) await ch.close().catch(() => undefined);
    const owned = this.#owned;
    this.#owned = undefined;
    if (owned !== undefined) await owned.close().catch(() => undefined);
  }
}

/** A connection whose model is still being made: its calls wait for it. Its errors are left to the channels' failures. */
function lazyConnection(model: Promise<Owned>): Owned {
  const ready = model.then((m) => {
    m.on("error", () => undefined);
    return m;
  });
  ready.catch(() => undefined);
  return {
    createChannel: () => ready.then((m) => m.createChannel()),
    createConfirmChannel: () => ready.then((m) => m.createConfirmChannel()),
    close: () => ready.then((m) => m.close()),
    on: () => undefined,
  };
}

/** Wait before opening a channel again after it closed under a running publisher or consumer. */
const REOPEN_MS = 250;

/** Opens a channel again every 250 ms until it works, while `live()` says its user runs (after the channel closed under it). */
export class ChannelReopener {
  #timer: ReturnType<typeof setTimeout> | undefined;

  constructor(
    private readonly open: () => Promise<unknown>,
    private readonly live: () => boolean,
  ) {}

  schedule(): void {
    if (!this.live() || this.#timer !== undefined) return;
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      if (this.live()) this.open().catch(() => this.schedule());
    }, REOPEN_MS);
    (this.#timer as { unref?: () => void }).unref?.();
  }

  cancel(): void {
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
  }
}
