/**
 * Rolling deploys and downgrades against real code of the earlier releases
 * (docs/upgrading.md): the source of 0.1.0 (commit 44da8f1) and 0.2.0-pre (commit
 * 8256c9f) is taken from git history into a scratch folder and run with tsx
 * as a child process, beside an instance of this release, on one Postgres
 * schema. The same app runs on each (test/support/rolling-instance-process.ts):
 * notes whose text is personal data (on the releases that know personal
 * data), and a ProjectionReadmodel of them.
 *
 * What must hold: every acknowledged command is stored once; no readmodel
 * document holds ciphertext; an old instance that would misread the store is
 * refused by the database with a message naming the versions. The history
 * (a full clone) is needed: without the commit, the test says so and skips.
 */
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { PostgresEventRepository } from "mneme/postgres";
import { STORE_RELEASE, verifyEventChain } from "mneme/store";
import { DATABASE_URL, postgresScratch } from "../support/postgres-scratch.js";
import { until } from "../support/until.js";

const ROOT = resolve(fileURLToPath(new URL("../..", import.meta.url)));
const SCRIPT = fileURLToPath(new URL("../support/rolling-instance-process.ts", import.meta.url));
const scratch = postgresScratch("mneme_roll");
const dir = mkdtempSync(join(tmpdir(), "mneme-releases-"));
const children: ChildProcess[] = [];
afterAll(() => {
  for (const c of children) if (c.exitCode === null) c.kill("SIGKILL");
  rmSync(dir, { recursive: true, force: true });
});

const RELEASES = { "0.1.0": "44da8f1", "0.2.0-pre": "8256c9f", "0.2.0": "2c4f71a" } as const;

function hasCommit(commit: string): boolean {
  try {
    execFileSync("git", ["-C", ROOT, "cat-file", "-e", `${commit}^{commit}`], { stdio: "ignore" });
    return true;
  } catch {
    return false;
  }
}

/** The source of an earlier release, extracted into the scratch folder, with this project's node_modules. */
const roots = new Map<string, string>();
function releaseRoot(commit: string): string {
  const known = roots.get(commit);
  if (known !== undefined) return known;
  const root = join(dir, commit);
  roots.set(commit, root);
  execFileSync("mkdir", ["-p", root]);
  execFileSync("sh", ["-c", `git -C "${ROOT}" archive ${commit} src package.json tsconfig.json | tar -x -C "${root}"`]);
  symlinkSync(join(ROOT, "node_modules"), join(root, "node_modules"));
  return root;
}

interface Outcome {
  noteUuid: string;
  text: string;
  ok: boolean;
  code?: string;
  message?: string;
}

/** One app instance in a child process (see rolling-instance-process.ts). */
class Instance {
  readonly #child: ChildProcess;
  /** Notes the instance acknowledged in its dispatch loop. */
  readonly acks: string[] = [];
  readonly #answers: Record<string, unknown>[] = [];
  #wake: (() => void) | undefined;
  #ended = false;

