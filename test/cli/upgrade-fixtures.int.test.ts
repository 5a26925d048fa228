/**
 * Stores written by the earlier releases, opened by today's code: the
 * fixtures of test/fixtures/upgrade (made by scripts/make-upgrade-fixtures.mjs
 * with the code of 44da8f1, the first release, and 8256c9f, the second), a
 * SQLite file copied to a scratch file and a Postgres dump loaded into a
 * schema of this file. Every answer an app gets is checked: events as stored,
 * aggregate states, documents, history, logins, new commands, and, after the
 * personal-data migration, erasure by `forget` everywhere.
 */
import { execFileSync } from "node:child_process";
import { copyFileSync, readFileSync } from "node:fs";
import { join } from "node:path";
import Database from "better-sqlite3";
import { afterAll, describe, expect, it } from "vitest";
import * as mneme from "mneme";
import { createFacade, type Event, type Facade, type FacadeOptions, type RequestContext } from "mneme";
import {
  GetAccount,
  Login,
  registerDefaults,
  resolveCredentials,
  SubjectForgotten,
  ChangeAccountName,
  RegisterAccount,
} from "mneme/defaults";
import { createPostgresBackends } from "mneme/postgres";
import { GetClearPersonalData, MigratePersonalData } from "mneme/runtime";
import { createSqliteBackends } from "mneme/sqlite";
import { type ChainedEvents, verifyEventChain } from "mneme/store";
import { defineCrm } from "../fixtures/upgrade/crm-app.js";
import { DATABASE_URL, postgresScratch } from "../support/postgres-scratch.js";
import { sqliteScratch } from "../support/sqlite-scratch.js";
import { until } from "../support/until.js";

interface Manifest {
  admin: { email: string; password: string; name: string; accountUuid: string; identityUuid: string };
  tenants: { name: string; tenantUuid: string }[];
  accounts: { email: string; name: string; password: string; accountUuid: string; identityUuid: string; tenantUuid: string }[];
  contacts: { contactUuid: string; email: string; city: string; tenantUuid: string }[];
  head: number;
  commands: number;
}

const FIXTURES = join(import.meta.dirname, "..", "fixtures", "upgrade");
const sqlite = sqliteScratch("upgrade-fixtures");
const postgres = postgresScratch("upgrade_fixtures");

/** One opened fixture: the backends of today's code, and raw access to what is stored. */
interface Opened {
  backends: FacadeOptions;
  /** Every stored event row: position, uuid, aggregate, version, path and payload, as stored. */
  rawEvents(): Promise<{ position: number; eventUuid: string; aggregateUuid: string; version: number; path: string; payload: unknown }[]>;
  /** Every row of every table of the store, as text. */
  rawText(): Promise<string>;
  /** The stored command records' text. */
  rawCommands(): Promise<string>;
}

function openSqlite(release: string): Opened {
  const file = sqlite.newFile();
  copyFileSync(join(FIXTURES, `${release}.sqlite`), file);
  const raw = <T>(sql: string): T[] => {
    const db = new Database(file, { readonly: true });
    try {
      return db.prepare(sql).all() as T[];
    } finally {
      db.close();
    }
  };
  const tables = () => raw<{ name: string }>("SELECT name FROM sqlite_master WHERE type = 'table'").map((t) => t.name);
  return {
    backends: createSqliteBackends({ filename: file }),
    rawEvents: async () =>
      raw<{ position: number; event_uuid: string; aggregate_uuid: string; version: number; domain: string; name: string; payload: string }>(
        "SELECT position, event_uuid, aggregate_uuid, version, domain, name, payload FROM mneme_events ORDER BY position",
      ).map((r) => ({
        position: r.position,
        eventUuid: r.event_uuid,
        aggregateUuid: r.aggregate_uuid,
        version: r.version,
        path: `${r.domain}.${r.name}`,
        payload: JSON.parse(r.payload),
      })),
    rawText: async () =>
      tables()
        .map((t) => JSON.stringify(raw(`SELECT * FROM "${t}"`)))
        .join("\n"),
    rawCommands: async () => JSON.stringify(raw("SELECT record FROM mneme_commands")),
  };
}

