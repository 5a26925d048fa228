/**
 * A command's events and its CommandStore record commit in one transaction
 * where both live in one database (SQLite, Postgres): a crash never leaves
 * events without their record, and a record that cannot be written takes the
 * events with it.
 */
import { type ChildProcess, fork } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import pg from "pg";
import { afterAll, describe, expect, it } from "vitest";
import { createFacade, type Event, type FacadeOptions, newUuid } from "mneme";
import { createPostgresBackends } from "mneme/postgres";
import { createSqliteBackends, SqliteCommandStore, SqliteEventRepository } from "mneme/sqlite";
import { Counter, Increment, IncrementMany } from "../support/counter-domain.js";
import { rejection } from "../support/rejections.js";

const dir = mkdtempSync(join(tmpdir(), "mneme-record-"));
const DATABASE_URL = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test";
const pool = new pg.Pool({ connectionString: DATABASE_URL, max: 4 });
const schemas: string[] = [];
afterAll(async () => {
  for (const s of schemas) await pool.query(`DROP SCHEMA IF EXISTS "${s}" CASCADE`).catch(() => undefined);
  await pool.end();
  rmSync(dir, { recursive: true, force: true });
});
const newSchema = () => {
  const s = `mneme_rec_${newUuid().replace(/-/g, "").slice(-12)}`;
  schemas.push(s);
  return s;
};

async function readAll(f: { eventRepository: { readAll(o?: object): AsyncIterable<Event[]> } }): Promise<Event[]> {
  const out: Event[] = [];
  for await (const page of f.eventRepository.readAll()) out.push(...page);
  return out;
}

describe("SIGKILL at random points of a dispatch loop (SQLite)", () => {
  it("every command with events has its succeeded record, and every succeeded record has its events", async () => {
    const filename = join(dir, "killed.db");
    for (let round = 0; round < 4; round++) {
      const child: ChildProcess = fork(
        fileURLToPath(new URL("../support/dispatch-kill-process.ts", import.meta.url)),
        [filename, String(round)],
        {
          execArgv: ["--import", "tsx"],
          stdio: ["ignore", "pipe", "inherit", "ipc"],
        },
      );
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error("the child did not start in 30 s")), 30_000);
        child.stdout!.on("data", (b: Buffer) => {
          if (b.toString().includes("ready")) {
            clearTimeout(timer);
            resolve();
          }
        });
        child.once("exit", (code) => reject(new Error(`the child exited early (${String(code)})`)));
      });
      // Somewhere in the middle of dispatching: a random point of the loop.
      await new Promise((r) => setTimeout(r, 100 + Math.floor(Math.random() * 300)));
      const exited = new Promise<NodeJS.Signals | null>((resolve) => child.once("exit", (_code, signal) => resolve(signal)));
      child.kill("SIGKILL");
      expect(await exited).toBe("SIGKILL");
    }
    const f = createFacade({ appName: "record-kill", ...createSqliteBackends({ filename }) });
    f.registerDomain(Counter);
    await f.start();
    try {
      const events = await readAll(f);
      expect(events.length).toBeGreaterThan(20);
      const byCommand = new Map<string, string[]>();
      for (const e of events) byCommand.set(e.commandUuid!, [...(byCommand.get(e.commandUuid!) ?? []), e.eventUuid]);
      for (const [commandUuid, eventUuids] of byCommand) {
        const rec = await f.commandStore.get(commandUuid);
        expect(rec?.status, `record of ${commandUuid}`).toBe("succeeded");
        expect(rec?.eventUuids).toEqual(eventUuids);
      }
      const stored = new Set(events.map((e) => e.eventUuid));
      let records = 0;
      for (
        let page = await f.commandStore.list({ limit: 1000 });
        ;
        page = await f.commandStore.list({ limit: 1000, cursor: page.nextCursor })
      ) {
        for (const r of page.items) {
          records++;
          if (r.status === "succeeded")
            for (const u of r.eventUuids) expect(stored.has(u), `event ${u} of record ${r.commandUuid}`).toBe(true);
        }
        if (page.nextCursor === undefined) break;
      }
      expect(records).toBe(byCommand.size);
    } finally {
      await f.stop();
    }
  }, 120_000);
});

describe.each<[string, () => Partial<FacadeOptions> & { close(): Promise<void> }]>([
  ["sqlite", () => createSqliteBackends({ filename: join(dir, `dup-${newUuid()}.db`) })],
  ["postgres", () => createPostgresBackends({ pool, schema: newSchema() })],
])("the record commits with the events on %s", (_name, backends) => {
  it("the repository joins the command store of createXBackends", () => {
    const b = backends();
    expect(b.eventRepository!.joinCommandStore?.(b.commandStore!)).toBe(true);
    // A command store of another database is not joined: it is recorded after the append, as before.
    if (b.eventRepository instanceof SqliteEventRepository) {
      expect(b.eventRepository.joinCommandStore(new SqliteCommandStore({ filename: join(dir, `other-${newUuid()}.db`) }))).toBe(false);
    }
    return b.close();
  });

  it("a commandUuid recorded already is CONFLICT and appends nothing (the record and the events are one write)", async () => {
    const f = createFacade({ appName: "record-dup", ...backends() });
    f.registerDomain(Counter);
    await f.start();
    try {
      const commandUuid = newUuid();
      const first = await f.dispatch(Increment, { counterUuid: "c", by: 1 }, { commandUuid });
      const head = await f.eventRepository.headPosition();
      const e = await rejection(f.dispatch(IncrementMany, { counterUuids: ["c", "d"], by: 5 }, { commandUuid }));
      expect(e.code).toBe("CONFLICT");
      expect(await f.eventRepository.headPosition()).toBe(head);
      expect(await f.eventRepository.loadAggregate("d")).toEqual([]);
      const rec = await f.commandStore.get(commandUuid);
      expect(rec).toMatchObject({ status: "succeeded", eventUuids: first.events.map((x) => x.eventUuid) });
    } finally {
      await f.stop();
    }
  });
});

it("postgres: a record insert that fails takes the command's events with it", async () => {
  const schema = newSchema();
  const f = createFacade({ appName: "record-fail", ...createPostgresBackends({ pool, schema }) });
  f.registerDomain(Counter);
  await f.start();
  try {
    await f.dispatch(Increment, { counterUuid: "ok", by: 1 });
    // An injected fault: the command record cannot be written.
    await pool.query(
      `CREATE FUNCTION "${schema}".refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'injected'; END $$`,
    );
    await pool.query(`CREATE TRIGGER refuse BEFORE INSERT ON "${schema}".commands FOR EACH ROW EXECUTE FUNCTION "${schema}".refuse()`);
    const head = await f.eventRepository.headPosition();
    await rejection(f.dispatch(Increment, { counterUuid: "lost", by: 1 }));
    expect(await f.eventRepository.headPosition()).toBe(head);
    expect(await f.eventRepository.loadAggregate("lost")).toEqual([]);
  } finally {
    await f.stop();
  }
});
