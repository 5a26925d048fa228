/**
 * The personal-data migration on a SQLite file: values written while their
 * type declared nothing are sealed in place; a run stopped at any step (the
 * store refusing the next write stands for a kill there: every step is one
 * transaction) and rerun by a new facade ends in the same state, each value
 * sealed once; two instances migrating at once seal each value once; a
 * subject forgotten before the migration reads "[erased]" after it; the
 * start-up check is bounded.
 */
import Database from "better-sqlite3";
import { describe, expect, it } from "vitest";
import { createFacade, type Facade, MnemeError } from "mneme";
import type { CommandStore, EventRepository } from "mneme/store";
import { createSqliteBackends } from "mneme/sqlite";
import { runProcess } from "../support/run-process.js";
import { type Signup, signups } from "../support/signups-app.js";
import { sqliteScratch } from "../support/sqlite-scratch.js";

const scratch = sqliteScratch("privacy-migration");

const PEOPLE = Array.from({ length: 9 }, (_, i) => ({
  personUuid: `0190f5e4-8e4a-7cc4-9f4e-00000000000${i}`,
  email: `person${i}@example.com`,
}));

/** A file with 9 people, 2 sign-ups each, written while nothing was declared. */
async function oldFile(): Promise<string> {
  const file = scratch.newFile();
  const f = createFacade({ appName: "signups", ...createSqliteBackends({ filename: file }) });
  f.registerDomain(signups(false).D);
  await f.start();
  const { SignUp } = signups(false);
  for (const round of ["free", "pro"]) for (const p of PEOPLE) await f.dispatch(SignUp, { ...p, plan: round });
  await f.stop();
  return file;
}

type Wrap = { failAfter: number; writes: number };

/** The backends of `file`, whose event repository and command store refuse writes after `wrap.failAfter` of them. */
function failingBackends(file: string, wrap: Wrap) {
  const b = createSqliteBackends({ filename: file });
  const gate = <T extends object>(target: T, methods: string[]): T =>
    new Proxy(target, {
      get(t, k) {
        const v = Reflect.get(t, k, t) as unknown;
        if (typeof v !== "function") return v;
        if (!methods.includes(String(k))) return (v as (...a: unknown[]) => unknown).bind(t);
        return async (...args: unknown[]) => {
          if (++wrap.writes > wrap.failAfter) throw new MnemeError("UNAVAILABLE", "killed here");
          return (v as (...a: unknown[]) => unknown).apply(t, args);
        };
      },
    });
  return {
    ...b,
    eventRepository: gate<EventRepository>(b.eventRepository, ["sealStoredPayloads"]),
    commandStore: gate<CommandStore>(b.commandStore, ["sealRecordPayloads"]),
  };
}

async function startDeclared(file: string, wrap?: Wrap, opts: { startupCheckLimit?: number } = {}): Promise<Facade> {
  const backends = wrap === undefined ? createSqliteBackends({ filename: file }) : failingBackends(file, wrap);
  const f = scratch.keep(createFacade({ appName: "signups", ...backends, personalData: { keyCacheTtlMs: 0, ...opts } }));
  f.registerDomain(signups(true).D);
  await f.start();
  return f;
}

/** Every stored row of the file, as text. */
function rawText(file: string): string {
  const db = new Database(file, { readonly: true });
  try {
    const tables = (db.prepare("SELECT name FROM sqlite_master WHERE type = 'table'").all() as { name: string }[]).map((t) => t.name);
    return tables.map((t) => JSON.stringify(db.prepare(`SELECT * FROM "${t}"`).all())).join("\n");
  } finally {
    db.close();
  }
}

/** The stored sign-up payloads (raw) and the same opened by `f`. */
async function signupsOf(f: Facade, file: string) {
  const db = new Database(file, { readonly: true });
  const raw = (db.prepare("SELECT payload FROM mneme_events WHERE name = 'SignedUp' ORDER BY position").all() as { payload: string }[]).map(
    (r) => JSON.parse(r.payload) as Record<string, unknown>,
  );
  const records = (db.prepare("SELECT record FROM mneme_commands ORDER BY created_at").all() as { record: string }[]).map(
    (r) => (JSON.parse(r.record) as { payload: Record<string, unknown> }).payload,
  );
  db.close();
  const opened: unknown[] = [];
  for await (const page of f.eventRepository.readAll({ eventPaths: ["Signups.SignedUp"] })) opened.push(...page.map((e) => e.payload));
  return { raw, records, opened };
}

const isEnvelope = (v: unknown) => typeof v === "object" && v !== null && typeof (v as { $enc?: unknown }).$enc === "string";

