import type { AggregateLoader, AggregateLoadOptions, LoadedAggregate } from "../model/context.js";
import { MnemeError } from "../model/errors.js";
import type { KeyedLock } from "../model/keyed-lock.js";
import type { AggregateTenancy, AggregateType } from "../model/tokens.js";
import type { RequestContext } from "../model/types.js";

/** Folds an aggregate for the command's tenant (NOT_FOUND for another tenant's). */
export type FoldForCommand = <S>(aggregate: AggregateType<S>, aggregateUuid: string) => Promise<LoadedAggregate<S>>;

/**
 * `ctx.aggregates` of a command handler: loads aggregates and remembers the
 * version of each, so that the append can check that nothing the handler
 * read moved before its events commit (read checks). The check is the
 * store's, inside the append's transaction, so it holds across instances;
 * the in-process lock taken here only makes commands of one instance on one
 * aggregate wait for each other instead of conflicting.
 */
export class CommandAggregates implements AggregateLoader {
  /** Per aggregate this command has asked for (one Map: most commands load one aggregate). */
  readonly #entries = new Map<string, Entry>();
  /** The locks this command holds. */
  #releases: (() => void)[] | undefined;
  #released = false;

  constructor(
    private readonly fold: FoldForCommand,
    private readonly locks: KeyedLock,
    private readonly reqCtx: RequestContext,
  ) {}

  async load<S>(aggregate: AggregateType<S>, aggregateUuid: string, opts?: AggregateLoadOptions): Promise<LoadedAggregate<S>> {
    if (typeof aggregateUuid !== "string" || aggregateUuid === "") {
      throw new MnemeError("INVALID_REQUEST", `${aggregate?.domain}.${aggregate?.name}: aggregateUuid must be a non-empty string`);
    }
    const check = checkOption(opts);
    let entry = this.#entries.get(aggregateUuid);
    if (entry === undefined) {
      entry = { wait: this.#lock(aggregateUuid), version: undefined, checked: false, tenancy: undefined };
      this.#entries.set(aggregateUuid, entry);
    }
    if (entry.wait !== undefined) await entry.wait;
    const loaded = await this.fold(aggregate, aggregateUuid);
    if (aggregate.tenancy !== "global" || entry.tenancy === undefined) entry.tenancy = aggregate.tenancy;
    const target = this.reqCtx.targetAggregateVersion;
    if (target !== undefined && this.reqCtx.targetAggregateUuid === aggregateUuid && loaded.version !== target) {
      throw new MnemeError("CONFLICT", `aggregate ${aggregateUuid} is at version ${loaded.version}, the request expected ${target}`);
    }
    const first = entry.version;
    if (first === undefined) {
      entry.version = loaded.version;
    } else if (first !== loaded.version && (check || entry.checked)) {
      // Loaded twice at two versions: the handler has seen it move, so what it decided on is stale already.
      throw new MnemeError(
        "CONFLICT",
        `aggregate ${aggregateUuid} moved from version ${first} to ${loaded.version} while the command ran`,
        {
          details: [{ message: "version moved", aggregateUuid, expectedVersion: first, currentVersion: loaded.version }],
        },
      );
    }
    if (check) entry.checked = true;
    return loaded;
  }

  /**
   * The first aggregate is locked (commands on it are serialised); further ones only when free, so two
   * commands that load the same aggregates in opposite order cannot deadlock: the store's version check decides.
   * Decided synchronously, so loads started together (Promise.all) count as first and further ones too.
   * Undefined when there is nothing to wait for (the lock was free, or is not needed).
   */
  #lock(aggregateUuid: string): Promise<void> | undefined {
    const release = this.locks.tryAcquire(aggregateUuid);
    if (release !== undefined) {
      // A load after the command ended (a handler that did not await it) must not keep the lock.
      if (this.#released) release();
      else (this.#releases ??= []).push(release);
      return undefined;
    }
    return this.#entries.size === 0 ? this.#acquire(aggregateUuid) : undefined;
  }

  async #acquire(aggregateUuid: string): Promise<void> {
    const release = await this.locks.acquire(aggregateUuid);
    // The command may have ended while it waited (a sibling load failed): the lock must not leak.
    if (this.#released) release();
    else (this.#releases ??= []).push(release);
  }

  /** The version of the aggregate's first load in this command; undefined when it was not loaded. */
  loadedVersion(aggregateUuid: string): number | undefined {
    return this.#entries.get(aggregateUuid)?.version;
  }

  /**
   * The read checks of the append: every aggregate loaded with check, and the
   * request's target aggregate, at the version first loaded, added to
   * `expected` (aggregates present there already are left as they are).
   */
  addReadChecks(expected: Record<string, number>): void {
    const target = this.reqCtx.targetAggregateVersion === undefined ? undefined : this.reqCtx.targetAggregateUuid;
    for (const [uuid, { version, checked }] of this.#entries) {
      if (version !== undefined && (checked || uuid === target) && !Object.hasOwn(expected, uuid)) expected[uuid] = version;
    }
  }

  forEachLoaded(fn: (aggregateUuid: string) => void): void {
    for (const [uuid, { version }] of this.#entries) if (version !== undefined) fn(uuid);
  }

  loadedTenancy(aggregateUuid: string): AggregateTenancy | undefined {
    return this.#entries.get(aggregateUuid)?.tenancy;
  }

  releaseAll(): void {
    this.#released = true;
    const releases = this.#releases;
    if (releases === undefined) return;
    this.#releases = undefined;
    for (const r of releases) r();
  }
}

/** What the command knows of one aggregate it asked for. */
interface Entry {
  /** Settles once its lock is held; undefined when there was nothing to wait for. */
  readonly wait: Promise<void> | undefined;
  /** The version its first load returned (what the handler decided on). */
  version: number | undefined;
  /** Loaded at least once with check (the default). */
  checked: boolean;
  /** How it was loaded: "tenant" wins over "global" for one uuid. */
  tenancy: AggregateTenancy | undefined;
}

function checkOption(opts: AggregateLoadOptions | undefined): boolean {
  if (opts === undefined) return true;
  if (typeof opts !== "object" || opts === null) throw new MnemeError("INVALID_REQUEST", "aggregates.load: options must be an object");
  const check: unknown = opts.check;
  if (check !== undefined && typeof check !== "boolean") {
    throw new MnemeError("INVALID_REQUEST", `aggregates.load: check must be true or false, got ${JSON.stringify(check) ?? typeof check}`);
  }
  return check !== false;
}
