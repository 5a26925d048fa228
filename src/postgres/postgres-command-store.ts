import { MnemeError } from "../model/errors.js";
import { checkClaimArgs, validateCommandRecord } from "../store/command-record-validation.js";
import type { CommandClaim, CommandClaimant, CommandListOptions, CommandRecord, CommandStore } from "../store/command-store.js";
import { decodeCursor, encodeCursor, pageLimit } from "../store/paging.js";
import type { StoreInfo, StorePage } from "../store/store-info.js";
import { mapPgError } from "./postgres-errors.js";
import { runSchemaDdl } from "./postgres-schema.js";
import { PostgresStoreBase, type PostgresStoreOptions } from "./postgres-store-base.js";

const INT64_LIMIT = 2 ** 63;

/** Now in ms since the epoch, by the database's clock (every instance reads the same one). */
const NOW_MS = "(extract(epoch FROM clock_timestamp()) * 1000)::bigint";

/** The status of a claim's row: a command being run, not a record (never listed, counted or returned). */
const CLAIMED = "claimed";

/**
 * The CommandStore (audit trail) on Postgres: each record as JSONB, beside the
 * columns listing filters and pages on. Listing is keyset by
 * (created_at, command_uuid), newest last; a second record of one commandUuid
 * is CONFLICT, as the trail is append-only.
 *
 * A claim is a row of the same table with status "claimed" (its record holds
 * the owner and the lease end, ms of the database's clock): one primary key
 * settles claims and records together, whoever writes the record (this store,
 * or the event repository's append statement): a trigger replaces the claim
 * with the record in the record's own transaction.
 */
export class PostgresCommandStore extends PostgresStoreBase implements CommandStore {
  private readonly table: string;
  protected override readonly clientKind = "command";

  constructor(opts: PostgresStoreOptions) {
    super(opts);
    this.table = `${this.qschema}.commands`;
  }

  /** True when this store's table is in `schema` of the database behind `pool` (the event repository then joins it). */
  sharesTablesWith(pool: unknown, schema: string): boolean {
    return pool === this.pool && schema === this.schema;
  }

  /** Creates the schema and table; idempotent, safe to run from several instances at once. */
  async init(): Promise<void> {
    await this.track(() =>
      runSchemaDdl(
        this.pool,
        this.schema,
        [
          `CREATE SCHEMA IF NOT EXISTS ${this.qschema}`,
          `CREATE TABLE IF NOT EXISTS ${this.table} (
          command_uuid text COLLATE "C" PRIMARY KEY,
          domain text NOT NULL,
          name text NOT NULL,
          tenant_uuid text NOT NULL,
          status text NOT NULL,
          created_at bigint NOT NULL,
          record jsonb NOT NULL
        )`,
          `CREATE INDEX IF NOT EXISTS commands_created_at_idx ON ${this.table} (created_at, command_uuid)`,
          ...this.claimDdl(),
        ],
        this.onStatement,
      ),
    );
  }

  /**
   * Claims a commandUuid (see CommandStore.claim) in one round trip: an upsert
   * that takes the row unless a succeeded record or a live claim of another
   * owner holds it, and else the row as it is after that (a new snapshot, so a
   * record committed meanwhile is seen).
   */
  async claim(commandUuid: string, claimant: CommandClaimant): Promise<CommandClaim> {
    return this.track(async () => {
      const owner = checkClaimArgs(commandUuid, claimant.owner, claimant.leaseMs);
      const res = await this.query<{ outcome: string; record: unknown }>(
        `SELECT claim_outcome AS outcome, claim_record AS record FROM ${this.qschema}.mneme_claim_command($1, $2, $3, $4, $5, $6::bigint)`,
        [commandUuid, claimant.domain, claimant.name, claimant.tenantUuid, owner, claimant.leaseMs],
        "command claim",
      );
      const row = res.rows[0];
      if (row?.outcome === "claimed") return { outcome: "claimed" };
      if (row?.outcome === "recorded") return { outcome: "recorded", record: row.record as CommandRecord };
      const held = row?.record as { owner: string; expiresAt: number | string } | undefined;
      if (row?.outcome !== "held" || held === undefined)
        throw new MnemeError("UNAVAILABLE", `postgres: claiming command ${commandUuid} gave no answer`);
      return { outcome: "held", owner: held.owner, expiresAt: Number(held.expiresAt) };
    });
  }

