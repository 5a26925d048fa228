import { MnemeError } from "../model/errors.js";
import { validateCommandRecord } from "../store/command-record-validation.js";
import type { CommandListOptions, CommandRecord, CommandStore } from "../store/command-store.js";
import { decodeCursor, encodeCursor, pageLimit } from "../store/paging.js";
import type { StoreInfo, StorePage } from "../store/store-info.js";
import { mapPgError } from "./postgres-errors.js";
import { runSchemaDdl } from "./postgres-schema.js";
import { PostgresStoreBase, type PostgresStoreOptions } from "./postgres-store-base.js";

const INT64_LIMIT = 2 ** 63;

/**
 * The CommandStore (audit trail) on Postgres: each record as JSONB, beside the
 * columns listing filters and pages on. Listing is keyset by
 * (created_at, command_uuid), newest last; a second record of one commandUuid
 * is CONFLICT, as the trail is append-only.
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
        ],
        this.onStatement,
      ),
    );
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

  async delete(commandUuid: string): Promise<boolean> {
    return this.track(async () => {
      if (typeof commandUuid !== "string") throw new MnemeError("INVALID_REQUEST", "delete: commandUuid must be a string");
      const res = await this.query(`DELETE FROM ${this.table} WHERE command_uuid = $1`, [commandUuid], "command delete");
      return (res.rowCount ?? 0) > 0;
    });
  }

  async info(): Promise<StoreInfo> {
    return this.track(async () => {
      const res = await this.query<{ n: string; t: string | null }>(
        `SELECT count(*)::text AS n, max(created_at)::text AS t FROM ${this.table}`,
        [],
        "command info",
      );
      return this.storeInfoOf(res.rows[0]);
    });
  }
}
