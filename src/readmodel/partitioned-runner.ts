import { AsyncLocalStorage } from "node:async_hooks";
import { errorMessage, MnemeError } from "../model/errors.js";
import type {
  EventHandler,
  EventHandlerInfo,
  EventHandlerMetrics,
  EventHandlerState,
  PartitionInfo,
  RestorationState,
  RestoreReport,
} from "../model/event-handler.js";
import type { Event } from "../model/types.js";
import { leasedBackend, type LeasedReadmodelStoreBackend } from "../store/leased-readmodel-backend.js";
import { type LaneRunner, PartitionBalancer } from "./partition-balancer.js";
import { PartitionReader } from "./partition-reader.js";
import { partitionCountKey, partitionKey, partitionOf } from "./partition-routing.js";
import { supportsGenerations } from "./readmodel-generations.js";
import type { DeliveryOptions, HandlerHost, PartitionLane, RestorerConfig } from "./runner-state.js";

/**
 * Runs a handler made with `withPartitions(n)`: n lanes, each a runner of its
 * own for the events of one partition (by the stable hash of aggregateUuid),
 * with its own checkpoint and fenced lock, so that up to n instances apply
 * the handler at once. The PartitionBalancer decides which lanes this
 * instance holds (its fair share of the live instances); this class answers
 * for the handler as a whole: state, listing with its partitions, waits of
 * `waitToFinish`, start/stop, and restores (from zero: every partition
 * together, blue-green, by lane 0 holding every partition's lock).
 * @internal
 */
export class PartitionedRunner {
  readonly #handler: EventHandler;
  readonly #lanes: LaneRunner[];
  /** Each lane's partition record (lane 0's `whole` is set during a restore from zero). */
  readonly #configs: PartitionLane[] = [];
  readonly #restorer: () => RestorerConfig | undefined;
  readonly #balancer: PartitionBalancer;
  #host: HandlerHost | undefined;
  /** Lane 0 restores every partition from zero (the balancer waits meanwhile). */
  #rebuilding = false;
  #chain: Promise<unknown> = Promise.resolve();

