/**
 * Keeps docs/evolution.md honest: every example of examples/evolution/ runs
 * here (each on a SQLite file of its own) and what it observes is checked;
 * every ts block of the page must be code of those files (line by line,
 * indentation aside), and every repository path it names must exist.
 */
import { existsSync, readdirSync, readFileSync } from "node:fs";
import pg from "pg";
import { afterAll, describe, expect, it } from "vitest";
import {
  BaseReadmodel,
  createFacade,
  defineDomain,
  type Event,
  type Facade,
  type FacadeOptions,
  isMnemeError,
  newUuid,
  on,
  registerStorePermissions,
} from "mneme";
import { createPostgresBackends } from "mneme/postgres";
import { createSqliteBackends } from "mneme/sqlite";
import { createTestFacade, scenario, testReqCtx } from "mneme/testing";
import { main as badInput } from "../../examples/evolution/bad-input.js";
import { main as changingAFold } from "../../examples/evolution/changing-a-fold.js";
import { main as changingAnEvent } from "../../examples/evolution/changing-an-event.js";
import { main as rebuildingAReadmodel } from "../../examples/evolution/rebuilding-a-readmodel.js";
import { main as renamingAnEvent } from "../../examples/evolution/renaming-an-event.js";
import { main as rollingDeploy } from "../../examples/evolution/rolling-deploy.js";
import { main as splittingAnEvent } from "../../examples/evolution/splitting-an-event.js";
import { reqCtx, workspace } from "../../examples/evolution/workspace.js";

const read = (path: string): string => readFileSync(new URL(`../../${path}`, import.meta.url), "utf8");

/** The ts code blocks of a markdown text. */
function tsBlocks(markdown: string): string[] {
  return [...markdown.matchAll(/```ts\n([\s\S]*?)```/g)].map((m) => m[1]!);
}

/** Lines without their indentation and trailing blanks. */
const lines = (text: string): string[] => text.split("\n").map((l) => l.trim());

/** True when the block's lines occur one after another in the file (a "// ..." line stands for lines left out). */
function occursIn(block: string, file: string): boolean {
  const parts = lines(block)
    .filter((l, i, all) => l !== "" || (i > 0 && i < all.length - 1))
    .join("\n")
    .split(/\n?\/\/ \.\.\.\n?/)
    .map((p) => p.split("\n"));
  const f = lines(file);
  let from = 0;
  for (const part of parts) {
    let found = -1;
    for (let i = from; i + part.length <= f.length && found < 0; i++) if (part.every((l, k) => f[i + k] === l)) found = i;
    if (found < 0) return false;
    from = found + part.length;
  }
  return true;
}

describe("the examples of docs/evolution.md", () => {
  it("changing an event: old and new events read as the current version; the stored payload stays as written", async () => {
    expect(await changingAnEvent()).toEqual({
      read: [
        ["PriceSet", { cents: 999, currency: "EUR" }, 3],
        ["PriceSet", { cents: 1250, currency: "CHF" }, 3],
      ],
      stored: [
        ["PriceSet", { amount: 9.99 }, undefined],
        ["PriceSet", { cents: 1250, currency: "CHF" }, 3],
      ],
      product: { cents: 999, currency: "EUR" },
    });
  });

  it("renaming an event: a filter and a handler on the new name find the events stored under the old one", async () => {
    expect(await renamingAnEvent()).toEqual({
      filtered: ["LoanStarted b-1", "LoanStarted b-2", "LoanStarted b-3"],
      adaLoans: 2,
      storedNames: ["BookLent", "BookLent", "LoanStarted"],
    });
  });

  it("splitting an event: the old type folded beside the new ones, and a copy-and-transform into a new store", async () => {
    const address = { street: "1 Main St", city: "Shelbyville" };
    expect(await splittingAnEvent()).toEqual({
      release2: address,
      projection: address,
      release3: address,
      copied: ["1:StreetChanged", "2:CityChanged", "3:CityChanged"],
    });
  });

  it("changing a fold: snapshots of the old snapshotVersion are ignored, kept until pruned, then deleted", async () => {
    expect(await changingAFold()).toEqual({
      state: { balance: 400, deposits: 3 },
      snapshotVersions: [1, 2],
      deleted: 1,
      afterCleanup: [undefined, 2],
    });
  });

  it("rebuilding a readmodel: readers see the old documents until the switch; the Runtime shows the progress", async () => {
    const r = await rebuildingAReadmodel();
    expect(r).toMatchObject({
      before: "9.99",
      during: "9.99",
      progress: { phase: "rebuilding", position: 2, targetHead: 3, servedPosition: 3, eventsReplayed: 2 },
      secondRestore: "INVALID_STATE",
      after: "EUR 9.99",
      replayed: "restored at 3",
    });
    expect(r.progress?.eventsPerSecond).toBeGreaterThan(0);
  });

  it("rolling deploy: the older release refuses events of a newer version (UPCAST_FAILED) and the newer one takes over", async () => {
    expect(await rollingDeploy()).toEqual({
      newReadsOld: { seat: "A1", row: 0 },
      oldReadsNew: "UPCAST_FAILED",
      oldCommand: "UPCAST_FAILED",
      oldHandler: "failed at 1",
      newHandlerMeanwhile: "standby",
      newHandlerAfter: "running at 2",
      model: { seat: "B7", row: 2 },
    });
  });

  it("bad input: each mistake has its code; an upcast payload is trusted (JSON-safe checked, the schema not)", async () => {
    expect(await badInput()).toEqual({
      "version 2 without upcasters[1]": "INVALID_DOMAIN",
      "an upcaster for no older version": "INVALID_DOMAIN",
      "renamedFrom an existing event": "INVALID_DOMAIN",
      "snapshotVersion 0": "INVALID_DOMAIN",
      "an evolve key with a former name": "INVALID_DOMAIN",
      "an upcaster that throws": "UPCAST_FAILED",
      "an upcaster that returns NaN": "UPCAST_FAILED",
      "an upcaster that breaks the schema": { stars: undefined },
      "a correct upcaster": { stars: 4 },
      "restore an unknown handler": "UNKNOWN_EVENT_HANDLER",
      "restoreFromZero not a boolean": "INVALID_REQUEST",
      "exceptSnapshotVersion 0": "INVALID_REQUEST",
      "the event's schema": ["stars"],
    });
  });
});

