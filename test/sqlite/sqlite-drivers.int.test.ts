/**
 * The SQLite engine's drivers: choosing one (`driver`, or a caller's database
 * object told apart by its shape), what is refused (an unknown name, a wrong
 * object, bun:sqlite off Bun, a second SQLite library on a file this process
 * has open), and the adapters' semantics, which must equal better-sqlite3's
 * on node:sqlite: integers past 2^53, plain rows, raw rows, reader/readonly
 * flags, lastInsertRowid, and driver errors named as the same SQLite codes.
 * (Every store and contract suite runs on both Node drivers in the other
 * SQLite test files; see test/support/sqlite-drivers.ts.)
 */
import { DatabaseSync } from "node:sqlite";
import Database from "better-sqlite3";
import { describe, expect, it } from "vitest";
import { isMnemeError } from "mneme";
import { createSqliteBackends, SqliteDatabase, type SqliteDriverName } from "mneme/sqlite";
import { resultCodeName, sqliteCode, toStoreError } from "../../src/sqlite/sqlite-errors.js";
import { SQLITE_DRIVERS } from "../support/sqlite-drivers.js";
import { sqliteScratch } from "../support/sqlite-scratch.js";
import { ev } from "../support/todo-events.js";

const files = sqliteScratch("sqlite-drivers");

function thrown(fn: () => unknown): unknown {
  try {
    fn();
  } catch (e) {
    return e;
  }
  throw new Error("expected a throw");
}

