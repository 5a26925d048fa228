/**
 * The signed-in dashboard's state, pushed by the server: system info,
 * handlers, their metrics, the failure history, a sharded app's shards and
 * placements, and the tenants' names, each a live query on the page's one
 * live-query stream (`LiveSet`: the server sends a result when it changed,
 * nothing is polled); the live
 * system-event stream; and a five-minute history of throughput and lag for
 * the charts, sampled here every two seconds from the latest metrics (a local
 * timer, no request). Views read it and subscribe to changes.
 */
import { Api, ApiError } from "./api.js";
import { LiveSet } from "./live-query.js";
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

/** How often the charts take a sample of the latest metrics (locally: no request). */
export const SAMPLE_MS = 2000;
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
  /** Commands per sample interval, from CommandExecuted / CommandFailed events. */
  readonly commandRate: [number, number][] = [];
  /** The last refusal or connection trouble of the system info, handler or metrics query; cleared by their next result. */
  loadError: ApiError | undefined;
  /** The stream shows every tenant's events (administrators), not only the session's tenant and system-wide ones. */
  allTenants = true;
  /** Handler errors of every tenant are asked for while the server grants them (administrators; a tenant's operator gets 403 once). */
  private wideLists = true;
  readonly stream: SystemEventStream;
  private readonly listeners = new Map<Topic, Set<() => void>>();
  private timer: ReturnType<typeof setInterval> | undefined;
  private commandsThisTick = 0;
  private readonly startedAt = Date.now();
  /** When `info` arrived: its uptime goes on counting from there. */
  private infoAt = 0;
  /** The page's live queries, on one stream (views follow theirs on it too). */
  readonly live: LiveSet;
  /** Optional queries the server refused (unknown, or not granted): not opened again. */
  private readonly refusedOptional = new Set<string>();
  /** Tenant names by uuid (Tenant.ListTenants, for those who may list them; else the session's tenant alone). */
  private readonly tenantNames = new Map<string, string>();

  constructor(readonly api: Api) {
    this.live = new LiveSet(api);
    this.stream = new SystemEventStream({
      url: () => api.url(`${api.runtimePath("sse")}${this.allTenants ? "?allTenants=true" : ""}`),
      headers: () => api.headers(),
      onEvent: (e) => this.onSystemEvent(e),
      // The live queries do not depend on this stream: only its own lines may be missing.
      onGap: (gap) => this.push({ kind: "gap", gap, at: Date.now() }),
      onStatus: (status, detail) => {
        this.streamStatus = status;
        this.streamDetail = detail ?? "";
        this.emit("status");
      },
      onUnauthenticated: (detail) => api.onSessionEnded(detail),
    });
  }

  start(): void {
    this.openLive();
    this.stream.start();
    this.timer = setInterval(() => this.tick(), SAMPLE_MS);
  }

  stop(): void {
    clearInterval(this.timer);
    this.live.stop();
    this.stream.stop();
    this.listeners.clear();
  }

  /** Reopens the stream with the other tenant filter (it resumes after the last id seen), and the tenant-wide queries. */
  setAllTenants(all: boolean): void {
    if (all === this.allTenants) return;
    this.allTenants = all;
    this.stream.stop();
    this.stream.start();
    this.openWide();
  }

  /** The live queries of the page; those of optional domains open once system info names them. */
  private openLive(): void {
    this.follow<SystemInfo>(
      "info",
      "Runtime",
      "GetSystemInfo",
      {},
      {
        onResult: (info) => {
          this.info = info;
          this.infoAt = Date.now();
          this.loadError = undefined;
          this.openOptional(info);
          this.emit("info");
        },
        onRefused: (e) => this.failed(e),
      },
    );
    this.openWide();
  }

  /** The queries that list every tenant's entries for administrators (`allTenants`), the session tenant's for others. */
  private openWide(): void {
    const wide = this.allTenants && this.wideLists ? { allTenants: true } : {};
    const refusedWide = (e: ApiError): boolean => {
      if (e.status !== 403 || !("allTenants" in wide)) return false;
      // Only system administrators see every tenant: the session tenant's then (opened once, by the first refusal).
      if (this.wideLists) {
        this.wideLists = false;
        this.openWide();
      }
      return true;
    };
    this.follow<EventHandlerInfo[]>("handlers", "Runtime", "ListEventHandlers", wide, {
      onResult: (list) => {
        this.handlers = list;
        this.loadError = undefined;
        this.emit("handlers");
      },
      onRefused: (e) => refusedWide(e) || this.failed(e),
    });
    this.follow<Record<string, EventHandlerMetrics>>("metrics", "Runtime", "GetMetrics", wide, {
      onResult: (metrics) => {
        const first = Object.keys(this.metrics).length === 0;
        this.metrics = metrics;
        if (first) this.sample(Date.now());
        this.emit("handlers");
      },
      onRefused: (e) => refusedWide(e) || this.failed(e),
    });
    // The failure history is the server's: it shows what failed before the page opened too.
    this.follow<FailureEntry[]>(
      "failures",
      "Runtime",
      "ListFailures",
      { limit: 20, ...wide },
      {
        onResult: (failures) => {
          this.failures = failures;
          this.emit("handlers");
        },
        onRefused: (e) => {
          if (refusedWide(e)) return;
          this.failures = undefined;
          this.emit("handlers");
        },
      },
    );
  }

  /** Only a sharded app has `Shards`, only an app with the built-in domains `Tenant`: asked when system info lists them. */
  private openOptional(info: SystemInfo): void {
    const has = (domain: string) => info.domains === undefined || info.domains.includes(domain);
    // Unknown here, or not granted: not asked again while the page is open.
    const gone = (key: string) => () => void this.refusedOptional.add(key);
    const wanted = (key: string) => !this.live.has(key) && !this.refusedOptional.has(key);
    if (has("Shards") && wanted("shards") && wanted("placements")) {
      this.follow<ShardInfo[]>(
        "shards",
        "Shards",
        "ListShards",
        {},
        {
          onResult: (shards) => {
            this.shards = shards;
            this.emit("handlers");
          },
          onRefused: gone("shards"),
        },
      );
      this.follow<Placement[]>(
        "placements",
        "Shards",
        "ListPlacements",
        {},
        {
          onResult: (placements) => {
            this.placements = placements;
            this.emit("handlers");
          },
          onRefused: gone("placements"),
        },
      );
    }
    if (info.domains?.includes("Tenant") === true && wanted("tenants")) {
      this.follow<{ items: { aggregateUuid: string; model: { name: string } }[] }>(
        "tenants",
        "Tenant",
        "ListTenants",
        { pageSize: 1000 },
        {
          onResult: (page) => {
            for (const t of page.items) this.tenantNames.set(t.aggregateUuid, t.model.name);
            this.emit("stream");
          },
          // Not a system administrator: the session's tenant is the one it sees anyway.
          onRefused: gone("tenants"),
        },
      );
    }
  }

  /** Follows (or follows again, with another payload) the live query kept under `key`. */
  private follow<T>(
    key: string,
    domain: string,
    name: string,
    payload: Record<string, unknown>,
    cb: { onResult(result: T): void; onRefused(e: ApiError): void },
  ): void {
    this.live.follow<T>(key, domain, name, payload, {
      onResult: cb.onResult,
      onRefused: cb.onRefused,
      onTrouble: (e) => {
        if (key === "info" || key === "handlers" || key === "metrics") this.failed(e);
      },
    });
  }

  private failed(e: ApiError): boolean {
    this.loadError = e;
    this.emit("handlers");
    this.emit("info");
    return true;
  }

  /** The instance's uptime now: the server's at the last system info, counted on here. */
  uptimeMs(): number {
    const info = this.info;
    if (info === undefined) return 0;
    return info.startedAt === 0 ? 0 : info.uptimeMs + (Date.now() - this.infoAt);
  }

  /** The sample timer: the charts' history and the command rate move on, the views redraw (no request). */
  private tick(): void {
    this.tickCommands();
    this.sample(Date.now());
    this.emit("handlers");
    this.emit("info");
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

  /**
   * The name of a tenant, when known: every tenant's for those who may list
   * them (a live query), else the session's own.
   */
  tenantName(tenantUuid: string | undefined): string | undefined {
    if (tenantUuid === undefined) return undefined;
    const session = this.api.session;
    if (session !== undefined && session.tenantUuid === tenantUuid && session.tenantName !== "") return session.tenantName;
    return this.tenantNames.get(tenantUuid);
  }

  private sample(t: number): void {
    for (const [name, m] of Object.entries(this.metrics)) {
      let list = this.history.get(name);
      if (list === undefined) this.history.set(name, (list = []));
      list.push({ t, processed: m.eventsProcessed, lag: m.lag });
      while (list.length > 0 && list[0]!.t < t - HISTORY_MS - SAMPLE_MS) list.shift();
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
    this.commandRate.push([t, this.commandsThisTick / (SAMPLE_MS / 1000)]);
    this.commandsThisTick = 0;
    while (this.commandRate.length > 0 && this.commandRate[0]![0] < t - HISTORY_MS - SAMPLE_MS) this.commandRate.shift();
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
        break;
      case "RestoreStarted":
        if (name !== undefined)
          this.restoring.set(name, { eventsReplayed: 0, position: num(e.data.afterPosition), head: this.info?.headPosition ?? 0 });
        this.emit("handlers");
        break;
      case "RestoreProgress":
        if (name !== undefined)
          this.restoring.set(name, { eventsReplayed: num(e.data.eventsReplayed), position: num(e.data.position), head: num(e.data.head) });
        this.emit("handlers");
        break;
      case "RestoreCompleted":
      case "RestoreFailed":
        if (name !== undefined) this.restoring.delete(name);
        this.emit("handlers");
        break;
      default:
        break;
    }
  }
}

function num(v: unknown): number {
  return typeof v === "number" ? v : 0;
}
