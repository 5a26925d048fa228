import { isMnemeError, MnemeError } from "../model/errors.js";
import { checkClaimArgs, validateCommandRecord } from "../store/command-record-validation.js";
import type { CommandClaim, CommandClaimant, CommandListOptions, CommandRecord, CommandStore } from "../store/command-store.js";
import { COMMAND_LIST_FILTERS } from "../store/command-store.js";
import { decodeCursor, encodeCursor, pageLimit, stringFilters } from "../store/paging.js";
import { checkPayloadSealing, jsonEqual, type PayloadSealing } from "../store/payload-sealing.js";
import type { StoreInfo, StorePage } from "../store/store-info.js";
import { sqliteCode, toStoreError } from "./sqlite-errors.js";
import { leaseOwnerId, ownerIsGone } from "./sqlite-lease-locks.js";
import { SqliteStoreBase } from "./sqlite-store-base.js";

/**
 * The CommandStore in one SQLite table: the record as JSON text, plus the
 * columns listing filters and pages on. Listing is keyset by
 * (created_at, command_uuid) over an index, oldest first.
 *
 * Claims (commands being run) live in a small table beside it, one row per
 * command in progress: a claim is taken in one write transaction that also
 * looks at the record (SQLite runs one writer at a time, so no other instance
 * can come between), and the record deletes it in the record's own
 * transaction. Each claim names its holder, the process that took it (as
 * the lease locks name theirs): a claim whose process is gone from this
 * machine is taken over at once, without waiting out its lease.
 */
export class SqliteCommandStore extends SqliteStoreBase implements CommandStore {
  private readonly table = `${this.prefix}commands`;
  private readonly claims = `${this.prefix}command_claims`;
  /** The process behind this store's claims: `<uuid>/<pid>@<host>`. */
  private readonly holder = leaseOwnerId();

  protected createTables(): void {
    this.db.exec(`
      CREATE TABLE IF NOT EXISTS ${this.table} (
        command_uuid TEXT PRIMARY KEY,
        domain TEXT NOT NULL,
        name TEXT NOT NULL,
        tenant_uuid TEXT NOT NULL,
        status TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        record TEXT NOT NULL
      );
      CREATE INDEX IF NOT EXISTS ${this.table}_created ON ${this.table} (created_at, command_uuid);
      CREATE TABLE IF NOT EXISTS ${this.claims} (
        command_uuid TEXT PRIMARY KEY,
        owner TEXT NOT NULL,
        expires_at INTEGER NOT NULL,
        domain TEXT NOT NULL,
        name TEXT NOT NULL,
        tenant_uuid TEXT NOT NULL
      ) WITHOUT ROWID;
    `);
    // The claim's process (a file of an earlier release has no such column).
    const has = this.db.statement("SELECT 1 AS x FROM pragma_table_info(?) WHERE name = 'holder'").get(this.claims) !== undefined;
    if (!has) this.db.exec(`ALTER TABLE ${this.claims} ADD COLUMN holder TEXT`);
  }

  /** Stores a record; a second record with the same commandUuid is CONFLICT (the audit trail is append-only). */
  async record(rec: CommandRecord): Promise<void> {
    // Its own transaction: the record and the removal of the command's claim are one write.
    const db = this.ready();
    try {
      db.writeTransaction(() => this.recordSync(rec));
    } catch (e) {
      throw isMnemeError(e) ? e : toStoreError(e, "record");
    }
  }

  /**
   * @internal Writes a record synchronously: inside the event repository's
   * write transaction when the two share a connection, so a command's events
   * and its record commit together. The caller holds a write transaction.
   */
  recordSync(rec: CommandRecord): void {
    const json = validateCommandRecord(rec);
    const db = this.ready();
    try {
      db.statement(
        `INSERT INTO ${this.table} (command_uuid, domain, name, tenant_uuid, status, created_at, record) VALUES (?, ?, ?, ?, ?, ?, ?)`,
      ).run(rec.commandUuid, rec.domain, rec.name, rec.tenantUuid, rec.status, rec.createdAt, json);
      // The record resolves the command's claim (whoever holds it), in the same transaction.
      db.statement(`DELETE FROM ${this.claims} WHERE command_uuid = ?`).run(rec.commandUuid);
    } catch (e) {
      if (sqliteCode(e)?.startsWith("SQLITE_CONSTRAINT") === true) {
        throw new MnemeError("CONFLICT", `command ${rec.commandUuid} is already recorded`, { cause: e });
      }
      throw toStoreError(e, "record");
    }
  }

