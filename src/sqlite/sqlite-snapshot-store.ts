import type { NewSnapshotRecord, SnapshotRecord, SnapshotStore } from "../store/snapshot-store.js";
import {
  isStoredVersion,
  parseStoredState,
  validateSnapshot,
  validateSnapshotDelete,
  validateSnapshotKey,
} from "../store/snapshot-store.js";
import type { StoreInfo } from "../store/store-info.js";
import { toStoreError } from "./sqlite-errors.js";
import { SqliteStoreBase } from "./sqlite-store-base.js";

/** rowid, tenant_uuid, version, state, created_at, digest: read as stored, since a damaged row may hold anything. */
type SnapshotRow = [number, unknown, unknown, unknown, unknown, unknown];

/**
 * The SnapshotStore in one SQLite table (in the events' file when made by
 * createSqliteBackends): one row per (domain, aggregate, aggregateUuid,
 * snapshotVersion), written by one upsert that replaces a row only with a
 * higher version, so the highest version wins also between processes sharing
 * the file. A row that cannot be read back is deleted by the read that finds it.
 */
export class SqliteSnapshotStore extends SqliteStoreBase implements SnapshotStore {
  private readonly table = `${this.prefix}snapshots`;

  protected createTables(): void {
    this.db.exec(`
      CREATE TABLE IF NOT EXISTS ${this.table} (
        domain TEXT NOT NULL,
        aggregate TEXT NOT NULL,
        aggregate_uuid TEXT NOT NULL,
        snapshot_version INTEGER NOT NULL,
        version INTEGER NOT NULL,
        tenant_uuid TEXT NOT NULL,
        state TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        digest TEXT,
        PRIMARY KEY (domain, aggregate, aggregate_uuid, snapshot_version)
      );
    `);
    // A table made before digests existed gains the column; its rows have none.
    const columns = this.db.statement(`PRAGMA table_info(${this.table})`).all() as { name: string }[];
    if (!columns.some((c) => c.name === "digest")) this.db.exec(`ALTER TABLE ${this.table} ADD COLUMN digest TEXT`);
  }

  async save<S>(snapshot: NewSnapshotRecord<S>): Promise<boolean> {
    const s = validateSnapshot(snapshot);
    try {
      return (
        this.ready()
          .statement(
            `INSERT INTO ${this.table} (domain, aggregate, aggregate_uuid, snapshot_version, version, tenant_uuid, state, created_at, digest)
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
             ON CONFLICT (domain, aggregate, aggregate_uuid, snapshot_version) DO UPDATE SET
               version = excluded.version, tenant_uuid = excluded.tenant_uuid, state = excluded.state, created_at = excluded.created_at,
               digest = excluded.digest
             WHERE excluded.version > ${this.table}.version`,
          )
          .run(s.domain, s.aggregate, s.aggregateUuid, s.snapshotVersion, s.version, s.tenantUuid, s.stateJson, s.createdAt, s.digest)
          .changes > 0
      );
    } catch (e) {
      throw toStoreError(e, "snapshot save");
    }
  }

  async latest<S = unknown>(
    domain: string,
    aggregate: string,
    aggregateUuid: string,
    snapshotVersion: number,
  ): Promise<SnapshotRecord<S> | undefined> {
    validateSnapshotKey(domain, aggregate, aggregateUuid, snapshotVersion);
    try {
      const db = this.ready();
      const row = db
        .rawStatement(
          `SELECT rowid, tenant_uuid, version, state, created_at, digest FROM ${this.table}
           WHERE domain = ? AND aggregate = ? AND aggregate_uuid = ? AND snapshot_version = ?`,
        )
        .get(domain, aggregate, aggregateUuid, snapshotVersion) as SnapshotRow | undefined;
      if (row === undefined) return undefined;
      const [rowid, tenantUuid, version, stateJson, createdAt, digest] = row;
      const parsed = parseStoredState(stateJson);
      if (parsed === undefined || !isStoredVersion(version) || typeof tenantUuid !== "string" || typeof createdAt !== "number") {
        // Damaged: delete exactly this row as read (another process may have replaced it since).
        db.statement(`DELETE FROM ${this.table} WHERE rowid = ? AND version IS ? AND state IS ?`).run(rowid, version, stateJson);
        return undefined;
      }
      const record: SnapshotRecord<S> = {
        tenantUuid,
        domain,
        aggregate,
        aggregateUuid,
        version,
        snapshotVersion,
        state: parsed.state as S,
        createdAt,
      };
      if (typeof digest === "string") record.digest = digest;
      return record;
    } catch (e) {
      throw toStoreError(e, "snapshot latest");
    }
  }

  async delete(domain: string, aggregate: string, aggregateUuid: string): Promise<number> {
    validateSnapshotDelete(domain, aggregate, aggregateUuid);
    const sql = `DELETE FROM ${this.table} WHERE domain = ? AND aggregate = ? AND aggregate_uuid = ?`;
    return this.change("snapshot delete", sql, domain, aggregate, aggregateUuid);
  }

  async deleteAggregateType(domain: string, aggregate: string, opts?: { exceptSnapshotVersion?: number }): Promise<number> {
    validateSnapshotDelete(domain, aggregate, undefined, opts);
    const keep = opts?.exceptSnapshotVersion;
    const what = "snapshot deleteAggregateType";
    return keep === undefined
      ? this.change(what, `DELETE FROM ${this.table} WHERE domain = ? AND aggregate = ?`, domain, aggregate)
      : this.change(
          what,
          `DELETE FROM ${this.table} WHERE domain = ? AND aggregate = ? AND snapshot_version <> ?`,
          domain,
          aggregate,
          keep,
        );
  }

  async clear(): Promise<number> {
    return this.change("snapshot clear", `DELETE FROM ${this.table}`);
  }

  async info(): Promise<StoreInfo> {
    return this.tableInfo(this.table, "snapshot info");
  }
}
