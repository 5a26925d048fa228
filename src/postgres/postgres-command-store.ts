import { MnemeError } from "../model/errors.js";
import { checkClaimArgs, validateCommandRecord } from "../store/command-record-validation.js";
import type { CommandClaim, CommandClaimant, CommandListOptions, CommandRecord, CommandStore } from "../store/command-store.js";
import { COMMAND_LIST_FILTERS } from "../store/command-store.js";
import { decodeCursor, encodeCursor, pageLimit, stringFilters } from "../store/paging.js";
import { checkPayloadSealing, type PayloadSealing } from "../store/payload-sealing.js";
import type { StoreInfo, StorePage } from "../store/store-info.js";
import { PostgresClaimSession } from "./postgres-claim-session.js";
import { mapPgError } from "./postgres-errors.js";
import { PostgresStoreBase, type PostgresStoreOptions } from "./postgres-store-base.js";

const INT64_LIMIT = 2 ** 63;

/** Now in ms since the epoch, by the database's clock (every instance reads the same one). */
const NOW_MS = "(extract(epoch FROM clock_timestamp()) * 1000)::bigint";

/** Options of {@link PostgresCommandStore}. */
export interface PostgresCommandStoreOptions extends PostgresStoreOptions {
  /**
   * How a claim of idempotent dispatch commits. "durable" (default): flushed
   * to disk before the handler runs, so exactly one handler runs even across
   * a crash of the database server. "async": not waited for (synchronous_commit
   * off for the claim only; the command's events and record stay durable),
   * which saves a disk flush per command with a commandUuid; a claim taken in
   * the last fraction of a second (wal_writer_delay, 200 ms by default) before
   * the server crashes or fails over may be lost, and a duplicate sent after
   * that may then run its handler a second time.
   */
  readonly claimCommit?: "durable" | "async";
}

/**
 * The CommandStore (audit trail) on Postgres: each record as JSONB, beside the
 * columns listing filters and pages on. Listing is keyset by
 * (created_at, command_uuid), newest last; a second record of one commandUuid
 * is CONFLICT, as the trail is append-only.
 *
 * Claims (commands being run) live in a small table beside it, one row per
 * command in progress, with its owner and lease end (ms of the database's
 * clock). A trigger deletes a command's claim when its record is inserted,
 * wherever that happens (this store, or the event repository's append
 * statement), in the record's own transaction. Each claim names the session
 * of its holder (see PostgresClaimSession): a claim whose holder's session
 * ended is taken over at once, without waiting out its lease.
 */
export class PostgresCommandStore extends PostgresStoreBase implements CommandStore {
  private readonly table: string;
  private readonly claims: string;
  protected override readonly clientKind = "command";
  private readonly claimCommit: "durable" | "async";
  private readonly claimSession = new PostgresClaimSession((onLost) =>
    this.checkout("lock", "postgres: the command claim session", onLost),
  );

  constructor(opts: PostgresCommandStoreOptions) {
    super(opts);
    const commit = opts.claimCommit ?? "durable";
    if (commit !== "durable" && commit !== "async") {
      throw new MnemeError("INVALID_REQUEST", `postgres: claimCommit must be "durable" or "async", got ${String(commit)}`);
    }
    this.claimCommit = commit;
    this.table = `${this.qschema}.commands`;
    this.claims = `${this.qschema}.command_claims`;
  }

  /** Ends the claim session (its lock goes with it). */
  protected override async onClose(): Promise<void> {
    this.claimSession.close();
  }

  /** True when this store's table is in `schema` of the database behind `pool` (the event repository then joins it). */
  sharesTablesWith(pool: unknown, schema: string): boolean {
    return pool === this.pool && schema === this.schema;
  }

  /** Creates the schema and table; idempotent, safe to run from several instances at once. */
  async init(): Promise<void> {
    await this.track(() =>
      this.runDdl([
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
      ]),
    );
  }

