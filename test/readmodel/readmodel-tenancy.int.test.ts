/**
 * Tenants in custom readmodels, on memory, a SQLite file and a Postgres
 * schema: a BaseReadmodel with collections, queried through `ctx.readmodel`
 * from two tenants (and from a second instance on the same database), sees
 * only the effective tenant's documents; a `{ tenancy: "global" }`
 * collection is shared; trusted code is unscoped unless it names a tenant.
 * Stores written before documents carried a tenant are upgraded in place;
 * their documents are seen by unscoped reads only until a restore from zero.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { BaseReadmodel, createFacade, defineDomain, type Facade, type FacadeOptions, type RequestContext } from "mneme";
import type { ReadmodelCollection, ReadmodelStoreBackend } from "mneme/store";
import { createPostgresBackends } from "mneme/postgres";
import { createSqliteBackends } from "mneme/sqlite";
import { postgresScratch } from "../support/postgres-scratch.js";
import { alice, bob, sharedPlaces } from "../support/shared-places.js";
import { MemoryReadmodelStoreBackend } from "mneme/memory";

interface Book {
  title: string;
}

function libraryDomain() {
  const Lib = defineDomain("Lib");
  const AddBook = Lib.command<{ title: string }>("AddBook");
  const ListBooks = Lib.query<Record<string, never>, { titles: string[]; total: number; count: number; first?: string }>("ListBooks");
  const BookAdded = Lib.event<Book>("BookAdded");
  const TagBook = Lib.command<{ tag: string }>("TagBook");
  const BookTagged = Lib.event<{ tag: string }>("BookTagged");
  Lib.handleCommand(AddBook, (_ctx, c, p) => [BookAdded.create(c.commandUuid, { title: p.title })]);
  Lib.handleCommand(TagBook, (_ctx, c, p) => [BookTagged.create(c.commandUuid, { tag: p.tag })]);
  Lib.handleQuery(ListBooks, async (ctx) => {
    const shelf = ctx.readmodel<Shelf>("Shelf");
    const books = await shelf.books();
    const first = books[0] === undefined ? undefined : await shelf.book(books[0].key);
    return {
      titles: books.map((b) => b.title).sort(),
      total: await shelf.total(),
      count: await shelf.booksCollection.count(),
      ...(first === undefined ? {} : { first: first.title }),
    };
  });
  return { Lib, AddBook, ListBooks, BookAdded, TagBook, BookTagged };
}

type Library = ReturnType<typeof libraryDomain>;

/** The form docs/readmodels.md teaches: a BaseReadmodel with a tenant-scoped and a global collection. */
class Shelf extends BaseReadmodel {
  /** A collection handed out as a field: a tenant's view hands it out scoped. */
  readonly booksCollection: ReadmodelCollection<Book & { key: string }>;
  readonly #stats: ReadmodelCollection<{ n: number }>;

