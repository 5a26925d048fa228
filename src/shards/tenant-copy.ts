import { MnemeError } from "../model/errors.js";
/**
 * The rows of one tenant copied from one shard to another, and the digests
 * that verify the copy. Events go through the target's event repository
 * (new positions under its append lock, its NOTIFY wakes the target's
 * readmodels; versions, event uuids and the rest kept); command records,
 * snapshots and the keys of personal data are upserted row by row, so every
 * step can run again after a crash and end in the same rows.
 */
import type pg from "pg";
import type { NewEvent } from "../model/types.js";
import type { PostgresEventRepository } from "../postgres/postgres-event-repository.js";
import { quoteIdent } from "../postgres/postgres-schema.js";
import { FROZEN_WORDS } from "./shard-freeze.js";

/** One side of a tenant copy: a shard's pool and schema. */
export interface ShardSide {
  readonly pool: pg.Pool;
  readonly schema: string;
}

/** What is copied: the tenant, and the domains that stay in the home shard. */
export interface TenantScope {
  readonly tenantUuid: string;
  readonly homeDomains: readonly string[];
}

interface EventRow {
  position: string;
  event_uuid: string;
  tenant_uuid: string;
  domain: string;
  name: string;
  aggregate_uuid: string;
  version: number;
  command_uuid: string | null;
  created_at: string;
  req_ctx: Record<string, unknown>;
  payload: unknown;
  event_version: number;
  /** The event's tags (its type row left out), when it has them in the source's tag index. */
  tags?: string[];
}

/**
 * Command records that are not the router's own retries: a command the
 * source's fence refused is recorded failed there and sent again to the
 * target by the router, so its failed record stays behind (and may be written
 * after the copy read the records).
 */
const NOT_REFUSED_BY_FREEZE = `NOT (status = 'failed' AND coalesce(record->'error'->>'message', '') LIKE '%${FROZEN_WORDS}%')`;

const t = (side: ShardSide, table: string): string => `${quoteIdent(side.schema)}.${quoteIdent(table)}`;

/**
 * Copies the tenant's events after `afterPosition` of the source, a page at a
 * time, skipping those the target has already (an aggregate's version there).
 * Calls `onPage` with the last source position of each page; resolves how many
 * events it appended and the last source position read.
 */
export async function copyEvents(
  source: ShardSide,
  target: PostgresEventRepository,
  targetSide: ShardSide,
  scope: TenantScope,
  afterPosition: number,
  pageSize: number,
  onPage: (lastPosition: number, appended: number, keyIds: readonly string[]) => Promise<void>,
): Promise<{ appended: number; lastPosition: number; pages: number }> {
  const read = (after: number): Promise<EventRow[]> =>
    source.pool
      .query<EventRow>(
        // Qualified in ORDER BY: the bare name would be the output column, the position as text.
        `SELECT position::text AS position, event_uuid, tenant_uuid, domain, name, aggregate_uuid, version, command_uuid,
                created_at::text AS created_at, req_ctx, payload, event_version
           FROM ${t(source, "events")} AS src WHERE tenant_uuid = $1 AND src.position > $2 AND NOT (domain = ANY($3::text[]))
          ORDER BY src.position LIMIT $4`,
        [scope.tenantUuid, after, scope.homeDomains, pageSize],
      )
      .then((r) => r.rows);
  let after = afterPosition;
  let appended = 0;
  let pages = 0;
  let next = read(after);
  for (;;) {
    const rows = await next;
    if (rows.length === 0) return { appended, lastPosition: after, pages };
    pages++;
    const last = Number(rows.at(-1)!.position);
    // The next page is read while this one is written (a page's position bound does not depend on the write).
    next = rows.length < pageSize ? Promise.resolve([]) : read(last);
    next.catch(() => undefined);
    const fresh = await withTags(source, scope.tenantUuid, await missingInTarget(targetSide, rows));
    if (fresh.length > 0) await target.append(fresh.map(toNewEvent));
    appended += fresh.length;
    after = last;
    await onPage(after, fresh.length, keyIdsOf(rows.map((r) => r.payload)));
    if (rows.length < pageSize) return { appended, lastPosition: after, pages };
  }
}