describe("what docs/evolution.md says about an older release", () => {
  it("skips an event whose name it does not know (a rename or a new event of a newer release): no error, no effect", async () => {
    const ws = workspace("older-release");
    try {
      const older = defineDomain("Library");
      const BookLent = older.event<{ reader: string }>("BookLent");
      const Book = older.aggregate<{ loans: number }>("Book", {
        initialState: () => ({ loans: 0 }),
        evolve: [on(BookLent, (s) => ({ loans: s.loans + 1 }))],
      });
      const newer = defineDomain("Library");
      const LoanStarted = newer.event<{ reader: string }>("LoanStarted", { renamedFrom: "BookLent" });
      const Lend = newer.command<{ bookUuid: string }>("Lend");
      newer.handleCommand(Lend, (_ctx, _cmd, p) => [LoanStarted.create(p.bookUuid, { reader: "ada" })]);

      const fNew = createFacade({ appName: "library", ...createSqliteBackends({ filename: ws.filename }) }).registerDomain(newer);
      await fNew.start();
      await fNew.dispatch(Lend, { bookUuid: "b-1" }, { reqCtx });
      const fOld = createFacade({ appName: "library", ...createSqliteBackends({ filename: ws.filename }) }).registerDomain(older);
      await fOld.start();
      try {
        const events: Event[] = [];
        for await (const page of fOld.eventRepository.readAll()) events.push(...page);
        expect(events.map((e) => e.name)).toEqual(["LoanStarted"]); // read as stored: the older release has no such name
        expect(await fOld.loadAggregate(Book, "b-1")).toEqual({ state: { loans: 0 }, version: 1 }); // its fold skips it
      } finally {
        await fOld.stop();
        await fNew.stop();
      }
    } finally {
      ws.remove();
    }
  });
});

const DATABASE_URL = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test";
const admin = new pg.Pool({ connectionString: DATABASE_URL, max: 2 });
const schemas: string[] = [];
const spaces: { remove(): void }[] = [];
afterAll(async () => {
  for (const s of schemas) await admin.query(`DROP SCHEMA IF EXISTS "${s}" CASCADE`);
  await admin.end();
  for (const w of spaces) w.remove();
});

/** Two instances' stores on one database: each call opens its own connections. */
const databases: [string, () => () => FacadeOptions][] = [
  [
    "SQLite",
    () => {
      const ws = workspace("side-by-side");
      spaces.push(ws);
      return () => createSqliteBackends({ filename: ws.filename, pollIntervalMs: 20 });
    },
  ],
  [
    "Postgres",
    () => {
      const schema = `mneme_evo_${newUuid().replace(/-/g, "").slice(-16)}`;
      schemas.push(schema);
      return () => createPostgresBackends({ connectionString: DATABASE_URL, schema, poolSize: 4, pollIntervalMs: 20 });
    },
  ],
];

