/**
 * The edges of SQL-table readmodels, over large input spaces (fast-check):
 * SQL text with comments, string literals, quoted identifiers, dollar quoting
 * and statement separators never ends the transaction it runs in once the
 * statement check accepted it (judged by the real engines: SQLite runs the
 * whole text with exec, Postgres in the simple protocol, which takes several
 * statements); and no spelling of a row's column names lets a row pick its
 * tenant (judged by a real SQLite table, whose names ignore case).
 */
import Database from "better-sqlite3";
import fc from "fast-check";
import pg from "pg";
import { afterAll, describe, expect, it } from "vitest";
import { isMnemeError } from "mneme";
import { checkRowColumns } from "../../src/readmodel/sql-table-readmodel.js";
import { assertSqlStatement } from "../../src/store/sql-statement-check.js";
import type { SqlDialect } from "../../src/store/sql-table-access.js";
import { DATABASE_URL } from "../support/postgres-scratch.js";

const DIALECTS: SqlDialect[] = ["sqlite", "postgres"];

function accepted(sql: string, dialect: SqlDialect): boolean {
  try {
    assertSqlStatement(sql, dialect);
    return true;
  } catch (e) {
    if (!isMnemeError(e, "INVALID_REQUEST")) throw e;
    return false;
  }
}

/** Text that is nothing to the engine: whitespace and comments (Postgres's nest). */
const filler = (dialect: SqlDialect): fc.Arbitrary<string> =>
  fc
    .array(
      fc.oneof(
        fc.constantFrom(" ", "\n", "\t", "\r\n", "\f"),
        fc.string({ maxLength: 12 }).map((s) => `--${s.replace(/[\n\r]/g, "")}\n`),
        fc.string({ maxLength: 12 }).map((s) => `/*${s.replace(/[*/]/g, "")}*/`),
        ...(dialect === "postgres" ? [fc.constant("/* a /* nested */ comment */")] : []),
      ),
      { maxLength: 4 },
    )
    .map((parts) => parts.join(""));

/** Any case of a word. */
const anyCase = (word: string): fc.Arbitrary<string> =>
  fc.array(fc.boolean(), { minLength: word.length, maxLength: word.length }).map((up) =>
    word
      .split("")
      .map((c, i) => (up[i] ? c.toUpperCase() : c.toLowerCase()))
      .join(""),
  );

const CONTROL = [
  "COMMIT",
  "END",
  "ROLLBACK",
  "ABORT",
  "BEGIN",
  "START TRANSACTION",
  "SAVEPOINT s",
  "RELEASE s",
  "ROLLBACK TO s",
  "COMMIT PREPARED 'x'",
  "PREPARE TRANSACTION 'x'",
  "SET TRANSACTION READ ONLY",
];