async function openPostgres(release: string): Promise<Opened> {
  const schema = postgres.newSchema();
  const dump = readFileSync(join(FIXTURES, `${release}.sql`), "utf8").replaceAll(`upgrade_fixture_${release}`, schema);
  execFileSync("psql", [DATABASE_URL, "-q", "-v", "ON_ERROR_STOP=1"], { input: dump, stdio: ["pipe", "ignore", "pipe"] });
  const pool = postgres.newPool(4);
  const q = async <T>(sql: string): Promise<T[]> => (await pool.query(sql)).rows as T[];
  return {
    backends: createPostgresBackends({ pool, schema }),
    rawEvents: async () =>
      (
        await q<{
          position: string;
          event_uuid: string;
          aggregate_uuid: string;
          version: number;
          domain: string;
          name: string;
          payload: unknown;
        }>(
          `SELECT e.position::text AS position, event_uuid, aggregate_uuid, version, domain, name, payload FROM "${schema}".events e ORDER BY e.position`,
        )
      ).map((r) => ({
        position: Number(r.position),
        eventUuid: r.event_uuid,
        aggregateUuid: r.aggregate_uuid,
        version: r.version,
        path: `${r.domain}.${r.name}`,
        payload: r.payload,
      })),
    rawText: async () => {
      const tables = await q<{ table_name: string }>(`SELECT table_name FROM information_schema.tables WHERE table_schema = '${schema}'`);
      const out: string[] = [];
      for (const t of tables) out.push(JSON.stringify(await q(`SELECT t::text AS row FROM "${schema}"."${t.table_name}" t`)));
      return out.join("\n");
    },
    rawCommands: async () => JSON.stringify(await q(`SELECT record FROM "${schema}".commands`)),
  };
}

/** The PROCESS warnings of one code seen while `fn` runs. */
async function warningsWhile<T>(code: string, fn: () => Promise<T>): Promise<{ result: T; messages: string[] }> {
  const messages: string[] = [];
  const listener = (w: Error & { code?: string }) => {
    if (w.code === code) messages.push(w.message);
  };
  process.on("warning", listener);
  try {
    const result = await fn();
    // Warnings are emitted on the next tick.
    await new Promise((r) => setImmediate(r));
    return { result, messages };
  } finally {
    process.off("warning", listener);
  }
}

const facades: Facade[] = [];
afterAll(async () => {
  for (const f of facades) await f.stop().catch(() => undefined);
});

async function startToday(opened: Opened, m: Manifest) {
  const facade = createFacade({ appName: "upgrade-fixture", ...opened.backends });
  facades.push(facade);
  await registerDefaults(facade, {
    admin: { email: m.admin.email, password: m.admin.password, name: m.admin.name },
    passwordHashing: { N: 1024, r: 8, p: 1 },
  });
  const crm = defineCrm(mneme, { declared: true, subjectForgotten: SubjectForgotten });
  const readmodels = crm.register(facade);
  const { messages } = await warningsWhile("MNEME_PERSONAL_DATA_CLEAR", () => facade.start());
  const login = async (email: string, password: string, identityUuid?: string): Promise<RequestContext> => {
    const r = await facade.dispatch(Login, { email, password }, { waitToFinish: true });
    const ctx = await resolveCredentials(facade, {
      sessionUuid: r.result!.sessionUuid,
      sessionKey: r.result!.sessionKey,
      ...(identityUuid === undefined ? {} : { identityUuid }),
    });
    if (ctx === undefined) throw new Error("credentials did not resolve");
    return ctx;
  };
  return { facade, crm, readmodels, warnings: messages, login };
}

const RELEASES = [
  // The first release kept accounts in clear; the second sealed them already. Neither knew the Crm e-mail was personal.
  { release: "r01", label: "the first release (44da8f1)", clearAccounts: true },
  { release: "r02", label: "the second release (8256c9f)", clearAccounts: false },
];
const BACKENDS = [
  { backend: "SQLite", open: async (r: string) => openSqlite(r), manifest: (r: string) => `${r}.sqlite.json` },
  { backend: "Postgres", open: openPostgres, manifest: (r: string) => `${r}.sql.json` },
];

