/**
 * A sharded app: one facade per shard (a Postgres schema, in any database or
 * cluster), the application's domains and readmodels registered on each by a
 * configure callback, and a control store that places each tenant on one
 * shard. Commands, queries and history are routed by the caller's effective
 * tenant; the built-in and other all-global domains live in the home shard.
 */
import type pg from "pg";
import type { Facade } from "../app/facade.js";
import { createFacade } from "../app/facade.js";
import { useSenderDirectory } from "../app/sender-directory.js";
import type { FacadeOptions } from "../app/facade-options.js";
import { tenantOf } from "../app/tenancy.js";
import { newUuid } from "../model/clock.js";
import { MnemeError } from "../model/errors.js";
import type { DispatchOptions, DispatchResult, MessageRef, QueryOptions } from "../model/facade-handle.js";
import type { AggregateType, CommandType, QueryType } from "../model/tokens.js";
import type { CommandEnvelope, QueryEnvelope, RequestContext } from "../model/types.js";
import { createPostgresBackends, type PostgresBackendsOptions } from "../postgres/postgres-backends.js";
import { validateSchemaName } from "../postgres/postgres-schema.js";
import type { HistoryEventModel } from "../readmodel/history.js";
import { PG, requireDriver } from "../store/driver.js";
import { PlacementCache } from "./placement-cache.js";
import { type MoveRecord, type Placement, PlacementStore } from "./placement-store.js";
import { installFreeze, isTenantFrozenError, keepHomeDomains } from "./shard-freeze.js";
import { GetHistory, type HistoryRequest, installShardsDomain, type ShardInfo, ShardsDomain } from "./shards-domain.js";
import { moveTenant, type TenantMoveOptions, type TenantMoveReport } from "./tenant-move.js";
import { shardHead, type ShardLocation, shardDescription } from "./shard-location.js";
import { dispatchForgetSubject, forgetOnEveryShard, type ShardsOfForget } from "./shard-forget.js";
import { ForgetSubject } from "../runtime/runtime-domain.js";

/** Options of {@link createShardedApp}. */
export interface ShardedAppOptions {
  /** The control store: a Postgres schema holding the placements and the moves (created by start()). */
  readonly control: { readonly connectionString: string; readonly schema: string };
  /** The shards, each a Postgres schema; the names are what placements name. At least one. */
  readonly shards: readonly ShardLocation[];
  /** Registers the application's domains and readmodels on one shard's facade (run once per shard, before it starts). */
  readonly configure: (facade: Facade, shard: ShardLocation) => void | Promise<void>;
  /** The shard of the built-in and all-global domains and of the tenant "". Default: the first shard. */
  readonly home?: string;
  /**
   * Domains served by the home shard whatever the tenant. Default: every domain
   * registered on the home shard whose aggregates are all `tenancy: "global"`
   * (the built-in Tenant, Account, Session, Identity and Group).
   */
  readonly homeDomains?: readonly string[];
  /** Further options of each shard's facade (appName and the rest; the stores are the shard's). */
  readonly facadeOptions?: (shard: ShardLocation) => Omit<FacadeOptions, keyof ReturnType<typeof createPostgresBackends>>;
  /** Options of each shard's Postgres backends (pollIntervalMs, maxAppendsPerCommit, ...). */
  readonly backendOptions?: PostgresBackendsOptions;
  /** How long a command of a tenant in the final catch-up of a move waits before UNAVAILABLE. Default 10,000 ms. */
  readonly pauseWaitMs?: number;
  /** Poll of the placements behind LISTEN/NOTIFY. Default 1,000 ms. */
  readonly placementPollMs?: number;
}

interface Shard {
  readonly location: ShardLocation;
  readonly pool: pg.Pool;
  readonly facade: Facade;
}

/** A routed message: the shard and the tenant it was routed by. */
interface Route {
  readonly shard: Shard;
  readonly tenantUuid: string;
}

/**
 * One facade per shard behind a tenant router. Trusted code reaches a shard's
 * facade with {@link ShardedApp.facadeFor} or {@link ShardedApp.shard}.
 * @example
 * const app = createShardedApp({ control, shards, configure: (f) => f.registerDomain(Todo, installTodo) });
 * await app.start();
 * await app.placeTenant(acme);
 * await app.dispatch(CreateTodo, { todoUuid, title }, { reqCtx: { senderTenantUuid: acme } });
 */
export class ShardedApp {
  readonly #options: ShardedAppOptions;
  readonly #shards = new Map<string, Shard>();
  readonly #home: string;
  #homeDomains = new Set<string>();
  #controlPool: pg.Pool | undefined;
  #store: PlacementStore | undefined;
  #cache: PlacementCache | undefined;
  #started = false;

