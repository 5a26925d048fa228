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
  /** Per aggregate: the version its first load returned (what the handler decided on). */
  readonly #versions = new Map<string, number>();
  /** Aggregates loaded at least once with check (the default). */
  readonly #checked = new Set<string>();
  /** How each loaded aggregate was loaded: "tenant" wins over "global" for one uuid. */
  readonly #tenancy = new Map<string, AggregateTenancy>();
  /** Per aggregate this command has asked for: settles once its lock is held (or was not needed). */
  readonly #lockWaits = new Map<string, Promise<void>>();
  readonly #releases: (() => void)[] = [];
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
    let wait = this.#lockWaits.get(aggregateUuid);
    if (wait === undefined) {
      // The first aggregate is locked (commands on it are serialised); further ones only when free, so two
      // commands that load the same aggregates in opposite order cannot deadlock: the store's version check decides.
      // Decided synchronously, so loads started together (Promise.all) count as first and further ones too.
      wait = this.#lockWaits.size === 0 || !this.locks.isHeld(aggregateUuid) ? this.#acquire(aggregateUuid) : RESOLVED;
      this.#lockWaits.set(aggregateUuid, wait);
    }
    await wait;
    const loaded = await this.fold(aggregate, aggregateUuid);
    if (aggregate.tenancy !== "global" || !this.#tenancy.has(aggregateUuid)) this.#tenancy.set(aggregateUuid, aggregate.tenancy);
    const target = this.reqCtx.targetAggregateVersion;
    if (target !== undefined && this.reqCtx.targetAggregateUuid === aggregateUuid && loaded.version !== target) {
      throw new MnemeError("CONFLICT", `aggregate ${aggregateUuid} is at version ${loaded.version}, the request expected ${target}`);
    }
    const first = this.#versions.get(aggregateUuid);
    if (first === undefined) {
      this.#versions.set(aggregateUuid, loaded.version);
    } else if (first !== loaded.version && (check || this.#checked.has(aggregateUuid))) {
      // Loaded twice at two versions: the handler has seen it move, so what it decided on is stale already.
      throw new MnemeError(
        "CONFLICT",
        `aggregate ${aggregateUuid} moved from version ${first} to ${loaded.version} while the command ran`,
        {
          details: [{ message: "version moved", aggregateUuid, expectedVersion: first, currentVersion: loaded.version }],
        },
      );
    }
    if (check) this.#checked.add(aggregateUuid);
    return loaded;
  }

  async #acquire(aggregateUuid: string): Promise<void> {
    const release = await this.locks.acquire(aggregateUuid);
    // The command may have ended while it waited (a sibling load failed): the lock must not leak.
    if (this.#released) release();
    else this.#releases.push(release);
  }

  /** The version of the aggregate's first load in this command; undefined when it was not loaded. */
  loadedVersion(aggregateUuid: string): number | undefined {
    return this.#versions.get(aggregateUuid);
  }

  /**
   * The read checks of the append: every aggregate loaded with check, and the
   * request's target aggregate, at the version first loaded, added to
   * `expected` (aggregates present there already are left as they are).
   */
  addReadChecks(expected: Record<string, number>): void {
    const target = this.reqCtx.targetAggregateVersion === undefined ? undefined : this.reqCtx.targetAggregateUuid;
    for (const [uuid, version] of this.#versions) {
      if ((this.#checked.has(uuid) || uuid === target) && !Object.hasOwn(expected, uuid)) expected[uuid] = version;
    }
  }

  forEachLoaded(fn: (aggregateUuid: string) => void): void {
    for (const uuid of this.#versions.keys()) fn(uuid);
  }

  loadedTenancy(aggregateUuid: string): AggregateTenancy | undefined {
    return this.#tenancy.get(aggregateUuid);
  }

  releaseAll(): void {
    this.#released = true;
    for (const r of this.#releases.splice(0)) r();
  }
}

const RESOLVED: Promise<void> = Promise.resolve();

function checkOption(opts: AggregateLoadOptions | undefined): boolean {
  if (opts === undefined) return true;
  if (typeof opts !== "object" || opts === null) throw new MnemeError("INVALID_REQUEST", "aggregates.load: options must be an object");
  const check: unknown = opts.check;
  if (check !== undefined && typeof check !== "boolean") {
    throw new MnemeError("INVALID_REQUEST", `aggregates.load: check must be true or false, got ${JSON.stringify(check) ?? typeof check}`);
  }
  return check !== false;
}
