/**
 * The signed-in dashboard's state: handlers and their metrics (polled every
 * two seconds, and at once when a system event says a handler changed), a
 * five-minute history of throughput and lag for the charts, system info, and
 * the live system-event stream. Views read it and subscribe to changes.
 */
import { Api, ApiError } from "./api.js";
import { type StreamStatus, SystemEventStream } from "./sse.js";
import type {
  EventHandlerInfo,
  EventHandlerMetrics,
  FailureEntry,
  GapInfo,
  Placement,
  ShardInfo,
  SystemEvent,
  SystemInfo,
} from "./types.js";

export const POLL_MS = 2000;
export const HISTORY_MS = 5 * 60_000;
const MAX_EVENTS = 500;

export interface Sample {
  t: number;
  processed: number;
  lag: number;
}

/** One line of the live stream: an event, or the gap the server reported. */
export type StreamEntry = { kind: "event"; event: SystemEvent } | { kind: "gap"; gap: GapInfo; at: number };

export interface RestoreProgress {
  eventsReplayed: number;
  position: number;
  head: number;
}

type Topic = "handlers" | "info" | "stream" | "status";

export class App {
  handlers: EventHandlerInfo[] = [];
  metrics: Record<string, EventHandlerMetrics> = {};
  info: SystemInfo | undefined;
  /** The server's failure history (Runtime.ListFailures), newest first; undefined while it cannot be read. */
  failures: FailureEntry[] | undefined;
  /** A sharded app's shards and placements (`Shards` queries); undefined for a plain app or a caller who may not see them. */
  shards: ShardInfo[] | undefined;
  placements: Placement[] | undefined;
  /** Per handler, oldest first. */
  readonly history = new Map<string, Sample[]>();
  /** Newest first. */
  readonly events: StreamEntry[] = [];
  readonly restoring = new Map<string, RestoreProgress>();
  streamStatus: StreamStatus = "connecting";
  streamDetail = "";
  /** Commands per poll interval, from CommandExecuted / CommandFailed events. */
  readonly commandRate: [number, number][] = [];
  loadError: ApiError | undefined;
  /** The stream shows every tenant's events (administrators), not only the session's tenant and system-wide ones. */
  allTenants = true;
  /** Handler errors of every tenant are asked for while the server grants them (administrators; a tenant's operator gets 403 once). */
  private wideLists = true;
  readonly stream: SystemEventStream;
  private readonly listeners = new Map<Topic, Set<() => void>>();
  private timer: ReturnType<typeof setInterval> | undefined;
  private refreshing: Promise<void> | undefined;
  private commandsThisTick = 0;
  private readonly startedAt = Date.now();
  /** The server has no `Shards` queries for this session (a plain app, or no grant): not asked again. */
  private noShards = false;
  /** Tenant names by uuid (Tenant.ListTenants, for those who may list them; else the session's tenant alone). */
  private readonly tenantNames = new Map<string, string>();
  private tenantNamesAt = 0;

  constructor(readonly api: Api) {
    this.stream = new SystemEventStream({
      url: () => api.url(`${api.runtimePath("sse")}${this.allTenants ? "?allTenants=true" : ""}`),
      headers: () => api.headers(),
      onEvent: (e) => this.onSystemEvent(e),
      onGap: (gap) => {
        this.push({ kind: "gap", gap, at: Date.now() });
        // Whatever was derived from the stream may be stale: read the state again.
        void this.refresh();
      },
      onStatus: (status, detail) => {
        this.streamStatus = status;
        this.streamDetail = detail ?? "";
        this.emit("status");
      },
      onUnauthenticated: (detail) => api.onSessionEnded(detail),
    });
  }

  start(): void {
    void this.refresh();
    this.stream.start();
    this.timer = setInterval(() => {
      this.tickCommands();
      void this.refresh();
    }, POLL_MS);
  }

  stop(): void {
    clearInterval(this.timer);
    this.stream.stop();
    this.listeners.clear();
  }

  /** Reopens the stream with the other tenant filter; it resumes after the last id seen. */
  setAllTenants(all: boolean): void {
    if (all === this.allTenants) return;
    this.allTenants = all;
    this.stream.stop();
    this.stream.start();
    void this.refresh();
  }

  on(topic: Topic, fn: () => void): () => void {
    let set = this.listeners.get(topic);
    if (set === undefined) this.listeners.set(topic, (set = new Set()));
    set.add(fn);
    return () => set.delete(fn);
  }

  private emit(topic: Topic): void {
    for (const fn of this.listeners.get(topic) ?? []) fn();
  }

  /** Reads handlers, metrics and system info; concurrent calls share one round. */
  refresh(): Promise<void> {
    this.refreshing ??= this.load().finally(() => (this.refreshing = undefined));
    return this.refreshing;
  }