  constructor(root: string, schema: string, tag: string, personal: boolean, mode = "") {
    this.#child = spawn(process.execPath, ["--import", "tsx", SCRIPT, root, schema, tag, personal ? "1" : "0", mode], {
      cwd: root,
      stdio: ["pipe", "pipe", "inherit"],
      env: { ...process.env, DATABASE_URL },
    });
    children.push(this.#child);
    void this.#pump();
  }

  /** Reads every line the instance prints: acknowledgements of its loop apart, answers in order. */
  async #pump(): Promise<void> {
    for await (const line of createInterface({ input: this.#child.stdout! })) {
      if (!line.startsWith("{")) continue;
      const o = JSON.parse(line) as Record<string, unknown>;
      if (typeof o.ack === "string") this.acks.push(o.ack);
      else this.#answers.push(o);
      this.#wake?.();
    }
    this.#ended = true;
    this.#wake?.();
  }

  async #next(): Promise<Record<string, unknown>> {
    for (;;) {
      const o = this.#answers.shift();
      if (o !== undefined) return o;
      if (this.#ended) throw new Error("the instance ended");
      await new Promise<void>((r) => (this.#wake = r));
    }
  }

  async started(): Promise<Record<string, unknown>> {
    return this.#next();
  }

  async add(n: number): Promise<Outcome[]> {
    this.#child.stdin!.write(`add ${n}\n`);
    return (await this.#next()).added as Outcome[];
  }

  /** One line of the accounts mode: its answer, or its error as `{ error, code }`. */
  async line(text: string): Promise<Record<string, unknown>> {
    this.#child.stdin!.write(`${text}\n`);
    return this.#next();
  }

  /** Starts the dispatch loop (acknowledged notes land in `acks`). */
  loop(): void {
    this.#child.stdin!.write("loop\n");
  }

  /** SIGKILL, then every line it printed before is read. */
  async kill(): Promise<void> {
    this.#child.kill("SIGKILL");
    await until(() => this.#ended, "the killed instance's output is read");
  }

  async stop(): Promise<void> {
    this.#child.stdin!.write("stop\n");
    await this.#next();
  }
}

async function eventsPerNote(schema: string): Promise<Map<string, number>> {
  const { rows } = await scratch.pool.query<{ a: string; n: string }>(
    `SELECT aggregate_uuid AS a, count(*)::text AS n FROM "${schema}".events WHERE domain = 'Notes' GROUP BY aggregate_uuid`,
  );
  return new Map(rows.map((r) => [r.a, Number(r.n)]));
}

async function documents(schema: string): Promise<{ key: string; doc: string; tenant: string | null }[]> {
  const { rows } = await scratch.pool.query<{ key: string; doc: string; tenant: string | null }>(
    `SELECT key, doc::text AS doc, tenant_uuid AS tenant FROM "${schema}".readmodel_documents WHERE collection LIKE 'NoteProjection%'`,
  );
  return rows;
}

/** Every acknowledged note is stored once, every refused one not at all. */
async function expectStoredOnce(schema: string, outcomes: Outcome[]): Promise<void> {
  const stored = await eventsPerNote(schema);
  for (const o of outcomes) expect(stored.get(o.noteUuid) ?? 0, `${o.text}: ${o.message ?? "ok"}`).toBe(o.ok ? 1 : 0);
}

/** Waits until this release's instance has projected every acknowledged note, and checks no document holds ciphertext. */
async function expectProjectedInClear(schema: string, outcomes: Outcome[]): Promise<void> {
  const acked = outcomes.filter((o) => o.ok);
  await until(
    async () => {
      const keys = new Set((await documents(schema)).map((d) => d.key));
      return acked.every((o) => keys.has(o.noteUuid));
    },
    "every acknowledged note projected",
    60_000,
    100,
  );
  const docs = await documents(schema);
  expect(docs.filter((d) => d.doc.includes("$enc"))).toEqual([]);
  const byKey = new Map(docs.map((d) => [d.key, d.doc]));
  for (const o of acked) expect(byKey.get(o.noteUuid)).toContain(o.text);
}

/**
 * A 0.1.0 instance started on `schema` does not start: its init() fails, naming 0.1.0 and this release, so it
 * serves nothing (no session, no aggregate read as ciphertext, no stale document).
 */
/** The schema's hash chain holds over every event, whichever release appended it (the trigger chains them all). */
async function expectChainHolds(schema: string): Promise<void> {
  const events = new PostgresEventRepository({ pool: scratch.pool, schema, pollIntervalMs: 0 });
  const n = await scratch.pool.query<{ n: string }>(`SELECT count(*)::text AS n FROM "${schema}".events`);
  expect(await verifyEventChain(events)).toMatchObject({ ok: true, checked: Number(n.rows[0]!.n) });
}

async function expectRefusedAtStart(schema: string, mode = ""): Promise<void> {
  const late = new Instance(releaseRoot(RELEASES["0.1.0"]), schema, "late", false, mode);
  const started = await late.started();
  expect(started).toMatchObject({ code: "STORE_ERROR" });
  expect(String(started.startError)).toContain(`postgres: creating the tables of schema ${schema}`);
  expect(String(started.startError)).toContain(`"refused: mneme 0.1.0 misreads this store of mneme ${STORE_RELEASE}"`);
}

const skipWithout = (release: keyof typeof RELEASES) => {
  const present = hasCommit(RELEASES[release]);
  if (!present)
    console.warn(
      `store-rolling: commit ${RELEASES[release]} (mneme ${release}) is not in this clone's history; skipped (CI needs a full clone)`,
    );
  return !present;
};

describe.skipIf(skipWithout("0.1.0"))("0.1.0 beside this release (Postgres)", () => {
  it("0.1.0 wrote first; once this release opened the schema, 0.1.0's appends and projections are refused by the database, naming the versions; nothing is lost, no ciphertext in documents", async () => {
    const schema = scratch.newSchema();
    const old = new Instance(releaseRoot(RELEASES["0.1.0"]), schema, "old", false);
    expect(await old.started()).toEqual({ started: true });
    const before = await old.add(4);
    expect(before.every((o) => o.ok)).toBe(true);
    const now = new Instance(ROOT, schema, "new", true);
    expect(await now.started()).toEqual({ started: true });
    const fresh = await now.add(6);
    expect(
      fresh.every((o) => o.ok),
      JSON.stringify(fresh),
    ).toBe(true);
    const refused = await old.add(4);
    for (const o of refused) {
      expect(o.ok).toBe(false);
      expect(o.message).toContain("store format 4 (mneme 0.4.0)");
      expect(o.message).toContain("mneme 0.1.0 (44da8f1)");
    }
    // A downgrade: a 0.1.0 instance started now does not start, naming both releases.
    await expectRefusedAtStart(schema);
    await old.stop();
    const all = [...before, ...fresh, ...refused];
    await expectStoredOnce(schema, all);
    await expectProjectedInClear(schema, all);
    await now.stop();
  }, 240_000);
});

describe.skipIf(skipWithout("0.2.0-pre"))("0.2.0-pre beside this release (Postgres)", () => {
  it("both dispatch at once: every acknowledged command is stored once, and this release's instance projects every note in clear once 0.2.0-pre stopped", async () => {
    const schema = scratch.newSchema();
    const old = new Instance(releaseRoot(RELEASES["0.2.0-pre"]), schema, "old", true);
    expect(await old.started()).toEqual({ started: true });
    const before = await old.add(4);
    expect(before.every((o) => o.ok)).toBe(true);
    const now = new Instance(ROOT, schema, "new", true);
    expect(await now.started()).toEqual({ started: true });
    const [a, b] = await Promise.all([old.add(12), now.add(12)]);
    expect([...a, ...b].filter((o) => !o.ok)).toEqual([]);
    await old.stop();
    const all = [...before, ...a, ...b];
    await expectStoredOnce(schema, all);
    await expectProjectedInClear(schema, all);
    await expectChainHolds(schema);
    await now.stop();
  }, 240_000);
});

describe.skipIf(skipWithout("0.2.0") || skipWithout("0.1.0"))("0.2.0 beside this release (Postgres)", () => {
  it("0.2.0 starts on a schema this release opened and both dispatch; 0.1.0 is refused at start before, meanwhile and after", async () => {
    const schema = scratch.newSchema();
    const now = new Instance(ROOT, schema, "new", true);
    expect(await now.started()).toEqual({ started: true });
    await expectRefusedAtStart(schema);
    // 0.2.0's init() replaces 0.1's signature as 0.1.0's does: its read of the format record lets it through.
    const old = new Instance(releaseRoot(RELEASES["0.2.0"]), schema, "old", true);
    expect(await old.started()).toEqual({ started: true });
    await expectRefusedAtStart(schema);
    const [a, b] = await Promise.all([old.add(8), now.add(8)]);
    expect([...a, ...b].filter((o) => !o.ok)).toEqual([]);
    await old.stop();
    const again = new Instance(releaseRoot(RELEASES["0.2.0"]), schema, "again", true);
    expect(await again.started()).toEqual({ started: true });
    await again.stop();
    await expectRefusedAtStart(schema);
    const all = [...a, ...b];
    await expectStoredOnce(schema, all);
    await expectProjectedInClear(schema, all);
    await expectChainHolds(schema);
    await now.stop();
  }, 240_000);
});

interface AccountAnswer {
  answer?: { model?: { email?: string; name?: string }; historyEvents?: unknown[] } | null;
  error?: string;
  code?: string;
}

/** GetAccount on `instance` as the account itself, once its projection shows the account with `email`. */
async function accountShown(instance: Instance, accountUuid: string, sessionUuid: string, email: string): Promise<AccountAnswer> {
  let last: AccountAnswer = {};
  await until(
    async () => {
      last = (await instance.line(`get ${accountUuid} ${sessionUuid}`)) as AccountAnswer;
      return last.answer?.model?.email === email;
    },
    `account ${email} shown`,
    60_000,
    100,
  );
  return last;
}

async function login(instance: Instance, email: string): Promise<{ accountUuid: string; sessionUuid: string }> {
  const r = await instance.line(`login ${email}`);
  expect(r, JSON.stringify(r)).toHaveProperty("answer.sessionUuid");
  return r.answer as { accountUuid: string; sessionUuid: string };
}

describe.skipIf(skipWithout("0.1.0"))("0.1.0 beside this release in compatibility mode (rollingFrom: 0.1.0, Postgres)", () => {
  it("both write at once, the old one killed at a random point: every acknowledged command stored once, logins across releases, no ciphertext; after finishRollingUpgrade forget erases both releases' accounts and a 0.1.0 instance is refused", async () => {
    const schema = scratch.newSchema();
    const old = new Instance(releaseRoot(RELEASES["0.1.0"]), schema, "old", false, "accounts");
    expect(await old.started()).toEqual({ started: true });
    const oldAccount = (await old.line("register ann@old.test")).answer as { accountUuid: string };
    expect(oldAccount.accountUuid).toBeTypeOf("string");
    const before = await old.add(4);

    const now = new Instance(ROOT, schema, "new", true, "accounts-rolling");
    expect(await now.started()).toEqual({ started: true });
    expect(await now.line("info")).toMatchObject({
      answer: { rollingFrom: "0.1.0", storeFormat: { stores: { event: { format: 4, lowestWriterFormat: 1 } } } },
    });
    const newAccount = (await now.line("register bob@new.test")).answer as { accountUuid: string };
    expect(newAccount.accountUuid).toBeTypeOf("string");

    // Logins across releases, and an email is registered once whichever release is asked.
    const bobOnOld = await login(old, "bob@new.test");
    const annOnNew = await login(now, "ann@old.test");
    expect(bobOnOld.accountUuid).toBe(newAccount.accountUuid);
    expect(annOnNew.accountUuid).toBe(oldAccount.accountUuid);
    expect(await old.line("register bob@new.test")).toMatchObject({ code: "CONFLICT" });
    expect(await now.line("register ann@old.test")).toMatchObject({ code: "CONFLICT" });

    // Both dispatch at once: nothing refused.
    const [a, b] = await Promise.all([old.add(12), now.add(12)]);
    expect([...before, ...a, ...b].filter((o) => !o.ok)).toEqual([]);

    // GetAccount on both releases shows both accounts in clear.
    const annOnOld = await login(old, "ann@old.test");
    const bobOnNew = await login(now, "bob@new.test");
    for (const [inst, acc, ses, email] of [
      [old, oldAccount.accountUuid, annOnOld.sessionUuid, "ann@old.test"],
      [old, newAccount.accountUuid, bobOnOld.sessionUuid, "bob@new.test"],
      [now, oldAccount.accountUuid, annOnNew.sessionUuid, "ann@old.test"],
      [now, newAccount.accountUuid, bobOnNew.sessionUuid, "bob@new.test"],
    ] as const) {
      const shown = await accountShown(inst, acc, ses, email);
      expect(JSON.stringify(shown)).not.toContain("$enc");
    }

    // The old instance dispatches in a loop beside the new one and is killed at a random point.
    old.loop();
    const killAfter = 1 + Math.floor(Math.random() * 20);
    const during = now.add(8);
    await until(() => old.acks.length >= killAfter, `${killAfter} notes acknowledged by the old instance`, 60_000);
    await old.kill();
    const duringNew = await during;
    expect(duringNew.filter((o) => !o.ok)).toEqual([]);
    const stored = await eventsPerNote(schema);
    for (const id of old.acks) expect(stored.get(id), id).toBe(1);
    for (const n of stored.values()) expect(n).toBe(1);
    const all = [...before, ...a, ...b, ...duringNew];
    await expectStoredOnce(schema, all);
    // The new instance takes the readmodels over and projects everything in clear, each document with its tenant.
    await expectProjectedInClear(schema, [...all, ...old.acks.map((noteUuid) => ({ noteUuid, text: "old note", ok: true }))]);
    // Documents 0.1.0 wrote meanwhile carry their aggregate's tenant (this release's projection writes keep the
    // tenant in the model; documents from before the deploy have none, as after any upgrade); none is left unscoped.
    const docs = await documents(schema);
    expect(docs.filter((d) => d.tenant !== null && d.tenant !== "tenant-1")).toEqual([]);
    expect(docs.some((d) => d.tenant === "tenant-1")).toBe(true);
    const accountDocs = await scratch.pool.query<{ doc: string }>(
      `SELECT doc::text AS doc FROM "${schema}".readmodel_documents WHERE collection LIKE 'Account%'`,
    );
    expect(accountDocs.rows.filter((r) => r.doc.includes("$enc"))).toEqual([]);

    // The finish step: old writers refused again, what was written in clear sealed.
    const finished = (await now.line("finish")) as { answer: Record<string, unknown> };
    expect(finished.answer).toMatchObject({
      finishedFrom: "0.1.0",
      storeFormat: { format: 4, lowestWriterFormat: 2 },
      unscopedDocuments: [],
      migration: { complete: true },
    });
    expect(await now.line("info")).toMatchObject({ answer: { rollingFrom: null } });
    // 0.1.0's appends were chained by the trigger, and the migration re-chained what it sealed.
    await expectChainHolds(schema);
    const rawEvents = await scratch.pool.query<{ p: string }>(`SELECT payload::text AS p FROM "${schema}".events`);
    const rawText = rawEvents.rows.map((r) => r.p).join("\n");
    expect(rawText).not.toContain('"ann@old.test"');
    expect(rawText).not.toContain('"bob@new.test"');
    expect(rawText).not.toContain('"new note 1"');

    // forget erases the accounts of both releases.
    for (const acc of [oldAccount.accountUuid, newAccount.accountUuid]) {
      expect(await now.line(`forget ${acc}`)).toMatchObject({ answer: { keysDeleted: 1 } });
    }
    const annErased = await accountShown(now, oldAccount.accountUuid, annOnNew.sessionUuid, "[erased]");
    const bobErased = await accountShown(now, newAccount.accountUuid, bobOnNew.sessionUuid, "[erased]");
    expect(JSON.stringify([annErased, bobErased])).not.toMatch(/ann@old\.test|bob@new\.test/);

    // A 0.1.0 instance started after the finish step does not start (whatever its checkpoints), naming both releases.
    await expectRefusedAtStart(schema, "accounts");
    // rollingFrom on a finished store is ignored: this release stays strict.
    const again = new Instance(ROOT, schema, "again", true, "accounts-rolling");
    expect(await again.started()).toEqual({ started: true });
    expect(await again.line("info")).toMatchObject({
      answer: { rollingFrom: null, storeFormat: { stores: { event: { lowestWriterFormat: 2 } } } },
    });
    await again.stop();
    await now.stop();
  }, 300_000);
});