/**
 * The rows with their tags from the source's tag index (by its position index), so the target's append
 * indexes them again at their new positions: queries of commands (docs/dcb.md) find the moved events.
 * An event with a type row had tags (maybe none); one without had a type that declared none.
 */
async function withTags(source: ShardSide, tenantUuid: string, rows: EventRow[]): Promise<EventRow[]> {
  if (rows.length === 0) return rows;
  const res = await source.pool.query<{ position: string; tags: string[] }>(
    `SELECT position::text AS position, array_agg(tag ORDER BY tag) AS tags FROM ${t(source, "event_tags")}
      WHERE position = ANY($1::bigint[]) AND tenant_uuid = $2 GROUP BY position`,
    [rows.map((r) => r.position), tenantUuid],
  );
  const byPosition = new Map(res.rows.map((r) => [r.position, r.tags]));
  return rows.map((r) => {
    const tags = byPosition.get(r.position);
    return tags === undefined ? r : { ...r, tags: tags.filter((tag) => !tag.startsWith(":")) };
  });
}

/** The rows whose version is beyond their aggregate's version in the target (earlier runs copied the rest). */
async function missingInTarget(target: ShardSide, rows: readonly EventRow[]): Promise<EventRow[]> {
  const aggs = [...new Set(rows.map((r) => r.aggregate_uuid))];
  const res = await target.pool.query<{ aggregate_uuid: string; v: number }>(
    `SELECT aggregate_uuid, max(version) AS v FROM ${t(target, "events")} WHERE aggregate_uuid = ANY($1::text[]) GROUP BY aggregate_uuid`,
    [aggs],
  );
  const have = new Map(res.rows.map((r) => [r.aggregate_uuid, r.v]));
  return rows.filter((r) => r.version > (have.get(r.aggregate_uuid) ?? 0));
}

function toNewEvent(r: EventRow): NewEvent {
  return {
    eventUuid: r.event_uuid,
    tenantUuid: r.tenant_uuid,
    domain: r.domain,
    name: r.name,
    aggregateUuid: r.aggregate_uuid,
    version: r.version,
    ...(r.command_uuid === null ? {} : { commandUuid: r.command_uuid }),
    createdAt: Number(r.created_at),
    reqCtx: r.req_ctx,
    payload: r.payload,
    eventVersion: r.event_version,
    ...(r.tags === undefined ? {} : { tags: r.tags }),
  };
}

/** Key ids named by envelopes anywhere in these JSON values. */
export function keyIdsOf(values: readonly unknown[]): string[] {
  const out = new Set<string>();
  for (const v of values) {
    const text = JSON.stringify(v);
    if (!text.includes('"$enc"')) continue;
    for (const m of text.matchAll(/"\$enc":"v1:([^:"]+):/g)) out.add(m[1]!);
  }
  return [...out];
}

/**
 * Upserts the tenant's command records created at or after `sinceNs` (0: all),
 * a page at a time in command uuid order; a record the source changed (a failed
 * attempt cleared and run again) overwrites the target's. Resolves the key ids its payloads name.
 */
