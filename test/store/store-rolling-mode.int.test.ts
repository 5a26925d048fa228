/**
 * The compatibility mode of a rolling deploy from 0.1.0 on Postgres
 * (docs/upgrading.md, Rolling deploys), without the old release's code: the
 * statements 0.1.0 sends are sent here by hand (its `mneme_append` signature,
 * an insert without `event_version`, a document without its tenant), so this
 * runs on every clone; test/store/store-rolling.int.test.ts runs the real 0.1.0.
 */
import { afterAll, describe, expect, it } from "vitest";
import { createFacade, defineDomain, type Facade } from "mneme";
import { RegisterAccount, registerDefaults } from "mneme/defaults";
import { createPostgresBackends } from "mneme/postgres";
import { OLD_START_MARKER } from "../../src/postgres/postgres-old-starts.js";
import { advisoryKey } from "../../src/postgres/postgres-schema.js";
import { STORE_RELEASE } from "mneme/store";
import { DATABASE_URL, postgresScratch } from "../support/postgres-scratch.js";
import { runProcess } from "../support/run-process.js";

const scratch = postgresScratch("mneme_rollmode");
const facades: Facade[] = [];
afterAll(async () => {
  for (const f of facades) await f.stop().catch(() => undefined);
});

const Notes = defineDomain("Notes");
const NoteAdded = Notes.event<{ owner: string; text: string }>("NoteAdded", {
  personalData: { subject: (p) => p.owner, fields: ["text"] },
});

async function instance(schema: string, rollingFrom?: "0.1.0"): Promise<Facade> {
  const backends = createPostgresBackends({
    connectionString: DATABASE_URL,
    schema,
    ...(rollingFrom === undefined ? {} : { rollingFrom }),
  });
  const facade = createFacade({ appName: "rollmode", ...backends });
  facade.registerDomain(Notes);
  await registerDefaults(facade, {
    admin: { email: "admin@rollmode.test", password: "correct horse battery staple" },
    passwordHashing: { N: 1024, r: 8, p: 1 },
  });
  facades.push(facade);
  await facade.start();
  return facade;
}

/** The call 0.1.0 makes to append one event: its signature of mneme_append (no global aggregates, no event versions). */
async function appendAs010(schema: string, aggregateUuid: string, tenantUuid: string, payload: unknown): Promise<void> {
  await scratch.pool.query(
    `SELECT * FROM "${schema}".mneme_append($1::bigint, $2::text, $3::text, $4::text[], $5::text[], $6::text[], $7::text[], $8::text[],
       $9::integer[], $10::text[], $11::bigint[], $12::jsonb[], $13::jsonb[], $14::text[], $15::integer[])`,
    [
      advisoryKey("mneme:events", schema),
      `mneme_events_${schema}`,
      "old",
      [`ev-${aggregateUuid}`],
      [tenantUuid],
      [NoteAdded.domain],
      [NoteAdded.name],
      [aggregateUuid],
      [null],
      [null],
      [Date.now() * 1e6],
      ["{}"],
      [JSON.stringify(payload)],
      [],
      [],
    ],
  );
}

/**
 * The statement of 0.1.0's init() that replaces its signature of mneme_append (0.2.0's init sends the same
 * one; the body does not matter to the refusal).
 */
function initStatementOf010(schema: string): string {
  return `CREATE OR REPLACE FUNCTION "${schema}".mneme_append(
        p_lock_key bigint, p_channel text, p_note text,
        p_event_uuids text[], p_tenant_uuids text[], p_domains text[], p_names text[], p_aggregate_uuids text[],
        p_versions integer[], p_command_uuids text[], p_created_ats bigint[], p_req_ctxs jsonb[], p_payloads jsonb[],
        p_expected_aggregates text[], p_expected_versions integer[])
      RETURNS TABLE (base_position bigint, versions integer[])
      LANGUAGE plpgsql VOLATILE AS $fn$ BEGIN RAISE EXCEPTION 'the body of 0.1.0'; END $fn$`;
}

/** The statements of an init() of 0.1.0 (`reads` false) or 0.2.0 (which reads the format record first), in one transaction. */
async function initAs(schema: string, reads: boolean): Promise<void> {
  const client = await scratch.pool.connect();
  try {
    await client.query("BEGIN");
    await client.query("SELECT pg_advisory_xact_lock($1::bigint)", [advisoryKey("mneme:init", schema)]);
    if (reads)
      await client.query(`SELECT format, lowest_writer_format, upgraded_by, upgraded_at FROM "${schema}".mneme_store_format WHERE id = 1`);
    await client.query(initStatementOf010(schema));
    await client.query("COMMIT");
  } catch (e) {
    await client.query("ROLLBACK");
    throw e;
  } finally {
    client.release();
  }
}

/** A document written as 0.1.0 writes it: without its tenant. */
async function putAs010(schema: string, key: string): Promise<void> {
  await scratch.pool.query(
    `INSERT INTO "${schema}".readmodel_documents (collection, key, doc, updated_at) VALUES ('OldNotes:models', $1, '{}', 0)`,
    [key],
  );
}

