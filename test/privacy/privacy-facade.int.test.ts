/**
 * Personal data through the facade, on memory, SQLite and Postgres: fields
 * stored encrypted (never in clear in the database), read in clear on every
 * read path (aggregate load, live delivery into a projection, restore from
 * zero, history, the event store), and after `facade.forget(subject)` read as
 * "[erased]" on all of them; a projection rebuilt from zero holds no trace, and
 * a scan of the database (the SQLite file and its -wal, every Postgres table of
 * the schema as text) finds none of the clear values. Also: SubjectForgotten
 * for readmodels, a subject used again after a forget, the durable-key-store
 * rule, a JSON-unsafe personal value refused with nothing written, and two
 * instances on one database.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { afterAll, describe, expect, it } from "vitest";
import {
  BaseReadmodel,
  createFacade,
  defineDomain,
  type Event,
  type EventType,
  type Facade,
  type FacadeOptions,
  ProjectionReadmodel,
} from "mneme";
import { createPostgresBackends } from "mneme/postgres";
import { createSqliteBackends } from "mneme/sqlite";
import type { EventRepository } from "mneme/store";
import { MemoryEventRepository } from "../../src/memory/memory-event-repository.js";
import { MemoryKeyStore } from "../../src/memory/memory-key-store.js";
import { SubjectForgotten } from "../../src/privacy/privacy-domain.js";
import { rejection } from "../support/rejections.js";

const reqCtx = { senderAccountUuid: "a", senderSessionUuid: "s", senderIdentityUuid: "i", senderTenantUuid: "t" };

const SECRETS = { email: "ann.secret@example.org", street: "742 Evergreen Terrace", name: "Annabel Secretname" };

interface AddContact {
  contactUuid: string;
  personUuid: string;
  email: string;
  name: string;
  street: string;
  city: string;
}
interface ContactAdded {
  personUuid: string;
  email: string;
  name: string;
  address: { street: string; city: string };
}
interface ContactState {
  email: string;
  name: string;
  street: string;
  city: string;
}

function contacts() {
  const D = defineDomain("Contacts");
  const Added = D.event<ContactAdded>("ContactAdded", {
    personalData: { subject: (p) => p.personUuid, fields: ["email", "name", "/address/street"] },
  });
  const Add = D.command<AddContact>("AddContact", { secretFields: ["email", "name", "street"] });
  const Bad = D.command<{ contactUuid: string; personUuid: string }>("AddBad");
  D.handleCommand(Add, (_ctx, _cmd, p) => [
    Added.create(p.contactUuid, { personUuid: p.personUuid, email: p.email, name: p.name, address: { street: p.street, city: p.city } }),
  ]);
  D.handleCommand(Bad, (_ctx, _cmd, p) => [
    Added.create(p.contactUuid, {
      personUuid: p.personUuid,
      email: Number.NaN as unknown as string,
      name: "x",
      address: { street: "s", city: "c" },
    }),
  ]);
  const Contact = D.aggregate<ContactState>("Contact", {
    initialState: () => ({ email: "", name: "", street: "", city: "" }),
    evolve: { ContactAdded: (_s, p: ContactAdded) => ({ email: p.email, name: p.name, street: p.address.street, city: p.address.city }) },
  });
  return { D, Add, Bad, Contact, Added };
}

/** A readmodel that keeps its own copy of e-mails and drops it on SubjectForgotten: the duty docs/privacy.md describes. */
class MailingList extends BaseReadmodel {
  readonly entries;
  constructor(facade: Facade, added: EventType<ContactAdded>) {
    super(facade);
    this.domain = "Contacts";
    this.name = "MailingList";
    this.entries = this.collection<{ personUuid: string; email: string }>("entries");
    this.addDomainEventHandler(added, (_ctx, _e, p) => this.entries.put(p.personUuid, { personUuid: p.personUuid, email: p.email }));
    this.addDomainEventHandler(SubjectForgotten, async (_ctx, _e, p) => {
      await this.entries.delete(p.subject);
    });
  }
}

interface World {
  readonly name: string;
  /** Stores for one facade on the shared database (a new instance each call). */
  stores(): FacadeOptions;
  /** Every byte / row of the database as text, for the secret scan (after the facades stopped). */
  scan(): Promise<string>;
  /** Called before the facade stops (the memory world reads its stores then). */
  beforeStop?(f: Facade): Promise<void>;
  cleanup(): Promise<void>;
}

const dir = mkdtempSync(join(tmpdir(), "mneme-privacy-"));
const DATABASE_URL = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test";
const pool = new pg.Pool({ connectionString: DATABASE_URL, max: 4 });
pool.on("error", () => {});
afterAll(async () => {
  rmSync(dir, { recursive: true, force: true });
  await pool.end();
});

