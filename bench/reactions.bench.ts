/**
 * Reactions: (1) dispatch with an idempotency key (a fresh `commandUuid` per
 * command, as a client retrying safely sends it) against dispatch without, on
 * SQLite and Postgres, in interleaved rounds; (2) chains of a process manager
 * of three steps (Start -> Started -> the manager sends Step -> Stepped ->
 * it sends Finish -> Finished) per second, against the raw driver doing the
 * same writes per chain: three transactions of one event row and one
 * command row, and three of the manager's state upsert, its outbox row
 * written and deleted, and its checkpoint. Postgres runs in schemas of its
 * own, dropped at the end.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import pg from "pg";
import { createFacade, type Facade } from "../src/app/facade.js";
import { newUuid, nowNs } from "../src/model/clock.js";
import { defineDomain } from "../src/model/domain.js";
import type { DomainInstaller } from "../src/model/domain-install.js";
import { anonymous } from "../src/model/permission.js";
import { createPostgresBackends } from "../src/postgres/index.js";
import { ProcessManager } from "../src/reactions/index.js";
import { createSqliteBackends } from "../src/sqlite/index.js";
import { BENCH_REQ_CTX, type Bench, duel } from "./harness.js";

const DATABASE_URL = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test";

interface Ref {
  chainUuid: string;
}
const Chain = defineDomain("Chain", { description: "three-step chains" });
const Start = Chain.command<Ref>("Start", { permission: anonymous });
const Step = Chain.command<Ref>("Step", { permission: anonymous });
const Finish = Chain.command<Ref>("Finish", { permission: anonymous });
const Started = Chain.event<Ref>("Started");
const Stepped = Chain.event<Ref>("Stepped");
const Finished = Chain.event<Ref>("Finished");
function installChain(d: DomainInstaller): void {
  d.handleCommand(Start, (_ctx, _c, p) => [Started.create(p.chainUuid, p)]);
  d.handleCommand(Step, (_ctx, _c, p) => [Stepped.create(p.chainUuid, p)]);
  d.handleCommand(Finish, (_ctx, _c, p) => [Finished.create(p.chainUuid, p)]);
}

/** A facade with the Chain domain and its process manager; `finished` resolves when `expect` chains have finished. */
async function chainFacade(backends: object, concurrency: number): Promise<{ f: Facade; until: (n: number) => Promise<void> }> {
  const f = createFacade({ appName: "bench-reactions", ...backends });
  f.registerDomain(Chain, installChain);
  let done = 0;
  let waiter: { n: number; resolve: () => void } | undefined;
  const pm = new ProcessManager<{ step: number }>(f, {
    name: "Chains",
    domain: "Chain",
    initialState: () => ({ step: 0 }),
    correlate: (e) => e.aggregateUuid,
    pollMs: 50,
    concurrency,
  })
    .on(Started, (ctx, _s, p) => {
      ctx.dispatch(Step, p);
      return { step: 1 };
    })
    .on(Stepped, (ctx, _s, p) => {
      ctx.dispatch(Finish, p);
      return { step: 2 };
    })
    .on(Finished, (ctx) => {
      ctx.complete();
      done++;
      if (waiter !== undefined && done >= waiter.n) waiter.resolve();
      return undefined;
    });
  f.registerReadmodel(pm);
  await f.start();
  return {
    f,
    // The outbox worker's timers do not keep a process alive (unref): hold it open while waiting.
    until: (n) =>
      done >= n
        ? Promise.resolve()
        : new Promise<void>((resolve) => {
            const keepAlive = setInterval(() => undefined, 1000);
            waiter = {
              n,
              resolve: () => {
                clearInterval(keepAlive);
                resolve();
              },
            };
          }),
  };
}

async function dispatchDuel(b: Bench, group: string, f: Facade, n: number, rounds: number): Promise<void> {
  await duel(
    b,
    group,
    "dispatch (idempotency key: a fresh commandUuid)",
    n,
    rounds,
    async () => {
      for (let i = 0; i < n; i++) await f.dispatch(Start, { chainUuid: newUuid() }, { reqCtx: BENCH_REQ_CTX, commandUuid: newUuid() });
    },
    [
      {
        name: "no key",
        run: async () => {
          for (let i = 0; i < n; i++) await f.dispatch(Start, { chainUuid: newUuid() }, { reqCtx: BENCH_REQ_CTX });
        },
      },
    ],
    "commands/s",
  );
}

const event = (chainUuid: string, name: string) => ({
  eventUuid: newUuid(),
  name,
  chainUuid,
  reqCtx: JSON.stringify(BENCH_REQ_CTX),
  payload: JSON.stringify({ chainUuid }),
});

