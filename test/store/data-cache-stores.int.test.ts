/**
 * The DataStore and CacheStore of the SQLite and Postgres backends: the
 * conformance suites on each; durable (a new connection on the file or
 * schema reads what an earlier one wrote) and shared (two backends on one
 * file or schema see each other's entries and expiries, and sum each
 * other's concurrent increments exactly); the Runtime names their backend;
 * and the failed-login limit of the built-in domains holds across two
 * instances, a restart and a burst fired at both at once.
 */
import { afterEach, describe, expect, it } from "vitest";
import { createFacade, type Facade, type FacadeOptions } from "mneme";
import { Login, registerDefaults } from "mneme/defaults";
import { createPostgresBackends, PostgresCacheStore, PostgresDataStore } from "mneme/postgres";
import { createSqliteBackends, SqliteCacheStore, SqliteDataStore } from "mneme/sqlite";
import type { CacheStore, DataStore } from "mneme/store";
import { describeCacheStoreContract } from "../../src/testing/cache-store-contract.js";
import { describeDataStoreContract } from "../../src/testing/data-store-contract.js";
import { settle } from "../../src/testing/contract-harness.js";
import { ADMIN_EMAIL, ADMIN_PASSWORD, FAST_HASHING } from "../support/defaults-world.js";
import { postgresScratch } from "../support/postgres-scratch.js";
import { sharedPlaces } from "../support/shared-places.js";
import { SQLITE_DRIVERS } from "../support/sqlite-drivers.js";
import { sqliteScratch } from "../support/sqlite-scratch.js";

const files = sqliteScratch("data-cache");
const pg = postgresScratch("mneme_datacache");

// On each Node.js SQLite driver (test/support/sqlite-drivers.ts).
for (const driver of SQLITE_DRIVERS) {
  describeDataStoreContract(`SqliteDataStore (${driver})`, async () => new SqliteDataStore({ filename: files.newFile(), driver }));
  describeCacheStoreContract(`SqliteCacheStore (${driver})`, async () => new SqliteCacheStore({ filename: files.newFile(), driver }));
  describeDataStoreContract(
    `createSqliteBackends().dataStore (${driver})`,
    async () => createSqliteBackends({ filename: files.newFile(), driver }).dataStore,
  );
  describeCacheStoreContract(
    `createSqliteBackends().cacheStore (${driver})`,
    async () => createSqliteBackends({ filename: files.newFile(), driver }).cacheStore,
  );
}
{
  const c = pg.inSchema<DataStore>((schema) => new PostgresDataStore({ pool: pg.pool, schema }));
  describeDataStoreContract("PostgresDataStore", c.factory, c.opts);
}
{
  const c = pg.inSchema<CacheStore>((schema) => new PostgresCacheStore({ pool: pg.pool, schema }));
  describeCacheStoreContract("PostgresCacheStore", c.factory, c.opts);
}

interface Backends {
  readonly dataStore: DataStore;
  readonly cacheStore: CacheStore;
  close(): Promise<void>;
}

const opened: Backends[] = [];
afterEach(async () => {
  for (const b of opened.splice(0)) await b.close().catch(() => undefined);
});

const durable: [name: string, place: () => () => Backends][] = [
  [
    "sqlite",
    () => {
      const filename = files.newFile();
      return () => createSqliteBackends({ filename });
    },
  ],
  [
    "postgres",
    () => {
      const schema = pg.newSchema();
      return () => createPostgresBackends({ pool: pg.pool, schema });
    },
  ],
];

