/**
 * `dispatch` of a command whose handler loads its aggregate and appends one
 * event (the lock, the fold, the tenant check of the load and of the append,
 * the expected version, the audit record) on memory, SQLite and Postgres. The
 * baseline of each backend, in the same run, is the raw repository doing the
 * same store work: `loadAggregate` then `append` with the loaded version as
 * expected version. Rounds of the two alternate, and the figures are summed
 * over the rounds, so drift of a busy machine hits both alike.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { defineDomain } from "../src/model/domain.js";
import type { DomainInstaller } from "../src/model/domain-install.js";
import { createFacade, type Facade, type FacadeOptions } from "../src/app/facade.js";
import { createPostgresBackends } from "../src/postgres/postgres-backends.js";
import { createSqliteBackends } from "../src/sqlite/sqlite-backends.js";
import { BENCH_REQ_CTX as reqCtx, BENCH_TENANT as TENANT, type Bench } from "./harness.js";

interface Touch {
  itemUuid: string;
  title: string;
}

function itemDomain() {
  const Items = defineDomain("Items");
  const ItemTouched = Items.event<{ title: string }>("ItemTouched");
  const Item = Items.aggregate<{ title: string; n: number }>("Item", {
    initialState: () => ({ title: "", n: 0 }),
    evolve: { ItemTouched: (s, p: { title: string }) => ({ title: p.title, n: s.n + 1 }) },
  });
  const TouchItem = Items.command<Touch>("TouchItem");
  const install = (d: DomainInstaller): void => {
    d.handleCommand(TouchItem, async (ctx, _cmd, p) => {
      await ctx.aggregates.load(Item, p.itemUuid);
      return [ItemTouched.create(p.itemUuid, { title: p.title })];
    });
  };
  return { Items, ItemTouched, TouchItem, install };
}

const DATABASE_URL = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test";

export default async function dispatchLoadBench(b: Bench): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "mneme-bench-load-"));
  const pool = new pg.Pool({ connectionString: DATABASE_URL, max: 4 });
  const schemas: string[] = [];
  try {
    const cases: [string, number, number, (tag: string) => Partial<FacadeOptions>][] = [
      ["memory", b.quick ? 5_000 : 40_000, 200, () => ({})],
      ["sqlite", b.quick ? 1_000 : 6_000, 100, (tag) => createSqliteBackends({ filename: join(dir, `${tag}.db`) })],
      [
        "postgres",
        b.quick ? 200 : 1_500,
        100,
        (tag) => {
          const schema = `mneme_bench_load_${tag}_${process.pid}`;
          schemas.push(schema);
          return createPostgresBackends({ pool, schema });
        },
      ],
    ];
    for (const [backend, n, aggregates, make] of cases) {
      const d = itemDomain();
      const f: Facade = createFacade({ appName: "bench-load", ...make("facade") });
      f.registerDomain(d.Items, d.install);
      await f.start();
      const rawStores = make("raw");
      const raw = rawStores.eventRepository ?? f.eventRepository;
      if (raw !== f.eventRepository) await raw.init();
      const ids = Array.from({ length: aggregates }, (_, i) => `0190a7a2-0000-7000-8000-${String(i).padStart(12, "0")}`);
      const rounds = 4;
      const per = Math.ceil(n / rounds);
      let mnemeSeconds = 0;
      let rawSeconds = 0;
      let i = 0;
      let k = 0;
      const rawIds = ids.map((id) => `raw-${id}`);
      // Warm-up of both paths.
      for (let w = 0; w < Math.min(200, per); w++) {
        await f.dispatch(d.TouchItem, { itemUuid: ids[w % aggregates]!, title: "warm" }, { reqCtx });
        const agg = rawIds[w % aggregates]!;
        const evs = await raw.loadAggregate(agg);
        await raw.append([{ ...d.ItemTouched.create(agg, { title: "warm" }, { tenantUuid: TENANT, reqCtx }), commandUuid: "c" }], {
          expectedVersions: { [agg]: evs.length === 0 ? 0 : evs[evs.length - 1]!.version },
        });
      }
      for (let r = 0; r < rounds; r++) {
        let t0 = performance.now();
        for (let j = 0; j < per; j++, i++) await f.dispatch(d.TouchItem, { itemUuid: ids[i % aggregates]!, title: `t${i}` }, { reqCtx });
        mnemeSeconds += (performance.now() - t0) / 1000;
        t0 = performance.now();
        for (let j = 0; j < per; j++, k++) {
          const agg = rawIds[k % aggregates]!;
          const evs = await raw.loadAggregate(agg);
          const version = evs.length === 0 ? 0 : evs[evs.length - 1]!.version;
          await raw.append([{ ...d.ItemTouched.create(agg, { title: `t${k}` }, { tenantUuid: TENANT, reqCtx }), commandUuid: "c" }], {
            expectedVersions: { [agg]: version },
          });
        }
        rawSeconds += (performance.now() - t0) / 1000;
      }
      const base = b.record(
        "dispatch-load",
        `raw ${backend}: loadAggregate + append (expected version)`,
        per * rounds,
        rawSeconds,
        "commands/s",
      );
      const row = b.record(
        "dispatch-load",
        `${backend}: dispatch load+append, ${aggregates} aggregates`,
        per * rounds,
        mnemeSeconds,
        "commands/s",
      );
      b.compare(row, base);
      await f.stop();
      if (raw !== f.eventRepository) await raw.close();
      await (rawStores as { close?: () => Promise<void> }).close?.();
    }
  } finally {
    for (const s of schemas) await pool.query(`DROP SCHEMA IF EXISTS "${s}" CASCADE`).catch(() => undefined);
    await pool.end();
    rmSync(dir, { recursive: true, force: true });
  }
}
