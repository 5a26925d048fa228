import type { Notification } from "pg";
import { type CheckedOutClient, checkout, type PgPool, type PgStatementHook } from "./postgres-pool.js";

/**
 * Told that events may have been appended elsewhere; `position`, when given, is
 * the last position of that append (a hint: pull with readAll from your checkpoint).
 */
export type ExternalAppendListener = (position?: number) => void;

/** Options of {@link PostgresAppendWatcher}. */
export interface PostgresAppendWatcherOptions {
  readonly pool: PgPool;
  /** The NOTIFY channel (exact, case-sensitive). */
  readonly channel: string;
  /** Notifications whose payload starts with `${instanceId}:` come from this instance and are ignored. */
  readonly instanceId: string;
  /** Polling fallback period; 0 turns polling off. */
  readonly pollIntervalMs: number;
  /** Wait before reconnecting the LISTEN client after it failed. */
  readonly reconnectDelayMs: number;
  /** The repository's head position (what a reader can see now). */
  readonly readHead: () => Promise<number>;
  /** The stores' statement hook (a testing aid), called before LISTEN. */
  readonly onStatement?: PgStatementHook | undefined;
}

/**
 * Tells listeners that events may have been appended by another instance:
 * LISTEN on a dedicated client (reconnected after an error, listeners told once
 * after a reconnect since notifications may have been missed meanwhile) plus a
 * polling fallback comparing the head position. Runs only while it has listeners.
 */
export class PostgresAppendWatcher {
  private readonly listeners = new Set<ExternalAppendListener>();
  private client: CheckedOutClient | undefined;
  private running = false;
  private connects = 0;
  private pollTimer: ReturnType<typeof setInterval> | undefined;
  private reconnectTimer: ReturnType<typeof setTimeout> | undefined;
  private polling = false;
  /** The highest position known to be seen by the listeners' side; -1 until the first poll. */
  private lastSeen = -1;

  constructor(private readonly opts: PostgresAppendWatcherOptions) {}

  /** Adds a listener (starting the watcher with the first one); returns its remover. */
  subscribe(listener: ExternalAppendListener): () => void {
    this.listeners.add(listener);
    if (this.listeners.size === 1) this.start();
    return () => {
      if (this.listeners.delete(listener) && this.listeners.size === 0) this.stop();
    };
  }

  /** True while the LISTEN client is connected and listening (and the head position it compares with is known). */
  get listening(): boolean {
    return this.client !== undefined;
  }

  /**
   * Records positions first+1..last appended by this instance, so the poll does
   * not report them; only when first is already seen, so no gap hides an external event.
   */
  noteOwnAppend(first: number, last: number): void {
    if (this.lastSeen >= 0 && first - 1 <= this.lastSeen && last > this.lastSeen) this.lastSeen = last;
  }

  /** Stops listening and polling and drops the listeners. */
  close(): void {
    this.listeners.clear();
    this.stop();
  }

  private start(): void {
    this.running = true;
    void this.connect();
    if (this.opts.pollIntervalMs > 0) {
      this.pollTimer = setInterval(() => void this.poll(), this.opts.pollIntervalMs);
      this.pollTimer.unref?.();
      void this.poll();
    }
  }

  private stop(): void {
    this.running = false;
    if (this.pollTimer !== undefined) clearInterval(this.pollTimer);
    if (this.reconnectTimer !== undefined) clearTimeout(this.reconnectTimer);
    this.pollTimer = undefined;
    this.reconnectTimer = undefined;
    this.lastSeen = -1;
    const c = this.client;
    this.client = undefined;
    if (c !== undefined) destroy(c);
  }

  private async connect(): Promise<void> {
    if (!this.running || this.client !== undefined) return;
    let lost = false;
    const onLost = (): void => {
      if (lost) return;
      lost = true;
      if (this.client === client) this.client = undefined;
      destroy(client);
      this.scheduleReconnect();
    };
    let client: CheckedOutClient;
    try {
      // The checked-out client listens for 'error' and 'end' (onLost) from the start: a session that dies never goes unheard.
      client = await checkout(this.opts.pool, "listen", this.opts.onStatement, "postgres: the LISTEN client", onLost);
    } catch {
      this.scheduleReconnect();
      return;
    }
    if (!this.running || this.client !== undefined) {
      client.release();
      return;
    }
    client.raw.on("notification", (msg: Notification) => this.onNotification(msg));
    try {
      await client.query(`LISTEN "${this.opts.channel}"`);
      // The baseline is read after LISTEN is active: whatever commits later is notified or polled.
      if (this.lastSeen < 0) this.lastSeen = Math.max(this.lastSeen, await this.opts.readHead());
    } catch {
      onLost();
      return;
    }
    if (lost) return;
    if (!this.running) {
      destroy(client);
      return;
    }
    this.client = client;
    // After a reconnect, notifications sent while disconnected are lost: let listeners pull.
    if (this.connects++ > 0) this.fire(undefined);
  }

  private scheduleReconnect(): void {
    if (!this.running || this.reconnectTimer !== undefined) return;
    this.reconnectTimer = setTimeout(() => {
      this.reconnectTimer = undefined;
      void this.connect();
    }, this.opts.reconnectDelayMs);
    this.reconnectTimer.unref?.();
  }

  private onNotification(msg: Notification): void {
    if (msg.channel !== this.opts.channel) return;
    const payload = msg.payload ?? "";
    const sep = payload.lastIndexOf(":");
    if (payload.slice(0, sep) === this.opts.instanceId) return;
    const pos = Number(payload.slice(sep + 1));
    if (!Number.isFinite(pos)) return void this.fire(undefined);
    if (pos > this.lastSeen && this.lastSeen >= 0) this.lastSeen = pos;
    this.fire(pos);
  }

  private async poll(): Promise<void> {
    if (this.polling || !this.running) return;
    this.polling = true;
    try {
      const head = await this.opts.readHead();
      if (!this.running) return;
      if (this.lastSeen < 0) {
        this.lastSeen = head;
      } else if (head > this.lastSeen) {
        this.lastSeen = head;
        this.fire(head);
      }
    } catch {
      // The database is unreachable for now; the next tick tries again.
    } finally {
      this.polling = false;
    }
  }

  private fire(position: number | undefined): void {
    for (const l of [...this.listeners]) {
      try {
        l(position);
      } catch {
        // A listener's failure must not stop the watcher or the other listeners.
      }
    }
  }
}

/** Ends a client's session (its LISTEN and locks go with it); safe to call twice. */
function destroy(client: CheckedOutClient): void {
  client.raw.removeAllListeners("notification");
  client.release(true);
}