  constructor(facade: Facade, d: Library) {
    super(facade);
    this.domain = "Lib";
    this.name = "Shelf";
    this.booksCollection = this.collection("books");
    this.#stats = this.collection("stats", { tenancy: "global" });
    this.addDomainEventHandler(d.BookAdded, async (_ctx, e, p) => {
      await this.booksCollection.put(e.aggregateUuid, { key: e.aggregateUuid, title: p.title });
      const n = (await this.#stats.get("all"))?.n ?? 0;
      await this.#stats.put("all", { n: n + 1 });
    });
    // Keyed by a tag, which two tenants may both use: a key not unique to one tenant.
    this.tags = this.collection("tags");
    this.addDomainEventHandler(d.BookTagged, (_ctx, e, p) => this.tags.put(p.tag, { tag: p.tag, by: e.aggregateUuid }));
  }

  readonly tags: ReadmodelCollection<{ tag: string; by: string }>;

  retitle(key: string, title: string): Promise<void> {
    return this.booksCollection.put(key, { key, title });
  }

  remove(key: string): Promise<boolean> {
    return this.booksCollection.delete(key);
  }

  books(): Promise<(Book & { key: string })[]> {
    return this.booksCollection.list();
  }

  book(key: string): Promise<Book | undefined> {
    return this.booksCollection.get(key);
  }

  async total(): Promise<number> {
    return (await this.#stats.get("all"))?.n ?? 0;
  }
}

function start(stores: Partial<FacadeOptions>): { facade: Facade; d: Library; shelf: Shelf } {
  const d = libraryDomain();
  const facade = createFacade({ appName: "library", ...stores });
  facade.registerDomain(d.Lib);
  const shelf = new Shelf(facade, d);
  facade.registerReadmodel(shelf);
  return { facade, d, shelf };
}

const started: Facade[] = [];
afterEach(async () => {
  for (const f of started.splice(0).reverse()) await f.stop().catch(() => undefined);
});

async function running(stores: Partial<FacadeOptions>) {
  const one = start(stores);
  started.push(one.facade);
  await one.facade.start();
  return one;
}

async function titlesOf(one: { facade: Facade; d: Library }, reqCtx: RequestContext) {
  return one.facade.query(one.d.ListBooks, {}, { reqCtx });
}

describe.each(sharedPlaces("readmodel_tenancy"))("a BaseReadmodel's collections on %s", (name, place) => {
  it("ctx.readmodel sees only the effective tenant's documents; a global collection is shared; trusted code is unscoped", async () => {
    const stores = place();
    const one = await running(stores());
    const w = { waitToFinish: true } as const;
    await one.facade.dispatch(one.d.AddBook, { title: "Alice 1" }, { reqCtx: alice, ...w });
    await one.facade.dispatch(one.d.AddBook, { title: "Alice 2" }, { reqCtx: alice, ...w });
    await one.facade.dispatch(one.d.AddBook, { title: "Bob 1" }, { reqCtx: bob, ...w });

    expect(await titlesOf(one, alice)).toMatchObject({ titles: ["Alice 1", "Alice 2"], total: 3, count: 2 });
    expect(await titlesOf(one, bob)).toEqual({ titles: ["Bob 1"], total: 3, count: 1, first: "Bob 1" });
    // An administrator acting in tenant B (the target tenant) sees B's.
    expect((await titlesOf(one, { ...alice, targetTenantUuid: "tenant-b" })).titles).toEqual(["Bob 1"]);
    // A tenant with nothing sees nothing of the others, and still the global total.
    expect(await titlesOf(one, { ...alice, senderTenantUuid: "tenant-c" })).toEqual({ titles: [], total: 3, count: 0 });

    // Trusted code: unscoped, unless it names a tenant.
    expect((await one.shelf.books()).map((b) => b.title).sort()).toEqual(["Alice 1", "Alice 2", "Bob 1"]);
    expect((await one.shelf.asTenant("tenant-b").books()).map((b) => b.title)).toEqual(["Bob 1"]);
    expect(await one.shelf.asTenant("tenant-b").booksCollection.count()).toBe(1);
    const aliceBook = (await one.shelf.asTenant("tenant-a").books())[0]!;
    expect(await one.shelf.asTenant("tenant-b").book(aliceBook.key)).toBeUndefined();
    expect(await one.shelf.book(aliceBook.key)).toEqual({ key: aliceBook.key, title: aliceBook.title });

    if (name === "memory") return;
    // A second instance on the same database, whose readmodel stands by or runs: the same scoping, from the stored tenants.
    const two = await running(stores());
    expect((await titlesOf(two, alice)).titles).toEqual(["Alice 1", "Alice 2"]);
    expect((await titlesOf(two, bob)).titles).toEqual(["Bob 1"]);
  });

  it("a tenant's view or handler cannot replace or delete a key holding another tenant's document", async () => {
    const one = await running(place()());
    const w = { waitToFinish: true } as const;
    await one.facade.dispatch(one.d.AddBook, { title: "Alice 1" }, { reqCtx: alice, ...w });
    const key = (await one.shelf.books())[0]!.key;
    const asBob = one.shelf.asTenant("tenant-b");
    await expect(asBob.retitle(key, "mine now")).rejects.toMatchObject({ code: "CONFLICT" });
    expect(await asBob.remove(key)).toBe(false);
    // A collection handed out of the view: deleteMany and clear in Bob's scope too.
    expect(await asBob.booksCollection.deleteMany!([key])).toBe(0);
    await asBob.booksCollection.clear();
    expect(await one.shelf.asTenant("tenant-a").book(key)).toEqual({ key, title: "Alice 1" });
    // A handler of Bob's event writing the key Alice's event wrote: the batch fails, Alice's document stays.
    const tagged = await one.facade.dispatch(one.d.TagBook, { tag: "x" }, { reqCtx: alice, ...w });
    const taken = await one.facade.dispatch(one.d.TagBook, { tag: "x" }, { reqCtx: bob, ...w });
    expect(taken.handlerErrors.map((h) => [h.eventHandlerName, (h.error as { code?: string }).code, h.error.message])).toEqual([
      ["Shelf", "CONFLICT", expect.stringContaining("holds a document of another tenant")],
    ]);
    expect(await one.shelf.asTenant("tenant-a").tags.get("x")).toEqual({ tag: "x", by: tagged.events[0]!.aggregateUuid });
    expect(await asBob.tags.get("x")).toBeUndefined();
  });

  it("a restore from zero writes every document again with its event's tenant", async () => {
    const one = await running(place()());
    await one.facade.dispatch(one.d.AddBook, { title: "Alice 1" }, { reqCtx: alice, waitToFinish: true });
    await one.facade.dispatch(one.d.AddBook, { title: "Bob 1" }, { reqCtx: bob, waitToFinish: true });
    await one.facade.runtime.controlEventHandler({ action: "restore", eventHandlerName: "Shelf", restoreFromZero: true });
    expect(await titlesOf(one, alice)).toMatchObject({ titles: ["Alice 1"], total: 2 });
    expect(await titlesOf(one, bob)).toMatchObject({ titles: ["Bob 1"], total: 2 });
  });
});

describe("a ReadmodelStoreBackend without tenantScopes", () => {
  /** A third-party backend of the former interface: it delegates to memory but knows nothing of tenants. */
  function tenantBlind(): ReadmodelStoreBackend {
    const inner = new MemoryReadmodelStoreBackend();
    return {
      init: () => inner.init(),
      collection: <T>(name: string) => inner.collection<T>(name),
      listCollections: () => inner.listCollections(),
      transaction: (fn) => inner.transaction(fn),
      getCheckpoint: (h) => inner.getCheckpoint(h),
      setCheckpoint: (h, p) => inner.setCheckpoint(h, p),
      info: () => inner.info(),
      close: () => inner.close(),
    };
  }

  it("refuses a tenant's read (INVALID_STATE) rather than show every tenant's documents; handlers and trusted code go on", async () => {
    const one = await running({ readmodelStoreBackend: tenantBlind() });
    await one.facade.dispatch(one.d.AddBook, { title: "Alice 1" }, { reqCtx: alice, waitToFinish: true });
    await one.facade.dispatch(one.d.AddBook, { title: "Bob 1" }, { reqCtx: bob, waitToFinish: true });
    const err = await titlesOf(one, alice).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: "INVALID_STATE" });
    expect(String((err as Error).message)).toMatch(/tenantScopes/);
    expect((await one.shelf.books()).map((b) => b.title).sort()).toEqual(["Alice 1", "Bob 1"]);
    // A global collection needs no tenant: shared as ever.
    expect(await one.shelf.asTenant("tenant-a").total()).toBe(2);
  });
});