function memoryWorld(): World {
  const eventRepository = new MemoryEventRepository();
  let text = "";
  return {
    name: "memory",
    stores: () => ({ eventRepository }),
    beforeStop: async (f) => {
      const raw: Event[] = [];
      for await (const page of eventRepository.readAll()) raw.push(...page);
      const models: unknown[] = [];
      for (const name of await f.readmodelStoreBackend.listCollections())
        models.push(await f.readmodelStoreBackend.collection(name).list({}));
      text = JSON.stringify([raw, await f.commandStore.list({}), models]);
    },
    scan: async () => text,
    cleanup: async () => {},
  };
}

let fileNo = 0;
function sqliteWorld(): World {
  const filename = join(dir, `p${++fileNo}.db`);
  return {
    name: "sqlite",
    stores: () => {
      const b = createSqliteBackends({ filename });
      return { ...b, close: b.close };
    },
    scan: async () =>
      Buffer.concat([filename, `${filename}-wal`].filter((f) => existsSync(f)).map((f) => readFileSync(f))).toString("latin1"),
    cleanup: async () => {},
  };
}

function postgresWorld(): World {
  const schema = `mneme_priv_${Math.random().toString(36).slice(2, 12)}`;
  return {
    name: "postgres",
    stores: () => {
      const b = createPostgresBackends({ pool, schema, pollIntervalMs: 50 });
      return { ...b, close: b.close };
    },
    scan: async () => {
      const { rows } = await pool.query<{ table_name: string }>(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = $1",
        [schema],
      );
      let out = "";
      for (const r of rows) {
        const dump = await pool.query<{ t: string }>(`SELECT t::text AS t FROM "${schema}"."${r.table_name}" t`);
        out += dump.rows.map((x) => x.t).join("\n");
      }
      return out;
    },
    cleanup: async () => {
      await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    },
  };
}

async function started(
  world: World,
): Promise<{ f: Facade; c: ReturnType<typeof contacts>; projection: ProjectionReadmodel<ContactState>; list: MailingList }> {
  const c = contacts();
  const f = createFacade({ appName: "privacy", ...world.stores(), systemEvents: true });
  f.registerDomain(c.D);
  const projection = new ProjectionReadmodel(f, { aggregate: c.Contact, name: "Contacts" });
  f.registerReadmodel(projection);
  const list = new MailingList(f, c.Added);
  f.registerReadmodel(list);
  await f.start();
  return { f, c, projection, list };
}

async function allEvents(repo: EventRepository): Promise<Event[]> {
  const out: Event[] = [];
  for await (const page of repo.readAll()) out.push(...page);
  return out;
}

const ann = (contactUuid: string): AddContact => ({
  contactUuid,
  personUuid: "person-ann",
  email: SECRETS.email,
  name: SECRETS.name,
  street: SECRETS.street,
  city: "Springfield",
});

