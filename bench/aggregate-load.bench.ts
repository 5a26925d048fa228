/**
 * Loading an aggregate of 10,000 events (BENCH_QUICK=1: 2,000) through
 * `facade.loadAggregate`, with the aggregate cache off so that every load goes
 * to the database: with a snapshot every 100 versions (the newest snapshot
 * plus the events after it) against the same facade code without snapshots
 * (every event read and folded), on SQLite and Postgres, in the same run on
 * the same database. The ratio is loads/s with snapshots over loads/s without.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { createFacade, type Facade, type FacadeOptions } from "../src/app/facade.js";
import { defineDomain } from "../src/model/domain.js";
import type { NewEvent } from "../src/model/types.js";
import { createPostgresBackends } from "../src/postgres/postgres-backends.js";
import { createSqliteBackends } from "../src/sqlite/sqlite-backends.js";
import { BENCH_REQ_CTX as reqCtx, BENCH_TENANT as TENANT, type Bench } from "./harness.js";

const DATABASE_URL = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test";

function ledger(snapshotEvery: number | undefined) {
  const D = defineDomain("Ledger");
  D.event<{ amount: number; memo: string }>("Booked");
  const Account = D.aggregate<{ balance: number; bookings: number; lastMemo: string }>("Account", {
    initialState: () => ({ balance: 0, bookings: 0, lastMemo: "" }),
    evolve: {
      Booked: (s, p: { amount: number; memo: string }) => ({ balance: s.balance + p.amount, bookings: s.bookings + 1, lastMemo: p.memo }),
    },
    ...(snapshotEvery === undefined ? {} : { snapshotEvery }),
  });
  return { D, Account };
}

export default async function aggregateLoadBench(b: Bench): Promise<void> {
  const events = b.quick ? 2_000 : 10_000;
  const loadsWith = b.quick ? 200 : 1_000;
  const loadsWithout = b.quick ? 10 : 30;
  const dir = mkdtempSync(join(tmpdir(), "mneme-bench-snap-"));
  const pool = new pg.Pool({ connectionString: DATABASE_URL, max: 4 });
  const schema = `mneme_bench_aggload_${process.pid}`;
  try {
    const cases: [string, () => Partial<FacadeOptions>][] = [
      ["sqlite", () => createSqliteBackends({ filename: join(dir, "snap.db") })],
      ["postgres", () => createPostgresBackends({ pool, schema })],
    ];
    for (const [backend, stores] of cases) {
      const snap = ledger(100);
      const plain = ledger(undefined);
      const f: Facade = createFacade({ appName: "bench-snap", aggregateCache: false, ...stores() }).registerDomain(snap.D);
      const g: Facade = createFacade({ appName: "bench-snap", aggregateCache: false, ...stores() }).registerDomain(plain.D);
      await f.start();
      await g.start();
      const uuid = "0190a7a2-0000-7000-8000-00000000a001";
      for (let i = 0; i < events; i += 1_000) {
        const batch: NewEvent[] = [];
        for (let j = i; j < Math.min(events, i + 1_000); j++) {
          batch.push({
            domain: "Ledger",
            name: "Booked",
            aggregateUuid: uuid,
            payload: { amount: 1, memo: `booking ${j}` },
            tenantUuid: TENANT,
            reqCtx,
          });
        }
        await f.eventRepository.append(batch);
      }
      // The first load folds everything and saves the snapshot at the last multiple of 100.
      await f.loadAggregate(snap.Account, uuid);
      for (let i = 0; i < 400 && (await f.snapshotStore.latest("Ledger", "Account", uuid, 1)) === undefined; i++)
        await new Promise((r) => setTimeout(r, 5));

      const without = await b.measure(
        "aggregate-load",
        `${backend}: load of ${events} events, no snapshot`,
        loadsWithout,
        async () => {
          for (let i = 0; i < loadsWithout; i++) {
            const { version } = await g.loadAggregate(plain.Account, uuid);
            if (version !== events) throw new Error(`loaded version ${version}`);
          }
        },
        "loads/s",
      );
      const withSnap = await b.measure(
        "aggregate-load",
        `${backend}: load of ${events} events, snapshot every 100`,
        loadsWith,
        async () => {
          for (let i = 0; i < loadsWith; i++) {
            const { version } = await f.loadAggregate(snap.Account, uuid);
            if (version !== events) throw new Error(`loaded version ${version}`);
          }
        },
        "loads/s",
      );
      b.compare(withSnap, without);
      await g.stop();
      await f.stop();
    }
  } finally {
    await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).catch(() => undefined);
    await pool.end();
    rmSync(dir, { recursive: true, force: true });
  }
}
