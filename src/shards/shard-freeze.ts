/**
 * The write fence of a tenant move, kept in each shard's own schema: a table
 * of frozen tenants and a trigger on the events table that refuses any event
 * of a frozen tenant outside the domains the move left in place (the home
 * domains: a tenant moved off the home shard still writes its accounts,
 * groups and other home-domain events there). The router's placement cache
 * tells callers to wait; the trigger is what makes the pause hold for every
 * process, whatever its cache says, because it runs inside the append's own
 * transaction.
 */
import type pg from "pg";
import { mapPgError } from "../postgres/postgres-errors.js";
import { type CheckedOutClient, withClient } from "../postgres/postgres-pool.js";
import { advisoryKey, quoteIdent } from "../postgres/postgres-schema.js";

/** SQLSTATE of an event refused because its tenant is frozen for a move (a MnemeError STORE_ERROR's cause). */
export const SQLSTATE_TENANT_FROZEN = "MN503";

/** Words of the trigger's refusal; command records of commands it refused say them (see tenant-copy's NOT_REFUSED_BY_FREEZE). */
export const FROZEN_WORDS = "is being moved to another shard";

/**
 * The shard's frozen-tenant table, the trigger function that refuses an
 * event, and the function that fits the trigger to the table: while no tenant
 * is frozen there is no trigger; otherwise its `WHEN` lists the frozen
 * tenants with the domains each keeps (one test per set of kept domains), so
 * an append of any other tenant pays array tests in the executor, not a
 * function call (the check runs under the append lock, where every
 * microsecond is paid by every command of the shard).
 */
export async function installFreeze(pool: pg.Pool, schema: string): Promise<void> {
  const s = quoteIdent(schema);
  await inLockedTransaction(pool, schema, async (client) => {
    await client.query(`CREATE TABLE IF NOT EXISTS ${s}.shard_frozen_tenants (tenant_uuid text PRIMARY KEY, frozen_at bigint NOT NULL)`);
    // The domains whose events of the tenant the shard still takes (empty in rows of releases before it: all refused).
    await client.query(`ALTER TABLE ${s}.shard_frozen_tenants ADD COLUMN IF NOT EXISTS kept_domains text[] NOT NULL DEFAULT '{}'`);
    await client.query(
      `CREATE OR REPLACE FUNCTION ${s}.mneme_refuse_frozen_tenant() RETURNS trigger LANGUAGE plpgsql AS $fn$
       BEGIN
         RAISE EXCEPTION 'tenant % ${FROZEN_WORDS}: its writes are paused', NEW.tenant_uuid USING ERRCODE = '${SQLSTATE_TENANT_FROZEN}';
       END $fn$`,
    );
    await client.query(
      `CREATE OR REPLACE FUNCTION ${s}.mneme_fit_frozen_trigger() RETURNS void LANGUAGE plpgsql AS $fn$
       DECLARE w text;
       BEGIN
         SELECT string_agg(format('(NEW.tenant_uuid = ANY (%L::text[]) AND NOT (NEW.domain = ANY (%L::text[])))', tenants, kept_domains), ' OR ')
           INTO w FROM (SELECT kept_domains, array_agg(tenant_uuid ORDER BY tenant_uuid) AS tenants
                          FROM ${s}.shard_frozen_tenants GROUP BY kept_domains ORDER BY kept_domains) AS g;
         IF w IS NULL THEN
           DROP TRIGGER IF EXISTS mneme_refuse_frozen_tenant ON ${s}.events;
         ELSE
           EXECUTE format('CREATE OR REPLACE TRIGGER mneme_refuse_frozen_tenant BEFORE INSERT ON ${s}.events FOR EACH ROW '
             'WHEN (%s) EXECUTE FUNCTION ${s}.mneme_refuse_frozen_tenant()', w);
         END IF;
       END $fn$`,
    );
    await client.query(`SELECT ${s}.mneme_fit_frozen_trigger()`);
  });
}

/**
 * Runs `fn` in a transaction that holds the advisory lock `lock` of the schema
 * (`mneme:shard-freeze`: installs, freezes and unfreezes of all instances in
 * turn). A driver error is thrown as the MnemeError of mapPgError (a lost
 * connection UNAVAILABLE, its client destroyed).
 */
