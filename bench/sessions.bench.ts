/**
 * Credential resolution on the request path: `resolveCredentials` of
 * mneme/defaults (the session read from its committed events, then the
 * account, identity and tenant documents, the key's HMAC compared in constant
 * time) on a Postgres backend, sequentially, against raw pg doing the same
 * reads in the same run: one indexed read of the session's events newer than
 * a version the caller holds, the account and identity documents by key
 * together, then the tenant's, and one HMAC-SHA256 of the key. Both run on a
 * warm pool of their own; schemas of their own, dropped at the end
 * (DATABASE_URL, default postgres://postgres@127.0.0.1:5432/test).
 */
import { createHmac, timingSafeEqual } from "node:crypto";
import pg from "pg";
import { createFacade, newUuid } from "../src/index.js";
import { Login, registerDefaults, resolveCredentials } from "../src/defaults/index.js";
import { createPostgresBackends } from "../src/postgres/postgres-backends.js";
import type { Bench } from "./harness.js";

const DATABASE_URL = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test";
const EMAIL = "bench-admin@example.org";
const PASSWORD = "a long bench password";

export default async function sessionsBench(b: Bench): Promise<void> {
  const n = b.quick ? 300 : 3000;
  const tag = newUuid().replaceAll("-", "").slice(0, 12);
  const schema = `mneme_bench_sessions_${tag}`;
  const rawSchema = `mneme_bench_sessions_raw_${tag}`;
  const admin = new pg.Pool({ connectionString: DATABASE_URL, max: 1 });
  const backends = createPostgresBackends({ connectionString: DATABASE_URL, schema });
  const facade = createFacade({ appName: "bench-sessions", ...backends });
  const raw = new pg.Pool({ connectionString: DATABASE_URL, max: 10 });
  try {
    await registerDefaults(facade, {
      admin: { email: EMAIL, password: PASSWORD },
      passwordHashing: { N: 1024, r: 8, p: 1 },
      sessionSecret: "a bench session secret",
    });
    await facade.start();
    const login = (await facade.dispatch(Login, { email: EMAIL, password: PASSWORD })).result as {
      token: string;
      sessionUuid: string;
      identities: { identityUuid: string }[];
    };
    const [sessionUuid, sessionKey] = [login.sessionUuid, login.token.slice(login.token.indexOf(".") + 1)];
    const creds = { sessionUuid, sessionKey, identityUuid: login.identities[0]!.identityUuid };
    const first = await resolveCredentials(facade, creds);
    if (first?.senderTenantUuid === undefined) throw new Error("bench: the admin's session did not resolve to a tenant");

    // The raw baseline's own tables, with the rows its reads find.
    await raw.query(`CREATE SCHEMA ${rawSchema}`);
    await raw.query(
      `CREATE TABLE ${rawSchema}.events (position bigserial PRIMARY KEY, aggregate_uuid text NOT NULL, version integer NOT NULL, payload jsonb NOT NULL, UNIQUE (aggregate_uuid, version))`,
    );
    await raw.query(`CREATE TABLE ${rawSchema}.documents (collection text, key text, doc jsonb NOT NULL, PRIMARY KEY (collection, key))`);
    await raw.query(`INSERT INTO ${rawSchema}.events (aggregate_uuid, version, payload) VALUES ($1, 1, '{"keyHash":"x"}')`, [sessionUuid]);
    for (const [c, k] of [
      ["account", "a"],
      ["identity", "i"],
      ["tenant", "t"],
    ])
      await raw.query(`INSERT INTO ${rawSchema}.documents VALUES ($1, $2, '{"removed":false,"accountUuid":"a","tenantUuid":"t"}')`, [c, k]);
    const stored = createHmac("sha256", "a bench session secret").update(sessionKey).digest("hex");
    const rawResolve = async (): Promise<void> => {
      const a = Buffer.from(createHmac("sha256", "a bench session secret").update(sessionKey).digest("hex"));
      if (!timingSafeEqual(a, Buffer.from(stored))) throw new Error("bench: raw key mismatch");
      await raw.query(`SELECT version, payload FROM ${rawSchema}.events WHERE aggregate_uuid = $1 AND version > $2 ORDER BY version`, [
        sessionUuid,
        1,
      ]);
      const doc = `SELECT doc FROM ${rawSchema}.documents WHERE collection = $1 AND key = $2`;
      await Promise.all([raw.query(doc, ["account", "a"]), raw.query(doc, ["identity", "i"])]);
      await raw.query(doc, ["tenant", "t"]);
    };

    // Warm both, then interleave rounds so that the machine's load falls on both alike.
    for (let i = 0; i < 100; i++) {
      await resolveCredentials(facade, creds);
      await rawResolve();
    }
    const rounds = 5;
    let mnemeSeconds = 0;
    let rawSeconds = 0;
    for (let r = 0; r < rounds; r++) {
      let t0 = performance.now();
      for (let i = 0; i < n / rounds; i++) if ((await resolveCredentials(facade, creds)) === undefined) throw new Error("bench: refused");
      mnemeSeconds += (performance.now() - t0) / 1000;
      t0 = performance.now();
      for (let i = 0; i < n / rounds; i++) await rawResolve();
      rawSeconds += (performance.now() - t0) / 1000;
    }
    const base = b.record("sessions", "raw pg: session events + 3 documents + HMAC", n, rawSeconds, "resolutions/s");
    const row = b.record("sessions", "resolveCredentials (postgres, sequential)", n, mnemeSeconds, "resolutions/s");
    b.compare(row, base);
  } finally {
    await facade.stop().catch(() => undefined);
    await raw.query(`DROP SCHEMA IF EXISTS ${rawSchema} CASCADE`).catch(() => undefined);
    await raw.end();
    await admin.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`).catch(() => undefined);
    await admin.end();
  }
}
