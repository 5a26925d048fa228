/**
 * The control store of a sharded app: a Postgres schema whose tables say
 * which shard each tenant lives in (`placements`), and the state of tenant
 * moves under way (`tenant_moves`). Small and read on every request, so each
 * process caches the placements and follows their changes by LISTEN/NOTIFY,
 * with a poll behind it.
 */
import type pg from "pg";
import { MnemeError } from "../model/errors.js";
import { mapPgError } from "../postgres/postgres-errors.js";
import { type CheckedOutClient, withClient } from "../postgres/postgres-pool.js";
import { advisoryKey, quoteIdent } from "../postgres/postgres-schema.js";

/** How the control store's errors are named (a driver error becomes the MnemeError of mapPgError). */
const WHAT = "shards control store";

/** Where a tenant lives: its shard, whether its writes are paused for a move, and a version that grows with each change. */
export interface Placement {
  readonly tenantUuid: string;
  readonly shard: string;
  /** `active`: served by its shard; `paused`: a move is in its final catch-up, writes wait. */
  readonly state: "active" | "paused";
  readonly version: number;
  /** ms since the epoch of the last change. */
  readonly updatedAt: number;
}

/** A tenant move as the control store records it (see moveTenant). */
export interface MoveRecord {
  readonly tenantUuid: string;
  readonly fromShard: string;
  readonly toShard: string;
  /** `copying` -> `paused` -> `switched` -> `done`; `failed` when the verification found a difference. */
  readonly phase: "copying" | "paused" | "switched" | "done" | "failed";
  /** The source position up to which the tenant's events are in the target. */
  readonly copiedThrough: number;
  readonly startedAt: number;
  readonly updatedAt: number;
}

interface PlacementRow {
  tenant_uuid: string;
  shard: string;
  state: "active" | "paused";
  version: number;
  updated_at: string;
  change: string;
}

const toPlacement = (r: PlacementRow): Placement => ({
  tenantUuid: r.tenant_uuid,
  shard: r.shard,
  state: r.state,
  version: r.version,
  updatedAt: Number(r.updated_at),
});

/** The channel NOTIFY'd with a tenant's uuid when its placement changes. */
export function placementChannel(schema: string): string {
  return `mneme_placements_${advisoryKey("mneme:placements", schema).replace("-", "m")}`;
}

/** The control store's tables and queries (no cache: see PlacementCache). */
export class PlacementStore {
  readonly #pool: pg.Pool;
  readonly #s: string;
  readonly channel: string;

  constructor(
    pool: pg.Pool,
    readonly schema: string,
  ) {
    this.#pool = pool;
    this.#s = quoteIdent(schema);
    this.channel = placementChannel(schema);
  }