describe.each(durable)("the DataStore and CacheStore of %s backends", (name, place) => {
  function open(next: () => Backends): Backends {
    const b = next();
    opened.push(b);
    return b;
  }

  it("are shared by two backends on one database: entries, deletes and expiries", async () => {
    const next = place();
    const a = open(next);
    const b = open(next);
    await a.dataStore.put("reports/1.csv", "a,b\n1,2\n", { contentType: "text/csv" });
    expect(await b.dataStore.get("reports/1.csv")).toMatchObject({ contentType: "text/csv", size: 8 });
    expect((await b.dataStore.list({ prefix: "reports/" })).items.map((i) => i.key)).toEqual(["reports/1.csv"]);
    expect(await b.dataStore.delete("reports/1.csv")).toBe(true);
    expect(await a.dataStore.get("reports/1.csv")).toBeUndefined();

    await a.cacheStore.set("k", { n: 1 });
    await a.cacheStore.set("short", "soon gone", { ttlMs: 40 });
    expect(await b.cacheStore.get("k")).toEqual({ n: 1 });
    expect(await b.cacheStore.get("short")).toBe("soon gone");
    await b.cacheStore.set("k", { n: 2 });
    expect(await a.cacheStore.get("k")).toEqual({ n: 2 });
    await settle(80);
    expect(await b.cacheStore.get("short")).toBeUndefined();
    expect(await a.cacheStore.delete("short")).toBe(false);
    expect(await b.cacheStore.delete("k")).toBe(true);
    expect(await a.cacheStore.get("k")).toBeUndefined();
  });

  it("sum concurrent increments from two backends on one database exactly", async () => {
    const next = place();
    const a = open(next);
    const b = open(next);
    const results = await Promise.all(
      Array.from({ length: 100 }, (_, i) => (i % 2 === 0 ? a : b).cacheStore.increment("hits", 1, { ttlMs: 600_000 })),
    );
    // Every increment saw a value of its own: none read the same count as another.
    expect([...results].sort((x, y) => x - y)).toEqual(Array.from({ length: 100 }, (_, i) => i + 1));
    expect(await a.cacheStore.get("hits")).toBe(100);
    expect(await b.cacheStore.increment("hits", -100)).toBe(0);
  });

  it("keep their entries when the backends close and open again", async () => {
    const next = place();
    const first = open(next);
    const bytes = new Uint8Array([0, 1, 2, 253, 254, 255]);
    const put = await first.dataStore.put("blob", bytes);
    await first.cacheStore.set("kept", ["a", 1], { ttlMs: 600_000 });
    await first.cacheStore.set("forever", true);
    await first.close();
    const again = open(next);
    const got = await again.dataStore.get("blob");
    expect(Array.from(got!.data)).toEqual(Array.from(bytes));
    expect(got).toMatchObject({ createdAt: put.createdAt, updatedAt: put.updatedAt, contentType: "application/octet-stream" });
    expect(await again.cacheStore.get("kept")).toEqual(["a", 1]);
    expect(await again.cacheStore.get("forever")).toBe(true);
  });

  it("are what the Runtime names as the facade's data and cache stores", async () => {
    const f = createFacade({ appName: "stores", ...place()() });
    await f.start();
    try {
      expect(f.runtime.systemInfo().stores).toMatchObject({ data: name, cache: name });
      expect((await f.dataStore.info()).storeType).toBe(name);
      expect((await f.cacheStore.info()).storeType).toBe(name);
    } finally {
      await f.stop();
    }
  });
});