describe("choosing the driver", () => {
  it.each(SQLITE_DRIVERS)("driver %s opens the file through that driver", async (driver) => {
    const b = createSqliteBackends({ filename: files.newFile(), driver });
    expect(b.readmodelStoreBackend.connection().driverName).toBe(driver);
    await b.eventRepository.append([ev("a")]);
    expect(await b.eventRepository.headPosition()).toBe(1);
    await b.close();
  });

  it("without driver, better-sqlite3 where it is installed (it is here)", async () => {
    const b = createSqliteBackends({ filename: files.newFile() });
    expect(b.readmodelStoreBackend.connection().driverName).toBe("better-sqlite3");
    await b.close();
  });

  it("an unknown driver name and bun:sqlite off Bun are INVALID_REQUEST naming what is accepted", () => {
    const unknown = thrown(() => createSqliteBackends({ filename: files.newFile(), driver: "sqlite3" as SqliteDriverName }));
    expect(isMnemeError(unknown, "INVALID_REQUEST")).toBe(true);
    expect((unknown as Error).message).toContain('"better-sqlite3", "node:sqlite", "bun:sqlite"');
    const bun = thrown(() => createSqliteBackends({ filename: files.newFile(), driver: "bun:sqlite" }));
    expect(isMnemeError(bun, "INVALID_REQUEST")).toBe(true);
    expect((bun as Error).message).toMatch(/bun:sqlite driver exists only on Bun \(this is Node\.js v/);
  });

  it("a caller's node:sqlite DatabaseSync is used (told by its shape) and never closed by mneme", async () => {
    const db = new DatabaseSync(files.newFile());
    const one = createSqliteBackends({ database: db, tablePrefix: "one_" });
    const two = createSqliteBackends({ database: db, tablePrefix: "two_", driver: "node:sqlite" });
    expect(one.readmodelStoreBackend.connection().driverName).toBe("node:sqlite");
    await one.eventRepository.append([ev("a"), ev("a")]);
    expect(await two.eventRepository.headPosition()).toBe(0);
    await one.close();
    await two.close();
    expect(db.isOpen).toBe(true);
    expect({ ...db.prepare("SELECT count(*) AS n FROM one_events").get() }).toEqual({ n: 2 });
    db.close();
  });

  it("a database object of another shape, or of another driver than `driver` names, is INVALID_REQUEST naming what is accepted", () => {
    for (const database of [{}, { prepare: () => undefined }, "file.db", null]) {
      const e = thrown(() => createSqliteBackends({ database: database as never }));
      expect(isMnemeError(e, "INVALID_REQUEST"), String(e)).toBe(true);
      expect((e as Error).message).toContain("a better-sqlite3 Database, a node:sqlite DatabaseSync or a bun:sqlite Database");
    }
    const db = new Database(files.newFile());
    const mismatch = thrown(() => createSqliteBackends({ database: db, driver: "node:sqlite" }));
    expect(isMnemeError(mismatch, "INVALID_REQUEST")).toBe(true);
    expect((mismatch as Error).message).toContain('driver is "node:sqlite" but database is a better-sqlite3 database');
    db.close();
  });
});

describe("one SQLite library per file in a process", () => {
  it.each(SQLITE_DRIVERS)(
    "a file open through %s is refused to the other driver before it opens; the first keeps working; once closed, the other may open it",
    async (driver) => {
      const other: SqliteDriverName = driver === "node:sqlite" ? "better-sqlite3" : "node:sqlite";
      const filename = files.newFile();
      const first = createSqliteBackends({ filename, driver });
      const second = createSqliteBackends({ filename, driver }); // the same library: allowed
      await first.eventRepository.append([ev("a")]);
      const refused = thrown(() => createSqliteBackends({ filename, driver: other }));
      expect(isMnemeError(refused, "INVALID_REQUEST")).toBe(true);
      expect((refused as Error).message).toContain(`is open in this process through ${driver}`);
      await second.eventRepository.append([ev("a")]);
      expect(await first.eventRepository.headPosition()).toBe(2);
      await first.close();
      expect(
        isMnemeError(
          thrown(() => createSqliteBackends({ filename, driver: other })),
          "INVALID_REQUEST",
        ),
      ).toBe(true);
      await second.close();
      const later = createSqliteBackends({ filename, driver: other });
      expect(await later.eventRepository.loadAggregate("a")).toHaveLength(2);
      await later.close();
    },
  );

  it("a caller's database object counts too: the other driver is refused the file while mneme uses it", async () => {
    const filename = files.newFile();
    const raw = new DatabaseSync(filename);
    const b = createSqliteBackends({ database: raw });
    const refused = thrown(() => createSqliteBackends({ filename, driver: "better-sqlite3" }));
    expect((refused as Error).message).toContain("is open in this process through node:sqlite");
    await b.close();
    raw.close();
  });
});

describe("the adapters behave as better-sqlite3 on every driver", () => {
  /** Runs `probe` on a fresh connection of each driver and returns the results by driver. */
  function onEach<R>(probe: (db: SqliteDatabase) => R): Record<string, R> {
    const out: Record<string, R> = {};
    for (const driver of SQLITE_DRIVERS) {
      const db = SqliteDatabase.open(files.newFile(), { driver });
      try {
        db.exec("CREATE TABLE t (id INTEGER PRIMARY KEY, k TEXT UNIQUE, n INTEGER, b BLOB)");
        out[driver] = probe(db);
      } finally {
        db.close();
      }
    }
    return out;
  }

  it("integers past 2^53 read as the same double (or exactly with safeIntegers); rows plain; no row is undefined; raw rows are arrays", () => {
    const results = onEach((db) => {
      const big = 1.8e18 + 256;
      const ins = db.statement("INSERT INTO t (k, n, b) VALUES (?, ?, ?)").run("a", big, Buffer.from([1, 2, 3]));
      const row = db.statement("SELECT k, n, b FROM t WHERE k = ?").get("a") as Record<string, unknown>;
      const exact = db.driver.prepare("SELECT n, 9007199254740993 AS m FROM t").safeIntegers(true).get() as Record<string, unknown>;
      const raw = db.rawStatement("SELECT id, k, n FROM t").all();
      const spread = db.statement("SELECT ? + ? AS s").get([1, 2]) as { s: number };
      const named = db.statement("SELECT ? + $n AS s").get(1, { n: 2 }) as { s: number };
      // A zero-length view of an ArrayBuffer without memory: node:sqlite of Node.js 22 binds it as NULL unless the adapter steps in.
      const empty = db.statement("SELECT typeof(?) AS t").get(new TextEncoder().encode("")) as { t: string };
      return {
        ins: { changes: ins.changes, lastInsertRowid: ins.lastInsertRowid },
        rowN: row.n,
        plain: Object.getPrototypeOf(row) === Object.prototype,
        blob: [...(row.b as Uint8Array)],
        exact,
        raw,
        none: db.statement("SELECT k FROM t WHERE k = ?").get("zz"),
        spread: spread.s,
        named: named.s,
        empty: empty.t,
        iterated: [...db.driver.prepare("SELECT k FROM t").iterate()],
        pragma: db.driver.pragma("journal_mode", { simple: true }),
      };
    });
    const expected = {
      ins: { changes: 1, lastInsertRowid: 1 },
      rowN: 1.8e18 + 256,
      plain: true,
      blob: [1, 2, 3],
      exact: { n: 1800000000000000256n, m: 9007199254740993n },
      raw: [[1, "a", 1.8e18 + 256]],
      none: undefined,
      spread: 3,
      named: 3,
      empty: "blob",
      iterated: [{ k: "a" }],
      pragma: "wal",
    };
    for (const driver of SQLITE_DRIVERS) expect(results[driver], driver).toEqual(expected);
  });

  it("a statement that meets an integer past 2^53 on a later call reads it right; a write returning one runs once", () => {
    const results = onEach((db) => {
      const read = db.statement("SELECT n FROM t WHERE k = ?");
      db.statement("INSERT INTO t (k, n) VALUES (?, ?)").run("small", 5);
      db.statement("INSERT INTO t (k, n) VALUES (?, ?)").run("big", 2 ** 60);
      const calls = [read.get("small"), read.get("big"), read.get("small"), db.rawStatement("SELECT n FROM t ORDER BY id").all()];
      const returned = db.statement("INSERT INTO t (k, n) VALUES (?, ?) RETURNING n").get("ret", 2 ** 61);
      const written = db.statement("SELECT count(*) AS c FROM t WHERE k = 'ret'").get();
      return { calls, returned, written };
    });
    for (const driver of SQLITE_DRIVERS)
      expect(results[driver], driver).toEqual({
        calls: [{ n: 5 }, { n: 2 ** 60 }, { n: 5 }, [[5], [2 ** 60]]],
        returned: { n: 2 ** 61 },
        written: { c: 1 },
      });
  });

  it("reader and readonly flags are SQLite's own on every driver", () => {
    const statements = [
      "SELECT k FROM t",
      "INSERT INTO t (k) VALUES ('x')",
      "INSERT INTO t (k) VALUES ('y') RETURNING id",
      "UPDATE t SET n = 1",
      "PRAGMA user_version",
      "CREATE TABLE u (x)",
      "WITH c AS (SELECT 1 AS x) SELECT x FROM c",
    ];
    const results = onEach((db) => statements.map((sql) => [db.driver.prepare(sql).reader, db.driver.prepare(sql).readonly]));
    // As sqlite3_stmt_readonly and the column count say (better-sqlite3 exposes both as they are).
    const expected = [
      [true, true],
      [false, false],
      [true, false],
      [false, false],
      [true, true],
      [false, false],
      [true, true],
    ];
    for (const driver of SQLITE_DRIVERS) expect(results[driver], driver).toEqual(expected);
  });

  it("inTransaction follows BEGIN/COMMIT on every driver", () => {
    const results = onEach((db) => {
      const before = db.driver.inTransaction;
      const inside = db.writeTransaction(() => db.driver.inTransaction);
      return [before, inside, db.driver.inTransaction];
    });
    for (const driver of SQLITE_DRIVERS) expect(results[driver], driver).toEqual([false, true, false]);
  });

  it("driver errors are the same SQLite codes and the same MnemeError on every driver", () => {
    const results = onEach((db) => {
      db.statement("INSERT INTO t (k) VALUES ('dup')").run();
      const unique = thrown(() => db.statement("INSERT INTO t (k) VALUES ('dup')").run());
      const pk = thrown(() => db.statement("INSERT INTO t (id) VALUES (1)").run());
      const syntax = thrown(() => db.driver.prepare("SELEC 1"));
      const err = toStoreError(unique, "insert");
      return { unique: sqliteCode(unique), pk: sqliteCode(pk), syntax: sqliteCode(syntax), err: [err.code, err.message] };
    });
    for (const driver of SQLITE_DRIVERS)
      expect(results[driver], driver).toEqual({
        unique: "SQLITE_CONSTRAINT_UNIQUE",
        pk: "SQLITE_CONSTRAINT_PRIMARYKEY",
        syntax: "SQLITE_ERROR",
        err: ["STORE_ERROR", "sqlite: insert failed (SQLITE_CONSTRAINT_UNIQUE)"],
      });
  });

  it.each(SQLITE_DRIVERS)("a write behind another connection's write lock is SQLITE_BUSY after the busy timeout (%s)", (driver) => {
    const filename = files.newFile();
    const holder = SqliteDatabase.open(filename, { driver });
    const waiter = SqliteDatabase.open(filename, { driver, busyTimeoutMs: 0 });
    holder.exec("CREATE TABLE w (x)");
    holder.exec("BEGIN IMMEDIATE");
    const busy = thrown(() => waiter.writeTransaction(() => waiter.statement("INSERT INTO w VALUES (1)").run()));
    expect(sqliteCode(busy)).toBe("SQLITE_BUSY");
    holder.exec("COMMIT");
    waiter.writeTransaction(() => waiter.statement("INSERT INTO w VALUES (1)").run());
    holder.close();
    waiter.close();
  });

  it("node:sqlite's numeric result codes are named as better-sqlite3 names them", () => {
    expect(resultCodeName(5)).toBe("SQLITE_BUSY");
    expect(resultCodeName(773)).toBe("SQLITE_BUSY_TIMEOUT");
    expect(resultCodeName(2067)).toBe("SQLITE_CONSTRAINT_UNIQUE");
    expect(resultCodeName(1555)).toBe("SQLITE_CONSTRAINT_PRIMARYKEY");
    expect(resultCodeName(787)).toBe("SQLITE_CONSTRAINT_FOREIGNKEY");
    expect(resultCodeName(1299)).toBe("SQLITE_CONSTRAINT_NOTNULL");
    expect(resultCodeName(275)).toBe("SQLITE_CONSTRAINT_CHECK");
    expect(resultCodeName(266)).toBe("SQLITE_IOERR_READ");
    expect(resultCodeName(19 | (200 << 8))).toBe("SQLITE_CONSTRAINT");
    expect(resultCodeName(250)).toBeUndefined();
    expect(sqliteCode({ code: "ERR_SQLITE_ERROR", errcode: 2067 })).toBe("SQLITE_CONSTRAINT_UNIQUE");
    expect(sqliteCode({ code: "ERR_INVALID_ARG_TYPE", errcode: 2067 })).toBeUndefined();
  });
});
