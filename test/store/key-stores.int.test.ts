/**
 * The KeyStore on every backend: the conformance suite on memory, SQLite
 * (alone and in createSqliteBackends' file) and Postgres (alone and in
 * createPostgresBackends' schema), a store that brings forgotten keys back
 * (broken on purpose: the suite must catch it), ensureKey racing across
 * connections and pools, and the bytes of a forgotten key gone from the
 * SQLite file and its -wal file.
 */
import { randomBytes, randomUUID } from "node:crypto";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { postgresScratch } from "../support/postgres-scratch.js";
import { SQLITE_DRIVERS } from "../support/sqlite-drivers.js";
import { MemoryKeyStore } from "../../src/memory/memory-key-store.js";
import { createPostgresBackends, PostgresKeyStore } from "../../src/postgres/index.js";
import { createSqliteBackends, SqliteKeyStore } from "../../src/sqlite/index.js";
import type { KeyStore, NewSubjectKey, SubjectKey } from "../../src/store/key-store.js";
import { validateKeyIds, validateKeyStoreId, validateNewSubjectKey } from "../../src/store/key-store.js";
import { storeClosed } from "../../src/store/store-closed.js";
import { describeKeyStoreContract } from "../../src/testing/key-store-contract.js";

const candidate = (subject: string): NewSubjectKey => ({ subject, keyId: randomUUID(), key: new Uint8Array(randomBytes(32)) });

// --- memory -----------------------------------------------------------------------------------

describeKeyStoreContract("MemoryKeyStore", async () => new MemoryKeyStore());