describe.each(databases)("side by side on %s: a newer release reads what an older one writes, live", (_name, databaseOf) => {
  it("an instance of the newer release processes the readmodel: events of the old name and version arrive upcast", async () => {
    const stores = databaseOf();
    const older = defineDomain("Library");
    const BookLent = older.event<{ reader: string }>("BookLent");
    const Lend = older.command<{ bookUuid: string; reader: string }>("Lend");
    older.handleCommand(Lend, (_ctx, _cmd, p) => [BookLent.create(p.bookUuid, { reader: p.reader })]);

    const newer = defineDomain("Library");
    const LoanStarted = newer.event<{ reader: string; days: number }>("LoanStarted", {
      renamedFrom: "BookLent",
      version: 2,
      upcasters: { 1: (p: { reader: string }) => ({ ...p, days: 14 }) },
    });
    class Loans extends BaseReadmodel {
      readonly seen: string[] = [];
      constructor(facade: Facade) {
        super(facade);
        this.domain = "Library";
        this.name = "Loans";
        this.addDomainEventHandler(LoanStarted, (ctx, event, p) => {
          this.seen.push(
            `${event.position} ${event.name} v${event.eventVersion ?? 1} ${p.reader} ${p.days} ${ctx.restoring ? "replay" : "live"}`,
          );
        });
      }
    }

    const fNew = createFacade({ appName: "library", ...stores() }).registerDomain(newer);
    const loans = new Loans(fNew);
    fNew.registerReadmodel(loans);
    await fNew.start(); // first: it holds the readmodel's processing lock
    const fOld = createFacade({ appName: "library", ...stores() }).registerDomain(older);
    await fOld.start();
    try {
      await fOld.dispatch(Lend, { bookUuid: "b-1", reader: "ada" }, { reqCtx });
      await fOld.dispatch(Lend, { bookUuid: "b-2", reader: "alan" }, { reqCtx });
      for (let i = 0; i < 1000 && loans.lastPosition < 2; i++) await new Promise((r) => setTimeout(r, 10));
      expect(loans.seen).toEqual(["1 LoanStarted v2 ada 14 live", "2 LoanStarted v2 alan 14 live"]);
      expect(loans.lastPosition).toBe(2);
    } finally {
      await fOld.stop();
      await fNew.stop();
    }
  });
});

describe.each(databases)("side by side on %s: an older release meets an event of a newer version", (_name, databaseOf) => {
  it("its readmodel fails at the event and keeps the lock; when it stops, the newer instance takes over from the checkpoint", async () => {
    const stores = databaseOf();
    const older = defineDomain("Venue");
    const SoldV1 = older.event<{ seat: string }>("Sold");
    const newer = defineDomain("Venue");
    const Sold = newer.event<{ seat: string; row: number }>("Sold", {
      version: 2,
      upcasters: { 1: (p: { seat: string }) => ({ ...p, row: 0 }) },
    });
    const Sell = newer.command<{ ticketUuid: string; seat: string; row: number }>("Sell");
    newer.handleCommand(Sell, (_ctx, _cmd, p) => [Sold.create(p.ticketUuid, { seat: p.seat, row: p.row })]);
    const seatsOf = (facade: Facade, type: typeof SoldV1 | typeof Sold) => {
      const seats = new (class extends BaseReadmodel {
        readonly seen: unknown[] = [];
        constructor() {
          super(facade);
          this.domain = "Venue";
          this.name = "Seats";
          this.addDomainEventHandler(type, (_ctx, event) => void this.seen.push(event.payload));
        }
      })();
      facade.registerReadmodel(seats);
      return seats;
    };
    const fOld = createFacade({ appName: "venue", ...stores() }).registerDomain(older);
    const oldSeats = seatsOf(fOld, SoldV1);
    await fOld.start();
    const fNew = createFacade({ appName: "venue", ...stores() }).registerDomain(newer);
    const newSeats = seatsOf(fNew, Sold);
    await fNew.start();
    const state = (f: Facade) => f.runtime.listEventHandlers().find((h) => h.name === "Seats")!;
    try {
      await fNew.dispatch(Sell, { ticketUuid: "t-1", seat: "B7", row: 2 }, { reqCtx });
      for (let i = 0; i < 1000 && state(fOld).state !== "failed"; i++) await new Promise((r) => setTimeout(r, 10));
      expect(state(fOld)).toMatchObject({ state: "failed", lastPosition: 0 });
      expect(state(fOld).lastError).toMatch(/written by a newer release/);
      expect(oldSeats.seen).toEqual([]);
      expect(state(fNew).state).toBe("standby");
      await fOld.stop();
      for (let i = 0; i < 2000 && newSeats.lastPosition < 1; i++) await new Promise((r) => setTimeout(r, 10));
      expect(state(fNew)).toMatchObject({ state: "running", lastPosition: 1 });
      expect(newSeats.seen).toEqual([{ seat: "B7", row: 2 }]);
    } finally {
      await fOld.stop();
      await fNew.stop();
    }
  });
});

