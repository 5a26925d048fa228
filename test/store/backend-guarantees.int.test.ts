/**
 * The SQLite and Postgres backends declare every guarantee; a store taken
 * out of one and mixed with in-memory defaults or another database's store is
 * refused naming what would be lost, and runs once the loss is accepted (and
 * then really lacks it: the command record is written apart from the events).
 * Two facades given one backend each on one SQLite file see each other.
 */
import Database from "better-sqlite3";
import { describe, expect, it } from "vitest";
import { anonymous, createFacade, defineDomain, isMnemeError, type MnemeError } from "mneme";
import { createPostgresBackends } from "mneme/postgres";
import { createSqliteBackends } from "mneme/sqlite";
import type { Guarantee } from "mneme/store";
import { postgresScratch } from "../support/postgres-scratch.js";
import { sqliteScratch } from "../support/sqlite-scratch.js";
import { thrownWith } from "../support/rejections.js";
import { until } from "../support/until.js";

const ALL: Guarantee[] = [
  "atomic-command-record",
  "replay-with-events",
  "exactly-once-dispatch",
  "cross-instance-delivery",
  "blue-green-rebuild",
  "single-processor",
  "fenced-processing",
  "tenant-scoped-readmodels",
];

const files = sqliteScratch("guarantees");
const pg = postgresScratch("guarantees");

const D = defineDomain("Guarded");
const Noted = D.event<{ text: string }>("Noted");
const Note = D.command<{ text: string }>("Note", { permission: anonymous });
D.handleCommand(Note, (_ctx, _c, p) => [Noted.create("note-1", { text: p.text })]);

const refusal = (make: () => unknown): MnemeError => thrownWith("INVALID_REQUEST", make);

const lostOf = (e: MnemeError) => e.details?.map((d) => [d.guarantee, d.store]);

describe("the SQLite and Postgres backends", () => {
  it("declare every guarantee, derived from their stores", async () => {
    const s = createSqliteBackends({ filename: files.newFile() });
    const p = createPostgresBackends({ pool: pg.pool, schema: pg.newSchema() });
    try {
      expect(s.guarantees).toEqual(ALL);
      expect(p.guarantees).toEqual(ALL);
    } finally {
      await s.close();
      await p.close();
    }
  });

  it("refuse their event repository alone beside in-memory defaults, naming each loss and its store", async () => {
    const s = createSqliteBackends({ filename: files.newFile() });
    try {
      const e = refusal(() => createFacade({ eventRepository: s.eventRepository }));
      expect(lostOf(e)).toEqual([
        ["atomic-command-record", "commandStore"],
        ["single-processor", "readmodelStoreBackend"],
        ["fenced-processing", "readmodelStoreBackend"],
      ]);
      expect(e.message).toMatch(
        /the backend of eventRepository \(SqliteEventRepository\) gives it; commandStore \(MemoryCommandStore, the default\)/,
      );
    } finally {
      await s.close();
    }
  });

  it("refuse a SQLite event repository with a Postgres command store: the record cannot share the events' transaction", async () => {
    const s = createSqliteBackends({ filename: files.newFile() });
    const p = createPostgresBackends({ pool: pg.pool, schema: pg.newSchema() });
    try {
      const e = refusal(() =>
        createFacade({ ...s, commandStore: p.commandStore, acceptLostGuarantees: ["single-processor", "fenced-processing"] }),
      );
      expect(lostOf(e)).toEqual([["atomic-command-record", "commandStore"]]);
      expect(e.message).toMatch(/commandStore \(PostgresCommandStore\) is not in the event repository's database/);
    } finally {
      await s.close();
      await p.close();
    }
  });

  it("run the mix once the loss is accepted, and the record is then really written apart from the events", async () => {
    const filename = files.newFile();
    const s = createSqliteBackends({ filename });
    const f = files.keep(
      createFacade({
        eventRepository: s.eventRepository,
        readmodelStoreBackend: s.readmodelStoreBackend,
        acceptLostGuarantees: ["atomic-command-record"],
        close: () => s.close(),
      }).registerDomain(D),
    );
    await f.start();
    const r = await f.dispatch(Note, { text: "apart" }, { reqCtx: {} });
    expect(f.runtime.systemInfo().guarantees).toEqual(ALL.filter((g) => g !== "atomic-command-record"));
    expect((await f.commandStore.get(r.commandUuid))?.status).toBe("succeeded");
    const raw = new Database(filename, { readonly: true });
    try {
      // The events are in the file; the record is only in the in-memory command store, gone with the process.
      expect(raw.prepare("SELECT name FROM sqlite_master WHERE name = 'mneme_commands'").all()).toEqual([]);
      expect(f.commandStore.constructor.name).toBe("MemoryCommandStore");
      expect((raw.prepare("SELECT count(*) AS n FROM mneme_events").get() as { n: number }).n).toBe(1);
    } finally {
      raw.close();
      await f.stop();
    }
  });

  it("serve two facades given a backend each on one file: one sees the other's appends, stop() closes its backend", async () => {
    const filename = files.newFile();
    const one = createSqliteBackends({ filename, pollIntervalMs: 20 });
    const two = createSqliteBackends({ filename, pollIntervalMs: 20 });
    const a = files.keep(createFacade({ backend: one }).registerDomain(D));
    const b = files.keep(createFacade({ backend: two }).registerDomain(D));
    await a.start();
    await b.start();
    expect(b.runtime.systemInfo().guarantees).toEqual(ALL);
    const r = await a.dispatch(Note, { text: "seen" }, { reqCtx: {} });
    expect((await b.commandStore.get(r.commandUuid))?.eventUuids).toEqual([r.events[0]!.eventUuid]);
    await until(async () => (await b.eventRepository.headPosition()) === 1, "the second facade sees the append");
    await a.stop();
    await expect(one.eventRepository.headPosition()).rejects.toSatisfy((e: unknown) => isMnemeError(e, "STORE_CLOSED"));
    await b.stop();
  });

  it("keep a Postgres pool the application owns open when the facade given the backend stops", async () => {
    const schema = pg.newSchema();
    const f = createFacade({ backend: createPostgresBackends({ pool: pg.pool, schema }) }).registerDomain(D);
    await f.start();
    await f.dispatch(Note, { text: "pg" }, { reqCtx: {} });
    expect(f.runtime.systemInfo().guarantees).toEqual(ALL);
    await f.stop();
    const { rows } = await pg.pool.query<{ n: string }>(`SELECT count(*) AS n FROM "${schema}".events`);
    expect(Number(rows[0]!.n)).toBe(1);
  });
});