  /**
   * Claims a commandUuid (see CommandStore.claim) in one round trip. The
   * function takes the claim first and looks at the record after, in a later
   * statement: a record committed while the claim waited for its writer is
   * seen, so a claim is never granted over a succeeded record.
   */
  async claim(commandUuid: string, claimant: CommandClaimant): Promise<CommandClaim> {
    return this.track(async () => {
      const owner = checkClaimArgs(commandUuid, claimant.owner, claimant.leaseMs);
      const holder = await this.claimSession.key();
      const res = await this.query<{ outcome: string; record: unknown; owner: string | null; expires_at: string | null }>(
        `SELECT claim_outcome AS outcome, claim_record AS record, claim_owner AS owner, claim_expires_at::text AS expires_at
         FROM ${this.qschema}.mneme_claim_command($1, $2, $3, $4, $5, $6::bigint, $7::boolean, $8::bigint)`,
        [
          commandUuid,
          claimant.domain,
          claimant.name,
          claimant.tenantUuid,
          owner,
          claimant.leaseMs,
          this.claimCommit === "durable",
          holder ?? null,
        ],
        "command claim",
      );
      const row = res.rows[0];
      if (row?.outcome === "claimed") return { outcome: "claimed" };
      if (row?.outcome === "recorded") return { outcome: "recorded", record: row.record as CommandRecord };
      if (row?.outcome === "held" && row.owner !== null) return { outcome: "held", owner: row.owner, expiresAt: Number(row.expires_at) };
      throw new MnemeError("UNAVAILABLE", `postgres: claiming command ${commandUuid} gave no answer`);
    });
  }

  async renewClaim(commandUuid: string, owner: string, leaseMs: number): Promise<boolean> {
    return this.track(async () => {
      checkClaimArgs(commandUuid, owner, leaseMs);
      const res = await this.query(
        `UPDATE ${this.claims} SET expires_at = ${NOW_MS} + $3::bigint WHERE command_uuid = $1 AND owner = $2`,
        [commandUuid, owner, leaseMs],
        "command claim renewal",
      );
      return (res.rowCount ?? 0) > 0;
    });
  }