describe("an event of a newer version appended without dispatch", () => {
  // `Type.create` stamps the type's current version, so an event appended any other way than by a command
  // (scenario's `given`, a copy or import tool) is stored as the version its payload is in, and read back unchanged.
  it("scenario.given of a version-2 event reads back as written", async () => {
    const Shop = defineDomain("Shop");
    const PriceSet = Shop.event<{ cents: number; currency: string }>("PriceSet", {
      version: 2,
      upcasters: { 1: (p: { cents: number }) => ({ ...p, currency: "EUR" }) },
    });
    const Product = Shop.aggregate<{ currency: string }>("Product", {
      initialState: () => ({ currency: "" }),
      evolve: [on(PriceSet, (_s, p) => ({ currency: p.currency }))],
    });
    const Checked = Shop.event<{ currency: string }>("Checked");
    const Check = Shop.command<{ productUuid: string }>("Check");
    Shop.handleCommand(Check, async (ctx, _cmd, p) => {
      const product = await ctx.aggregates.load(Product, p.productUuid);
      return [Checked.create(p.productUuid, { currency: product.state.currency })];
    });
    const facade = await createTestFacade({ domains: [Shop] });
    try {
      await scenario(facade)
        .given([PriceSet.create("p-1", { cents: 1250, currency: "CHF" })])
        .when(Check, { productUuid: "p-1" }, { reqCtx: testReqCtx })
        .then([Checked.create("p-1", { currency: "CHF" })]);
    } finally {
      await facade.stop();
    }
  });
});

describe("a stored event whose upcaster throws", () => {
  it("fails the Runtime's EventStore page that holds it; the backend's own repository still reads it as stored", async () => {
    const ws = workspace("inspect");
    try {
      const v1 = defineDomain("Reviews");
      const Rated1 = v1.event<{ score: number }>("Rated");
      const f1 = createFacade({ appName: "reviews", ...createSqliteBackends({ filename: ws.filename }) }).registerDomain(v1);
      await f1.start();
      await f1.eventRepository.append([Rated1.create("r-1", { score: 7 }), Rated1.create("r-2", { score: -1 })]);
      await f1.stop();

      const v2 = defineDomain("Reviews");
      v2.event<{ stars: number }>("Rated", {
        version: 2,
        upcasters: {
          1: (p: { score: number }) => {
            if (p.score < 0) throw new Error("a negative score");
            return { stars: Math.round(p.score / 2) };
          },
        },
      });
      // Every permission granted: an administrator.
      const f2 = createFacade({ appName: "reviews", authorizer: () => undefined, ...createSqliteBackends({ filename: ws.filename }) });
      f2.registerDomain(v2);
      registerStorePermissions(f2);
      await f2.start();
      try {
        const page = await f2.runtime.stores.read("event", reqCtx).then(
          () => "read",
          (e: unknown) => (isMnemeError(e) ? `${e.code}: ${e.message}` : "not a MnemeError"),
        );
        expect(page).toMatch(
          /^UPCAST_FAILED: event Reviews.Rated at position 2 \(version 1\): the upcaster from version 1 to 2 threw: a negative score/,
        );
        const first = await f2.runtime.stores.read("event", reqCtx, { limit: 1 });
        expect(first.items).toMatchObject([{ payload: { stars: 4 }, eventVersion: 2 }]); // a page without it is read
      } finally {
        await f2.stop();
      }
      const raw = createSqliteBackends({ filename: ws.filename }).eventRepository;
      await raw.init();
      const stored: Event[] = [];
      for await (const batch of raw.readAll()) stored.push(...batch);
      await raw.close();
      expect(stored.map((e) => e.payload)).toEqual([{ score: 7 }, { score: -1 }]);
    } finally {
      ws.remove();
    }
  });
});

describe("docs/evolution.md", () => {
  const page = read("docs/evolution.md");
  const examples = readdirSync(new URL("../../examples/evolution/", import.meta.url))
    .filter((f) => f.endsWith(".ts"))
    .map((f) => read(`examples/evolution/${f}`));

  it("every ts block is code of examples/evolution/", () => {
    const blocks = tsBlocks(page);
    expect(blocks.length).toBeGreaterThan(5);
    expect(blocks.filter((b) => !examples.some((e) => occursIn(b, e)))).toEqual([]);
  });

  it("has no code block that is not ts (so none escapes the check above)", () => {
    expect([...page.matchAll(/```(\w*)\n/g)].map((m) => m[1]).filter((lang, i) => i % 2 === 0 && lang !== "ts")).toEqual([]);
  });

  it("every repository path it names exists", () => {
    const paths = [...page.matchAll(/\b((?:src|test|examples|docs|bench)\/[\w./-]*\w)/g)].map((m) => m[1]!);
    expect(paths.length).toBeGreaterThan(0);
    expect(paths.filter((p) => !existsSync(new URL(`../../${p}`, import.meta.url)))).toEqual([]);
  });

  it("is linked from the README's docs list", () => {
    expect(read("README.md")).toContain("[docs/evolution.md](docs/evolution.md)");
  });
});