/** The driver's error of a statement that must fail. */
async function refused(p: Promise<unknown>): Promise<Error & { code?: string }> {
  try {
    await p;
  } catch (e) {
    return e as Error & { code?: string };
  }
  throw new Error("expected the database to refuse the statement");
}

async function rawEvents(schema: string): Promise<string> {
  const { rows } = await scratch.pool.query<{ p: string }>(`SELECT payload::text AS p FROM "${schema}".events ORDER BY position`);
  return rows.map((r) => r.p).join("\n");
}

describe("compatibility mode for 0.1.0 (rollingFrom, Postgres)", () => {
  it("is the schema's: entered by the first instance, followed by one started without the option; 0.1.0's statements are admitted; finishRollingUpgrade refuses them again and seals what was written in clear", async () => {
    const schema = scratch.newSchema();
    const a = await instance(schema, "0.1.0");
    const b = await instance(schema);
    for (const f of [a, b]) {
      expect(f.rollingFrom).toBe("0.1.0");
      expect(f.runtime.systemInfo()).toMatchObject({ rollingFrom: "0.1.0", storeFormat: { stores: { event: { lowestWriterFormat: 1 } } } });
    }

    // This release writes personal data in clear meanwhile.
    await a.dispatch(RegisterAccount, { email: "ann@rollmode.test", password: "correct horse battery staple" }, { reqCtx: {} });
    await a.dispatch(RegisterAccount, { email: "cid@rollmode.test", password: "correct horse battery staple" }, { reqCtx: {} });
    expect(await rawEvents(schema)).toContain('"ann@rollmode.test"');
    expect(await rawEvents(schema)).not.toContain("$enc");

    // 0.1.0's statements are admitted: its append signature, an insert without event_version, a document without its tenant.
    await appendAs010(schema, "note-1", "tenant-1", { owner: "owner-1", text: "old text" });
    await scratch.pool.query(
      `INSERT INTO "${schema}".events (position, event_uuid, tenant_uuid, domain, name, aggregate_uuid, version, command_uuid, created_at, req_ctx, payload)
       SELECT max(position) + 1, 'ev-note-2', 'tenant-2', 'Notes', 'NoteAdded', 'note-2', 1, NULL, 0, '{}', '{"owner":"owner-2","text":"old text 2"}'
       FROM "${schema}".events`,
    );
    const versions = await scratch.pool.query<{ a: string; v: number; t: string }>(
      `SELECT aggregate_uuid AS a, event_version AS v, tenant_uuid AS t FROM "${schema}".events WHERE domain = 'Notes' ORDER BY position`,
    );
    expect(versions.rows).toEqual([
      { a: "note-1", v: 1, t: "tenant-1" },
      { a: "note-2", v: 1, t: "tenant-2" },
    ]);
    await putAs010(schema, "note-1");
    await putAs010(schema, "note-2");
    await putAs010(schema, "not-an-aggregate");
    const docs = await scratch.pool.query<{ key: string; tenant: string }>(
      `SELECT key, tenant_uuid AS tenant FROM "${schema}".readmodel_documents WHERE collection = 'OldNotes:models' ORDER BY key`,
    );
    expect(docs.rows).toEqual([
      { key: "not-an-aggregate", tenant: "mneme:written-without-tenant" },
      { key: "note-1", tenant: "tenant-1" },
      { key: "note-2", tenant: "tenant-2" },
    ]);

    // The finish step, from the instance started without the option.
    const report = await b.finishRollingUpgrade({ settleMs: 0 });
    expect(report).toMatchObject({
      finishedFrom: "0.1.0",
      storeFormat: { format: 4, lowestWriterFormat: 2 },
      unscopedDocuments: [{ collection: "OldNotes:models", documents: 1 }],
      migration: { complete: true },
    });
    expect(report.migration.sealedEvents).toBeGreaterThanOrEqual(4);
    expect(b.rollingFrom).toBeUndefined();
    const sealed = await rawEvents(schema);
    for (const clear of ['"ann@rollmode.test"', '"cid@rollmode.test"', '"old text"', '"old text 2"']) expect(sealed).not.toContain(clear);
    // Idempotent: a second run changes nothing.
    expect(await a.finishRollingUpgrade({ settleMs: 0 })).toMatchObject({ finishedFrom: null, migration: { sealedEvents: 0 } });

    // The other instance learns it at its next append of personal data: sealed.
    await a.dispatch(RegisterAccount, { email: "bob@rollmode.test", password: "correct horse battery staple" }, { reqCtx: {} });
    expect(a.rollingFrom).toBeUndefined();
    expect(await rawEvents(schema)).not.toContain('"bob@rollmode.test"');

    // 0.1.0's statements are refused again (SQLSTATE MN001, naming the releases).
    const refusals = [
      await refused(appendAs010(schema, "note-3", "tenant-1", { owner: "owner-3", text: "late" })),
      await refused(putAs010(schema, "note-1x")),
    ];
    for (const e of refusals) {
      expect((e as { code?: string }).code).toBe("MN001");
      expect(e.message).toContain("store format 4 (mneme 0.4.0)");
    }

    // rollingFrom on a finished schema is ignored: strict.
    const late = await instance(schema, "0.1.0");
    expect(late.rollingFrom).toBeUndefined();
    expect(late.runtime.systemInfo().rollingFrom).toBeUndefined();
  }, 120_000);

  it("is entered only on a schema without a format record: one this release opened strictly stays strict", async () => {
    const schema = scratch.newSchema();
    const strict = await instance(schema);
    expect(strict.rollingFrom).toBeUndefined();
    const late = await instance(schema, "0.1.0");
    expect(late.rollingFrom).toBeUndefined();
    const e = await refused(appendAs010(schema, "note-1", "tenant-1", { owner: "o", text: "t" }));
    expect((e as { code?: string }).code).toBe("MN001");
  }, 60_000);

  it("runs from the mneme binary: upgrade status, then upgrade finish ends the mode", async () => {
    const schema = scratch.newSchema();
    const root = new URL("../..", import.meta.url).pathname;
    const env = { ...process.env, ROLLING_SCHEMA: schema, DATABASE_URL };
    const cli = (...args: string[]) =>
      runProcess("npx", ["tsx", "src/cli/main.ts", "upgrade", ...args, "--app", "test/support/rolling-app.ts"], root, 90_000, env);
    const before = await cli("status");
    expect(before.code, before.stderr).toBe(0);
    expect(JSON.parse(before.stdout)).toMatchObject({
      rollingFrom: "0.1.0",
      storeFormat: { stores: { event: { lowestWriterFormat: 1 } } },
    });
    const finished = await cli("finish", "--settle-ms", "0", "--batch-size", "50");
    expect(finished.code, finished.stderr).toBe(0);
    expect(JSON.parse(finished.stdout)).toMatchObject({
      finishedFrom: "0.1.0",
      storeFormat: { lowestWriterFormat: 2 },
      migration: { complete: true },
    });
    const after = await cli("status");
    expect(JSON.parse(after.stdout)).toMatchObject({ rollingFrom: null, storeFormat: { stores: { event: { lowestWriterFormat: 2 } } } });
    // Idempotent: a second finish changes nothing and says the store admitted no old writer.
    expect(JSON.parse((await cli("finish", "--settle-ms", "0")).stdout)).toMatchObject({ finishedFrom: null });
    const usage = await cli("finish", "--settle-ms", "1.5");
    expect(usage.code).toBe(2);
    expect(usage.stderr).toContain("--settle-ms must be an integer >= 0");
  }, 180_000);

  it("refuses a rollingFrom it does not know with INVALID_REQUEST", () => {
    for (const bad of ["0.2.0-pre", "0.0.9", 1, null]) {
      expect(() => createPostgresBackends({ connectionString: DATABASE_URL, rollingFrom: bad as never })).toThrow(
        expect.objectContaining({ code: "INVALID_REQUEST" }) as Error,
      );
    }
  });

  it("0.1.0's init() is refused on a schema that refuses its writers, naming both releases; admitted in compatibility mode; 0.2.0's passes and the mark is back after it", async () => {
    const rolling = scratch.newSchema();
    const rollingInstance = await instance(rolling, "0.1.0");
    await initAs(rolling, false); // compatibility mode: 0.1.0 starts

    const strict = scratch.newSchema();
    await instance(strict);
    const e = await refused(initAs(strict, false));
    expect(e.message).toBe(`cannot change name of input parameter "refused: mneme 0.1.0 misreads this store of mneme ${STORE_RELEASE}"`);
    expect(Buffer.byteLength(OLD_START_MARKER)).toBeLessThanOrEqual(63); // Postgres' identifier limit
    // 0.2.0 reads the format record first (the view), in the same transaction: it passes, and the mark is back at its commit.
    await initAs(strict, true);
    await initAs(strict, true);
    expect((await refused(initAs(strict, false))).message).toContain("refused: mneme 0.1.0 misreads this store");
    // A read outside an init (any transaction that only reads) changes nothing either.
    await scratch.pool.query(`SELECT * FROM "${strict}".mneme_store_format`);
    expect((await refused(initAs(strict, false))).message).toContain("refused: mneme 0.1.0 misreads this store");
    // 0.1.0's calls of its signature are still answered with the refusal of its writes.
    expect((await refused(appendAs010(strict, "note-1", "tenant-1", { owner: "o", text: "t" }))).code).toBe("MN001");

    // The finish step marks a schema that was in compatibility mode.
    await rollingInstance.finishRollingUpgrade({ settleMs: 0 });
    expect((await refused(initAs(rolling, false))).message).toContain("refused: mneme 0.1.0 misreads this store");
  }, 60_000);
});