describe("stores written before documents carried a tenant", () => {
  const dir = mkdtempSync(join(tmpdir(), "mneme-rm-upgrade-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const pg = postgresScratch("mneme_rm_upgrade");

  /** Runs the library, then strips the tenants as a store of the former layout would hold them. */
  async function upgraded(stores: () => Partial<FacadeOptions>, strip: () => Promise<void>) {
    const old = start(stores());
    await old.facade.start();
    await old.facade.dispatch(old.d.AddBook, { title: "Alice 1" }, { reqCtx: alice, waitToFinish: true });
    await old.facade.dispatch(old.d.AddBook, { title: "Bob 1" }, { reqCtx: bob, waitToFinish: true });
    await old.facade.stop();
    await strip();
    const one = await running(stores());
    // Documents without a tenant: seen by unscoped reads only.
    expect((await one.shelf.books()).map((b) => b.title).sort()).toEqual(["Alice 1", "Bob 1"]);
    expect((await titlesOf(one, alice)).titles).toEqual([]);
    // A restore from zero gives them their tenants.
    await one.facade.runtime.controlEventHandler({ action: "restore", eventHandlerName: "Shelf", restoreFromZero: true });
    expect((await titlesOf(one, alice)).titles).toEqual(["Alice 1"]);
    expect((await titlesOf(one, bob)).titles).toEqual(["Bob 1"]);
  }

  it("SQLite: the column is added in place on init", async () => {
    const filename = join(dir, "old.db");
    await upgraded(
      () => createSqliteBackends({ filename }),
      async () => {
        const db = new Database(filename);
        try {
          // The former table: no tenant column.
          db.exec(`CREATE TABLE t AS SELECT collection, key, doc, updated_at FROM mneme_readmodel_documents;
                   DROP TABLE mneme_readmodel_documents;
                   CREATE TABLE mneme_readmodel_documents (collection TEXT NOT NULL, key TEXT NOT NULL, doc TEXT NOT NULL,
                     updated_at INTEGER NOT NULL, PRIMARY KEY (collection, key));
                   INSERT INTO mneme_readmodel_documents SELECT * FROM t; DROP TABLE t;`);
        } finally {
          db.close();
        }
      },
    );
    const db = new Database(filename, { readonly: true });
    try {
      const cols = db.prepare("SELECT name FROM pragma_table_info('mneme_readmodel_documents')").pluck().all();
      expect(cols).toContain("tenant_uuid");
      const plan = db
        .prepare("EXPLAIN QUERY PLAN SELECT doc FROM mneme_readmodel_documents WHERE collection = ? AND tenant_uuid = ? ORDER BY key")
        .all("Shelf:books", "tenant-a") as { detail: string }[];
      expect(plan.map((p) => p.detail).join(" ")).toMatch(/mneme_readmodel_documents_tenant/);
    } finally {
      db.close();
    }
  });

  it("Postgres: the column is added in place on init", async () => {
    const schema = pg.newSchema();
    await upgraded(
      () => createPostgresBackends({ pool: pg.pool, schema }),
      async () => {
        await pg.pool.query(`DROP TRIGGER mneme_refuse_unscoped ON "${schema}".readmodel_documents`);
        await pg.pool.query(`DROP INDEX "${schema}".readmodel_documents_tenant`);
        await pg.pool.query(`ALTER TABLE "${schema}".readmodel_documents DROP COLUMN tenant_uuid`);
      },
    );
    const cols = await pg.pool.query(
      "SELECT column_name FROM information_schema.columns WHERE table_schema = $1 AND table_name = 'readmodel_documents'",
      [schema],
    );
    expect(cols.rows.map((r: { column_name: string }) => r.column_name)).toContain("tenant_uuid");
  });
});
