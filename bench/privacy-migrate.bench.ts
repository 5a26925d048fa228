/**
 * The personal-data migration (docs/upgrading.md): N events (100,000;
 * BENCH_QUICK=1: 20,000) over 1,000 subjects written while their type
 * declared nothing, on a SQLite file, then sealed in place by
 * `facade.migratePersonalData()` (pages of 500: read, two fields sealed per
 * event with AES-256-GCM, keys made on first use, one rewrite transaction and
 * one progress mark per page), against the raw driver doing the same work on
 * a copy of the same file in the same run: better-sqlite3 reading pages of
 * 500 rows, JSON.parse, the same two fields sealed under a key per subject
 * kept in a Map, UPDATE of each payload in one transaction per page. Also the
 * start of a facade whose start-up check reads the same events (no writes;
 * the start's own work included) against the raw read. The check warns
 * (MNEME_PERSONAL_DATA_CLEAR) once, as it should.
 */
import { createCipheriv, randomBytes } from "node:crypto";
import { copyFileSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { createFacade } from "../src/app/facade.js";
import { defineDomain } from "../src/model/domain.js";
import type { NewEvent } from "../src/model/types.js";
import { createSqliteBackends } from "../src/sqlite/sqlite-backends.js";
import { BENCH_REQ_CTX as reqCtx, BENCH_TENANT as TENANT, type Bench } from "./harness.js";

interface Paid {
  customerUuid: string;
  name: string;
  email: string;
  amount: number;
}

function shop(declared: boolean) {
  const D = defineDomain("Shop");
  D.event<Paid>("Paid", declared ? { personalData: { subject: (p) => p.customerUuid, fields: ["name", "email"] } } : {});
  return D;
}

const customerUuid = (i: number): string => `0190a7a2-0000-7000-8100-${String(i).padStart(12, "0")}`;

/** The raw driver's seal: what field-envelope.ts does, inline. */
function seal(value: unknown, keyId: string, key: Buffer): { $enc: string } {
  const iv = randomBytes(12);
  const c = createCipheriv("aes-256-gcm", key, iv);
  c.setAAD(Buffer.from("mneme:personal-data:v1"));
  const body = Buffer.concat([c.update(JSON.stringify(value), "utf8"), c.final(), c.getAuthTag()]);
  return { $enc: `v1:${keyId}:${iv.toString("base64url")}:${body.toString("base64url")}` };
}

export default async function privacyMigrateBench(b: Bench): Promise<void> {
  const events = b.quick ? 20_000 : 100_000;
  const customers = 1_000;
  const dir = mkdtempSync(join(tmpdir(), "mneme-bench-privacy-migrate-"));
  const source = join(dir, "source.db");
  try {
    const writer = createFacade({ appName: "bench-privacy-migrate", ...createSqliteBackends({ filename: source }) }).registerDomain(
      shop(false),
    );
    await writer.start();
    for (let i = 0; i < events; i += 1_000) {
      const batch: NewEvent[] = [];
      for (let j = i; j < i + 1_000; j++) {
        const c = customerUuid(j % customers);
        batch.push({
          domain: "Shop",
          name: "Paid",
          aggregateUuid: c,
          payload: { customerUuid: c, name: `Customer Number${j % customers}`, email: `customer${j % customers}@example.org`, amount: 1 },
          tenantUuid: TENANT,
          reqCtx,
        });
      }
      await writer.eventRepository.append(batch);
    }
    await writer.stop();
    const mnemeFile = join(dir, "mneme.db");
    const rawFile = join(dir, "raw.db");
    copyFileSync(source, mnemeFile);
    copyFileSync(source, rawFile);

    // mneme: the start-up check (bounded at all events here), then the migration.
    const f = createFacade({
      appName: "bench-privacy-migrate",
      ...createSqliteBackends({ filename: mnemeFile }),
      personalData: { startupCheckLimit: events },
    }).registerDomain(shop(true));
    const t0 = performance.now();
    await f.start();
    const checkSeconds = (performance.now() - t0) / 1000;
    if (f.clearPersonalData?.events !== events) throw new Error(`the check found ${f.clearPersonalData?.events}`);
    const t1 = performance.now();
    const report = await f.migratePersonalData({ batchSize: 500 });
    const migrateSeconds = (performance.now() - t1) / 1000;
    if (report.sealedEvents !== events) throw new Error(`migrated ${report.sealedEvents}`);
    await f.stop();

    // The raw driver: the same read, the same seals, the same rewrite.
    const db = new Database(rawFile);
    // One prepared statement for every page of both raw loops, as the store prepares its reads once.
    const page = db.prepare(
      "SELECT position, payload FROM mneme_events WHERE domain = 'Shop' AND name = 'Paid' AND position > ? ORDER BY position LIMIT 500",
    );
    const r0 = performance.now();
    let n = 0;
    for (let after = 0; ;) {
      const rows = page.all(after) as { position: number; payload: string }[];
      if (rows.length === 0) break;
      for (const r of rows) if ((JSON.parse(r.payload) as Paid).email === "") throw new Error("empty");
      n += rows.length;
      after = rows[rows.length - 1]!.position;
    }
    const rawReadSeconds = (performance.now() - r0) / 1000;
    if (n !== events) throw new Error(`raw read ${n}`);
    const keys = new Map<string, { id: string; key: Buffer }>();
    const update = db.prepare("UPDATE mneme_events SET payload = ? WHERE position = ?");
    const r1 = performance.now();
    for (let after = 0; ;) {
      const rows = page.all(after) as { position: number; payload: string }[];
      if (rows.length === 0) break;
      db.transaction(() => {
        for (const r of rows) {
          const p = JSON.parse(r.payload) as Paid;
          if (typeof p.email !== "string") continue;
          let k = keys.get(p.customerUuid);
          if (k === undefined) keys.set(p.customerUuid, (k = { id: crypto.randomUUID(), key: randomBytes(32) }));
          update.run(JSON.stringify({ ...p, name: seal(p.name, k.id, k.key), email: seal(p.email, k.id, k.key) }), r.position);
        }
      })();
      after = rows[rows.length - 1]!.position;
    }
    const rawMigrateSeconds = (performance.now() - r1) / 1000;
    db.close();

    const rawMigrate = b.record(
      "privacy-migrate",
      `sqlite raw: read, seal 2 fields, update (${events} events)`,
      events,
      rawMigrateSeconds,
      "events/s",
    );
    const migrate = b.record("privacy-migrate", `sqlite: migratePersonalData (${events} events)`, events, migrateSeconds, "events/s");
    b.compare(migrate, rawMigrate);
    const rawRead = b.record("privacy-migrate", `sqlite raw: read the events (${events})`, events, rawReadSeconds, "events/s");
    const check = b.record(
      "privacy-migrate",
      `sqlite: start with the start-up check over ${events} events`,
      events,
      checkSeconds,
      "events/s",
    );
    b.compare(check, rawRead);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
