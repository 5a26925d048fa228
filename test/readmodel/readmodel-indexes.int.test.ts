/**
 * Indexed collections: the SQL that list and count send uses the declared
 * indexes (checked with the query plan: SQLite EXPLAIN QUERY PLAN, Postgres
 * EXPLAIN (FORMAT JSON) with seqscans off), for where equality, an ordered
 * range (orderBy with offset and limit), where + orderBy + limit and count,
 * scoped to a tenant; declared indexes are reconciled by name when the
 * declaration changes (a new release: another backend instance); and a
 * readmodel's declared indexes exist in both generations of a blue-green
 * rebuild and are used after the switch, through a tenant's view.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import pg from "pg";
import { afterAll, describe, expect, it } from "vitest";
import { BaseReadmodel, createFacade, type Facade, type FacadeOptions, newUuid } from "mneme";
import { collectionIndexName, type ListOptions, type ReadmodelCollection, type ReadmodelStoreBackend } from "mneme/store";
import { createPostgresBackends, PostgresReadmodelStoreBackend } from "mneme/postgres";
import { createSqliteBackends, SqliteReadmodelStoreBackend } from "mneme/sqlite";
import { Counter, Incremented, IncrementMany } from "../support/counter-domain.js";
import { DATABASE_URL, postgresScratch } from "../support/postgres-scratch.js";
import { until } from "../support/until.js";

const dir = mkdtempSync(join(tmpdir(), "mneme-indexes-"));
const pgs = postgresScratch("mneme_idx");
afterAll(() => rmSync(dir, { recursive: true, force: true }));

interface Captured {
  sql: string;
  args: unknown[];
}

/** What a plan check needs of one backend: a way to open it, the statements it sent, and the plan of one of them. */
interface Harness {
  name: string;
  /** A fresh backend (and the facade options that share its storage), every statement it sends recorded. */
  open(): { backend: ReadmodelStoreBackend; facade: () => FacadeOptions; another: () => ReadmodelStoreBackend };
  /** The last SELECT on the documents table that was sent. */
  last(): Captured;
  /** The names of the indexes the plan of `c` uses; `sorts`: whether it sorts rows itself. */
  plan(c: Captured): Promise<{ indexes: string[]; sorts: boolean; text: string }>;
  /** The names of the indexes on the documents table. */
  indexNames(): Promise<string[]>;
  /** Drops one of them (what an older release left). */
  dropIndex(name: string): Promise<void>;
  prefix: string;
}

function sqliteHarness(): Harness {
  const captured: Captured[] = [];
  let raw: Database.Database | undefined;
  let file = "";
  const wrap = (db: Database.Database) =>
    new Proxy(db, {
      get(target, prop) {
        if (prop === "prepare") {
          return (sql: string) => {
            const stmt = target.prepare(sql);
            const proxy: unknown = new Proxy(stmt, {
              get(s, p) {
                if (p === "all" || p === "get" || p === "run")
                  return (...args: unknown[]) => {
                    captured.push({ sql, args });
                    return (s[p] as (...a: unknown[]) => unknown)(...args);
                  };
                if (p === "raw")
                  return (on?: boolean) => {
                    s.raw(on);
                    return proxy;
                  };
                const v = Reflect.get(s, p, s) as unknown;
                return typeof v === "function" ? (v as (...a: unknown[]) => unknown).bind(s) : v;
              },
            });
            return proxy;
          };
        }
        const v = Reflect.get(target, prop, target) as unknown;
        return typeof v === "function" ? (v as (...a: unknown[]) => unknown).bind(target) : v;
      },
    });
  return {
    name: "SQLite",
    prefix: "mneme_",
    open() {
      file = join(dir, `${newUuid()}.db`);
      raw = new Database(file);
      const database = wrap(raw);
      return {
        backend: new SqliteReadmodelStoreBackend({ database }),
        facade: () => createSqliteBackends({ database }),
        another: () => new SqliteReadmodelStoreBackend({ filename: file }),
      };
    },
    last: () => lastSelect(captured),
    async plan(c) {
      const rows = raw!.prepare(`EXPLAIN QUERY PLAN ${c.sql}`).all(...c.args) as { detail: string }[];
      const text = rows.map((r) => r.detail).join("\n");
      const indexes = [...text.matchAll(/USING (?:COVERING )?INDEX (\S+)/g)].map((m) => m[1]!);
      return { indexes, sorts: /TEMP B-TREE/.test(text), text };
    },
    async dropIndex(name) {
      raw!.prepare(`DROP INDEX "${name}"`).run();
    },
    async indexNames() {
      return (
        raw!.prepare("SELECT name FROM sqlite_master WHERE type = 'index' AND name LIKE 'mneme_rmx_%' ORDER BY name").all() as {
          name: string;
        }[]
      ).map((r) => r.name);
    },
  };
}

