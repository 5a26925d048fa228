/**
 * The `Shards` domain: what the Runtime shows of a sharded app. Every shard's
 * facade of a `createShardedApp` registers it, and each answers for the whole
 * app (read through the app's control store, not through the one shard), so a
 * dashboard or client reaches the same listing on any shard, over HTTP as
 * `POST /queries/Shards/<name>` like every query. The listings span every
 * tenant, so they follow the Runtime's rule for all-tenant views: granted by
 * the authorizer only (system administrators with the default one), and
 * without an authorizer to nobody. `Shards.GetHistory` is the history of one
 * aggregate in the caller's effective tenant, an ordinary `authorized` query:
 * `ShardedApp.history` runs it on the tenant's shard, so history asks its
 * permission exactly as every query does. A plain facade has no such domain:
 * its callers get UNKNOWN_QUERY.
 */
import { aggregateNotFound } from "../app/tenancy.js";
import { MnemeError } from "../model/errors.js";
import { defineDomain } from "../model/domain.js";
import type { DomainContents } from "../model/domain.js";
import type { DomainInstaller } from "../model/domain-install.js";
import { newPermission } from "../model/permission.js";
import type { EventReader } from "../model/facade-handle.js";
import type { AggregateType } from "../model/tokens.js";
import type { PermissionRegistry } from "../permissions/permission-registry.js";
import { type HistoryEventModel, toHistoryEvent } from "../readmodel/history.js";
import type { MoveRecord, Placement } from "./placement-store.js";

/** One shard as `ShardedApp.listShards` (and `Shards.ListShards`) shows it. */
export interface ShardInfo {
  readonly name: string;
  /** Host, database and schema, never a password. */
  readonly description: string;
  readonly home: boolean;
  readonly tenants: number;
  /** The shard's head position (its own event stream). */
  readonly head: number;
  /** Tenants whose writes this shard refuses (moved away, or in a move's final catch-up). */
  readonly frozenTenants: readonly string[];
}

/** The payload of the queries that take none. */
type NoPayload = Record<string, never>;

const empty = {
  $schema: "https://json-schema.org/draft/2020-12/schema",
  type: "object",
  properties: {},
  required: [],
  additionalProperties: false,
};

/** The definition; registered on every shard's facade of a sharded app. */
export const ShardsDomain = defineDomain("Shards", {
  description: "The shards of a sharded app (mneme/shards): shards with their heads, tenant placements, tenant moves",
});

/**
 * Live (the dashboard subscribes): heads move with every shard's batches, placements with moves that
 * announce nothing on this facade, so a batch of any tenant and, at the latest, every two seconds.
 */
const LIVE_SHARDS = { allTenants: true, everyMs: 2000, minIntervalMs: 1000 } as const;

/** `Shards.ListShards`: every shard with its location (no password), home flag, tenant count, head position and frozen tenants. */
export const ListShards = ShardsDomain.query<NoPayload, ShardInfo[]>("ListShards", {
  description: "List the app's shards: location, home flag, tenants, head position, frozen tenants",
  schema: empty,
  live: LIVE_SHARDS,
});

/** `Shards.ListPlacements`: where each tenant lives (tenant, shard, state, version). */
export const ListPlacements = ShardsDomain.query<NoPayload, Placement[]>("ListPlacements", {
  description: "List every tenant's placement: its shard, state (active, or paused by a move) and version",
  schema: empty,
  live: LIVE_SHARDS,
});

/** `Shards.ListMoves`: the tenant moves recorded in the control store, under way, done or failed. */
export const ListMoves = ShardsDomain.query<NoPayload, MoveRecord[]>("ListMoves", {
  description: "List the tenant moves: tenant, source and target shards, phase, progress",
  schema: empty,
});

// Every tenant's placements, moves and frozen tenants: an all-tenant view, as the Runtime's (no level: the authorizer grants).
for (const t of [ListShards, ListPlacements, ListMoves]) ShardsDomain.registerPermission(newPermission("Shards", t.name, t.description));

/** The payload of {@link GetHistory}: the aggregate by its domain, name and uuid. */
export interface HistoryRequest {
  readonly domain: string;
  readonly aggregate: string;
  readonly aggregateUuid: string;
}

const name = { type: "string", minLength: 1 };

/**
 * `Shards.GetHistory`: an aggregate's history in the caller's effective tenant,
 * on the shard that serves it (`authorized`, the default of every query).
 * NOT_FOUND for an absent aggregate and for another tenant's alike. A global
 * aggregate belongs to no tenant: its history is granted as the Runtime's
 * all-tenant views are (the authorizer, as for an administrator permission;
 * nobody without one).
 */
export const GetHistory = ShardsDomain.query<HistoryRequest, HistoryEventModel[]>("GetHistory", {
  description: "An aggregate's history in the caller's tenant, from the shard that serves it",
  schema: {
    ...empty,
    properties: { domain: name, aggregate: name, aggregateUuid: name },
    required: ["domain", "aggregate", "aggregateUuid"],
  },
});

/** What the listings read: the sharded app. */
export interface ShardsSource {
  listShards(): Promise<ShardInfo[]>;
  placements(): Promise<Placement[]>;
  moves(): Promise<MoveRecord[]>;
}

/** What history reads of the shard's own facade: its domains, its events, and its permissions for an all-tenant read. */
export interface ShardFacadeReads {
  readonly domains: ReadonlyMap<string, Pick<DomainContents, "aggregates">>;
  readonly eventRepository: EventReader;
  readonly permissions: Pick<PermissionRegistry, "checkAdministrator">;
}

/** The install step of {@link ShardsDomain} on one shard's facade. */
export function installShardsDomain(d: DomainInstaller, app: ShardsSource, shard: ShardFacadeReads): void {
  d.handleQuery(ListShards, () => app.listShards());
  d.handleQuery(ListPlacements, () => app.placements());
  d.handleQuery(ListMoves, () => app.moves());
  d.handleQuery(GetHistory, async (ctx, q, p) => {
    const aggregate = aggregateNamed(shard, p);
    // A global aggregate belongs to no tenant: its history is an all-tenant read (the authorizer, as for an administrator).
    if (aggregate.tenancy === "global") await shard.permissions.checkAdministrator(ctx.reqCtx, q);
    // The tenant check of every load: another tenant's aggregate is NOT_FOUND, and so is an absent one (no existence oracle).
    const loaded = await ctx.aggregates.load(aggregate, p.aggregateUuid);
    if (loaded.version === 0) throw aggregateNotFound(aggregate, p.aggregateUuid);
    const events = await shard.eventRepository.loadAggregate(p.aggregateUuid);
    // Streams written before the tenant rule may mix tenants: only the caller's events of a tenant-scoped one.
    const mine = aggregate.tenancy === "global" ? events : events.filter((e) => e.tenantUuid === ctx.tenantUuid);
    return mine.map(toHistoryEvent);
  });
}

function aggregateNamed(shard: ShardFacadeReads, p: HistoryRequest): AggregateType {
  const a = shard.domains.get(p.domain)?.aggregates.get(p.aggregate);
  if (a === undefined) throw new MnemeError("INVALID_REQUEST", `GetHistory: ${p.domain}.${p.aggregate} is not a registered aggregate`);
  return a;
}
