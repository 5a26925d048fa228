/**
 * The `Shards` domain: what the Runtime shows of a sharded app. Every shard's
 * facade of a `createShardedApp` registers it, and each answers for the whole
 * app (read through the app's control store, not through the one shard), so a
 * dashboard or client reaches the same listing on any shard, over HTTP as
 * `POST /queries/Shards/<name>` like every query. The queries are
 * `authorized` (the default): system administrators, or callers granted them;
 * a tenant's operator gets PERMISSION_DENIED. A plain facade has no such
 * domain: its callers get UNKNOWN_QUERY.
 */
import { defineDomain } from "../model/domain.js";
import type { DomainInstaller } from "../model/domain-install.js";
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

/** `Shards.ListShards`: every shard with its location (no password), home flag, tenant count, head position and frozen tenants. */
export const ListShards = ShardsDomain.query<NoPayload, ShardInfo[]>("ListShards", {
  description: "List the app's shards: location, home flag, tenants, head position, frozen tenants",
  schema: empty,
});

/** `Shards.ListPlacements`: where each tenant lives (tenant, shard, state, version). */
export const ListPlacements = ShardsDomain.query<NoPayload, Placement[]>("ListPlacements", {
  description: "List every tenant's placement: its shard, state (active, or paused by a move) and version",
  schema: empty,
});

/** `Shards.ListMoves`: the tenant moves recorded in the control store, under way, done or failed. */
export const ListMoves = ShardsDomain.query<NoPayload, MoveRecord[]>("ListMoves", {
  description: "List the tenant moves: tenant, source and target shards, phase, progress",
  schema: empty,
});

/** What the queries read: the sharded app. */
export interface ShardsSource {
  listShards(): Promise<ShardInfo[]>;
  placements(): Promise<Placement[]>;
  moves(): Promise<MoveRecord[]>;
}

/** The install step of {@link ShardsDomain} on one shard's facade. */
export function installShardsDomain(d: DomainInstaller, app: ShardsSource): void {
  d.handleQuery(ListShards, () => app.listShards());
  d.handleQuery(ListPlacements, () => app.placements());
  d.handleQuery(ListMoves, () => app.moves());
}