  constructor(options: ShardedAppOptions) {
    this.#options = options;
    const names = checkShards(options);
    this.#home = options.home ?? names[0]!;
    if (!names.includes(this.#home))
      throw new MnemeError("INVALID_REQUEST", `sharded app: home shard ${this.#home} is not among the shards`);
  }

  /** Creates the control store, each shard's facade (configured, started) and its write fence; then loads the placements. */
  async start(): Promise<void> {
    if (this.#started) return;
    const { Pool } = requireDriver<typeof pg>(PG);
    const control = new Pool({ connectionString: this.#options.control.connectionString, max: 4 });
    control.on("error", () => undefined);
    this.#controlPool = control;
    this.#store = new PlacementStore(control, this.#options.control.schema);
    await this.#store.init();
    for (const location of this.#options.shards) await this.#startShard(location, Pool);
    this.#homeDomains =
      this.#options.homeDomains !== undefined ? new Set(this.#options.homeDomains) : globalDomains(this.#homeShard().facade);
    this.#homeDomains.add(ShardsDomain.name); // the app's own listing: the same on every shard
    for (const s of this.#shards.values()) await keepHomeDomains(s.pool, s.location.schema, [...this.#homeDomains]);
    this.#cache = new PlacementCache(this.#store, control, this.#options.placementPollMs ?? 1000);
    await this.#cache.start();
    this.#started = true;
  }

  async #startShard(location: ShardLocation, Pool: typeof pg.Pool): Promise<void> {
    const pool = new Pool({ connectionString: location.connectionString, max: location.poolSize ?? 10 });
    pool.on("error", () => undefined);
    const backends = createPostgresBackends({ ...this.#options.backendOptions, pool, schema: location.schema });
    const facade = createFacade({ ...this.#options.facadeOptions?.(location), ...backends });
    this.#shards.set(location.name, { location, pool, facade });
    // Accounts, identities, groups and sessions live on home: every other shard's authorizer and credentials read them there.
    if (location.name !== this.#home) useSenderDirectory(facade, () => this.#senderDirectory());
    // The Runtime's view of the whole app, on every shard (docs/scaling.md, "Tenant shards").
    facade.registerDomain(ShardsDomain, (d) => installShardsDomain(d, this, facade));
    await this.#options.configure(facade, location);
    await facade.start();
    await installFreeze(pool, location.schema);
  }

  /** Stops every shard's facade and ends the pools. */
  async stop(): Promise<void> {
    this.#started = false;
    await this.#cache?.stop();
    for (const s of this.#shards.values()) {
      await s.facade.stop().catch(() => undefined);
      await s.pool.end().catch(() => undefined);
    }
    this.#shards.clear();
    await this.#controlPool?.end().catch(() => undefined);
    this.#controlPool = undefined;
  }

  /** The domains served by the home shard (see {@link ShardedAppOptions.homeDomains}). */
  get homeDomains(): ReadonlySet<string> {
    return this.#homeDomains;
  }

  /** The home shard's name. */
  get home(): string {
    return this.#home;
  }

  /** A shard's facade by name; INVALID_STATE for a shard this app does not have. */
  shard(name: string): Facade {
    return this.#shardNamed(name).facade;
  }

  #shardNamed(name: string): Shard {
    const s = this.#shards.get(name);
    if (s === undefined) {
      throw new MnemeError(
        "INVALID_STATE",
        `shard ${JSON.stringify(name)} is not one of this app's shards (${[...this.#shards.keys()].join(", ")})`,
      );
    }
    return s;
  }

  #homeShard(): Shard {
    return this.#shardNamed(this.#home);
  }

  /** The home shard's facade, where every shard's senders are read; refused (fail closed) before it exists and after stop(). */
  #senderDirectory(): Facade {
    const home = this.#shards.get(this.#home);
    if (home === undefined)
      throw new MnemeError(
        "NOT_STARTED",
        `sharded app: the home shard ${this.#home}, which holds the senders, has not started or has stopped`,
      );
    return home.facade;
  }

  #running(): { store: PlacementStore; cache: PlacementCache } {
    if (!this.#started || this.#store === undefined || this.#cache === undefined)
      throw new MnemeError("NOT_STARTED", "sharded app: call start() first");
    return { store: this.#store, cache: this.#cache };
  }

  /** The facade of a tenant's shard (the home shard for ""). NOT_FOUND for a tenant placed on no shard. */
  async facadeFor(tenantUuid: string): Promise<Facade> {
    return (await this.#routeTenant(tenantUuid, false)).shard.facade;
  }

  async #routeTenant(tenantUuid: string, write: boolean): Promise<Route> {
    const { cache } = this.#running();
    if (tenantUuid === "") return { shard: this.#homeShard(), tenantUuid };
    let p = cache.get(tenantUuid) ?? (await cache.refreshTenant(tenantUuid));
    if (p !== undefined && p.state === "paused" && write) p = await cache.waitActive(tenantUuid, this.#options.pauseWaitMs ?? 10_000);
    if (p === undefined) throw new MnemeError("NOT_FOUND", `tenant ${tenantUuid} is placed on no shard; place it with placeTenant first`);
    if (!this.#shards.has(p.shard)) {
      throw new MnemeError(
        "INVALID_STATE",
        `tenant ${tenantUuid} is placed on shard ${JSON.stringify(p.shard)}, which is not one of this app's shards`,
      );
    }
    return { shard: this.#shardNamed(p.shard), tenantUuid };
  }

  /**
   * The route, without a promise when the placement is cached and lets the call
   * through (the common case). Otherwise the home shard checks the message's
   * permission first: a caller who may not send it learns nothing of
   * placements (placed or not, paused or not) and waits for no move.
   */
  #route(
    domain: string,
    reqCtx: RequestContext | undefined,
    write: boolean,
    envelope: () => CommandEnvelope | QueryEnvelope,
  ): Promise<Route> | Route {
    const tenantUuid = tenantOf(reqCtx ?? {});
    if (this.#homeDomains.has(domain)) return { shard: this.#homeShard(), tenantUuid };
    const p = this.#started ? this.#cache?.get(tenantUuid) : undefined;
    const shard = p === undefined || (write && p.state === "paused") ? undefined : this.#shards.get(p.shard);
    if (shard !== undefined && tenantUuid !== "") return { shard, tenantUuid };
    if (tenantUuid === "") return this.#routeTenant(tenantUuid, write);
    return this.#homeShard()
      .facade.permissions.check(reqCtx ?? {}, envelope())
      .then(() => this.#routeTenant(tenantUuid, write));
  }

  /**
   * Dispatches on the shard of the effective tenant (the home shard for a home
   * domain). A tenant in a move's final catch-up waits (at most `pauseWaitMs`);
   * a command refused by the old shard's fence is sent again to the new one.
   */
  async dispatch<P, R = unknown>(
    type: CommandType<P, R> | MessageRef,
    payload: NoInfer<P>,
    opts: DispatchOptions = {},
  ): Promise<DispatchResult<R>> {
    const { domain, name } = this.#homeShard().facade.resolveCommand(type);
    // Each shard keeps its own keys: a subject is forgotten on every shard.
    if (domain === ForgetSubject.domain && name === ForgetSubject.name)
      return dispatchForgetSubject(this.#forgetShards(), payload as { subjectUuid: string }, opts) as Promise<DispatchResult<R>>;
    const envelope = (): CommandEnvelope => ({
      commandUuid: opts.commandUuid ?? newUuid(),
      domain,
      name,
      payload,
      reqCtx: opts.reqCtx ?? {},
    });
    for (let attempt = 0; ; attempt++) {
      const routed = this.#route(domain, opts.reqCtx, true, envelope);
      const route = routed instanceof Promise ? await routed : routed;
      try {
        return await route.shard.facade.dispatch(type, payload, opts);
      } catch (e) {
        if (!isTenantFrozenError(e) || attempt >= 3) throw e;
        await this.#running().cache.waitActive(route.tenantUuid, this.#options.pauseWaitMs ?? 10_000);
      }
    }
  }

  /**
   * Erases a data subject on every shard (each keeps its own keys): trusted
   * code, as `facade.forget`; `Runtime.ForgetSubject` dispatched on the app
   * does the same after its permission. The keys deleted, summed.
   */
  async forget(subject: string, opts?: Parameters<Facade["forget"]>[1]): Promise<{ keysDeleted: number }> {
    this.#running();
    return forgetOnEveryShard(this.#forgetShards().all, subject, opts);
  }

  #forgetShards(): ShardsOfForget {
    return {
      home: this.#homeShard().facade,
      all: [...this.#shards.values()].map((s) => s.facade),
      facadeOfTenant: (t) => this.facadeFor(t),
    };
  }

  /**
   * Answers a query on the shard of the effective tenant (reads are not paused
   * by a move); `Shards.GetHistory` on the shard that serves the aggregate's domain.
   */
  async query<P, R>(type: QueryType<P, R> | MessageRef, payload: NoInfer<P>, opts: QueryOptions = {}): Promise<R> {
    const qt = this.#homeShard().facade.resolveQuery(type);
    // GetHistory's shard is its aggregate's (a malformed payload goes home, whose facade refuses it as usual).
    const aggregateDomain = qt === GetHistory ? (payload as Partial<HistoryRequest> | null)?.domain : undefined;
    const domain = typeof aggregateDomain === "string" ? aggregateDomain : qt.domain;
    const envelope = (): QueryEnvelope => ({ queryUuid: newUuid(), domain: qt.domain, name: qt.name, payload, reqCtx: opts.reqCtx ?? {} });
    const routed = this.#route(domain, opts.reqCtx, false, envelope);
    const route = routed instanceof Promise ? await routed : routed;
    return route.shard.facade.query(type, payload, opts);
  }

  /**
   * An aggregate's history from the shard of the effective tenant: the query
   * `Shards.GetHistory`, so it asks its permission (`authorized`, then the
   * authorizer) on that shard as every query does. NOT_FOUND, as for an
   * absent one, when a tenant-scoped aggregate belongs to another tenant.
   */
  async history(
    aggregate: AggregateType<any>,
    aggregateUuid: string,
    opts: { reqCtx?: RequestContext } = {},
  ): Promise<HistoryEventModel[]> {
    const payload: HistoryRequest = { domain: aggregate.domain, aggregate: aggregate.name, aggregateUuid };
    return this.query(GetHistory, payload, opts.reqCtx === undefined ? {} : { reqCtx: opts.reqCtx });
  }

  /**
   * Places a tenant: on `shard` when given, else on the shard with the fewest
   * tenants. A placed tenant keeps its shard (CONFLICT when another is given).
   */
  async placeTenant(tenantUuid: string, opts: { shard?: string } = {}): Promise<Placement> {
    const { store, cache } = this.#running();
    if (typeof tenantUuid !== "string" || tenantUuid === "")
      throw new MnemeError("INVALID_REQUEST", "placeTenant: tenantUuid must be a non-empty string");
    if (opts.shard !== undefined) this.#shardNamed(opts.shard);
    const p = await store.place(tenantUuid, [...this.#shards.keys()], opts.shard);
    await cache.refreshTenant(tenantUuid);
    return p;
  }

  /** Every placement, from the control store. */
  async placements(): Promise<Placement[]> {
    return this.#running().store.list();
  }

  /** The moves recorded in the control store (under way, done or failed). */
  async moves(): Promise<MoveRecord[]> {
    return this.#running().store.moves();
  }

  /** The shards: where each is, its tenants, its head position and its frozen tenants. */
  async listShards(): Promise<ShardInfo[]> {
    const counts = await this.#running().store.tenantCounts();
    const out: ShardInfo[] = [];
    for (const [name, s] of this.#shards) {
      const { head, frozen } = await shardHead(s.pool, s.location.schema);
      out.push({
        name,
        description: shardDescription(s.location),
        home: name === this.#home,
        tenants: counts.get(name) ?? 0,
        head,
        frozenTenants: frozen,
      });
    }
    return out;
  }

  /** Moves a tenant to another shard online (see {@link moveTenant}); rerun after a crash, it finishes the same move. */
  async moveTenant(
    tenantUuid: string,
    to: string,
    opts: Partial<Pick<TenantMoveOptions, "onProgress" | "handlerWaitMs" | "catchUpMs" | "pageSize">> = {},
  ): Promise<TenantMoveReport> {
    this.#running();
    this.#shardNamed(to);
    return moveTenant({
      control: this.#options.control,
      shards: this.#options.shards,
      homeDomains: [...this.#homeDomains],
      tenantUuid,
      to,
      ...opts,
    });
  }
}

function checkShards(options: ShardedAppOptions): string[] {
  if (typeof options?.configure !== "function") throw new MnemeError("INVALID_REQUEST", "sharded app: configure must be a function");
  validateSchemaName(options.control?.schema);
  if (!Array.isArray(options.shards) || options.shards.length === 0)
    throw new MnemeError("INVALID_REQUEST", "sharded app: shards must list at least one shard");
  const names: string[] = [];
  for (const s of options.shards) {
    if (typeof s?.name !== "string" || s.name === "") throw new MnemeError("INVALID_REQUEST", "sharded app: every shard needs a name");
    if (names.includes(s.name)) throw new MnemeError("INVALID_REQUEST", `sharded app: shard ${s.name} is listed twice`);
    validateSchemaName(s.schema);
    names.push(s.name);
  }
  return names;
}

/** The domains of a facade whose aggregates are all global (and that have at least one). */
function globalDomains(facade: Facade): Set<string> {
  const out = new Set<string>();
  for (const [name, d] of facade.domains) {
    const aggs = [...d.aggregates.values()];
    if (aggs.length > 0 && aggs.every((a) => a.tenancy === "global")) out.add(name);
  }
  return out;
}

/** Creates a sharded app (nothing connects until start()). */
export function createShardedApp(options: ShardedAppOptions): ShardedApp {
  return new ShardedApp(options);
}