  async renewClaim(commandUuid: string, owner: string, leaseMs: number): Promise<boolean> {
    return this.track(async () => {
      checkClaimArgs(commandUuid, owner, leaseMs);
      const res = await this.query(
        `UPDATE ${this.table} SET record = jsonb_set(record, '{expiresAt}', to_jsonb(${NOW_MS} + $3::bigint))
         WHERE command_uuid = $1 AND status = '${CLAIMED}' AND record->>'owner' = $2`,
        [commandUuid, owner, leaseMs],
        "command claim renewal",
      );
      return (res.rowCount ?? 0) > 0;
    });
  }

  async releaseClaim(commandUuid: string, owner: string): Promise<void> {
    await this.track(async () => {
      checkClaimArgs(commandUuid, owner, 1);
      await this.query(
        `DELETE FROM ${this.table} WHERE command_uuid = $1 AND status = '${CLAIMED}' AND record->>'owner' = $2`,
        [commandUuid, owner],
        "command claim release",
      );
    });
  }

  async record(rec: CommandRecord): Promise<void> {
    await this.track(async () => {
      const json = validateCommandRecord(rec);
      // created_at is a bigint column.
      if (!Number.isInteger(rec.createdAt) || Math.abs(rec.createdAt) >= INT64_LIMIT) {
        throw new MnemeError("INVALID_REQUEST", "invalid command record: createdAt must be an integer number of ns");
      }
      try {
        await this.poolQuery(
          "command",
          `INSERT INTO ${this.table} (command_uuid, domain, name, tenant_uuid, status, created_at, record) VALUES ($1, $2, $3, $4, $5, $6, $7::jsonb)`,
          [rec.commandUuid, rec.domain, rec.name, rec.tenantUuid, rec.status, rec.createdAt, json],
        );
      } catch (e) {
        const err = mapPgError(e, "postgres: command record");
        if (err.code === "CONFLICT") throw new MnemeError("CONFLICT", `command ${rec.commandUuid} is already recorded`, { cause: e });
        throw err;
      }
    });
  }

  async get(commandUuid: string): Promise<CommandRecord | undefined> {
    return this.track(async () => {
      if (typeof commandUuid !== "string") throw new MnemeError("INVALID_REQUEST", "get: commandUuid must be a string");
      const res = await this.query<{ record: CommandRecord }>(
        `SELECT record FROM ${this.table} WHERE command_uuid = $1 AND status <> '${CLAIMED}'`,
        [commandUuid],
        "command get",
      );
      return res.rows[0]?.record;
    });
  }

  async list(opts: CommandListOptions = {}): Promise<StorePage<CommandRecord>> {
    return this.track(async () => {
      const limit = pageLimit(opts.limit);
      const after = decodeCursor(opts.cursor, ["integer", "string"]);
      const values: unknown[] = [];
      const conds: string[] = [`status <> '${CLAIMED}'`];
      if (after !== undefined) conds.push(`(created_at, command_uuid) > ($${values.push(after[0])}::bigint, $${values.push(after[1])})`);
      for (const [field, column] of [
        ["domain", "domain"],
        ["name", "name"],
        ["status", "status"],
        ["tenantUuid", "tenant_uuid"],
      ] as const) {
        const value = opts[field];
        if (value === undefined) continue;
        if (typeof value !== "string") throw new MnemeError("INVALID_REQUEST", `list: ${field} must be a string`);
        conds.push(`${column} = $${values.push(value)}`);
      }
      const where = `WHERE ${conds.join(" AND ")}`;
      // One row more than the page tells whether a next page exists.
      const res = await this.query<{ record: CommandRecord }>(
        `SELECT record FROM ${this.table} ${where} ORDER BY created_at, command_uuid LIMIT $${values.push(limit + 1)}`,
        values,
        "command list",
      );
      const items = res.rows.slice(0, limit).map((r) => r.record);
      if (res.rows.length <= limit) return { items };
      const last = items[items.length - 1] as CommandRecord;
      return { items, nextCursor: encodeCursor([last.createdAt, last.commandUuid]) };
    });
  }