async function sqlite(b: Bench, chains: number, ops: number, rounds: number): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "mneme-bench-reactions-"));
  try {
    // A facade without the process manager for the dispatch duel: only the command path is measured.
    const plain = createFacade({ appName: "bench-dispatch", ...createSqliteBackends({ filename: join(dir, "dispatch.db") }) });
    plain.registerDomain(Chain, installChain);
    await plain.start();
    await dispatchDuel(b, "sqlite", plain, ops, rounds);
    await plain.stop();

    const raw = new Database(join(dir, "raw.db"));
    raw.pragma("journal_mode = WAL");
    raw.pragma("synchronous = NORMAL");
    raw.exec(`CREATE TABLE events (position INTEGER PRIMARY KEY AUTOINCREMENT, event_uuid TEXT NOT NULL UNIQUE, domain TEXT, name TEXT,
        aggregate_uuid TEXT, version INTEGER, command_uuid TEXT, created_at INTEGER, req_ctx TEXT, payload TEXT);
      CREATE TABLE commands (command_uuid TEXT PRIMARY KEY, domain TEXT, name TEXT, payload TEXT, req_ctx TEXT, status TEXT, created_at INTEGER);
      CREATE TABLE docs (collection TEXT, key TEXT, doc TEXT, PRIMARY KEY (collection, key));
      CREATE TABLE checkpoints (handler TEXT PRIMARY KEY, position INTEGER)`);
    const insEvent = raw.prepare(
      "INSERT INTO events (event_uuid, domain, name, aggregate_uuid, version, command_uuid, created_at, req_ctx, payload) VALUES (?, 'Chain', ?, ?, ?, ?, ?, ?, ?)",
    );
    const insCommand = raw.prepare("INSERT INTO commands VALUES (?, 'Chain', ?, ?, ?, 'succeeded', ?)");
    const putDoc = raw.prepare("INSERT INTO docs VALUES (?, ?, ?) ON CONFLICT (collection, key) DO UPDATE SET doc = excluded.doc");
    const delDoc = raw.prepare("DELETE FROM docs WHERE collection = ? AND key = ?");
    const checkpoint = raw.prepare(
      "INSERT INTO checkpoints VALUES ('Chains', ?) ON CONFLICT (handler) DO UPDATE SET position = excluded.position",
    );
    const append = raw.transaction((chainUuid: string, name: string, version: number) => {
      const e = event(chainUuid, name);
      const commandUuid = newUuid();
      const info = insEvent.run(e.eventUuid, name, chainUuid, version, commandUuid, nowNs(), e.reqCtx, e.payload);
      insCommand.run(commandUuid, name, e.payload, e.reqCtx, nowNs());
      return Number(info.lastInsertRowid);
    });
    const react = raw.transaction((chainUuid: string, position: number, step: number) => {
      putDoc.run("Chains:state", chainUuid, JSON.stringify({ processId: chainUuid, state: { step }, position }));
      putDoc.run("Chains~outbox", `${chainUuid}-${step}`, JSON.stringify({ id: chainUuid, payload: { chainUuid }, reqCtx: BENCH_REQ_CTX }));
      checkpoint.run(position);
    });
    const sent = raw.transaction((chainUuid: string, step: number) => delDoc.run("Chains~outbox", `${chainUuid}-${step}`));
    for (const concurrency of [1, 8]) {
      const { f, until } = await chainFacade(createSqliteBackends({ filename: join(dir, `chains-${concurrency}.db`) }), concurrency);
      let started = 0;
      await duel(
        b,
        "sqlite",
        `process-manager chain of 3 steps (concurrency ${concurrency})`,
        chains,
        rounds,
        async () => {
          for (let i = 0; i < chains; i++) await f.dispatch(Start, { chainUuid: newUuid() }, { reqCtx: BENCH_REQ_CTX });
          started += chains;
          await until(started);
        },
        [
          {
            name: "raw (same writes)",
            run: () => {
              for (let i = 0; i < chains; i++) {
                const chainUuid = newUuid();
                for (const [k, name] of ["Started", "Stepped", "Finished"].entries()) {
                  const position = append(chainUuid, name, k + 1);
                  react(chainUuid, position, k + 1);
                  sent(chainUuid, k + 1);
                }
              }
            },
          },
        ],
        "chains/s",
      );
      await f.stop();
    }
    raw.close();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

async function postgres(b: Bench, chains: number, ops: number, rounds: number): Promise<void> {
  const pool = new pg.Pool({ connectionString: DATABASE_URL, max: 4 });
  const base = `mneme_bench_rx_${newUuid().replace(/-/g, "").slice(-12)}`;
  const [dispatchSchema, chainSchema, rawSchema] = [`${base}_d`, `${base}_c`, `${base}_raw`];
  try {
    const plain = createFacade({
      appName: "bench-dispatch",
      ...createPostgresBackends({ connectionString: DATABASE_URL, schema: dispatchSchema }),
    });
    plain.registerDomain(Chain, installChain);
    await plain.start();
    await dispatchDuel(b, "postgres", plain, ops, rounds);
    await plain.stop();
    // The same with claims committed without waiting for the disk flush (claimCommit "async").
    const asyncClaims = createFacade({
      appName: "bench-dispatch",
      ...createPostgresBackends({ connectionString: DATABASE_URL, schema: `${dispatchSchema}a`, claimCommit: "async" }),
    });
    asyncClaims.registerDomain(Chain, installChain);
    await asyncClaims.start();
    await dispatchDuel(b, "postgres, claimCommit async", asyncClaims, ops, rounds);
    await asyncClaims.stop();

    await pool.query(`CREATE SCHEMA "${rawSchema}"`);
    const s = `"${rawSchema}"`;
    await pool.query(`CREATE TABLE ${s}.events (position bigserial PRIMARY KEY, event_uuid uuid NOT NULL UNIQUE, domain text, name text,
        aggregate_uuid text, version int, command_uuid uuid, created_at bigint, req_ctx jsonb, payload jsonb);
      CREATE TABLE ${s}.commands (command_uuid uuid PRIMARY KEY, domain text, name text, payload jsonb, req_ctx jsonb, status text, created_at bigint);
      CREATE TABLE ${s}.docs (collection text, key text, doc jsonb, PRIMARY KEY (collection, key));
      CREATE TABLE ${s}.checkpoints (handler text PRIMARY KEY, position bigint)`);
    const client = await pool.connect();
    const rawChain = async (chainUuid: string): Promise<void> => {
      for (const [k, name] of ["Started", "Stepped", "Finished"].entries()) {
        const e = event(chainUuid, name);
        const commandUuid = newUuid();
        // The event and its command record in one statement, as mneme's append does.
        const r = await client.query<{ position: string }>(
          `WITH c AS (INSERT INTO ${s}.commands VALUES ($5, 'Chain', $2, $8, $7, 'succeeded', $6))
           INSERT INTO ${s}.events (event_uuid, domain, name, aggregate_uuid, version, command_uuid, created_at, req_ctx, payload)
           VALUES ($1, 'Chain', $2, $3, $4, $5, $6, $7, $8) RETURNING position`,
          [e.eventUuid, name, chainUuid, k + 1, commandUuid, nowNs(), e.reqCtx, e.payload],
        );
        const position = Number(r.rows[0]!.position);
        await client.query("BEGIN");
        await client.query(
          `INSERT INTO ${s}.docs VALUES ('Chains:state', $1, $2) ON CONFLICT (collection, key) DO UPDATE SET doc = excluded.doc`,
          [chainUuid, JSON.stringify({ processId: chainUuid, state: { step: k + 1 }, position })],
        );
        await client.query(`INSERT INTO ${s}.docs VALUES ('Chains~outbox', $1, $2)`, [
          `${chainUuid}-${k}`,
          JSON.stringify({ id: chainUuid, payload: { chainUuid }, reqCtx: BENCH_REQ_CTX }),
        ]);
        await client.query(
          `INSERT INTO ${s}.checkpoints VALUES ('Chains', $1) ON CONFLICT (handler) DO UPDATE SET position = excluded.position`,
          [position],
        );
        await client.query("COMMIT");
        await client.query(`DELETE FROM ${s}.docs WHERE collection = 'Chains~outbox' AND key = $1`, [`${chainUuid}-${k}`]);
      }
    };
    for (const concurrency of [1, 8]) {
      const { f, until } = await chainFacade(
        createPostgresBackends({ connectionString: DATABASE_URL, schema: `${chainSchema}${concurrency}` }),
        concurrency,
      );
      let started = 0;
      await duel(
        b,
        "postgres",
        `process-manager chain of 3 steps (concurrency ${concurrency})`,
        chains,
        rounds,
        async () => {
          for (let i = 0; i < chains; i++) await f.dispatch(Start, { chainUuid: newUuid() }, { reqCtx: BENCH_REQ_CTX });
          started += chains;
          await until(started);
        },
        [
          {
            name: "raw (same writes)",
            run: async () => {
              for (let i = 0; i < chains; i++) await rawChain(newUuid());
            },
          },
        ],
        "chains/s",
      );
      await f.stop();
    }
    client.release();
  } finally {
    for (const schema of [dispatchSchema, `${dispatchSchema}a`, `${chainSchema}1`, `${chainSchema}8`, rawSchema])
      await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await pool.end();
  }
}

export default async function reactions(b: Bench): Promise<void> {
  const chains = b.quick ? 50 : 300;
  const ops = b.quick ? 200 : 2000;
  const rounds = b.quick ? 2 : 5;
  await sqlite(b, chains, ops, rounds);
  await postgres(b, chains, ops, rounds);
}
