import { errorMessage, MnemeError } from "../model/errors.js";
import type { LeasedReadmodelStoreBackend } from "../store/leased-readmodel-backend.js";
import { memberKey, partitionCountKey, partitionKey } from "./partition-routing.js";
import type { EventHandlerInfo, EventHandlerMetrics, EventHandlerState, RestorationState, RestoreReport } from "../model/event-handler.js";
import type { Event } from "../model/types.js";
import { DEFAULT_DELIVERY, type DeliveryOptions, type HandlerHost, type PartitionLane, type RestorerConfig } from "./runner-state.js";

/**
 * What the partitioned runner needs of each lane: a HandlerRunner made for
 * one partition (structurally; this file does not import the runner).
 * @internal
 */
export interface LaneRunner {
  readonly state: EventHandlerState;
  readonly restorationState: RestorationState;
  readonly restoring: boolean;
  /** Settles when the lane's own catch-up from its checkpoint is done (undefined when none, or a restore asked for runs). */
  readonly catchingUp: Promise<void> | undefined;
  readonly lastPosition: number;
  readonly lastEventTimestamp: number;
  /** Whether this instance holds the lane's lock, and its fencing token. */
  readonly lockHold: { readonly held: boolean; readonly token: number | undefined };
  configureLane(lane: PartitionLane): void;
  configureRestorer(config: RestorerConfig): void;
  attach(host: HandlerHost, delivery: DeliveryOptions): void;
  notify(events: readonly Event[] | null): void;
  waitFor(from: number, to: number): Promise<Error | undefined>;
  waitForHolder(from: number, to: number): Promise<Error | undefined>;
  info(): EventHandlerInfo;
  getMetrics(): EventHandlerMetrics;
  idle(): Promise<void>;
  start(): Promise<void>;
  stop(): Promise<void>;
  goLive(): Promise<void>;
  startRestore(opts: { fromZero?: boolean; signal?: AbortSignal }): { done: Promise<RestoreReport>; cancel(): void };
  claim(): Promise<{ took: boolean; live: Promise<void> }>;
  refreshStandbyView(): Promise<void>;
  /** Enters standby (no lock): the balancer takes the lane over when its fair share allows. */
  standBy(): void;
  /** Takes the lane's lock without going live (stopped, lock held); false when another instance holds it. */
  holdStopped(): Promise<boolean>;
  /** Stops applying but keeps the lock (a restore from zero of every partition runs meanwhile). */
  pause(): Promise<void>;
  /** Gives the lane up: stops it (checkpoint persisted), releases its lock, stands by. */
  yieldLock(): Promise<void>;
}

/** What the balancer works on: the lanes of one partitioned handler and where its locks live. */
export interface BalancerParts {
  readonly lanes: readonly LaneRunner[];
  name(): string;
  backend(): LeasedReadmodelStoreBackend;
  host(): HandlerHost | undefined;
  /** True while a restore from zero holds every partition: the balance waits. */
  paused(): boolean;
  /** Runs fn in the async context the handler was made in (timers must not inherit a batch's transaction). */
  readonly snapshot: <R>(fn: () => R) => R;
}

/**
 * Keeps a partitioned handler's partitions balanced across the live
 * instances, every `lockRetryMs`:
 * - each live instance holds one member slot, a lock `<name>#member<k>` of
 *   the handler's backend (k < n; an instance beyond n holds none and takes no
 *   partition); the slots with a live holder are the instances alive (SQLite:
 *   an unexpired lease of a live process; Postgres: a held advisory lock);
 * - its fair share is ceil(n / alive): above it, this instance gives
 *   partitions up (the highest first: stopped, checkpoint persisted, lock
 *   released); below it, it tries the free ones (a dead instance's locks free
 *   when its lease expires, its process is gone, or its session ends).
 * Before the first start with partitions, it records the partition count and
 * seeds every partition's checkpoint from the unpartitioned one (so adding
 * `withPartitions` to a running readmodel applies nothing twice); a later
 * start with another count is refused until a restore from zero.
 * @internal
 */
export class PartitionBalancer {
  delivery: DeliveryOptions = DEFAULT_DELIVERY;
  /** Going live or live: the balance runs (cleared by stop). */
  live = false;
  /** The partition count recorded for the handler is another one: it must be restored from zero. */
  failure: MnemeError | undefined;
  /** The last error of a balance (the database could not be reached, say): the next one tries again. */
  lastError: string | undefined;
  readonly #p: BalancerParts;
  #member: number | undefined;
  #countReady = false;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #running: Promise<void> | undefined;

  constructor(parts: BalancerParts) {
    this.#p = parts;
  }

  /** Takes this instance's share now, then keeps balancing. */
  async goLive(): Promise<void> {
    this.live = true;
    await this.#tick(true);
  }

