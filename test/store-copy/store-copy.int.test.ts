/**
 * `mneme store copy` and copyStore: a SQLite store that used every part
 * (accounts and sessions, two tenants, a snapshotted aggregate, a projection,
 * a readmodel, a scheduled command, personal data with one subject forgotten,
 * idempotent commands, logs) copied to Postgres with the library and back to
 * SQLite with the CLI; each copy opened by a facade gives the same answers,
 * logins work, the forgotten subject stays erased, readmodels resume from
 * their checkpoints, and new commands take the next position. A copy killed
 * with SIGKILL mid-way and rerun with --resume ends in the same state.
 */
import { spawn } from "node:child_process";
import { copyFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import Database from "better-sqlite3";
import { beforeAll, describe, expect, it } from "vitest";
import { createFacade, type Facade, type FacadeOptions, isMnemeError, newUuid, type RequestContext } from "mneme";
import { createPostgresBackends } from "mneme/postgres";
import { createSqliteBackends } from "mneme/sqlite";
import { copyStore, type CopyStoreReport, verifyStore } from "mneme/store-copy";
import { ADMIN_EMAIL, ADMIN_PASSWORD } from "../support/defaults-world.js";
import { Bin, depotAnswers, Owner, RegisterOwner, Stock, startDepot, type DepotApp } from "../support/depot-app.js";
import { DATABASE_URL, postgresScratch } from "../support/postgres-scratch.js";
import { runProcess } from "../support/run-process.js";
import { Add, SqlTally, Tally } from "../support/sql-tally.js";
import { sqliteScratch } from "../support/sqlite-scratch.js";

const cwd = fileURLToPath(new URL("../..", import.meta.url));
const cli = fileURLToPath(new URL("../../src/cli/main.ts", import.meta.url));
const killable = fileURLToPath(new URL("../support/store-copy-process.ts", import.meta.url));
const pg = postgresScratch("mneme_store_copy");
const files = sqliteScratch("store-copy");

const pgUrl = (schema: string): string => {
  const u = new URL(DATABASE_URL);
  u.searchParams.set("schema", schema);
  return u.toString();
};
const mneme = (args: string[]) => runProcess(process.execPath, ["--import", "tsx", cli, ...args], cwd);

const BINS = ["0192f2a0-0000-7000-8000-00000000000a", "0192f2a0-0000-7000-8000-00000000000b", "0192f2a0-0000-7000-8000-00000000000c"];
const ANN = { ownerUuid: "0192f2a0-0000-7000-8000-0000000000a1", email: "ann.copy.secret@example.org" };
const BOB = { ownerUuid: "0192f2a0-0000-7000-8000-0000000000b1", email: "bob.copy@example.org" };
const IDEMPOTENT = newUuid();

interface Source {
  file: string;
  head: number;
  answers: Record<string, unknown>;
  members: { email: string; tenantUuid: string; identityUuid: string }[];
}
let source: Source;

/** Fills a SQLite store through the app: two tenants with their members, stock, owners, a forget, an idempotent command, a log line. */
/** A DataStore blob of the source (every byte value). */
const REPORT = new Uint8Array(256).map((_, i) => 255 - i);

async function buildSource(): Promise<Source> {
  const file = files.newFile();
  const app = await startDepot(createSqliteBackends({ filename: file }));
  try {
    const members: { email: string; tenantUuid: string; identityUuid: string; reqCtx: RequestContext }[] = [];
    for (const name of ["north", "south"]) {
      const tenantUuid = await app.world.createTenant(name);
      const email = `${name}@example.org`;
      const m = await app.world.member(email, tenantUuid, ["Depot.*"]);
      members.push({ email, tenantUuid, identityUuid: m.identityUuid, reqCtx: m.reqCtx });
    }
    const [north, south] = members as [(typeof members)[0], (typeof members)[0]];
    for (let i = 0; i < 24; i++) {
      const m = i % 3 === 2 ? south : north;
      const binUuid = i % 3 === 2 ? BINS[2]! : BINS[i % 2]!;
      await app.facade.dispatch(Stock, { binUuid, n: i + 1 }, { reqCtx: m.reqCtx, waitToFinish: true });
    }
    await app.facade.dispatch(Stock, { binUuid: BINS[0]!, n: 100 }, { reqCtx: north.reqCtx, commandUuid: IDEMPOTENT, waitToFinish: true });
    for (const o of [ANN, BOB]) await app.facade.dispatch(RegisterOwner, o, { reqCtx: north.reqCtx, waitToFinish: true });
    expect(await app.facade.forget(ANN.ownerUuid)).toEqual({ keysDeleted: 1 });
    await app.facade.logStore.append({ level: "info", source: "test", message: "before the copy" });
    await app.facade.dataStore.put("exports/north.bin", REPORT, { contentType: "application/x-report" });
    await app.facade.cacheStore.set("transient", 1);
    return {
      file,
      head: await app.facade.eventRepository.headPosition(),
      answers: { north: await depotAnswers(app, north.reqCtx, BINS), south: await depotAnswers(app, south.reqCtx, BINS) },
      members: members.map((m) => ({ email: m.email, tenantUuid: m.tenantUuid, identityUuid: m.identityUuid })),
    };
  } finally {
    await app.facade.stop();
  }
}

/** Opens a copy with the app and checks what a user relies on. */
async function checkCopy(app: DepotApp, head: number): Promise<void> {
  // Logins work with the copied accounts; each member sees their tenant's answers, as on the source.
  for (const m of source.members) {
    const session = await app.world.login(m.email, undefined, m.identityUuid);
    expect(session.reqCtx.senderTenantUuid).toBe(m.tenantUuid);
    const name = m.email.startsWith("north") ? "north" : "south";
    expect(await depotAnswers(app, session.reqCtx, BINS)).toEqual(source.answers[name]);
  }
  await app.world.login(ADMIN_EMAIL, ADMIN_PASSWORD);
  // The DataStore's blobs come along; the CacheStore's entries do not (a cache starts empty).
  const blob = await app.facade.dataStore.get("exports/north.bin");
  expect(Array.from(blob!.data)).toEqual(Array.from(REPORT));
  expect(blob?.contentType).toBe("application/x-report");
  expect(await app.facade.cacheStore.get("transient")).toBeUndefined();
  // The forgotten subject stays erased; the other one is readable.
  expect((await app.facade.loadAggregate(Owner, ANN.ownerUuid)).state.email).toBe("[erased]");
  expect((await app.facade.loadAggregate(Owner, BOB.ownerUuid)).state.email).toBe(BOB.email);
  // The idempotent command's record came along: its duplicate is a replay, nothing appended.
  const north = await app.world.login("north@example.org", undefined, source.members[0]!.identityUuid);
  const replay = await app.facade.dispatch(Stock, { binUuid: BINS[0]!, n: 100 }, { reqCtx: north.reqCtx, commandUuid: IDEMPOTENT });
  expect(replay.replayed).toBe(true);
  // The readmodel resumed from its checkpoint: only the new event is handled, at the next position.
  const before = await app.facade.eventRepository.headPosition();
  expect(before).toBeGreaterThanOrEqual(head);
  const handledBefore = app.totals.handled;
  const fresh = await app.facade.dispatch(Stock, { binUuid: BINS[1]!, n: 5 }, { reqCtx: north.reqCtx, waitToFinish: true });
  expect(fresh.events?.[0]?.position).toBe(before + 1);
  expect(app.totals.handled - handledBefore).toBe(1);
  expect(handledBefore).toBe(0);
  expect((await app.facade.loadAggregate(Bin, BINS[1]!)).state.n).toBe(
    (source.answers.north as { states: { n: number }[] }).states[1]!.n + 5,
  );
}

async function headOf(file: string): Promise<number> {
  const stores = createSqliteBackends({ filename: file, pollIntervalMs: 0 });
  try {
    return await stores.eventRepository.headPosition();
  } finally {
    await stores.close();
  }
}

function expectVerified(r: CopyStoreReport): void {
  expect(r.tables.filter((t) => !t.matches)).toEqual([]);
  expect(r.verified).toBe(true);
  // The hash chains: the source's verified before the copy (its subject forgotten: the chain holds), the target's after.
  const events = r.tables.find((t) => t.table === "events")!.source.rows;
  expect(r.chain.source).toMatchObject({ ok: true, checked: events, complete: true });
  expect(r.chain.target).toMatchObject({ ok: true, checked: events, complete: true });
  if (r.chain.source.ok && r.chain.target.ok) expect(r.chain.target.head.position).toBe(r.chain.source.head.position);
  expect(r.sourceDigest).toBe(r.targetDigest);
  const rows = Object.fromEntries(r.tables.map((t) => [t.table, t.source.rows]));
  for (const t of [
    "events",
    "commands",
    "snapshots",
    "subject_keys",
    "forgotten_keys",
    "data",
    "readmodel_documents",
    "readmodel_checkpoints",
    "logs",
  ])
    expect(rows[t], t).toBeGreaterThan(0);
}

beforeAll(async () => {
  source = await buildSource();
}, 120_000);

describe("store copy SQLite -> Postgres -> SQLite", () => {
  const schema = pg.newSchema();
  let toPostgres: CopyStoreReport;

  it("copies the SQLite store into a Postgres schema, verified, and the copy serves the same answers", async () => {
    toPostgres = await copyStore({ from: source.file, to: pgUrl(schema), pageSize: 7 });
    expectVerified(toPostgres);
    expect(toPostgres.tables.find((t) => t.table === "events")?.source.rows).toBe(source.head);
    const app = await startDepot(createPostgresBackends({ pool: pg.pool, schema }));
    try {
      await checkCopy(app, source.head);
    } finally {
      await app.facade.stop();
    }
  }, 120_000);

  it("copies the Postgres copy back to SQLite with the CLI: the same digest, and a facade serves it", async () => {
    // A copy of the untouched source first (the Postgres schema took new commands above): the digest is the source's.
    const untouched = pg.newSchema();
    expectVerified(await copyStore({ from: source.file, to: pgUrl(untouched) }));
    const file = files.newFile();
    const run = await mneme(["store", "copy", "--from", pgUrl(untouched), "--to", file]);
    expect(run.stderr).toContain("copy events");
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toContain("verified: every table has the same rows and digest");
    expect(run.stdout).toContain(`source digest ${toPostgres.sourceDigest}`);
    expect(run.stdout).toContain(`target digest ${toPostgres.sourceDigest}`);
    const app = await startDepot(createSqliteBackends({ filename: file }));
    try {
      await checkCopy(app, source.head);
    } finally {
      await app.facade.stop();
    }
  }, 180_000);

  it("copies events appended on Postgres to SQLite with a chain that verifies (their int64 times are no doubles)", async () => {
    // pg sends a time as its double's shortest decimal (1764412345678901248 as 1764412345678901200): an int64 no double is.
    const own = pg.newSchema();
    const app = await startDepot(createPostgresBackends({ pool: pg.pool, schema: own }));
    try {
      const at = 1764412345678901248;
      await app.facade.eventRepository.append(
        Array.from({ length: 5 }, (_, k) => ({
          domain: "Depot",
          name: "Noted",
          aggregateUuid: `note-${k}`,
          tenantUuid: "t",
          payload: { k },
          createdAt: at + k * 512,
        })),
      );
    } finally {
      await app.facade.stop();
    }
    const times = await pg.pool.query<{ t: string }>(
      `SELECT created_at::text AS t FROM "${own}".events WHERE domain = 'Depot' AND name = 'Noted'`,
    );
    expect(times.rows).toHaveLength(5);
    expect(times.rows.every((r) => BigInt(Number(r.t)) !== BigInt(r.t))).toBe(true);
    const file = files.newFile();
    const copied = await copyStore({ from: pgUrl(own), to: file });
    expect(copied.verified).toBe(true);
    expect(copied.chain.target, JSON.stringify(copied.chain.target)).toMatchObject({ ok: true, complete: true });
    const verified = await verifyStore(file);
    expect(verified, JSON.stringify(verified)).toMatchObject({ ok: true, complete: true });
    const run = await mneme(["store", "verify", "--store", file]);
    expect(run.code, run.stdout + run.stderr).toBe(0);
  }, 180_000);

  it("refuses a target that holds data (CONFLICT, nothing written), also with --resume", async () => {
    const events = async () => (await pg.pool.query<{ n: string }>(`SELECT count(*)::text AS n FROM "${schema}".events`)).rows[0]!.n;
    const before = await events();
    const refused = await copyStore({ from: source.file, to: pgUrl(schema) }).catch((e: unknown) => e);
    expect(isMnemeError(refused, "CONFLICT")).toBe(true);
    const other = files.newFile();
    const plain = await mneme(["store", "copy", "--from", other, "--to", pgUrl(schema)]);
    expect(plain.code).toBe(1);
    expect(plain.stderr).toContain("does not exist");
    const resumed = await copyStore({ from: files.newFile(), to: pgUrl(schema), resume: true }).catch((e: unknown) => e);
    expect(isMnemeError(resumed, "NOT_FOUND")).toBe(true);
    // --resume continues only a copy of the same source: the copy's marker names the SQLite source, not this one.
    const otherSource = pg.newSchema();
    expectVerified(await copyStore({ from: source.file, to: pgUrl(otherSource) }));
    const wrongSource = await copyStore({ from: pgUrl(otherSource), to: pgUrl(schema), resume: true }).catch((e: unknown) => e);
    expect(isMnemeError(wrongSource, "CONFLICT")).toBe(true);
    // Data no copy wrote (the source file itself, as a target) is refused with --resume, and left as it was.
    const sourceHead = await headOf(source.file);
    const notACopy = await copyStore({ from: pgUrl(otherSource), to: source.file, resume: true }).catch((e: unknown) => e);
    expect(isMnemeError(notACopy, "CONFLICT")).toBe(true);
    expect(await headOf(source.file)).toBe(sourceHead);
    expect(await events()).toBe(before);
  });

  it("refuses a source whose hash chain is broken (INVALID_STATE naming the position, nothing written)", async () => {
    const tampered = files.newFile();
    copyFileSync(source.file, tampered);
    const db = new Database(tampered);
    db.prepare("UPDATE mneme_events SET payload = json_set(payload, '$.n', 999) WHERE position = 30").run();
    db.close();
    const target = pg.newSchema();
    const refused = await copyStore({ from: tampered, to: pgUrl(target) }).catch((e: unknown) => e);
    expect(isMnemeError(refused, "INVALID_STATE")).toBe(true);
    expect(String((refused as Error).message)).toContain("broken at position 30");
    const made = await pg.pool.query(`SELECT to_regclass($1) AS t`, [`"${target}".events`]);
    expect(made.rows[0].t).toBeNull();
  });

  it("refuses bad input with a code: a bad schema name, the same store as source and target, usage errors", async () => {
    expect(isMnemeError(await copyStore({ from: source.file, to: pgUrl("bad-name") }).catch((e: unknown) => e), "INVALID_REQUEST")).toBe(
      true,
    );
    expect(isMnemeError(await copyStore({ from: source.file, to: source.file }).catch((e: unknown) => e), "INVALID_REQUEST")).toBe(true);
    const usage = await mneme(["store", "copy", "--from", source.file]);
    expect(usage.code).toBe(2);
    expect(usage.stderr).toContain("missing --to");
  });
});

describe("a store copy killed mid-way", () => {
  it.each([
    ["events", 20],
    ["readmodel_documents", 5],
  ])(
    "SQLite -> Postgres killed in %s, rerun with --resume: the same state as an uninterrupted copy",
    async (table, rows) => {
      const schema = pg.newSchema();
      expect(await killAt(source.file, pgUrl(schema), table, rows)).toMatch(/^SIGKILL paused/);
      const plain = await mneme(["store", "copy", "--from", source.file, "--to", pgUrl(schema)]);
      expect(plain.code).toBe(1);
      expect(plain.stderr).toContain("--resume");
      const resumed = await mneme(["store", "copy", "--from", source.file, "--to", pgUrl(schema), "--resume", "--batch-size", "5"]);
      expect(resumed.code, resumed.stderr).toBe(0);
      expect(resumed.stdout).toContain("(resumed)");
      const uninterrupted = await copyStore({ from: source.file, to: pgUrl(pg.newSchema()) });
      expect(resumed.stdout).toContain(`target digest ${uninterrupted.targetDigest}`);
      // The copy finished: a second --resume is refused, whatever the target went through since.
      const again = await copyStore({ from: source.file, to: pgUrl(schema), resume: true }).catch((e: unknown) => e);
      expect(isMnemeError(again, "CONFLICT")).toBe(true);
    },
    180_000,
  );

  it("Postgres -> SQLite killed in events, rerun with --resume: verified", async () => {
    const schema = pg.newSchema();
    expectVerified(await copyStore({ from: source.file, to: pgUrl(schema) }));
    const file = files.newFile();
    expect(await killAt(pgUrl(schema), file, "events", 10)).toMatch(/^SIGKILL paused/);
    const resumed = await copyStore({ from: pgUrl(schema), to: file, resume: true });
    expectVerified(resumed);
    expect(resumed.resumed).toBe(true);
    expect(resumed.tables.find((t) => t.table === "events")?.copied).toBeLessThan(source.head);
  }, 180_000);
});

/** Starts the copy process, waits until it has committed `rows` rows of `table`, and SIGKILLs it. */
function killAt(from: string, to: string, table: string, rows: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ["--import", "tsx", killable, from, to, "5", table, String(rows)], {
      cwd,
      stdio: ["ignore", "pipe", "inherit"],
    });
    let out = "";
    child.stdout.on("data", (d: Buffer) => {
      out += d.toString();
      if (out.includes("paused")) child.kill("SIGKILL");
    });
    child.once("error", reject);
    child.once("exit", (_code, signal) => resolve(`${signal ?? "exited"} ${out.trim()}`));
  });
}

