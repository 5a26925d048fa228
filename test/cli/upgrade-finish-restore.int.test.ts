/**
 * The restore from zero that docs/upgrading.md prescribes after the finish
 * step of an upgrade from 0.1.0, asked for right after
 * `finishRollingUpgrade()` (issue 40, item 4): it runs (no "is restoring
 * already"), and the documents 0.1.0 left without a tenant (NULL: written
 * before the deploy) are visible to their tenant afterwards. Postgres in
 * compatibility mode with two instances, SQLite (stop-then-upgrade: the
 * finish step runs the migration) with two instances on one file.
 */
import Database from "better-sqlite3";
import { afterAll, describe, expect, it } from "vitest";
import { anonymous, BaseReadmodel, createFacade, defineDomain, type Facade } from "mneme";
import { createPostgresBackends } from "mneme/postgres";
import { createSqliteBackends } from "mneme/sqlite";
import { DATABASE_URL, postgresScratch } from "../support/postgres-scratch.js";
import { sqliteScratch } from "../support/sqlite-scratch.js";

const pg = postgresScratch("mneme_finrest");
const files = sqliteScratch("finish-restore");
const facades: Facade[] = [];
afterAll(async () => {
  for (const f of facades.reverse()) await f.stop().catch(() => undefined);
});

const Notes = defineDomain("Notes");
const AddNote = Notes.command<{ noteUuid: string; text: string }>("AddNote", { permission: anonymous });
const NoteAdded = Notes.event<{ text: string }>("NoteAdded");
Notes.handleCommand(AddNote, (_ctx, _c, p) => [NoteAdded.create(p.noteUuid, { text: p.text })]);

/** The notes, a document per note (written in the event's tenant, read per tenant through `asTenant`). */
class NoteList extends BaseReadmodel {
  constructor(facade: Facade) {
    super(facade);
    this.domain = "Notes";
    this.name = "NoteList";
    this.addDomainEventHandler(NoteAdded, async (_ctx, event, p) => {
      await this.collection<{ text: string }>("notes").put(event.aggregateUuid, { text: p.text });
    });
  }

  /** The texts of the notes this view of the readmodel sees. */
  async keys(): Promise<string[]> {
    return (await this.collection<{ text: string }>("notes").list({ limit: 100 })).map((d) => d.text).sort();
  }
}

interface Place {
  instance(): Facade;
  /** Leaves every NoteList document without a tenant, as 0.1.0 wrote them before the deploy. */
  asWrittenBy010(): Promise<void>;
  /** The stored tenant of each NoteList document, by key. */
  storedTenants(): Promise<Record<string, string | null>>;
}

function postgresPlace(): Place {
  const schema = pg.newSchema();
  return {
    instance: () =>
      createFacade({ appName: "finrest", ...createPostgresBackends({ connectionString: DATABASE_URL, schema, rollingFrom: "0.1.0" }) }),
    asWrittenBy010: async () => {
      await pg.pool.query(`UPDATE "${schema}".readmodel_documents SET tenant_uuid = NULL WHERE collection LIKE 'NoteList%'`);
    },
    storedTenants: async () => {
      const { rows } = await pg.pool.query<{ key: string; t: string | null }>(
        `SELECT key, tenant_uuid AS t FROM "${schema}".readmodel_documents WHERE collection LIKE 'NoteList%' ORDER BY key`,
      );
      return Object.fromEntries(rows.map((r) => [r.key, r.t]));
    },
  };
}

function sqlitePlace(): Place {
  const filename = files.newFile();
  return {
    instance: () => createFacade({ appName: "finrest", ...createSqliteBackends({ filename, pollIntervalMs: 20 }) }),
    asWrittenBy010: async () => {
      const db = new Database(filename);
      try {
        db.prepare(`UPDATE ${DOCS} SET tenant_uuid = NULL WHERE collection LIKE 'NoteList%'`).run();
      } finally {
        db.close();
      }
    },
    storedTenants: async () => {
      const db = new Database(filename, { readonly: true });
      try {
        const rows = db.prepare(`SELECT key, tenant_uuid AS t FROM ${DOCS} WHERE collection LIKE 'NoteList%' ORDER BY key`).all() as {
          key: string;
          t: string | null;
        }[];
        return Object.fromEntries(rows.map((r) => [r.key, r.t]));
      } finally {
        db.close();
      }
    },
  };
}

const tenants = ["tenant-1", "tenant-2"];
/** The SQLite documents table (the default table prefix). */
const DOCS = "mneme_readmodel_documents";
const tenantOfNote = (n: number): string => tenants[n % 2]!;

describe.each([
  ["Postgres", postgresPlace],
  ["SQLite", sqlitePlace],
] as const)("restore from zero right after finishRollingUpgrade (%s)", (_name, makePlace) => {
  it("runs at once, and every document is visible to its tenant afterwards", async () => {
    const place = makePlace();
    const started: { f: Facade; rm: NoteList }[] = [];
    for (let i = 0; i < 2; i++) {
      const f = place.instance();
      f.registerDomain(Notes);
      const rm = new NoteList(f);
      f.registerReadmodel(rm);
      facades.push(f);
      await f.start();
      started.push({ f, rm });
    }
    const [a, b] = started as [{ f: Facade; rm: NoteList }, { f: Facade; rm: NoteList }];
    for (let n = 0; n < 10; n++) {
      const tenantUuid = tenantOfNote(n);
      await a.f.dispatch(
        AddNote,
        { noteUuid: `note-${n}`, text: `text ${n}` },
        { reqCtx: { senderTenantUuid: tenantUuid }, waitToFinish: true },
      );
    }
    const tenantOne = ["text 0", "text 2", "text 4", "text 6", "text 8"];
    const tenantTwo = ["text 1", "text 3", "text 5", "text 7", "text 9"];
    expect(await a.rm.asTenant("tenant-1").keys()).toEqual(tenantOne);
    await place.asWrittenBy010();
    expect(Object.values(await place.storedTenants())).toEqual(Array.from({ length: 10 }, () => null));
    expect(await a.rm.asTenant("tenant-1").keys()).toEqual([]);

    const report = await b.f.finishRollingUpgrade({ settleMs: 0 });
    expect(report.migration.complete).toBe(true);
    // Right away, on the instance that processes the readmodel.
    const holder = [a, b].find((i) => i.f.runtime.listEventHandlers().find((h) => h.eventHandlerName === "NoteList")!.state === "running")!;
    await holder.f.runtime.controlEventHandler({ eventHandlerName: "NoteList", action: "restore", restoreFromZero: true });
    // Each document is stored with its note's tenant again, and each tenant's view lists its own notes.
    const want = Object.fromEntries(Array.from({ length: 10 }, (_, n) => [`note-${n}`, tenantOfNote(n)]));
    expect(await place.storedTenants()).toEqual(want);
    for (const { rm } of [a, b]) {
      expect(await rm.asTenant("tenant-1").keys()).toEqual(tenantOne);
      expect(await rm.asTenant("tenant-2").keys()).toEqual(tenantTwo);
    }
  }, 60_000);
});
