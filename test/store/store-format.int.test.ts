/**
 * The store format (docs/upgrading.md): every SQLite file and Postgres schema
 * records its format and the lowest format that may write it; a release
 * refuses a store that admits no writer of its format (STORE_TOO_NEW, naming
 * both versions) before any DDL, upgrades an older one in place once, also
 * when several instances (processes) start at the same moment, and the
 * Runtime's system info shows the record.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import Database from "better-sqlite3";
import { afterAll, describe, expect, it } from "vitest";
import { createFacade, isMnemeError, MnemeError } from "mneme";
import { createPostgresBackends } from "mneme/postgres";
import { createSqliteBackends } from "mneme/sqlite";
import { checkStoreFormat, LOWEST_WRITER_FORMAT, STORE_FORMAT, STORE_RELEASE, type StoreFormatRecord } from "mneme/store";
import { DATABASE_URL, postgresScratch } from "../support/postgres-scratch.js";
import { sqliteScratch } from "../support/sqlite-scratch.js";

const scratch = postgresScratch("mneme_fmt");
const files = sqliteScratch("fmt");
const closers: (() => Promise<unknown>)[] = [];
afterAll(async () => {
  for (const c of closers.splice(0).reverse()) await c().catch(() => undefined);
});

const THIS_RELEASE = { format: STORE_FORMAT, lowestWriterFormat: LOWEST_WRITER_FORMAT, upgradedBy: STORE_RELEASE };

function codeOf(e: unknown): string {
  return isMnemeError(e) ? e.code : String(e);
}

/** What `p` rejected with (undefined when it resolved). */
function rejection(p: Promise<unknown>): Promise<unknown> {
  return p.then(
    () => undefined,
    (e: unknown) => e,
  );
}

async function codeOfRejection(p: Promise<unknown>): Promise<string> {
  return codeOf(await rejection(p));
}