function postgresHarness(): Harness {
  const captured: Captured[] = [];
  class Recording extends pg.Client {
    override query(...args: unknown[]): never {
      const [q, v] = args as [unknown, unknown];
      if (typeof q === "string") captured.push({ sql: q, args: Array.isArray(v) ? (v as unknown[]) : [] });
      else if (typeof q === "object" && q !== null && typeof (q as { text?: unknown }).text === "string") {
        const { text, values } = q as { text: string; values?: unknown[] };
        captured.push({ sql: text, args: values ?? (Array.isArray(v) ? (v as unknown[]) : []) });
      }
      return (super.query as (...a: unknown[]) => never)(...args);
    }
  }
  const pool = new pg.Pool({ connectionString: DATABASE_URL, max: 6, Client: Recording });
  pool.on("error", () => {});
  afterAll(() => pool.end());
  let schema = "";
  return {
    name: "Postgres",
    prefix: "",
    open() {
      schema = pgs.newSchema();
      return {
        backend: new PostgresReadmodelStoreBackend({ pool, schema }),
        facade: () => createPostgresBackends({ pool, schema, pollIntervalMs: 50 }),
        another: () => new PostgresReadmodelStoreBackend({ pool: pgs.pool, schema }),
      };
    },
    last: () => lastSelect(captured),
    async plan(c) {
      const client = await pgs.pool.connect();
      try {
        await client.query(`ANALYZE "${schema}".readmodel_documents`);
        await client.query("BEGIN");
        await client.query("SET LOCAL enable_seqscan = off");
        const res = await client.query<{ "QUERY PLAN": unknown }>(`EXPLAIN (FORMAT JSON) ${c.sql}`, c.args);
        await client.query("ROLLBACK");
        const text = JSON.stringify(res.rows[0]!["QUERY PLAN"]);
        const indexes = [...text.matchAll(/"Index Name":"([^"]+)"/g)].map((m) => m[1]!);
        return { indexes, sorts: /"Node Type":"(Incremental )?Sort"/.test(text), text };
      } finally {
        client.release();
      }
    },
    async dropIndex(name) {
      await pgs.pool.query(`DROP INDEX "${schema}"."${name}"`);
    },
    async indexNames() {
      const res = await pgs.pool.query<{ indexname: string }>(
        "SELECT indexname FROM pg_indexes WHERE schemaname = $1 AND indexname LIKE 'rmx_%' ORDER BY indexname",
        [schema],
      );
      return res.rows.map((r) => r.indexname);
    },
  };
}

function lastSelect(captured: readonly Captured[]): Captured {
  for (let i = captured.length - 1; i >= 0; i--) {
    const c = captured[i]!;
    if (/^SELECT (doc|COUNT\(\*\)|count\(\*\))/.test(c.sql)) return c;
  }
  throw new Error("no SELECT sent");
}

interface Order {
  id: string;
  status: string;
  placedAt: number;
  total?: number;
}

/** `n` orders, a fifth open, of tenant `tenant` (none: unscoped writes), with keys `<tag>-<i>`. */
async function seed(col: ReadmodelCollection<Order>, n: number, tag: string): Promise<void> {
  const entries: [string, Order][] = [];
  for (let i = 0; i < n; i++) {
    const id = `${tag}-${String(i).padStart(5, "0")}`;
    entries.push([id, { id, status: i % 5 === 0 ? "open" : i % 5 === 1 ? "closed" : "shipped", placedAt: (i * 7919) % n, total: i }]);
  }
  await col.putMany(entries);
}

