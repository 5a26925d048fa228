import { expect } from "vitest";
import { isMnemeError } from "../model/errors.js";
import type { ReadmodelStoreBackend } from "../store/readmodel-store-backend.js";
import { supportsSqlTables, type SqlTableAccess } from "../store/sql-table-access.js";
import { defineContract, expectRejectsWith } from "./contract-harness.js";

/** A readmodel backend with SQL tables (`sqlTables()`). */
type SqlBackend = ReadmodelStoreBackend & { sqlTables(): SqlTableAccess };

/** Transaction control as an attacker writes it: commented, spaced, cased, after another statement. */
const SMUGGLED = [
  "/* audit */ COMMIT",
  "-- note\nCOMMIT",
  "SELECT 1; COMMIT",
  "SELECT 1 ;\n-- x\n commit",
  "\n\t CoMmIt /* trailing */",
  "END",
  "ROLLBACK TO x",
  "RELEASE SAVEPOINT x",
  "BEGIN TRANSACTION",
];

/** Runs `sql` through the driver's object of the running transaction (`pg` client, or better-sqlite3-shaped connection). */
async function throughClient(access: SqlTableAccess, sql: string): Promise<unknown> {
  const client = access.transactionClient() as {
    query?: (sql: string) => Promise<unknown>;
    prepare?: (sql: string) => { run(): unknown };
  };
  return client.query !== undefined ? await client.query(sql) : client.prepare!(sql).run();
}

/** A table of the test's own, with the dialect's placeholders. */
async function table(access: SqlTableAccess): Promise<{ name: string; insert: string; count: () => Promise<number> }> {
  const name = access.qualify(`contract_rows_${Math.random().toString(36).slice(2, 10)}`);
  await access.execute(`CREATE TABLE ${name} (k TEXT PRIMARY KEY, n BIGINT NOT NULL)`);
  const insert = `INSERT INTO ${name} (k, n) VALUES ${access.dialect === "postgres" ? "($1, $2)" : "(?, ?)"}`;
  const count = async () => Number((await access.execute<{ c: number | string }>(`SELECT count(*) AS c FROM ${name}`)).rows[0]!.c);
  return { name, insert, count };
}

/**
 * The conformance suite of the SQL-tables capability of a readmodel backend
 * (`sqlTables()`, what SqlTableReadmodel writes through): statements inside
 * the backend's transaction commit with its checkpoint or not at all, reads
 * inside it see its earlier writes, a transaction fenced by an older token writes nothing, and statements that
 * would end mneme's transaction are refused.
 */
export const describeSqlTableAccessContract = defineContract<SqlBackend>("SqlTableAccess contract", (test) => {
  test("the backend offers sqlTables()", async (backend) => {
    expect(supportsSqlTables(backend)).toBe(true);
    expect(["sqlite", "postgres"]).toContain(backend.sqlTables().dialect);
  });

  test("statements in a transaction commit with its checkpoint; reads inside see them", async (backend) => {
    const access = backend.sqlTables();
    const t = await table(access);
    let insideDuring = -1;
    await backend.transaction(async () => {
      await access.execute(t.insert, ["a", 1]);
      await access.execute(t.insert, ["b", 2]);
      insideDuring = await t.count();
      expect(access.transactionClient()).toBeDefined();
      await backend.setCheckpoint("sql-contract", 7);
    });
    expect(insideDuring).toBe(2);
    expect(await t.count()).toBe(2);
    expect(await backend.getCheckpoint("sql-contract")).toBe(7);
    expect(access.transactionClient()).toBeUndefined();
  });

  test("a transaction that throws writes no row and no checkpoint", async (backend) => {
    const access = backend.sqlTables();
    const t = await table(access);
    await expect(
      backend.transaction(async () => {
        await access.execute(t.insert, ["a", 1]);
        await backend.setCheckpoint("sql-contract", 3);
        throw new Error("handler failed");
      }),
    ).rejects.toThrow("handler failed");
    expect(await t.count()).toBe(0);
    expect(await backend.getCheckpoint("sql-contract")).toBe(0);
  });

  test("a failing statement fails its transaction, which writes nothing", async (backend) => {
    const access = backend.sqlTables();
    const t = await table(access);
    await expect(
      backend.transaction(async () => {
        await access.execute(t.insert, ["a", 1]);
        await access.execute(t.insert, ["a", 2]); // duplicate key
        await backend.setCheckpoint("sql-contract", 3);
      }),
    ).rejects.toThrow();
    expect(await t.count()).toBe(0);
    expect(await backend.getCheckpoint("sql-contract")).toBe(0);
  });

  test("statements that would end or nest the transaction are INVALID_REQUEST", async (backend) => {
    const access = backend.sqlTables();
    for (const sql of ["BEGIN", "commit", "  ROLLBACK", "SAVEPOINT x", "RELEASE x", "", " -- nothing\n", ...SMUGGLED]) {
      await expectRejectsWith(() => backend.transaction(() => access.execute(sql)), "INVALID_REQUEST");
    }
  });

  test("a handler that inserts, smuggles a COMMIT however written and throws commits nothing (execute and the driver's client)", async (backend) => {
    const access = backend.sqlTables();
    const t = await table(access);
    for (const sql of SMUGGLED) {
      for (const via of ["execute", "client"] as const) {
        let refused: unknown;
        await backend
          .transaction(async () => {
            await access.execute(t.insert, [`${via}:${sql}`, 1]);
            refused = await Promise.resolve()
              .then(() => (via === "execute" ? access.execute(sql) : throughClient(access, sql)))
              .then(
                () => undefined,
                (e: unknown) => e,
              );
            throw new Error("handler failed");
          })
          .catch(() => undefined);
        expect(isMnemeError(refused, "INVALID_REQUEST"), `${via}: ${JSON.stringify(sql)}`).toBe(true);
        expect(await t.count()).toBe(0);
      }
    }
  });

  test("fencing: a transaction fenced by an older token writes no row", async (backend) => {
    if (backend.tryLock === undefined || backend.fencingToken === undefined || backend.checkFencingToken === undefined) return;
    const access = backend.sqlTables();
    const t = await table(access);
    expect(await backend.tryLock("sql-fenced", "contract")).toBe(true);
    const token = backend.fencingToken("sql-fenced")!;
    await backend.unlock!("sql-fenced");
    expect(await backend.tryLock("sql-fenced", "contract")).toBe(true);
    const rejected = await backend
      .transaction(async () => {
        await backend.checkFencingToken!("sql-fenced", token);
        await access.execute(t.insert, ["a", 1]);
        await backend.setCheckpoint("sql-fenced", 1);
      })
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    expect(rejected).toBeDefined();
    expect(await t.count()).toBe(0);
    await backend.unlock!("sql-fenced");
  });
});
