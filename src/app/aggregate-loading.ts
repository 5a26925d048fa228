import { snapshotOptionsOf } from "../model/domain.js";
import { errorMessage, MnemeError } from "../model/errors.js";
import type { AggregateType } from "../model/tokens.js";
import type { Event } from "../model/types.js";
import type { EventRepository } from "../store/event-repository.js";
import { jsonSafeProblem } from "../store/json-safe.js";
import type { LogStore } from "../store/log-store.js";
import { snapshotDigest, snapshotDigestMatches, type SnapshotRecord, type SnapshotStore } from "../store/snapshot-store.js";
import type { AggregateCache } from "./aggregate-cache.js";

/** A folded aggregate: its state and the version of its last event (0: no event). */
export interface FoldedAggregate<S> {
  state: S;
  version: number;
}

/**
 * How an aggregate is loaded, fastest first: the in-process cache (then only
 * the events after the cached version are read), the newest snapshot of the
 * aggregate type's `snapshotVersion` (then the events after it), or every
 * event. All three give the same state: the cache and the snapshots only
 * save reading and folding. A load that folds past a multiple of
 * `snapshotEvery` since its starting point saves a snapshot in the
 * background; a failed save or a damaged snapshot costs time, never an
 * outcome (it is logged, and the load folds from further back).
 */
export class AggregateLoading {
  /** Snapshot saves still running: stop() waits for them before closing the stores. */
  readonly #pending = new Set<Promise<void>>();
  /** Aggregate types whose state is not JSON-safe (told once in the log): no snapshots. */
  readonly #unsnapshottable = new Set<string>();

  constructor(
    private readonly events: EventRepository,
    private readonly snapshots: SnapshotStore,
    private readonly cache: AggregateCache | undefined,
    private readonly log: LogStore,
    /** True for an aggregate that must be folded from its events every time (no cache, no snapshot): one that folds personal data. */
    private readonly foldEveryTime: (aggregate: AggregateType<any>) => boolean = () => false,
  ) {}

  /**
   * Folds the aggregate. `tenantUuid`: a tenant-scoped aggregate of another
   * tenant is `notFound()` (the tenant of its first event decides).
   */
  async load<S>(
    aggregate: AggregateType<S>,
    aggregateUuid: string,
    tenantUuid: string | undefined,
    notFound: () => MnemeError,
  ): Promise<FoldedAggregate<S>> {
    const scoped = tenantUuid !== undefined && aggregate.tenancy !== "global";
    if (this.foldEveryTime(aggregate)) {
      const events = await this.events.loadAggregate(aggregateUuid);
      if (scoped && events.length > 0 && events[0]!.tenantUuid !== tenantUuid) throw notFound();
      return fold(aggregate, aggregate.initialState(), 0, events);
    }
    const cache = this.cache;
    const cached = cache?.accepts(aggregate) === true ? cache.get(aggregate, aggregateUuid) : undefined;
    if (cached !== undefined) {
      if (scoped && cached.tenantUuid !== tenantUuid) throw notFound();
      // Only what was appended since (here or by another process) is read and folded.
      const newer = await this.events.loadAggregate(aggregateUuid, { fromVersion: cached.version + 1 });
      const folded = fold(aggregate, cached.state, cached.version, newer);
      if (newer.length > 0) cache!.set(aggregate, aggregateUuid, folded.state, folded.version, cached.tenantUuid);
      this.#maybeSnapshot(aggregate, aggregateUuid, cached.tenantUuid, cached.version, folded);
      return folded;
    }

    const { snapshotEvery, snapshotVersion } = snapshotOptionsOf(aggregate);
    let base: { state: S; version: number; tenantUuid: string } | undefined;
    if (snapshotEvery !== undefined) {
      try {
        const snap = await this.snapshots.latest<S>(aggregate.domain, aggregate.name, aggregateUuid, snapshotVersion);
        if (snap !== undefined && (await this.#trusted(snap)))
          base = { state: snap.state, version: snap.version, tenantUuid: snap.tenantUuid };
      } catch (e) {
        // A snapshot is a cache: an unreadable one means a full fold, never a failed load.
        if (e instanceof MnemeError && e.code === "UNAVAILABLE") throw e;
        this.#warn(
          `reading the snapshot of ${aggregate.domain}.${aggregate.name} ${aggregateUuid} failed: ${errorMessage(e)}; folding every event`,
        );
      }
    }
    if (base !== undefined) {
      if (scoped && base.tenantUuid !== tenantUuid) throw notFound();
      // From the snapshot's own last event: a snapshot ahead of the stream (a database restored from an older backup) is not trusted.
      const tail = await this.events.loadAggregate(aggregateUuid, { fromVersion: base.version });
      if (tail.length > 0 && tail[0]!.version === base.version) {
        const folded = fold(aggregate, base.state, base.version, tail.slice(1));
        cache?.set(aggregate, aggregateUuid, folded.state, folded.version, base.tenantUuid);
        this.#maybeSnapshot(aggregate, aggregateUuid, base.tenantUuid, base.version, folded);
        return folded;
      }
      this.#warn(
        `the snapshot of ${aggregate.domain}.${aggregate.name} ${aggregateUuid} at version ${base.version} is ahead of its events; folding every event`,
      );
    }
    const events = await this.events.loadAggregate(aggregateUuid);
    if (scoped && events.length > 0 && events[0]!.tenantUuid !== tenantUuid) throw notFound();
    const folded = fold(aggregate, aggregate.initialState(), 0, events);
    if (folded.version > 0) {
      const tenant = events[0]!.tenantUuid;
      cache?.set(aggregate, aggregateUuid, folded.state, folded.version, tenant);
      this.#maybeSnapshot(aggregate, aggregateUuid, tenant, 0, folded);
    }
    return folded;
  }

