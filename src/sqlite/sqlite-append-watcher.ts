/**
 * Told that another connection (process) appended events; `position` is the
 * head position seen then (a hint: pull with readAll from your checkpoint).
 */
export type SqliteExternalAppendListener = (position?: number) => void;

/** Options of {@link SqliteAppendWatcher}. */
export interface SqliteAppendWatcherOptions {
  /** Poll period in ms; 0 turns watching off (listeners are then never called). */
  readonly pollIntervalMs: number;
  /** `PRAGMA data_version` of the connection: it changes only when another connection commits. */
  readonly readDataVersion: () => number;
  /** The events table's highest position. */
  readonly readHead: () => number;
}

/**
 * Tells listeners that events were appended through another connection to the
 * same file. SQLite has no cross-process notification, so this polls
 * `PRAGMA data_version` (a cheap read of the connection's view of the file,
 * unchanged by its own commits) and, only when it moved, compares the head
 * position: commits of other tables (readmodels, commands, leases) and this
 * connection's own appends notify nobody. Runs only while it has listeners;
 * its timer never keeps the process alive.
 */
export class SqliteAppendWatcher {
  private readonly listeners = new Set<SqliteExternalAppendListener>();
  private timer: ReturnType<typeof setInterval> | undefined;
  private dataVersion = -1;
  /** The highest position the listeners' side has seen (told, or appended by this connection); -1 while stopped. */
  private lastSeen = -1;

  constructor(private readonly opts: SqliteAppendWatcherOptions) {}

  /** Adds a listener (the first one takes the baseline and starts the timer); returns its remover. */
  subscribe(listener: SqliteExternalAppendListener): () => void {
    // Wrapped so the same function can be registered twice and removed once per registration.
    const entry: SqliteExternalAppendListener = (position) => listener(position);
    this.listeners.add(entry);
    if (this.listeners.size === 1) {
      try {
        this.start();
      } catch (e) {
        this.listeners.delete(entry);
        throw e;
      }
    }
    return () => {
      if (this.listeners.delete(entry) && this.listeners.size === 0) this.stop();
    };
  }

  /** True while the poll timer runs. */
  get running(): boolean {
    return this.timer !== undefined;
  }

  /**
   * Records positions first..last appended through this connection, so they
   * are not reported; only when everything before `first` was seen already, so
   * an external append committed just before ours is still reported.
   */
  noteOwnAppend(first: number, last: number): void {
    if (this.lastSeen >= 0 && first - 1 <= this.lastSeen && last > this.lastSeen) this.lastSeen = last;
  }

  /** Checks once now (the timer calls this); true when listeners were told. */
  poll(): boolean {
    if (this.lastSeen < 0) return false;
    let head: number;
    try {
      const version = this.opts.readDataVersion();
      if (version === this.dataVersion) return false;
      this.dataVersion = version;
      head = this.opts.readHead();
    } catch {
      // The file is busy or gone for now; the next tick tries again (close() stops the timer).
      return false;
    }
    if (head <= this.lastSeen) {
      // Events are only appended; a lower head means the table was emptied elsewhere: follow it down.
      this.lastSeen = head;
      return false;
    }
    this.lastSeen = head;
    for (const l of [...this.listeners]) {
      try {
        l(head);
      } catch (e) {
        process.emitWarning(e instanceof Error ? e : new Error(String(e)), { code: "MNEME_APPEND_LISTENER_FAILED" });
      }
    }
    return true;
  }

  /** Stops polling and drops the listeners. */
  close(): void {
    this.listeners.clear();
    this.stop();
  }

  private start(): void {
    if (this.opts.pollIntervalMs <= 0) return;
    // The baseline: whatever commits from now on moves data_version and is compared with this head.
    this.dataVersion = this.opts.readDataVersion();
    this.lastSeen = this.opts.readHead();
    this.timer = setInterval(() => this.poll(), this.opts.pollIntervalMs);
    this.timer.unref?.();
  }

  private stop(): void {
    if (this.timer !== undefined) clearInterval(this.timer);
    this.timer = undefined;
    this.dataVersion = -1;
    this.lastSeen = -1;
  }
}