/** Broken on purpose: forget keeps nothing of the key ids, so a forgotten key can be stored again. */
class ForgetfulKeyStore implements KeyStore {
  readonly #keys = new Map<string, SubjectKey>();
  #closed = false;
  async init(): Promise<void> {}
  async ensureKey(c: NewSubjectKey): Promise<SubjectKey> {
    this.#open();
    const k = validateNewSubjectKey(c, () => Date.now() * 1e6);
    const live = this.#keys.get(k.subject) ?? { ...k };
    this.#keys.set(k.subject, live);
    return { ...live, key: Uint8Array.from(live.key) };
  }
  async keyOf(subject: string): Promise<SubjectKey | undefined> {
    this.#open();
    validateKeyStoreId("subject", subject);
    const k = this.#keys.get(subject);
    return k === undefined ? undefined : { ...k, key: Uint8Array.from(k.key) };
  }
  async keysById(ids: readonly string[]): Promise<Map<string, SubjectKey>> {
    this.#open();
    const want = new Set(validateKeyIds(ids));
    return new Map([...this.#keys.values()].filter((k) => want.has(k.keyId)).map((k) => [k.keyId, { ...k, key: Uint8Array.from(k.key) }]));
  }
  async forget(subject: string): Promise<number> {
    this.#open();
    validateKeyStoreId("subject", subject);
    return this.#keys.delete(subject) ? 1 : 0;
  }
  async info() {
    this.#open();
    const last = Math.max(0, ...[...this.#keys.values()].map((k) => k.createdAt));
    return { storeType: "broken", numItems: this.#keys.size, lastItemCreatedAt: last, connectionInfo: "memory" };
  }
  async close(): Promise<void> {
    this.#closed = true;
  }
  #open(): void {
    if (this.#closed) throw storeClosed("ForgetfulKeyStore");
  }
}
describeKeyStoreContract("a store that lets a forgotten key come back (broken on purpose)", async () => new ForgetfulKeyStore(), {
  expectFailures: [
    {
      reason: "a forgotten key id is stored again",
      tests: ["after forget a new candidate makes a new key; the forgotten one never comes back"],
    },
    {
      reason: "a key id live for one subject is taken by another",
      tests: ["a key id live for one subject is refused for another (CONFLICT), and nothing is written"],
    },
  ],
});

// --- SQLite -----------------------------------------------------------------------------------

const dir = mkdtempSync(join(tmpdir(), "mneme-keys-"));
let fileNo = 0;
const newFile = (): string => join(dir, `k${++fileNo}.db`);

// On each Node.js SQLite driver (test/support/sqlite-drivers.ts).
for (const driver of SQLITE_DRIVERS) {
  describeKeyStoreContract(`SqliteKeyStore (${driver})`, async () => new SqliteKeyStore({ filename: newFile(), driver }));
  describeKeyStoreContract(`createSqliteBackends().keyStore (${driver})`, async () => {
    const b = createSqliteBackends({ filename: newFile(), driver });
    // The others are closed at once, so the suite's close() of the key store is the one that closes the file.
    await Promise.all([b.eventRepository, b.commandStore, b.logStore, b.readmodelStoreBackend, b.snapshotStore].map((s) => s.close()));
    return b.keyStore;
  });
}

/** The bytes of the database file and its -wal file. */
function fileBytes(filename: string): Buffer {
  return Buffer.concat([filename, `${filename}-wal`].filter((f) => existsSync(f)).map((f) => readFileSync(f)));
}

describe("SqliteKeyStore", () => {
  it("lives in the events' file with the backends' table prefix and survives a reopen", async () => {
    const filename = newFile();
    const b = createSqliteBackends({ filename, tablePrefix: "app_" });
    await b.eventRepository.append([{ domain: "Todo", name: "TodoCreated", aggregateUuid: "a", payload: {} }]);
    const made = await b.keyStore.ensureKey(candidate("ann"));
    await b.close();
    const again = createSqliteBackends({ filename, tablePrefix: "app_" });
    expect((await again.keyStore.keyOf("ann"))?.keyId).toBe(made.keyId);
    const tables = (again.eventRepository as unknown as { db: { driver: { prepare(s: string): { all(): { name: string }[] } } } }).db.driver
      .prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'app_%' ORDER BY name")
      .all()
      .map((r) => r.name);
    expect(tables).toEqual(expect.arrayContaining(["app_events", "app_subject_keys", "app_forgotten_keys"]));
    await again.close();
  });

  it("after forget the key's bytes are in neither the database file nor its -wal file", async () => {
    const filename = newFile();
    const b = createSqliteBackends({ filename });
    const keys: SubjectKey[] = [];
    for (let i = 0; i < 50; i++) keys.push(await b.keyStore.ensureKey(candidate(`s${i}`)));
    const target = keys[17] as SubjectKey;
    const bytes = Buffer.from(target.key);
    expect(fileBytes(filename).includes(bytes)).toBe(true);
    expect(await b.keyStore.forget("s17")).toBe(1);
    expect(fileBytes(filename).includes(bytes)).toBe(false);
    // The other keys are still there.
    expect(fileBytes(filename).includes(Buffer.from((keys[18] as SubjectKey).key))).toBe(true);
    await b.close();
    expect(fileBytes(filename).includes(bytes)).toBe(false);
  });

  it("two connections on one file racing ensureKey agree on one key per subject", async () => {
    const filename = newFile();
    const stores = [new SqliteKeyStore({ filename }), new SqliteKeyStore({ filename })];
    await Promise.all(stores.map((s) => s.init()));
    for (let i = 0; i < 20; i++) {
      const got = await Promise.all([...stores, ...stores].map((s) => s.ensureKey(candidate(`r${i}`))));
      expect(new Set(got.map((k) => k.keyId)).size).toBe(1);
    }
    await Promise.all(stores.map((s) => s.close()));
  });
});

// --- Postgres ---------------------------------------------------------------------------------

const { pool, newPool, newSchema, inSchema } = postgresScratch("mneme_keys");
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const postgresContract = (make: (schema: string) => KeyStore) => inSchema<KeyStore>(make);
{
  const c = postgresContract((schema) => new PostgresKeyStore({ pool, schema }));
  describeKeyStoreContract("PostgresKeyStore", c.factory, c.opts);
}
{
  const c = postgresContract((schema) => {
    const b = createPostgresBackends({ pool, schema });
    for (const s of [b.eventRepository, b.commandStore, b.logStore, b.readmodelStoreBackend, b.snapshotStore]) void s.close();
    return b.keyStore;
  });
  describeKeyStoreContract("createPostgresBackends().keyStore", c.factory, c.opts);
}

describe("PostgresKeyStore", () => {
  it("lives in the events' schema", async () => {
    const schema = newSchema();
    const b = createPostgresBackends({ pool, schema });
    await b.eventRepository.init();
    await b.keyStore.ensureKey(candidate("ann"));
    const { rows } = await pool.query<{ table_name: string }>(
      "SELECT table_name FROM information_schema.tables WHERE table_schema = $1 ORDER BY 1",
      [schema],
    );
    expect(rows.map((r) => r.table_name)).toEqual(expect.arrayContaining(["events", "subject_keys", "forgotten_keys"]));
    await b.close();
  });

  it("three pools racing ensureKey and forget agree on one live key per subject; forgotten ids stay dead", async () => {
    const schema = newSchema();
    const stores = [newPool(3), newPool(3), newPool(3)].map((p) => new PostgresKeyStore({ pool: p, schema }));
    await Promise.all(stores.map((s) => s.init()));
    for (let i = 0; i < 15; i++) {
      const subject = `r${i}`;
      const got = await Promise.all(stores.flatMap((s) => [s.ensureKey(candidate(subject)), s.ensureKey(candidate(subject))]));
      expect(new Set(got.map((k) => k.keyId)).size).toBe(1);
      const first = got[0] as SubjectKey;
      const [forgotten, ...after] = await Promise.all([
        (stores[0] as PostgresKeyStore).forget(subject),
        ...stores.map((s) => s.ensureKey(candidate(subject))),
      ]);
      expect(forgotten).toBeGreaterThanOrEqual(1);
      expect(after.every((k) => k.keyId !== first.keyId || forgotten >= 1)).toBe(true);
      expect((await (stores[1] as PostgresKeyStore).keysById([first.keyId])).size).toBe(0);
      const live = await (stores[2] as PostgresKeyStore).keyOf(subject);
      if (live !== undefined) expect(live.keyId).not.toBe(first.keyId);
    }
    await Promise.all(stores.map((s) => s.close()));
  });

  it("after forget a dump of the schema's tables holds no byte of the key", async () => {
    const schema = newSchema();
    const store = new PostgresKeyStore({ pool, schema });
    const made = await store.ensureKey(candidate("ann"));
    const hex = Buffer.from(made.key).toString("hex");
    const dump = async (): Promise<string> =>
      JSON.stringify([
        (await pool.query(`SELECT t::text FROM "${schema}".subject_keys t`)).rows,
        (await pool.query(`SELECT t::text FROM "${schema}".forgotten_keys t`)).rows,
      ]);
    expect(await dump()).toContain(hex);
    await store.forget("ann");
    const after = await dump();
    expect(after).not.toContain(hex);
    expect(after).toContain(made.keyId);
    await store.close();
  });
});