  constructor(handler: EventHandler, count: number, makeLane: () => LaneRunner, restorer: () => RestorerConfig | undefined) {
    this.#handler = handler;
    this.#restorer = restorer;
    const gate = <R>(fn: () => Promise<R>): Promise<R> => {
      const run = this.#chain.then(fn, fn);
      this.#chain = run.catch(() => undefined);
      return run;
    };
    this.#lanes = [];
    const reader = new PartitionReader(() => {
      if (this.#host === undefined) throw new MnemeError("NOT_STARTED", `event handler ${handler.name} is not registered with a facade`);
      return this.#host.eventRepository;
    });
    for (let index = 0; index < count; index++) {
      const lane = makeLane();
      const config: PartitionLane = {
        index,
        count,
        get key() {
          return partitionKey(handler.name, index);
        },
        gate,
        pages: (read) => reader.pages(read),
        whole: undefined,
      };
      lane.configureLane(config);
      this.#configs.push(config);
      this.#lanes.push(lane);
    }
    this.#balancer = new PartitionBalancer({
      lanes: this.#lanes,
      name: () => handler.name,
      backend: () => this.backend(),
      host: () => this.#host,
      paused: () => this.#rebuilding,
      snapshot: AsyncLocalStorage.snapshot(),
    });
  }

  get count(): number {
    return this.#lanes.length;
  }

  backend(): LeasedReadmodelStoreBackend {
    const r = this.#restorer();
    if (r !== undefined) return leasedBackend(r.backend());
    if (this.#host === undefined)
      throw new MnemeError("NOT_STARTED", `event handler ${this.#handler.name} is not registered with a facade`);
    return leasedBackend(this.#host.readmodelStoreBackend);
  }

  /** The lanes restore through their own runners (from their checkpoints); the handler's restoreState restores them all. */
  configureRestorer(config: RestorerConfig): void {
    this.#lanes.forEach((lane) =>
      lane.configureRestorer({ backend: config.backend, options: config.options, restoreState: (o) => lane.startRestore(o) }),
    );
  }

  attach(host: HandlerHost, delivery: DeliveryOptions): void {
    this.#host = host;
    this.#balancer.delivery = delivery;
    this.#lanes.forEach((lane, index) => lane.attach(laneHost(host, index), delivery));
  }

  // ---------------------------------------------------------------- state

  get state(): EventHandlerState {
    if (this.#balancer.failure !== undefined) return "failed";
    const states = this.#lanes.map((l) => l.state);
    for (const s of ["failed", "running", "standby"] as const) if (states.includes(s)) return s;
    return "stopped";
  }

  get restorationState(): RestorationState {
    const states = this.#lanes.map((l) => l.restorationState);
    for (const s of ["restoring", "failed", "cancelled", "restored"] as const) if (states.includes(s)) return s;
    return "idle";
  }

  get restoring(): boolean {
    return this.#lanes.some((l) => l.restoring);
  }

  /** Settles when every lane restoring now is only catching up from its checkpoint (undefined otherwise, or when none is). */
  get catchingUp(): Promise<void> | undefined {
    if (this.#rebuilding) return undefined;
    const waits: Promise<void>[] = [];
    for (const lane of this.#lanes) {
      if (!lane.restoring) continue;
      const wait = lane.catchingUp;
      if (wait === undefined) return undefined;
      waits.push(wait);
    }
    return waits.length === 0 ? undefined : Promise.all(waits).then(() => undefined);
  }

  /**
   * The position every partition this instance runs has passed (each lane sees
   * every event, so it passes the other partitions' too); when it runs none,
   * the furthest checkpoint of the partitions' holders.
   */
  get lastPosition(): number {
    return this.#position().lastPosition;
  }

  get lastEventTimestamp(): number {
    return this.#position().lastEventTimestamp;
  }

  #position(): { lastPosition: number; lastEventTimestamp: number } {
    const local = this.#lanes.filter((l) => l.state === "running");
    if (local.length > 0) return local.reduce((a, l) => (l.lastPosition < a.lastPosition ? l : a), local[0]!);
    let best = { lastPosition: 0, lastEventTimestamp: 0 };
    for (const l of this.#lanes) {
      const p = l.info().lastPosition;
      if (p > best.lastPosition) best = { lastPosition: p, lastEventTimestamp: l.lastEventTimestamp };
    }
    return best;
  }

  /** The listing: the handler's states and position, and each partition with its holder, state and position. */
  info(): EventHandlerInfo {
    const lanes = this.#lanes.map((l) => l.info());
    const partitions: PartitionInfo[] = lanes.map((l, partition) => ({
      partition,
      ...(l.holder === undefined ? {} : { holder: l.holder }),
      state: l.state,
      lastPosition: l.lastPosition,
    }));
    const { holder: _h, lastError: _e, lastErrorTenantUuid: _t, restoration: _r, ...base } = lanes[0]!;
    const info: EventHandlerInfo = { ...base, state: this.state, restorationState: this.restorationState, ...this.#position(), partitions };
    const own = this.#host?.instanceId;
    const holder = this.#lanes.some((l) => l.state === "running") ? own : lanes.find((l) => l.holder !== undefined)?.holder;
    if (holder !== undefined) info.holder = holder;
    const failed = this.#balancer.failure ?? lanes.find((l) => l.lastError !== undefined);
    if (failed !== undefined && info.state === "failed") {
      if (failed instanceof Error) info.lastError = failed.message;
      else {
        info.lastError = failed.lastError!;
        if (failed.lastErrorTenantUuid !== undefined) info.lastErrorTenantUuid = failed.lastErrorTenantUuid;
      }
    }
    if (lanes[0]!.restoration !== undefined) info.restoration = lanes[0]!.restoration;
    return info;
  }

  /** The lanes' metrics summed (handling times: the busiest lane's). */
  getMetrics(): EventHandlerMetrics {
    const all = this.#lanes.map((l) => l.getMetrics());
    const busiest = all.reduce((a, m) => (m.eventsProcessed > a.eventsProcessed ? m : a), all[0]!);
    const out: EventHandlerMetrics = { ...busiest, ...this.#position() };
    out.eventsProcessed = all.reduce((n, m) => n + m.eventsProcessed, 0);
    out.eventsFailed = all.reduce((n, m) => n + m.eventsFailed, 0);
    out.eventsCaught = all.reduce((n, m) => n + m.eventsCaught, 0);
    out.lag = Math.max(0, (this.#host?.knownHead() ?? 0) - out.lastPosition);
    return out;
  }

  // ---------------------------------------------------------------- delivery and waits

  notify(events: readonly Event[] | null): void {
    for (const lane of this.#lanes) lane.notify(events);
  }

  /** Resolves when every lane running here has passed `to` (or one failed in [from, to]: that error). */
  async waitFor(from: number, to: number): Promise<Error | undefined> {
    const waits = this.#lanes.map((l) => (l.state === "standby" ? Promise.resolve(undefined) : l.waitFor(from, to)));
    return (await Promise.all(waits)).find((e) => e !== undefined);
  }

  /**
   * `waitToFinish` of a command's events: each partition that has some of
   * them is waited for where it runs (here, or through its holder's
   * checkpoint); during a restore from zero, the switch of every partition.
   */
  async waitForEvents(events: readonly Event[], handles: (e: Event) => boolean): Promise<Error | undefined> {
    const mine = events.filter(handles);
    if (mine.length === 0) return undefined;
    if (this.#rebuilding) return this.#lanes[0]!.waitFor(mine[0]!.position, mine[mine.length - 1]!.position);
    const waits = this.#lanes.map((lane, index) => {
      const own = mine.filter((e) => partitionOf(e.aggregateUuid, this.#lanes.length) === index);
      if (own.length === 0) return Promise.resolve(undefined);
      const from = own[0]!.position;
      const to = own[own.length - 1]!.position;
      if (lane.state === "standby") return lane.waitForHolder(from, to);
      return lane.waitFor(from, to).then((e) => (e !== undefined && lane.state === "standby" ? lane.waitForHolder(from, to) : e));
    });
    return (await Promise.all(waits)).find((e) => e !== undefined);
  }

  async idle(): Promise<void> {
    await Promise.all(this.#lanes.map((l) => l.idle()));
  }

  // ---------------------------------------------------------------- control

  /** Goes live: takes this instance's fair share of the partitions (restored from their checkpoints) and keeps it balanced. */
  goLive(): Promise<void> {
    return this.#balancer.goLive();
  }

  async start(): Promise<void> {
    const name = this.#handler.name;
    if (this.restoring) throw new MnemeError("INVALID_STATE", `event handler ${name} is restoring; wait for it or stop it`);
    if (this.#balancer.live && this.state !== "failed") throw new MnemeError("INVALID_STATE", `event handler ${name} is running already`);
    await this.#balancer.stop();
    for (const lane of this.#lanes) if (lane.state === "failed") await lane.stop().catch(() => undefined);
    await this.#balancer.goLive();
  }

  /** Stops every lane (checkpoints persisted, locks released) and leaves the balance. */
  async stop(): Promise<void> {
    if (!this.#balancer.live && this.state === "stopped" && !this.restoring)
      throw new MnemeError("INVALID_STATE", `event handler ${this.#handler.name} is stopped already`);
    await this.#balancer.stop();
  }

  /**
   * Restores: from zero, every partition's next generation together (see
   * #restoreWhole); otherwise each partition held here from its checkpoint
   * (going live first when stopped).
   */
  startRestore(opts: { fromZero?: boolean; signal?: AbortSignal } = {}): { done: Promise<RestoreReport>; cancel(): void } {
    const controller = new AbortController();
    opts.signal?.addEventListener("abort", () => controller.abort(), { once: true });
    const t0 = performance.now();
    const run = opts.fromZero === true ? this.#restoreWhole(controller.signal) : this.#restoreHeld(controller.signal, t0);
    run.catch(() => undefined);
    return { done: run, cancel: () => controller.abort() };
  }

  async #restoreHeld(signal: AbortSignal, t0: number): Promise<RestoreReport> {
    if (!this.#balancer.live) await this.#balancer.goLive();
    const held = this.#lanes.filter((l) => l.lockHold.held && !l.restoring);
    const reports = await Promise.all(held.map((l) => l.startRestore({ signal }).done));
    const durationMs = performance.now() - t0;
    const replayed = reports.reduce((n, r) => n + r.eventsReplayed, 0);
    return {
      eventsReplayed: replayed,
      eventsCaught: reports.reduce((n, r) => n + r.eventsCaught, 0),
      durationMs,
      eventsPerSecond: durationMs > 0 ? (replayed / durationMs) * 1000 : replayed,
      afterPosition: Math.min(...reports.map((r) => r.afterPosition), this.lastPosition),
      toPosition: this.lastPosition,
    };
  }

  /**
   * A restore from zero of every partition: this instance takes every
   * partition's lock (INVALID_STATE, naming the holder, when another instance
   * keeps one), pauses lanes 1..n-1, and lane 0 replays every partition's
   * events into the next generation, fenced by every lock, switching the
   * collections and every partition's checkpoint in one transaction; then the
   * lanes go live from there and the balancer hands partitions out again.
   */
  async #restoreWhole(signal: AbortSignal): Promise<RestoreReport> {
    const name = this.#handler.name;
    const backend = this.backend();
    if (!supportsGenerations(backend))
      throw new MnemeError(
        "INVALID_ACTION",
        `readmodel ${name} is partitioned: its backend cannot switch generations, and a restore from zero in place would leave its partitions at different positions`,
      );
    // The lanes' own catch-ups from their checkpoints (a start or a takeover) are no restore asked for: wait for them.
    await this.catchingUp;
    if (this.#rebuilding || this.restoring) throw new MnemeError("INVALID_STATE", `event handler ${name} is restoring already`);
    this.#rebuilding = true;
    const [first, ...rest] = this.#lanes as [LaneRunner, ...LaneRunner[]];
    try {
      await this.#balancer.settled();
      this.#balancer.live = true;
      await this.#holdEveryLock();
      for (const lane of rest) await lane.pause();
      const keys = this.#lanes.map((_, i) => partitionKey(name, i));
      this.#configs[0]!.whole = {
        fences: () => rest.map((l, i) => [keys[i + 1]!, l.lockHold.token] as const),
        keys,
        countKey: partitionCountKey(name),
      };
      this.#balancer.failure = undefined;
      return await first.startRestore({ fromZero: true, signal }).done;
    } finally {
      this.#configs[0]!.whole = undefined;
      this.#rebuilding = false;
      await this.#resumeLanes();
    }
  }

  /** Every partition's lock, held here (stopped where it was not running); INVALID_STATE when another instance keeps one. */
  async #holdEveryLock(): Promise<void> {
    for (const [i, lane] of this.#lanes.entries()) {
      if (await lane.holdStopped()) continue;
      const holder = lane.info().holder;
      throw new MnemeError(
        "INVALID_STATE",
        `readmodel ${this.#handler.name} is partitioned and its partition ${i} runs on ${holder === undefined ? "another instance" : `instance ${holder}`}: a restore from zero needs every partition here; stop the handler on the other instances first`,
      );
    }
  }

  /** After a restore from zero (done or not): lanes held here and stopped go live from their checkpoints; the balance goes on. */
  async #resumeLanes(): Promise<void> {
    for (const lane of this.#lanes) {
      if (lane.lockHold.held && lane.state === "stopped" && !lane.restoring) {
        await lane.start().catch((e: unknown) => {
          this.#balancer.lastError = errorMessage(e);
        });
      }
    }
    this.#balancer.schedule();
  }
}

/** The host of lane `index`: the handler's, with the partition named in the system events its lane publishes. */
function laneHost(host: HandlerHost, index: number): HandlerHost {
  return Object.create(host, {
    publish: {
      value: (kind: Parameters<HandlerHost["publish"]>[0], data: Record<string, unknown>, tenantUuid?: string) =>
        host.publish(kind, { ...data, partition: index }, tenantUuid),
    },
  }) as HandlerHost;
}