  /** Leaves the balance: every lane stopped (checkpoints persisted, locks released), the member slot released. */
  async stop(): Promise<void> {
    this.live = false;
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
    await this.settled();
    for (const lane of this.#p.lanes) if (lane.state !== "stopped" || lane.restoring) await lane.stop().catch(() => undefined);
    if (this.#member !== undefined)
      await this.#p
        .backend()
        .unlock(memberKey(this.#p.name(), this.#member))
        .catch(() => undefined);
    this.#member = undefined;
  }

  /** Resolves when no balance runs. */
  async settled(): Promise<void> {
    while (this.#running !== undefined) await this.#running;
  }

  /** The next balance, after lockRetryMs. */
  schedule(): void {
    if (!this.live) return;
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    const t = this.#p.snapshot(() => setTimeout(() => void this.#tick(false), this.delivery.lockRetryMs));
    (t as { unref?: () => void }).unref?.();
    this.#timer = t;
  }

  /** One balance; `initial` (going live): it resolves once the partitions taken caught up, as a start does. */
  #tick(initial: boolean): Promise<void> {
    if (this.#running !== undefined) return this.#running;
    const run = this.#balance(initial)
      .then(
        () => {
          this.lastError = undefined;
        },
        (e: unknown) => {
          this.lastError = errorMessage(e);
        },
      )
      .finally(() => {
        this.#running = undefined;
        this.schedule();
      });
    this.#running = run;
    return run;
  }

  async #balance(initial: boolean): Promise<void> {
    const p = this.#p;
    if (!this.live || p.paused() || !(await this.#countRecorded())) return;
    const backend = p.backend();
    const n = p.lanes.length;
    await this.#holdMemberSlot(backend);
    const fair = this.#member === undefined ? 0 : Math.ceil(n / (await this.#alive(backend)));
    const held = p.lanes.filter((l) => l.lockHold.held);
    for (const lane of held.slice(fair)) {
      if (!this.live || p.paused()) return;
      await lane.yieldLock();
    }
    let count = Math.min(held.length, fair);
    const catchingUp: Promise<void>[] = [];
    // Instances start at different partitions, so that they seldom race for the same lock.
    const first = this.#member === undefined ? 0 : (this.#member * Math.max(1, fair)) % n;
    for (let k = 0; k < n; k++) {
      const lane = p.lanes[(first + k) % n]!;
      if (!this.live || p.paused()) return;
      if (lane.lockHold.held || lane.state === "failed") continue;
      if (count >= fair) {
        if (lane.state === "stopped") lane.standBy();
        else if (lane.state === "standby") await lane.refreshStandbyView();
        continue;
      }
      const { took, live } = await lane.claim();
      if (took) count++;
      // Later balances do not wait for a take-over to catch up: a partition given up meanwhile must not wait on it.
      if (initial) catchingUp.push(live);
      else live.catch(() => undefined);
    }
    await Promise.all(catchingUp);
  }

  /** This instance's member slot: the one it holds (renewed), or the first free one; none when all n are held by others. */
  async #holdMemberSlot(backend: LeasedReadmodelStoreBackend): Promise<void> {
    const name = this.#p.name();
    const id = this.#p.host()?.instanceId;
    if (this.#member !== undefined && (await backend.tryLock(memberKey(name, this.#member), id))) return;
    this.#member = undefined;
    for (let k = 0; k < this.#p.lanes.length; k++) {
      if (await backend.tryLock(memberKey(name, k), id)) {
        this.#member = k;
        return;
      }
    }
  }

  /** The live instances: member slots with a live holder (this one included). */
  async #alive(backend: LeasedReadmodelStoreBackend): Promise<number> {
    const name = this.#p.name();
    let alive = 0;
    for (let k = 0; k < this.#p.lanes.length; k++) {
      if (k === this.#member || (await backend.lockHolder(memberKey(name, k))) !== undefined) alive++;
    }
    return Math.max(1, alive);
  }

  /** True once the handler's partition count is recorded as n (recording it, and seeding the partitions, at the first start). */
  async #countRecorded(): Promise<boolean> {
    if (this.#countReady) return true;
    const p = this.#p;
    const backend = p.backend();
    const name = p.name();
    const n = p.lanes.length;
    const key = partitionCountKey(name);
    const recorded = await backend.getCheckpoint(key);
    if (recorded === n) {
      this.failure = undefined;
      this.#countReady = true;
      return true;
    }
    if (recorded !== 0) {
      this.failure = new MnemeError(
        "INVALID_STATE",
        `readmodel ${name} ran with ${recorded} partitions and is now given ${n}: partitions do not carry over to another count; restore it from zero to repartition it`,
      );
      return false;
    }
    // Another instance seeds meanwhile: the next balance sees its record.
    if (!(await backend.tryLock(key, p.host()?.instanceId))) return false;
    try {
      await backend.transaction(async () => {
        const token = backend.fencingToken(key);
        if (token !== undefined) await backend.checkFencingToken(key, token);
        if ((await backend.getCheckpoint(key)) !== 0) return;
        const unpartitioned = await backend.getCheckpoint(name);
        for (let i = 0; i < n; i++) {
          const k = partitionKey(name, i);
          if (unpartitioned > 0 && (await backend.getCheckpoint(k)) === 0) await backend.setCheckpoint(k, unpartitioned);
        }
        await backend.setCheckpoint(key, n);
      });
    } finally {
      await backend.unlock(key);
    }
    return this.#countRecorded();
  }
}