describe.each(RELEASES)("a store written by $label", ({ release, clearAccounts }) => {
  describe.each(BACKENDS)("on $backend", ({ open, manifest }) => {
    it("keeps every answer, then seals what was written before it was declared, and forget erases it everywhere", async () => {
      const m = JSON.parse(readFileSync(join(FIXTURES, manifest(release)), "utf8")) as Manifest;
      const opened = await open(release);
      const stored = await opened.rawEvents();
      expect(stored).toHaveLength(m.head);
      const { facade, crm, readmodels, warnings, login } = await startToday(opened, m);

      // Until the migration: the start-up check names the subjects forget cannot erase.
      const subjects = m.contacts.length + (clearAccounts ? m.accounts.length + 1 : 0);
      expect(facade.clearPersonalData).toMatchObject({ subjects, complete: true, unnamed: 0 });
      expect(facade.clearPersonalData!.firstSubjects).toHaveLength(Math.min(10, subjects));
      expect(warnings).toHaveLength(1);
      expect(warnings[0]).toContain(`${subjects} subject(s) cannot be erased`);
      expect(facade.runtime.systemInfo().personalDataInClear).toEqual({
        subjects,
        events: facade.clearPersonalData!.events,
        complete: true,
      });
      const adminCtx = await login(m.admin.email, m.admin.password, m.admin.identityUuid);
      expect(await facade.query(GetClearPersonalData, {}, { reqCtx: adminCtx })).toEqual(facade.clearPersonalData);

      // Events as stored, through today's read path (decryption, upcasting): ids, positions, versions, payloads.
      const read = async (): Promise<Event[]> => {
        const out: Event[] = [];
        for await (const page of facade.eventRepository.readAll({ untilPosition: m.head })) out.push(...page);
        return out;
      };
      const before = await read();
      expect(before.map((e) => [e.position, e.eventUuid, e.aggregateUuid, e.version, `${e.domain}.${e.name}`])).toEqual(
        stored.map((e) => [e.position, e.eventUuid, e.aggregateUuid, e.version, e.path]),
      );
      for (const [i, e] of before.entries()) {
        if (JSON.stringify(stored[i]!.payload).includes('"$enc"')) continue; // sealed by the second release: opened here
        expect(e.payload).toEqual(stored[i]!.payload);
      }

      const admin = await login(m.admin.email, m.admin.password, m.admin.identityUuid);
      const answers = async () => {
        const accounts = [];
        for (const a of m.accounts) {
          const got = await facade.query(GetAccount, { accountUuid: a.accountUuid }, { reqCtx: admin });
          accounts.push({ email: got?.model.email, name: got?.model.name });
        }
        const contacts = [];
        for (const c of m.contacts) {
          const reqCtx = { ...admin, targetTenantUuid: c.tenantUuid };
          const state = await facade.query(crm.GetContactState, { contactUuid: c.contactUuid }, { reqCtx });
          const doc: any = await facade.query(crm.GetContact, { contactUuid: c.contactUuid, includeHistory: true }, { reqCtx });
          const city = await readmodels.byCity.city(c.tenantUuid, c.city);
          contacts.push({
            state,
            doc: doc?.model,
            history: doc?.historyEvents?.map((h: { domainEvtName: string; domainEvtData: string }) => [
              h.domainEvtName,
              JSON.parse(h.domainEvtData),
            ]),
            inCity: city?.emails[c.contactUuid],
          });
        }
        return { accounts, contacts };
      };
      const expected = {
        accounts: m.accounts.map((a) => ({ email: a.email, name: a.name })),
        contacts: m.contacts.map((c) => ({
          state: { exists: true, email: c.email, city: c.city },
          doc: { exists: true, email: c.email, city: c.city },
          history: expect.arrayContaining([["ContactAdded", expect.objectContaining({ email: c.email })]]),
          inCity: c.email,
        })),
      };
      expect(await answers()).toEqual(expected);
      for (const a of m.accounts) await login(a.email, a.password, a.identityUuid);

      // New commands append after the old head, with no gap.
      const ivan = m.accounts[0]!;
      const ivanCtx = await login(ivan.email, ivan.password, ivan.identityUuid);
      const added = await facade.dispatch(
        crm.AddContact,
        { contactUuid: mneme.newUuid(), email: "new@contact.example", city: "Oslo" },
        {
          reqCtx: ivanCtx,
          waitToFinish: true,
        },
      );
      expect(added.events[0]!.position).toBeGreaterThan(m.head);
      const afterNew = (await opened.rawEvents()).map((e) => e.position);
      expect(afterNew).toEqual(Array.from({ length: afterNew.length }, (_, i) => i + 1));
      await facade.dispatch(RegisterAccount, { email: "newbie@example.com", password: "newbie-password" }, { waitToFinish: true });
      await login("newbie@example.com", "newbie-password");

      // The migration: every declared value stored in clear is sealed in place; the answers stay.
      const report = await facade.migratePersonalData({ batchSize: 7 });
      expect(report).toMatchObject({ complete: true, subjects, unnamed: 0, erasedSubjects: [] });
      expect(report.sealedEvents).toBeGreaterThanOrEqual(subjects);
      expect(facade.clearPersonalData).toMatchObject({ subjects: 0, events: 0, complete: true });
      const raw = await opened.rawEvents();
      expect(raw.slice(0, m.head).map((e) => [e.position, e.eventUuid, e.version])).toEqual(
        stored.map((e) => [e.position, e.eventUuid, e.version]),
      );
      const rawEventsText = JSON.stringify(raw);
      for (const c of m.contacts) expect(rawEventsText).not.toContain(c.email);
      for (const a of m.accounts) expect(rawEventsText).not.toContain(`"${a.email}"`);
      const rawCommands = await opened.rawCommands();
      for (const c of m.contacts) expect(rawCommands).not.toContain(c.email);
      for (const a of m.accounts) expect(rawCommands).not.toContain(a.email);
      expect(await answers()).toEqual(expected);
      for (const a of m.accounts) await login(a.email, a.password, a.identityUuid);
      // A second run finds nothing to do.
      const again = await facade.dispatch(MigratePersonalData, {}, { reqCtx: admin });
      expect(again.result).toMatchObject({ sealedEvents: 0, sealedRecords: 0, complete: true });

      // forget: an old account and an old contact read "[erased]" on every read path.
      const contact = m.contacts[0]!;
      expect(await facade.forget(ivan.accountUuid)).toEqual({ keysDeleted: 1 });
      // The hash chain: built over the old store's events when today's code opened it, recomputed from the
      // first event the migration sealed, and kept by forget (it deletes a key, not a stored byte).
      const headBefore = await facade.eventRepository.headPosition();
      const chain = await verifyEventChain(facade.eventRepository.stored as ChainedEvents);
      expect(chain).toMatchObject({ ok: true, complete: true });
      expect(chain.ok && chain.head.position).toBeGreaterThanOrEqual(headBefore);
      expect(await facade.forget(contact.contactUuid)).toEqual({ keysDeleted: 1 });
      await facade.dispatch(
        ChangeAccountName,
        { accountUuid: m.accounts[1]!.accountUuid, name: "Maria B" },
        { reqCtx: admin, waitToFinish: true },
      );
      // The erasure reaches the readmodels through SubjectForgotten (AccountEraser appends AccountErased): wait for it.
      await until(
        async () => (await facade.query(GetAccount, { accountUuid: ivan.accountUuid }, { reqCtx: admin }))?.model.email === "[erased]",
        "the Account projection shows the erasure",
      );
      await facade.scrubStorage();
      const account = await facade.query(GetAccount, { accountUuid: ivan.accountUuid, includeHistory: true }, { reqCtx: admin });
      expect(account?.model).toMatchObject({ email: "[erased]", name: "[erased]" });
      expect(JSON.stringify(account?.historyEvents)).not.toContain(ivan.email);
      expect(JSON.stringify(account?.historyEvents)).toContain("[erased]");
      const ivanEvents = await facade.eventRepository.loadAggregate(ivan.accountUuid);
      expect(JSON.stringify(ivanEvents)).not.toContain(ivan.email);
      // The Contact projection keys by aggregate: rebuilt from zero (docs/privacy.md), it reads the erased value.
      await readmodels.projection.restoreState(undefined, { fromZero: true }).done;
      const doc: any = await facade.query(
        crm.GetContact,
        { contactUuid: contact.contactUuid, includeHistory: true },
        { reqCtx: { ...admin, targetTenantUuid: contact.tenantUuid } },
      );
      expect(doc?.model).toMatchObject({ email: "[erased]" });
      expect(JSON.stringify(doc?.historyEvents)).not.toContain(contact.email);
      expect((await readmodels.byCity.city(contact.tenantUuid, contact.city))?.emails[contact.contactUuid]).toBeUndefined();
      // Nothing mneme stored holds the forgotten values in clear.
      await facade.scrubStorage();
      const everything = await opened.rawText();
      expect(everything).not.toContain(contact.email);
      expect(everything).not.toContain(`"${ivan.email}"`);
      // Others read as before.
      const other = m.contacts[1]!;
      const otherState: any = await facade.query(
        crm.GetContactState,
        { contactUuid: other.contactUuid },
        { reqCtx: { ...admin, targetTenantUuid: other.tenantUuid } },
      );
      expect(otherState.email).toBe(other.email);
    }, 120_000);
  });
});