  async init(): Promise<void> {
    await this.#inTransaction(async (c) => {
      await c.query("SELECT pg_advisory_xact_lock($1::bigint)", [advisoryKey("mneme:placements-ddl", this.schema)]);
      await c.query(`CREATE SCHEMA IF NOT EXISTS ${this.#s}`);
      await c.query(`CREATE SEQUENCE IF NOT EXISTS ${this.#s}.placement_changes AS bigint`);
      await c.query(
        `CREATE TABLE IF NOT EXISTS ${this.#s}.placements (
           tenant_uuid text COLLATE "C" PRIMARY KEY,
           shard text NOT NULL,
           state text NOT NULL CHECK (state IN ('active', 'paused')),
           version integer NOT NULL,
           updated_at bigint NOT NULL,
           change bigint NOT NULL DEFAULT nextval('${this.#s}.placement_changes'))`,
      );
      await c.query(`CREATE INDEX IF NOT EXISTS placements_change ON ${this.#s}.placements (change)`);
      await c.query(
        `CREATE TABLE IF NOT EXISTS ${this.#s}.tenant_moves (
           tenant_uuid text COLLATE "C" PRIMARY KEY,
           from_shard text NOT NULL,
           to_shard text NOT NULL,
           phase text NOT NULL,
           copied_through bigint NOT NULL DEFAULT 0,
           started_at bigint NOT NULL,
           updated_at bigint NOT NULL)`,
      );
    });
  }

  /** One statement; a driver error is thrown as a MnemeError (UNAVAILABLE when the control store cannot be reached). */
  async #query<R extends pg.QueryResultRow>(text: string, values?: unknown[]): Promise<pg.QueryResult<R>> {
    try {
      return await this.#pool.query<R>(text, values);
    } catch (e) {
      throw mapPgError(e, WHAT);
    }
  }

  async #inTransaction<T>(fn: (c: CheckedOutClient) => Promise<T>): Promise<T> {
    try {
      return await withClient(this.#pool, "transaction", undefined, WHAT, async (c) => {
        await c.query("BEGIN");
        try {
          const out = await fn(c);
          await c.query("COMMIT");
          return out;
        } catch (e) {
          await c.query("ROLLBACK").catch(() => undefined);
          throw e;
        }
      });
    } catch (e) {
      throw mapPgError(e, WHAT);
    }
  }

  async get(tenantUuid: string): Promise<Placement | undefined> {
    const res = await this.#query<PlacementRow>(`SELECT * FROM ${this.#s}.placements WHERE tenant_uuid = $1`, [tenantUuid]);
    const r = res.rows[0];
    return r === undefined ? undefined : toPlacement(r);
  }

  /** Placements changed after `change` (0: all), and the highest change number seen. */
  async changedSince(change: number): Promise<{ placements: Placement[]; change: number }> {
    const res = await this.#query<PlacementRow>(`SELECT * FROM ${this.#s}.placements WHERE change > $1 ORDER BY change`, [change]);
    const last = res.rows.at(-1);
    return { placements: res.rows.map(toPlacement), change: last === undefined ? change : Number(last.change) };
  }

  async list(): Promise<Placement[]> {
    const res = await this.#query<PlacementRow>(`SELECT * FROM ${this.#s}.placements ORDER BY tenant_uuid`);
    return res.rows.map(toPlacement);
  }

  /**
   * Places a tenant: on `shard` when given, else on the shard of `shards` with
   * the fewest tenants (the first listed on a tie). A tenant placed already keeps
   * its placement (given another shard: CONFLICT). Serialised by an advisory lock.
   */
  async place(tenantUuid: string, shards: readonly string[], shard?: string): Promise<Placement> {
    return this.#inTransaction(async (c) => {
      await c.query("SELECT pg_advisory_xact_lock($1::bigint)", [advisoryKey("mneme:placements", this.schema)]);
      const had = await c.query<PlacementRow>(`SELECT * FROM ${this.#s}.placements WHERE tenant_uuid = $1`, [tenantUuid]);
      const existing = had.rows[0];
      if (existing !== undefined) {
        if (shard !== undefined && existing.shard !== shard)
          throw new MnemeError("CONFLICT", `tenant ${tenantUuid} is placed on shard ${existing.shard} already; move it with moveTenant`);
        return toPlacement(existing);
      }
      const chosen = shard ?? (await this.#fewest(c, shards));
      const res = await c.query<PlacementRow>(
        `INSERT INTO ${this.#s}.placements (tenant_uuid, shard, state, version, updated_at) VALUES ($1, $2, 'active', 1, $3) RETURNING *`,
        [tenantUuid, chosen, Date.now()],
      );
      await c.query("SELECT pg_notify($1, $2)", [this.channel, tenantUuid]);
      return toPlacement(res.rows[0]!);
    });
  }

  async #fewest(c: CheckedOutClient, shards: readonly string[]): Promise<string> {
    const res = await c.query<{ shard: string; n: string }>(`SELECT shard, count(*)::text AS n FROM ${this.#s}.placements GROUP BY shard`);
    const counts = new Map(res.rows.map((r) => [r.shard, Number(r.n)]));
    let best = shards[0]!;
    for (const s of shards) if ((counts.get(s) ?? 0) < (counts.get(best) ?? 0)) best = s;
    return best;
  }

  /** Tenants per shard. */
  async tenantCounts(): Promise<Map<string, number>> {
    const res = await this.#query<{ shard: string; n: string }>(
      `SELECT shard, count(*)::text AS n FROM ${this.#s}.placements GROUP BY shard`,
    );
    return new Map(res.rows.map((r) => [r.shard, Number(r.n)]));
  }

  /** Sets a placement's shard and state (version + 1) and NOTIFYs; with `move`, the move's phase in the same transaction. */
  async update(tenantUuid: string, shard: string, state: Placement["state"], move?: MoveRecord["phase"]): Promise<void> {
    await this.#inTransaction(async (c) => {
      await c.query(
        `UPDATE ${this.#s}.placements SET shard = $2, state = $3, version = version + 1, updated_at = $4,
           change = nextval('${this.#s}.placement_changes') WHERE tenant_uuid = $1`,
        [tenantUuid, shard, state, Date.now()],
      );
      if (move !== undefined) await this.#setPhase(c, tenantUuid, move);
      await c.query("SELECT pg_notify($1, $2)", [this.channel, tenantUuid]);
    });
  }

  async #setPhase(
    c: { query(text: string, values?: unknown[]): Promise<unknown> },
    tenantUuid: string,
    phase: MoveRecord["phase"],
  ): Promise<void> {
    await c.query(`UPDATE ${this.#s}.tenant_moves SET phase = $2, updated_at = $3 WHERE tenant_uuid = $1`, [tenantUuid, phase, Date.now()]);
  }

  async setPhase(tenantUuid: string, phase: MoveRecord["phase"]): Promise<void> {
    await this.#setPhase({ query: (text, values) => this.#query(text, values) }, tenantUuid, phase);
  }

  async setCopiedThrough(tenantUuid: string, position: number): Promise<void> {
    await this.#query(`UPDATE ${this.#s}.tenant_moves SET copied_through = $2, updated_at = $3 WHERE tenant_uuid = $1`, [
      tenantUuid,
      position,
      Date.now(),
    ]);
  }

  async move(tenantUuid: string): Promise<MoveRecord | undefined> {
    const res = await this.#query<{
      tenant_uuid: string;
      from_shard: string;
      to_shard: string;
      phase: MoveRecord["phase"];
      copied_through: string;
      started_at: string;
      updated_at: string;
    }>(`SELECT * FROM ${this.#s}.tenant_moves WHERE tenant_uuid = $1`, [tenantUuid]);
    const r = res.rows[0];
    if (r === undefined) return undefined;
    return {
      tenantUuid: r.tenant_uuid,
      fromShard: r.from_shard,
      toShard: r.to_shard,
      phase: r.phase,
      copiedThrough: Number(r.copied_through),
      startedAt: Number(r.started_at),
      updatedAt: Number(r.updated_at),
    };
  }

  /** Records a new move (replacing a finished or failed one of the tenant). */
  async startMove(tenantUuid: string, from: string, to: string): Promise<MoveRecord> {
    const now = Date.now();
    await this.#query(
      `INSERT INTO ${this.#s}.tenant_moves (tenant_uuid, from_shard, to_shard, phase, copied_through, started_at, updated_at)
       VALUES ($1, $2, $3, 'copying', 0, $4, $4)
       ON CONFLICT (tenant_uuid) DO UPDATE SET from_shard = $2, to_shard = $3, phase = 'copying', copied_through = 0, started_at = $4, updated_at = $4`,
      [tenantUuid, from, to, now],
    );
    return { tenantUuid, fromShard: from, toShard: to, phase: "copying", copiedThrough: 0, startedAt: now, updatedAt: now };
  }

  async moves(): Promise<MoveRecord[]> {
    const res = await this.#query<{ tenant_uuid: string }>(`SELECT tenant_uuid FROM ${this.#s}.tenant_moves ORDER BY tenant_uuid`);
    const out: MoveRecord[] = [];
    for (const r of res.rows) {
      const m = await this.move(r.tenant_uuid);
      if (m !== undefined) out.push(m);
    }
    return out;
  }
}
