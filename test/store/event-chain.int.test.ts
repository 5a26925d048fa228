/**
 * The hash chain of stored events on memory, SQLite and Postgres: appends
 * (one by one, batches, group commit) keep a chain that verifies; a changed
 * payload byte, request context, position or order of rows makes verify fail
 * at the first position affected; the personal-data sealing re-chains; a
 * store without hashes (made before the chain) gets its chain when opened.
 */
import Database from "better-sqlite3";
import { describe, expect, it } from "vitest";
import type { NewEvent } from "mneme";
import { MemoryEventRepository } from "mneme/memory";
import { PostgresEventRepository } from "mneme/postgres";
import { SqliteEventRepository } from "mneme/sqlite";
import { type ChainedEvents, chainHash, GENESIS_HASH, verifyEventChain } from "mneme/store";
import { fileURLToPath } from "node:url";
import { verifyStore } from "mneme/store-copy";
import { DATABASE_URL, postgresScratch } from "../support/postgres-scratch.js";
import { runProcess } from "../support/run-process.js";
import { sqliteScratch } from "../support/sqlite-scratch.js";

const files = sqliteScratch("event-chain");
const pg = postgresScratch("chain");
const cwd = fileURLToPath(new URL("../..", import.meta.url));
const cli = fileURLToPath(new URL("../../src/cli/main.ts", import.meta.url));
const mneme = (args: string[]) => runProcess(process.execPath, ["--import", "tsx", cli, ...args], cwd);
const pgUrl = (schema: string): string => {
  const u = new URL(DATABASE_URL);
  u.searchParams.set("schema", schema);
  return u.toString();
};

function ev(i: number, extra: Partial<NewEvent> = {}): NewEvent {
  return {
    aggregateUuid: `agg-${i % 3}`,
    domain: "shop",
    name: "Ordered",
    tenantUuid: "t1",
    payload: { n: i, text: `ärger ${i}`, nested: { z: 1, a: [i, "x"] } },
    reqCtx: { senderAccountUuid: "u1" },
    ...extra,
  };
}

/** 10 events: 4 single appends, a batch of 3, 3 concurrent appends (group commit on Postgres). */
async function fill(repo: { append(events: readonly NewEvent[]): Promise<unknown> }): Promise<void> {
  for (let i = 1; i <= 4; i++) await repo.append([ev(i)]);
  await repo.append([ev(5), ev(6, { commandUuid: "c-6" }), ev(7, { payload: null })]);
  await Promise.all([8, 9, 10].map((i) => repo.append([ev(i, { aggregateUuid: `other-${i}` })])));
}

async function failsAt(repo: ChainedEvents, position: number): Promise<void> {
  const result = await verifyEventChain(repo, { batchSize: 3 });
  expect(result.ok).toBe(false);
  if (!result.ok) expect(result.position).toBe(position);
}

describe("memory", () => {
  it("keeps a chain that verifies, and re-chains after sealing", async () => {
    const repo = new MemoryEventRepository();
    await fill(repo);
    const result = await verifyEventChain(repo, { batchSize: 4 });
    expect(result).toMatchObject({ ok: true, checked: 10, head: await repo.chainHead() });
    const [first] = await repo.loadAggregate("agg-1");
    const sealed = await repo.sealStoredPayloads([
      { id: first!.eventUuid, stored: first!.payload, sealed: { ...(first!.payload as object), text: { $enc: "v1:k:iv:ct" } } },
    ]);
    expect(sealed).toBe(1);
    const after = await verifyEventChain(repo);
    expect(after.ok).toBe(true);
    if (after.ok && result.ok) expect(after.head.hash).not.toBe(result.head.hash);
  });
});