describe.each([
  ["memory", memoryWorld],
  ["sqlite", sqliteWorld],
  ["postgres", postgresWorld],
])("personal data on %s", (_name, makeWorld) => {
  it("is stored encrypted, read in clear on every path, and erased everywhere after forget", async () => {
    const world = makeWorld();
    const { f, c, projection, list } = await started(world);
    try {
      await f.dispatch(c.Add, ann("c1"), { reqCtx, waitToFinish: true });
      await f.dispatch(
        c.Add,
        { ...ann("c2"), personUuid: "person-bob", email: "bob@example.org", name: "Bob", street: "1 Bob Road" },
        { reqCtx, waitToFinish: true },
      );

      // Stored: sealed. Read: clear.
      const raw = await allEvents((f.eventRepository as unknown as { stored: EventRepository }).stored);
      const rawText = JSON.stringify(raw);
      for (const s of Object.values(SECRETS)) expect(rawText).not.toContain(s);
      expect(rawText).toContain("Springfield");
      expect((await f.loadAggregate(c.Contact, "c1")).state).toEqual({
        email: SECRETS.email,
        name: SECRETS.name,
        street: SECRETS.street,
        city: "Springfield",
      });
      expect((await projection.getModel("c1"))?.model.email).toBe(SECRETS.email);
      expect((await list.entries.get("person-ann"))?.email).toBe(SECRETS.email);
      const history = await projection.getModel("c1", { includeHistory: true });
      expect(history?.historyEvents?.[0]?.domainEvtData).toContain(SECRETS.email);

      expect(await f.forget("person-ann")).toEqual({ keysDeleted: 1 });
      // Every system event from here on (appends, the restore below, its progress) is scanned too.
      const published: unknown[] = [];
      f.runtime.systemEvents.subscribe((e) => {
        published.push(e);
      });
      expect(await f.forget("person-ann")).toEqual({ keysDeleted: 0 });

      // Every read path: erased for Ann, clear for Bob.
      expect((await f.loadAggregate(c.Contact, "c1")).state).toEqual({
        email: "[erased]",
        name: "[erased]",
        street: "[erased]",
        city: "Springfield",
      });
      expect((await f.loadAggregate(c.Contact, "c2")).state.email).toBe("bob@example.org");
      const read = await allEvents(f.eventRepository);
      const added = read.filter((e) => e.name === "ContactAdded");
      expect(added.map((e) => (e.payload as ContactAdded).email)).toEqual(["[erased]", "bob@example.org"]);
      expect((added[0]?.payload as ContactAdded).address).toEqual({ street: "[erased]", city: "Springfield" });
      const forgotten = read.filter((e) => e.name === "SubjectForgotten");
      expect(forgotten.map((e) => e.payload)).toEqual([
        { subject: "person-ann", keysDeleted: 1 },
        { subject: "person-ann", keysDeleted: 0 },
      ]);
      const erasedHistory = await projection.getModel("c1", { includeHistory: true });
      expect(erasedHistory?.historyEvents?.[0]?.domainEvtData).not.toContain(SECRETS.email);
      expect(erasedHistory?.historyEvents?.[0]?.domainEvtData).toContain("[erased]");
      // The readmodel that keeps a copy dropped it on SubjectForgotten (waitToFinish covers it: handlers passed the head).
      await f.dispatch(
        c.Add,
        { ...ann("c3"), personUuid: "person-cid", email: "cid@example.org", name: "Cid", street: "3 Cid Lane" },
        { reqCtx, waitToFinish: true },
      );
      expect(await list.entries.get("person-ann")).toBeUndefined();
      expect((await list.entries.get("person-bob"))?.email).toBe("bob@example.org");

      // The projection still holds its live copy until it is rebuilt from zero: then no trace.
      await f.runtime.controlEventHandler({ eventHandlerName: "Contacts", action: "restore", restoreFromZero: true });
      expect((await projection.getModel("c1"))?.model).toEqual({
        email: "[erased]",
        name: "[erased]",
        street: "[erased]",
        city: "Springfield",
      });
      expect((await projection.getModel("c2"))?.model.email).toBe("bob@example.org");
      expect(published.length).toBeGreaterThan(0);
      const publishedText = JSON.stringify(published);
      for (const secret of Object.values(SECRETS)) expect(publishedText).not.toContain(secret);
      await world.beforeStop?.(f);
    } finally {
      await f.stop();
    }
    const scanned = await world.scan();
    for (const s of Object.values(SECRETS)) expect(scanned, `${s} found in the ${world.name} database`).not.toContain(s);
    expect(scanned).toContain("Springfield");
    await world.cleanup();
  }, 60_000);

  it("a subject used again after forget gets a new key: old fields stay erased, new ones read", async () => {
    const world = makeWorld();
    const { f, c } = await started(world);
    try {
      await f.dispatch(c.Add, ann("c1"), { reqCtx, waitToFinish: true });
      await f.forget("person-ann");
      await f.dispatch(c.Add, { ...ann("c2"), email: "ann.new@example.org" }, { reqCtx, waitToFinish: true });
      expect((await f.loadAggregate(c.Contact, "c1")).state.email).toBe("[erased]");
      expect((await f.loadAggregate(c.Contact, "c2")).state.email).toBe("ann.new@example.org");
    } finally {
      await f.stop();
    }
    await world.cleanup();
  }, 60_000);

  it("a personal value that is not JSON-safe is INVALID_EVENTS and nothing is written", async () => {
    const world = makeWorld();
    const { f, c } = await started(world);
    try {
      const head = await f.eventRepository.headPosition();
      const e = await rejection(f.dispatch(c.Bad, { contactUuid: "c9", personUuid: "p9" }, { reqCtx }));
      expect(e.code).toBe("INVALID_EVENTS");
      expect(await f.eventRepository.headPosition()).toBe(head);
    } finally {
      await f.stop();
    }
    await world.cleanup();
  }, 60_000);
});

describe("two instances on one database", () => {
  it.each([
    ["sqlite", sqliteWorld],
    ["postgres", postgresWorld],
  ])(
    "%s: a forget on one instance erases on the other within keyCacheTtlMs",
    async (_n, makeWorld) => {
      const world = makeWorld();
      const c = contacts();
      const f1 = createFacade({ appName: "one", ...world.stores(), personalData: { keyCacheTtlMs: 0 } }).registerDomain(c.D);
      const f2 = createFacade({ appName: "two", ...world.stores(), personalData: { keyCacheTtlMs: 0 } }).registerDomain(c.D);
      await f1.start();
      await f2.start();
      try {
        await f1.dispatch(c.Add, ann("c1"), { reqCtx });
        expect((await f2.loadAggregate(c.Contact, "c1")).state.email).toBe(SECRETS.email);
        await f1.forget("person-ann");
        const events = await f2.eventRepository.loadAggregate("c1");
        expect((events[0]?.payload as ContactAdded).email).toBe("[erased]");
      } finally {
        await f1.stop();
        await f2.stop();
      }
      await world.cleanup();
    },
    60_000,
  );
});