  async releaseClaim(commandUuid: string, owner: string): Promise<void> {
    await this.track(async () => {
      checkClaimArgs(commandUuid, owner, 1);
      await this.query(`DELETE FROM ${this.claims} WHERE command_uuid = $1 AND owner = $2`, [commandUuid, owner], "command claim release");
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
        `SELECT record FROM ${this.table} WHERE command_uuid = $1`,
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
      const conds: string[] = [];
      if (after !== undefined) conds.push(`(created_at, command_uuid) > ($${values.push(after[0])}::bigint, $${values.push(after[1])})`);
      for (const [column, value] of stringFilters(opts, COMMAND_LIST_FILTERS)) conds.push(`${column} = $${values.push(value)}`);
      const where = conds.length === 0 ? "" : `WHERE ${conds.join(" AND ")}`;
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

  /** For the personal-data migration only: see CommandStore.sealRecordPayloads. One statement. */
  async sealRecordPayloads(rewrites: readonly PayloadSealing[]): Promise<number> {
    return this.track(async () => {
      checkPayloadSealing("sealRecordPayloads", rewrites, { redacts: true });
      if (rewrites.length === 0) return 0;
      const res = await this.query(
        `UPDATE ${this.table} AS c SET record = jsonb_set(c.record, '{payload}', u.sealed)
           FROM unnest($1::text[], $2::jsonb[], $3::jsonb[]) AS u(id, stored, sealed)
          WHERE c.command_uuid = u.id AND c.record->'payload' = u.stored`,
        [rewrites.map((r) => r.id), rewrites.map((r) => JSON.stringify(r.stored)), rewrites.map((r) => JSON.stringify(r.sealed))],
        "command sealRecordPayloads",
      );
      return res.rowCount ?? 0;
    });
  }

  async delete(commandUuid: string): Promise<boolean> {
    return this.track(async () => {
      if (typeof commandUuid !== "string") throw new MnemeError("INVALID_REQUEST", "delete: commandUuid must be a string");
      const res = await this.query(`DELETE FROM ${this.table} WHERE command_uuid = $1`, [commandUuid], "command delete");
      return (res.rowCount ?? 0) > 0;
    });
  }

  async info(): Promise<StoreInfo> {
    return this.tableInfo(this.table, "command info");
  }

  /** The claims table, the claim function, and the trigger by which a record deletes its command's claim. */
  private claimDdl(): string[] {
    const s = this.qschema;
    const t = this.table;
    const c = this.claims;
    return [
      `CREATE TABLE IF NOT EXISTS ${c} (
        command_uuid text COLLATE "C" PRIMARY KEY,
        owner text NOT NULL,
        expires_at bigint NOT NULL,
        domain text NOT NULL,
        name text NOT NULL,
        tenant_uuid text NOT NULL
      )`,
      // The advisory-lock key of the holder's session, and the owner that recorded it: an instance of an earlier
      // release that takes a claim over leaves the key of the one before, which then names nobody.
      `ALTER TABLE ${c} ADD COLUMN IF NOT EXISTS holder bigint`,
      `ALTER TABLE ${c} ADD COLUMN IF NOT EXISTS holder_owner text`,
      `CREATE OR REPLACE FUNCTION ${s}.mneme_claim_command(
        p_uuid text, p_domain text, p_name text, p_tenant text, p_owner text, p_lease_ms bigint, p_durable boolean, p_holder bigint)
      RETURNS TABLE (claim_outcome text, claim_record jsonb, claim_owner text, claim_expires_at bigint)
      LANGUAGE plpgsql VOLATILE AS $fn$
      #variable_conflict use_column
      DECLARE
        v_now bigint;
        v_status text;
        v_record jsonb;
        v_owner text;
        v_expires bigint;
      BEGIN
        IF NOT p_durable THEN
          PERFORM set_config('synchronous_commit', 'off', true);
        END IF;
        -- A replay (the common duplicate) writes nothing.
        SELECT r.status, r.record INTO v_status, v_record FROM ${t} r WHERE r.command_uuid = p_uuid;
        IF v_status = 'succeeded' THEN
          RETURN QUERY SELECT 'recorded'::text, v_record, NULL::text, NULL::bigint;
          RETURN;
        END IF;
        -- A few rounds at most: between the upsert and the look at a held claim, the claim may be resolved.
        FOR round IN 1 .. 20 LOOP
          v_now := ${NOW_MS};
          INSERT INTO ${c} AS k (command_uuid, owner, expires_at, domain, name, tenant_uuid, holder, holder_owner)
          VALUES (p_uuid, p_owner, v_now + p_lease_ms, p_domain, p_name, p_tenant, p_holder, p_owner)
          ON CONFLICT (command_uuid) DO UPDATE
            SET owner = excluded.owner, expires_at = excluded.expires_at, domain = excluded.domain,
                name = excluded.name, tenant_uuid = excluded.tenant_uuid, holder = excluded.holder,
                holder_owner = excluded.holder_owner
            WHERE k.expires_at < v_now OR k.owner = p_owner
              -- The holder's session ended (its process died): its lock is gone, the claim is free now.
              OR (k.holder IS NOT NULL AND k.holder_owner = k.owner AND NOT EXISTS (
                SELECT 1 FROM pg_locks l
                WHERE l.locktype = 'advisory' AND l.objsubid = 1 AND l.granted
                  AND l.database = (SELECT d.oid FROM pg_database d WHERE d.datname = current_database())
                  AND l.classid::bigint = k.holder >> 32 AND l.objid::bigint = k.holder & 4294967295));
          IF FOUND THEN
            -- Looked at after the claim (a new snapshot): a record committed while the claim waited is seen.
            SELECT r.status, r.record INTO v_status, v_record FROM ${t} r WHERE r.command_uuid = p_uuid;
            IF v_status = 'succeeded' THEN
              DELETE FROM ${c} k WHERE k.command_uuid = p_uuid AND k.owner = p_owner;
              RETURN QUERY SELECT 'recorded'::text, v_record, NULL::text, NULL::bigint;
              RETURN;
            ELSIF v_status IS NOT NULL THEN
              -- A failed or denied attempt is not an outcome: this one records its own.
              DELETE FROM ${t} r WHERE r.command_uuid = p_uuid AND r.status <> 'succeeded';
            END IF;
            RETURN QUERY SELECT 'claimed'::text, NULL::jsonb, NULL::text, NULL::bigint;
            RETURN;
          END IF;
          SELECT k.owner, k.expires_at INTO v_owner, v_expires FROM ${c} k WHERE k.command_uuid = p_uuid;
          IF FOUND THEN
            RETURN QUERY SELECT 'held'::text, NULL::jsonb, v_owner, v_expires;
            RETURN;
          END IF;
        END LOOP;
        RAISE EXCEPTION 'mneme_claim_command: the claim of command % changed under every attempt', p_uuid USING ERRCODE = '40001';
      END
      $fn$`,
      `CREATE OR REPLACE FUNCTION ${s}.mneme_command_resolves_claim() RETURNS trigger
      LANGUAGE plpgsql AS $fn$
      BEGIN
        DELETE FROM ${c} WHERE command_uuid = NEW.command_uuid;
        RETURN NULL;
      END
      $fn$`,
      `CREATE OR REPLACE TRIGGER commands_resolve_claim AFTER INSERT ON ${t}
       FOR EACH ROW EXECUTE FUNCTION ${s}.mneme_command_resolves_claim()`,
    ];
  }
}