/** The subjects that have a live key in a store. */
async function keyedSubjects(store: string): Promise<string[]> {
  if (store.startsWith("postgres")) {
    const schema = new URL(store).searchParams.get("schema")!;
    return (await pg.pool.query<{ subject: string }>(`SELECT subject FROM "${schema}".subject_keys ORDER BY subject`)).rows.map(
      (r) => r.subject,
    );
  }
  const db = new Database(store, { readonly: true });
  try {
    return (db.prepare("SELECT subject FROM mneme_subject_keys ORDER BY subject").all() as { subject: string }[]).map((r) => r.subject);
  } finally {
    db.close();
  }
}

/** Forgets a subject on a store through its key store (as `forget` does), and checks its key is gone. */
async function forgetOn(store: string, subject: string): Promise<void> {
  const stores = store.startsWith("postgres")
    ? createPostgresBackends({ pool: pg.pool, schema: new URL(store).searchParams.get("schema")!, pollIntervalMs: 0 })
    : createSqliteBackends({ filename: store, pollIntervalMs: 0 });
  try {
    expect(await stores.keyStore.forget(subject)).toBe(1);
  } finally {
    await (store.startsWith("postgres") ? stores.keyStore.close() : stores.close());
  }
  expect(await keyedSubjects(store)).not.toContain(subject);
}