export async function copyCommands(
  source: ShardSide,
  target: ShardSide,
  scope: TenantScope,
  sinceNs: number,
  pageSize: number,
): Promise<string[]> {
  let after = "";
  const keyIds = new Set<string>();
  for (;;) {
    const res = await source.pool.query<{
      command_uuid: string;
      domain: string;
      name: string;
      tenant_uuid: string;
      status: string;
      created_at: string;
      record: string;
    }>(
      `SELECT command_uuid, domain, name, tenant_uuid, status, created_at::text AS created_at, record::text AS record FROM ${t(source, "commands")}
        WHERE tenant_uuid = $1 AND NOT (domain = ANY($2::text[])) AND created_at >= $3 AND command_uuid > $4 AND ${NOT_REFUSED_BY_FREEZE}
        ORDER BY command_uuid LIMIT $5`,
      [scope.tenantUuid, scope.homeDomains, sinceNs, after, pageSize],
    );
    if (res.rows.length === 0) break;
    const cols = ["command_uuid", "domain", "name", "tenant_uuid", "status", "created_at", "record"] as const;
    await target.pool.query(
      `INSERT INTO ${t(target, "commands")} (${cols.join(", ")})
       SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::bigint[], $7::jsonb[])
       ON CONFLICT (command_uuid) DO UPDATE SET status = EXCLUDED.status, created_at = EXCLUDED.created_at, record = EXCLUDED.record`,
      cols.map((c) => res.rows.map((r) => r[c])),
    );
    for (const r of res.rows) for (const m of r.record.matchAll(/"\$enc": "v1:([^:"]+):/g)) keyIds.add(m[1]!);
    after = res.rows.at(-1)!.command_uuid;
    if (res.rows.length < pageSize) break;
  }
  return [...keyIds];
}

/** Copies the tenant's snapshots (a snapshot the target has already is kept: snapshots are never rewritten). */
export async function copySnapshots(source: ShardSide, target: ShardSide, scope: TenantScope): Promise<number> {
  const res = await source.pool.query<{ cols: unknown[] }>(
    `SELECT domain, aggregate, aggregate_uuid, snapshot_version::text, version::text, tenant_uuid, state::text, created_at::text, digest
       FROM ${t(source, "snapshots")} WHERE tenant_uuid = $1 AND NOT (domain = ANY($2::text[]))`,
    [scope.tenantUuid, scope.homeDomains],
  );
  if (res.rows.length === 0) return 0;
  const names = ["domain", "aggregate", "aggregate_uuid", "snapshot_version", "version", "tenant_uuid", "state", "created_at", "digest"];
  const types = ["text", "text", "text", "bigint", "bigint", "text", "jsonb", "bigint", "text"];
  const rows = res.rows as unknown as Record<string, unknown>[];
  await target.pool.query(
    `INSERT INTO ${t(target, "snapshots")} (${names.join(", ")})
     SELECT * FROM unnest(${types.map((ty, i) => `$${i + 1}::${ty}[]`).join(", ")}) ON CONFLICT DO NOTHING`,
    names.map((n) => rows.map((r) => r[n])),
  );
  return rows.length;
}

/** Copies the keys (and forgotten-key marks) of these key ids; a subject the target keys already under another id is left for the verification to report. */
export async function copyKeys(source: ShardSide, target: ShardSide, keyIds: readonly string[]): Promise<void> {
  if (keyIds.length === 0) return;
  const keys = await source.pool.query<{ subject: string; key_id: string; key: Buffer; created_at: string }>(
    `SELECT subject, key_id, key, created_at::text AS created_at FROM ${t(source, "subject_keys")} WHERE key_id = ANY($1::text[])`,
    [keyIds],
  );
  if (keys.rows.length > 0) {
    // A key the target marks forgotten (its subject was forgotten there) is never written back.
    await target.pool.query(
      `INSERT INTO ${t(target, "subject_keys")} (subject, key_id, key, created_at)
       SELECT * FROM unnest($1::text[], $2::text[], $3::bytea[], $4::bigint[]) AS k(subject, key_id, key, created_at)
       WHERE NOT EXISTS (SELECT 1 FROM ${t(target, "forgotten_keys")} f WHERE f.key_id = k.key_id)
       ON CONFLICT DO NOTHING`,
      [keys.rows.map((r) => r.subject), keys.rows.map((r) => r.key_id), keys.rows.map((r) => r.key), keys.rows.map((r) => r.created_at)],
    );
  }
  // A key the source has forgotten goes from the target too (the forget's mark wins over a key copied earlier).
  await target.pool.query(
    `WITH marked AS (
       INSERT INTO ${t(target, "forgotten_keys")} (key_id, forgotten_at)
       SELECT key_id, forgotten_at FROM unnest($1::text[], $2::bigint[]) AS f(key_id, forgotten_at) ON CONFLICT DO NOTHING)
     DELETE FROM ${t(target, "subject_keys")} WHERE key_id = ANY($1::text[])`,
    await forgotten(source, keyIds),
  );
}