async function inLockedTransaction(
  pool: pg.Pool,
  schema: string,
  fn: (client: CheckedOutClient) => Promise<void>,
  lock = "mneme:shard-freeze",
): Promise<void> {
  const what = `shard ${schema}: write fence`;
  try {
    await withClient(pool, "transaction", undefined, what, async (client) => {
      await client.query("BEGIN");
      try {
        await client.query("SELECT pg_advisory_xact_lock($1::bigint)", [advisoryKey(lock, schema)]);
        await fn(client);
        await client.query("COMMIT");
      } catch (e) {
        await client.query("ROLLBACK").catch(() => undefined);
        throw e;
      }
    });
  } catch (e) {
    throw mapPgError(e, what);
  }
}

/**
 * Freezes a tenant in a shard, except for its events of `keptDomains` (the
 * home domains, which the move leaves where they are), and waits out every
 * append that passed the trigger before the freeze committed: the trigger's
 * replacement takes a lock on the events table that waits for the inserts in
 * flight, and the append lock of the schema is taken once after the commit
 * (every append holds it from its checks to its commit). When this resolves,
 * no further event of the tenant outside `keptDomains` can commit here.
 */
export async function freezeTenant(pool: pg.Pool, schema: string, tenantUuid: string, keptDomains: readonly string[]): Promise<void> {
  const s = quoteIdent(schema);
  const kept = [...new Set(keptDomains)].sort();
  await inLockedTransaction(pool, schema, async (client) => {
    const res = await client.query(
      `INSERT INTO ${s}.shard_frozen_tenants (tenant_uuid, frozen_at, kept_domains) VALUES ($1, $2, $3)
       ON CONFLICT (tenant_uuid) DO UPDATE SET kept_domains = EXCLUDED.kept_domains
       WHERE shard_frozen_tenants.kept_domains IS DISTINCT FROM EXCLUDED.kept_domains`,
      [tenantUuid, Date.now(), kept],
    );
    if (res.rowCount !== 0) await client.query(`SELECT ${s}.mneme_fit_frozen_trigger()`);
  });
  // Every append holds the schema's append lock from its checks to its commit: taking it once waits them out.
  await inLockedTransaction(pool, schema, () => Promise.resolve(), "mneme:events");
}

/** Lets the tenant's events in again (a move that failed its verification, or a tenant moving back). */
export async function unfreezeTenant(pool: pg.Pool, schema: string, tenantUuid: string): Promise<void> {
  const s = quoteIdent(schema);
  await inLockedTransaction(pool, schema, async (client) => {
    const res = await client.query(`DELETE FROM ${s}.shard_frozen_tenants WHERE tenant_uuid = $1`, [tenantUuid]);
    if (res.rowCount !== 0) await client.query(`SELECT ${s}.mneme_fit_frozen_trigger()`);
  });
}

/**
 * Lets the home domains in again for tenants frozen by a release that froze
 * every domain (their rows keep none): run at each start, with the app's home
 * domains, so a tenant moved off the home shard writes its home domains there.
 */
export async function keepHomeDomains(pool: pg.Pool, schema: string, homeDomains: readonly string[]): Promise<void> {
  if (homeDomains.length === 0) return;
  const s = quoteIdent(schema);
  await inLockedTransaction(pool, schema, async (client) => {
    const res = await client.query(`UPDATE ${s}.shard_frozen_tenants SET kept_domains = $1 WHERE kept_domains = '{}'`, [
      [...new Set(homeDomains)].sort(),
    ]);
    if (res.rowCount !== 0) await client.query(`SELECT ${s}.mneme_fit_frozen_trigger()`);
  });
}

/** True when `e` (or a cause of it) is the refusal of an event of a frozen tenant. */
export function isTenantFrozenError(e: unknown): boolean {
  for (let c: unknown = e, i = 0; c !== undefined && c !== null && i < 5; c = (c as { cause?: unknown }).cause, i++) {
    if ((c as { code?: unknown }).code === SQLSTATE_TENANT_FROZEN) return true;
  }
  return false;
}
