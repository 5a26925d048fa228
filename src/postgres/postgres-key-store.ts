import { nowNs } from "../model/clock.js";
import { isMnemeError } from "../model/errors.js";
import type { KeyStore, NewSubjectKey, SubjectKey } from "../store/key-store.js";
import { keyIdTaken, subjectKeyOf, validateKeyIds, validateKeyStoreId, validateNewSubjectKey } from "../store/key-store.js";
import type { StoreInfo } from "../store/store-info.js";
import { PostgresStoreBase } from "./postgres-store-base.js";

interface KeyRow {
  subject: string;
  key_id: string;
  key: Uint8Array;
  created_at: string;
}

/**
 * The KeyStore on Postgres, in the schema of the events: the live keys (one
 * per subject, `subject` the primary key) and the ids of forgotten keys (ids
 * only), so a key id is never reused. `ensureKey` is one
 * `INSERT ... ON CONFLICT (subject) DO NOTHING`: of concurrent candidates from
 * any number of instances the first committed wins, and the others read it
 * back. `forget` moves the ids and deletes the rows in one statement.
 *
 * Postgres keeps a deleted row's bytes in the table file until VACUUM reuses
 * the space, and in its write-ahead log and backups; see docs/privacy.md.
 */
export class PostgresKeyStore extends PostgresStoreBase implements KeyStore {
  private readonly keys = `${this.qschema}.subject_keys`;
  private readonly forgotten = `${this.qschema}.forgotten_keys`;
  private initialised: Promise<void> | undefined;

  /** Creates the schema and tables; idempotent, safe to run from several instances at once. Every other call runs it first. */
  init(): Promise<void> {
    return this.track(() => this.ensureTables());
  }

  async ensureKey(candidate: NewSubjectKey): Promise<SubjectKey> {
    return this.track(async () => {
      const k = validateNewSubjectKey(candidate, nowNs);
      await this.ensureTables();
      // A forget may delete the winner between the insert and the read: then try again (a forget is rare; three rounds suffice).
      for (let round = 0; round < 3; round++) {
        const inserted = await this.query<KeyRow>(
          `INSERT INTO ${this.keys} (subject, key_id, key, created_at)
           SELECT $1, $2, $3, $4 WHERE NOT EXISTS (SELECT 1 FROM ${this.forgotten} WHERE key_id = $2)
           ON CONFLICT (subject) DO NOTHING
           RETURNING subject, key_id, key, created_at::text AS created_at`,
          [k.subject, k.keyId, Buffer.from(k.key), k.createdAt],
          "key store ensureKey",
        ).catch((e: unknown) => {
          // The key id is live for another subject.
          if (isMnemeError(e, "CONFLICT")) throw keyIdTaken(k.keyId);
          throw e;
        });
        const row = inserted.rows[0] ?? (await this.liveRow(k.subject));
        if (row !== undefined) {
          const found = subjectKeyOf(row.subject, row.key_id, row.key, row.created_at);
          if (found !== undefined) return found;
        }
        const used = await this.query(`SELECT 1 FROM ${this.forgotten} WHERE key_id = $1`, [k.keyId], "key store ensureKey");
        if ((used.rowCount ?? 0) > 0) throw keyIdTaken(k.keyId);
      }
      throw keyIdTaken(k.keyId);
    });
  }

  async keyOf(subject: string): Promise<SubjectKey | undefined> {
    return this.track(async () => {
      validateKeyStoreId("subject", subject);
      await this.ensureTables();
      const row = await this.liveRow(subject);
      return row === undefined ? undefined : subjectKeyOf(row.subject, row.key_id, row.key, row.created_at);
    });
  }

  async keysById(keyIds: readonly string[]): Promise<Map<string, SubjectKey>> {
    return this.track(async () => {
      const ids = validateKeyIds(keyIds);
      const out = new Map<string, SubjectKey>();
      if (ids.length === 0) return out;
      await this.ensureTables();
      const res = await this.query<KeyRow>(
        `SELECT subject, key_id, key, created_at::text AS created_at FROM ${this.keys} WHERE key_id = ANY($1::text[])`,
        [ids],
        "key store keysById",
      );
      for (const row of res.rows) {
        const found = subjectKeyOf(row.subject, row.key_id, row.key, row.created_at);
        if (found !== undefined) out.set(found.keyId, found);
      }
      return out;
    });
  }

  async forget(subject: string): Promise<number> {
    return this.track(async () => {
      validateKeyStoreId("subject", subject);
      await this.ensureTables();
      const res = await this.query<{ n: string }>(
        `WITH gone AS (DELETE FROM ${this.keys} WHERE subject = $1 RETURNING key_id),
              kept AS (INSERT INTO ${this.forgotten} (key_id, forgotten_at) SELECT key_id, $2 FROM gone ON CONFLICT (key_id) DO NOTHING)
         SELECT count(*)::text AS n FROM gone`,
        [subject, nowNs()],
        "key store forget",
      );
      return Number(res.rows[0]?.n ?? 0);
    });
  }

  async info(): Promise<StoreInfo> {
    return this.track(async () => {
      await this.ensureTables();
      return this.tableInfo(this.keys, "key store info");
    });
  }

  private async liveRow(subject: string): Promise<KeyRow | undefined> {
    const res = await this.query<KeyRow>(
      `SELECT subject, key_id, key, created_at::text AS created_at FROM ${this.keys} WHERE subject = $1`,
      [subject],
      "key store keyOf",
    );
    return res.rows[0];
  }

  private ensureTables(): Promise<void> {
    const run = (this.initialised ??= this.runDdl([
      `CREATE TABLE IF NOT EXISTS ${this.keys} (
          subject text PRIMARY KEY,
          key_id text NOT NULL UNIQUE,
          key bytea NOT NULL CHECK (octet_length(key) = 32),
          created_at bigint NOT NULL
        )`,
      `CREATE TABLE IF NOT EXISTS ${this.forgotten} (
          key_id text PRIMARY KEY,
          forgotten_at bigint NOT NULL
        )`,
    ]).then(() => undefined));
    // A failed creation (e.g. the database was down) is tried again by the next call.
    run.catch(() => {
      if (this.initialised === run) this.initialised = undefined;
    });
    return run;
  }
}