  /**
   * Claims a commandUuid (see CommandStore.claim) in one write transaction.
   * Lease ends are ms of the local clock (instances sharing a file share a machine).
   */
  async claim(commandUuid: string, claimant: CommandClaimant): Promise<CommandClaim> {
    const owner = checkClaimArgs(commandUuid, claimant.owner, claimant.leaseMs);
    const db = this.ready();
    try {
      return db.writeTransaction((): CommandClaim => {
        const rec = db.statement(`SELECT status, record FROM ${this.table} WHERE command_uuid = ?`).get(commandUuid) as
          { status: string; record: string } | undefined;
        if (rec?.status === "succeeded") return { outcome: "recorded", record: JSON.parse(rec.record) as CommandRecord };
        const now = Date.now();
        const held = db.statement(`SELECT owner, expires_at, holder FROM ${this.claims} WHERE command_uuid = ?`).get(commandUuid) as
          { owner: string; expires_at: number; holder: string | null } | undefined;
        // A live claim of another owner holds, unless its process is gone (killed, crashed): then it costs no wait.
        if (held !== undefined && held.owner !== owner && held.expires_at >= now && !(held.holder !== null && ownerIsGone(held.holder))) {
          return { outcome: "held", owner: held.owner, expiresAt: held.expires_at };
        }
        // A failed or denied attempt is not an outcome: this one records its own.
        if (rec !== undefined) db.statement(`DELETE FROM ${this.table} WHERE command_uuid = ?`).run(commandUuid);
        db.statement(
          `INSERT OR REPLACE INTO ${this.claims} (command_uuid, owner, expires_at, domain, name, tenant_uuid, holder) VALUES (?, ?, ?, ?, ?, ?, ?)`,
        ).run(commandUuid, owner, now + claimant.leaseMs, claimant.domain, claimant.name, claimant.tenantUuid, this.holder);
        return { outcome: "claimed" };
      });
    } catch (e) {
      throw toStoreError(e, "claim");
    }
  }

  async renewClaim(commandUuid: string, owner: string, leaseMs: number): Promise<boolean> {
    checkClaimArgs(commandUuid, owner, leaseMs);
    try {
      return (
        this.ready()
          .statement(`UPDATE ${this.claims} SET expires_at = ? WHERE command_uuid = ? AND owner = ?`)
          .run(Date.now() + leaseMs, commandUuid, owner).changes > 0
      );
    } catch (e) {
      throw toStoreError(e, "renewClaim");
    }
  }

  async releaseClaim(commandUuid: string, owner: string): Promise<void> {
    checkClaimArgs(commandUuid, owner, 1);
    try {
      this.ready().statement(`DELETE FROM ${this.claims} WHERE command_uuid = ? AND owner = ?`).run(commandUuid, owner);
    } catch (e) {
      throw toStoreError(e, "releaseClaim");
    }
  }

  async get(commandUuid: string): Promise<CommandRecord | undefined> {
    if (typeof commandUuid !== "string") throw new MnemeError("INVALID_REQUEST", "get: commandUuid must be a string");
    try {
      const row = this.ready().statement(`SELECT record FROM ${this.table} WHERE command_uuid = ?`).get(commandUuid) as
        { record: string } | undefined;
      return row === undefined ? undefined : (JSON.parse(row.record) as CommandRecord);
    } catch (e) {
      throw toStoreError(e, "get");
    }
  }

  async list(opts: CommandListOptions = {}): Promise<StorePage<CommandRecord>> {
    const limit = pageLimit(opts.limit);
    const after = decodeCursor(opts.cursor, ["number", "string"]);
    const where: string[] = [];
    const params: unknown[] = [];
    if (after !== undefined) {
      where.push("(created_at, command_uuid) > (?, ?)");
      params.push(after[0], after[1]);
    }
    for (const [column, value] of stringFilters(opts, COMMAND_LIST_FILTERS)) {
      where.push(`${column} = ?`);
      params.push(value);
    }
    const sql = `SELECT record FROM ${this.table}${where.length > 0 ? ` WHERE ${where.join(" AND ")}` : ""}
                 ORDER BY created_at, command_uuid LIMIT ?`;
    let rows: [string][];
    try {
      // One row more than asked tells whether a next page exists.
      rows = this.ready()
        .rawStatement(sql)
        .all(...params, limit + 1) as [string][];
    } catch (e) {
      throw toStoreError(e, "list");
    }
    const items = rows.slice(0, limit).map((r) => JSON.parse(r[0]) as CommandRecord);
    const last = items[items.length - 1];
    return rows.length > limit && last !== undefined ? { items, nextCursor: encodeCursor([last.createdAt, last.commandUuid]) } : { items };
  }

  /** For the personal-data migration only: see CommandStore.sealRecordPayloads. One write transaction. */
  async sealRecordPayloads(rewrites: readonly PayloadSealing[]): Promise<number> {
    checkPayloadSealing("sealRecordPayloads", rewrites, { redacts: true });
    const db = this.ready();
    try {
      return db.writeTransaction(() => {
        let n = 0;
        for (const r of rewrites) {
          const row = db.statement(`SELECT record FROM ${this.table} WHERE command_uuid = ?`).get(r.id) as { record: string } | undefined;
          if (row === undefined) continue;
          const rec = JSON.parse(row.record) as CommandRecord;
          if (!jsonEqual(rec.payload, r.stored)) continue;
          db.statement(`UPDATE ${this.table} SET record = ? WHERE command_uuid = ?`).run(
            JSON.stringify({ ...rec, payload: r.sealed }),
            r.id,
          );
          n++;
        }
        return n;
      });
    } catch (e) {
      throw isMnemeError(e) ? e : toStoreError(e, "sealRecordPayloads");
    }
  }

  async delete(commandUuid: string): Promise<boolean> {
    if (typeof commandUuid !== "string") throw new MnemeError("INVALID_REQUEST", "delete: commandUuid must be a string");
    return this.change("delete", `DELETE FROM ${this.table} WHERE command_uuid = ?`, commandUuid) > 0;
  }

  async info(): Promise<StoreInfo> {
    return this.tableInfo(this.table, "info");
  }
}