/** The state a migration must end in: every e-mail sealed once (it opens to the clear string), in events and records. */
async function expectMigrated(f: Facade, file: string): Promise<void> {
  const { raw, records, opened } = await signupsOf(f, file);
  expect(raw).toHaveLength(18);
  for (const p of raw) expect(isEnvelope(p.email)).toBe(true);
  for (const p of records) expect(isEnvelope(p.email)).toBe(true);
  expect(opened).toEqual(["free", "pro"].flatMap((plan) => PEOPLE.map((p) => ({ ...p, plan }))));
  const text = rawText(file);
  for (const p of PEOPLE) expect(text).not.toContain(p.email);
  expect(f.clearPersonalData).toMatchObject({ subjects: 0, events: 0, complete: true });
}

describe("the personal-data migration", () => {
  it("warns at start, seals events and command records in place, and forget then erases them", async () => {
    const file = await oldFile();
    const warnings: string[] = [];
    const listen = (w: Error & { code?: string }) => void (w.code === "MNEME_PERSONAL_DATA_CLEAR" && warnings.push(w.message));
    process.on("warning", listen);
    const f = await startDeclared(file);
    await new Promise((r) => setImmediate(r));
    process.off("warning", listen);
    expect(f.clearPersonalData).toMatchObject({ subjects: 9, events: 18, complete: true, firstSubjects: PEOPLE.map((p) => p.personUuid) });
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatch(
      /^personal data stored in clear: 9 subject\(s\) cannot be erased by forget until the migration has run \(18 event\(s\)/,
    );
    expect((await f.logStore.list({ limit: 1000 })).items.some((e) => e.message === warnings[0])).toBe(true);
    // Before the migration a forget deletes no key and erases nothing.
    expect(await f.forget(PEOPLE[0]!.personUuid)).toEqual({ keysDeleted: 0 });

    const dry = await f.migratePersonalData({ dryRun: true });
    expect(dry).toMatchObject({ dryRun: true, sealedEvents: 18, sealedRecords: 18, subjects: 9, erasedSubjects: [PEOPLE[0]!.personUuid] });
    expect(rawText(file)).toContain(PEOPLE[1]!.email);

    const report = await f.migratePersonalData({ batchSize: 4 });
    expect(report).toMatchObject({ sealedEvents: 18, sealedValues: 18, sealedRecords: 18, subjects: 9, complete: true, unnamed: 0 });
    // Forgotten before the migration: its values were sealed under a key that is not kept.
    expect(report.erasedSubjects).toEqual([PEOPLE[0]!.personUuid]);
    const { opened } = await signupsOf(f, file);
    expect(opened.filter((p) => (p as Signup).personUuid === PEOPLE[0]!.personUuid)).toEqual([
      { ...PEOPLE[0], email: "[erased]", plan: "free" },
      { ...PEOPLE[0], email: "[erased]", plan: "pro" },
    ]);
    expect(rawText(file)).not.toContain(PEOPLE[1]!.email);

    expect(await f.forget(PEOPLE[1]!.personUuid)).toEqual({ keysDeleted: 1 });
    const after = (await signupsOf(f, file)).opened.filter((p) => (p as Signup).personUuid === PEOPLE[1]!.personUuid);
    expect(after.map((p) => (p as Signup).email)).toEqual(["[erased]", "[erased]"]);
    const records = (await f.commandStore.list({ limit: 100 })).items;
    const openedRecords = await Promise.all(records.map(async (r) => (await f.personalData.openPayload(r.payload)).payload as Signup));
    expect(openedRecords.filter((p) => p.personUuid === PEOPLE[1]!.personUuid).map((p) => p.email)).toEqual(["[erased]", "[erased]"]);
    expect(openedRecords.filter((p) => p.personUuid === PEOPLE[2]!.personUuid).map((p) => p.email)).toEqual([
      PEOPLE[2]!.email,
      PEOPLE[2]!.email,
    ]);
  });

  it("stopped at any step and rerun by a new instance, it ends in the same state, each value sealed once", async () => {
    // 18 events in pages of 4 (5 rewrites) and 18 records in one page (1 rewrite): a stop before each of the 6 writes, and none.
    for (let failAfter = 0; failAfter <= 6; failAfter++) {
      const file = await oldFile();
      const wrap = { failAfter, writes: 0 };
      const first = await startDeclared(file, wrap);
      const run = first.migratePersonalData({ batchSize: 4 });
      if (failAfter < 6) await expect(run).rejects.toThrow("killed here");
      else await run;
      await first.stop();
      const second = await startDeclared(file);
      if (failAfter < 6) expect(second.clearPersonalData?.events).toBe(Math.max(0, 18 - 4 * failAfter));
      await second.migratePersonalData({ batchSize: 4 });
      await expectMigrated(second, file);
      expect(await second.migratePersonalData()).toMatchObject({ sealedEvents: 0, sealedRecords: 0 });
      await second.stop();
    }
  }, 120_000);

  it("two instances migrating one file at once seal each value once", async () => {
    const file = await oldFile();
    const a = await startDeclared(file);
    const b = await startDeclared(file);
    const [ra, rb] = await Promise.all([a.migratePersonalData({ batchSize: 3 }), b.migratePersonalData({ batchSize: 5 })]);
    expect(ra.sealedEvents + rb.sealedEvents).toBe(18);
    expect(ra.sealedRecords + rb.sealedRecords).toBe(18);
    await expectMigrated(a, file);
    await expectMigrated(b, file);
  });

  it("runs from the mneme binary: privacy check, then privacy migrate --dry-run and migrate", async () => {
    const file = await oldFile();
    process.env.SIGNUPS_FILE = file;
    const root = new URL("../..", import.meta.url).pathname;
    const cli = (...args: string[]) => runProcess("npx", ["tsx", "src/cli/main.ts", "privacy", ...args], root, 90_000);
    const check = await cli("check", "--app", "test/support/signups-app.ts");
    expect(check.code).toBe(0);
    expect(JSON.parse(check.stdout)).toMatchObject({ subjects: 9, events: 18, complete: true });
    const dry = await cli("migrate", "--app", "test/support/signups-app.ts", "--dry-run");
    expect(JSON.parse(dry.stdout)).toMatchObject({ dryRun: true, sealedEvents: 18, sealedRecords: 18 });
    expect(rawText(file)).toContain(PEOPLE[3]!.email);
    const real = await cli("migrate", "--app", "test/support/signups-app.ts", "--batch-size", "5");
    expect(real.code).toBe(0);
    expect(JSON.parse(real.stdout)).toMatchObject({ dryRun: false, sealedEvents: 18, sealedRecords: 18, subjects: 9, complete: true });
    expect(rawText(file)).not.toContain(PEOPLE[3]!.email);
    const usage = await cli("migrate");
    expect(usage.code).toBe(2);
    expect(usage.stderr).toContain("missing --app");
  }, 120_000);

  it("a clean check of a large store records how far it read: the next start reads on from there", async () => {
    const file = scratch.newFile();
    const first = await startDeclared(file, undefined, { startupCheckLimit: 500 });
    const { SignedUp } = signups(true);
    const events = Array.from({ length: 1_200 }, (_, i) => SignedUp.create(PEOPLE[i % 9]!.personUuid, { ...PEOPLE[i % 9]!, plan: "p" }));
    await first.eventRepository.append(events);
    await first.stop();
    // Cut short by its bound, a clean check records how far it read; the next start reads on from there.
    const second = await startDeclared(file, undefined, { startupCheckLimit: 500 });
    expect(second.clearPersonalData).toMatchObject({ checked: 500, complete: false, after: 0, events: 0 });
    const reached = second.clearPersonalData!.checkedThrough;
    await second.stop();
    const third = await startDeclared(file, undefined, { startupCheckLimit: 500 });
    expect(third.clearPersonalData).toMatchObject({ checked: 500, complete: false, after: reached, events: 0 });
    await third.stop();
    // Complete and below 1,000 events read: nothing recorded (reading them again costs less than an event).
    const fourth = await startDeclared(file);
    expect(fourth.clearPersonalData).toMatchObject({ checked: 200, complete: true, events: 0, subjects: 0 });
    const after = fourth.clearPersonalData!.after;
    await fourth.stop();
    expect((await startDeclared(file)).clearPersonalData).toMatchObject({ checked: 200, after });
    // A complete clean check of 1,000 events or more records a mark at the head.
    const big = scratch.newFile();
    const writer = await startDeclared(big);
    await writer.eventRepository.append(events);
    await writer.stop();
    const once = await startDeclared(big);
    expect(once.clearPersonalData).toMatchObject({ checked: 1_200, complete: true, after: 0 });
    const head = once.clearPersonalData!.head;
    await once.stop();
    expect((await startDeclared(big)).clearPersonalData).toMatchObject({ checked: 0, complete: true, after: head });
  });

  it("the start-up check reads at most startupCheckLimit events, and says so", async () => {
    const file = await oldFile();
    const f = await startDeclared(file, undefined, { startupCheckLimit: 5 });
    expect(f.clearPersonalData).toMatchObject({ subjects: 5, events: 5, complete: false });
    expect(f.clearPersonalData!.checkedThrough).toBeLessThan(f.clearPersonalData!.head);
    await f.stop();
    const off = await startDeclared(file, undefined, { startupCheckLimit: 0 });
    expect(off.clearPersonalData).toBeUndefined();
    await off.stop();
    await expect(startDeclared(file, undefined, { startupCheckLimit: -1 })).rejects.toMatchObject({ code: "INVALID_REQUEST" });
  });
});
