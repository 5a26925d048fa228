/**
 * Several app instances on ONE SQLite file, as several processes (a server and
 * a CLI) would share it: each createSqliteBackends is its own connection and
 * so its own instance. Live delivery across instances (onExternalAppend over
 * PRAGMA data_version), one processor per readmodel (the lease lock), take-over,
 * lease loss, optimistic concurrency, and a real second process. Every test
 * runs on each Node.js driver; the second processes use the other one, so
 * better-sqlite3 and node:sqlite share a file (same format, same locks).
 */
import { fork } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { createFacade, isMnemeError, newUuid, type Facade } from "mneme";
import {
  createSqliteBackends,
  SqliteDatabase,
  SqliteEventRepository,
  SqliteReadmodelStoreBackend,
  type SqliteBackends,
} from "mneme/sqlite";
import { CreateTodo, registerTodo } from "../../examples/todo/todo-domain.js";
import { Counter, CounterTotals, Increment, IncrementMany, Note } from "../support/counter-domain.js";
import { rejectsWith } from "../support/rejections.js";
import { otherSqliteDriver, SQLITE_DRIVERS } from "../support/sqlite-drivers.js";
import { ev } from "../support/todo-events.js";
import { until } from "../support/until.js";

const dir = mkdtempSync(join(tmpdir(), "mneme-sqlite-instances-"));
let fileNo = 0;
const newFile = (): string => join(dir, `i${++fileNo}.db`);
const cleanups: (() => Promise<unknown> | unknown)[] = [];
afterAll(async () => {
  for (const c of cleanups.reverse()) await c();
  rmSync(dir, { recursive: true, force: true });
});

const range = (from: number, to: number): number[] => Array.from({ length: to - from + 1 }, (_, i) => from + i);

