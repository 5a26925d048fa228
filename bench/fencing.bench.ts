/**
 * The cost of fencing on SQLite and Postgres, in one run: the same work with
 * the backend as it is (every batch checks its fencing token in its
 * transaction) and with the backend's fencing tokens hidden (a lockable
 * backend without them: the batches are not fenced), interleaved in rounds so
 * both sides see the same machine load.
 * - live delivery, one event per batch (each command waits for its readmodel:
 *   the worst case, one fence check per event);
 * - restore from zero of a projection whose 1,000 documents live in that
 *   database (one fence check per page of `restoreBatchSize` events).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { anonymous, createFacade, defineDomain, type Facade, type FacadeOptions, newUuid, ProjectionReadmodel } from "mneme";
import { createPostgresBackends } from "mneme/postgres";
import { createSqliteBackends } from "mneme/sqlite";
import type { ReadmodelStoreBackend } from "mneme/store";
import type { Bench } from "./harness.js";

const D = defineDomain("FenceBench");
const Added = D.event<{ n: number }>("Added");
const Add = D.command<{ id: string; n: number }>("Add", { permission: anonymous });
/** A projection keeps one document per aggregate (read and written once per batch). */
const Acc = D.aggregate<{ n: number }>("Acc", {
  initialState: () => ({ n: 0 }),
  evolve: { Added: (st, p: { n: number }) => ({ n: st.n + p.n }) },
});

/** The backend without its fencing tokens: what a lockable third-party backend without them looks like to the runner. */
function unfenced(backend: ReadmodelStoreBackend): ReadmodelStoreBackend {
  return new Proxy(backend, {
    get(target, prop) {
      if (prop === "fencingToken" || prop === "checkFencingToken") return undefined;
      const v = Reflect.get(target, prop, target) as unknown;
      return typeof v === "function" ? (v as (...a: unknown[]) => unknown).bind(target) : v;
    },
  });
}

type Open = () => Partial<FacadeOptions> & { readmodelStoreBackend: ReadmodelStoreBackend };

async function facadeOn(open: Open, fenced: boolean, name: string): Promise<{ f: Facade; totals: ProjectionReadmodel<{ n: number }> }> {
  const stores = open();
  const f = createFacade({
    appName: name,
    ...stores,
    ...(fenced
      ? { readmodelStoreBackend: stores.readmodelStoreBackend }
      : { readmodelStoreBackend: unfenced(stores.readmodelStoreBackend), acceptLostGuarantees: ["fenced-processing" as const] }),
  });
  f.registerDomain(D, (d) => d.handleCommand(Add, (_ctx, _c, p) => [Added.create(p.id, { n: p.n })]));
  const totals = new ProjectionReadmodel(f, { aggregate: Acc, name: "Totals" });
  f.registerReadmodel(totals);
  await f.start();
  return { f, totals };
}

async function compare(b: Bench, label: string, openFenced: Open, openUnfenced: Open, live: number, restore: number): Promise<void> {
  const rounds = 6;
  const sides = [
    { fenced: true, open: openFenced, liveS: 0, restoreS: 0 },
    { fenced: false, open: openUnfenced, liveS: 0, restoreS: 0 },
  ];
  const opened = await Promise.all(sides.map((s) => facadeOn(s.open, s.fenced, `${label}-${s.fenced ? "fenced" : "unfenced"}`)));
  // warm-up: the JIT and the statement caches of both sides
  for (const { f } of opened) for (let i = 0; i < 50; i++) await f.dispatch(Add, { id: `w${i % 10}`, n: 1 }, { waitToFinish: true });
  // ABBA: each side goes first in half of the rounds.
  const order = (r: number) => (r % 2 === 0 ? [0, 1] : [1, 0]);
  for (let r = 0; r < rounds; r++) {
    for (const i of order(r)) {
      const s = sides[i]!;
      const { f } = opened[i]!;
      const t0 = performance.now();
      for (let k = 0; k < live / rounds; k++) {
        const res = await f.dispatch(Add, { id: `a${k % 100}`, n: 1 }, { waitToFinish: true });
        if (res.handlerErrors.length > 0) throw new Error("a handler failed");
      }
      s.liveS += (performance.now() - t0) / 1000;
    }
  }
  const liveRows = sides.map((s) =>
    b.record("fencing", `${label} live delivery, 1 event per batch, ${s.fenced ? "fenced" : "unfenced"}`, live, s.liveS, "commands/s"),
  );
  b.compare(liveRows[0]!, liveRows[1]!);

  // Fill up to `restore` events in each database, then restore from zero in rounds.
  for (const { f } of opened) {
    const head = await f.eventRepository.headPosition();
    const ids = Array.from({ length: 1000 }, (_, i) => `r${i}`);
    for (let done = head; done < restore; done += 100) {
      await f.eventRepository.append(
        ids
          .slice(((done / 100) % 10) * 100, ((done / 100) % 10) * 100 + 100)
          .map((id) => ({ domain: "FenceBench", name: "Added", aggregateUuid: id, payload: { n: 1 } })),
      );
    }
  }
  const counts = await Promise.all(opened.map(({ f }) => f.eventRepository.headPosition()));
  for (let r = 0; r < rounds; r++) {
    for (const i of order(r)) {
      const s = sides[i]!;
      const t0 = performance.now();
      const report = await opened[i]!.totals.restoreState(undefined, { fromZero: true }).done;
      s.restoreS += (performance.now() - t0) / 1000;
      if (report.toPosition !== counts[i]) throw new Error(`restored to ${report.toPosition}, head ${counts[i]}`);
    }
  }
  const restoreRows = sides.map((s, i) =>
    b.record(
      "fencing",
      `${label} restore fromZero (docs in ${label}), ${s.fenced ? "fenced" : "unfenced"}`,
      counts[i]! * rounds,
      s.restoreS,
      "events/s",
    ),
  );
  b.compare(restoreRows[0]!, restoreRows[1]!);
  for (const { f } of opened) await f.stop();
}

export default async function (b: Bench): Promise<void> {
  const live = b.quick ? 400 : 2000;
  const restore = b.quick ? 20_000 : 100_000;

  const dir = mkdtempSync(join(tmpdir(), "mneme-fence-bench-"));
  try {
    await compare(
      b,
      "sqlite",
      () => createSqliteBackends({ filename: join(dir, "fenced.db") }),
      () => createSqliteBackends({ filename: join(dir, "unfenced.db") }),
      live,
      restore,
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }

  const connectionString = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test";
  const schemas = [0, 1].map(() => `mneme_bench_${newUuid().replace(/-/g, "").slice(-12)}`);
  const open = (schema: string) => () => createPostgresBackends({ connectionString, schema });
  const admin = new pg.Pool({ connectionString, max: 1 });
  try {
    await compare(b, "postgres", open(schemas[0]!), open(schemas[1]!), live / 2, restore);
  } finally {
    for (const s of schemas) await admin.query(`DROP SCHEMA IF EXISTS "${s}" CASCADE`);
    await admin.end();
  }
}
