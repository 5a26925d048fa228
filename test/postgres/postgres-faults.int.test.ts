/**
 * Fault injection on Postgres: the session of every kind of client mneme
 * checks out is terminated (pg_terminate_backend) at statement boundaries,
 * through the `onStatement` testing hook. The process must live on (no
 * unhandled 'error' event), failed calls must reject with UNAVAILABLE, a
 * terminated client must never be reused, and event handlers must retry and
 * end equal to a full replay of the event store.
 */
import pg from "pg";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { createFacade, isMnemeError, newUuid, type Event } from "mneme";
import {
  createPostgresBackends,
  PostgresCommandStore,
  PostgresEventRepository,
  PostgresLogStore,
  PostgresReadmodelStoreBackend,
  type PgClientKind,
  type PgStatement,
} from "mneme/postgres";
import { Counter, CounterTotals, Increment } from "../support/counter-domain.js";
import { rejection } from "../support/rejections.js";
import { ev } from "../support/todo-events.js";

const DATABASE_URL = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test";
const admin = new pg.Pool({ connectionString: DATABASE_URL, max: 2 });
admin.on("error", () => {});
const pools: pg.Pool[] = [];
const schemas: string[] = [];

/**
 * A pool as a user might make it: deliberately WITHOUT an 'error' listener of
 * its own (mneme's stores add one), with a record of how each client last
 * left it (returned for reuse, or destroyed) and which clients it removed.
 */
function userPool(max = 6): pg.Pool & { lastRelease: Map<number, "returned" | "destroyed">; removedPids: Set<number> } {
  const pool = Object.assign(new pg.Pool({ connectionString: DATABASE_URL, max }), {
    lastRelease: new Map<number, "returned" | "destroyed">(),
    removedPids: new Set<number>(),
  });
  const pidOf = (client: unknown): number | undefined => (client as { processID?: number }).processID;
  pool.on("release", (err: unknown, client: pg.PoolClient) => {
    const pid = pidOf(client);
    if (pid !== undefined) pool.lastRelease.set(pid, err ? "destroyed" : "returned");
  });
  pool.on("remove", (client: pg.PoolClient) => {
    const pid = pidOf(client);
    if (pid !== undefined) pool.removedPids.add(pid);
  });
  pools.push(pool);
  return pool;
}

function newSchema(): string {
  const s = `mneme_f_${newUuid().replace(/-/g, "").slice(-16)}`;
  schemas.push(s);
  return s;
}

// The process must not meet an 'error' event nobody listens to (Node would exit; vitest reports it too).
const uncaught: unknown[] = [];
const onUncaught = (e: unknown): void => {
  uncaught.push(e);
};
beforeAll(() => {
  process.on("uncaughtException", onUncaught);
  process.on("unhandledRejection", onUncaught);
});
/** Closes what a test opened, also when it failed half-way (a pool ends only when no client is checked out). */
const cleanups: (() => Promise<unknown>)[] = [];
function closeLater<T extends { close(): Promise<unknown> } | { stop(): Promise<unknown> }>(x: T): T {
  cleanups.push(() => ("close" in x ? x.close() : x.stop()));
  return x;
}
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
  expect(uncaught.map(String)).toEqual([]);
});
afterAll(async () => {
  process.off("uncaughtException", onUncaught);
  process.off("unhandledRejection", onUncaught);
  for (const p of pools) await p.end().catch(() => undefined);
  for (const s of schemas) await admin.query(`DROP SCHEMA IF EXISTS "${s}" CASCADE`);
  await admin.end();
});

/** Polls `cond` (a fact, not a duration) until true; fails after `ms` or `tries`, whichever comes first. */
async function until(cond: () => boolean | Promise<boolean>, what: string, ms = 15_000, tries = 3000): Promise<void> {
  const end = Date.now() + ms;
  for (let i = 0; i < tries && Date.now() < end; i++) {
    if (await cond()) return;
    await new Promise((r) => setTimeout(r, 5));
  }
  throw new Error(`timed out waiting for: ${what}`);
}

