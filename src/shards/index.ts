/**
 * `mneme/shards`: tenant shards across Postgres schemas, databases and
 * clusters: one facade per shard behind a tenant router, placements in a
 * control store, and online tenant moves (docs/scaling.md, "Tenant shards").
 */
export { createShardedApp, ShardedApp } from "./sharded-app.js";
export type { ShardedAppOptions } from "./sharded-app.js";
export { GetHistory, ListMoves, ListPlacements, ListShards, ShardsDomain } from "./shards-domain.js";
export type { HistoryRequest, ShardInfo } from "./shards-domain.js";
export type { ShardLocation } from "./shard-location.js";
export type { Placement, MoveRecord } from "./placement-store.js";
export { moveTenant } from "./tenant-move.js";
export type { TenantMoveOptions, TenantMoveProgress, TenantMoveReport } from "./tenant-move.js";
export type { SideDigest } from "./tenant-copy.js";
export { isTenantFrozenError } from "./shard-freeze.js";
