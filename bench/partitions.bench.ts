/**
 * Partitioned readmodels (`withPartitions`) on Postgres, in one run:
 * - scale-out: a CPU-bound readmodel (~50 us of busy work per event, its
 *   documents read and written once per batch: CpuTotals) with 4
 *   partitions, run by 1 and by 2 app instances (child processes, each a
 *   facade on one schema), catching up with the same events appended in one
 *   transaction: events per second from that commit until every partition's
 *   checkpoint passed its last event, and the ratio of 2 instances to 1
 *   (rounds interleaved); the same rounds by raw-driver processes
 *   (bench/partition-raw-consumer.ts: pg alone, the same reads, routing,
 *   transactions and busy work, no fencing), 1 and 2 of them: what this
 *   machine gives 2 processes over 1 with no framework, and mneme's ratio
 *   to them;
 * - the cost of partitions on one instance: the same readmodel caught up
 *   from zero with 4 partitions and without (in this process, rounds
 *   interleaved): partitioned / unpartitioned;
 * - take-over: two instances hold two partitions each, one is SIGKILLed; the
 *   time until the other runs all four (lockRetryMs 1000, the default).
 * Each side reads and applies the same events; setup (process start, filling
 * the schema) is outside the timings. Beside the elapsed times it prints the
 * CPU time each side spent (of each instance, or of this process for the
 * catch-ups): on a shared machine the elapsed ratios follow the neighbours'
 * load, the CPU times show how the work splits and what partitions cost.
 */
import { type ChildProcess, fork } from "node:child_process";
import { fileURLToPath } from "node:url";
import { loadavg } from "node:os";
import pg from "pg";
import { createFacade, type Facade, newUuid, type NewEvent, withPartitions } from "mneme";
import { createPostgresBackends } from "mneme/postgres";
import { Counter } from "../test/support/counter-domain.js";
import { CpuTotals } from "../test/support/partitioned-log.js";
import { partitionKey, partitionOf } from "../src/readmodel/partition-routing.js";
import type { Bench } from "./harness.js";

const DATABASE_URL = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test";
const PROCESS = fileURLToPath(new URL("../test/support/partition-instance-process.ts", import.meta.url));
const RAW_PROCESS = fileURLToPath(new URL("./partition-raw-consumer.ts", import.meta.url));
const WORK_MICROS = 50;
const NAME = "PartitionedLog";

type Report = { running?: number[]; cpuMs?: number; ready?: true };

function spawn(schema: string, lockRetryMs: number): Promise<ChildProcess> {
  return forkReady(PROCESS, ["postgres", schema, String(lockRetryMs), String(WORK_MICROS)]);
}

/** A raw-driver consumer (bench/partition-raw-consumer.ts) of the given partitions. */
function spawnRaw(schema: string, partitions: number[]): Promise<ChildProcess> {
  return forkReady(RAW_PROCESS, [schema, partitions.join(","), String(WORK_MICROS)]);
}

function forkReady(script: string, args: string[]): Promise<ChildProcess> {
  const child = fork(script, args, {
    execArgv: ["--import", "tsx"],
    cwd: fileURLToPath(new URL("..", import.meta.url)),
    stdio: ["ignore", "inherit", "inherit", "ipc"],
  });
  return new Promise((resolve, reject) => {
    child.once("message", () => resolve(child));
    child.once("exit", (code) => reject(new Error(`an instance exited with ${code} before it started`)));
  });
}

function report(child: ChildProcess): Promise<Report> {
  return new Promise((resolve) => {
    child.once("message", (m: Report) => resolve(m));
    child.send({ report: true });
  });
}

async function running(child: ChildProcess): Promise<number[]> {
  return (await report(child)).running ?? [];
}

/** The CPU time each instance used so far (ms). */
async function cpuOf(children: ChildProcess[]): Promise<number[]> {
  return Promise.all(children.map(async (c) => (await report(c)).cpuMs ?? 0));
}

