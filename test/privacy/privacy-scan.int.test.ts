/**
 * The privacy scan: one app that stores payloads in every part mneme keeps
 * them (events, command records, a process manager's outbox, a scheduled
 * command, a dead letter, aggregate snapshots, readmodel documents, logs,
 * system events, HTTP responses), on SQLite (a real file) and Postgres (a
 * schema of its own). After `forget` and the documented clean-up
 * (`scrubStorage`), with the app still running, neither the SQLite file nor
 * its -wal, nor any row of any table of the Postgres schema (enumerated from
 * information_schema, so a new table is scanned without a change here) holds
 * any of the subject's clear values, and every read path shows "[erased]".
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { afterAll, describe, expect, it } from "vitest";
import { BaseReadmodel, createFacade, defineDomain, type Facade, type FacadeOptions, registerStorePermissions } from "mneme";
import { createPostgresBackends } from "mneme/postgres";
import { ProcessManager } from "mneme/reactions";
import { createSqliteBackends } from "mneme/sqlite";
import { ListDeadLetters, ListScheduledCommands } from "mneme/runtime";
import { SubjectForgotten } from "../../src/privacy/privacy-domain.js";
import { ADMIN, call, serve, TENANT_SYS, testAuthorizer } from "../support/http-fixture.js";
import { postgresScratch } from "../support/postgres-scratch.js";
import { rejection } from "../support/rejections.js";

/** Ann's personal values: none may be left anywhere after the clean-up. */
const ANN = {
  email: "ann.scan.secret@example.org",
  secondEmail: "ann.second.scan@example.org",
  name: "Annabel Scansecret",
  street: "742 Scanstreet Terrace",
};
/** Bob's stay readable: they show the scan looks where the data is. */
const BOB = { email: "bob.kept@example.org", name: "Bob Keptname", street: "1 Keptstreet" };

const reqCtx = ADMIN.reqCtx;
const annUuid = "member-ann";
const bobUuid = "member-bob";

interface Join {
  memberUuid: string;
  email: string;
  name: string;
  street: string;
  city: string;
}
interface Lend {
  bookUuid: string;
  memberUuid: string;
  memberEmail: string;
}
interface Mail {
  memberUuid: string;
  email: string;
}

function library(mailsSent: Mail[]) {
  const D = defineDomain("Library");
  const Joined = D.event<{ memberUuid: string; email: string; name: string; address: { street: string; city: string } }>("MemberJoined", {
    personalData: { subject: (p) => p.memberUuid, fields: ["email", "name", "/address/street"] },
  });
  const Lent = D.event<Lend>("BookLent", { personalData: { subject: (p) => p.memberUuid, fields: ["memberEmail"] } });
  const Catalogued = D.event<{ bookUuid: string; title: string }>("BookCatalogued");
  const JoinLibrary = D.command<Join>("JoinLibrary", {
    personalData: { subject: (p) => p.memberUuid, fields: ["email", "name", "street"] },
  });
  const LendBook = D.command<Lend>("LendBook", { personalData: { subject: (p) => p.memberUuid, fields: ["memberEmail"] } });
  const Catalogue = D.command<{ bookUuid: string; title: string }>("Catalogue");
  // Declared: sealed in the outbox, its record and the dead letter.
  const SendWelcome = D.command<Mail>("SendWelcome", { personalData: { subject: (p) => p.memberUuid, fields: ["email"] } });
  // Not declared: the outbox still seals the value it copied from the event's personal field.
  const SendReminder = D.command<Mail>("SendReminder");
  // Not declared and sent at once: its record keeps the value sealed as the outbox had it.
  const SendNotice = D.command<Mail>("SendNotice");
  D.handleCommand(JoinLibrary, (_c, _e, p) => [
    Joined.create(p.memberUuid, { memberUuid: p.memberUuid, email: p.email, name: p.name, address: { street: p.street, city: p.city } }),
  ]);
  D.handleCommand(LendBook, (_c, _e, p) => [Lent.create(p.bookUuid, p)]);
  D.handleCommand(Catalogue, (_c, _e, p) => [Catalogued.create(p.bookUuid, p)]);
  D.handleCommand(SendWelcome, (_c, _e, p) => {
    mailsSent.push(p);
    throw new Error("the mail server is down");
  });
  for (const c of [SendReminder, SendNotice])
    D.handleCommand(c, (_c, _e, p) => {
      mailsSent.push(p);
    });
  const Book = D.aggregate<{ title: string }>("Book", {
    initialState: () => ({ title: "" }),
    evolve: { BookCatalogued: (_s, p: { title: string }) => ({ title: p.title }) },
    snapshotEvery: 1,
  });
  return { D, Joined, Lent, JoinLibrary, LendBook, Catalogue, SendWelcome, SendReminder, SendNotice, Book };
}