  async delete(commandUuid: string): Promise<boolean> {
    return this.track(async () => {
      if (typeof commandUuid !== "string") throw new MnemeError("INVALID_REQUEST", "delete: commandUuid must be a string");
      const res = await this.query(
        `DELETE FROM ${this.table} WHERE command_uuid = $1 AND status <> '${CLAIMED}'`,
        [commandUuid],
        "command delete",
      );
      return (res.rowCount ?? 0) > 0;
    });
  }

  async info(): Promise<StoreInfo> {
    return this.track(async () => {
      const res = await this.query<{ n: string; t: string | null }>(
        `SELECT count(*)::text AS n, max(created_at)::text AS t FROM ${this.table} WHERE status <> '${CLAIMED}'`,
        [],
        "command info",
      );
      return this.storeInfoOf(res.rows[0]);
    });
  }

  /**
   * The claim function and the trigger by which a record replaces its
   * command's claim (in the record's transaction, wherever it is inserted).
   */
  private claimDdl(): string[] {
    const s = this.qschema;
    const t = this.table;
    return [
      `CREATE OR REPLACE FUNCTION ${s}.mneme_claim_command(
        p_uuid text, p_domain text, p_name text, p_tenant text, p_owner text, p_lease_ms bigint)
      RETURNS TABLE (claim_outcome text, claim_record jsonb)
      LANGUAGE plpgsql VOLATILE AS $fn$
      #variable_conflict use_column
      DECLARE
        v_now bigint;
        v_status text;
        v_record jsonb;
      BEGIN
        -- A few rounds at most: between the upsert and the look the row may be resolved as failed or released.
        FOR round IN 1 .. 20 LOOP
          v_now := ${NOW_MS};
          INSERT INTO ${t} AS c (command_uuid, domain, name, tenant_uuid, status, created_at, record)
          VALUES (p_uuid, p_domain, p_name, p_tenant, '${CLAIMED}', v_now * 1000000,
                  jsonb_build_object('owner', p_owner, 'expiresAt', v_now + p_lease_ms))
          ON CONFLICT (command_uuid) DO UPDATE
            SET domain = excluded.domain, name = excluded.name, tenant_uuid = excluded.tenant_uuid,
                status = excluded.status, created_at = excluded.created_at, record = excluded.record
            WHERE c.status IN ('failed', 'denied')
               OR (c.status = '${CLAIMED}' AND ((c.record->>'expiresAt')::bigint < v_now OR c.record->>'owner' = p_owner));
          IF FOUND THEN
            RETURN QUERY SELECT 'claimed'::text, NULL::jsonb;
            RETURN;
          END IF;
          SELECT c.status, c.record INTO v_status, v_record FROM ${t} c WHERE c.command_uuid = p_uuid;
          IF v_status = 'succeeded' THEN
            RETURN QUERY SELECT 'recorded'::text, v_record;
            RETURN;
          ELSIF v_status = '${CLAIMED}' THEN
            RETURN QUERY SELECT 'held'::text, v_record;
            RETURN;
          END IF;
        END LOOP;
        RAISE EXCEPTION 'mneme_claim_command: command % changed under every claim', p_uuid USING ERRCODE = '40001';
      END
      $fn$`,
      `CREATE OR REPLACE FUNCTION ${s}.mneme_command_resolves_claim() RETURNS trigger
      LANGUAGE plpgsql AS $fn$
      BEGIN
        DELETE FROM ${t} WHERE command_uuid = NEW.command_uuid AND status = '${CLAIMED}';
        RETURN NEW;
      END
      $fn$`,
      `CREATE OR REPLACE TRIGGER commands_resolve_claim BEFORE INSERT ON ${t}
       FOR EACH ROW WHEN (NEW.status <> '${CLAIMED}') EXECUTE FUNCTION ${s}.mneme_command_resolves_claim()`,
    ];
  }
}