describe.each(sharedPlaces("login_limit").filter(([name]) => name !== "memory"))(
  "the failed-login limit across instances and restarts (%s)",
  (_name, place) => {
    const facades: Facade[] = [];
    afterEach(async () => {
      for (const f of facades.splice(0).reverse()) await f.stop().catch(() => undefined);
    });

    async function instance(stores: Partial<FacadeOptions>): Promise<Facade> {
      const f = createFacade({ appName: "login-limit", ...stores });
      await registerDefaults(f, {
        admin: { email: ADMIN_EMAIL, password: ADMIN_PASSWORD },
        passwordHashing: FAST_HASHING,
        maxFailedLogins: 4,
        failedLoginWindowMs: 600_000,
      });
      await f.start();
      facades.push(f);
      return f;
    }

    const login = (f: Facade, password: string) => f.dispatch(Login, { email: ADMIN_EMAIL, password });

    it("failures split over two instances reach the limit on both, and it holds after a restart", async () => {
      const stores = place();
      const a = await instance(stores());
      const b = await instance(stores());
      for (let i = 0; i < 4; i++) {
        await expect(login(i % 2 === 0 ? a : b, "wrong password")).rejects.toMatchObject({ code: "UNAUTHENTICATED" });
      }
      // The limit counts every instance's failures: even the right password is refused now, on either.
      await expect(login(a, ADMIN_PASSWORD)).rejects.toMatchObject({ code: "RATE_LIMITED" });
      await expect(login(b, ADMIN_PASSWORD)).rejects.toMatchObject({ code: "RATE_LIMITED" });
      for (const f of facades.splice(0)) await f.stop();
      const restarted = await instance(stores());
      await expect(login(restarted, ADMIN_PASSWORD)).rejects.toMatchObject({ code: "RATE_LIMITED" });
    }, 60_000);

    it("failed logins fired at once on two instances get no more attempts in total than the limit", async () => {
      const stores = place();
      const a = await instance(stores());
      const b = await instance(stores());
      const outcomes = await Promise.allSettled(Array.from({ length: 24 }, (_, i) => login(i % 2 === 0 ? a : b, "wrong password")));
      const codes = outcomes.map((o) => (o.status === "rejected" ? (o.reason as { code?: string }).code : "ok"));
      expect(codes.filter((c) => c === "UNAUTHENTICATED")).toHaveLength(4);
      expect(codes.filter((c) => c === "RATE_LIMITED")).toHaveLength(20);
    }, 60_000);

    it("a login on one instance clears the failures counted on the other", async () => {
      const stores = place();
      const a = await instance(stores());
      const b = await instance(stores());
      for (let i = 0; i < 3; i++) await expect(login(a, "wrong password")).rejects.toMatchObject({ code: "UNAUTHENTICATED" });
      expect((await login(b, ADMIN_PASSWORD)).result?.token).toEqual(expect.any(String));
      for (let i = 0; i < 3; i++) await expect(login(a, "wrong password")).rejects.toMatchObject({ code: "UNAUTHENTICATED" });
      expect((await login(b, ADMIN_PASSWORD)).result?.token).toEqual(expect.any(String));
    }, 60_000);
  },
);

describe("PostgresDataStore stamps", () => {
  it("a put whose stamp is older than the row's (another instance's clock ahead) leaves createdAt not after updatedAt", async () => {
    const schema = pg.newSchema();
    const a = new PostgresDataStore({ pool: pg.pool, schema });
    const b = new PostgresDataStore({ pool: pg.pool, schema });
    try {
      await a.put("k", "first");
      // Instance a's clock runs 10 s ahead of b's: its stamps are later than any b takes now.
      const ahead = BigInt(Date.now() + 10_000) * 1_000_000n;
      await pg.pool.query(`UPDATE "${schema}".data SET created_at = $1, updated_at = $1 WHERE key = 'k'`, [ahead.toString()]);
      const info = await b.put("k", "second");
      expect(info.updatedAt).toBeGreaterThanOrEqual(info.createdAt);
      const got = await a.get("k");
      expect(new TextDecoder().decode(got?.data)).toBe("second");
      expect(got?.createdAt).toBe(info.createdAt);
      expect(got?.updatedAt).toBe(info.updatedAt);
      expect(got!.updatedAt).toBeGreaterThanOrEqual(got!.createdAt);
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
  });
});

describe.each(SQLITE_DRIVERS)("SqliteDataStore stamps (%s)", (driver) => {
  it("a put whose stamp is older than the row's (another process's clock ahead) leaves createdAt not after updatedAt", async () => {
    const filename = files.newFile();
    const a = new SqliteDataStore({ filename, driver });
    await a.put("k", "first");
    await a.close();
    // Another process, whose clock runs 10 s ahead of this one's, wrote the row last.
    const { DatabaseSync } = await import("node:sqlite");
    const raw = new DatabaseSync(filename);
    const ahead = (Date.now() + 10_000) * 1_000_000;
    raw.prepare(`UPDATE mneme_data SET created_at = ?, updated_at = ? WHERE key = 'k'`).run(ahead, ahead);
    raw.close();
    const b = new SqliteDataStore({ filename, driver });
    try {
      const info = await b.put("k", "second");
      expect(info.updatedAt).toBeGreaterThanOrEqual(info.createdAt);
      const got = await b.get("k");
      expect(new TextDecoder().decode(got?.data)).toBe("second");
      expect(got).toMatchObject({ createdAt: info.createdAt, updatedAt: info.updatedAt });
    } finally {
      await b.close();
    }
  });
});
