import type { NewSnapshotRecord, SnapshotRecord, SnapshotStore } from "../store/snapshot-store.js";
import {
  isStoredVersion,
  parseStoredState,
  validateSnapshot,
  validateSnapshotDelete,
  validateSnapshotKey,
} from "../store/snapshot-store.js";
import type { StoreInfo } from "../store/store-info.js";
import { PostgresStoreBase } from "./postgres-store-base.js";

/** A snapshot row with its numbers and its state as text: parsed here, so a damaged row is told apart instead of failing the query. */
interface SnapshotRow {
  tenant_uuid: string;
  version: string;
  state: string;
  created_at: string;
  digest: string | null;
}

/**
 * The SnapshotStore on Postgres, in the schema of the events: one row per
 * (domain, aggregate, aggregateUuid, snapshotVersion), written by one
 * `INSERT ... ON CONFLICT DO UPDATE ... WHERE excluded.version > version`,
 * so of concurrent saves from any number of instances the highest version
 * wins and a save never waits for more than that row's lock. A row that
 * cannot be read back (a number beyond a double in the state, a version above
 * 2^53 - 1) is deleted by the read that finds it.
 */
export class PostgresSnapshotStore extends PostgresStoreBase implements SnapshotStore {
  private readonly table = `${this.qschema}.snapshots`;

  /** Creates the schema and table; idempotent, safe to run from several instances at once. */
  async init(): Promise<void> {
    await this.track(() =>
      this.runDdl([
        `CREATE TABLE IF NOT EXISTS ${this.table} (
            domain text NOT NULL,
            aggregate text NOT NULL,
            aggregate_uuid text NOT NULL,
            snapshot_version bigint NOT NULL CHECK (snapshot_version >= 1),
            version bigint NOT NULL CHECK (version >= 1),
            tenant_uuid text NOT NULL,
            state jsonb NOT NULL,
            created_at bigint NOT NULL,
            PRIMARY KEY (domain, aggregate, aggregate_uuid, snapshot_version)
          )`,
        // A table made before digests existed gains the column; its rows have none.
        `ALTER TABLE ${this.table} ADD COLUMN IF NOT EXISTS digest text`,
      ]),
    );
  }

  async save<S>(snapshot: NewSnapshotRecord<S>): Promise<boolean> {
    return this.track(async () => {
      const s = validateSnapshot(snapshot);
      const res = await this.query(
        `INSERT INTO ${this.table} AS t (domain, aggregate, aggregate_uuid, snapshot_version, version, tenant_uuid, state, created_at, digest)
         VALUES ($1, $2, $3, $4, $5, $6, $7::jsonb, $8, $9)
         ON CONFLICT (domain, aggregate, aggregate_uuid, snapshot_version) DO UPDATE SET
           version = excluded.version, tenant_uuid = excluded.tenant_uuid, state = excluded.state, created_at = excluded.created_at,
           digest = excluded.digest
         WHERE excluded.version > t.version`,
        [s.domain, s.aggregate, s.aggregateUuid, s.snapshotVersion, s.version, s.tenantUuid, s.stateJson, s.createdAt, s.digest],
        "snapshot save",
      );
      return (res.rowCount ?? 0) > 0;
    });
  }

  async latest<S = unknown>(
    domain: string,
    aggregate: string,
    aggregateUuid: string,
    snapshotVersion: number,
  ): Promise<SnapshotRecord<S> | undefined> {
    return this.track(async () => {
      validateSnapshotKey(domain, aggregate, aggregateUuid, snapshotVersion);
      const key = [domain, aggregate, aggregateUuid, snapshotVersion];
      const res = await this.query<SnapshotRow>(
        `SELECT tenant_uuid, version::text, state::text, created_at::text, digest FROM ${this.table}
         WHERE domain = $1 AND aggregate = $2 AND aggregate_uuid = $3 AND snapshot_version = $4`,
        key,
        "snapshot latest",
      );
      const row = res.rows[0];
      if (row === undefined) return undefined;
      const version = Number(row.version);
      const parsed = parseStoredState(row.state);
      if (parsed === undefined || !isStoredVersion(version)) {
        // Damaged: delete exactly the row as read; a concurrent save has a higher version and stays.
        await this.query(
          `DELETE FROM ${this.table} WHERE domain = $1 AND aggregate = $2 AND aggregate_uuid = $3 AND snapshot_version = $4
           AND version = $5::bigint AND created_at = $6::bigint`,
          [...key, row.version, row.created_at],
          "snapshot latest (deleting a damaged snapshot)",
        );
        return undefined;
      }
      const record: SnapshotRecord<S> = {
        tenantUuid: row.tenant_uuid,
        domain,
        aggregate,
        aggregateUuid,
        version,
        snapshotVersion,
        state: parsed.state as S,
        createdAt: Number(row.created_at),
      };
      if (row.digest !== null) record.digest = row.digest;
      return record;
    });
  }

  async delete(domain: string, aggregate: string, aggregateUuid: string): Promise<number> {
    return this.track(async () => {
      validateSnapshotDelete(domain, aggregate, aggregateUuid);
      const res = await this.query(
        `DELETE FROM ${this.table} WHERE domain = $1 AND aggregate = $2 AND aggregate_uuid = $3`,
        [domain, aggregate, aggregateUuid],
        "snapshot delete",
      );
      return res.rowCount ?? 0;
    });
  }

  async deleteAggregateType(domain: string, aggregate: string, opts?: { exceptSnapshotVersion?: number }): Promise<number> {
    return this.track(async () => {
      validateSnapshotDelete(domain, aggregate, undefined, opts);
      const keep = opts?.exceptSnapshotVersion;
      const res =
        keep === undefined
          ? await this.query(`DELETE FROM ${this.table} WHERE domain = $1 AND aggregate = $2`, [domain, aggregate], "snapshot delete")
          : await this.query(
              `DELETE FROM ${this.table} WHERE domain = $1 AND aggregate = $2 AND snapshot_version <> $3`,
              [domain, aggregate, keep],
              "snapshot delete",
            );
      return res.rowCount ?? 0;
    });
  }

  async clear(): Promise<number> {
    return this.track(async () => {
      const res = await this.query(`DELETE FROM ${this.table}`, [], "snapshot clear");
      return res.rowCount ?? 0;
    });
  }

  async info(): Promise<StoreInfo> {
    return this.tableInfo(this.table, "snapshot info");
  }
}