describe("sqlite", () => {
  async function filled(): Promise<{ repo: SqliteEventRepository; file: string }> {
    const file = files.newFile();
    const repo = new SqliteEventRepository({ filename: file });
    await repo.init();
    await fill(repo);
    return { repo, file };
  }
  const tamper = (file: string, sql: string) => {
    const db = new Database(file);
    db.exec(sql);
    db.close();
  };

  it("keeps a chain that verifies from the first event, whose hash follows the genesis", async () => {
    const { repo } = await filled();
    const result = await verifyEventChain(repo, { batchSize: 4 });
    expect(result).toMatchObject({ ok: true, checked: 10, complete: true });
    expect(await repo.chainHead()).toEqual(result.ok ? result.head : undefined);
    let firstRow;
    for await (const page of repo.readChain({ batchSize: 1 })) {
      firstRow = page[0];
      break;
    }
    expect(firstRow!.hash).toBe(chainHash(GENESIS_HASH, firstRow!));
    await repo.close();
  });

  it("fails at the event whose payload byte changed", async () => {
    const { repo, file } = await filled();
    tamper(file, `UPDATE mneme_events SET payload = replace(payload, '"n":5', '"n":6') WHERE position = 5`);
    await failsAt(repo, 5);
    await repo.close();
  });

  it("fails at the event whose request context changed", async () => {
    const { repo, file } = await filled();
    tamper(file, `UPDATE mneme_events SET req_ctx = '{"senderAccountUuid":"u2"}' WHERE position = 7`);
    await failsAt(repo, 7);
    await repo.close();
  });

  it("fails after an event moved to another position", async () => {
    const { repo, file } = await filled();
    tamper(file, `UPDATE mneme_events SET position = 1000 WHERE position = 4`);
    await failsAt(repo, 5);
    await repo.close();
  });

  it("fails at an event whose hash was written by hand, and after a deleted event", async () => {
    const { repo, file } = await filled();
    tamper(file, `UPDATE mneme_events SET hash = '${"a".repeat(64)}' WHERE position = 6`);
    await failsAt(repo, 6);
    tamper(file, `UPDATE mneme_events SET hash = NULL WHERE position = 6`);
    await repo.chainHead(); // chains nothing: the newest event has its hash
    await failsAt(repo, 6);
    await repo.close();
    const other = await filled();
    tamper(other.file, `DELETE FROM mneme_events WHERE position = 9`);
    await failsAt(other.repo, 10);
    await other.repo.close();
  });

  it("fails at the first of two swapped events", async () => {
    const { repo, file } = await filled();
    tamper(
      file,
      `UPDATE mneme_events SET position = -1 WHERE position = 3; UPDATE mneme_events SET position = 3 WHERE position = 4;
                  UPDATE mneme_events SET position = 4 WHERE position = -1`,
    );
    await failsAt(repo, 3);
    await repo.close();
  });

  it("re-chains from the first event the personal-data migration sealed", async () => {
    const { repo } = await filled();
    const [first] = await repo.loadAggregate("agg-2");
    const n = await repo.sealStoredPayloads([
      { id: first!.eventUuid, stored: first!.payload, sealed: { ...(first!.payload as object), text: { $enc: "v1:k:iv:ct" } } },
    ]);
    expect(n).toBe(1);
    expect((await verifyEventChain(repo)).ok).toBe(true);
    await repo.close();
  });

  it("builds the chain of a file whose events have no hash when it opens it, and chains an old writer's appends", async () => {
    const { repo, file } = await filled();
    const head = await repo.chainHead();
    await repo.close();
    tamper(file, "UPDATE mneme_events SET hash = NULL");
    const raw = new Database(file);
    expect(raw.prepare("SELECT count(*) AS n FROM mneme_events WHERE hash IS NULL").get()).toEqual({ n: 10 });
    raw.close();
    const reopened = new SqliteEventRepository({ filename: file });
    await reopened.init();
    expect(await reopened.chainHead()).toEqual(head);
    // An instance of the release before the chain appends beside this one (no hash): the next append chains it.
    tamper(
      file,
      `INSERT INTO mneme_events (position, event_uuid, tenant_uuid, domain, name, aggregate_uuid, version, created_at, req_ctx, payload)
       VALUES (11, 'old-writer', 't1', 'shop', 'Ordered', 'old-agg', 1, 5, '{}', '{"n":11}')`,
    );
    await reopened.append([ev(12)]);
    expect(await verifyEventChain(reopened)).toMatchObject({ ok: true, checked: 12 });
    await reopened.close();
  });
});