/** A string literal's content for the dialect, anything (NUL aside), as the literal that holds it. */
const literal = (dialect: SqlDialect): fc.Arbitrary<string> =>
  fc.string({ maxLength: 20, unit: "grapheme-ascii" }).chain((s) => {
    const text = s.replace(/\0/g, "");
    const forms: fc.Arbitrary<string>[] = [fc.constant(`'${text.replaceAll("'", "''")}'`), fc.constant(`"${text.replaceAll('"', '""')}"`)];
    if (dialect === "postgres") {
      forms.push(fc.constant(`E'${text.replaceAll("\\", "\\\\").replaceAll("'", "\\'")}'`));
      if (!text.includes("$q$")) forms.push(fc.constant(`$q$${text}$q$`));
      if (!text.includes("$$")) forms.push(fc.constant(`$$${text}$$`));
    } else {
      if (!text.includes("]")) forms.push(fc.constant(`[${text}]`));
      forms.push(fc.constant(`\`${text.replaceAll("`", "``")}\``));
    }
    return fc.oneof(...forms);
  });

describe.each(DIALECTS)("the statement check (%s)", (dialect) => {
  it("refuses transaction control however it is commented, cased or spaced", () => {
    fc.assert(
      fc.property(
        filler(dialect),
        fc.constantFrom(...CONTROL).chain((c) => fc.tuple(...c.split(" ").map(anyCase))),
        filler(dialect),
        fc.constantFrom("", ";", " ;", "; -- done"),
        (before, words, after, end) => !accepted(`${before}${words.join(" ")}${after}${end}`, dialect),
      ),
      { numRuns: 400 },
    );
  });

  it("refuses a second statement after a separator, whatever separates them", () => {
    fc.assert(
      fc.property(filler(dialect), filler(dialect), fc.constantFrom("SELECT 2", "COMMIT", "DELETE FROM t"), (a, b, second) => {
        return !accepted(`SELECT 1${a};${b}${second}`, dialect);
      }),
      { numRuns: 300 },
    );
  });

  it("accepts one statement whose literals and comments hold anything, separators and COMMIT included", () => {
    fc.assert(
      fc.property(filler(dialect), literal(dialect), filler(dialect), (a, lit, b) => accepted(`${a}SELECT ${lit}${b};${b}`, dialect)),
      { numRuns: 400 },
    );
  });
});

/** Fragments an attacker combines: words, separators, quote and comment openers, escapes. */
const fragment = fc.constantFrom(
  "COMMIT",
  "commit",
  "END",
  "ROLLBACK",
  "BEGIN",
  "SAVEPOINT s",
  "RELEASE s",
  "SELECT 1",
  "SELECT 'a'",
  " ",
  "\n",
  ";",
  "--",
  "/*",
  "*/",
  "'",
  "''",
  '"',
  "$$",
  "$q$",
  "E'",
  "\\",
  "\\'",
  "[",
  "]",
  "`",
  "x",
);
const attack = fc.array(fragment, { minLength: 1, maxLength: 10 }).map((parts) => parts.join(""));

describe("what the check accepts never ends the transaction (the engines judge)", () => {
  it("SQLite: exec of the whole text (several statements run) inside a transaction leaves it open", () => {
    const db = new Database(":memory:");
    db.exec("CREATE TABLE t (a)");
    try {
      fc.assert(
        fc.property(attack, (sql) => {
          if (!accepted(sql, "sqlite")) return true;
          db.exec("BEGIN");
          try {
            db.exec(sql);
          } catch {
            // A statement the engine refuses is no escape.
          }
          const open = db.inTransaction;
          if (open) db.exec("ROLLBACK");
          return open;
        }),
        { numRuns: 3_000 },
      );
    } finally {
      db.close();
    }
  });

  const client = new pg.Client({ connectionString: DATABASE_URL });
  let connected = false;
  afterAll(async () => {
    if (connected) await client.end();
  });

  it("Postgres: the simple protocol (several statements run) inside a transaction leaves the same transaction open", async () => {
    await client.connect();
    connected = true;
    client.on("notice", () => undefined);
    await fc.assert(
      fc.asyncProperty(attack, async (sql) => {
        if (!accepted(sql, "postgres")) return true;
        await client.query("BEGIN");
        const before = (await client.query<{ x: string }>("SELECT txid_current() AS x")).rows[0]!.x;
        await client.query(sql).catch(() => undefined);
        // Still in mneme's block: the same transaction id, or the block aborted by a failed statement (25P02), which commits nothing.
        const now = await client.query<{ x: string }>("SELECT txid_current() AS x").then(
          (r) => r.rows[0]!.x,
          (e: { code?: string }) => (e.code === "25P02" ? "aborted" : Promise.reject(e)),
        );
        const same = now === "aborted" || now === before;
        await client.query("ROLLBACK");
        expect(same, JSON.stringify(sql)).toBe(true);
      }),
      { numRuns: 600 },
    );
  });
});

/** Spellings of tenant_uuid an engine might fold, or a reader might take for it. */
const tenantSpelling = fc.oneof(
  anyCase("tenant_uuid"),
  fc.constantFrom(
    '"tenant_uuid"',
    " tenant_uuid",
    "tenant_uuid ",
    "tenant_uuid\u200b",
    "tenant_uu\u0131d", // dotless i
    "tenant_uu\u0130d", // dotted capital I
    "\uff54enant_uuid", // fullwidth t
    "tenant\u2010uuid",
    "tenant_uuid\0",
    "[tenant_uuid]",
    "`tenant_uuid`",
    "TENANT_UUİD",
  ),
);
const otherColumn = fc.oneof(anyCase("k"), anyCase("v"), fc.constantFrom("k ", '"k"', "K", "\u212a")); // U+212A: Kelvin sign

describe("a row's column names never pick its tenant", () => {
  it("any spelling of tenant_uuid in a tenant table's row is INVALID_REQUEST", () => {
    fc.assert(
      fc.property(fc.array(otherColumn, { maxLength: 3 }), tenantSpelling, fc.nat(3), (others, t, at) => {
        const cols = [...others];
        cols.splice(Math.min(at, cols.length), 0, t);
        try {
          checkRowColumns("things", cols, true);
          return false;
        } catch (e) {
          return isMnemeError(e, "INVALID_REQUEST");
        }
      }),
      { numRuns: 500 },
    );
  });

  it("SQLite judges: a row the check accepts, written as insert writes it, lands in mneme's tenant", () => {
    const db = new Database(":memory:");
    db.exec('CREATE TABLE things (tenant_uuid TEXT NOT NULL, k TEXT, v TEXT, "K2" TEXT)');
    const q = (c: string): string => `"${c.replaceAll('"', '""')}"`;
    try {
      fc.assert(
        fc.property(fc.uniqueArray(fc.oneof(otherColumn, tenantSpelling, anyCase("k2")), { minLength: 1, maxLength: 4 }), (cols) => {
          try {
            checkRowColumns("things", cols, true);
          } catch (e) {
            return isMnemeError(e, "INVALID_REQUEST");
          }
          // What SqlTables.insert sends: the row's columns, then the tenant's.
          const all = [...cols, "tenant_uuid"];
          db.exec("DELETE FROM things");
          try {
            db.prepare(`INSERT INTO things (${all.map(q).join(", ")}) VALUES (${all.map(() => "?").join(", ")})`).run(
              ...cols.map(() => "tenant-b"),
              "tenant-a",
            );
          } catch {
            return true; // an unknown column: nothing written
          }
          const rows = db.prepare("SELECT tenant_uuid FROM things").all() as { tenant_uuid: string }[];
          return rows.length === 1 && rows[0]!.tenant_uuid === "tenant-a";
        }),
        { numRuns: 500 },
      );
    } finally {
      db.close();
    }
  });
});

describe("statements with a body of their own", () => {
  it("SQLite's CREATE TRIGGER ... BEGIN ... END and Postgres's BEGIN ATOMIC are one statement; what follows their END is another", () => {
    const trigger =
      "CREATE TRIGGER t_audit AFTER INSERT ON t WHEN new.a > 0 BEGIN UPDATE c SET n = n + 1; INSERT INTO log VALUES (CASE WHEN new.a > 1 THEN 'x' ELSE 'y' END); END";
    expect(accepted(trigger, "sqlite")).toBe(true);
    expect(accepted(`${trigger};`, "sqlite")).toBe(true);
    expect(accepted(`${trigger}; COMMIT`, "sqlite")).toBe(false);
    expect(accepted("CREATE TEMP TRIGGER x AFTER DELETE ON t BEGIN DELETE FROM u; END", "sqlite")).toBe(true);
    const fn =
      "CREATE OR REPLACE FUNCTION f(a int) RETURNS int LANGUAGE sql BEGIN ATOMIC SELECT a + 1; SELECT CASE WHEN a > 1 THEN 1 END; END";
    expect(accepted(fn, "postgres")).toBe(true);
    expect(accepted(`${fn}; COMMIT`, "postgres")).toBe(false);
    expect(accepted("CREATE TABLE x (a int); COMMIT; SELECT begin, end FROM y", "postgres")).toBe(false);
    expect(accepted("CREATE TABLE x (a int); BEGIN; END", "sqlite")).toBe(false);
    expect(accepted("CREATE TRIGGER x AFTER DELETE ON t BEGIN DELETE FROM u;", "sqlite")).toBe(false);
  });

  it("SQLite runs the accepted trigger as the one statement it is", () => {
    const db = new Database(":memory:");
    db.exec("CREATE TABLE t (a); CREATE TABLE c (n); INSERT INTO c VALUES (0)");
    const trigger = "CREATE TRIGGER t_count AFTER INSERT ON t BEGIN UPDATE c SET n = n + 1; END";
    assertSqlStatement(trigger, "sqlite");
    db.prepare(trigger).run();
    db.prepare("INSERT INTO t VALUES (1)").run();
    expect(db.prepare("SELECT n FROM c").get()).toEqual({ n: 1 });
    db.close();
  });
});