/** A copy of the source file to change (the shared source stays as it was). */
function sourceCopy(): string {
  const file = files.newFile();
  copyFileSync(source.file, file);
  return file;
}

describe("a forgotten subject's key never comes back through store copy", () => {
  it.each([
    ["SQLite -> Postgres", () => pgUrl(pg.newSchema())],
    ["Postgres -> SQLite", () => files.newFile()],
  ])(
    "%s: --resume into a finished copy whose target forgot a subject is CONFLICT, the key stays gone",
    async (_, newTarget) => {
      const from = _.startsWith("SQLite") ? source.file : pgUrl(pg.newSchema());
      if (from !== source.file) expectVerified(await copyStore({ from: source.file, to: from }));
      const to = newTarget();
      expectVerified(await copyStore({ from, to }));
      expect(await keyedSubjects(to)).toContain(BOB.ownerUuid);
      await forgetOn(to, BOB.ownerUuid);
      const resumed = await copyStore({ from, to, resume: true }).catch((e: unknown) => e);
      expect(isMnemeError(resumed, "CONFLICT")).toBe(true);
      expect((resumed as Error).message).toContain("finished");
      const cli = await mneme(["store", "copy", "--from", from, "--to", to, "--resume"]);
      expect(cli.code).toBe(1);
      expect(cli.stderr).toContain("finished");
      expect(await keyedSubjects(to)).not.toContain(BOB.ownerUuid);
      // Without --resume the finished copy is refused as well, and says why.
      const plain = await copyStore({ from, to }).catch((e: unknown) => e);
      expect(isMnemeError(plain, "CONFLICT")).toBe(true);
      expect(await keyedSubjects(to)).not.toContain(BOB.ownerUuid);
    },
    180_000,
  );

  it("an interrupted copy whose target forgot a subject since is not resumed (CONFLICT, the key stays gone)", async () => {
    const to = pgUrl(pg.newSchema());
    // Killed in the readmodel documents: the keys were copied before them.
    expect(await killAt(source.file, to, "readmodel_documents", 5)).toMatch(/^SIGKILL paused/);
    await forgetOn(to, BOB.ownerUuid);
    const resumed = await mneme(["store", "copy", "--from", source.file, "--to", to, "--resume"]);
    expect(resumed.code).toBe(1);
    expect(resumed.stderr).toContain("subject_keys");
    expect(resumed.stderr).toContain("changed since");
    expect(await keyedSubjects(to)).not.toContain(BOB.ownerUuid);
  }, 180_000);

  it("an interrupted copy whose source forgot a subject since: the resume deletes the key it had copied", async () => {
    const from = sourceCopy();
    const to = files.newFile();
    expect(await killAt(from, to, "readmodel_documents", 5)).toMatch(/^SIGKILL paused/);
    expect(await keyedSubjects(to)).toContain(BOB.ownerUuid);
    await forgetOn(from, BOB.ownerUuid);
    // The source's keys changed before the point the first run reached: refused, and the key it had copied is gone.
    const resumed = await copyStore({ from, to, resume: true }).catch((e: unknown) => e);
    expect(isMnemeError(resumed, "CONFLICT")).toBe(true);
    expect((resumed as Error).message).toContain("subject_keys");
    expect(await keyedSubjects(to)).not.toContain(BOB.ownerUuid);
  }, 180_000);

  it("a source that keeps a key its forgotten list names (torn by hand): the copy writes the mark, not the key", async () => {
    const from = sourceCopy();
    const db = new Database(from);
    try {
      const { key_id } = db.prepare("SELECT key_id FROM mneme_subject_keys WHERE subject = ?").get(BOB.ownerUuid) as { key_id: string };
      db.prepare("INSERT INTO mneme_forgotten_keys (key_id, forgotten_at) VALUES (?, 1)").run(key_id);
    } finally {
      db.close();
    }
    for (const to of [pgUrl(pg.newSchema()), files.newFile()]) {
      const report = await copyStore({ from, to });
      expect(await keyedSubjects(to)).not.toContain(BOB.ownerUuid);
      expect(report.tables.find((t) => t.table === "subject_keys")?.matches).toBe(false);
      expect(report.verified).toBe(false);
    }
  }, 180_000);
});