describe.each(SQLITE_DRIVERS)("driver %s", (driver) => {
  /** Sets a lease's expiry from a third connection: stands for "its holder stalled past the lease". */
  function expireLease(filename: string, handler: string): void {
    const raw = SqliteDatabase.open(filename, { driver });
    try {
      expect(raw.statement("UPDATE mneme_readmodel_locks SET expires_at = 0 WHERE handler = ?").run(handler).changes).toBe(1);
    } finally {
      raw.close();
    }
  }

  /** The owner of the handler's unexpired lease (a released lease keeps its row, and its fencing token, expired). */
  function leaseOwner(filename: string, handler: string): string | undefined {
    const raw = SqliteDatabase.open(filename, { driver });
    try {
      return (
        raw.statement("SELECT owner FROM mneme_readmodel_locks WHERE handler = ? AND expires_at > ?").get(handler, Date.now()) as
          { owner: string } | undefined
      )?.owner;
    } finally {
      raw.close();
    }
  }

  describe("SqliteEventRepository.onExternalAppend", () => {
    it("reports appends of other connections only: not its own, not other tables' commits; an external append just before its own still counts", async () => {
      const filename = newFile();
      // A poll period no test waits for: the test runs the check itself.
      const a = new SqliteEventRepository({ filename, driver, pollIntervalMs: 3_600_000 });
      const b = new SqliteEventRepository({ filename, driver });
      const other = new SqliteReadmodelStoreBackend({ filename, driver });
      cleanups.push(
        () => a.close(),
        () => b.close(),
        () => other.close(),
      );
      await a.init();
      await b.init();
      const seen: (number | undefined)[] = [];
      const off = a.onExternalAppend((p) => seen.push(p));
      expect(a.externalAppendWatching).toBe(true);
      expect(a.checkExternalAppends()).toBe(false);

      await a.append([ev("own")]); // position 1, this connection
      expect(a.checkExternalAppends()).toBe(false);
      await other.setCheckpoint("h", 1); // another connection, another table: data_version moves, the head does not
      expect(a.checkExternalAppends()).toBe(false);
      expect(seen).toEqual([]);

      await b.append([ev("b1"), ev("b1")]); // 2, 3
      expect(a.checkExternalAppends()).toBe(true);
      expect(seen).toEqual([3]);
      expect(a.checkExternalAppends()).toBe(false);

      await b.append([ev("b2")]); // 4, external
      await a.append([ev("own")]); // 5, own: must not hide 4
      expect(a.checkExternalAppends()).toBe(true);
      expect(seen).toEqual([3, 5]);

      await a.append([ev("own")]); // 6 right after what was seen: own only
      expect(a.checkExternalAppends()).toBe(false);

      off();
      expect(a.externalAppendWatching).toBe(false);
      await b.append([ev("b3")]);
      expect(a.checkExternalAppends()).toBe(false);
      expect(seen).toEqual([3, 5]);
    });

    it("polls on a timer while listeners exist, stops on unsubscribe and close; 0 turns it off; bad options are rejected", async () => {
      const filename = newFile();
      const a = new SqliteEventRepository({ filename, driver, pollIntervalMs: 10 });
      const b = new SqliteEventRepository({ filename, driver });
      cleanups.push(
        () => a.close(),
        () => b.close(),
      );
      await b.init();
      const seen: (number | undefined)[] = [];
      const off = a.onExternalAppend((p) => seen.push(p));
      const off2 = a.onExternalAppend(() => undefined);
      await b.append([ev("x"), ev("x")]);
      await until(() => seen.length > 0, "the timer reports b's append");
      expect(seen).toEqual([2]);
      off();
      expect(a.externalAppendWatching).toBe(true); // the second listener keeps it going
      off2();
      expect(a.externalAppendWatching).toBe(false);

      a.onExternalAppend(() => undefined);
      expect(a.externalAppendWatching).toBe(true);
      await a.close();
      expect(a.externalAppendWatching).toBe(false);
      expect(() => a.onExternalAppend(() => undefined)).toThrow(expect.objectContaining({ code: "STORE_CLOSED" }));

      const quiet = new SqliteEventRepository({ filename, driver, pollIntervalMs: 0 });
      cleanups.push(() => quiet.close());
      quiet.onExternalAppend(() => undefined);
      expect(quiet.externalAppendWatching).toBe(false);
      for (const bad of [-1, 1.5, Number.NaN]) {
        expect(() => new SqliteEventRepository({ filename, driver, pollIntervalMs: bad })).toThrow(
          expect.objectContaining({ code: "INVALID_REQUEST" }),
        );
        expect(() => createSqliteBackends({ filename, driver, pollIntervalMs: bad })).toThrow(
          expect.objectContaining({ code: "INVALID_REQUEST" }),
        );
      }
      expect(() => createSqliteBackends({ filename, driver, lockLeaseMs: 0 })).toThrow(
        expect.objectContaining({ code: "INVALID_REQUEST" }),
      );
    });
  });

  describe("SqliteReadmodelStoreBackend lease lock", () => {
    it("two backends on one file (one process) exclude each other; ours is renewed; unlock and close free it", async () => {
      const filename = newFile();
      const a = new SqliteReadmodelStoreBackend({ filename, driver });
      const b = new SqliteReadmodelStoreBackend({ filename, driver });
      cleanups.push(
        () => a.close(),
        () => b.close(),
      );
      expect(a.lockOwner).not.toBe(b.lockOwner);
      expect(await a.tryLock("h")).toBe(true);
      expect(await b.tryLock("h")).toBe(false);
      expect(await a.tryLock("h")).toBe(true); // already ours
      expect(await b.tryLock("g")).toBe(true);
      expect(await a.tryLock("g")).toBe(false);
      expect(a.heldLockNames()).toEqual(["h"]);
      expect(leaseOwner(filename, "h")).toBe(a.lockOwner);

      await b.unlock("h"); // not b's: nothing happens
      expect(await b.tryLock("h")).toBe(false);
      await a.unlock("h");
      expect(await b.tryLock("h")).toBe(true);
      expect(b.heldLockNames().sort()).toEqual(["g", "h"]);

      await b.close(); // releases both
      expect(leaseOwner(filename, "g")).toBeUndefined();
      expect(await a.tryLock("g")).toBe(true);
      expect(await a.tryLock("h")).toBe(true);
      await rejectsWith(b.tryLock("x"), "STORE_CLOSED");
      await rejectsWith(a.tryLock(""), "INVALID_REQUEST");
    });

    it("an expired lease is taken over; the stalled holder's next commit is refused whole (the fence) and it is told", async () => {
      const filename = newFile();
      const a = new SqliteReadmodelStoreBackend({ filename, driver, lockLeaseMs: 3_600_000 }); // its heartbeat never runs in this test
      const b = new SqliteReadmodelStoreBackend({ filename, driver });
      cleanups.push(
        () => a.close(),
        () => b.close(),
      );
      const lost: string[][] = [];
      a.onLockLost((names) => lost.push([...names]));
      expect(await a.tryLock("h")).toBe(true);
      await a.transaction(async () => {
        await a.collection<{ n: number }>("docs").put("k1", { n: 1 });
        await a.setCheckpoint("h", 1);
      });
      expect(await b.tryLock("h")).toBe(false); // alive: not before expiry

      expireLease(filename, "h");
      expect(await b.tryLock("h")).toBe(true);
      await b.setCheckpoint("h", 5);

      // a has not noticed yet and commits: refused, nothing written, a is told
      await rejectsWith(
        a.transaction(async () => {
          await a.collection<{ n: number }>("docs").put("k2", { n: 2 });
          await a.setCheckpoint("h", 2);
        }),
        "INVALID_STATE",
      );
      expect(lost).toEqual([["h"]]);
      expect(a.heldLockNames()).toEqual([]);
      expect(await b.getCheckpoint("h")).toBe(5);
      expect(await b.collection("docs").get("k2")).toBeUndefined();
      // a direct checkpoint write of the lost handler is refused too (it would move b's checkpoint back)
      await rejectsWith(a.setCheckpoint("h", 1), "INVALID_STATE");
      expect(await b.getCheckpoint("h")).toBe(5);
      expect(lost).toEqual([["h"]]); // told once
      // handlers a never locked are not fenced
      await a.setCheckpoint("free", 3);
      expect(await b.getCheckpoint("free")).toBe(3);

      expect(await a.tryLock("h")).toBe(false);
      await b.unlock("h");
      expect(await a.tryLock("h")).toBe(true);
      await a.setCheckpoint("h", 6);
      expect(await b.getCheckpoint("h")).toBe(6);
    });

    it("the heartbeat renews held leases and reports one taken over while it was paused (a stalled process)", async () => {
      const filename = newFile();
      // Long enough that a busy test machine does not let it lapse by accident (renewed every 333 ms).
      const a = new SqliteReadmodelStoreBackend({ filename, driver, lockLeaseMs: 1000 });
      const b = new SqliteReadmodelStoreBackend({ filename, driver });
      cleanups.push(
        () => a.close(),
        () => b.close(),
      );
      const lost: string[][] = [];
      a.onLockLost((names) => lost.push([...names]));
      expect(await a.tryLock("h")).toBe(true);
      const expiry = (): number => {
        const raw = SqliteDatabase.open(filename, { driver });
        try {
          return (raw.statement("SELECT expires_at AS e FROM mneme_readmodel_locks WHERE handler = 'h'").get() as { e: number }).e;
        } finally {
          raw.close();
        }
      };
      const first = expiry();
      await until(() => expiry() > first, "the heartbeat renews the lease");
      // while renewed, b cannot take it, also after the first expiry has passed
      await until(() => Date.now() > first + 50, "the first expiry passes");
      expect(await b.tryLock("h")).toBe(false);

      a.leaseLocks.pauseHeartbeat(true);
      await until(async () => await b.tryLock("h"), "b takes the expired lease");
      expect(lost).toEqual([]);
      a.leaseLocks.pauseHeartbeat(false);
      await until(() => lost.length > 0, "a's heartbeat notices");
      expect(lost).toEqual([["h"]]);
      expect(a.heldLockNames()).toEqual([]);
      expect(leaseOwner(filename, "h")).toBe(b.lockOwner);
    });
  });

  interface Instance {
    readonly f: Facade;
    readonly totals: CounterTotals;
    readonly backends: SqliteBackends;
    state(): string;
  }

  async function counterInstance(filename: string, opts: { lockLeaseMs?: number } = {}): Promise<Instance> {
    const backends = createSqliteBackends({ filename, driver, pollIntervalMs: 20, ...opts });
    const f = createFacade({ appName: "sqlite-instances", ...backends, delivery: { lockRetryMs: 50 } });
    f.registerDomain(Counter);
    const totals = new CounterTotals(f);
    f.registerReadmodel(totals);
    await f.start();
    cleanups.push(() => f.stop().catch(() => undefined));
    return { f, totals, backends, state: () => f.runtime.listEventHandlers()[0]!.state };
  }

  describe("app instances on one SQLite file (facade level)", () => {
    it("(a) the readmodel runs on one instance; the other's appends reach it live, each applied once", async () => {
      const filename = newFile();
      const a = await counterInstance(filename);
      const b = await counterInstance(filename);
      expect(a.state()).toBe("running");
      expect(b.state()).toBe("standby");
      let expected = 0;
      for (let i = 0; i < 30; i++) {
        const via = i % 3 === 0 ? a : b;
        const r =
          i % 5 === 0
            ? await via.f.dispatch(IncrementMany, { counterUuids: ["c1", "c2"], by: 1 })
            : await via.f.dispatch(Increment, { counterUuid: "c1", by: 1 }, { waitToFinish: true });
        expected += r.events.length;
      }
      await until(() => a.totals.applied.length >= expected, "a applies b's events");
      expect(a.totals.applied).toEqual(range(1, expected));
      expect(b.totals.applied).toEqual([]);
      expect(b.state()).toBe("standby");
      // both read the same documents, kept by a
      expect(await b.totals.allTotals()).toEqual(await a.totals.allTotals());
      expect(await a.totals.total("c1")).toBe(30);
      expect(await a.totals.total("c2")).toBe(6);
    });

    it("(b) stopping the processing instance lets the other take over from the shared checkpoint", async () => {
      const filename = newFile();
      const a = await counterInstance(filename);
      const b = await counterInstance(filename);
      for (let i = 0; i < 10; i++) await b.f.dispatch(Increment, { counterUuid: "c", by: 1 });
      await until(() => a.totals.applied.length === 10, "a applies the first ten");
      await a.f.stop();
      // appended while nobody processes (b may not have taken over yet)
      for (let i = 0; i < 5; i++) await b.f.dispatch(Increment, { counterUuid: "c", by: 10 });
      await until(() => b.state() === "running", "b takes over");
      await until(() => b.totals.applied.length === 5, "b applies the five new events");
      await b.f.dispatch(Increment, { counterUuid: "c", by: 100 }, { waitToFinish: true });
      expect(a.totals.applied).toEqual(range(1, 10));
      expect(b.totals.applied).toEqual(range(11, 16)); // only the new ones: restored from a's checkpoint
      expect(await b.totals.total("c")).toBe(10 + 50 + 100);
      expect(b.backends.readmodelStoreBackend.heldLockNames()).toEqual(["CounterTotals"]);
    });

    it("(c) a lease that is not renewed is taken over; the stalled instance is told and steps back to standby", async () => {
      const filename = newFile();
      const a = await counterInstance(filename, { lockLeaseMs: 1000 });
      const b = await counterInstance(filename); // default lease: steady once it holds
      expect(a.state()).toBe("running");
      for (let i = 0; i < 5; i++) await a.f.dispatch(Increment, { counterUuid: "c", by: 1 }, { waitToFinish: true });
      expect(a.totals.applied).toEqual(range(1, 5));

      a.backends.readmodelStoreBackend.leaseLocks.pauseHeartbeat(true); // a stalls: its lease runs out
      await until(() => b.state() === "running", "b takes the expired lease");
      expect(b.totals.applied).toEqual([]); // restored from a's checkpoint 5: nothing to redo
      expect(a.state()).toBe("running"); // a has not noticed yet
      a.backends.readmodelStoreBackend.leaseLocks.pauseHeartbeat(false);
      await until(() => a.state() === "standby", "a's heartbeat finds b's lease and a steps back");
      expect(a.f.runtime.getMetrics("CounterTotals").lastError).toMatch(/lost the processing lock/);

      for (let i = 0; i < 6; i++) await (i % 2 === 0 ? a : b).f.dispatch(Increment, { counterUuid: "c", by: 1 });
      await until(() => b.totals.applied.length === 6, "b applies what both append");
      expect(b.totals.applied).toEqual(range(6, 11));
      expect(a.totals.applied).toEqual(range(1, 5));
      expect(a.state()).toBe("standby"); // b's lease is renewed: a keeps waiting
      expect(await b.totals.total("c")).toBe(11);
    });

    it("(d) concurrent conflicting commands through two instances: exactly one wins, the other gets CONFLICT", async () => {
      const filename = newFile();
      const reqCtx = { senderAccountUuid: "a", senderSessionUuid: "s", senderIdentityUuid: "i", senderTenantUuid: "t" };
      const make = async () => {
        const f = createFacade({ appName: "sqlite-conflict", ...createSqliteBackends({ filename, driver, pollIntervalMs: 20 }) });
        registerTodo(f);
        await f.start();
        cleanups.push(() => f.stop().catch(() => undefined));
        return f;
      };
      const [a, b] = [await make(), await make()];
      for (let round = 0; round < 20; round++) {
        const todoUuid = newUuid();
        const results = await Promise.allSettled([
          a.dispatch(CreateTodo, { todoUuid, title: "from a" }, { reqCtx }),
          b.dispatch(CreateTodo, { todoUuid, title: "from b" }, { reqCtx }),
        ]);
        const failed = results.filter((r): r is PromiseRejectedResult => r.status === "rejected");
        expect(results.filter((r) => r.status === "fulfilled")).toHaveLength(1);
        expect(failed).toHaveLength(1);
        expect(isMnemeError(failed[0]!.reason, "CONFLICT")).toBe(true);
        expect(await b.eventRepository.loadAggregate(todoUuid)).toHaveLength(1);
      }
    });

    it("a second PROCESS on the other Node.js driver appends to the file while this one follows live: no gaps, each event applied once", async () => {
      const filename = newFile();
      const here = await counterInstance(filename);
      expect(here.state()).toBe("running");
      const commands = 150;
      const child = fork(
        fileURLToPath(new URL("../support/sqlite-instance-process.ts", import.meta.url)),
        [filename, String(commands), otherSqliteDriver(driver)],
        {
          execArgv: ["--import", "tsx"],
          cwd: fileURLToPath(new URL("../..", import.meta.url)),
          stdio: ["ignore", "inherit", "inherit", "ipc"],
        },
      );
      cleanups.push(() => child.kill());
      type Report = { half?: true; done?: true; state: string; events: number };
      let liveChecked = false;
      let half = false;
      const report = new Promise<Report>((resolve, reject) => {
        child.on("message", (m: Report) => {
          if (m.done === true) return void resolve(m);
          // Half-way: the other process waits until everything appended so far is applied here.
          half = true;
          void (async () => {
            const head = await here.f.eventRepository.headPosition();
            await until(() => here.totals.lastPosition >= head, "the events of the other process are applied here while it runs");
            liveChecked = true;
            child.send("go");
          })().catch(reject);
        });
        child.once("error", reject);
        child.once("exit", (code) => reject(new Error(`the second process exited with ${code} before reporting`)));
      });
      let done = false;
      void report.then(
        () => (done = true),
        () => (done = true),
      );
      // Append from here too during the first half: positions of both interleave. From the half on,
      // only the other process appends, so only onExternalAppend can bring its events here.
      let ownEvents = 0;
      while (!done && !half) {
        ownEvents += (await here.f.dispatch(Increment, { counterUuid: "shared", by: 1 })).events.length;
        await new Promise((r) => setTimeout(r, 5));
      }
      const { state, events } = await report;
      expect(liveChecked).toBe(true);
      expect(state).toBe("standby"); // the other process did not process the readmodel
      const total = events + ownEvents;
      await until(() => here.totals.applied.length >= total, "every event is applied here");
      expect(here.totals.applied).toEqual(range(1, total));
      expect(await here.f.eventRepository.headPosition()).toBe(total);
      // "shared" got one per own command and one per command of the other process
      expect(await here.totals.total("shared")).toBe(ownEvents + commands);
      expect(events).toBeGreaterThan(commands);
    }, 60_000);
  });

  interface Holder {
    readonly pid: number;
    /** The head after its appends (all applied by its readmodel). */
    readonly head: number;
    kill(): Promise<void>;
  }

  /** Starts test/support/sqlite-lease-holder-process.ts: a live process holding the CounterTotals lease of `filename`. */
  async function leaseHolder(filename: string, events: number): Promise<Holder> {
    const child = fork(
      fileURLToPath(new URL("../support/sqlite-lease-holder-process.ts", import.meta.url)),
      [filename, String(events), otherSqliteDriver(driver)],
      {
        execArgv: ["--import", "tsx"],
        cwd: fileURLToPath(new URL("../..", import.meta.url)),
        stdio: ["ignore", "inherit", "inherit", "ipc"],
      },
    );
    const exited = new Promise<NodeJS.Signals | number | null>((resolve) => child.once("exit", (code, signal) => resolve(signal ?? code)));
    cleanups.push(() => child.kill("SIGKILL"));
    const ready = await new Promise<{ pid: number; head: number }>((resolve, reject) => {
      child.once("message", (m) => resolve(m as { pid: number; head: number }));
      child.once("error", reject);
      void exited.then((how) => reject(new Error(`the lease holder exited (${String(how)}) before reporting`)));
    });
    return {
      ...ready,
      kill: async () => {
        child.kill("SIGKILL");
        expect(await exited).toBe("SIGKILL");
      },
    };
  }

  async function eventAt(f: Facade, position: number) {
    for await (const batch of f.eventRepository.readAll({ afterPosition: position - 1, untilPosition: position })) return batch[0]!;
    throw new Error(`no event at ${position}`);
  }

  describe("a process restarted after kill -9 (SQLite)", () => {
    it("takes the dead process's lease at once: running and current when start() resolves, lastEventTimestamp restored, waitToFinish applies", async () => {
      const filename = newFile();
      const holder = await leaseHolder(filename, 12);
      expect(holder.head).toBe(12);
      expect(leaseOwner(filename, "CounterTotals")).toMatch(new RegExp(`/${holder.pid}@`));
      await holder.kill(); // its lease row stays, unexpired for a minute

      // The restart: a lease and a retry period no test waits for, so only "the owner process is gone" can let it in.
      const backends = createSqliteBackends({ filename, driver, lockLeaseMs: 60_000 });
      const f = createFacade({ appName: "sqlite-instances", ...backends, systemEvents: true, delivery: { lockRetryMs: 3_600_000 } });
      cleanups.push(() => f.stop().catch(() => undefined));
      f.registerDomain(Counter);
      const totals = new CounterTotals(f);
      f.registerReadmodel(totals);
      await f.start();
      const info = f.runtime.listEventHandlers()[0]!;
      expect(info.state).toBe("running");
      expect(info.lastPosition).toBe(12);
      expect(info.lastEventTimestamp).toBe((await eventAt(f, 12)).createdAt);
      expect(f.runtime.getMetrics("CounterTotals").lastEventTimestamp).toBe(info.lastEventTimestamp);
      expect(leaseOwner(filename, "CounterTotals")).toBe(backends.readmodelStoreBackend.lockOwner);
      expect(f.systemEvents.replay(0).filter((e) => e.kind === "HandlersInStandby")).toEqual([]);
      expect(await totals.total("shared")).toBe(12);
      const r = await f.dispatch(Increment, { counterUuid: "shared", by: 1 }, { waitToFinish: true });
      expect(r.handlerErrors).toEqual([]);
      expect(await totals.total("shared")).toBe(13);
      expect(totals.applied).toEqual([13]); // resumed from the dead process's checkpoint: nothing applied twice
    }, 60_000);

    it("while the lease holder lives: start() reports the handler in standby, waitToFinish waits for the holder to apply, start.waitForStandby waits for the take-over", async () => {
      const filename = newFile();
      const holder = await leaseHolder(filename, 3);
      const open = (start?: { waitForStandby: number }) => {
        const f = createFacade({
          appName: "sqlite-instances",
          ...createSqliteBackends({ filename, driver }),
          systemEvents: true,
          delivery: { lockRetryMs: 50 },
          ...(start ? { start } : {}),
        });
        cleanups.push(() => f.stop().catch(() => undefined));
        f.registerDomain(Counter);
        const totals = new CounterTotals(f);
        f.registerReadmodel(totals);
        return { f, totals, state: () => f.runtime.listEventHandlers()[0]!.state };
      };

      // a waits 100 ms for nothing: the holder lives, so the handler stays in standby, and start() says so
      const a = open({ waitForStandby: 100 });
      await a.f.start();
      expect(a.state()).toBe("standby");
      expect(
        a.f.systemEvents
          .replay(0)
          .filter((e) => e.kind === "HandlersInStandby")
          .map((e) => e.data),
      ).toEqual([{ eventHandlerNames: ["CounterTotals"], waitedMs: 100 }]);
      const logged = (await a.f.logStore.list({ level: "warn", source: "mneme.start" })).items;
      expect(logged).toHaveLength(1);
      expect(logged[0]!.message).toMatch(/standby.*CounterTotals/);
      expect(logged[0]!.data).toEqual({ eventHandlerNames: ["CounterTotals"], waitedMs: 100 });
      // The holder process applies it: the wait reads its checkpoint, and a's next read sees the write.
      const r = await a.f.dispatch(Increment, { counterUuid: "shared", by: 1 }, { waitToFinish: true });
      expect(r.handlerErrors).toEqual([]);
      expect(await a.totals.total("shared")).toBe(holder.head + 1);
      // a handler in standby that does not handle the command's events is not reported
      expect((await a.f.dispatch(Note, { counterUuid: "shared", text: "n" }, { waitToFinish: true })).handlerErrors).toEqual([]);
      await a.f.stop();

      // b waits up to 30 s: start() is still pending while the handler stands by, and resolves once it has taken over
      const b = open({ waitForStandby: 30_000 });
      let started = false;
      const starting = b.f.start().then(() => (started = true));
      await until(() => b.state() === "standby", "b's handler stands by");
      expect(started).toBe(false);
      await holder.kill();
      await starting;
      expect(b.state()).toBe("running");
      expect(b.totals.lastPosition).toBe(holder.head + 2);
      expect(await b.totals.total("shared")).toBe(holder.head + 1);
      expect(b.f.systemEvents.replay(0).filter((e) => e.kind === "HandlersInStandby")).toEqual([]);
      expect((await b.f.logStore.list({ level: "warn", source: "mneme.start" })).items).toHaveLength(1); // a's entry only
    }, 60_000);

    it("a handler that lost its lease never writes its checkpoint: stop() in standby resolves and leaves the holder's checkpoint", async () => {
      const filename = newFile();
      const a = await counterInstance(filename, { lockLeaseMs: 1000 });
      const b = await counterInstance(filename);
      await a.f.dispatch(Increment, { counterUuid: "c", by: 1 }, { waitToFinish: true });
      // an event CounterTotals does not handle moves a's position past its persisted checkpoint
      await a.f.dispatch(Note, { counterUuid: "c", text: "not counted" }, { waitToFinish: true });
      expect(a.totals.lastPosition).toBe(2);

      a.backends.readmodelStoreBackend.leaseLocks.pauseHeartbeat(true);
      await until(() => b.state() === "running", "b takes the expired lease");
      for (let i = 0; i < 3; i++) await b.f.dispatch(Increment, { counterUuid: "c", by: 1 }, { waitToFinish: true });
      const checkpoint = await b.backends.readmodelStoreBackend.getCheckpoint("CounterTotals");
      expect(checkpoint).toBe(5);
      a.backends.readmodelStoreBackend.leaseLocks.pauseHeartbeat(false);
      await until(() => a.state() === "standby", "a steps back");

      await a.f.runtime.controlEventHandler({ action: "stop", eventHandlerName: "CounterTotals" });
      expect(a.state()).toBe("stopped");
      expect(await b.backends.readmodelStoreBackend.getCheckpoint("CounterTotals")).toBe(checkpoint);
      await b.f.dispatch(Increment, { counterUuid: "c", by: 1 }, { waitToFinish: true });
      expect(await b.totals.total("c")).toBe(5);
    });
  });
});