  private async load(): Promise<void> {
    // With "All tenants", handler errors of every tenant's events; else only the session's tenant's.
    const wide = this.allTenants && this.wideLists ? "?allTenants=true" : "";
    try {
      // System info first: it says which domains the server has, so no query is sent that can only answer 404.
      const info = await this.api.get<SystemInfo>(this.api.runtimePath("system-info"));
      const has = (domain: string) => info.domains === undefined || info.domains.includes(domain);
      if (!has("Shards")) this.noShards = true;
      const [list, metrics, failures, shards, placements] = await Promise.all([
        this.api.getAll<EventHandlerInfo>(this.api.runtimePath(`event-handlers${wide}`)),
        this.api.get<Record<string, EventHandlerMetrics>>(this.api.runtimePath(`metrics${wide}`)),
        // The failure history is the server's: it shows what failed before the page opened too.
        this.api
          .query<FailureEntry[]>("Runtime", "ListFailures", { limit: 20, ...(wide === "" ? {} : { allTenants: true }) })
          .catch((e: unknown) => {
            if (e instanceof ApiError && e.status === 403 && wide !== "") throw e;
            return undefined;
          }),
        // Only a sharded app has these (mneme/shards); asked until the server refuses once (unknown, or not granted).
        this.noShards ? undefined : this.api.query<ShardInfo[]>("Shards", "ListShards", {}).catch((e: unknown) => this.refusedShards(e)),
        this.noShards
          ? undefined
          : this.api.query<Placement[]>("Shards", "ListPlacements", {}).catch((e: unknown) => this.refusedShards(e)),
        info.domains?.includes("Tenant") === true ? this.loadTenantNames() : undefined,
      ]);
      this.handlers = list;
      this.metrics = metrics;
      this.info = info;
      this.failures = failures;
      this.shards = shards;
      this.placements = placements;
      this.loadError = undefined;
      this.sample(Date.now());
    } catch (e) {
      if (wide !== "" && e instanceof ApiError && e.status === 403) {
        this.wideLists = false;
        return this.load();
      }
      this.loadError = e instanceof ApiError ? e : new ApiError(0, "ERROR", String(e));
    }
    this.emit("handlers");
    this.emit("info");
  }

  /**
   * The name of a tenant, when known: every tenant's for those who may list
   * them (read once a minute), else the session's own.
   */
  tenantName(tenantUuid: string | undefined): string | undefined {
    if (tenantUuid === undefined) return undefined;
    const session = this.api.session;
    if (session !== undefined && session.tenantUuid === tenantUuid && session.tenantName !== "") return session.tenantName;
    return this.tenantNames.get(tenantUuid);
  }

  private async loadTenantNames(): Promise<void> {
    if (Date.now() - this.tenantNamesAt < 60_000) return;
    this.tenantNamesAt = Date.now();
    try {
      const page = await this.api.query<{ items: { aggregateUuid: string; model: { name: string } }[] }>("Tenant", "ListTenants", {
        pageSize: 1000,
      });
      for (const t of page.items) this.tenantNames.set(t.aggregateUuid, t.model.name);
    } catch {
      // Not a system administrator: the session's tenant is the one it sees anyway.
    }
  }

  private refusedShards(e: unknown): undefined {
    if (e instanceof ApiError && (e.status === 403 || e.status === 404)) this.noShards = true;
    return undefined;
  }

  private sample(t: number): void {
    for (const [name, m] of Object.entries(this.metrics)) {
      let list = this.history.get(name);
      if (list === undefined) this.history.set(name, (list = []));
      list.push({ t, processed: m.eventsProcessed, lag: m.lag });
      while (list.length > 0 && list[0]!.t < t - HISTORY_MS - POLL_MS) list.shift();
    }
  }

  /** Events per second between samples; a counter that went down (a restore from zero) starts over. */
  throughput(name: string): [number, number][] {
    const list = this.history.get(name) ?? [];
    const out: [number, number][] = [];
    for (let i = 1; i < list.length; i++) {
      const a = list[i - 1]!;
      const b = list[i]!;
      const dt = (b.t - a.t) / 1000;
      if (dt <= 0) continue;
      out.push([b.t, Math.max(0, b.processed - a.processed) / dt]);
    }
    return out;
  }

  /** The charts' window: the time since the first sample, between one and five minutes. */
  chartWindowMs(now: number): number {
    return Math.min(HISTORY_MS, Math.max(60_000, now - this.startedAt));
  }

  lag(name: string): [number, number][] {
    return (this.history.get(name) ?? []).map((s) => [s.t, s.lag]);
  }

  private tickCommands(): void {
    const t = Date.now();
    this.commandRate.push([t, this.commandsThisTick / (POLL_MS / 1000)]);
    this.commandsThisTick = 0;
    while (this.commandRate.length > 0 && this.commandRate[0]![0] < t - HISTORY_MS - POLL_MS) this.commandRate.shift();
  }

  private push(entry: StreamEntry): void {
    this.events.unshift(entry);
    if (this.events.length > MAX_EVENTS) this.events.length = MAX_EVENTS;
    this.emit("stream");
  }

  private onSystemEvent(e: SystemEvent): void {
    this.push({ kind: "event", event: e });
    const name = typeof e.data.eventHandlerName === "string" ? e.data.eventHandlerName : undefined;
    switch (e.kind) {
      case "CommandExecuted":
        this.commandsThisTick++;
        break;
      case "CommandFailed":
        this.commandsThisTick++;
        void this.refresh();
        break;
      case "RestoreStarted":
        if (name !== undefined)
          this.restoring.set(name, { eventsReplayed: 0, position: num(e.data.afterPosition), head: this.info?.headPosition ?? 0 });
        void this.refresh();
        break;
      case "RestoreProgress":
        if (name !== undefined)
          this.restoring.set(name, { eventsReplayed: num(e.data.eventsReplayed), position: num(e.data.position), head: num(e.data.head) });
        this.emit("handlers");
        break;
      case "RestoreCompleted":
      case "RestoreFailed":
        if (name !== undefined) this.restoring.delete(name);
        void this.refresh();
        break;
      case "EventHandlerStateChanged":
      case "HandlerFailed":
      case "HandlersInStandby":
        void this.refresh();
        break;
      default:
        break;
    }
  }
}

function num(v: unknown): number {
  return typeof v === "number" ? v : 0;
}