/** A readmodel that keeps a copy of each member's contact data and drops it when the member is forgotten. */
class Members extends BaseReadmodel {
  override readonly name = "Members";
  override readonly domain = "Library";
  readonly docs = this.collection<{ email: string; name: string; street: string }>("members");
  constructor(f: Facade, lib: ReturnType<typeof library>) {
    super(f);
    this.addDomainEventHandler(lib.Joined, async (_c, _e, p) => {
      await this.docs.put(p.memberUuid, { email: p.email, name: p.name, street: p.address.street });
    });
    this.addDomainEventHandler(lib.Lent, async (_c, _e, p) => {
      const m = await this.docs.get(p.memberUuid);
      if (m !== undefined) await this.docs.put(p.memberUuid, { ...m, email: p.memberEmail });
    });
    this.addDomainEventHandler(SubjectForgotten, async (_c, _e, p) => {
      await this.docs.delete(p.subject);
    });
  }
}

interface Place {
  readonly name: string;
  stores(): Partial<FacadeOptions>;
  /** Every byte or row mneme wrote, as text. */
  scan(): Promise<string>;
}

const dir = mkdtempSync(join(tmpdir(), "mneme-privacy-scan-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const pg = postgresScratch("mneme_privacy_scan");

function sqlitePlace(): Place {
  const filename = join(dir, `scan-${Math.random().toString(36).slice(2)}.db`);
  return {
    name: "sqlite",
    stores: () => createSqliteBackends({ filename }),
    scan: async () =>
      Buffer.concat([filename, `${filename}-wal`, `${filename}-journal`].filter((f) => existsSync(f)).map((f) => readFileSync(f))).toString(
        "latin1",
      ),
  };
}

function postgresPlace(): Place {
  const schema = pg.newSchema();
  return {
    name: "postgres",
    stores: () => createPostgresBackends({ pool: pg.pool, schema }),
    scan: async () => {
      const tables = await pg.pool.query<{ table_name: string }>(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = $1 AND table_type = 'BASE TABLE' ORDER BY table_name",
        [schema],
      );
      expect(tables.rows.length).toBeGreaterThan(5);
      let text = "";
      for (const { table_name } of tables.rows) {
        const rows = await pg.pool.query(`SELECT t::text AS row FROM "${schema}"."${table_name}" t`);
        text += `${table_name}\n${rows.rows.map((r: { row: string }) => r.row).join("\n")}\n`;
      }
      return text;
    },
  };
}

describe.each([
  ["sqlite", sqlitePlace],
  ["postgres", postgresPlace],
])("the privacy scan on %s", (_name, makePlace) => {
  it("finds no clear value of a forgotten subject in any row or file, with the app running", async () => {
    const place = makePlace();
    const mails: Mail[] = [];
    const lib = library(mails);
    const f = createFacade({ appName: "privacy-scan", ...place.stores(), systemEvents: true, authorizer: testAuthorizer });
    f.registerDomain(lib.D);
    registerStorePermissions(f);
    const members = new Members(f, lib);
    f.registerReadmodel(members);
    const welcome = new ProcessManager<{ joined: boolean }>(f, {
      name: "Welcome",
      domain: "Library",
      initialState: () => ({ joined: false }),
      correlate: (e) => (e.payload as { memberUuid: string }).memberUuid,
      retry: { maxAttempts: 1 },
      pollMs: 20,
    }).on(lib.Joined, (ctx, _s, p) => {
      ctx.dispatch(lib.SendWelcome, { memberUuid: p.memberUuid, email: p.email });
      ctx.dispatch(lib.SendNotice, { memberUuid: p.memberUuid, email: p.email });
      ctx.schedule(lib.SendReminder, { memberUuid: p.memberUuid, email: p.email }, { at: Date.now() + 3_600_000 });
      return { joined: true };
    });
    f.registerReadmodel(welcome);
    const published: unknown[] = [];
    await f.start();
    // A second instance on the same file / schema, running throughout (its readmodels in standby).
    const g = createFacade({ appName: "privacy-scan", ...place.stores(), authorizer: testAuthorizer });
    g.registerDomain(library([]).D);
    registerStorePermissions(g);
    g.registerReadmodel(new Members(g, library([])));
    await g.start();
    const server = await serve(f);
    try {
      f.runtime.systemEvents.subscribe((e) => {
        published.push(e);
      });
      const join = (memberUuid: string, v: { email: string; name: string; street: string }): Join => ({
        memberUuid,
        email: v.email,
        name: v.name,
        street: v.street,
        city: "Scanville",
      });
      await f.dispatch(lib.JoinLibrary, join(annUuid, ANN), { reqCtx, waitToFinish: true });
      await f.dispatch(lib.JoinLibrary, join(bobUuid, BOB), { reqCtx, waitToFinish: true });
      await f.dispatch(lib.Catalogue, { bookUuid: "book-1", title: "Scan Book" }, { reqCtx });
      await f.dispatch(lib.Catalogue, { bookUuid: "book-1", title: "Scan Book, 2nd edition" }, { reqCtx });
      // Over HTTP, with an Idempotency-Key: the record and the replay go through the same paths.
      const lendPath = `/api/tenants/${TENANT_SYS}/commands/Library/LendBook?wait=true`;
      const lend = { bookUuid: "book-1", memberUuid: annUuid, memberEmail: ANN.secondEmail };
      const headers = { ...ADMIN.headers, "idempotency-key": "lend-1" };
      const lent = await call(server.url, "POST", lendPath, { headers, body: lend });
      expect(lent.status).toBe(200);
      expect(JSON.stringify(lent.body)).toContain(ANN.secondEmail);
      await welcome.outbox.drain();

      // The handlers got clear values; the listings show them in clear before the forget.
      expect(mails.filter((m) => m.memberUuid === annUuid)).toEqual([
        { memberUuid: annUuid, email: ANN.email },
        { memberUuid: annUuid, email: ANN.email },
      ]);
      expect((await members.docs.get(annUuid))?.email).toBe(ANN.secondEmail);
      const scheduled = await f.query(ListScheduledCommands, {}, { reqCtx });
      expect(scheduled.map((s) => s.payload)).toContainEqual({ memberUuid: annUuid, email: ANN.email });
      const dead = await f.query(ListDeadLetters, {}, { reqCtx });
      expect(dead.map((d) => d.target)).toEqual(["Library.SendWelcome", "Library.SendWelcome"]);
      expect((await f.loadAggregate(lib.Book, "book-1")).state.title).toBe("Scan Book, 2nd edition");
      await f.logStore.append({ level: "info", source: "app", message: `member ${annUuid} lent book-1` });

      // The erasure, and the documented clean-up, while running.
      expect(await f.forget(annUuid)).toEqual({ keysDeleted: 1 });
      await f.runtime.controlEventHandler({ eventHandlerName: "Members", action: "restore", restoreFromZero: true });
      expect(await f.scrubStorage()).toEqual({ behind: [] });

      // Every read path: erased for Ann, clear for Bob.
      expect(await members.docs.get(annUuid)).toBeUndefined();
      expect((await members.docs.get(bobUuid))?.email).toBe(BOB.email);
      const after = await f.query(ListScheduledCommands, {}, { reqCtx });
      expect(after.find((s) => (s.payload as Mail).memberUuid === annUuid)?.payload).toEqual({ memberUuid: annUuid, email: "[erased]" });
      expect(after.find((s) => (s.payload as Mail).memberUuid === bobUuid)?.payload).toEqual({ memberUuid: bobUuid, email: BOB.email });
      const deadEntry = await welcome.outbox.get((await f.query(ListDeadLetters, {}, { reqCtx }))[0]!.id);
      expect(JSON.stringify(deadEntry)).not.toContain(ANN.email);
      const records = await f.runtime.stores.read("command", reqCtx, { limit: 100 });
      const lendRecord = records.items.find((r) => (r as { name: string }).name === "LendBook") as { payload: Lend };
      expect(lendRecord.payload.memberEmail).toBe("[erased]");
      const notices = records.items
        .filter((r) => (r as { name: string }).name === "SendNotice")
        .map((r) => (r as { payload: Mail }).payload);
      expect(notices).toEqual(
        expect.arrayContaining([
          { memberUuid: annUuid, email: "[erased]" },
          { memberUuid: bobUuid, email: BOB.email },
        ]),
      );
      // HTTP: the replay of the request and the store listing show "[erased]" only.
      const replay = await call(server.url, "POST", lendPath, { headers, body: lend });
      expect(replay.status).toBe(200);
      expect(replay.body.replayed).toBe(true);
      const storeRead = await call(server.url, "GET", `/api/tenants/${TENANT_SYS}/runtime/stores/command/entries?limit=100`, {
        headers: ADMIN.headers,
      });
      expect(storeRead.status).toBe(200);
      for (const body of [replay.body, storeRead.body]) {
        const text = JSON.stringify(body);
        expect(text).toContain("[erased]");
        for (const s of Object.values(ANN)) expect(text).not.toContain(s);
      }
      expect(JSON.stringify(storeRead.body)).toContain(BOB.email);
      const onG = JSON.stringify((await g.runtime.stores.read("command", reqCtx, { limit: 100 })).items);
      expect(onG).toContain("[erased]");
      for (const s of Object.values(ANN)) expect(onG).not.toContain(s);
      const publishedText = JSON.stringify(published);
      expect(published.length).toBeGreaterThan(0);
      for (const s of Object.values(ANN)) expect(publishedText).not.toContain(s);

      // The scan, with the facade still running.
      const scanned = await place.scan();
      for (const s of Object.values(ANN)) expect(scanned, `${s} found in the ${place.name} storage`).not.toContain(s);
      expect(scanned).toContain("Scanville");
      expect(scanned).toContain("Scan Book, 2nd edition");
    } finally {
      await server.close();
      await g.stop();
      await f.stop();
    }
  }, 90_000);
});

describe("the quick-start of docs/privacy.md", () => {
  it("protects the command from its first example: no clear value in the SQLite file or its WAL after forget and the clean-up", async () => {
    const doc = readFileSync(new URL("../../docs/privacy.md", import.meta.url), "utf8");
    const quickStart = /```ts\n([\s\S]*?)```/.exec(doc)?.[1] ?? "";
    // The example declares the command's personal data and shows the clean-up.
    expect(quickStart).toMatch(/Contacts\.command<AddContact>\("AddContact", \{\s*personalData:/);
    expect(quickStart).toContain("await facade.scrubStorage();");

    // The same app, run.
    interface AddContact {
      personUuid: string;
      email: string;
      street: string;
      city: string;
    }
    interface ContactAdded {
      personUuid: string;
      email: string;
      address: { street: string; city: string };
    }
    const Contacts = defineDomain("Contacts");
    const AddContact = Contacts.command<AddContact>("AddContact", {
      personalData: { subject: (p) => p.personUuid, fields: ["email", "street"] },
    });
    const ContactAdded = Contacts.event<ContactAdded>("ContactAdded", {
      personalData: { subject: (p) => p.personUuid, fields: ["email", "/address/street"] },
    });
    Contacts.handleCommand(AddContact, (_ctx, _cmd, p) => [
      ContactAdded.create(p.personUuid, { personUuid: p.personUuid, email: p.email, address: { street: p.street, city: p.city } }),
    ]);
    const filename = join(dir, "crm.db");
    const facade = createFacade({ appName: "crm", ...createSqliteBackends({ filename }) });
    facade.registerDomain(Contacts);
    await facade.start();
    try {
      const personUuid = "person-quick";
      await facade.dispatch(AddContact, { personUuid, email: ANN.email, street: ANN.street, city: "Quickville" }, { reqCtx });
      await facade.forget(personUuid);
      await facade.scrubStorage();
      const bytes = Buffer.concat([filename, `${filename}-wal`].filter((f) => existsSync(f)).map((f) => readFileSync(f))).toString(
        "latin1",
      );
      expect(bytes).toContain("Quickville");
      for (const s of [ANN.email, ANN.street]) expect(bytes, `${s} in crm.db or its -wal`).not.toContain(s);
    } finally {
      await facade.stop();
    }
  });
});

describe("scrubStorage", () => {
  it("fails with UNAVAILABLE while another connection keeps a read open on the SQLite file, and completes once it is closed", async () => {
    const filename = join(dir, "busy.db");
    const f = createFacade({ appName: "busy", ...createSqliteBackends({ filename, busyTimeoutMs: 50 }) });
    await f.start();
    const reader = new Database(filename);
    try {
      await f.logStore.append({ level: "info", source: "app", message: "something to checkpoint" });
      reader.exec("BEGIN");
      reader.prepare("SELECT COUNT(*) FROM sqlite_master").get();
      await f.logStore.append({ level: "info", source: "app", message: "written after the reader's snapshot" });
      expect((await rejection(f.scrubStorage({ waitMs: 0 }))).code).toBe("UNAVAILABLE");
      reader.exec("COMMIT");
      expect(await f.scrubStorage({ waitMs: 0 })).toEqual({ behind: [] });
      expect(existsSync(`${filename}-wal`) ? readFileSync(`${filename}-wal`).length : 0).toBe(0);
      expect((await rejection(f.scrubStorage({ waitMs: -1 }))).code).toBe("INVALID_REQUEST");
    } finally {
      reader.close();
      await f.stop();
    }
  });
});