async function forgotten(source: ShardSide, keyIds: readonly string[]): Promise<[string[], string[]]> {
  const res = await source.pool.query<{ key_id: string; forgotten_at: string }>(
    `SELECT key_id, forgotten_at::text AS forgotten_at FROM ${t(source, "forgotten_keys")} WHERE key_id = ANY($1::text[])`,
    [keyIds],
  );
  return [res.rows.map((r) => r.key_id), res.rows.map((r) => r.forgotten_at)];
}

/** Rows and an MD5 of a set of rows in a canonical order, as one side holds them. */
export interface SideDigest {
  readonly rows: number;
  readonly md5: string;
}

async function digest(side: ShardSide, sql: string, values: unknown[]): Promise<SideDigest> {
  const res = await side.pool.query<{ n: string; d: string | null }>(sql, values);
  return { rows: Number(res.rows[0]?.n ?? 0), md5: res.rows[0]?.d ?? "" };
}

/** A part of the events by source position, or of the records by creation time (ns); bounds left out are open. */
export interface DigestRange {
  readonly after?: number;
  readonly through?: number;
}

function rangeSql(column: string, range: DigestRange, first: number): { sql: string; values: number[] } {
  const parts: string[] = [];
  const values: number[] = [];
  if (range.after !== undefined) {
    values.push(range.after);
    parts.push(`${column} > $${String(first + values.length - 1)}`);
  }
  if (range.through !== undefined) {
    values.push(range.through);
    parts.push(`${column} <= $${String(first + values.length - 1)}`);
  }
  return { sql: parts.map((p) => ` AND ${p}`).join(""), values };
}

/** The tenant's events without their positions (which differ by design), by aggregate and version; `range` bounds the positions. */
export function eventsDigest(side: ShardSide, scope: TenantScope, range: DigestRange = {}): Promise<SideDigest> {
  const r = rangeSql("position", range, 3);
  return digest(
    side,
    `SELECT count(*)::text AS n, md5(string_agg(concat_ws('|', event_uuid, aggregate_uuid, version, domain, name, command_uuid, created_at,
            event_version, req_ctx::text, payload::text), E'\\n' ORDER BY aggregate_uuid COLLATE "C", version)) AS d
       FROM ${t(side, "events")} WHERE tenant_uuid = $1 AND NOT (domain = ANY($2::text[]))${r.sql}`,
    [scope.tenantUuid, scope.homeDomains, ...r.values],
  );
}

/** The tenant's command records; `range` bounds their creation times (ns). */
export function commandsDigest(side: ShardSide, scope: TenantScope, range: DigestRange = {}): Promise<SideDigest> {
  const r = rangeSql("created_at", range, 3);
  return digest(
    side,
    `SELECT count(*)::text AS n, md5(string_agg(concat_ws('|', command_uuid, domain, name, status, created_at, record::text), E'\\n'
            ORDER BY command_uuid COLLATE "C")) AS d
       FROM ${t(side, "commands")} WHERE tenant_uuid = $1 AND NOT (domain = ANY($2::text[])) AND ${NOT_REFUSED_BY_FREEZE}${r.sql}`,
    [scope.tenantUuid, scope.homeDomains, ...r.values],
  );
}

/** The highest position of the tenant's events in a shard (0: none). */
export async function tenantHead(side: ShardSide, scope: TenantScope): Promise<number> {
  const res = await side.pool.query<{ h: string }>(
    `SELECT coalesce(max(position), 0)::text AS h FROM ${t(side, "events")} WHERE tenant_uuid = $1 AND NOT (domain = ANY($2::text[]))`,
    [scope.tenantUuid, scope.homeDomains],
  );
  return Number(res.rows[0]?.h ?? 0);
}