describe("postgres", () => {
  async function filled(): Promise<{ repo: PostgresEventRepository; schema: string }> {
    const schema = pg.newSchema();
    const repo = new PostgresEventRepository({ pool: pg.pool, schema });
    await repo.init();
    await fill(repo);
    return { repo, schema };
  }

  it("keeps a chain that verifies over single, batch and group-committed appends", async () => {
    const { repo } = await filled();
    const result = await verifyEventChain(repo, { batchSize: 4 });
    expect(result).toMatchObject({ ok: true, checked: 10, complete: true });
    expect(await repo.chainHead()).toEqual(result.ok ? result.head : undefined);
    await repo.close();
  });

  it("fails at the changed payload, request context, moved or swapped event", async () => {
    const cases: [string, number][] = [
      [`UPDATE $S.events SET payload = jsonb_set(payload, '{n}', '6') WHERE position = 5`, 5],
      [`UPDATE $S.events SET req_ctx = '{"senderAccountUuid":"u2"}' WHERE position = 7`, 7],
      [`UPDATE $S.events SET position = 1000 WHERE position = 4`, 5],
      [
        `UPDATE $S.events SET position = -1 WHERE position = 3; UPDATE $S.events SET position = 3 WHERE position = 4;
         UPDATE $S.events SET position = 4 WHERE position = -1`,
        3,
      ],
    ];
    for (const [sql, at] of cases) {
      const { repo, schema } = await filled();
      await pg.pool.query(sql.replaceAll("$S", `"${schema}"`));
      await failsAt(repo, at);
      await repo.close();
    }
  });

  it("re-chains after sealing, and builds the chain of a schema whose events have no hash at init", async () => {
    const { repo, schema } = await filled();
    const [first] = await repo.loadAggregate("agg-2");
    const n = await repo.sealStoredPayloads([
      { id: first!.eventUuid, stored: first!.payload, sealed: { ...(first!.payload as object), text: { $enc: "v1:k:iv:ct" } } },
    ]);
    expect(n).toBe(1);
    expect((await verifyEventChain(repo)).ok).toBe(true);
    const head = await repo.chainHead();
    await repo.close();
    await pg.pool.query(`UPDATE "${schema}".events SET hash = NULL`);
    const reopened = new PostgresEventRepository({ pool: pg.pool, schema });
    await reopened.init();
    expect(await reopened.chainHead()).toEqual(head);
    expect(await verifyEventChain(reopened)).toMatchObject({ ok: true, checked: 10 });
    await reopened.close();
  });

  it("computes in SQL what the TypeScript definition computes (escapes, non-ASCII text, a null payload, a command uuid)", async () => {
    const { repo } = await filled();
    const odd = 'agg "q" \\ \u0001\t\u007f\u2028 é 😀 /';
    await repo.append([
      ev(11, { aggregateUuid: odd, tenantUuid: `t ${odd}`, commandUuid: `c ${odd}`, payload: { [odd]: odd, list: [odd, 1.5, -0, 1e21] } }),
    ]);
    for await (const page of repo.readChain()) for (const row of page) expect(row.hash).toMatch(/^[0-9a-f]{64}$/);
    // The SQL function and the TypeScript definition agree on every row (non-ASCII text, nulls, nesting).
    expect((await verifyEventChain(repo)).ok).toBe(true);
    await repo.close();
  });
});

describe("mneme store verify", () => {
  it("exits 0 on a sound SQLite file and 1 naming the first broken position once a byte changed", async () => {
    const file = files.newFile();
    const repo = new SqliteEventRepository({ filename: file });
    await repo.init();
    await fill(repo);
    const head = await repo.chainHead();
    await repo.close();
    const sound = await mneme(["store", "verify", "--store", file, "--batch-size", "3"]);
    expect(sound.code, sound.stderr).toBe(0);
    expect(sound.stdout).toContain(`head position 10 hash ${head.hash}`);
    const db = new Database(file);
    db.exec(`UPDATE mneme_events SET payload = replace(payload, 'ärger 8', 'ärger 9') WHERE position = 8`);
    db.close();
    const broken = await mneme(["store", "verify", "--store", file]);
    expect(broken.code).toBe(1);
    expect(broken.stdout).toContain("BROKEN at position 8");
    expect(broken.stdout).toContain("up to position 7");
  });

  it("reads a Postgres schema named by ?schema=, and the library says the same", async () => {
    const schema = pg.newSchema();
    const repo = new PostgresEventRepository({ pool: pg.pool, schema });
    await repo.init();
    await fill(repo);
    await repo.close();
    expect(await verifyStore(pgUrl(schema))).toMatchObject({ ok: true, checked: 10 });
    await pg.pool.query(`UPDATE "${schema}".events SET tenant_uuid = 't2' WHERE position = 2`);
    const broken = await mneme(["store", "verify", "--store", pgUrl(schema)]);
    expect(broken.code).toBe(1);
    expect(broken.stdout).toContain("BROKEN at position 2");
    expect(await verifyStore(pgUrl(schema))).toMatchObject({ ok: false, position: 2, lastGoodPosition: 1 });
    const nothing = await verifyStore(pgUrl(pg.newSchema())).catch((e: unknown) => e);
    expect((nothing as { code?: string }).code).toBe("NOT_FOUND");
    const usage = await mneme(["store", "verify"]);
    expect(usage.code).toBe(2);
    expect(usage.stderr).toContain("missing --store");
  });
});