type Target = (s: PgStatement, indexInTransaction: number) => boolean;

/**
 * The statement hook: counts statements per kind and per transaction, and
 * when a target is armed, terminates the session of the first statement it
 * matches before that statement is sent (the hook is awaited), then disarms;
 * a target armed with an action runs that instead.
 */
class Faults {
  readonly kills: { kind: PgClientKind; text: string; index: number; pid: number }[] = [];
  readonly lastPid = new Map<PgClientKind, number>();
  readonly statements: PgStatement[] = [];
  recording = false;
  #target: Target | undefined;
  #action: ((s: PgStatement) => Promise<void>) | undefined;
  readonly #txIndex = new Map<number, number>();

  readonly hook = async (s: PgStatement): Promise<void> => {
    const pid = s.processId;
    if (pid === undefined) throw new Error("a checked-out client has no backend pid");
    const index = s.text === "BEGIN" ? 0 : (this.#txIndex.get(pid) ?? -1) + 1;
    this.#txIndex.set(pid, index);
    this.lastPid.set(s.kind, pid);
    if (this.recording) this.statements.push(s);
    const target = this.#target;
    if (target === undefined || !target(s, index)) return;
    this.#target = undefined;
    const action = this.#action;
    this.#action = undefined;
    if (action !== undefined) return action(s);
    // Recorded first: the client may hear of its session's end (and react) before the admin query returns.
    this.kills.push({ kind: s.kind, text: s.text, index, pid });
    await terminate(pid);
  };

  arm(target: Target, action?: (s: PgStatement) => Promise<void>): void {
    this.#target = target;
    this.#action = action;
  }

  get armed(): boolean {
    return this.#target !== undefined;
  }
}

/** Ends a session and waits (up to 5 s) until its backend process has exited. */
async function terminate(pid: number): Promise<void> {
  await admin.query("SELECT pg_terminate_backend($1, 5000)", [pid]);
}

/** Every killed session's client was released with an error (destroyed), not returned to the pool for reuse. */
function expectDestroyed(pool: ReturnType<typeof userPool>, kills: readonly { pid: number; kind: string }[]): void {
  for (const k of kills) expect(pool.lastRelease.get(k.pid), `the client of killed session ${k.pid} (${k.kind})`).toBe("destroyed");
}

describe("Postgres sessions terminated at statement boundaries", () => {
  it("a session ended between two statements of a readmodel transaction: UNAVAILABLE, nothing committed, the process lives", async () => {
    // Found in pg_stat_activity (no hook): this schema's only session idle inside a transaction.
    const pool = userPool();
    const schema = newSchema();
    const backend = closeLater(new PostgresReadmodelStoreBackend({ pool, schema }));
    await backend.init();
    const docs = backend.collection<{ n: number }>("docs");
    for (let round = 0; round < 3; round++) {
      const err = await rejection(
        backend.transaction(async () => {
          await docs.put("a", { n: round });
          const { rows } = await admin.query<{ pid: number }>(
            "SELECT pid FROM pg_stat_activity WHERE state = 'idle in transaction' AND query LIKE $1",
            [`%"${schema}".readmodel_documents%`],
          );
          expect(rows).toHaveLength(1);
          await terminate(rows[0]!.pid);
          await docs.get("a");
          await backend.setCheckpoint("h", 1);
        }),
      );
      expect(err.code, err.message).toBe("UNAVAILABLE");
      expect(await docs.get("a")).toBeUndefined();
      expect(await backend.getCheckpoint("h")).toBe(0);
    }
    await backend.transaction(() => docs.put("a", { n: 9 }));
    expect(await docs.get("a")).toEqual({ n: 9 });
  });

  it("a readmodel transaction rejects with UNAVAILABLE at every boundary, commits nothing, and the next one runs on a fresh client", async () => {
    const pool = userPool();
    const faults = new Faults();
    const backend = closeLater(new PostgresReadmodelStoreBackend({ pool, schema: newSchema(), onStatement: faults.hook }));
    await backend.init();
    const docs = backend.collection<{ n: number }>("docs");
    const body = async (n: number): Promise<void> => {
      await docs.put("a", { n });
      expect(await docs.get("a")).toEqual({ n });
      await docs.putMany([
        ["b", { n }],
        ["c", { n }],
      ]);
      await backend.setCheckpoint("h", n);
    };
    faults.recording = true;
    await backend.transaction(() => body(1));
    faults.recording = false;
    const texts = faults.statements.map((s) => s.text.trim().split(/\s/)[0]);
    expect(texts).toEqual(["BEGIN", "WITH", "SELECT", "WITH", "INSERT", "COMMIT"]);
    expect(faults.statements.every((s) => s.kind === "transaction")).toBe(true);

    for (let k = 0; k < texts.length; k++) {
      faults.arm((s, index) => s.kind === "transaction" && index === k);
      const err = await rejection(backend.transaction(() => body(100 + k)));
      expect(err.code, `killed before statement ${k} (${texts[k]}): ${err.message}`).toBe("UNAVAILABLE");
      expect(faults.kills).toHaveLength(k + 1);
      expect(await backend.getCheckpoint("h")).toBe(1);
      expect(await docs.getMany(["a", "b", "c"])).toEqual(
        new Map([
          ["a", { n: 1 }],
          ["b", { n: 1 }],
          ["c", { n: 1 }],
        ]),
      );
    }
    // After the last boundary: the client is idle in the pool when its session ends.
    await backend.transaction(() => body(2));
    const idle = faults.lastPid.get("transaction")!;
    await terminate(idle);
    // The pool hears the idle client's 'error' and removes it (its own listener was added by the store).
    await until(() => pool.removedPids.has(idle), "the pool drops the idle client");
    await backend.transaction(() => body(3));
    expect(await backend.getCheckpoint("h")).toBe(3);
    expectDestroyed(pool, faults.kills);
    await backend.close();
  });

  it("an append, a command record and a log entry killed before their statement reject with UNAVAILABLE and write nothing", async () => {
    const pool = userPool();
    const faults = new Faults();
    const schema = newSchema();
    const opts = { pool, schema, onStatement: faults.hook };
    const repo = closeLater(new PostgresEventRepository({ ...opts, pollIntervalMs: 0 }));
    const commands = closeLater(new PostgresCommandStore(opts));
    const logs = closeLater(new PostgresLogStore(opts));
    await repo.init();
    await commands.init();
    await logs.init();

    faults.arm((s) => s.kind === "append");
    expect((await rejection(repo.append([ev("a")]))).code).toBe("UNAVAILABLE");
    expect(await repo.loadAggregate("a")).toEqual([]);
    const [stored] = await repo.append([ev("a")]);
    expect(stored?.version).toBe(1);

    const rec = {
      commandUuid: newUuid(),
      domain: "Todo",
      name: "CreateTodo",
      tenantUuid: "",
      status: "succeeded" as const,
      createdAt: 1,
      durationMicros: 1,
      reqCtx: {},
      payload: {},
      eventUuids: [],
    };
    faults.arm((s) => s.kind === "command");
    expect((await rejection(commands.record(rec))).code).toBe("UNAVAILABLE");
    expect(await commands.get(rec.commandUuid)).toBeUndefined();
    await commands.record(rec);
    expect((await commands.get(rec.commandUuid))?.commandUuid).toBe(rec.commandUuid);

    faults.arm((s) => s.kind === "log");
    expect((await rejection(logs.append({ level: "info", message: "one" }))).code).toBe("UNAVAILABLE");
    expect((await logs.list()).items).toEqual([]);
    await logs.append({ level: "info", message: "two" });
    expect((await logs.list()).items.map((e) => e.message)).toEqual(["two"]);

    // Reads too: a killed event read is UNAVAILABLE, the next one works.
    faults.arm((s) => s.kind === "read");
    expect((await rejection(repo.loadAggregate("a"))).code).toBe("UNAVAILABLE");
    expect(await repo.loadAggregate("a")).toHaveLength(1);
    expect(faults.kills.map((k) => k.kind)).toEqual(["append", "command", "log", "read"]);
    expectDestroyed(pool, faults.kills);
    await Promise.all([repo.close(), commands.close(), logs.close()]);
  });

  it("a readAll in progress rejects with UNAVAILABLE at every page boundary and resumes from the last page it gave", async () => {
    const pool = userPool();
    const faults = new Faults();
    const repo = closeLater(new PostgresEventRepository({ pool, schema: newSchema(), pollIntervalMs: 0, onStatement: faults.hook }));
    await repo.init();
    const all = await repo.append(Array.from({ length: 10 }, (_, i) => ev(`agg-${i % 3}`, { i })));
    // Pages of 3: statements after 0, 3, 6, 9, and a last one that finds nothing.
    for (let k = 0; k < 5; k++) {
      let readsBefore = 0;
      faults.arm((s) => s.kind === "read" && readsBefore++ === k);
      const seen: Event[] = [];
      const err = await rejection(async () => {
        for await (const page of repo.readAll({ batchSize: 3 })) seen.push(...page);
      });
      expect(err.code).toBe("UNAVAILABLE");
      expect(seen).toEqual(all.slice(0, 3 * k));
      const after = seen.length === 0 ? 0 : seen[seen.length - 1]!.position;
      for await (const page of repo.readAll({ afterPosition: after, batchSize: 3 })) seen.push(...page);
      expect(seen).toEqual(all);
    }
    expect(faults.kills).toHaveLength(5);
    expectDestroyed(pool, faults.kills);
    await repo.close();
  });

  it("the LISTEN client killed before LISTEN and while listening reconnects, and notifications go on", async () => {
    const schema = newSchema();
    const faults = new Faults();
    const a = closeLater(new PostgresEventRepository({ pool: userPool(), schema, pollIntervalMs: 0 }));
    const pool = userPool();
    const b = closeLater(new PostgresEventRepository({ pool, schema, pollIntervalMs: 0, reconnectDelayMs: 10, onStatement: faults.hook }));
    await a.init();
    const calls: (number | undefined)[] = [];
    faults.arm((s) => s.kind === "listen");
    const off = b.onExternalAppend((p) => calls.push(p));
    await until(() => b.externalAppendListening && faults.kills.length === 1, "b listens after its first LISTEN was killed");
    expect(faults.kills.map((k) => k.text)).toEqual([`LISTEN "mneme_events_${schema}"`]);
    const [x] = await a.append([ev("x")]);
    await until(() => calls.includes(x!.position), "b is notified");

    const listening = faults.lastPid.get("listen")!;
    await terminate(listening);
    await until(() => b.externalAppendListening && faults.lastPid.get("listen") !== listening, "b listens again on a new session");
    await until(() => b.externalAppendListening, "b listens");
    const [y] = await a.append([ev("y")]);
    await until(() => calls.includes(y!.position), "b is notified after reconnecting");
    expectDestroyed(pool, faults.kills);
    expectDestroyed(pool, [{ pid: listening, kind: "listen" }]);
    off();
    await a.close();
    await b.close();
  });

  it("the lock client killed before tryLock, while holding locks, and before unlock: UNAVAILABLE, the loss is told, and the locks pass on", async () => {
    const schema = newSchema();
    const faults = new Faults();
    const pool = userPool();
    const a = closeLater(new PostgresReadmodelStoreBackend({ pool, schema, onStatement: faults.hook }));
    const c = closeLater(new PostgresReadmodelStoreBackend({ pool: userPool(), schema }));
    await a.init();
    const lost: string[][] = [];
    a.onLockLost((names) => lost.push([...names].sort()));

    faults.arm((s) => s.kind === "lock");
    expect((await rejection(a.tryLock("H"))).code).toBe("UNAVAILABLE");
    expect(a.heldLockNames()).toEqual([]);
    expect(await a.tryLock("H")).toBe(true);
    expect(await a.tryLock("G")).toBe(true);

    // Killed while idle, holding two locks: told once, and another backend takes them.
    await terminate(faults.lastPid.get("lock")!);
    await until(() => lost.length === 1, "a is told its locks are lost");
    expect(lost).toEqual([["G", "H"]]);
    expect(a.heldLockNames()).toEqual([]);
    expect(await c.tryLock("H")).toBe(true);
    expect(await a.tryLock("H")).toBe(false);

    // Killed before unlock: the call fails, but the session (and the lock) is gone.
    expect(await a.tryLock("K")).toBe(true);
    faults.arm((s) => s.kind === "lock");
    expect((await rejection(a.unlock("K"))).code).toBe("UNAVAILABLE");
    expect(await c.tryLock("K")).toBe(true);
    expectDestroyed(pool, faults.kills);
    await a.close();
    await c.close();
  });
});

describe("a facade on Postgres while sessions are killed under load", () => {
  it("commands fail only with UNAVAILABLE, the readmodel never stays failed, and it ends equal to a full replay", async () => {
    const schema = newSchema();
    const pool = userPool(10);
    const faults = new Faults();
    const backends = createPostgresBackends({ pool, schema, pollIntervalMs: 50, onStatement: faults.hook });
    const facade = closeLater(
      createFacade({ appName: "pg-faults", ...backends, delivery: { lockRetryMs: 20, retryInitialMs: 5, retryMaxMs: 100 } }),
    );
    facade.registerDomain(Counter);
    const totals = new CounterTotals(facade);
    facade.registerReadmodel(totals);
    await facade.start();
    const handler = () => facade.runtime.listEventHandlers().find((h) => h.eventHandlerName === "CounterTotals")!;
    expect(handler().state).toBe("running");

    // Commands from three workers, bounded in count; every failure must be UNAVAILABLE.
    const counters = Array.from({ length: 4 }, () => newUuid());
    let running = true;
    let ok = 0;
    const failures: string[] = [];
    let unavailable = 0;
    const worker = async (w: number): Promise<void> => {
      const deadline = Date.now() + 60_000;
      for (let i = 0; running && i < 50_000 && Date.now() < deadline; i++) {
        try {
          await facade.dispatch(Increment, { counterUuid: counters[(w + i) % counters.length]!, by: 1 + (i % 5) });
          ok++;
        } catch (e) {
          if (isMnemeError(e, "UNAVAILABLE")) unavailable++;
          else failures.push(String(e));
        }
      }
    };
    const workers = Promise.all([0, 1, 2].map(worker));
    cleanups.push(async () => {
      running = false;
      await workers;
    });

    // Each round terminates one session: a readmodel transaction at each of its statements
    // (BEGIN, get, put, setCheckpoint, COMMIT), an append, an event read (a readAll page,
    // the head poll), and the idle LISTEN and lock sessions.
    const targets: { name: string; target?: Target; idle?: PgClientKind }[] = [
      ...[0, 1, 2, 3].map((k) => ({
        name: `transaction statement ${k}`,
        target: ((s, index) => s.kind === "transaction" && index === k) as Target,
      })),
      { name: "transaction COMMIT", target: (s) => s.kind === "transaction" && s.text === "COMMIT" },
      { name: "append", target: (s) => s.kind === "append" },
      { name: "read", target: (s) => s.kind === "read" },
      { name: "idle lock session", idle: "lock" },
      { name: "idle LISTEN session", idle: "listen" },
    ];
    const rounds = targets.length * 3;
    for (let round = 0; round < rounds; round++) {
      const t = targets[round % targets.length]!;
      if (t.target !== undefined) {
        const before = faults.kills.length;
        faults.arm(t.target);
        await until(() => {
          if (handler().state === "failed") throw new Error(`round ${round}: the readmodel failed: ${handler().lastError ?? ""}`);
          return faults.kills.length > before;
        }, `round ${round}: a kill at ${t.name}`);
      } else {
        // The idle sessions: wait until the handler holds its lock again / b listens again, then kill.
        const kind = t.idle!;
        await until(
          () => (kind === "lock" ? handler().state === "running" : backends.eventRepository.externalAppendListening),
          `round ${round}: ${t.name} is up`,
        );
        const pid = faults.lastPid.get(kind)!;
        await terminate(pid);
        faults.kills.push({ kind, text: "(idle)", index: -1, pid });
      }
    }
    running = false;
    await workers;

    // The outage is over: the readmodel catches up and equals a replay of every stored event.
    const events: Event[] = [];
    for await (const page of facade.eventRepository.readAll()) events.push(...page);
    await until(async () => {
      const h = handler();
      return h.state === "running" && h.restorationState !== "restoring" && h.lastPosition >= events[events.length - 1]!.position;
    }, "the readmodel catches up");
    const replay: Record<string, number> = {};
    for (const e of events) replay[e.aggregateUuid] = (replay[e.aggregateUuid] ?? 0) + (e.payload as { by: number }).by;
    expect(await totals.allTotals()).toEqual(replay);

    expect(failures).toEqual([]);
    // Every append was killed before it was sent, so a command that failed wrote nothing.
    expect(events).toHaveLength(ok);
    expect(unavailable).toBeGreaterThan(0);
    expect(faults.kills.length).toBe(rounds);
    expect(handler().state).toBe("running");
    expectDestroyed(pool, faults.kills);
    await facade.stop();
  }, 120_000);

  it("a take-over that finds its handler stopped gives the lock back; an unlock whose session dies is no unhandled rejection", async () => {
    const schema = newSchema();
    const pool = userPool();
    const faults = new Faults();
    const other = closeLater(new PostgresReadmodelStoreBackend({ pool: userPool(), schema }));
    await other.init();
    expect(await other.tryLock("CounterTotals")).toBe(true);
    const backends = createPostgresBackends({ pool, schema, pollIntervalMs: 0, onStatement: faults.hook });
    const facade = closeLater(createFacade({ appName: "pg-faults-standby", ...backends, delivery: { lockRetryMs: 10 } }));
    facade.registerDomain(Counter);
    const totals = new CounterTotals(facade);
    facade.registerReadmodel(totals);
    await facade.start();
    expect(totals.state).toBe("standby");
    // Before the next take-over's tryLock is sent, the other instance lets go and the handler is stopped: the
    // take-over gets the lock for a handler no longer in standby and gives it back, and that unlock's session dies.
    faults.arm(
      (s) => s.kind === "lock" && s.text.includes("pg_try_advisory_lock"),
      async () => {
        await other.unlock("CounterTotals");
        await totals.stop();
        faults.arm((s) => s.kind === "lock" && s.text.includes("pg_advisory_unlock("));
      },
    );
    await until(() => faults.kills.length === 1, "the give-back's unlock is killed");
    // The lock went with the session: the other instance takes it again; the handler stays stopped.
    await until(() => other.tryLock("CounterTotals"), "the other instance takes the lock");
    expect(totals.state).toBe("stopped");
    expectDestroyed(pool, faults.kills);
  });

  it("a handler error thrown by user code still makes the handler failed (no retry)", async () => {
    const schema = newSchema();
    const backends = createPostgresBackends({ pool: userPool(), schema, pollIntervalMs: 0 });
    const facade = closeLater(createFacade({ appName: "pg-faults-user-error", ...backends, delivery: { retryInitialMs: 5 } }));
    facade.registerDomain(Counter);
    const totals = new CounterTotals(facade);
    facade.registerReadmodel(totals);
    await facade.start();
    totals.failOn = (e) => e.position === 2;
    const counter = newUuid();
    await facade.dispatch(Increment, { counterUuid: counter, by: 1 }, { waitToFinish: true });
    const res = await facade.dispatch(Increment, { counterUuid: counter, by: 2 }, { waitToFinish: true });
    expect(res.handlerErrors.map((h) => h.eventHandlerName)).toEqual(["CounterTotals"]);
    const info = facade.runtime.listEventHandlers().find((h) => h.eventHandlerName === "CounterTotals")!;
    expect(info.state).toBe("failed");
    expect(info.lastError).toMatch(/refusing position 2/);
    expect(await totals.total(counter)).toBe(1);
    await facade.stop();
  });
});
