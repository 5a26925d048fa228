import { nowNs } from "../model/clock.js";
import type { KeyStore, NewSubjectKey, SubjectKey } from "../store/key-store.js";
import { keyIdTaken, subjectKeyOf, validateKeyIds, validateKeyStoreId, validateNewSubjectKey } from "../store/key-store.js";
import type { StoreInfo } from "../store/store-info.js";
import { toStoreError } from "./sqlite-errors.js";
import { SqliteStoreBase } from "./sqlite-store-base.js";

/** subject, key_id, key, created_at */
type KeyRow = [unknown, unknown, unknown, unknown];

/** Key ids per `keysById` statement: well below SQLite's bound on parameters. */
const IDS_PER_STATEMENT = 500;

/**
 * The KeyStore in two SQLite tables (in the events' file when made by
 * createSqliteBackends): the live keys, one per subject, and the ids of
 * forgotten keys (ids only, no subject and no bytes), so a key id is never
 * reused. Each write runs in one `BEGIN IMMEDIATE`, so the first candidate of
 * a subject wins also between processes sharing the file.
 *
 * The store turns `secure_delete` on for its connection (SQLite then
 * overwrites freed bytes with zeros, also the stale copies a page split leaves),
 * and `forget` checkpoints the write-ahead log (TRUNCATE) after its delete, so a
 * forgotten key's bytes are gone from the database file and its -wal file, not
 * only unlinked. When another connection holds a read open, the checkpoint cannot
 * truncate; the old frames are then overwritten by later checkpoints.
 */
export class SqliteKeyStore extends SqliteStoreBase implements KeyStore {
  private readonly keys = `${this.prefix}subject_keys`;
  private readonly forgotten = `${this.prefix}forgotten_keys`;

  protected createTables(): void {
    // For the whole connection, from the first key on: a page split copies cells and can leave stale
    // copies of a key in a page's free space; with secure_delete every freed byte is zeroed.
    this.db.driver.pragma("secure_delete = ON");
    this.db.exec(`
      CREATE TABLE IF NOT EXISTS ${this.keys} (
        subject TEXT NOT NULL PRIMARY KEY,
        key_id TEXT NOT NULL UNIQUE,
        key BLOB NOT NULL,
        created_at INTEGER NOT NULL
      );
      CREATE TABLE IF NOT EXISTS ${this.forgotten} (
        key_id TEXT NOT NULL PRIMARY KEY,
        forgotten_at INTEGER NOT NULL
      );
    `);
  }

  async ensureKey(candidate: NewSubjectKey): Promise<SubjectKey> {
    const k = validateNewSubjectKey(candidate, nowNs);
    try {
      const db = this.ready();
      // Most calls find the key: a plain read, no write lock.
      const found = this.liveKey(k.subject);
      if (found !== undefined) return found;
      return db.writeTransaction(() => {
        const live = this.liveKey(k.subject);
        if (live !== undefined) return live;
        const used = db
          .rawStatement(`SELECT 1 FROM ${this.keys} WHERE key_id = ? UNION ALL SELECT 1 FROM ${this.forgotten} WHERE key_id = ?`)
          .get(k.keyId, k.keyId);
        if (used !== undefined) throw keyIdTaken(k.keyId);
        db.statement(`INSERT INTO ${this.keys} (subject, key_id, key, created_at) VALUES (?, ?, ?, ?)`).run(
          k.subject,
          k.keyId,
          Buffer.from(k.key),
          k.createdAt,
        );
        return { subject: k.subject, keyId: k.keyId, key: Uint8Array.from(k.key), createdAt: k.createdAt };
      });
    } catch (e) {
      throw toStoreError(e, "key store ensureKey");
    }
  }

  async keyOf(subject: string): Promise<SubjectKey | undefined> {
    validateKeyStoreId("subject", subject);
    try {
      this.ready();
      return this.liveKey(subject);
    } catch (e) {
      throw toStoreError(e, "key store keyOf");
    }
  }

  async keysById(keyIds: readonly string[]): Promise<Map<string, SubjectKey>> {
    const ids = validateKeyIds(keyIds);
    const out = new Map<string, SubjectKey>();
    try {
      const db = this.ready();
      for (let i = 0; i < ids.length; i += IDS_PER_STATEMENT) {
        const part = ids.slice(i, i + IDS_PER_STATEMENT);
        const rows = db
          .rawStatement(`SELECT subject, key_id, key, created_at FROM ${this.keys} WHERE key_id IN (${part.map(() => "?").join(", ")})`)
          .all(...part) as KeyRow[];
        for (const [subject, keyId, key, createdAt] of rows) {
          const found = subjectKeyOf(subject, keyId, key, createdAt);
          if (found !== undefined) out.set(found.keyId, found);
        }
      }
      return out;
    } catch (e) {
      throw toStoreError(e, "key store keysById");
    }
  }

  async forget(subject: string): Promise<number> {
    validateKeyStoreId("subject", subject);
    try {
      const db = this.ready();
      const deleted = db.writeTransaction(() => {
        const ids = db.rawStatement(`SELECT key_id FROM ${this.keys} WHERE subject = ?`).all(subject) as [string][];
        const now = nowNs();
        for (const [keyId] of ids) {
          db.statement(`INSERT OR IGNORE INTO ${this.forgotten} (key_id, forgotten_at) VALUES (?, ?)`).run(keyId, now);
        }
        return db.statement(`DELETE FROM ${this.keys} WHERE subject = ?`).run(subject).changes;
      });
      // Outside a transaction only: inside one (a caller's) the pages are not final yet.
      if (deleted > 0 && !db.driver.inTransaction) db.driver.pragma("wal_checkpoint(TRUNCATE)");
      return deleted;
    } catch (e) {
      throw toStoreError(e, "key store forget");
    }
  }

  async info(): Promise<StoreInfo> {
    return this.tableInfo(this.keys, "key store info");
  }

  private liveKey(subject: string): SubjectKey | undefined {
    const row = this.db.rawStatement(`SELECT subject, key_id, key, created_at FROM ${this.keys} WHERE subject = ?`).get(subject) as
      KeyRow | undefined;
    return row === undefined ? undefined : subjectKeyOf(...row);
  }
}