describe("checkStoreFormat (the refusal, at unit level)", () => {
  const raisedToday: StoreFormatRecord = {
    format: STORE_FORMAT,
    lowestWriterFormat: LOWEST_WRITER_FORMAT,
    upgradedBy: STORE_RELEASE,
    upgradedAt: 1,
  };

  it("lets this release open its own store, an older one, and a newer one that still admits its format", () => {
    expect(() => checkStoreFormat(undefined, "x")).not.toThrow();
    expect(() => checkStoreFormat(raisedToday, "x")).not.toThrow();
    expect(() => checkStoreFormat({ ...raisedToday, format: STORE_FORMAT + 1, upgradedBy: "9.0.0" }, "x")).not.toThrow();
  });

  it("refuses a store raised by this release when the running code pretends to be of an older format, naming both versions", () => {
    let err: unknown;
    try {
      checkStoreFormat({ ...raisedToday, lowestWriterFormat: STORE_FORMAT }, "postgres schema app", 2);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(MnemeError);
    expect(codeOf(err)).toBe("STORE_TOO_NEW");
    const message = (err as Error).message;
    expect(message).toContain(`postgres schema app is in store format ${STORE_FORMAT}, written by mneme ${STORE_RELEASE}`);
    expect(message).toContain("this is mneme 0.2.0-pre (8256c9f) (format 2), which would misread it");
    expect(message).toContain("docs/upgrading.md");
  });

  it("refuses a store of a newer format whose lowest writer is above this format", () => {
    expect(() =>
      checkStoreFormat({ format: STORE_FORMAT + 1, lowestWriterFormat: STORE_FORMAT + 1, upgradedBy: "9.0.0", upgradedAt: 1 }, "x"),
    ).toThrow(/format 5 \(mneme a release of format 5\) and later; this is mneme 0\.4\.0 \(format 4\)/);
  });

  it("names this release as package.json does (the record's upgraded_by is the version an operator deploys)", () => {
    const pkg = JSON.parse(readFileSync(fileURLToPath(new URL("../../package.json", import.meta.url)), "utf8")) as { version: string };
    expect(STORE_RELEASE).toBe(pkg.version);
  });
});

describe("Postgres: the schema's format record", () => {
  async function formatRow(schema: string): Promise<Record<string, unknown>[]> {
    const { rows } = await scratch.pool.query(`SELECT format, lowest_writer_format, upgraded_by FROM "${schema}".mneme_store_format`);
    return rows as Record<string, unknown>[];
  }

  it("a new schema gets this release's record; every store and the Runtime's system info report it", async () => {
    const schema = scratch.newSchema();
    const backends = createPostgresBackends({ pool: scratch.newPool(4), schema, pollIntervalMs: 0 });
    closers.push(() => backends.close());
    const f = createFacade({ appName: "fmt", ...backends });
    closers.push(() => f.stop());
    await f.start();
    expect(await formatRow(schema)).toEqual([{ format: 4, lowest_writer_format: 2, upgraded_by: STORE_RELEASE }]);
    expect(backends.eventRepository.storeFormat()).toMatchObject(THIS_RELEASE);
    const info = f.runtime.systemInfo();
    expect(info.storeFormat.release).toBe(STORE_FORMAT);
    expect(info.storeFormat.stores.event).toMatchObject(THIS_RELEASE);
    expect(info.storeFormat.stores.readmodel).toMatchObject(THIS_RELEASE);
    expect(info.storeFormat.stores.command).toMatchObject(THIS_RELEASE);
  });

  it("a schema whose record admits no writer of this format is refused before any DDL, with both versions named", async () => {
    const schema = scratch.newSchema();
    await scratch.pool.query(`CREATE SCHEMA "${schema}"`);
    await scratch.pool.query(
      `CREATE TABLE "${schema}".mneme_store_format (id smallint PRIMARY KEY, format integer, lowest_writer_format integer, upgraded_by text, upgraded_at bigint)`,
    );
    await scratch.pool.query(`INSERT INTO "${schema}".mneme_store_format VALUES (1, 5, 5, '0.4.0', 0)`);
    const backends = createPostgresBackends({ pool: scratch.newPool(4), schema, pollIntervalMs: 0 });
    closers.push(() => backends.close());
    for (const store of [backends.eventRepository, backends.readmodelStoreBackend, backends.commandStore, backends.logStore]) {
      const err = await rejection(store.init());
      expect(codeOf(err)).toBe("STORE_TOO_NEW");
      expect((err as Error).message).toContain(`postgres schema ${schema} is in store format 5, written by mneme 0.4.0`);
      expect((err as Error).message).toContain("this is mneme 0.4.0 (format 4)");
    }
    const { rows } = await scratch.pool.query("SELECT table_name FROM information_schema.tables WHERE table_schema = $1", [schema]);
    expect(rows.map((r: { table_name: string }) => r.table_name)).toEqual(["mneme_store_format"]);
    // A facade does not start on it.
    const f = createFacade({ appName: "fmt", ...backends });
    expect(await codeOfRejection(f.start())).toBe("STORE_TOO_NEW");
  });

  it("a newer schema that still admits this format is opened and keeps its record (a rolling deploy of the newer release)", async () => {
    const schema = scratch.newSchema();
    const first = createPostgresBackends({ pool: scratch.newPool(4), schema, pollIntervalMs: 0 });
    closers.push(() => first.close());
    await first.eventRepository.init();
    await scratch.pool.query(`UPDATE "${schema}".mneme_store_format SET format = 4, upgraded_by = '0.4.0'`);
    const second = createPostgresBackends({ pool: scratch.newPool(4), schema, pollIntervalMs: 0 });
    closers.push(() => second.close());
    await second.eventRepository.init();
    expect(second.eventRepository.storeFormat()).toMatchObject({ format: 4, lowestWriterFormat: 2, upgradedBy: "0.4.0" });
    expect(await formatRow(schema)).toEqual([{ format: 4, lowest_writer_format: 2, upgraded_by: "0.4.0" }]);
  });
});

/** Starts `n` processes on one store, lets them all run init() at once, and returns what each printed. */
async function startAtOnce(n: number, kind: "sqlite" | "postgres", target: string): Promise<Record<string, unknown>[]> {
  const script = fileURLToPath(new URL("../support/store-format-process.ts", import.meta.url));
  const children: ChildProcess[] = [];
  const outputs: Promise<Record<string, unknown>>[] = [];
  const ready: Promise<void>[] = [];
  for (let i = 0; i < n; i++) {
    const child = spawn(process.execPath, ["--import", "tsx", script, kind, target], {
      stdio: ["pipe", "pipe", "inherit"],
      env: { ...process.env, DATABASE_URL },
    });
    children.push(child);
    let out = "";
    ready.push(
      new Promise((resolve, reject) => {
        child.stdout!.on("data", (b: Buffer) => {
          out += b.toString();
          if (out.includes("ready\n")) resolve();
        });
        child.once("exit", (code) => reject(new Error(`a process exited before it was ready (${String(code)})`)));
      }),
    );
    outputs.push(
      new Promise((resolve, reject) =>
        child.once("exit", (code) => {
          const line = out.split("\n").find((l) => l.startsWith("{"));
          if (code !== 0 || line === undefined) reject(new Error(`a process ended with ${String(code)}: ${out}`));
          else resolve(JSON.parse(line) as Record<string, unknown>);
        }),
      ),
    );
  }
  await Promise.all(ready);
  for (const c of children) c.stdin!.write("go\n");
  return Promise.all(outputs);
}

describe("concurrent starts upgrade an older store once", () => {
  it("Postgres: four processes start at once on a schema of a release before the format record", async () => {
    const schema = scratch.newSchema();
    // A schema as a release before this one left it: this release's tables, no format record, events in it.
    const old = createPostgresBackends({ pool: scratch.newPool(4), schema, pollIntervalMs: 0 });
    await old.eventRepository.init();
    await old.eventRepository.append([{ domain: "Todo", name: "TodoCreated", aggregateUuid: "a", payload: {} }]);
    await old.close();
    await scratch.pool.query(`DROP TABLE "${schema}".mneme_store_format_record CASCADE`);
    const results = await startAtOnce(4, "postgres", schema);
    for (const r of results) expect(r.error, String(r.message)).toBeUndefined();
    const records = results.flatMap((r) => r.formats as StoreFormatRecord[]);
    expect(records).toHaveLength(20);
    // One upgrade: every store of every process reports the same record, the one stored.
    const stored = (await scratch.pool.query(`SELECT upgraded_at::text AS at, count(*) OVER () AS n FROM "${schema}".mneme_store_format`))
      .rows;
    expect(stored).toHaveLength(1);
    for (const rec of records) expect(rec).toEqual({ ...THIS_RELEASE, upgradedAt: Number(stored[0].at) });
  }, 120_000);

  it("SQLite: four processes start at once on a file of a release before the format record", async () => {
    const filename = files.newFile();
    const old = createSqliteBackends({ filename });
    await old.eventRepository.append([{ domain: "Todo", name: "TodoCreated", aggregateUuid: "a", payload: {} }]);
    await old.close();
    const raw = new Database(filename);
    raw.exec("DROP TABLE mneme_store_format");
    raw.close();
    const results = await startAtOnce(4, "sqlite", filename);
    for (const r of results) expect(r.error, String(r.message)).toBeUndefined();
    const records = results.flatMap((r) => r.formats as StoreFormatRecord[]);
    expect(records).toHaveLength(20);
    const check = new Database(filename);
    const stored = check.prepare("SELECT format, lowest_writer_format, upgraded_by, upgraded_at FROM mneme_store_format").all() as {
      upgraded_at: number;
    }[];
    check.close();
    expect(stored).toHaveLength(1);
    for (const rec of records) expect(rec).toEqual({ ...THIS_RELEASE, upgradedAt: stored[0]!.upgraded_at });
  }, 120_000);

  it("SQLite: a file whose record admits no writer of this format is refused, and a facade does not start on it", async () => {
    const filename = files.newFile();
    const raw = new Database(filename);
    raw.exec(
      "CREATE TABLE mneme_store_format (id INTEGER PRIMARY KEY, format INTEGER, lowest_writer_format INTEGER, upgraded_by TEXT, upgraded_at INTEGER);" +
        "INSERT INTO mneme_store_format VALUES (1, 6, 5, '0.5.0', 0);",
    );
    raw.close();
    const backends = createSqliteBackends({ filename });
    closers.push(() => backends.close());
    const err = await rejection(backends.eventRepository.init());
    expect(codeOf(err)).toBe("STORE_TOO_NEW");
    expect((err as Error).message).toContain(`sqlite file ${filename} (table prefix mneme_) is in store format 6, written by mneme 0.5.0`);
    const f = files.keep(createFacade({ appName: "fmt", ...backends }));
    expect(await codeOfRejection(f.start())).toBe("STORE_TOO_NEW");
    const check = new Database(filename);
    expect(check.prepare("SELECT name FROM sqlite_master WHERE type = 'table'").all()).toEqual([{ name: "mneme_store_format" }]);
    check.close();
  });
});