  /**
   * Whether a stored snapshot may be folded on: its digest matches its parts.
   * One that does not (changed in the database after it was saved), or has
   * none (saved before digests existed), is logged and deleted, so that the
   * full fold that follows saves a sound one in its place (a save replaces
   * only a lower version, and the fold may end at the same one).
   */
  async #trusted<S>(snap: SnapshotRecord<S>): Promise<boolean> {
    if (snapshotDigestMatches(snap)) return true;
    const what = `the snapshot of ${snap.domain}.${snap.aggregate} ${snap.aggregateUuid} at version ${snap.version}`;
    this.#warn(
      snap.digest === undefined
        ? `${what} has no digest (saved before snapshots had one): not used; folding every event and saving a new one`
        : `${what} does not match its digest (it was changed after it was saved): not used; folding every event and saving a new one`,
    );
    await this.snapshots.delete(snap.domain, snap.aggregate, snap.aggregateUuid);
    return false;
  }

  /** Waits for the snapshot saves still running. */
  async drain(): Promise<void> {
    while (this.#pending.size > 0) await Promise.all([...this.#pending]);
  }

  /**
   * Saves a snapshot when the fold crossed a multiple of snapshotEvery since
   * `from` (the version it started at). The state is serialised before this
   * returns, so the caller may change it right away.
   */
  #maybeSnapshot<S>(
    aggregate: AggregateType<S>,
    aggregateUuid: string,
    tenantUuid: string,
    from: number,
    folded: FoldedAggregate<S>,
  ): void {
    // Most types take no snapshots: nothing to work out (snapshotOptionsOf makes an object).
    if ((aggregate as { snapshotEvery?: unknown }).snapshotEvery === undefined) return;
    const { snapshotEvery, snapshotVersion } = snapshotOptionsOf(aggregate);
    if (snapshotEvery === undefined || Math.floor(folded.version / snapshotEvery) === Math.floor(from / snapshotEvery)) return;
    const key = `${aggregate.domain}.${aggregate.name}`;
    if (this.#unsnapshottable.has(key)) return;
    const problem = jsonSafeProblem(folded.state);
    if (problem !== undefined) {
      this.#unsnapshottable.add(key);
      this.#warn(`no snapshots of ${key}: its state is not JSON-safe at ${problem.pointer || "its root"} (${problem.message})`);
      return;
    }
    // A copy taken now: the handler that gets the state may change it while the save runs.
    const state: unknown = JSON.parse(JSON.stringify(folded.state));
    const parts = {
      tenantUuid,
      domain: aggregate.domain,
      aggregate: aggregate.name,
      aggregateUuid,
      version: folded.version,
      snapshotVersion,
      state,
    };
    // Started now, before the caller goes on: the next load of this aggregate finds it where the backend saves synchronously.
    const save = this.snapshots
      .save({ ...parts, digest: snapshotDigest(parts) })
      .then(
        () => undefined,
        (e: unknown) => this.#warn(`saving a snapshot of ${key} ${aggregateUuid} at version ${folded.version} failed: ${errorMessage(e)}`),
      )
      .finally(() => this.#pending.delete(save));
    this.#pending.add(save);
  }

  #warn(message: string): void {
    this.log.append({ level: "warn", message, source: "mneme.snapshots" }).catch(() => undefined);
  }
}

function fold<S>(aggregate: AggregateType<S>, state: S, version: number, events: readonly Event[]): FoldedAggregate<S> {
  for (const e of events) {
    state = aggregate.apply(state, e);
    version = e.version;
  }
  return { state, version };
}
