/**
 * The SnapshotStore on every backend: the conformance suite on memory, SQLite
 * (alone and in createSqliteBackends' file) and Postgres (alone and in
 * createPostgresBackends' schema), a deliberately broken store the suite must
 * catch, damaged rows, saves from several connections, a lost Postgres
 * connection, and the snapshot options of `Domain.aggregate`.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { afterAll, describe, expect, it } from "vitest";
import { postgresScratch } from "../support/postgres-scratch.js";
import { MemorySnapshotStore } from "../../src/memory/memory-snapshot-store.js";
import { defineDomain, snapshotOptionsOf } from "../../src/model/domain.js";
import { isMnemeError } from "../../src/model/errors.js";
import type { AggregateType } from "../../src/model/tokens.js";
import { createPostgresBackends, PostgresSnapshotStore, type PgStatement } from "../../src/postgres/index.js";
import { createSqliteBackends, SqliteSnapshotStore } from "../../src/sqlite/index.js";
import type { NewSnapshotRecord, SnapshotRecord, SnapshotStore } from "../../src/store/snapshot-store.js";
import { validateSnapshot, validateSnapshotDelete, validateSnapshotKey } from "../../src/store/snapshot-store.js";
import { storeClosed } from "../../src/store/store-closed.js";
import { describeSnapshotStoreContract } from "../../src/testing/snapshot-store-contract.js";
import { rejection } from "../support/rejections.js";
import { SQLITE_DRIVERS } from "../support/sqlite-drivers.js";

const snap = (uuid: string, version: number, more: Partial<NewSnapshotRecord> = {}): NewSnapshotRecord => ({
  domain: "Todo",
  aggregate: "Todo",
  aggregateUuid: uuid,
  version,
  snapshotVersion: 1,
  state: { at: version },
  ...more,
});

// --- memory -----------------------------------------------------------------------------------

describeSnapshotStoreContract("MemorySnapshotStore", async () => new MemorySnapshotStore());

/** Broken on purpose: the last save wins, whatever its version. The suite must catch it. */
class LastSaveWins implements SnapshotStore {
  readonly #rows = new Map<string, SnapshotRecord>();
  #closed = false;
  async init(): Promise<void> {}
  async save<S>(snapshot: NewSnapshotRecord<S>): Promise<boolean> {
    if (this.#closed) throw storeClosed("LastSaveWins");
    const s = validateSnapshot(snapshot);
    const key = JSON.stringify([s.domain, s.aggregate, s.aggregateUuid, s.snapshotVersion]);
    const { stateJson, digest, ...rest } = s;
    this.#rows.set(key, { ...rest, state: JSON.parse(stateJson) as unknown, ...(digest === null ? {} : { digest }) });
    return true;
  }
  async latest<S>(domain: string, aggregate: string, aggregateUuid: string, snapshotVersion: number) {
    if (this.#closed) throw storeClosed("LastSaveWins");
    validateSnapshotKey(domain, aggregate, aggregateUuid, snapshotVersion);
    const r = this.#rows.get(JSON.stringify([domain, aggregate, aggregateUuid, snapshotVersion]));
    return r === undefined ? undefined : (structuredClone(r) as SnapshotRecord<S>);
  }
  async delete(domain: string, aggregate: string, aggregateUuid: string): Promise<number> {
    validateSnapshotDelete(domain, aggregate, aggregateUuid);
    return this.#deleteWhere((r) => r.domain === domain && r.aggregate === aggregate && r.aggregateUuid === aggregateUuid);
  }
  async deleteAggregateType(domain: string, aggregate: string, opts?: { exceptSnapshotVersion?: number }): Promise<number> {
    validateSnapshotDelete(domain, aggregate, undefined, opts);
    return this.#deleteWhere((r) => r.domain === domain && r.aggregate === aggregate && r.snapshotVersion !== opts?.exceptSnapshotVersion);
  }
  async clear(): Promise<number> {
    return this.#deleteWhere(() => true);
  }
  async info() {
    if (this.#closed) throw storeClosed("LastSaveWins");
    const last = Math.max(0, ...[...this.#rows.values()].map((r) => r.createdAt));
    return { storeType: "broken", numItems: this.#rows.size, lastItemCreatedAt: last, connectionInfo: "memory" };
  }
  async close(): Promise<void> {
    this.#closed = true;
  }
  #deleteWhere(match: (r: SnapshotRecord) => boolean): number {
    if (this.#closed) throw storeClosed("LastSaveWins");
    let n = 0;
    for (const [k, r] of this.#rows) if (match(r) && this.#rows.delete(k)) n++;
    return n;
  }
}
describeSnapshotStoreContract("a store where the last save wins (broken on purpose)", async () => new LastSaveWins(), {
  expectFailures: [
    {
      reason: "the store replaces a snapshot with an older one",
      tests: [
        "a higher version replaces the snapshot; an equal or lower one is dropped and save resolves false",
        "concurrent saves of different versions: the highest version wins, whatever the order",
        "concurrent saves of one version and a higher one from many callers leave the higher one",
        "snapshotVersions are kept apart: each has its own newest snapshot, and latest reads only its own",
      ],
    },
  ],
});

// --- SQLite -----------------------------------------------------------------------------------

const dir = mkdtempSync(join(tmpdir(), "mneme-snapshots-"));
let fileNo = 0;
const newFile = (): string => join(dir, `s${++fileNo}.db`);

// On each Node.js SQLite driver (test/support/sqlite-drivers.ts).
for (const driver of SQLITE_DRIVERS) {
  describeSnapshotStoreContract(`SqliteSnapshotStore (${driver})`, async () => new SqliteSnapshotStore({ filename: newFile(), driver }));
  describeSnapshotStoreContract(`createSqliteBackends().snapshotStore (${driver})`, async () => {
    const b = createSqliteBackends({ filename: newFile(), driver });
    // The others are closed at once, so the suite's close() of the snapshot store is the one that closes the file.
    await Promise.all([b.eventRepository, b.commandStore, b.logStore, b.readmodelStoreBackend].map((s) => s.close()));
    return b.snapshotStore;
  });
}

describe("SqliteSnapshotStore", () => {
  it("lives in the events' file, with the backends' table prefix, and survives a reopen", async () => {
    const filename = newFile();
    const b = createSqliteBackends({ filename, tablePrefix: "app_" });
    await b.eventRepository.append([{ domain: "Todo", name: "TodoCreated", aggregateUuid: "a", payload: {} }]);
    await b.snapshotStore.save(snap("a", 1, { tenantUuid: "t1" }));
    await b.close();
    const db = new Database(filename, { readonly: true });
    const tables = db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'app_%' ORDER BY name").all();
    expect(tables).toEqual(expect.arrayContaining([{ name: "app_events" }, { name: "app_snapshots" }]));
    db.close();
    const again = createSqliteBackends({ filename, tablePrefix: "app_" });
    expect(await again.snapshotStore.latest("Todo", "Todo", "a", 1)).toMatchObject({ version: 1, tenantUuid: "t1", state: { at: 1 } });
    await again.close();
  });

  it("two connections to one file (two processes): the highest version wins whichever saves last", async () => {
    const filename = newFile();
    const one = new SqliteSnapshotStore({ filename });
    const two = new SqliteSnapshotStore({ filename });
    for (let v = 1; v <= 20; v++) {
      // Alternate which connection writes the higher version first.
      const [first, second] = v % 2 === 0 ? [one, two] : [two, one];
      await first.save(snap("a", v + 1, { state: { by: "first", v } }));
      expect(await second.save(snap("a", v, { state: { by: "second", v } }))).toBe(false);
      expect(await second.latest("Todo", "Todo", "a", 1)).toMatchObject({ version: v + 1, state: { by: "first", v } });
    }
    await Promise.all([one.close(), two.close()]);
  });

  it("a damaged row reads as absent and is deleted; a snapshot saved later is read again", async () => {
    const filename = newFile();
    const store = new SqliteSnapshotStore({ filename });
    const db = new Database(filename);
    const damage: [string, unknown[]][] = [
      ["UPDATE mneme_snapshots SET state = ? WHERE aggregate_uuid = 'a'", ['{"broken": ']],
      ["UPDATE mneme_snapshots SET state = ? WHERE aggregate_uuid = 'a'", ['{"n": 1e400}']],
      ["UPDATE mneme_snapshots SET state = ? WHERE aggregate_uuid = 'a'", [`[1, ${"9".repeat(400)}]`]],
      ["UPDATE mneme_snapshots SET state = ? WHERE aggregate_uuid = 'a'", ['{"s": "a\\u0000b"}']],
      ["UPDATE mneme_snapshots SET state = ? WHERE aggregate_uuid = 'a'", ['{"s": "\\ud800"}']],
      ["UPDATE mneme_snapshots SET state = ? WHERE aggregate_uuid = 'a'", [Buffer.from("{}")]],
      ["UPDATE mneme_snapshots SET version = ? WHERE aggregate_uuid = 'a'", ["seven"]],
      ["UPDATE mneme_snapshots SET version = ? WHERE aggregate_uuid = 'a'", [2.5]],
      ["UPDATE mneme_snapshots SET version = ? WHERE aggregate_uuid = 'a'", [0]],
    ];
    for (const [sql, params] of damage) {
      await store.save(snap("a", 3));
      await store.save(snap("b", 3));
      db.prepare(sql).run(...params);
      expect(await store.latest("Todo", "Todo", "a", 1), sql).toBeUndefined();
      expect(db.prepare("SELECT count(*) AS n FROM mneme_snapshots WHERE aggregate_uuid = 'a'").get(), sql).toEqual({ n: 0 });
      expect((await store.latest("Todo", "Todo", "b", 1))?.version).toBe(3);
      expect(await store.save(snap("a", 2))).toBe(true);
      expect((await store.latest("Todo", "Todo", "a", 1))?.version).toBe(2);
      await store.clear();
    }
    db.close();
    await store.close();
  });

  it("a file made before snapshot digests: init adds the column, old rows read back without a digest, new saves keep theirs", async () => {
    const filename = newFile();
    const db = new Database(filename);
    db.exec(`CREATE TABLE mneme_snapshots (
      domain TEXT NOT NULL, aggregate TEXT NOT NULL, aggregate_uuid TEXT NOT NULL, snapshot_version INTEGER NOT NULL,
      version INTEGER NOT NULL, tenant_uuid TEXT NOT NULL, state TEXT NOT NULL, created_at INTEGER NOT NULL,
      PRIMARY KEY (domain, aggregate, aggregate_uuid, snapshot_version))`);
    db.prepare("INSERT INTO mneme_snapshots VALUES ('Todo', 'Todo', 'old', 1, 4, 't', '{\"at\": 4}', 1)").run();
    const store = new SqliteSnapshotStore({ filename });
    await store.init();
    const old = await store.latest("Todo", "Todo", "old", 1);
    expect(old).toEqual({
      tenantUuid: "t",
      domain: "Todo",
      aggregate: "Todo",
      aggregateUuid: "old",
      version: 4,
      snapshotVersion: 1,
      state: { at: 4 },
      createdAt: 1,
    });
    const digest = "ab".repeat(32);
    expect(await store.save(snap("old", 5, { digest }))).toBe(true);
    expect((await store.latest("Todo", "Todo", "old", 1))?.digest).toBe(digest);
    // A second store on the file (another process) finds the column there.
    const again = new SqliteSnapshotStore({ filename });
    await again.init();
    expect((await again.latest("Todo", "Todo", "old", 1))?.digest).toBe(digest);
    db.close();
    await Promise.all([store.close(), again.close()]);
  });

  it("a failure inside SQLite is STORE_ERROR with the driver error as cause", async () => {
    const filename = newFile();
    const store = new SqliteSnapshotStore({ filename });
    await store.init();
    const db = new Database(filename);
    db.exec("DROP TABLE mneme_snapshots; CREATE TABLE mneme_snapshots (x INTEGER)");
    db.close();
    const e = await rejection(store.save(snap("a", 1)));
    expect(e.code).toBe("STORE_ERROR");
    expect(e.cause).toBeInstanceOf(Error);
    await store.close();
  });
});

// --- Postgres ---------------------------------------------------------------------------------

const { pool, newPool, newSchema, inSchema } = postgresScratch("mneme_snap");
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const postgresContract = (make: (schema: string) => SnapshotStore) => inSchema<SnapshotStore>(make);
{
  const c = postgresContract((schema) => new PostgresSnapshotStore({ pool, schema }));
  describeSnapshotStoreContract("PostgresSnapshotStore", c.factory, c.opts);
}
{
  const c = postgresContract((schema) => {
    const b = createPostgresBackends({ pool, schema });
    for (const s of [b.eventRepository, b.commandStore, b.logStore, b.readmodelStoreBackend]) void s.close();
    return b.snapshotStore;
  });
  describeSnapshotStoreContract("createPostgresBackends().snapshotStore", c.factory, c.opts);
}

describe("PostgresSnapshotStore", () => {
  it("lives in the events' schema", async () => {
    const schema = newSchema();
    const b = createPostgresBackends({ pool, schema });
    await b.eventRepository.init();
    await b.snapshotStore.init();
    await b.snapshotStore.save(snap("a", 1));
    const { rows } = await pool.query<{ table_name: string }>(
      "SELECT table_name FROM information_schema.tables WHERE table_schema = $1 AND table_name IN ('events', 'snapshots') ORDER BY 1",
      [schema],
    );
    expect(rows.map((r) => r.table_name)).toEqual(["events", "snapshots"]);
    await b.close();
  });

  it("a schema made before snapshot digests: init adds the column, old rows read back without a digest, new saves keep theirs", async () => {
    const schema = newSchema();
    await pool.query(`CREATE SCHEMA "${schema}"`);
    await pool.query(`CREATE TABLE "${schema}".snapshots (
      domain text NOT NULL, aggregate text NOT NULL, aggregate_uuid text NOT NULL, snapshot_version bigint NOT NULL,
      version bigint NOT NULL, tenant_uuid text NOT NULL, state jsonb NOT NULL, created_at bigint NOT NULL,
      PRIMARY KEY (domain, aggregate, aggregate_uuid, snapshot_version))`);
    await pool.query(`INSERT INTO "${schema}".snapshots VALUES ('Todo', 'Todo', 'old', 1, 4, 't', '{"at": 4}', 1)`);
    const stores = [new PostgresSnapshotStore({ pool, schema }), new PostgresSnapshotStore({ pool, schema })];
    await Promise.all(stores.map((st) => st.init()));
    const [store, other] = stores as [PostgresSnapshotStore, PostgresSnapshotStore];
    const old = await store.latest("Todo", "Todo", "old", 1);
    expect(old).toEqual({
      tenantUuid: "t",
      domain: "Todo",
      aggregate: "Todo",
      aggregateUuid: "old",
      version: 4,
      snapshotVersion: 1,
      state: { at: 4 },
      createdAt: 1,
    });
    const digest = "cd".repeat(32);
    expect(await store.save(snap("old", 5, { digest }))).toBe(true);
    expect((await other.latest("Todo", "Todo", "old", 1))?.digest).toBe(digest);
    await Promise.all(stores.map((st) => st.close()));
  });

  it("before init() a call is NOT_STARTED; init() is idempotent and safe from several instances at once", async () => {
    const schema = newSchema();
    const stores = [newPool(2), newPool(2), newPool(2)].map((p) => new PostgresSnapshotStore({ pool: p, schema }));
    expect((await rejection(stores[0]!.save(snap("a", 1)))).code).toBe("NOT_STARTED");
    await Promise.all(stores.map((s) => s.init()));
    await stores[0]!.init();
    expect(await stores[1]!.save(snap("a", 1))).toBe(true);
    await Promise.all(stores.map((s) => s.close()));
  });

  it("concurrent saves from several instances (pools): the highest version wins, in every round", async () => {
    const schema = newSchema();
    const stores = [newPool(4), newPool(4), newPool(4)].map((p) => new PostgresSnapshotStore({ pool: p, schema }));
    await stores[0]!.init();
    for (let round = 0; round < 10; round++) {
      const uuid = `agg${round}`;
      const versions = Array.from({ length: 30 }, (_, i) => ((i * 7 + round) % 30) + 1);
      const results = await Promise.all(versions.map((v, i) => stores[i % 3]!.save(snap(uuid, v, { state: { v, by: i % 3 } }))));
      const top = versions.indexOf(30);
      expect(results[top]).toBe(true);
      expect(await stores[round % 3]!.latest("Todo", "Todo", uuid, 1)).toMatchObject({ version: 30, state: { v: 30, by: top % 3 } });
    }
    await Promise.all(stores.map((s) => s.close()));
  });

  it("a damaged row (a number beyond a double, a version above 2^53 - 1) reads as absent and is deleted", async () => {
    const schema = newSchema();
    const store = new PostgresSnapshotStore({ pool, schema });
    await store.init();
    const table = `"${schema}".snapshots`;
    const damage = [
      `UPDATE ${table} SET state = '{"n": 1e400}'::jsonb WHERE aggregate_uuid = 'a'`,
      `UPDATE ${table} SET state = '[1, -1e309]'::jsonb WHERE aggregate_uuid = 'a'`,
      `UPDATE ${table} SET version = 9007199254740993 WHERE aggregate_uuid = 'a'`,
    ];
    for (const sql of damage) {
      await store.save(snap("a", 3));
      await store.save(snap("b", 3));
      await pool.query(sql);
      expect(await store.latest("Todo", "Todo", "a", 1), sql).toBeUndefined();
      const { rows } = await pool.query<{ n: string }>(`SELECT count(*)::text AS n FROM ${table} WHERE aggregate_uuid = 'a'`);
      expect(rows[0]?.n, sql).toBe("0");
      expect((await store.latest("Todo", "Todo", "b", 1))?.version).toBe(3);
      expect(await store.save(snap("a", 2))).toBe(true);
      expect((await store.latest("Todo", "Todo", "a", 1))?.version).toBe(2);
      await store.clear();
    }
    await store.close();
  });

  it("a damaged row replaced by a higher version before the delete is kept", async () => {
    const schema = newSchema();
    let replaceBeforeDelete = false;
    const store = new PostgresSnapshotStore({
      pool,
      schema,
      onStatement: async (s: PgStatement) => {
        if (!replaceBeforeDelete || !s.text.trimStart().startsWith("DELETE")) return;
        replaceBeforeDelete = false;
        // Another instance saves a good, higher version between the read and the delete.
        await other.save(snap("a", 9, { state: { good: true } }));
      },
    });
    const other = new PostgresSnapshotStore({ pool, schema });
    await store.init();
    await store.save(snap("a", 3));
    await pool.query(`UPDATE "${schema}".snapshots SET state = '{"n": 1e400}'::jsonb`);
    replaceBeforeDelete = true;
    expect(await store.latest("Todo", "Todo", "a", 1)).toBeUndefined();
    expect(await store.latest("Todo", "Todo", "a", 1)).toMatchObject({ version: 9, state: { good: true } });
    await Promise.all([store.close(), other.close()]);
  });

  it("a session ended before a save or a read rejects with UNAVAILABLE, writes nothing, and the next call works", async () => {
    const schema = newSchema();
    const userPool = newPool(3);
    let kill: ((s: PgStatement) => boolean) | undefined;
    const store = new PostgresSnapshotStore({
      pool: userPool,
      schema,
      onStatement: async (s: PgStatement) => {
        if (kill === undefined || !kill(s)) return;
        kill = undefined;
        await pool.query("SELECT pg_terminate_backend($1, 5000)", [s.processId]);
      },
    });
    await store.init();
    await store.save(snap("a", 1));
    kill = (s) => s.text.trimStart().startsWith("INSERT");
    const failedSave = await rejection(store.save(snap("a", 2)));
    expect(failedSave.code, failedSave.message).toBe("UNAVAILABLE");
    kill = (s) => s.text.trimStart().startsWith("SELECT");
    const failedRead = await rejection(store.latest("Todo", "Todo", "a", 1));
    expect(failedRead.code, failedRead.message).toBe("UNAVAILABLE");
    expect(await store.latest("Todo", "Todo", "a", 1)).toMatchObject({ version: 1 });
    expect(await store.save(snap("a", 2))).toBe(true);
    expect((await store.latest("Todo", "Todo", "a", 1))?.version).toBe(2);
    await store.close();
  });

  it("close() waits for a save in flight; the save completes", async () => {
    const schema = newSchema();
    const store = new PostgresSnapshotStore({ pool, schema });
    await store.init();
    const saving = store.save(snap("a", 1));
    await store.close();
    expect(await saving).toBe(true);
    const { rows } = await pool.query<{ n: string }>(`SELECT count(*)::text AS n FROM "${schema}".snapshots`);
    expect(rows[0]?.n).toBe("1");
  });
});

// --- Domain.aggregate: the snapshot options ---------------------------------------------------

function codeOf(fn: () => unknown): string {
  try {
    fn();
  } catch (e) {
    return isMnemeError(e) ? `${e.code}: ${e.message}` : `not a MnemeError: ${String(e)}`;
  }
  return "no error";
}

describe("Domain.aggregate snapshot options", () => {
  const evolve = { Opened: (_s: { open: boolean }) => ({ open: true }) };

  it("snapshotEvery and snapshotVersion are on the aggregate type; snapshotVersion defaults to 1, snapshotEvery to none", () => {
    const D = defineDomain("Shop");
    D.event("Opened");
    const plain = D.aggregate("Plain", { initialState: () => ({ open: false }), evolve });
    expect(plain.snapshotEvery).toBeUndefined();
    expect(plain.snapshotVersion).toBe(1);
    expect(snapshotOptionsOf(plain)).toEqual({ snapshotEvery: undefined, snapshotVersion: 1 });
    const kept = D.aggregate("Kept", { initialState: () => ({ open: false }), evolve, snapshotEvery: 50, snapshotVersion: 3 });
    expect(kept).toMatchObject({ snapshotEvery: 50, snapshotVersion: 3 });
    expect(snapshotOptionsOf(kept)).toEqual({ snapshotEvery: 50, snapshotVersion: 3 });
    expect(Object.isFrozen(kept)).toBe(true);
    expect(D.aggregates.get("Kept")).toBe(kept);
    const typed = D.aggregate("Typed", {
      initialState: () => ({ open: false }),
      evolve: (o) => [o(D.event<Record<string, never>>("Closed"), () => ({ open: false }))],
      snapshotEvery: 1,
    });
    expect(snapshotOptionsOf(typed)).toEqual({ snapshotEvery: 1, snapshotVersion: 1 });
  });

  it("an aggregate type made without Domain.aggregate reads as keeping no snapshots", () => {
    const handMade: AggregateType<number> = {
      kind: "aggregate",
      domain: "X",
      name: "Y",
      tenancy: "tenant",
      initialState: () => 0,
      evolve: {},
      apply: (s) => s,
    };
    expect(snapshotOptionsOf(handMade)).toEqual({ snapshotEvery: undefined, snapshotVersion: 1 });
  });

  it("a snapshotEvery that is not a positive integer gives INVALID_DOMAIN, and the aggregate is not defined", () => {
    for (const bad of [0, -5, 2.5, Number.NaN, Infinity, "10", 10n, null, 2 ** 53]) {
      const D = defineDomain("Shop");
      D.event("Opened");
      const outcome = codeOf(() =>
        D.aggregate("Agg", { initialState: () => ({ open: false }), evolve, snapshotEvery: bad as unknown as number }),
      );
      expect(outcome, String(bad)).toMatch(/^INVALID_DOMAIN: aggregate Shop\.Agg: snapshotEvery must be a positive integer, got /);
      expect(D.aggregates.has("Agg")).toBe(false);
      expect(codeOf(() => D.aggregate("Agg", { initialState: () => ({ open: false }), evolve }))).toBe("no error");
    }
  });

  it("a snapshotVersion that is not an integer >= 1 gives INVALID_DOMAIN, and the aggregate is not defined", () => {
    for (const bad of [0, -1, 1.5, Number.NaN, "2", 2n, null, 2 ** 53]) {
      const D = defineDomain("Shop");
      D.event("Opened");
      const outcome = codeOf(() =>
        D.aggregate("Agg", { initialState: () => ({ open: false }), evolve, snapshotVersion: bad as unknown as number }),
      );
      expect(outcome, String(bad)).toMatch(/^INVALID_DOMAIN: aggregate Shop\.Agg: snapshotVersion must be an integer >= 1, got /);
      expect(D.aggregates.has("Agg")).toBe(false);
    }
    const D = defineDomain("Shop");
    D.event("Opened");
    expect(codeOf(() => D.aggregate("Agg", { initialState: () => ({ open: false }), evolve, snapshotVersion: 7 }))).toBe("no error");
  });
});