async function untilTrue(check: () => Promise<boolean>, what: string, ms = 60_000, everyMs = 5): Promise<void> {
  const end = performance.now() + ms;
  while (!(await check())) {
    if (performance.now() > end) throw new Error(`partitions bench: timed out waiting until ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

function kill(child: ChildProcess): Promise<void> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return void resolve();
    child.once("exit", () => resolve());
    child.kill("SIGKILL");
  });
}

function events(n: number, aggregates: string[]): NewEvent[] {
  return Array.from({ length: n }, (_, i) => ({
    domain: "Counter",
    name: "Incremented",
    aggregateUuid: aggregates[i % aggregates.length]!,
    payload: { by: 1 },
  }));
}

/**
 * `n` aggregate uuids, as many in each of the 4 partitions: the events (spread
 * evenly over the aggregates) then split evenly too, so that the rounds
 * measure the partitions and not the luck of the hash over a few hundred uuids.
 */
function balancedAggregates(n: number): string[] {
  const buckets: string[][] = [[], [], [], []];
  while (buckets.some((b) => b.length < n / 4)) {
    const u = newUuid();
    const b = buckets[partitionOf(u, 4)]!;
    if (b.length < n / 4) b.push(u);
  }
  return Array.from({ length: n }, (_, i) => buckets[i % 4]![Math.floor(i / 4)]!);
}

/** A facade on `schema` that runs no readmodel: it appends and reads checkpoints. */
async function writer(schema: string): Promise<{ f: Facade; stop: () => Promise<void> }> {
  const f = createFacade({ appName: "partitions", ...createPostgresBackends({ connectionString: DATABASE_URL, schema, poolSize: 4 }) });
  f.registerDomain(Counter);
  await f.start();
  return { f, stop: () => f.stop() };
}

/** Appends `all` in pages of `page` events (one transaction each); returns the last position of each of the 4 partitions. */
async function appendAll(f: Facade, all: NewEvent[], page = 500): Promise<number[]> {
  const last = [0, 0, 0, 0];
  for (let i = 0; i < all.length; i += page) {
    for (const e of await f.eventRepository.append(all.slice(i, i + page))) {
      const p = partitionOf(e.aggregateUuid, 4);
      last[p] = Math.max(last[p]!, e.position);
    }
  }
  return last;
}

/**
 * Seconds until `caughtUp` (every partition's checkpoint past its last event)
 * holds, checked by one light statement every 20 ms (the watch must not take
 * the CPU the processes measured need); adds each child's CPU time meanwhile
 * to `cpuTotals` and prints both.
 */
async function timed(children: ChildProcess[], cpuTotals: number[], label: string, caughtUp: () => Promise<boolean>): Promise<number> {
  const cpu0 = await cpuOf(children);
  const t0 = performance.now();
  await untilTrue(caughtUp, `${label}: every partition applied its events`, 120_000, 20);
  const wall = performance.now() - t0;
  const cpu = (await cpuOf(children)).map((c, i) => c - cpu0[i]!);
  cpu.forEach((c, i) => (cpuTotals[i] = (cpuTotals[i] ?? 0) + c));
  console.log(`    ${label}: ${wall.toFixed(0)} ms wall, CPU of each process meanwhile: ${cpu.map((c) => c.toFixed(0)).join(", ")} ms`);
  return wall / 1000;
}

/**
 * One round with `instances` processes: they balance the partitions on an
 * empty schema, then `n` events are appended in one transaction, so that
 * when they become visible they are all there, as in a catch-up: seconds from
 * that commit until every partition's checkpoint passed its last event.
 */
async function scaleRound(admin: pg.Pool, instances: number, n: number, cpuTotals: number[]): Promise<number> {
  const schema = `mneme_bpart_${newUuid().replace(/-/g, "").slice(-12)}`;
  const w = await writer(schema);
  const children: ChildProcess[] = [];
  try {
    for (let i = 0; i < instances; i++) children.push(await spawn(schema, 1000));
    const fair = 4 / instances;
    await untilTrue(async () => (await Promise.all(children.map(running))).every((r) => r.length === fair), "balanced", 60_000, 20);
    const aggregates = balancedAggregates(512);
    const all = events(n, aggregates);
    const last = await appendAll(w.f, all, all.length);
    const keys = last.map((_, p) => partitionKey(NAME, p));
    return await timed(children, cpuTotals, `${instances} instance(s)`, async () => {
      const res = await admin.query<{ handler: string; position: string }>(
        `SELECT handler, position::text FROM "${schema}".readmodel_checkpoints WHERE handler = ANY($1::text[])`,
        [keys],
      );
      const at = new Map(res.rows.map((r) => [r.handler, Number(r.position)]));
      return keys.every((k, p) => (at.get(k) ?? 0) >= last[p]!);
    });
  } finally {
    await Promise.all(children.map(kill));
    await w.stop();
    await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  }
}

/**
 * The same round done by raw-driver processes (bench/partition-raw-consumer.ts):
 * 1 process holding the 4 partitions, or 2 holding two each, the same events
 * appended in one transaction; seconds from that commit until every
 * partition's checkpoint (a table of their own) passed its last event.
 */
async function rawScaleRound(admin: pg.Pool, processes: number, n: number, cpuTotals: number[]): Promise<number> {
  const schema = `mneme_bpart_${newUuid().replace(/-/g, "").slice(-12)}`;
  const w = await writer(schema);
  const children: ChildProcess[] = [];
  try {
    await admin.query(`CREATE TABLE "${schema}".raw_totals (key text PRIMARY KEY, doc jsonb NOT NULL)`);
    await admin.query(`CREATE TABLE "${schema}".raw_checkpoints (partition int PRIMARY KEY, position bigint NOT NULL)`);
    const split =
      processes === 1
        ? [[0, 1, 2, 3]]
        : [
            [0, 1],
            [2, 3],
          ];
    for (const parts of split) children.push(await spawnRaw(schema, parts));
    const last = await appendAll(w.f, events(n, balancedAggregates(512)), n);
    return await timed(children, cpuTotals, `raw, ${processes} process(es)`, async () => {
      const res = await admin.query<{ partition: number; position: string }>(
        `SELECT partition, position::text FROM "${schema}".raw_checkpoints`,
      );
      const at = new Map(res.rows.map((r) => [r.partition, Number(r.position)]));
      return last.every((l, p) => (at.get(p) ?? 0) >= l);
    });
  } finally {
    await Promise.all(children.map(kill));
    await w.stop();
    await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  }
}

/** Catches a readmodel (partitioned or not) up from zero over `n` events in this process: seconds. */
async function overheadRound(admin: pg.Pool, partitioned: boolean, n: number, cpu: { ms: number }): Promise<number> {
  const schema = `mneme_bpart_${newUuid().replace(/-/g, "").slice(-12)}`;
  const w = await writer(schema);
  try {
    await appendAll(w.f, events(n, balancedAggregates(512)));
    const head = await w.f.eventRepository.headPosition();
    const rm = partitioned ? new CpuTotals(w.f, NAME, withPartitions(4)) : new CpuTotals(w.f, NAME);
    rm.workMicros = WORK_MICROS;
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    w.f.registerReadmodel(rm);
    await untilTrue(async () => rm.state === "running" && rm.lastPosition >= head, "caught up", 300_000);
    const seconds = (performance.now() - t0) / 1000;
    const used = process.cpuUsage(cpu0);
    cpu.ms += (used.user + used.system) / 1000;
    return seconds;
  } finally {
    await w.stop();
    await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  }
}

/** Two instances hold two partitions each; one is killed: ms until the other runs all four. */
async function takeover(admin: pg.Pool): Promise<number> {
  const schema = `mneme_bpart_${newUuid().replace(/-/g, "").slice(-12)}`;
  const w = await writer(schema);
  const children: ChildProcess[] = [];
  try {
    for (let i = 0; i < 2; i++) children.push(await spawn(schema, 1000));
    await untilTrue(async () => (await Promise.all(children.map(running))).every((r) => r.length === 2), "balanced", 60_000, 20);
    const t0 = performance.now();
    await kill(children[0]!);
    await untilTrue(async () => (await running(children[1]!)).length === 4, "taken over", 60_000, 10);
    return performance.now() - t0;
  } finally {
    await Promise.all(children.map(kill));
    await w.stop();
    await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  }
}

export default async function partitionsBench(b: Bench): Promise<void> {
  const admin = new pg.Pool({ connectionString: DATABASE_URL, max: 2 });
  try {
    await admin.query("SELECT 1");
  } catch {
    console.log("  (no Postgres at DATABASE_URL: skipped)");
    await admin.end();
    return;
  }
  const load = () =>
    loadavg()
      .map((l) => l.toFixed(2))
      .join(" ");
  try {
    const n = b.quick ? 20_000 : 50_000;
    const rounds = b.quick ? 1 : 3;
    let one = 0;
    let two = 0;
    let rawOne = 0;
    let rawTwo = 0;
    const cpuOne: number[] = [];
    const cpuTwo: number[] = [];
    const cpuRawOne: number[] = [];
    const cpuRawTwo: number[] = [];
    for (let r = 0; r < rounds; r++) {
      // Alternate who goes first, so the machine's load hits both alike.
      if (r % 2 === 0) {
        one += await scaleRound(admin, 1, n, cpuOne);
        two += await scaleRound(admin, 2, n, cpuTwo);
        rawOne += await rawScaleRound(admin, 1, n, cpuRawOne);
        rawTwo += await rawScaleRound(admin, 2, n, cpuRawTwo);
      } else {
        rawTwo += await rawScaleRound(admin, 2, n, cpuRawTwo);
        rawOne += await rawScaleRound(admin, 1, n, cpuRawOne);
        two += await scaleRound(admin, 2, n, cpuTwo);
        one += await scaleRound(admin, 1, n, cpuOne);
      }
    }
    console.log(`    load average: ${load()}`);
    const rowOne = b.record("partitions", `4 partitions, 1 instance (${WORK_MICROS} us/event)`, n * rounds, one, "events/s");
    const rowTwo = b.record("partitions", `4 partitions, 2 instances (${WORK_MICROS} us/event)`, n * rounds, two, "events/s");
    b.compare(rowTwo, rowOne);
    // What the split of the work allows where each instance has a core of its own: the busiest instance's CPU time sets the pace.
    console.log(
      `    CPU time: 1 instance ${cpuOne[0]!.toFixed(0)} ms; 2 instances ${cpuTwo.map((c) => c.toFixed(0)).join(" + ")} ms: ` +
        `${(cpuOne[0]! / Math.max(...cpuTwo)).toFixed(2)}x with a free core per instance`,
    );
    // The same work by raw pg processes, in the same rounds: what 2 processes reach over 1 on this machine with no framework.
    const rowRawOne = b.record("partitions", `raw pg, 4 partitions, 1 process (${WORK_MICROS} us/event)`, n * rounds, rawOne, "events/s");
    const rowRawTwo = b.record("partitions", `raw pg, 4 partitions, 2 processes (${WORK_MICROS} us/event)`, n * rounds, rawTwo, "events/s");
    b.compare(rowRawTwo, rowRawOne);
    b.compare(rowOne, rowRawOne);
    b.compare(rowTwo, rowRawTwo);
    console.log(
      `    CPU time, raw: 1 process ${cpuRawOne[0]!.toFixed(0)} ms; 2 processes ${cpuRawTwo.map((c) => c.toFixed(0)).join(" + ")} ms: ` +
        `${(cpuRawOne[0]! / Math.max(...cpuRawTwo)).toFixed(2)}x with a free core per process`,
    );

    let plain = 0;
    let parted = 0;
    const cpuPlain = { ms: 0 };
    const cpuParted = { ms: 0 };
    for (let r = 0; r < rounds; r++) {
      if (r % 2 === 0) {
        plain += await overheadRound(admin, false, n, cpuPlain);
        parted += await overheadRound(admin, true, n, cpuParted);
      } else {
        parted += await overheadRound(admin, true, n, cpuParted);
        plain += await overheadRound(admin, false, n, cpuPlain);
      }
    }
    console.log(`    load average: ${load()}`);
    const rowPlain = b.record("partitions", `catch-up, unpartitioned, 1 instance (${WORK_MICROS} us/event)`, n * rounds, plain, "events/s");
    const rowParted = b.record(
      "partitions",
      `catch-up, 4 partitions, 1 instance (${WORK_MICROS} us/event)`,
      n * rounds,
      parted,
      "events/s",
    );
    b.compare(rowParted, rowPlain);
    // The CPU this process spent on each catch-up (the database's is not in it): less at the mercy of the machine's load.
    console.log(
      `    CPU time of the catch-ups: unpartitioned ${cpuPlain.ms.toFixed(0)} ms, 4 partitions ${cpuParted.ms.toFixed(0)} ms: ` +
        `${(cpuPlain.ms / cpuParted.ms).toFixed(2)}x`,
    );

    const ms = await takeover(admin);
    b.value("partitions", "take-over after SIGKILL (lockRetryMs 1000)", ms, "ms", `load average ${load()}`);
  } finally {
    await admin.end();
  }
}