describe("personal data and upcasting", () => {
  it("upcasters see the clear values of an older shape, and [erased] after forget", async () => {
    const eventRepository = new MemoryEventRepository();
    const keyStore = new MemoryKeyStore();
    const v1 = defineDomain("People");
    v1.event<{ personUuid: string; name: string }>("Registered", { personalData: { subject: (p) => p.personUuid, fields: ["name"] } });
    const writer = createFacade({ appName: "v1", eventRepository, keyStore }).registerDomain(v1);
    await writer.start();
    await writer.eventRepository.append([
      { domain: "People", name: "Registered", aggregateUuid: "p1", payload: { personUuid: "ann", name: "Ann Upcast" } },
    ]);
    const raw = JSON.stringify(await allEvents((writer.eventRepository as unknown as { stored: EventRepository }).stored));
    expect(raw).not.toContain("Ann Upcast");

    const v2 = defineDomain("People");
    const seen: unknown[] = [];
    v2.event<{ personUuid: string; fullName: string; upper: string }>("Registered", {
      version: 2,
      upcasters: {
        1: (p: { personUuid: string; name: string }) => {
          seen.push(p.name);
          return { personUuid: p.personUuid, fullName: p.name, upper: p.name.toUpperCase() };
        },
      },
      personalData: { subject: (p) => p.personUuid, fields: ["fullName", "upper"] },
    });
    const reader = createFacade({ appName: "v2", eventRepository, keyStore }).registerDomain(v2);
    await reader.start();
    const [before] = await reader.eventRepository.loadAggregate("p1");
    expect(before?.payload).toEqual({ personUuid: "ann", fullName: "Ann Upcast", upper: "ANN UPCAST" });
    await reader.forget("ann");
    const [after] = await reader.eventRepository.loadAggregate("p1");
    expect(after?.payload).toEqual({ personUuid: "ann", fullName: "[erased]", upper: "[ERASED]" });
    expect(seen).toEqual(["Ann Upcast", "[erased]"]);
    await reader.stop();
  });
});

describe("concurrent first events of new subjects", () => {
  it.each([
    ["sqlite", sqliteWorld],
    ["postgres", postgresWorld],
  ])(
    "%s: two instances appending for the same new subjects make one key each, and every event reads on both",
    async (_n, makeWorld) => {
      const world = makeWorld();
      const c = contacts();
      const f1 = createFacade({ appName: "one", ...world.stores() }).registerDomain(c.D);
      const f2 = createFacade({ appName: "two", ...world.stores() }).registerDomain(c.D);
      await f1.start();
      await f2.start();
      try {
        const subjects = ["s0", "s1", "s2", "s3", "s4"];
        await Promise.all(
          Array.from({ length: 40 }, (_, i) =>
            (i % 2 === 0 ? f1 : f2).dispatch(
              c.Add,
              { ...ann(`c${i}`), personUuid: subjects[i % subjects.length]!, email: `e${i}@example.org` },
              { reqCtx },
            ),
          ),
        );
        for (const f of [f1, f2]) {
          const added = (await allEvents(f.eventRepository)).filter((e) => e.name === "ContactAdded");
          expect(added).toHaveLength(40);
          for (const e of added) expect((e.payload as ContactAdded).email).toBe(`e${e.aggregateUuid.slice(1)}@example.org`);
        }
        const keys = await Promise.all(subjects.map((s) => f1.keyStore.keyOf(s)));
        expect(keys.every((k) => k !== undefined)).toBe(true);
        expect((await f1.keyStore.info()).numItems).toBe(subjects.length);
      } finally {
        await f1.stop();
        await f2.stop();
      }
      await world.cleanup();
    },
    60_000,
  );
});

describe("the key store of a durable event repository", () => {
  it("events with personal data are refused when the key store would be the in-memory default", async () => {
    const filename = join(dir, "no-keys.db");
    const b = createSqliteBackends({ filename });
    const c = contacts();
    const { keyStore: _unused, ...withoutKeys } = b;
    const f = createFacade({ appName: "no-keys", ...withoutKeys }).registerDomain(c.D);
    await f.start();
    try {
      const e = await rejection(f.dispatch(c.Add, ann("c1"), { reqCtx }));
      expect(e.code).toBe("INVALID_STATE");
      expect(await f.eventRepository.headPosition()).toBe(0);
    } finally {
      await f.stop();
      await b.keyStore.close();
    }
  });
});
