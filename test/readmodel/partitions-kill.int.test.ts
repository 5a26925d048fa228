/**
 * Instances of a 4-partition readmodel in processes of their own, started,
 * stopped and killed with SIGKILL at random points (fast-check) while commands
 * are appended: afterwards every event is applied once, each aggregate's in
 * order, and the documents equal a replay from zero (one SQLite file; one
 * Postgres schema).
 */
import { type ChildProcess, fork } from "node:child_process";
import { fileURLToPath } from "node:url";
import fc from "fast-check";
import { afterAll, describe, expect, it } from "vitest";
import { createFacade, type Facade } from "mneme";
import { createPostgresBackends } from "mneme/postgres";
import { createSqliteBackends } from "mneme/sqlite";
import { Counter, IncrementMany } from "../support/counter-domain.js";
import { expectedDocs, PartitionedLog } from "../support/partitioned-log.js";
import { DATABASE_URL, postgresScratch } from "../support/postgres-scratch.js";
import { sqliteScratch } from "../support/sqlite-scratch.js";
import { until } from "../support/until.js";

const files = sqliteScratch("partitions-kill");
const pg = postgresScratch("mneme_pkill");
const children = new Set<ChildProcess>();
afterAll(() => {
  for (const c of children) c.kill("SIGKILL");
});

const PROCESS = fileURLToPath(new URL("../support/partition-instance-process.ts", import.meta.url));

/** Forks an instance and resolves once it started. */
function spawnInstance(kind: string, place: string): Promise<ChildProcess> {
  const child = fork(PROCESS, [kind, place, "50"], {
    execArgv: ["--import", "tsx"],
    cwd: fileURLToPath(new URL("../..", import.meta.url)),
    stdio: ["ignore", "inherit", "inherit", "ipc"],
  });
  children.add(child);
  child.once("exit", () => children.delete(child));
  return new Promise((resolve, reject) => {
    child.once("message", () => resolve(child));
    child.once("error", reject);
    child.once("exit", (code) => reject(new Error(`an instance exited with ${code} before it started`)));
  });
}

function stopInstance(child: ChildProcess): Promise<void> {
  return new Promise((resolve) => {
    child.once("exit", () => resolve());
    child.send("stop");
  });
}

function killInstance(child: ChildProcess): Promise<void> {
  return new Promise((resolve) => {
    child.once("exit", () => resolve());
    child.kill("SIGKILL");
  });
}

type Step = { kind: "start" } | { kind: "stop"; which: number } | { kind: "kill"; which: number } | { kind: "append"; commands: number };

const step: fc.Arbitrary<Step> = fc.oneof(
  fc.constant<Step>({ kind: "start" }),
  fc.nat(5).map<Step>((which) => ({ kind: "stop", which })),
  fc.nat(5).map<Step>((which) => ({ kind: "kill", which })),
  fc.integer({ min: 1, max: 12 }).map<Step>((commands) => ({ kind: "append", commands })),
);

async function append(f: Facade, commands: number, seed: number): Promise<void> {
  for (let i = 0; i < commands; i++) {
    const counterUuids = [...new Set(Array.from({ length: 3 }, (_, k) => `c-${(seed * 5 + i * 3 + k * 7) % 16}`))];
    await f.dispatch(IncrementMany, { counterUuids, by: 1 });
  }
}

describe.each(["sqlite", "postgres"] as const)("instances killed and started at random points (%s)", (kind) => {
  it("each event applied once, per-aggregate order kept, documents equal a replay", async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(step, { minLength: 3, maxLength: 7 }), async (steps) => {
        const place = kind === "sqlite" ? files.newFile() : pg.newSchema();
        const backends =
          kind === "sqlite"
            ? createSqliteBackends({ filename: place, pollIntervalMs: 10 })
            : createPostgresBackends({ connectionString: DATABASE_URL, schema: place, poolSize: 4 });
        // The commands come from an instance that does not run the readmodel; it reads the documents in the end.
        const writer = createFacade({ appName: "partitions", ...backends });
        files.keep(writer);
        writer.registerDomain(Counter);
        await writer.start();
        const view = new PartitionedLog(writer);
        const live: ChildProcess[] = [await spawnInstance(kind, place)];
        try {
          for (const [n, s] of steps.entries()) {
            if (s.kind === "start" && live.length < 3) live.push(await spawnInstance(kind, place));
            else if (s.kind === "append") await append(writer, s.commands, n);
            else if (s.kind !== "start" && live.length > 0) {
              const [child] = live.splice(s.which % live.length, 1);
              await (s.kind === "kill" ? killInstance(child!) : stopInstance(child!));
            }
          }
          await append(writer, 3, steps.length);
          if (live.length === 0) live.push(await spawnInstance(kind, place));
          const want = await expectedDocs(writer);
          await until(
            async () => {
              const docs = await view.docs();
              return [...want.values()].every((d) => (docs.get(d.counterUuid)?.positions.length ?? 0) >= d.positions.length);
            },
            "every event applied",
            60_000,
            50,
          );
          expect(await view.docs()).toEqual(want);
        } finally {
          await Promise.all(live.map(killInstance));
          await writer.stop();
        }
      }),
      { numRuns: 3 },
    );
  }, 300_000);
});