export function snapshotsDigest(side: ShardSide, scope: TenantScope): Promise<SideDigest> {
  return digest(
    side,
    `SELECT count(*)::text AS n, md5(string_agg(concat_ws('|', domain, aggregate, aggregate_uuid, snapshot_version, version, state::text, digest), E'\\n'
            ORDER BY domain COLLATE "C", aggregate COLLATE "C", aggregate_uuid COLLATE "C", snapshot_version)) AS d
       FROM ${t(side, "snapshots")} WHERE tenant_uuid = $1 AND NOT (domain = ANY($2::text[]))`,
    [scope.tenantUuid, scope.homeDomains],
  );
}

export function keysDigest(side: ShardSide, keyIds: readonly string[]): Promise<SideDigest> {
  return digest(
    side,
    `SELECT count(*)::text AS n, md5(string_agg(k, E'\\n' ORDER BY k COLLATE "C")) AS d FROM (
       SELECT concat_ws('|', subject, key_id, encode(key, 'hex')) AS k FROM ${t(side, "subject_keys")} WHERE key_id = ANY($1::text[])
       UNION ALL SELECT concat_ws('|', 'forgotten', key_id) FROM ${t(side, "forgotten_keys")} WHERE key_id = ANY($1::text[])) AS ks`,
    [keyIds],
  );
}

/**
 * The tenant's readmodel documents per collection (without their write times):
 * those tagged with the tenant, and untagged ones that name it (a projection
 * writes its models in batches, outside a handler's tenant).
 */
export async function documentsDigests(side: ShardSide, tenantUuid: string): Promise<Map<string, SideDigest>> {
  const res = await side.pool.query<{ collection: string; n: string; d: string }>(
    `SELECT collection, count(*)::text AS n, md5(string_agg(concat_ws('|', key, doc::text), E'\\n' ORDER BY key COLLATE "C")) AS d
       FROM ${t(side, "readmodel_documents")} WHERE coalesce(tenant_uuid, doc->>'tenantUuid') = $1 GROUP BY collection`,
    [tenantUuid],
  );
  return new Map(res.rows.map((r) => [r.collection, { rows: Number(r.n), md5: r.d }]));
}

/** The shard's head, and the handlers whose checkpoint is below `position`. */
export async function handlersBehind(side: ShardSide, position: number): Promise<string[]> {
  const res = await side.pool.query<{ handler: string }>(
    `SELECT handler FROM ${t(side, "readmodel_checkpoints")} WHERE position < $1 ORDER BY handler`,
    [position],
  );
  return res.rows.map((r) => r.handler);
}

/**
 * Refuses a move from or to a shard with archived events (`mneme store archive`): the move reads and writes the
 * events table itself, so archived events would be left behind. INVALID_STATE until the archive is restored.
 */
export async function refuseArchived(side: ShardSide, which: string): Promise<void> {
  const exists = await side.pool.query<{ t: string | null }>("SELECT to_regclass($1)::text AS t", [t(side, "event_archives")]);
  if (exists.rows[0]?.t == null) return;
  const res = await side.pool.query<{ n: string }>(`SELECT count(*)::text AS n FROM ${t(side, "event_archives")}`);
  if (Number(res.rows[0]?.n ?? 0) > 0) {
    throw new MnemeError(
      "INVALID_STATE",
      `tenant move: the ${which} shard has archived events (mneme store archive); a move would leave them behind: ` +
        "restore the archive first (mneme store archive --restore)",
    );
  }
}

export async function headOf(side: ShardSide): Promise<number> {
  const res = await side.pool.query<{ h: string }>(`SELECT coalesce(max(position), 0)::text AS h FROM ${t(side, "events")}`);
  return Number(res.rows[0]?.h ?? 0);
}

/** True when the target holds any event of the tenant (outside the home domains). */
export async function holdsTenant(side: ShardSide, scope: TenantScope): Promise<boolean> {
  const res = await side.pool.query(
    `SELECT 1 FROM ${t(side, "events")} WHERE tenant_uuid = $1 AND NOT (domain = ANY($2::text[])) LIMIT 1`,
    [scope.tenantUuid, scope.homeDomains],
  );
  return res.rows.length > 0;
}