describe.each([sqliteHarness(), postgresHarness()])("indexed collections on $name", (h) => {
  it("list and count use the declared indexes: where equality, ordered range, where + orderBy + limit, count, scoped to a tenant", async () => {
    const { backend } = h.open();
    await backend.init();
    await backend.ensureIndexes!("shop:orders", [["status", "placedAt"]], { tenantFirst: true });
    await backend.ensureIndexes!("shop:all", [["placedAt"], ["status", "placedAt"], ["status"]]);
    const tenantIndex = collectionIndexName(h.prefix, "shop:orders", ["status", "placedAt"], true);
    const unscopedIndex = collectionIndexName(h.prefix, "shop:orders", ["status", "placedAt"], false);
    const byPlacedAt = collectionIndexName(h.prefix, "shop:all", ["placedAt"], false);
    const byStatusPlacedAt = collectionIndexName(h.prefix, "shop:all", ["status", "placedAt"], false);
    const byStatus = collectionIndexName(h.prefix, "shop:all", ["status"], false);
    expect(await h.indexNames()).toEqual([tenantIndex, unscopedIndex, byPlacedAt, byStatusPlacedAt, byStatus].sort());
    for (const t of ["A", "B", "C"]) await seed(backend.collection<Order>("shop:orders", { writeTenantUuid: t }), 1500, t);
    await seed(backend.collection<Order>("shop:all"), 3000, "g");
    await seed(backend.collection<Order>("other"), 3000, "o");

    const a = backend.collection<Order>("shop:orders", { readTenantUuid: "A" });
    const all = backend.collection<Order>("shop:all");
    const check = async (run: () => Promise<unknown>, index: string | readonly string[], sorts: boolean): Promise<void> => {
      await run();
      const p = await h.plan(h.last());
      const allowed = typeof index === "string" ? [index] : index;
      expect(
        p.indexes.some((i) => allowed.includes(i)),
        p.text,
      ).toBe(true);
      if (!sorts) expect(p.sorts, p.text).toBe(false);
    };
    const newest: ListOptions = { where: { status: "open" }, orderBy: "placedAt", descending: true, limit: 20 };
    // Scoped to a tenant: where + orderBy + limit, ascending with an offset, where equality (count). SQLite takes the
    // index led by the tenant; Postgres, estimating one row for these expressions, may take either (both serve the order).
    const forTenant = h.name === "SQLite" ? tenantIndex : [tenantIndex, unscopedIndex];
    await check(() => a.list(newest), forTenant, false);
    await check(() => a.list({ where: { status: "closed" }, orderBy: "placedAt", offset: 10, limit: 10 }), forTenant, false);
    await check(() => a.count({ status: "open" }), forTenant, true);
    // The same tenant collection read by trusted code, every tenant at once: its index without the tenant lead, no sort.
    const everyTenant = backend.collection<Order>("shop:orders");
    await check(() => everyTenant.list(newest), unscopedIndex, false);
    await check(() => everyTenant.list({ where: { status: "closed" }, orderBy: "placedAt", offset: 10, limit: 10 }), unscopedIndex, false);
    await check(() => everyTenant.count({ status: "open" }), unscopedIndex, true);
    // A global collection: an ordered range (orderBy + offset + limit), where + order, where equality, a number in where.
    await check(() => all.list({ orderBy: "placedAt", offset: 100, limit: 25 }), byPlacedAt, false);
    await check(() => all.list({ orderBy: "placedAt", descending: true, limit: 5 }), byPlacedAt, false);
    await check(() => all.list(newest), byStatusPlacedAt, false);
    await check(() => all.list({ where: { status: "shipped" }, limit: 10 }), byStatus, false);
    await check(() => all.count({ placedAt: 17 }), byPlacedAt, true);

    // And the answers are right.
    const got = await a.list(newest);
    expect(got).toHaveLength(20);
    expect(got.every((o) => o.status === "open" && o.id.startsWith("A-"))).toBe(true);
    const placed = got.map((o) => o.placedAt);
    expect(placed).toEqual([...placed].sort((x, y) => y - x));
    expect(await a.count({ status: "open" })).toBe(300);
    const every = await everyTenant.list(newest);
    expect(every.map((o) => o.placedAt)).toEqual([...every.map((o) => o.placedAt)].sort((x, y) => y - x));
    expect(new Set(every.map((o) => o.id[0]))).toEqual(new Set(["A", "B", "C"]));
    expect(await everyTenant.count({ status: "open" })).toBe(900);
    await backend.close();
  }, 120_000);

  it("a changed declaration is reconciled by another instance (a new release): added created, removed dropped, names deterministic", async () => {
    const { backend, another } = h.open();
    await backend.init();
    await seed(backend.collection<Order>("r:orders"), 200, "x");
    await backend.ensureIndexes!("r:orders", [["status"], ["placedAt"]]);
    await backend.ensureIndexes!("r:other", [["status"]]);
    const name = (fields: string[], tenant = false) => collectionIndexName(h.prefix, "r:orders", fields, tenant);
    const other = collectionIndexName(h.prefix, "r:other", ["status"], false);
    expect(await h.indexNames()).toEqual([name(["status"]), name(["placedAt"]), other].sort());

    const next = another();
    await next.init();
    await next.ensureIndexes!("r:orders", [["placedAt"], ["status", "placedAt"]]);
    expect(await h.indexNames()).toEqual([name(["placedAt"]), name(["status", "placedAt"]), other].sort());
    // Read per tenant now: the index led by the tenant is added, the one without it kept (trusted code's reads of every tenant).
    await next.ensureIndexes!("r:orders", [["placedAt"]], { tenantFirst: true });
    expect(await h.indexNames()).toEqual([name(["placedAt"], true), name(["placedAt"]), other].sort());
    // A store made by a release that led tenant collections' indexes only by the tenant: the next start adds the other.
    await h.dropIndex(name(["placedAt"]));
    const upgraded = another();
    await upgraded.init();
    await upgraded.ensureIndexes!("r:orders", [["placedAt"]], { tenantFirst: true });
    await upgraded.ensureIndexes!("r:orders", [["placedAt"]], { tenantFirst: true });
    expect(await h.indexNames()).toEqual([name(["placedAt"], true), name(["placedAt"]), other].sort());
    await upgraded.close();
    await next.ensureIndexes!("r:orders", []);
    expect(await h.indexNames()).toEqual([other]);
    expect(await next.collection<Order>("r:orders").count({ status: "open" })).toBe(40);
    await next.close();
    await backend.close();
  }, 60_000);

  it("a readmodel's declared indexes: made at start, in the next generation before a rebuild's switch, used through a tenant's view after it", async () => {
    const { facade: opts } = h.open();
    const f: Facade = createFacade({ appName: "indexes", ...opts() });
    f.registerDomain(Counter);
    const orders = new Orders(f);
    f.registerReadmodel(orders);
    await f.start();
    try {
      const served = collectionIndexName(h.prefix, "Orders:orders", ["status", "placedAt"], true);
      const next = collectionIndexName(h.prefix, "Orders#rebuild:orders", ["status", "placedAt"], true);
      const servedUnscoped = collectionIndexName(h.prefix, "Orders:orders", ["status", "placedAt"], false);
      const nextUnscoped = collectionIndexName(h.prefix, "Orders#rebuild:orders", ["status", "placedAt"], false);
      for (let i = 0; i < 4; i++)
        await f.dispatch(IncrementMany, { counterUuids: Array.from({ length: 50 }, () => newUuid()), by: i + 1 }, { waitToFinish: true });
      await until(async () => (await orders.all().count()) === 200, "the orders are in");
      expect(await h.indexNames()).toEqual([served, servedUnscoped].sort());
      const { done } = orders.restoreState(undefined, { fromZero: true });
      await done;
      expect(await h.indexNames()).toEqual([next, nextUnscoped, served, servedUnscoped].sort());
      const tenant = orders.tenant!;
      const view = orders.asTenant(tenant);
      const open = await view.newestOpen();
      expect(open).toHaveLength(20);
      const p = await h.plan(h.last());
      // Every order is this one tenant's: either index serves the tenant's read as well (SQLite takes the tenant's).
      expect(h.name === "SQLite" ? [served] : [served, servedUnscoped], p.text).toContain(p.indexes[0]);
      expect(p.sorts, p.text).toBe(false);
      expect(await orders.asTenant("someone-else").newestOpen()).toEqual([]);
      // Trusted code (no tenant's view): every tenant's orders, through the index without the tenant lead.
      expect(await orders.newestOpen()).toEqual(open);
      const everyTenant = await h.plan(h.last());
      expect(everyTenant.indexes, everyTenant.text).toContain(servedUnscoped);
      expect(everyTenant.sorts, everyTenant.text).toBe(false);
    } finally {
      await f.stop();
    }
  }, 120_000);
});

/** Orders from Incremented events: `by` odd is open; placedAt is the event's position. */
class Orders extends BaseReadmodel {
  tenant: string | undefined;
  readonly #orders: ReadmodelCollection<Order>;

  constructor(facade: Facade) {
    super(facade);
    this.domain = "Counter";
    this.name = "Orders";
    this.#orders = this.collection<Order>("orders", { indexes: [["status", "placedAt"]] });
    this.addDomainEventHandler(Incremented, async (_ctx, e, p) => {
      this.tenant = e.tenantUuid;
      await this.#orders.put(e.aggregateUuid, { id: e.aggregateUuid, status: p.by % 2 === 1 ? "open" : "closed", placedAt: e.position });
    });
  }

  all(): ReadmodelCollection<Order> {
    return this.collection<Order>("orders");
  }

  newestOpen(): Promise<Order[]> {
    return this.#orders.list({ where: { status: "open" }, orderBy: "placedAt", descending: true, limit: 20 });
  }
}
