/**
 * The lexer's statement check of SQL-table handlers (src/store/sql-statement-check.ts)
 * keeps the texts it accepted, so a handler's per-row statement is lexed once:
 * what it refused stays refused on every call, and a text that differs from an
 * accepted one by a smuggled second statement is checked on its own.
 */
import { describe, expect, it } from "vitest";
import { isMnemeError } from "mneme";
import { assertSqlStatement } from "../../src/store/sql-statement-check.js";

const refused = (sql: string, dialect: "sqlite" | "postgres"): boolean => {
  try {
    assertSqlStatement(sql, dialect);
    return false;
  } catch (e) {
    return isMnemeError(e, "INVALID_REQUEST");
  }
};

describe("the SQL statement check with its accepted texts", () => {
  for (const dialect of ["sqlite", "postgres"] as const) {
    it(`${dialect}: an accepted text is accepted again; its variants with a second statement or a COMMIT are refused, every time`, () => {
      const ok = "INSERT INTO t (a) VALUES (1)";
      for (let i = 0; i < 3; i++) expect(refused(ok, dialect)).toBe(false);
      for (let i = 0; i < 3; i++) {
        expect(refused(`${ok}; COMMIT`, dialect)).toBe(true);
        expect(refused(`${ok};\nSELECT 1`, dialect)).toBe(true);
        expect(refused("/* x */ commit", dialect)).toBe(true);
        expect(refused("ROLLBACK", dialect)).toBe(true);
      }
    });

    it(`${dialect}: past the kept texts' bound, checks still refuse and accept as before`, () => {
      for (let i = 0; i < 2_500; i++) expect(refused(`UPDATE t SET a = ${i}`, dialect)).toBe(false);
      expect(refused("UPDATE t SET a = 0", dialect)).toBe(false);
      expect(refused("UPDATE t SET a = 0; END", dialect)).toBe(true);
      expect(refused(`SELECT '${"x".repeat(5_000)}'`, dialect)).toBe(false);
      expect(refused(`SELECT '${"x".repeat(5_000)}'; COMMIT`, dialect)).toBe(true);
    });
  }
});
