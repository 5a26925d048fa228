import pg from "pg";
import { afterAll, describe, expect, it } from "vitest";
import { createFacade, isMnemeError, newUuid, type Facade } from "mneme";
import { createPostgresBackends } from "mneme/postgres";
import { advisoryKey } from "../../src/postgres/postgres-schema.js";
import { CreateTodo, registerTodo } from "../../examples/todo/todo-domain.js";
import { Counter, CounterTotals, Increment } from "../support/counter-domain.js";
import { until } from "../support/until.js";

const DATABASE_URL = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test";
const admin = new pg.Pool({ connectionString: DATABASE_URL, max: 2 });
const schemas: string[] = [];
const facades: Facade[] = [];

function newSchema(): string {
  const s = `mneme_i_${newUuid().replace(/-/g, "").slice(-16)}`;
  schemas.push(s);
  return s;
}

afterAll(async () => {
  for (const f of facades) await f.stop().catch(() => undefined);
  for (const s of schemas) await admin.query(`DROP SCHEMA IF EXISTS "${s}" CASCADE`);
  await admin.end();
});

const reqCtx = { senderAccountUuid: "a", senderSessionUuid: "s", senderIdentityUuid: "i", senderTenantUuid: "t" };

describe("app instances on one Postgres schema (facade level)", () => {
  it("concurrent conflicting commands from two instances: exactly one wins, the other gets CONFLICT", async () => {
    const schema = newSchema();
    const make = async () => {
      const f = createFacade({
        appName: "pg-conflict",
        ...createPostgresBackends({ connectionString: DATABASE_URL, schema, poolSize: 5, pollIntervalMs: 100 }),
      });
      registerTodo(f);
      await f.start();
      facades.push(f);
      return f;
    };
    const [a, b] = [await make(), await make()];
    for (let round = 0; round < 10; round++) {
      const todoUuid = newUuid();
      const results = await Promise.allSettled([
        a.dispatch(CreateTodo, { todoUuid, title: "from a" }, { reqCtx }),
        b.dispatch(CreateTodo, { todoUuid, title: "from b" }, { reqCtx }),
      ]);
      const ok = results.filter((r) => r.status === "fulfilled");
      const failed = results.filter((r): r is PromiseRejectedResult => r.status === "rejected");
      expect(ok).toHaveLength(1);
      expect(failed).toHaveLength(1);
      expect(isMnemeError(failed[0]!.reason, "CONFLICT")).toBe(true);
      expect(await a.eventRepository.loadAggregate(todoUuid)).toHaveLength(1);
    }
  });

  it("an instance that loses its lock connection steps back to standby, and the other takes the readmodel over", async () => {
    const schema = newSchema();
    // Either instance may legitimately take the freed lock; a retries far more slowly, so the take-over is b's.
    const make = async (lockRetryMs: number) => {
      const f = createFacade({
        appName: "pg-locklost",
        ...createPostgresBackends({ connectionString: DATABASE_URL, schema, poolSize: 5, pollIntervalMs: 100 }),
        delivery: { lockRetryMs },
      });
      f.registerDomain(Counter);
      const totals = new CounterTotals(f);
      f.registerReadmodel(totals);
      await f.start();
      facades.push(f);
      return { f, totals, state: () => f.runtime.listEventHandlers()[0]!.state };
    };
    const a = await make(2000);
    const b = await make(50);
    expect(a.state()).toBe("running");
    expect(b.state()).toBe("standby");
    const counter = newUuid();
    await a.f.dispatch(Increment, { counterUuid: counter, by: 1 }, { waitToFinish: true });

    // kill the session that holds a's advisory lock on CounterTotals
    const key = BigInt(advisoryKey("mneme:readmodel-lock", schema, "CounterTotals"));
    const u = BigInt.asUintN(64, key);
    const classid = Number(u >> 32n);
    const objid = Number(u & 0xffffffffn);
    const { rows } = await admin.query<{ pid: number }>(
      "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted AND classid = $1::bigint::oid AND objid = $2::bigint::oid AND objsubid = 1",
      [classid, objid],
    );
    expect(rows).toHaveLength(1);
    await admin.query("SELECT pg_terminate_backend($1)", [rows[0]!.pid]);

    await until(() => a.state() === "standby", "a steps back");
    await until(() => b.state() === "running", "b takes over");
    await b.f.dispatch(Increment, { counterUuid: counter, by: 10 }, { waitToFinish: true });
    await until(async () => (await b.totals.total(counter)) === 11, "b applies from the shared checkpoint");
    expect(b.totals.applied).toEqual([2]);
  });
});