describe("SQL-table readmodels", () => {
  it("are not copied: their checkpoints are left out, so they build their tables on the target and restore from zero", async () => {
    const file = files.newFile();
    const counters = ["0192f2a0-0000-7000-8000-0000000000c1", "0192f2a0-0000-7000-8000-0000000000c2"];
    const start = async (stores: Partial<FacadeOptions>): Promise<{ facade: Facade; tally: SqlTally }> => {
      const facade = createFacade({ appName: "tally", ...stores });
      facade.registerDomain(Tally);
      const tally = new SqlTally(facade);
      facade.registerReadmodel(tally);
      await facade.start();
      return { facade, tally };
    };
    const src = await start(createSqliteBackends({ filename: file }));
    for (let i = 0; i < 5; i++) await src.facade.dispatch(Add, { counterUuid: counters[i % 2]!, by: i + 1 }, { waitToFinish: true });
    const totals = await src.tally.totals();
    await src.facade.stop();
    const schema = pg.newSchema();
    const report = await copyStore({ from: file, to: pgUrl(schema) });
    expect(report.verified).toBe(true);
    expect(report.restoredFromZero).toEqual(["SqlTally"]);
    const copy = await start(createPostgresBackends({ pool: pg.pool, schema }));
    try {
      await copy.facade.dispatch(Add, { counterUuid: counters[0]!, by: 10 }, { waitToFinish: true });
      expect(await copy.tally.totals()).toEqual({ ...totals, [counters[0]!]: totals[counters[0]!]! + 10 });
      // Every event applied once on the target: the restore from zero, then the new one.
      expect(Object.values(await copy.tally.appliedTimes())).toEqual([1, 1, 1, 1, 1, 1]);
    } finally {
      await copy.facade.stop();
    }
  }, 120_000);
});
